// Package postgres is the PostgreSQL store driver, for running Herald as
// several stateless nodes on one database. It uses pgx v5 with a pgxpool
// pool; migrations are embedded and applied by goose under a session-level
// advisory lock, so nodes starting together migrate once.
//
// # Semantics
//
// Every method has the semantics of the SQLite driver (the reference), which
// is fully serialised by its single writer connection. Here transactions run
// concurrently at READ COMMITTED, so the driver adds the locks that give the
// same outcomes:
//
//   - Claims pick due rows with FOR UPDATE SKIP LOCKED: concurrent claimers,
//     on one node or many, never lease one delivery twice and never wait on
//     each other.
//   - Publishes insert the event with ON CONFLICT DO NOTHING and, when a
//     concurrent publish won, read the original back: one publish of an id or
//     idempotency key creates the event, the others answer with it.
//   - A per-tenant advisory lock (transaction scoped) orders fan-out against
//     changes of the tenant's endpoints: publishes, completions, rescues and
//     replays take it shared; deleting an endpoint or a source, changing an
//     endpoint's state, and disabling one (410 Gone, or a failure streak
//     past DisableAfter) take it exclusively. So a publish never adds a
//     pending delivery to an endpoint that was just paused or disabled (it
//     would not be held), a held one to an endpoint that was just enabled
//     (it would stay held), or any to an endpoint being deleted (it would be
//     orphaned); and a retry completed concurrently with a pause is held, as
//     it would be in SQLite. A state change (SetEndpointState) holds the
//     lock exclusively for the change and the first chunk of its move of
//     the endpoint's deliveries only; the rest of the move runs in chunks
//     under the shared lock, each re-reading the endpoint's state, so the
//     tenant's publishes do not wait for a large move. Until a pause's
//     chunks reach them, the endpoint's pending deliveries may be claimed:
//     the claim reads the endpoint as paused, and the engine puts it back
//     without an attempt, which holds it. A disable by a completion holds
//     one chunk in the completion batch and leaves the rest to the lease
//     rescue (disableEndpointQuery, finishReleases). A delete takes the
//     lock exclusively for the endpoint's row and the first chunk of its
//     deliveries; the rest are deleted in chunks without the lock (no
//     delivery of the endpoint is created once its row is gone), and the
//     lease rescue finishes a delete whose node stopped (DeleteEndpoint,
//     finishDeletions).
//   - Completions lock their deliveries' rows (in id order) before numbering
//     attempts MAX(number)+1, so a stale owner's late attempt and the current
//     owner's attempt of one delivery never collide.
//
// Locks are always taken in the order tenant locks (sorted by key), then
// delivery rows (sorted by id), then endpoint rows (sorted by id; a batch of
// completions locks the endpoints it may update before updating them), which
// keeps deadlocks out of the normal paths. The exceptions: ContinueFanOut,
// which takes its fanouts row before the tenant lock, with SKIP LOCKED: it
// never waits for that row, so it cannot close a cycle; and a completion
// that disables an endpoint, which locks one chunk of the endpoint's
// pending deliveries after the endpoint's row, under the tenant's
// exclusive lock: no transaction that waits for an endpoint row can hold
// one of them then (every writer of them that locks an endpoint row takes
// the tenant's lock first; claims skip locked rows, and the circuit's
// postponements lock no endpoint row). The writers of several delivery
// rows that take no tenant lock lock them in id order too, first, then
// write them by primary key (a plain UPDATE or DELETE locks rows in its
// plan's order, often the table's, and deadlocked with the id-ordered
// chunks of a hold or a delete): the circuit's postponements and moves
// without a limit, a claim's give-back of leases, its dead-lettering of
// poisoned deliveries and its delete of the deliveries of a deleted
// endpoint, a delete's chunks.
//
// # Group commit and asynchronous bookkeeping
//
// Concurrent PublishEvent calls are group-committed (groupcommit.go): one
// transaction, one WAL flush and one NOTIFY per group, each caller answered
// after the commit. Claims and completions commit with synchronous_commit
// off: a crash of the server may lose the last of them, which only repeats
// attempts (at least once); publishes keep the server's setting.
//
// # Notifications
//
// A publish that creates pending deliveries (and a rescue, a replay or an
// enable that makes deliveries claimable) sends NOTIFY herald_deliveries
// with its commit (one per group of publishes); Listen turns those into calls of a function, so every
// node's engine wakes up when there is work, not only the node that took
// the request.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/herald-webhooks/herald/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLockID returns the key of the session-level advisory lock held
// while migrating: Herald's own (it does not wait on other applications that
// use goose in the same database) and one per schema, since the schema
// (search_path) holds the tables and goose's version table: Herald
// deployments in two schemas of one database migrate independently.
func migrationLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("herald migrations\x00" + schema))
	return int64(h.Sum64() &^ (1 << 63))
}

