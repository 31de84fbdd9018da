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
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	msqlite "modernc.org/sqlite" // also registers the "sqlite" database/sql driver

	"github.com/herald-webhooks/herald/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite implementation of store.Store.
type Store struct {
	w *sql.DB // exactly one connection: every write goes through it
	r *sql.DB // read pool

	targetCache targetCache     // large tenants' endpoints as of endpoints_version (targets.go)
	box         store.SecretBox // encrypts endpoint secrets at rest; nil = plain JSON (tests)
	// commits groups concurrent publishes into one transaction (one fsync).
	commits *committer
	// gate serves publish groups before the queue's transactions on w.
	gate writeGate
	// publishWaiting reports a publish group waiting for the writer (a
	// fan-out chunk then ends early); tests replace it.
	publishWaiting func() bool
	// beforeChunk, when set (tests), runs before each chunk of a resume,
	// a pause or disable, a delete or an endpoint's replay after the
	// first, without the writer.
	beforeChunk func()
	// holdAfter are the endpoints the running completion batch disabled
	// whose pending deliveries are held after its commit, in the
	// background (disableEndpoint, holdRestAfter); only the writer's
	// holder touches it.
	holdAfter []pendingHold
	// The background work (holdRestAfter): bg counts it, bgCtx is
	// cancelled by Close, which waits for it (stopBackground); bgMu
	// guards bgClosed, after which no work starts.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgMu     sync.Mutex
	bgClosed bool
	// retryWait is the first wait of a delete's retry (retryDeleteRest);
	// tests shorten it.
	retryWait time.Duration
	// log receives the failures of the background work (WithLogger);
	// discarded by default.
	log *slog.Logger

	stmts map[string]*sql.Stmt // hot statements, prepared once on the writer connection
	// txPrepares counts statements stmt prepared for one transaction
	// (parsing SQL is a quarter of a statement's cost in modernc's driver:
	// the claim and completion paths must prepare none, TestHotPathPreparesNothing).
	txPrepares atomic.Int64
	// claimSteps counts the index rows the queue's walks (claims,
	// NextDueAt) have read: the tests' measure of their cost.
	claimSteps atomic.Int64
	// readStmts are readStatements prepared on the read pool (database/sql
	// prepares each once per connection and keeps it; a query run on the
	// pool by text is parsed again on every call).
	readStmts map[string]*sql.Stmt

	path     string      // the database file
	file     os.FileInfo // the database file as opened (Ping: still the same file?)
	now      func() time.Time
	failMu   sync.Mutex
	failedAt time.Time // the last publish that failed on storage (disk full, I/O error, read-only)
	failErr  error

	// leases are the claimed deliveries' leases, in memory (leases.go).
	leases *leaseTable
	// handOff is the engine's side of the hand-off (handoff.go), if set.
	handOff store.HandOffSlot
	// claimLock is the lock file held from the first claim to Close
	// (takeClaimLock): one process claims from a database file.
	claimMu       sync.Mutex
	preLock       *ClaimLock // taken before Open (WithClaimLock); takeClaimLock keeps it
	claimLock     *os.File
	claimLockInfo os.FileInfo // claimLock as locked (checkClaimLock: still the file at its path?)
	claimLocked   bool
	// claimHeld is claimLocked for readers that must not take claimMu (the
	// hand-off asks it holding the writer, for which the first claim waits
	// holding claimMu): set after claimLockInfo, cleared before the release.
	claimHeld atomic.Bool
	// claimsWaiting counts the claims waiting for the writer (claimTx): a
	// publish group hands nothing off meanwhile (groupcommit.go).
	claimsWaiting atomic.Int32
	// endpointChanges counts the transactions that changed what an attempt
	// takes from an endpoint row (its URL, headers, secrets or state) or
	// deleted one: EndpointChanges.
	endpointChanges atomic.Uint64
}

