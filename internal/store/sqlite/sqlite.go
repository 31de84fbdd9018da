// Package sqlite is the embedded store driver: one database file, no other
// service. It uses modernc.org/sqlite (pure Go, no cgo).
//
// Why one writer connection: SQLite allows one writer at a time. Funnelling
// every write through a single *sql.DB connection turns lock contention
// (SQLITE_BUSY, retries, sleeps) into an orderly Go-side queue, and lets
// the delivery engine batch claims and completions into few transactions.
// Reads use a separate pool: in WAL mode readers never block the writer and
// the writer never blocks readers.
//
// Why temp_store=MEMORY: each publish of a group commit runs in a
// SAVEPOINT, whose statement journal would otherwise be a temporary file
// written page by page (12 % of the publish path's CPU in a profile).
//
// Why synchronous=FULL: a 2xx to a publish promises the event is stored. In
// WAL mode FULL syncs the log on every commit, so a power loss after the
// answer loses nothing; the engine batches writes to amortise the fsync.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/herald-webhooks/herald/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite implementation of store.Store.
type Store struct {
	w   *sql.DB         // exactly one connection: every write goes through it
	r   *sql.DB         // read pool
	box store.SecretBox // encrypts endpoint secrets at rest; nil = plain JSON (tests)
	// commits groups concurrent publishes into one transaction (one fsync).
	commits *committer

	stmts map[string]*sql.Stmt // hot statements, prepared once on the writer connection
}

// hotStatements are prepared once on the writer connection at Open:
// parsing SQL was a quarter of the publish path's CPU before, because
// modernc's driver keeps no statement cache of its own.
var hotStatements = []string{
	"SELECT " + eventColumns + " FROM events WHERE tenant = ? AND idempotency_key = ?",
	"SELECT " + eventColumns + " FROM events WHERE id = ?",
	insertEventSQL,
	"SELECT id, state, event_types FROM endpoints WHERE tenant = ?",
	insertDeliverySQL,
	"SELECT COUNT(*) FROM deliveries WHERE event_id = ?",
	ClaimQuery + deliveryColumns, claimEventsQuery, claimEndpointsQuery,
	insertAttemptSQL, completeDeliverySQL, deferDeliverySQL, clearStreakSQL, startStreakSQL,
	bulkDeferSQL, bulkClearStreakSQL,
}

func init() {
	for _, n := range valuesChunks {
		hotStatements = append(hotStatements, insertAttemptsValuesSQL(n), completeValuesSQL(n))
	}
}

// queueTx begins a transaction for the queue's own bookkeeping (claims and
// completions) with synchronous=NORMAL: it is not fsynced at commit, the
// next durable commit syncs it. Losing such a commit in a power failure
// only repeats an attempt (at least once), never loses an event; publishes
// and API changes stay synchronous=FULL. A process crash (kill -9) loses
// nothing in either mode. done commits nothing: it rolls back an
// uncommitted transaction, restores FULL and releases the connection.
func (s *Store) queueTx(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	restore := func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous=FULL"); err != nil {
			// Never leave the writer non-durable: drop the connection; the
			// pool opens a new one with the DSN's synchronous=FULL.
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		restore()
		return nil, nil, err
	}
	return tx, func() {
		tx.Rollback()
		restore()
	}, nil
}

// stmt returns query as a statement of tx: the one prepared at Open when
// it is a hot statement, else prepared for this transaction. (It never
// prepares on the DB itself: the transaction holds the only writer
// connection.)
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	if st, ok := s.stmts[query]; ok {
		return tx.StmtContext(ctx, st)
	}
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		// Surface the error at use: prepare again through the transaction
		// when executed (database/sql reports it then).
		st, _ = tx.PrepareContext(ctx, query)
	}
	return st
}

// Option configures Open.
type Option func(*Store)