// tenantLockClass is the first key of the per-tenant advisory locks
// (pg_advisory_xact_lock(class, hashtext(tenant))); two-key advisory locks
// do not collide with single-key ones such as the migration lock.
const tenantLockClass = 1751479905 // "hera"

// endpointCountLockClass is the first key of the lock that serializes
// endpoint creations of one tenant when a limit applies.
const endpointCountLockClass = 1751479906

// adminKeysLockClass is the first key of the session lock that serializes
// admin-key revocations across nodes (LockAdminKeys).
const adminKeysLockClass = 1751479907

// Store is the PostgreSQL implementation of store.Store.
type Store struct {
	pool      *pgxpool.Pool
	box       store.SecretBox // encrypts endpoint secrets at rest; nil = plain JSON (tests)
	log       *slog.Logger    // WithLogger; discards by default
	committer *committer      // group commit of PublishEvent
	// tag is the payload of the notifications of this store's publishes:
	// its own Listen skips them (PublishEvent's callers wake their engine
	// themselves), every other node's wakes up.
	tag string
	// alone: this node's last heartbeat found no other live node, so a
	// publish's NOTIFY would wake nobody (the node's own engine is woken
	// by the caller, and its Listen skips its own notifications). Set by
	// Heartbeat; false until the first one (notify, in case).
	alone atomic.Bool
	// handOff is the engine's side of the hand-off (SetHandOff; nil: none).
	handOff store.HandOffSlot
	// lastLeaseEnd is the last lease end this store gave a claim or a
	// hand-off (µs since the epoch, as stored): see leaseEnd.
	lastLeaseEnd atomic.Int64
	// beforeChunk, when set (tests), runs before each chunk of a pause's
	// or a resume's move, or of a delete, after the first, outside any
	// transaction.
	beforeChunk func()
	// sweepLockTimeout, when set (tests), replaces sweepLockWait.
	sweepLockTimeout string
}

// sweepLockWait is the longest a chunk of the lease rescue's sweep
// (finishReleases, finishDeletions) waits for a row's lock: a row that a
// stuck session holds fails that chunk, and the round goes on with the
// other moves and deletes, instead of spending its whole deadline there.
// The chunks a state change or a delete runs after its commit (moveChunks,
// deleteChunks), which ignore their caller's cancellation, wait as long at
// most: such a row fails the call, the rest left to the rescue.
const sweepLockWait = "5s"

// sweepLockSetting is the lock_timeout of a sweep's chunk.
func (s *Store) sweepLockSetting() string {
	if s.sweepLockTimeout != "" {
		return s.sweepLockTimeout
	}
	return sweepLockWait
}

// setSweepLockTimeout is the statement that sets a sweep's chunk's
// lock_timeout ($1) for its transaction.
const setSweepLockTimeout = "SELECT set_config('lock_timeout', $1, true)"

// leaseEnd returns t (a claim's or a hand-off's lease end) as stored, made
// unique among the lease ends this store gave within the last second of
// readings. A claim finds the rows it leased by owner and lease end (the
// fill's room, its events and endpoints: claimFillSQL, claimedEvents), and
// its completions match on both; two claims or hand-offs of one owner at
// one clock reading (within the same microsecond, or always on a clock
// that stands still) would otherwise share them, and the second claim's
// fill would count the first's rows as its own and take that many fewer.
// A reading more than a second behind the last end (a clock set back) is
// taken as it is, so that a lease never ends later than a second past
// what its clock asked for.
func (s *Store) leaseEnd(t time.Time) time.Time {
	want := t.UnixMicro()
	for {
		last := s.lastLeaseEnd.Load()
		end := want
		if want <= last && last-want < int64(time.Second/time.Microsecond) {
			end = last + 1
		}
		if s.lastLeaseEnd.CompareAndSwap(last, end) {
			return time.UnixMicro(end).UTC()
		}
	}
}