// hotStatements are prepared once on the writer connection at Open:
// parsing SQL was a quarter of the publish path's CPU before, because
// modernc's driver keeps no statement cache of its own.
var hotStatements = []string{
	"SELECT " + eventColumns + " FROM events WHERE tenant = ? AND idempotency_key = ?",
	"SELECT " + eventColumns + " FROM events WHERE id = ?",
	insertEventSQL, catalogRevisionSQL,
	tenantTargetsSQL, endpointsVersionSQL,
	insertDeliverySQL,
	"SELECT COUNT(*) FROM deliveries WHERE event_id = ?",
	ClaimQuery, ClaimTenantQuery, TenantDueQuery, NextTenantQuery, claimDeliveriesQuery, claimEventsQuery, claimEndpointsQuery,
	insertAttemptSQL, completeDeliverySQL, deferDeliverySQL, clearStreakSQL, startStreakSQL,
	bulkDeferSQL, bulkClearStreakSQL, insertFanOutSQL, deadLetterNoticeSQL,
}

// readStatements are the read pool's frequent queries, prepared at Open:
// the catalog reads of a publish on a cache miss and the engine's next-due
// reads, which run after every claim (parsing NextDueQuery on each was
// 3 % of Herald's CPU at 500 inbound requests/s, docs/BENCHMARKS.md).
var readStatements = []string{getEventTypeSQL, caseVariantSQL, NextDueQuery, NextTenantQuery, TenantDueQuery}

func init() {
	for _, n := range valuesChunks {
		hotStatements = append(hotStatements, insertAttemptsValues[n], completeValues[n], upsertStatsValues[n], insertDeliveriesValues[n])
	}
}

// queueTx begins a transaction for the queue's own bookkeeping (claims and
// completions) with synchronous=NORMAL: it is not fsynced at commit, the
// next durable commit syncs it. Losing such a commit in a power failure
// only repeats an attempt (at least once), never loses an event; publishes
// and API changes stay synchronous=FULL. A process crash (kill -9) loses
// nothing in either mode. done commits nothing: it rolls back an
// uncommitted transaction, restores FULL and releases the connection.
// It waits behind publish groups (writeGate).
func (s *Store) queueTx(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	return s.writerTx(ctx, true)
}

// claimTx is queueTx for a claim, which writes nothing (leases are in
// memory, leases.go): on the writer connection, behind publish groups, so
// that no completion, pause or rescue commits while it reads, but without
// queueTx's two PRAGMA statements around it — synchronous matters only
// to a commit that writes.
func (s *Store) claimTx(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	return s.writerTx(ctx, false)
}

// writerTx begins a transaction on the writer connection once the gate
// lets it through (acquireWriter: behind waiting publish groups, the
// database file checked), with synchronous=NORMAL around it when normal is
// set (queueTx). done rolls back what was not committed and releases the
// connection and the gate; calling it again does nothing, so a caller that
// must take the writer again after its commit (the next chunk of a
// resume or a replay) releases it first.
func (s *Store) writerTx(ctx context.Context, normal bool) (tx *sql.Tx, done func(), err error) {
	if err := s.acquireWriter(ctx); err != nil {
		return nil, nil, err
	}
	conn, err := s.w.Conn(ctx)
	if err != nil {
		s.gate.release()
		return nil, nil, err
	}
	if normal {
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
			conn.Close()
			s.gate.release()
			return nil, nil, err
		}
	}
	release := func() {
		if normal {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous=FULL"); err != nil {
				// Never leave the writer non-durable: drop the connection; the
				// pool opens a new one with the DSN's synchronous=FULL.
				conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
		conn.Close()
		s.gate.release()
	}
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		release()
		return nil, nil, err
	}
	released := false
	return tx, func() {
		if released {
			return
		}
		released = true
		tx.Rollback()
		release()
	}, nil
}