// WithSecretBox encrypts endpoint secrets at rest with box.
func WithSecretBox(box store.SecretBox) Option {
	return func(s *Store) { s.box = box }
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path, applies the
// embedded migrations with goose, and returns the store. path is a file
// path ("herald.db"); the "sqlite:" prefix of --db is removed by the
// caller.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: database path %q must not contain '?' or '#'", path)
	}
	base := "file:" + (&url.URL{Path: path}).EscapedPath()
	pragmas := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=temp_store(2)"
	w, err := sql.Open("sqlite", base+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// The logger is set on the provider, not with goose.SetLogger: that
	// writes a package global, a data race when stores are opened
	// concurrently.
	prov, err := goose.NewProvider(goose.DialectSQLite3, w, mustSub(migrations, "migrations"), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	if _, err := prov.Up(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", base+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	s := &Store{w: w, r: r, stmts: map[string]*sql.Stmt{}}
	for _, o := range opts {
		o(s)
	}
	for _, q := range hotStatements {
		st, err := w.PrepareContext(ctx, q)
		if err != nil {
			r.Close()
			w.Close()
			return nil, fmt.Errorf("sqlite: prepare %q: %w", q, err)
		}
		s.stmts[q] = st
	}
	s.commits = newCommitter(s)
	return s, nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.commits.close()
	for _, st := range s.stmts {
		st.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// micro and fromMicro convert times to and from INTEGER microseconds.
var (
	micro     = store.UnixMicro
	fromMicro = store.FromUnixMicro
)

func nullMicro(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicro(v.Int64)
}

// wrap classifies driver errors: sql.ErrNoRows becomes store.ErrNotFound,
// anything else store.ErrUnavailable (the caller could not read or commit).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %v", op, store.ErrUnavailable, err)
}

const endpointColumns = "id, tenant, url, description, event_types, headers, rate_limit_per_second, state, state_reason, secrets, created_at, updated_at, failing_since, kind, versions"

type scanner interface{ Scan(dest ...any) error }

func (s *Store) scanEndpoint(sc scanner) (store.Endpoint, error) {
	var (
		e                       store.Endpoint
		types, headers, secrets string
		state, versions         string
		createdAt, updatedAt    int64
		failingSince            sql.NullInt64
	)
	if err := sc.Scan(&e.ID, &e.Tenant, &e.URL, &e.Description, &types, &headers, &e.RateLimitPerSecond, &state, &e.StateReason, &secrets, &createdAt, &updatedAt, &failingSince, &e.Kind, &versions); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(versions), &e.Versions); err != nil {
		return e, fmt.Errorf("endpoint %s versions: %w", e.ID, err)
	}
	e.FailingSince = nullMicro(failingSince)
	e.State = store.EndpointState(state)
	e.CreatedAt, e.UpdatedAt = fromMicro(createdAt), fromMicro(updatedAt)
	if err := json.Unmarshal([]byte(types), &e.EventTypes); err != nil {
		return e, fmt.Errorf("endpoint %s event_types: %w", e.ID, err)
	}
	if err := json.Unmarshal([]byte(headers), &e.Headers); err != nil {
		return e, fmt.Errorf("endpoint %s headers: %w", e.ID, err)
	}
	var err error
	if e.Secrets, err = store.DecodeSecrets(s.box, e.ID, secrets); err != nil {
		return e, fmt.Errorf("endpoint %s secrets: %w", e.ID, err)
	}
	return e, nil
}

func (s *Store) endpointArgs(e store.Endpoint) ([]any, error) {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	headers := e.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	tb, err := json.Marshal(types)
	if err != nil {
		return nil, err
	}
	hb, err := json.Marshal(headers)
	if err != nil {
		return nil, err
	}
	sec, err := store.EncodeSecrets(s.box, e.ID, e.Secrets)
	if err != nil {
		return nil, err
	}
	var failing any
	if !e.FailingSince.IsZero() {
		failing = micro(e.FailingSince)
	}
	versions := e.Versions
	if versions == nil {
		versions = map[string]int{}
	}
	vb, err := json.Marshal(versions)
	if err != nil {
		return nil, err
	}
	return []any{e.ID, e.Tenant, e.URL, e.Description, string(tb), string(hb), e.RateLimitPerSecond, string(e.State), e.StateReason, sec, micro(e.CreatedAt), micro(e.UpdatedAt), failing, e.Kind, string(vb)}, nil
}

// CreateEndpoint implements store.Store.
func (s *Store) CreateEndpoint(ctx context.Context, p store.CreateEndpointParams) (store.Endpoint, error) {
	e := p.Endpoint
	if e.State == "" {
		e.State = store.EndpointEnabled
	}
	args, err := s.endpointArgs(e)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("create endpoint: %w", err)
	}
	_, err = s.w.ExecContext(ctx, "INSERT INTO endpoints ("+endpointColumns+") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", args...)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return store.Endpoint{}, fmt.Errorf("create endpoint %s: %w", e.ID, store.ErrConflict)
		}
		return store.Endpoint{}, wrap("create endpoint", err)
	}
	return s.getEndpoint(ctx, s.w, e.ID)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) getEndpoint(ctx context.Context, q querier, id string) (store.Endpoint, error) {
	e, err := s.scanEndpoint(q.QueryRowContext(ctx, "SELECT "+endpointColumns+" FROM endpoints WHERE id = ?", id))
	if err != nil {
		return store.Endpoint{}, wrap("endpoint "+id, err)
	}
	return e, nil
}