// Option configures Open.
type Option func(*Store)

// WithSecretBox encrypts endpoint secrets at rest with box.
func WithSecretBox(box store.SecretBox) Option {
	return func(s *Store) { s.box = box }
}

// WithLogger sends to l, at level WARN, the failures of the work a call
// leaves to the lease rescue once its change is committed (a later chunk
// of a pause's, a resume's or a delete's move that failed); by default
// they are discarded.
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.log = l }
}

// leftToRescue logs err, the failure of a chunk after what's change
// committed, and answers nil: the change is in force and the lease rescue
// finishes the rest (finishReleases, finishDeletions), so the call
// reports success, as SQLite's does (which retries in the background).
func (s *Store) leftToRescue(what string, err error) error {
	s.log.Warn("postgres: a chunk after the change failed; the lease rescue finishes the rest", "work", what, "error", err)
	return nil
}

// The store interface and the capabilities this driver declares
// (Capabilities).
var (
	_ store.Store             = (*Store)(nil)
	_ store.Notifier          = (*Store)(nil)
	_ store.Membership        = (*Store)(nil)
	_ store.NodeLister        = (*Store)(nil)
	_ store.ClearHeaderSealer = (*Store)(nil)
	_ store.HandOffer         = (*Store)(nil)
	_ store.SealedStore       = (*Store)(nil)
	_ store.AdminKeyLocker    = (*Store)(nil)
)

// Capabilities implements store.Store: LISTEN/NOTIFY wake-ups, cluster
// membership and its list of live nodes, the sealing of clear header
// values and the rekey of sealed values, and two claimers (a claim is a
// round trip to the server).
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Wakeups: s, Membership: s, Nodes: s, Claimers: 2, HeaderSealer: s, Sealed: s, HandOff: s, AdminLock: s}
}

// DefaultMaxConns is the pool size when the URL sets no pool_max_conns
// (pgx's own default, the number of CPUs and at least 4, is below what one
// node uses at once: 2 claimers, 2 completers, 2 group commits, the
// heartbeat, and the API's reads such as a publish's catalog lookup, which
// waited for a connection). Measured at 1,000 publishes/s on 2 cores
// (docs/BENCHMARKS.md): publish → arrival p50 51–80 ms with 4, 26–30 ms
// with 16.
const DefaultMaxConns = 16

// parseConfig reads a connection string as pgxpool does, a URL's scheme
// in any case: schemes are case-insensitive (RFC 3986 §3.1), while pgx
// takes only "postgres://" and "postgresql://" for a URL and reads
// "POSTGRES://…" as a keyword/value string (which it parsed as no setting
// at all: the local socket's default database).
func parseConfig(url string) (*pgxpool.Config, error) {
	if scheme, rest, ok := strings.Cut(url, "://"); ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")) {
		url = strings.ToLower(scheme) + "://" + rest
	}
	return pgxpool.ParseConfig(url)
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, including pgxpool settings such as pool_max_conns),
// applies the embedded migrations and returns the store. Several processes
// may Open one database at the same time: one migrates, the others wait for
// it and find nothing to do.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		// pgconn's ParseConfigError redacts the password.
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", describe(cfg), classify(err))
	}
	if err := migrate(ctx, cfg.ConnConfig); err != nil {
		pool.Close()
		if !errors.Is(err, store.ErrSchemaTooNew) && !errors.Is(err, errNoSchema) { // the database answered: not an outage
			err = classify(err)
		}
		return nil, fmt.Errorf("postgres: migrate %s: %w", describe(cfg), err)
	}
	s := &Store{pool: pool, tag: store.NewID("node"), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	s.committer = newCommitter(s)
	return s, nil
}

// errNoSchema means no schema the search_path names exists: a
// configuration error (the database answered), not an outage.
var errNoSchema = errors.New("no schema of the search_path exists")

// noSchemaError is errNoSchema naming the search_path and what to do.
func noSchemaError(searchPath string) error {
	return fmt.Errorf("%w (search_path %s): create it first (CREATE SCHEMA …), or fix search_path", errNoSchema, searchPath)
}

