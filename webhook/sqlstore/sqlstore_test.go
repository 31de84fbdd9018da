package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite"

	"github.com/herald-webhooks/herald/webhook"
	"github.com/herald-webhooks/herald/webhook/sqlstore"
	"github.com/herald-webhooks/herald/webhook/storetest"
)

// postgresEnv names the variable holding a PostgreSQL URL for these tests,
// e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Each test
// uses tables of its own and drops them.
const postgresEnv = "HERALD_TEST_POSTGRES_URL"

type backend struct {
	name    string
	dialect sqlstore.Dialect
	open    func(t *testing.T) *sql.DB
}

func backends() []backend {
	return []backend{
		{"sqlite", sqlstore.SQLite, openSQLite},
		{"postgres", sqlstore.Postgres, openPostgres},
	}
}

// openSQLite opens a new database in a temporary file, with WAL and a busy
// timeout so that concurrent writers wait for each other.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// skipUnavailable skips t when the backend's server is not configured, so
// that a suite skips once rather than in each subtest.
func skipUnavailable(t *testing.T, be backend) {
	t.Helper()
	if be.dialect == sqlstore.Postgres && os.Getenv(postgresEnv) == "" {
		t.Skipf("PostgreSQL tests skipped: set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run them", postgresEnv)
	}
}

func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	skipUnavailable(t, backend{dialect: sqlstore.Postgres})
	url := os.Getenv(postgresEnv)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("%s is set but PostgreSQL is not reachable: %v", postgresEnv, err)
	}
	return db
}

// uniqueTable returns a table name no other test uses, and drops the
// table when the test ends.
func uniqueTable(t *testing.T, db *sql.DB, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE IF EXISTS " + name); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return name
}

func newStore(t *testing.T, be backend) (*sqlstore.Store, *storetest.Clock, *sql.DB) {
	t.Helper()
	db := be.open(t)
	s, err := sqlstore.New(db, be.dialect, uniqueTable(t, db, "herald_idem_test_"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock()
	s.Now = clock.Now
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Twice: IF NOT EXISTS.
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, clock, db
}

func newGate(t *testing.T, be backend) (*sqlstore.VersionGate, *sql.DB) {
	t.Helper()
	db := be.open(t)
	g, err := sqlstore.NewVersionGate(db, be.dialect, uniqueTable(t, db, "herald_ver_test_"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g, db
}

func TestStoreConformance(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			skipUnavailable(t, be)
			storetest.TestIdempotencyStore(t, func(t *testing.T) storetest.Harness {
				s, clock, _ := newStore(t, be)
				return storetest.Harness{Store: s, Advance: clock.Advance}
			})
		})
	}
}

func TestVersionGateConformance(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			skipUnavailable(t, be)
			storetest.TestVersionGate(t, func(t *testing.T) webhook.VersionGate {
				g, _ := newGate(t, be)
				return g
			})
		})
	}
}

func TestDeleteExpired(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			skipUnavailable(t, be)
			s, clock, db := newStore(t, be)
			mustClaim := func(key string, lease time.Duration) {
				t.Helper()
				if st, err := s.Claim(ctx, key, lease); err != nil || st != webhook.ClaimAcquired {
					t.Fatalf("Claim(%q) = %v, %v", key, st, err)
				}
			}
			mustClaim("lease_short", time.Minute)
			mustClaim("lease_long", time.Hour)
			mustClaim("done_short", time.Minute)
			if err := s.Complete(ctx, "done_short", 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			mustClaim("done_long", time.Minute)
			if err := s.Complete(ctx, "done_long", 72*time.Hour); err != nil {
				t.Fatal(err)
			}
			if n, err := s.DeleteExpired(ctx); err != nil || n != 0 {
				t.Fatalf("DeleteExpired before anything expired = %d, %v; want 0", n, err)
			}
			clock.Advance(2 * time.Minute) // expires_at <= now: expired
			n, err := s.DeleteExpired(ctx)
			if err != nil || n != 2 {
				t.Fatalf("DeleteExpired = %d, %v; want 2 (lease_short, done_short)", n, err)
			}
			var left int
			if err := db.QueryRow("SELECT COUNT(*) FROM " + s.Table()).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 2 {
				t.Fatalf("%d rows left, want 2", left)
			}
			if st, err := s.Claim(ctx, "done_long", time.Minute); err != nil || st != webhook.ClaimCompleted {
				t.Fatalf("Claim(done_long) = %v, %v; want completed", st, err)
			}
		})
	}
}

// TestCheckTxRollback shows the transactional use of the gate: a rolled
// back transaction leaves the version where it was, so the sender's retry
// of the same event is fresh again.
func TestCheckTxRollback(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			skipUnavailable(t, be)
			g, db := newGate(t, be)
			if fresh, err := g.Check(ctx, "file_1", 1); err != nil || !fresh {
				t.Fatalf("Check(1) = %v, %v", fresh, err)
			}

			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fresh, err := g.CheckTx(ctx, tx, "file_1", 2); err != nil || !fresh {
				t.Fatalf("CheckTx(2) = %v, %v", fresh, err)
			}
			if err := tx.Rollback(); err != nil { // the work failed
				t.Fatal(err)
			}

			tx, err = db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fresh, err := g.CheckTx(ctx, tx, "file_1", 2); err != nil || !fresh {
				t.Fatalf("CheckTx(2) after rollback = %v, %v; want fresh", fresh, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if fresh, err := g.Check(ctx, "file_1", 2); err != nil || fresh {
				t.Fatalf("Check(2) after commit = %v, %v; want stale", fresh, err)
			}
		})
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	db := openSQLite(t)
	for _, table := range []string{"x; DROP TABLE y", "1abc", "a.b", `"q"`, "a-b", "tab le", string(make([]byte, 49))} {
		if _, err := sqlstore.New(db, sqlstore.SQLite, table); err == nil {
			t.Errorf("New(table %q): no error", table)
		}
		if _, err := sqlstore.NewVersionGate(db, sqlstore.SQLite, table); err == nil {
			t.Errorf("NewVersionGate(table %q): no error", table)
		}
	}
	if _, err := sqlstore.New(db, sqlstore.Dialect(0), ""); err == nil {
		t.Error("New with dialect 0: no error")
	}
	if _, err := sqlstore.New(nil, sqlstore.SQLite, ""); err == nil {
		t.Error("New with a nil db: no error")
	}
	s, err := sqlstore.New(db, sqlstore.Postgres, "")
	if err != nil || s.Table() != sqlstore.DefaultTable {
		t.Errorf("New(default table) = %v, %v", s, err)
	}
}

// TestStoreSharedBetweenHandles checks that two Store values on one table
// (as in two processes) see each other's claims.
func TestStoreSharedBetweenHandles(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			skipUnavailable(t, be)
			a, _, db := newStore(t, be)
			b, err := sqlstore.New(db, be.dialect, a.Table())
			if err != nil {
				t.Fatal(err)
			}
			b.Now = a.Now // one clock, as NTP gives two processes
			if st, err := a.Claim(ctx, "evt_1", time.Hour); err != nil || st != webhook.ClaimAcquired {
				t.Fatalf("a.Claim = %v, %v", st, err)
			}
			if st, err := b.Claim(ctx, "evt_1", time.Hour); err != nil || st != webhook.ClaimInProgress {
				t.Fatalf("b.Claim = %v, %v; want in progress", st, err)
			}
		})
	}
}