// GetEndpoint implements store.Store.
func (s *Store) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	return s.getEndpoint(ctx, s.r, id)
}

// ListEndpoints implements store.Store.
func (s *Store) ListEndpoints(ctx context.Context, p store.ListEndpointsParams) (store.Page[store.Endpoint], error) {
	var (
		where []string
		args  []any
	)
	if p.Tenant != "" {
		where = append(where, "tenant = ?")
		args = append(args, p.Tenant)
	}
	if !p.IncludeSources {
		where = append(where, "kind = ''")
	}
	if p.Cursor != "" {
		where = append(where, "id < ?")
		args = append(args, p.Cursor)
	}
	lim := p.ListParams.PageSize()
	q := "SELECT " + endpointColumns + " FROM endpoints" + whereClause(where) + " ORDER BY id DESC LIMIT ?"
	args = append(args, lim+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page[store.Endpoint]{}, wrap("list endpoints", err)
	}
	defer rows.Close()
	var out []store.Endpoint
	for rows.Next() {
		e, err := s.scanEndpoint(rows)
		if err != nil {
			return store.Page[store.Endpoint]{}, wrap("list endpoints", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Endpoint]{}, wrap("list endpoints", err)
	}
	return store.Paginate(out, lim, func(e store.Endpoint) string { return e.ID }), nil
}

func whereClause(w []string) string {
	if len(w) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w, " AND ")
}

// UpdateEndpoint implements store.Store.
func (s *Store) UpdateEndpoint(ctx context.Context, p store.UpdateEndpointParams) (store.Endpoint, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.Endpoint{}, wrap("update endpoint", err)
	}
	defer tx.Rollback()
	e, err := s.getEndpoint(ctx, tx, p.ID)
	if err != nil {
		return store.Endpoint{}, err
	}
	if p.URL != nil {
		if *p.URL != e.URL {
			e.FailingSince = time.Time{} // a new URL starts a new failure streak
		}
		e.URL = *p.URL
	}
	if p.Description != nil {
		e.Description = *p.Description
	}
	if p.EventTypes != nil {
		e.EventTypes = *p.EventTypes
	}
	if p.Headers != nil {
		e.Headers = *p.Headers
	}
	if p.Versions != nil {
		e.Versions = *p.Versions
	}
	if p.RateLimitPerSecond != nil {
		e.RateLimitPerSecond = *p.RateLimitPerSecond
	}
	e.UpdatedAt = p.Now
	args, err := s.endpointArgs(e)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("update endpoint: %w", err)
	}
	// args[0] is the id; move it to the end for the WHERE clause.
	_, err = tx.ExecContext(ctx, `UPDATE endpoints SET tenant=?, url=?, description=?, event_types=?, headers=?,
		rate_limit_per_second=?, state=?, state_reason=?, secrets=?, created_at=?, updated_at=?, failing_since=?, kind=?, versions=? WHERE id=?`,
		append(args[1:], args[0])...)
	if err != nil {
		return store.Endpoint{}, wrap("update endpoint", err)
	}
	// Answer with the stored row, as GetEndpoint would: times truncated to
	// microseconds in UTC, empty filters and headers as stored.
	if e, err = s.getEndpoint(ctx, tx, p.ID); err != nil {
		return store.Endpoint{}, err
	}
	if err := tx.Commit(); err != nil {
		return store.Endpoint{}, wrap("update endpoint", err)
	}
	return e, nil
}

// DeleteEndpoint implements store.Store.
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap("delete endpoint", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "DELETE FROM endpoints WHERE id = ?", id)
	if err != nil {
		return wrap("delete endpoint", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("endpoint %s: %w", id, store.ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM deliveries WHERE endpoint_id = ?", id); err != nil {
		return wrap("delete endpoint", err)
	}
	return wrap("delete endpoint", tx.Commit())
}

func mustSub(fsys embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}
