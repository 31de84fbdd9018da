// Package sqlstore implements [webhook.IdempotencyStore] and
// [webhook.VersionGate] on a database/sql database, SQLite or PostgreSQL,
// so that several receiver processes sharing one database process each
// event once.
//
// The caller opens the *sql.DB with a driver of its choice (for example
// modernc.org/sqlite, driver name "sqlite", or github.com/jackc/pgx/v5/stdlib,
// driver name "pgx") and creates the tables once with CreateTable (or its
// own migration; the DDL is in the CreateTable docs).
//
// # Atomicity
//
// Every state change is one statement, INSERT ... ON CONFLICT (SQLite
// 3.24+, PostgreSQL 9.5+), whose outcome is read from its affected-row
// count:
//
//   - Claim inserts the key, or on conflict takes over a record whose
//     expires_at has passed (DO UPDATE ... WHERE expires_at <= now); it won
//     if and only if one row was affected. PostgreSQL takes a row lock on
//     the conflicting row and evaluates the DO UPDATE's WHERE on its latest
//     committed version, even under READ COMMITTED, so of concurrent claims
//     one inserts (or updates) and the others, waiting on the unique index
//     or the row lock, see a live record and affect nothing. SQLite runs one
//     write transaction at a time (database lock), so the statement is
//     trivially serialized.
//   - VersionGate.Check inserts the resource, or on conflict updates the
//     version only WHERE the stored version is smaller; it is fresh if and
//     only if one row was affected. The same locking argument makes the
//     stored version a monotone maximum.
//
// Expiry is a column, expires_at, in unix milliseconds from the store's
// clock (Store.Now): an expired record counts as free for Claim at once, and
// DeleteExpired removes expired rows to bound the table's size (run it now
// and then, e.g. hourly). Processes sharing a store should have clocks that
// agree to well within the lease.
//
// With SQLite, let concurrent writers wait instead of failing with
// SQLITE_BUSY: set a busy timeout (modernc.org/sqlite:
// "file:x.db?_pragma=busy_timeout(5000)") or use db.SetMaxOpenConns(1).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// Dialect selects the SQL flavour: placeholders and column types.
type Dialect int

const (
	// SQLite: "?" placeholders, INTEGER columns. Needs SQLite 3.24 or later
	// (UPSERT).
	SQLite Dialect = iota + 1
	// Postgres: "$1" placeholders, BIGINT/SMALLINT columns. Needs
	// PostgreSQL 9.5 or later (ON CONFLICT).
	Postgres
)

// String returns "sqlite" or "postgres".
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	default:
		return "Dialect(" + strconv.Itoa(int(d)) + ")"
	}
}

// Default table names.
const (
	DefaultTable        = "herald_idempotency"
	DefaultVersionTable = "herald_versions"
)

// Record states in the state column.
const (
	stateInProgress = 0
	stateCompleted  = 1
)

// tableName is what New accepts: a plain identifier, since it is written
// into the SQL. 48 characters leave room for index names within
// PostgreSQL's 63-byte identifier limit.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

var (
	errEmptyKey    = errors.New("sqlstore: key is empty")
	errBadDuration = errors.New("sqlstore: lease/ttl must be positive")
)

func checkTable(d Dialect, table string) error {
	if d != SQLite && d != Postgres {
		return fmt.Errorf("sqlstore: unknown dialect %v", d)
	}
	if !tableName.MatchString(table) {
		return fmt.Errorf("sqlstore: table name %q is not a plain identifier of at most 48 characters ([A-Za-z_][A-Za-z0-9_]*)", table)
	}
	return nil
}

