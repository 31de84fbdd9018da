package sqlite

import (
	"context"
	"database/sql"

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