// describe names the database for error messages, without credentials.
func describe(cfg *pgxpool.Config) string {
	return fmt.Sprintf("database %q on %s:%d", cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
}

// migrate applies the embedded migrations through database/sql on its own
// connections (not the pool's): the session-level advisory lock goose holds
// while migrating then can never stay behind on a pooled connection.
func migrate(ctx context.Context, cc *pgx.ConnConfig) error {
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	var (
		schema     sql.NullString
		migrated   bool
		searchPath string
	)
	if err := db.QueryRowContext(ctx, "SELECT current_schema(), to_regclass('goose_db_version') IS NOT NULL, current_setting('search_path')").Scan(&schema, &migrated, &searchPath); err != nil {
		return err
	}
	if !schema.Valid {
		return noSchemaError(searchPath)
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID(schema.String)),
		lock.WithLockTimeout(1, 300), // try every second for 5 minutes
		lock.WithUnlockTimeout(1, 60),
	)
	if err != nil {
		return err
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	// The logger is set on the provider, not with goose.SetLogger: that
	// writes a package global, a data race when stores are opened
	// concurrently. The global registry of Go migrations is not ours.
	prov, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithSessionLocker(locker),
		goose.WithLogger(goose.NopLogger()),
		goose.WithDisableGlobalRegistry(true),
		// Versions are handed out in blocks to parallel lines of work, so
		// a database at version 30 may still lack 20–24: apply them then.
		// Each migration is written to run before or after the others.
		goose.WithAllowOutofOrder(true),
	)
	if err != nil {
		return err
	}
	// The usual start (nodes restarting on a migrated database) needs no
	// lock: HasPending reads the version table without it. Up takes the
	// lock and checks again, so a race between nodes is still safe. On an
	// empty database HasPending is skipped: it would create the version
	// table outside the lock, racing with the other nodes.
	if migrated {
		if err := checkSchema(ctx, prov); err != nil {
			return err
		}
		if pending, err := prov.HasPending(ctx); err == nil && !pending {
			return nil
		}
	}
	return upWaitingForLocks(ctx, prov, migrationLockRetry, nil)
}

// migrationLockRetry is how long a migration that gave up waiting for a
// lock is left before it runs again (upWaitingForLocks), for up to
// migrationLockWait.
const (
	migrationLockRetry = 5 * time.Second
	migrationLockWait  = 5 * time.Minute
)

