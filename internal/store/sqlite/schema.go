package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

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
// (store.ErrSchemaTooNew, with both versions).
func checkSchema(ctx context.Context, prov *goose.Provider) error {
	v, err := prov.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return store.CheckSchemaVersion("SQLite", v, knownVersion(prov))
}

// SchemaStatus reports the migration state of the database file at path
// without migrating it (herald migrate status). The file must exist.
func SchemaStatus(ctx context.Context, path string) (store.SchemaStatus, error) {
	st := store.SchemaStatus{Driver: "sqlite"}
	if _, err := os.Stat(path); err != nil {
		return st, fmt.Errorf("sqlite: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return st, err
	}
	defer db.Close()
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return st, err
	}
	return status(ctx, prov, st)
}

func status(ctx context.Context, prov *goose.Provider, st store.SchemaStatus) (store.SchemaStatus, error) {
	st.Binary = knownVersion(prov)
	v, err := prov.GetDBVersion(ctx)
	if err != nil {
		return st, err
	}
	st.Database = v
	ms, err := prov.Status(ctx)
	if err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		return st, err
	}
	st.Pending = []int64{}
	for _, m := range ms {
		if m.State == goose.StatePending {
			st.Pending = append(st.Pending, m.Source.Version)
		}
	}
	return st, nil
}