// acquireWriter takes the write gate behind waiting publish groups (every
// write but a publish group's waits there: the queue's transactions, the
// API's changes, the housekeeping), then checks that the database file is
// still the one opened (checkFile): on an error it holds nothing. With the
// gate held the writer connection is free: nothing takes it outside the
// gate.
func (s *Store) acquireWriter(ctx context.Context) error {
	if err := s.gate.acquireQueue(ctx); err != nil {
		return err
	}
	if err := s.checkFile(); err != nil {
		s.gate.release()
		return err
	}
	return nil
}

// execWrite runs one statement on the writer outside a transaction (its
// own commit, synchronous=FULL) in the write gate (acquireWriter).
func (s *Store) execWrite(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := s.acquireWriter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.release()
	return s.w.ExecContext(ctx, query, args...)
}

// stmt returns query as a statement of tx: the one prepared at Open when
// it is a hot statement, else prepared for this transaction. (It never
// prepares on the DB itself: the transaction holds the only writer
// connection.) A failed prepare is returned as the error (the statement is
// then nil and must not be used).
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts[query]; ok {
		return tx.StmtContext(ctx, st), nil
	}
	s.txPrepares.Add(1)
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return st, nil
}

// exec runs query (through stmt) in tx with args.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}

// Option configures Open.
type Option func(*Store)

// WithClock sets the clock Ping reads (tests); default time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// WithLogger sends the failures of the store's background work (the
// chunks of a hold, release or delete that go on after the call that
// started them, the start-up fix-ups) to l, at level WARN; by default they
// are discarded. Each is retried or left to the claims and the next start,
// as its doc says; the log says which.
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.log = l }
}

// WithSecretBox encrypts endpoint secrets at rest with box.
func WithSecretBox(box store.SecretBox) Option {
	return func(s *Store) { s.box = box }
}

// The store interface and the capabilities this driver declares
// (Capabilities).
var (
	_ store.Store             = (*Store)(nil)
	_ store.ExclusiveClaimer  = (*Store)(nil)
	_ store.HandOffer         = (*Store)(nil)
	_ store.ClearHeaderSealer = (*Store)(nil)
	_ store.SealedStore       = (*Store)(nil)
)

// Capabilities implements store.Store: one claiming process (its leases
// live in that process's memory), the sealing of clear header values and
// the rekey of sealed values, the hand-off (handoff.go), one claimer (a claim is a local call); no
// wake-ups or membership (one process owns the database: no other node to
// wake or share limits with).
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Claimers: 1, Exclusive: s, HeaderSealer: s, Sealed: s, HandOff: s, EndpointChanges: s.EndpointChanges, Renewer: s}
}

// RenewLease implements store.LeaseRenewer: the lease lives in this
// process's memory (leases.go), so renewing it is a compare-and-swap of its
// end, made holding the writer (as every change of the leases), so that no
// rescue or completion runs beside it. It answers false when the lease is
// no longer the one p.Owner took until p.Until, or has ended at p.Now; it
// writes nothing to the database.
func (s *Store) RenewLease(ctx context.Context, p store.RenewLeaseParams) (bool, error) {
	if err := s.acquireWriter(ctx); err != nil {
		return false, wrap("renew lease", err)
	}
	defer s.gate.release()
	return s.leases.renew(p.DeliveryID, p.Owner, micro(p.Until), micro(p.NewUntil), micro(p.Now)), nil
}

// EndpointChanges implements store.Capabilities.EndpointChanges: the
// number of write transactions so far that changed an endpoint's URL,
// headers, secrets or state, or deleted an endpoint (whether or not they
// committed). It moves on the writer connection, before the change
// commits, so a reading taken after a change's commit always differs from
// one taken before the change. One process writes a SQLite database
// (Capabilities.Exclusive), so the count sees every change.
func (s *Store) EndpointChanges() uint64 { return s.endpointChanges.Load() }

// endpointChanged counts a change an attempt must see (EndpointChanges);
// called on the writer's transaction, after the statement, before the
// commit.
func (s *Store) endpointChanged() { s.endpointChanges.Add(1) }