// upWaitingForLocks applies prov's pending migrations. A migration that
// needs a lock which blocks other sessions (ALTER TABLE) sets a short
// lock_timeout of its own (SET LOCAL), so that waiting behind a long
// transaction (a pg_dump, a report) it does not make every statement on
// the table, of every node, queue behind it; it then fails with
// lock_not_available (55P03), is rolled back, and is run again every
// retry, for up to migrationLockWait. onRetry, when set (tests), is told of
// each such failure.
func upWaitingForLocks(ctx context.Context, prov *goose.Provider, retry time.Duration, onRetry func(error)) error {
	deadline := time.Now().Add(migrationLockWait)
	for {
		_, err := prov.Up(ctx)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55P03" || time.Now().After(deadline) {
			if err != nil && pgErr != nil && pgErr.Code == "55P03" {
				return fmt.Errorf("a migration waited %v for a lock a long transaction holds (a pg_dump, a report: see pg_stat_activity); start the node again once it has ended: %w", migrationLockWait, err)
			}
			return err
		}
		if onRetry != nil {
			onRetry(err)
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Pool returns the connection pool (for health metrics and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping implements store.Store; it is the readiness probe (/readyz): it
// fails, wrapping store.ErrUnavailable, unless a transaction that rewrites
// one existing meta row (the key check, unchanged) commits, so a server
// that answers but cannot write (a read-only standby after a failover,
// default_transaction_read_only, a full disk) is not ready. It adds no
// rows.
func (s *Store) Ping(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrap("ping", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "UPDATE meta SET value = value WHERE key = $1", store.KeyCheckMeta); err != nil {
		return wrap("ping: the store cannot write", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return wrap("ping: the store cannot commit", err)
	}
	return nil
}

// Close implements store.Store. Publishes still queued are answered with
// store.ErrUnavailable, group commits in flight finish; then Close waits
// for acquired connections to be released. Listen loops end with their own
// context, not with Close.
func (s *Store) Close() error {
	s.committer.close()
	s.pool.Close()
	return nil
}

// ts prepares a time for a timestamptz column: microsecond precision (what
// the column keeps), UTC.
func ts(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

// nullTS is ts for a nullable column: the zero time is NULL.
func nullTS(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	v := ts(t)
	return &v
}

// fromNullTS reads a nullable timestamptz: NULL is the zero time.
func fromNullTS(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// classify maps a driver error to the store's errors: an error that
// already has a code (store.Classified: a *store.Error, a context error)
// stays as it is; anything else means the database could not be reached
// or could not do the work: store.ErrUnavailable, with the cause kept in
// the chain (errors.As finds the *pgconn.PgError).
func classify(err error) error {
	if store.Classified(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// wrap names the operation and classifies err; pgx.ErrNoRows becomes
// store.ErrNotFound.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, classify(err))
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

const endpointColumns = "id, tenant, url, description, event_types, headers, rate_limit_per_second, state, state_reason, secrets, created_at, updated_at, failing_since, kind, versions"

func (s *Store) scanEndpoint(row pgx.Row) (store.Endpoint, error) {
	var (
		e                    store.Endpoint
		types, headers, vers []byte
		state, secrets       string
		createdAt, updatedAt time.Time
		failingSince         *time.Time
	)
	if err := row.Scan(&e.ID, &e.Tenant, &e.URL, &e.Description, &types, &headers, &e.RateLimitPerSecond, &state, &e.StateReason, &secrets, &createdAt, &updatedAt, &failingSince, &e.Kind, &vers); err != nil {
		return e, err
	}
	if err := json.Unmarshal(vers, &e.Versions); err != nil {
		return e, store.Unreadable(e.ID, e.Tenant, store.Internal(fmt.Errorf("endpoint %s versions: %w", e.ID, err)))
	}
	e.State = store.EndpointState(state)
	e.CreatedAt, e.UpdatedAt = createdAt.UTC(), updatedAt.UTC()
	e.FailingSince = fromNullTS(failingSince)
	if err := json.Unmarshal(types, &e.EventTypes); err != nil {
		return e, store.Unreadable(e.ID, e.Tenant, store.Internal(fmt.Errorf("endpoint %s event_types: %w", e.ID, err)))
	}
	if err := json.Unmarshal(headers, &e.Headers); err != nil {
		return e, store.Unreadable(e.ID, e.Tenant, store.Internal(fmt.Errorf("endpoint %s headers: %w", e.ID, err)))
	}
	// Every sealed value tried; those that do not open are named in the
	// *store.UnreadableError, with the rest of the row.
	if err := store.OpenEndpointValues(s.box, &e, e.Headers, secrets); err != nil {
		return e, err
	}
	return e, nil
}

// jsonOf renders v as JSON text for a jsonb parameter.
func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func eventTypesJSON(types []string) (string, error) {
	if types == nil {
		types = []string{}
	}
	return jsonOf(types)
}

func versionsJSON(v map[string]int) (string, error) {
	if v == nil {
		v = map[string]int{}
	}
	return jsonOf(v)
}

// headersJSON renders an endpoint's custom headers for endpoints.headers,
// each value sealed (store.SealHeaders).
func (s *Store) headersJSON(endpointID string, h map[string]string) (string, error) {
	if h == nil {
		h = map[string]string{}
	}
	sealed, err := store.SealHeaders(s.box, endpointID, h)
	if err != nil {
		return "", err
	}
	return jsonOf(sealed)
}

// CreateEndpoint implements store.Store.
func (s *Store) CreateEndpoint(ctx context.Context, p store.CreateEndpointParams) (store.Endpoint, error) {
	q, args, err := s.insertEndpoint(p.Endpoint)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("create endpoint: %w", err)
	}
	if p.Notice {
		// One statement: the endpoint and its endpoint.created notice.
		q = `WITH ins AS (` + q + `), notice AS (
			INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
			SELECT id, tenant, url, kind, state, state_reason, '` + store.NoticeEndpointCreated + `', created_at FROM ins)
			SELECT ` + endpointColumns + ` FROM ins`
	}
	// Answer with the row as stored, as GetEndpoint would.
	var got store.Endpoint
	if p.MaxPerTenant > 0 {
		// The tenant's endpoint-count lock serializes creations in one
		// tenant, so the count and the insert are atomic.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var n int
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::integer, hashtext($2))", endpointCountLockClass, p.Endpoint.Tenant); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, "SELECT COUNT(*) FROM endpoints WHERE tenant = $1", p.Endpoint.Tenant).Scan(&n); err != nil {
				return err
			}
			if n >= p.MaxPerTenant {
				return store.EndpointLimit(p.Endpoint.Tenant, n, p.MaxPerTenant)
			}
			var err error
			got, err = s.scanEndpoint(tx.QueryRow(ctx, q, args...))
			return err
		})
		if errors.Is(err, store.ErrLimit) {
			return store.Endpoint{}, err
		}
	} else {
		got, err = s.scanEndpoint(s.pool.QueryRow(ctx, q, args...))
	}
	if err != nil {
		if isUniqueViolation(err) {
			return store.Endpoint{}, store.Exists("endpoint " + p.Endpoint.ID)
		}
		return store.Endpoint{}, wrap("create endpoint", err)
	}
	return got, nil
}

// insertEndpoint is the INSERT … RETURNING of a new endpoint.
func (s *Store) insertEndpoint(e store.Endpoint) (string, []any, error) {
	if e.State == "" {
		e.State = store.EndpointEnabled
	}
	types, err := eventTypesJSON(e.EventTypes)
	if err != nil {
		return "", nil, err
	}
	headers, err := s.headersJSON(e.ID, e.Headers)
	if err != nil {
		return "", nil, err
	}
	sec, err := store.EncodeSecrets(s.box, e.ID, e.Secrets)
	if err != nil {
		return "", nil, err
	}
	versions, err := versionsJSON(e.Versions)
	if err != nil {
		return "", nil, err
	}
	return "INSERT INTO endpoints (" + endpointColumns + `)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb) RETURNING ` + endpointColumns,
		[]any{e.ID, e.Tenant, e.URL, e.Description, types, headers, e.RateLimitPerSecond, string(e.State), e.StateReason, sec,
			ts(e.CreatedAt), ts(e.UpdatedAt), nullTS(e.FailingSince), e.Kind, versions}, nil
}

// GetEndpoint implements store.Store.
func (s *Store) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	e, err := s.scanEndpoint(s.pool.QueryRow(ctx, "SELECT "+endpointColumns+" FROM endpoints WHERE id = $1", id))
	if err != nil {
		return store.Endpoint{}, wrap("endpoint "+id, err)
	}
	return e, nil
}

// filter builds a WHERE clause with numbered parameters.
type filter struct {
	where []string
	args  []any
}

// add appends a condition; "?" in cond is replaced by the next parameter.
func (f *filter) add(cond string, arg any) {
	f.args = append(f.args, arg)
	f.where = append(f.where, strings.Replace(cond, "?", fmt.Sprintf("$%d", len(f.args)), 1))
}

func (f *filter) clause() string {
	if len(f.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(f.where, " AND ")
}

// limit appends the LIMIT parameter and returns its placeholder.
func (f *filter) limit(n int) string {
	f.args = append(f.args, n)
	return fmt.Sprintf(" LIMIT $%d", len(f.args))
}

// ListEndpoints implements store.Store. Endpoints are listed newest first
// by id (ids are time-sortable); the cursor is the last id of the page.
func (s *Store) ListEndpoints(ctx context.Context, p store.ListEndpointsParams) (store.Page[store.Endpoint], error) {
	var f filter
	if p.Tenant != "" {
		f.add("tenant = ?", p.Tenant)
	}
	switch {
	case p.OnlySources:
		f.where = append(f.where, "kind = 'source'")
	case !p.IncludeSources:
		f.where = append(f.where, "kind = ''")
	}
	if p.Cursor != "" {
		f.add("id < ?", p.Cursor)
	}
	lim := p.ListParams.PageSize()
	q := "SELECT " + endpointColumns + " FROM endpoints" + f.clause() + " ORDER BY id DESC" + f.limit(lim+1)
	rows, err := s.pool.Query(ctx, q, f.args...)
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

// UpdateEndpoint implements store.Store. One UPDATE: fields left nil keep
// their stored value (COALESCE with a NULL parameter), so there is no
// read-modify-write window for a concurrent change to fall into; it runs
// after a locked read of the row on the same transaction, which refuses an
// endpoint whose stored values do not open (unless p replaces them). A new
// URL starts a new failure streak.
func (s *Store) UpdateEndpoint(ctx context.Context, p store.UpdateEndpointParams) (store.Endpoint, error) {
	var types, headers, versions *string
	if p.Versions != nil {
		v, err := versionsJSON(*p.Versions)
		if err != nil {
			return store.Endpoint{}, fmt.Errorf("update endpoint: %w", err)
		}
		versions = &v
	}
	if p.EventTypes != nil {
		v, err := eventTypesJSON(*p.EventTypes)
		if err != nil {
			return store.Endpoint{}, fmt.Errorf("update endpoint: %w", err)
		}
		types = &v
	}
	if p.Headers != nil {
		v, err := s.headersJSON(p.ID, *p.Headers)
		if err != nil {
			return store.Endpoint{}, fmt.Errorf("update endpoint: %w", err)
		}
		headers = &v
	}
	// A new URL starts a new failure streak and, as an enable does
	// (enableCount), keeps a pending endpoint.recovered when the streak had
	// raised endpoint.failing.
	q := `UPDATE endpoints SET
		failing_since = CASE WHEN $2::text IS NOT NULL AND $2::text <> url THEN NULL ELSE failing_since END,
		failure_count = CASE WHEN $2::text IS NOT NULL AND $2::text <> url THEN ` + enableCount + ` ELSE failure_count END,
		url = COALESCE($2::text, url),
		description = COALESCE($3::text, description),
		event_types = COALESCE($4::jsonb, event_types),
		headers = COALESCE($5::jsonb, headers),
		rate_limit_per_second = COALESCE($6::integer, rate_limit_per_second),
		updated_at = $7,
		versions = COALESCE($8::jsonb, versions)
		WHERE id = $1 RETURNING ` + endpointColumns
	if p.Notice {
		// One statement: the change and its endpoint.updated notice.
		q = `WITH up AS (` + q + `), notice AS (
			INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
			SELECT id, tenant, url, kind, state, state_reason, '` + store.NoticeEndpointUpdated + `', updated_at FROM up)
			SELECT ` + endpointColumns + ` FROM up`
	}
	// The row is read first, locked, on the UPDATE's transaction (one
	// round trip, and the commit): an endpoint whose stored values do not
	// open is changed only when p replaces them (the header values, with
	// p.ReplaceUnreadable), else the update fails with the
	// *store.UnreadableError and the transaction, UPDATE included, is
	// rolled back.
	var e store.Endpoint
	op := "update endpoint " + p.ID
	b := newTxBatch()
	b.Queue("SELECT "+endpointColumns+" FROM endpoints WHERE id = $1 FOR NO KEY UPDATE", p.ID).QueryRow(func(row pgx.Row) error {
		_, err := s.scanEndpoint(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // the UPDATE finds none either: not found
		}
		if err != nil && p.ReplaceUnreadable && p.Headers != nil && store.OnlyHeadersUnreadable(err) {
			return nil // replaced whole
		}
		return err
	})
	b.Queue(q, p.ID, p.URL, p.Description, types, headers, p.RateLimitPerSecond, ts(p.Now), versions).QueryRow(func(row pgx.Row) error {
		var err error
		e, err = s.scanEndpoint(row)
		return err
	})
	if err := s.txBatch(ctx, op, b, nil); err != nil {
		return store.Endpoint{}, err
	}
	return e, nil
}

// DeleteEndpoint implements store.Store. The tenant lock is taken
// exclusively first: publishes of the tenant that already read the
// endpoint commit before the delete (so their deliveries are deleted
// too), and later ones no longer see it. In that transaction the
// endpoint's row goes with the first moveChunk of its deliveries; when
// more may be left the delete is recorded (endpoint_deletions) and the
// rest are deleted in chunks of moveChunk after the commit, each in a
// transaction of its own without the tenant's lock (deleteChunks; no
// delivery of the endpoint is created once its row is gone), so the
// tenant's publishes do not wait for the whole delete (150,000
// deliveries took most of a second in one statement). The call returns
// when every delivery is deleted, even if ctx is cancelled after the
// commit, or when a chunk fails (one waits at most sweepLockWait for a
// row's lock: logged, WithLogger, and the call still succeeds, the delete
// being committed); a node that stops between chunks, or a failed chunk,
// leaves the rest to any node's lease rescue (finishDeletions). Until then a claim of one of the
// deliveries left finds no endpoint and deletes it (ClaimDeliveries); the
// tenant's and the event's delivery lists leave them out
// (listDeliveriesQuery), a replay of one answers not found
// (ReplayDeliveries), GetDelivery and ListAttempts answer not found
// (notDeleting); Stats still counts them.
//
// Errors: store.ErrNotFound (no such endpoint: nothing deleted); none
// once the delete is committed.
func (s *Store) DeleteEndpoint(ctx context.Context, p store.DeleteEndpointParams) error {
	id := p.ID
	var (
		deleted int64
		rest    deletion
		more    bool
	)
	b := newTxBatch()
	b.Queue("SELECT pg_advisory_xact_lock($2::integer, hashtext(tenant)) FROM endpoints WHERE id = $1", id, tenantLockClass)
	if p.Notice {
		// The snapshot is taken before the row goes.
		b.Queue(addNoticeQuery, id, store.NoticeEndpointDeleted, ts(p.Now))
	}
	b.Queue("DELETE FROM endpoints WHERE id = $1", id).Exec(func(ct pgconn.CommandTag) error {
		deleted = ct.RowsAffected()
		return nil
	})
	err := s.txBatch(ctx, "delete endpoint", b, func(tx pgx.Tx) error {
		if deleted == 0 {
			return fmt.Errorf("endpoint %s: %w", id, store.ErrNotFound)
		}
		var err error
		rest, more, err = startDeletion(ctx, tx, id)
		return err
	})
	if err != nil || !more {
		return err
	}
	if _, _, err := s.deleteChunks(context.WithoutCancel(ctx), rest); err != nil {
		return s.leftToRescue("delete the deliveries of deleted endpoint "+id, err)
	}
	return nil
}

// newTxBatch returns a batch that begins a transaction: BEGIN travels with
// the first statements, saving a round trip.
func newTxBatch() *pgx.Batch {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	return b
}

// txBatch sends b (made by newTxBatch) as the first round trip of a
// transaction, runs then (further round trips on the transaction; may be
// nil) and commits. Any error rolls the transaction back and is wrapped with
// op.
func (s *Store) txBatch(ctx context.Context, op string, b *pgx.Batch, then func(tx pgx.Tx) error) error {
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit; releases the connection
	if err := br.Close(); err != nil {
		return wrap(op, err)
	}
	if then != nil {
		if err := then(tx); err != nil {
			return wrap(op, err)
		}
	}
	return wrap(op, tx.Commit(ctx))
}

// SealClearHeaders seals the custom header values of endpoints written
// before header values were sealed (store.SealHeaders), and answers how
// many endpoints it changed. Call it after store.CheckKey proved the key.
func (s *Store) SealClearHeaders(ctx context.Context) (int, error) {
	if s.box == nil {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, headers FROM endpoints`)
	if err != nil {
		return 0, wrap("seal headers", err)
	}
	clear := map[string]map[string]string{}
	for rows.Next() {
		var id string
		var raw []byte
		if err := rows.Scan(&id, &raw); err != nil {
			rows.Close()
			return 0, wrap("seal headers", err)
		}
		var h map[string]string
		if err := json.Unmarshal(raw, &h); err != nil {
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
		v, err := s.headersJSON(id, open)
		if err != nil {
			return 0, err
		}
		// Only a row still holding what was read: a concurrent update
		// (already sealed) wins.
		if _, err := s.pool.Exec(ctx, `UPDATE endpoints SET headers=$2::jsonb WHERE id=$1 AND headers=$3::jsonb`, id, v, mustJSON(h)); err != nil {
			return 0, wrap("seal headers", err)
		}
	}
	return len(clear), nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
