package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
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

// checkNotForeign refuses an existing SQLite database that has tables but
// not goose's version table (which goose creates before Herald's first
// migration, so every Herald database has it): another application's
// database, which Open would otherwise migrate Herald's tables into. It
// reads the file read-only and immutable (SQLite's immutable=1: no lock,
// no -wal or -shm file created), so a refusal changes nothing; a file it
// cannot read is left to Open to report. Tables that exist only in an
// unmerged -wal are not seen: such a database is let through, as before.
func checkNotForeign(ctx context.Context, path string) error {
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&immutable=1")
	if err != nil {
		return nil
	}
	defer db.Close()
	var goose, other int
	if err := db.QueryRowContext(ctx, `SELECT
		coalesce(sum(name = 'goose_db_version'), 0),
		coalesce(sum(name <> 'goose_db_version'), 0)
		FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`).Scan(&goose, &other); err != nil {
		return nil
	}
	if goose == 0 && other > 0 {
		return fmt.Errorf("sqlite: %s is a SQLite database but not a Herald one (it has tables, but no goose_db_version table): give Herald a database file of its own; nothing was changed", path)
	}
	return nil
}

// SchemaStatus reports the migration state of the database file at path
// without changing it (herald migrate status): the file is opened
// read-only (SQLite's mode=ro) and goose's version table is looked up, not
// created. The file must exist and be a Herald database: an empty file, a
// file that is not SQLite, or a SQLite database with neither goose's
// version table nor Herald's meta table is an error naming the file.
func SchemaStatus(ctx context.Context, path string) (store.SchemaStatus, error) {
	st := store.SchemaStatus{Driver: "sqlite"}
	info, err := os.Stat(path)
	if err != nil {
		return st, fmt.Errorf("sqlite: %w", err)
	}
	if info.IsDir() {
		return st, fmt.Errorf("sqlite: %s is a directory, not a database file", path)
	}
	if info.Size() == 0 {
		return st, fmt.Errorf("sqlite: %s is empty: not a Herald database (herald serve creates and migrates one at start)", path)
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return st, err
	}
	defer db.Close()
	tables := map[string]bool{}
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('goose_db_version', 'meta')")
	if err != nil {
		return st, fmt.Errorf("sqlite: %s is not a readable SQLite database: %w", path, err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return st, err
		}
		tables[name] = true
	}
	if err := rows.Close(); err != nil {
		return st, fmt.Errorf("sqlite: %s is not a readable SQLite database: %w", path, err)
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("sqlite: %s is not a readable SQLite database: %w", path, err)
	}
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return st, err
	}
	if !tables["goose_db_version"] {
		if !tables["meta"] {
			return st, fmt.Errorf("sqlite: %s is a SQLite database but not a Herald one (it has neither goose_db_version nor meta table)", path)
		}
		st.Binary = knownVersion(prov)
		st.Pending = []int64{}
		for _, s := range prov.ListSources() {
			st.Pending = append(st.Pending, s.Version)
		}
		return st, nil
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
