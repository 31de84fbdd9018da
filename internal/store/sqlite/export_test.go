package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/pressly/goose/v3"
)

// Statements whose query plans the tests check.
var (
	InsertAttemptsValuesSQL = insertAttemptsValuesSQL
	CompleteValuesSQL       = completeValuesSQL
	ListDeliveriesQuery     = listDeliveriesQuery
	DeliveryStateCountsSQL  = deliveryStateCountsSQL
	CatalogRevisionSQL      = catalogRevisionSQL
	CaseVariantSQL          = caseVariantSQL
	// SkippingEndpoints maps each claim query to its variant for a claim
	// with endpoints to skip.
	SkippingEndpoints = skippingEndpoints
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

// MigrateExcept applies every embedded migration but the versions in skip
// (a database written by a build that did not have them).
func MigrateExcept(ctx context.Context, db *sql.DB, skip ...int64) error {
	sub := mustSub(migrations, "migrations")
	entries, err := fs.ReadDir(sub, ".")
	if err != nil {
		return err
	}
	keep := fstest.MapFS{}
	for _, e := range entries {
		v, err := strconv.ParseInt(strings.SplitN(e.Name(), "_", 2)[0], 10, 64)
		if err != nil || slices.Contains(skip, v) {
			continue
		}
		b, err := fs.ReadFile(sub, e.Name())
		if err != nil {
			return err
		}
		keep[e.Name()] = &fstest.MapFile{Data: b}
	}
	prov, err := goose.NewProvider(goose.DialectSQLite3, db, keep, goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return err
	}
	_, err = prov.Up(ctx)
	return err
}

// TxPrepares is how many statements s prepared for a single transaction
// (not hot statements) since Open.
func TxPrepares(s *Store) int64 { return s.txPrepares.Load() }

// ClaimSteps is how many index rows the queue's walks of s (claims,
// NextDueAt) have read since Open.
func ClaimSteps(s *Store) int64 { return s.claimSteps.Load() }

// DropLease forgets the in-memory lease of delivery id (as a rescue of an
// expired lease does).
func DropLease(s *Store, id string) { s.leases.drop([]string{id}) }

// waitBackground waits for the store's background work (holdRestAfter).
func (s *Store) waitBackground() { s.bg.Wait() }