// ClaimExclusively implements store.ExclusiveClaimer: it takes the claim
// lock the first claim would take (ErrClaimLocked, wrapped with
// store.ErrUnavailable, when another process holds it).
func (s *Store) ClaimExclusively(ctx context.Context) error { return s.takeClaimLock(ctx) }

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
	if err := checkNotForeign(ctx, path); err != nil {
		return nil, err
	}
	if err := prepareFiles(path); err != nil {
		return nil, err
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
	prov, err := goose.NewProvider(goose.DialectSQLite3, w, mustSub(migrations, "migrations"), goose.WithLogger(goose.NopLogger()),
		// Versions are handed out in blocks to parallel lines of work, so
		// a database at version 30 may still lack 20–24: apply them then.
		// Each migration is written to run before or after the others.
		goose.WithAllowOutofOrder(true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	if err := checkSchema(ctx, prov); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
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
	file, err := os.Stat(path)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{w: w, r: r, stmts: map[string]*sql.Stmt{}, path: path, file: file, now: time.Now, leases: newLeaseTable()}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.retryWait = time.Second
	s.log = slog.New(slog.DiscardHandler)
	s.publishWaiting = func() bool { p, _ := s.gate.waiting(); return p > 0 }
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
	s.readStmts = make(map[string]*sql.Stmt, len(readStatements))
	for _, q := range readStatements {
		st, err := r.PrepareContext(ctx, q)
		if err != nil {
			r.Close()
			w.Close()
			return nil, fmt.Errorf("sqlite: prepare %q: %w", q, err)
		}
		s.readStmts[q] = st
	}
	s.commits = newCommitter(s)
	return s, nil
}

// storageFailureWindow is how long a publish that failed on storage keeps
// Ping failing: while the disk stays full, publishes keep failing and
// renew it; once they stop (a load balancer sent traffic elsewhere), the
// node is tried again after this long.
const storageFailureWindow = 10 * time.Second

// Ping implements store.Store; it is the readiness probe (/readyz). It
// fails, wrapping store.ErrUnavailable, when
//   - the database file was deleted or replaced since Open (SQLite keeps
//     writing to the unlinked file: every commit would be lost at restart);
//   - a publish failed on storage (SQLITE_FULL, SQLITE_IOERR,
//     SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_CORRUPT, SQLITE_NOTADB) in
//     the last 10 s;
//   - the claim lock this process took was deleted or replaced
//     (ErrClaimLockLost: it stopped claiming);
//   - a small write transaction (the meta row "readiness_probe") cannot
//     commit.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.checkFile(); err != nil {
		return err
	}
	s.claimMu.Lock()
	locked := s.claimLocked
	var lockErr error
	if locked {
		lockErr = s.checkClaimLock()
	}
	s.claimMu.Unlock()
	if lockErr != nil {
		return lockErr
	}
	s.failMu.Lock()
	failedAt, failErr := s.failedAt, s.failErr
	s.failMu.Unlock()
	if failErr != nil && s.now().Sub(failedAt) < storageFailureWindow {
		return fmt.Errorf("%w: a publish failed on storage %s ago: %v", store.ErrUnavailable, s.now().Sub(failedAt).Round(time.Millisecond), failErr)
	}
	if _, err := s.execWrite(ctx, `INSERT INTO meta (key, value) VALUES ('readiness_probe', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, s.now().UTC().Format(time.RFC3339Nano)); err != nil {
		if store.Classified(err) {
			return err // the file was deleted meanwhile, or ctx ended
		}
		return fmt.Errorf("%w: the store cannot commit a write: %v", store.ErrUnavailable, err)
	}
	return nil
}

// checkFile fails, wrapping store.ErrUnavailable, when the database file
// was deleted or replaced since Open. SQLite keeps writing to the unlinked
// file, so a commit would succeed and be lost at the next start: every
// write checks first, once it has the writer (acquireWriter, and the
// committer for a publish group), and is refused instead — the API's (a
// 503) and the engine's and the housekeeper's own (claims, completions,
// rescues, fan-out chunks, notices, purges): the engine keeps its results
// in memory and stops claiming, so nothing more is sent whose outcome
// could not be recorded. It costs one stat(2), about a microsecond, per
// transaction.
func (s *Store) checkFile() error {
	cur, err := os.Stat(s.path)
	if err != nil || !os.SameFile(cur, s.file) {
		return fmt.Errorf("%w: the database file %s was deleted or replaced while Herald runs (restart Herald after restoring it)", store.ErrUnavailable, s.path)
	}
	return nil
}

// beginWrite begins a transaction on the writer for a change (the API's,
// synchronous=FULL) in the write gate, after checkFile, as every write;
// done as writerTx's.
func (s *Store) beginWrite(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	return s.writerTx(ctx, false)
}

// noteWrite records the outcome of a publish for Ping: a storage failure
// (storageFailure) starts the failure window, a success ends it.
func (s *Store) noteWrite(err error) {
	if err != nil && !storageFailure(err) {
		return
	}
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if err == nil {
		s.failErr = nil
		return
	}
	s.failedAt, s.failErr = s.now(), err
}

// storageFailure reports whether err is SQLite saying the storage itself
// failed (https://sqlite.org/rescode.html): full, I/O error, read-only,
// cannot open, corrupt, not a database.
func storageFailure(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case 8, 10, 11, 13, 14, 26: // READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB
		return true
	}
	return false
}

// uniqueViolation reports whether err is SQLite refusing a row that breaks
// a UNIQUE or PRIMARY KEY constraint (extended result codes
// SQLITE_CONSTRAINT_UNIQUE, 2067, and SQLITE_CONSTRAINT_PRIMARYKEY, 1555:
// https://sqlite.org/rescode.html), read from the error's code, never its
// text.
func uniqueViolation(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() {
	case 2067, 1555:
		return true
	}
	return false
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.stopBackground()
	s.commits.close()
	for _, st := range s.stmts {
		st.Close()
	}
	for _, st := range s.readStmts {
		st.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close(), s.releaseClaimLock())
}

// inBackground runs f in a goroutine of the store's background work, with
// a context Close cancels; Close waits for it (stopBackground). After
// Close it runs nothing.
func (s *Store) inBackground(f func(ctx context.Context)) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f(s.bgCtx)
	}()
}

// stopBackground cancels the background work and waits for it to end; no
// more starts.
func (s *Store) stopBackground() {
	s.bgMu.Lock()
	s.bgClosed = true
	s.bgMu.Unlock()
	if s.bgCancel != nil {
		s.bgCancel()
	}
	s.bg.Wait()
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

// wrap names the operation and classifies driver errors: sql.ErrNoRows
// becomes store.ErrNotFound, an error that already has a code
// (store.Classified) keeps it, anything else is store.ErrUnavailable (the
// caller could not read or commit).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if store.Classified(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
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
		return e, store.Unreadable(e.ID, e.Tenant, store.Internal(fmt.Errorf("endpoint %s versions: %w", e.ID, err)))
	}
	e.FailingSince = nullMicro(failingSince)
	e.State = store.EndpointState(state)
	e.CreatedAt, e.UpdatedAt = fromMicro(createdAt), fromMicro(updatedAt)
	if err := json.Unmarshal([]byte(types), &e.EventTypes); err != nil {
		return e, store.Unreadable(e.ID, e.Tenant, store.Internal(fmt.Errorf("endpoint %s event_types: %w", e.ID, err)))
	}
	if err := json.Unmarshal([]byte(headers), &e.Headers); err != nil {
		return e, store.Unreadable(e.ID, e.Tenant, store.Internal(fmt.Errorf("endpoint %s headers: %w", e.ID, err)))
	}
	// Every sealed value tried; those that do not open are named in the
	// *store.UnreadableError, with the rest of the row.
	if err := store.OpenEndpointValues(s.box, &e, e.Headers, secrets); err != nil {
		return e, err
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
	headers, err = store.SealHeaders(s.box, e.ID, headers)
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
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return store.Endpoint{}, wrap("create endpoint", err)
	}
	defer done()
	// One statement on the single writer: the count and the insert are
	// atomic. ?16 is the limit (0 = none), ?2 the tenant.
	res, err := tx.ExecContext(ctx, "INSERT INTO endpoints ("+endpointColumns+") SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15"+
		" WHERE ?16 <= 0 OR (SELECT COUNT(*) FROM endpoints WHERE tenant = ?2) < ?16", append(args, p.MaxPerTenant)...)
	if err != nil {
		if uniqueViolation(err) {
			return store.Endpoint{}, store.Exists("endpoint " + e.ID)
		}
		return store.Endpoint{}, wrap("create endpoint", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return store.Endpoint{}, wrap("create endpoint", err)
	} else if n == 0 {
		var have int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM endpoints WHERE tenant = ?", e.Tenant).Scan(&have); err != nil {
			return store.Endpoint{}, wrap("create endpoint", err)
		}
		return store.Endpoint{}, store.EndpointLimit(e.Tenant, have, p.MaxPerTenant)
	}
	if p.Notice {
		if err := addNotice(ctx, tx, e.ID, store.NoticeEndpointCreated, e.CreatedAt); err != nil {
			return store.Endpoint{}, wrap("create endpoint", err)
		}
	}
	got, err := s.getEndpoint(ctx, tx, e.ID)
	if err != nil {
		return store.Endpoint{}, err
	}
	return got, wrap("create endpoint", tx.Commit())
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
	switch {
	case p.OnlySources:
		where = append(where, "kind = 'source'")
	case !p.IncludeSources:
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
		e, err := store.Listed(s.scanEndpoint(rows))
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
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return store.Endpoint{}, wrap("update endpoint", err)
	}
	defer done()
	e, err := s.getEndpoint(ctx, tx, p.ID)
	if u := (*store.UnreadableError)(nil); p.ReplaceUnreadable && p.Headers != nil && store.OnlyHeadersUnreadable(err) && errors.As(err, &u) {
		// Header values that do not open, replaced below by p.Headers.
		e, err = u.Endpoint, nil
		e.Unreadable = nil
	}
	if err != nil {
		return store.Endpoint{}, err
	}
	if p.URL != nil {
		if *p.URL != e.URL && !e.FailingSince.IsZero() {
			// A new URL starts a new failure streak, as an enable does, and
			// like an enable it keeps a pending endpoint.recovered when the
			// streak had raised endpoint.failing (enableCount).
			e.FailingSince = time.Time{}
			if _, err := tx.ExecContext(ctx, "UPDATE endpoints SET failure_count = "+enableCount+" WHERE id = ?", p.ID); err != nil {
				return store.Endpoint{}, wrap("update endpoint", err)
			}
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
	s.endpointChanged()
	// Answer with the stored row, as GetEndpoint would: times truncated to
	// microseconds in UTC, empty filters and headers as stored.
	if e, err = s.getEndpoint(ctx, tx, p.ID); err != nil {
		return store.Endpoint{}, err
	}
	if p.Notice {
		if err := addNotice(ctx, tx, p.ID, store.NoticeEndpointUpdated, p.Now); err != nil {
			return store.Endpoint{}, wrap("update endpoint", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return store.Endpoint{}, wrap("update endpoint", err)
	}
	return e, nil
}

// DeleteEndpoint implements store.Store. It deletes the endpoint's row and
// the first chunk (deleteChunk) of its deliveries, with their attempts, in
// one transaction; the rest go one chunk per queue transaction after it,
// behind waiting publishes (deleteRest): deleting 200,000 deliveries in
// one transaction held the single writer, and every tenant's publishes,
// for 2 s (docs/BENCHMARKS.md). Until the last chunk commits, the
// remaining deliveries are the endpoint's no longer: it answers
// store.ErrNotFound, a claim that meets one deletes it instead of leasing
// it, and a crash between chunks is finished by the next start (a mark in
// the meta table, deletingMetaPrefix; takeClaimLock). An error of a later
// chunk is returned (wrapped) although the endpoint is gone; the rest is
// then retried in the background (retryDeleteRest).
func (s *Store) DeleteEndpoint(ctx context.Context, p store.DeleteEndpointParams) error {
	id := p.ID
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return wrap("delete endpoint", err)
	}
	defer done()
	if p.Notice {
		// The snapshot is taken before the row goes.
		if err := addNotice(ctx, tx, id, store.NoticeEndpointDeleted, p.Now); err != nil {
			return wrap("delete endpoint", err)
		}
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM endpoints WHERE id = ?", id)
	if err != nil {
		return wrap("delete endpoint", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("endpoint %s: %w", id, store.ErrNotFound)
	}
	s.endpointChanged()
	more, err := deleteFirstChunk(ctx, tx, id)
	if err != nil {
		return wrap("delete endpoint", err)
	}
	if err := tx.Commit(); err != nil {
		return wrap("delete endpoint", err)
	}
	done() // the next chunks take the writer again
	if more {
		if _, err := s.deleteRest(context.WithoutCancel(ctx), id); err != nil {
			s.retryDeleteRest(id, err)
			return wrap("delete endpoint: delete its deliveries", err)
		}
	}
	return nil
}

// retryDeleteRest runs deleteRest for endpoint id again, in the store's
// background (inBackground), after a wait that starts at s.retryWait
// and doubles up to a minute, until it succeeds or Close. A delete whose
// later chunk failed answers an error although the endpoint is gone, and
// its retry through the API answers not found without reaching the
// store: without this, its dead letters and held deliveries (which no
// claim meets) and its mark stayed until the next start.
func (s *Store) retryDeleteRest(id string, err error) {
	s.inBackground(func(ctx context.Context) {
		s.retry(ctx, "delete the deliveries of deleted endpoint "+id, err, func(ctx context.Context) error {
			_, err := s.deleteRest(ctx, id)
			return err
		})
	})
}

// retry runs f, in the store's background, after a wait that starts at
// s.retryWait and doubles up to a minute, again and again until it
// succeeds or ctx (Close) ends. what names the work and err is the
// failure that started the retry; the log gets a WARN for each failure
// with the wait before the next try, and an INFO when it succeeds.
func (s *Store) retry(ctx context.Context, what string, err error, f func(ctx context.Context) error) {
	for wait := s.retryWait; ; wait = min(max(2*wait, time.Millisecond), time.Minute) {
		s.log.Warn("sqlite: background work failed; trying again", "work", what, "error", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err = f(ctx); err == nil {
			s.log.Info("sqlite: background work done after a retry", "work", what)
			return
		}
		if ctx.Err() != nil {
			return // Close: the next start does the rest
		}
	}
}

// deleteFirstChunk deletes, on tx, the first chunk (deleteChunk) of the
// deliveries of endpoint id, whose row tx deleted, and marks the endpoint
// (deletingMetaPrefix) when more are left: more reports it, and the
// caller runs deleteRest after its commit.
func deleteFirstChunk(ctx context.Context, tx *sql.Tx, id string) (more bool, _ error) {
	res, err := tx.ExecContext(ctx, deleteDeliveriesSQL, id, deleteChunk)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n < deleteChunk {
		return false, nil
	}
	_, err = tx.ExecContext(ctx, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, '')", deletingMetaPrefix+id)
	return err == nil, err
}

// deleteDeliveriesSQL deletes at most ?2 deliveries of endpoint ?1 (their
// attempts with them: ON DELETE CASCADE).
const deleteDeliveriesSQL = `DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = ?1 LIMIT ?2)`

// deletingMetaPrefix, followed by an endpoint's id, is the meta key that
// marks a deleted endpoint whose deliveries are still being deleted
// (DeleteEndpoint): the last chunk removes it; a start finds the ones a
// crash left (takeClaimLock).
const deletingMetaPrefix = "deleting_endpoint:"

// deleteRest deletes the deliveries of a deleted endpoint left after the
// first chunk (deleteChunk), one chunk per queue transaction, and with
// the last one the endpoint's mark (deletingMetaPrefix). It answers how
// many it deleted. An endpoint row with the id (ids are never reused: it
// cannot be) stops it, the mark removed, deleting nothing.
func (s *Store) deleteRest(ctx context.Context, endpointID string) (int64, error) {
	return s.inChunks(ctx, deleteChunk, func(tx *sql.Tx) (int64, error) {
		var n int64
		_, found, err := endpointState(ctx, tx, endpointID)
		if err != nil {
			return 0, err
		}
		if !found {
			res, err := tx.ExecContext(ctx, deleteDeliveriesSQL, endpointID, deleteChunk)
			if err != nil {
				return 0, err
			}
			n, _ = res.RowsAffected()
		}
		if n < deleteChunk {
			if _, err := tx.ExecContext(ctx, "DELETE FROM meta WHERE key = ?", deletingMetaPrefix+endpointID); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
}

func mustSub(fsys embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}

// SealClearHeaders seals the custom header values of endpoints written
// before header values were sealed (store.SealHeaders), and answers how
// many endpoints it changed, in one transaction. Call it after
// store.CheckKey proved the key.
func (s *Store) SealClearHeaders(ctx context.Context) (int, error) {
	if s.box == nil {
		return 0, nil
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return 0, wrap("seal headers", err)
	}
	defer done()
	rows, err := tx.QueryContext(ctx, `SELECT id, headers FROM endpoints`)
	if err != nil {
		return 0, wrap("seal headers", err)
	}
	clear := map[string]map[string]string{}
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			rows.Close()
			return 0, wrap("seal headers", err)
		}
		var h map[string]string
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			rows.Close()
			return 0, store.Internal(fmt.Errorf("endpoint %s headers: %w", id, err))
		}
		if !store.HeadersSealed(h) {
			clear[id] = h
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, wrap("seal headers", err)
	}
	for id, h := range clear {
		open, err := store.OpenHeaders(s.box, id, h)
		if err != nil {
			return 0, err
		}
		sealed, err := store.SealHeaders(s.box, id, open)
		if err != nil {
			return 0, err
		}
		b, err := json.Marshal(sealed)
		if err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE endpoints SET headers=? WHERE id=?`, string(b), id); err != nil {
			return 0, wrap("seal headers", err)
		}
	}
	if len(clear) == 0 {
		return 0, nil
	}
	return len(clear), wrap("seal headers", tx.Commit())
}

// CheckDirectory applies Open's rule for the directory of the database at
// path: it must exist and not be writable by every user (who could plant
// or swap the -wal and -shm files, or the key file beside the database).
// Callers that write files beside the database first (its key file, a
// restored copy) check it before they do, so a refused start or restore
// leaves nothing behind.
func CheckDirectory(path string) error {
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sqlite: database directory: %w", err)
	}
	if info.Mode().Perm()&0o002 != 0 {
		mode := uint32(info.Mode().Perm())
		if info.Mode()&os.ModeSticky != 0 {
			mode |= 0o1000 // as ls and chmod write it: 1777, not 0777
		}
		return fmt.Errorf("sqlite: database directory %s is writable by every user (mode %04o): use a directory only Herald's user can write (chmod o-w)", dir, mode)
	}
	return nil
}

// prepareFiles makes the database's files private before SQLite opens
// them: it refuses a directory others may write to (they could plant or
// swap the -wal and -shm files), creates a new database file with mode
// 0600 (SQLite gives the -wal and -shm files the database file's mode),
// and takes group and other permissions off existing files.
func prepareFiles(path string) error {
	if err := CheckDirectory(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, info.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("sqlite: make %s private: %w", p, err)
			}
		}
	}
	return nil
}