// rebind turns "?" placeholders into "$1", "$2", ... for PostgreSQL. The
// queries of this package contain no "?" elsewhere.
func rebind(d Dialect, q string) string {
	if d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// Store is a [webhook.IdempotencyStore] in one table of a SQL database. It
// is safe for concurrent use by any number of goroutines and processes.
type Store struct {
	// Now returns the current time, used for expires_at; nil means
	// time.Now. Set it before first use.
	Now func() time.Time

	db      *sql.DB
	dialect Dialect
	table   string

	createSQL   []string
	claimSQL    string
	stateSQL    string
	completeSQL string
	releaseSQL  string
	expireSQL   string
}

// New returns a Store on table (DefaultTable when empty) of db. table must
// be a plain identifier (letters, digits, underscore; at most 48
// characters); it is not created here, see [Store.CreateTable].
func New(db *sql.DB, dialect Dialect, table string) (*Store, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := checkTable(dialect, table); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("sqlstore: db is nil")
	}
	intType, smallType := "INTEGER", "INTEGER"
	if dialect == Postgres {
		intType, smallType = "BIGINT", "SMALLINT"
	}
	q := func(s string) string { return rebind(dialect, strings.ReplaceAll(s, "{t}", table)) }
	return &Store{
		db:      db,
		dialect: dialect,
		table:   table,
		createSQL: []string{
			q(`CREATE TABLE IF NOT EXISTS {t} (
	event_key  TEXT NOT NULL PRIMARY KEY,
	state      ` + smallType + ` NOT NULL,
	expires_at ` + intType + ` NOT NULL
)`),
			q(`CREATE INDEX IF NOT EXISTS {t}_expires_at ON {t} (expires_at)`),
		},
		claimSQL: q(`INSERT INTO {t} (event_key, state, expires_at) VALUES (?, 0, ?)
ON CONFLICT (event_key) DO UPDATE SET state = 0, expires_at = excluded.expires_at
WHERE {t}.expires_at <= ?`),
		stateSQL: q(`SELECT state, expires_at FROM {t} WHERE event_key = ?`),
		completeSQL: q(`INSERT INTO {t} (event_key, state, expires_at) VALUES (?, 1, ?)
ON CONFLICT (event_key) DO UPDATE SET state = 1, expires_at = excluded.expires_at`),
		releaseSQL: q(`DELETE FROM {t} WHERE event_key = ?`),
		expireSQL:  q(`DELETE FROM {t} WHERE expires_at <= ?`),
	}, nil
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// CreateTable creates the table and its expires_at index if they do not
// exist. For SQLite the DDL is
//
//	CREATE TABLE IF NOT EXISTS <table> (
//		event_key  TEXT NOT NULL PRIMARY KEY,
//		state      INTEGER NOT NULL,   -- 0 in progress, 1 completed
//		expires_at INTEGER NOT NULL    -- unix milliseconds
//	);
//	CREATE INDEX IF NOT EXISTS <table>_expires_at ON <table> (expires_at);
//
// and for PostgreSQL the same with SMALLINT state and BIGINT expires_at.
func (s *Store) CreateTable(ctx context.Context) error {
	for _, stmt := range s.createSQL {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("sqlstore: creating table %s: %w", s.table, err)
		}
	}
	return nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func checkArgs(key string, d time.Duration) error {
	if key == "" {
		return errEmptyKey
	}
	if d <= 0 {
		return fmt.Errorf("%w: got %v", errBadDuration, d)
	}
	return nil
}

// Claim implements [webhook.IdempotencyStore.Claim] with one atomic
// INSERT ... ON CONFLICT DO UPDATE ... WHERE expires_at <= now (see the
// package doc), and on a lost claim one SELECT to tell in-progress from
// completed. Should the record vanish or lapse between the two statements
// the claim is tried once more; after that the answer is ClaimInProgress
// (the sender retries).
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration) (webhook.ClaimStatus, error) {
	if err := checkArgs(key, lease); err != nil {
		return 0, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		now := s.now()
		res, err := s.db.ExecContext(ctx, s.claimSQL, key, now.Add(lease).UnixMilli(), now.UnixMilli())
		if err != nil {
			return 0, fmt.Errorf("sqlstore: claim: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("sqlstore: claim: %w", err)
		}
		if n == 1 {
			return webhook.ClaimAcquired, nil
		}
		var state int
		var expires int64
		err = s.db.QueryRowContext(ctx, s.stateSQL, key).Scan(&state, &expires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // released meanwhile
		case err != nil:
			return 0, fmt.Errorf("sqlstore: claim: reading state: %w", err)
		case expires <= s.now().UnixMilli():
			continue // lapsed meanwhile
		case state == stateCompleted:
			return webhook.ClaimCompleted, nil
		default:
			return webhook.ClaimInProgress, nil
		}
	}
	return webhook.ClaimInProgress, nil
}

// Complete implements [webhook.IdempotencyStore.Complete]: an upsert that
// sets state = completed and expires_at = now + ttl.
func (s *Store) Complete(ctx context.Context, key string, ttl time.Duration) error {
	if err := checkArgs(key, ttl); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.completeSQL, key, s.now().Add(ttl).UnixMilli()); err != nil {
		return fmt.Errorf("sqlstore: complete: %w", err)
	}
	return nil
}

// Release implements [webhook.IdempotencyStore.Release]: DELETE of the
// key's row.
func (s *Store) Release(ctx context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	if _, err := s.db.ExecContext(ctx, s.releaseSQL, key); err != nil {
		return fmt.Errorf("sqlstore: release: %w", err)
	}
	return nil
}

// DeleteExpired deletes the rows whose expires_at has passed and returns
// how many it deleted. Claim already treats such rows as free; this only
// keeps the table small.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.expireSQL, s.now().UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sqlstore: deleting expired rows: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlstore: deleting expired rows: %w", err)
	}
	return n, nil
}

var _ webhook.IdempotencyStore = (*Store)(nil)
