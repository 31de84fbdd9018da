package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/herald-webhooks/herald/internal/store"
)

// knownVersion is the last migration this binary embeds.
func knownVersion(prov *goose.Provider) int64 {
	var v int64
	for _, s := range prov.ListSources() {
		v = max(v, s.Version)
	}
	return v
}

// checkSchema refuses a database migrated past this binary's migrations
// (store.ErrSchemaTooNew, with both versions). Called only when goose's
// version table exists.
func checkSchema(ctx context.Context, prov *goose.Provider) error {
	v, err := prov.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return store.CheckSchemaVersion("PostgreSQL", v, knownVersion(prov))
}

// SchemaStatus reports the migration state of the database at url without
// migrating it (herald migrate status); an unmigrated database is at 0.
func SchemaStatus(ctx context.Context, url string) (store.SchemaStatus, error) {
	st := store.SchemaStatus{Driver: "postgres", Pending: []int64{}}
	cfg, err := parseConfig(url) // accepts (and drops) pool_* settings
	if err != nil {
		return st, fmt.Errorf("postgres: %w", err)
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer db.Close()
	var (
		schema     sql.NullString
		migrated   bool
		searchPath string
	)
	if err := db.QueryRowContext(ctx, "SELECT current_schema(), to_regclass('goose_db_version') IS NOT NULL, current_setting('search_path')").Scan(&schema, &migrated, &searchPath); err != nil {
		return st, wrap("schema status", err)
	}
	if !schema.Valid {
		// What Open (migrate) refuses: serve would apply nothing there.
		return st, fmt.Errorf("postgres: schema status: %w", noSchemaError(searchPath))
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return st, err
	}
	prov, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithLogger(goose.NopLogger()), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return st, err
	}
	st.Binary = knownVersion(prov)
	if !migrated {
		for _, s := range prov.ListSources() {
			st.Pending = append(st.Pending, s.Version)
		}
		return st, nil
	}
	if st.Database, err = prov.GetDBVersion(ctx); err != nil {
		return st, err
	}
	ms, err := prov.Status(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		return st, err
	}
	for _, m := range ms {
		if m.State == goose.StatePending {
			st.Pending = append(st.Pending, m.Source.Version)
		}
	}
	return st, nil
}
