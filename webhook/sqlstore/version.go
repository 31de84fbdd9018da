package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/herald-webhooks/herald/webhook"
)

var errEmptyResource = errors.New("sqlstore: resource id is empty")

// VersionGate is a [webhook.VersionGate] in one table of a SQL database:
// one row per resource id with the newest version let through. It is safe
// for concurrent use by any number of goroutines and processes.
type VersionGate struct {
	db        *sql.DB
	table     string
	createSQL string
	checkSQL  string
}

// NewVersionGate returns a VersionGate on table (DefaultVersionTable when
// empty) of db; see [New] for the table name rules and
// [VersionGate.CreateTable].
func NewVersionGate(db *sql.DB, dialect Dialect, table string) (*VersionGate, error) {
	if table == "" {
		table = DefaultVersionTable
	}
	if err := checkTable(dialect, table); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("sqlstore: db is nil")
	}
	intType := "INTEGER"
	if dialect == Postgres {
		intType = "BIGINT"
	}
	q := func(s string) string { return rebind(dialect, strings.ReplaceAll(s, "{t}", table)) }
	return &VersionGate{
		db:    db,
		table: table,
		createSQL: q(`CREATE TABLE IF NOT EXISTS {t} (
	resource_id TEXT NOT NULL PRIMARY KEY,
	version     ` + intType + ` NOT NULL
)`),
		checkSQL: q(`INSERT INTO {t} (resource_id, version) VALUES (?, ?)
ON CONFLICT (resource_id) DO UPDATE SET version = excluded.version
WHERE {t}.version < excluded.version`),
	}, nil
}

// Table returns the table name.
func (g *VersionGate) Table() string { return g.table }

// CreateTable creates the table if it does not exist:
//
//	CREATE TABLE IF NOT EXISTS <table> (
//		resource_id TEXT NOT NULL PRIMARY KEY,
//		version     INTEGER NOT NULL   -- BIGINT on PostgreSQL
//	);
func (g *VersionGate) CreateTable(ctx context.Context) error {
	if _, err := g.db.ExecContext(ctx, g.createSQL); err != nil {
		return fmt.Errorf("sqlstore: creating table %s: %w", g.table, err)
	}
	return nil
}

// Check implements [webhook.VersionGate.Check] with one statement:
//
//	INSERT INTO <table> (resource_id, version) VALUES (?, ?)
//	ON CONFLICT (resource_id) DO UPDATE SET version = excluded.version
//	WHERE <table>.version < excluded.version
//
// fresh is true if and only if it affected a row (inserted or raised the
// version); see the package doc for why this is atomic.
func (g *VersionGate) Check(ctx context.Context, resourceID string, version int64) (bool, error) {
	return g.check(ctx, g.db, resourceID, version)
}

// CheckTx is Check inside the caller's transaction tx (on the same
// database), so that the gate advances only if the work done in tx commits:
// a rollback (the handler failed, the sender will retry) leaves the stored
// version as it was. On PostgreSQL the row stays locked until tx ends, which
// also serializes concurrent handlers of one resource; on SQLite tx holds
// the database's write lock.
func (g *VersionGate) CheckTx(ctx context.Context, tx *sql.Tx, resourceID string, version int64) (bool, error) {
	if tx == nil {
		return false, errors.New("sqlstore: tx is nil")
	}
	return g.check(ctx, tx, resourceID, version)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (g *VersionGate) check(ctx context.Context, db execer, resourceID string, version int64) (bool, error) {
	if resourceID == "" {
		return false, errEmptyResource
	}
	res, err := db.ExecContext(ctx, g.checkSQL, resourceID, version)
	if err != nil {
		return false, fmt.Errorf("sqlstore: version check: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlstore: version check: %w", err)
	}
	return n == 1, nil
}

var _ webhook.VersionGate = (*VersionGate)(nil)
