package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
)

// Statements whose query plans the tests check.
var (
	InsertAttemptsValuesSQL = insertAttemptsValuesSQL
	CompleteValuesSQL       = completeValuesSQL
)

// MigrateTo applies the embedded migrations up to version (a database as
// an earlier release left it).
func MigrateTo(ctx context.Context, db *sql.DB, version int64) error {
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return err
	}
	_, err = prov.UpTo(ctx, version)
	return err
}

// LimitPages caps the database at its current size on the writer
// connection (PRAGMA max_page_count): the next write that needs a new page
// fails with SQLITE_FULL, as on a full disk.
func LimitPages(ctx context.Context, s *Store) error {
	var n int
	if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&n); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", n))
	return err
}
