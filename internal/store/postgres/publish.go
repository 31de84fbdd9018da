package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-webhooks/herald/internal/store"
)

// ErrIsolation is returned by PublishTx for a transaction that does not run
// at READ COMMITTED.
var ErrIsolation = errors.New("publishing needs a READ COMMITTED transaction")

// PublishTx stores an event and fans it out on tx, a transaction of the
// caller's (the transactional outbox: the event and its deliveries exist if
// and only if tx commits). It runs the statements of Store.PublishEvent —
// the same tenant lock, insert, fan-out, idempotency and answers — and
// queues NOTIFY herald_deliveries, which PostgreSQL sends when tx commits,
// so every node's engine wakes up then; nothing is claimable before.
//
// p is as for PublishEvent: the caller renders Event.Body (store.EncodeBody)
// and Event.Fingerprint (store.Fingerprint). A zero p.Now is time.Now, a nil
// p.NewDeliveryID makes "dlv_" ids with store.NewID.
//
// tx must run at READ COMMITTED (PostgreSQL's default): the fan-out reads
// the tenant's endpoints after taking the tenant lock, and only a fresh
// snapshot sees an endpoint paused or deleted just before. Any other level
// gets ErrIsolation before anything is sent on tx. Until tx ends it holds
// the tenant's advisory lock shared: pausing, deleting or disabling an
// endpoint of that tenant waits for tx (keep such transactions short).
//
// Errors: ErrIsolation; store.ErrStaleCatalog when p.CatalogRevision is
// set and is not the event type's stored revision (nothing was sent but a
// read); store.ErrConflict (wrapped) when the id or the idempotency key was
// used with other content. After these tx can still be used.
// Otherwise the database's error as pgx returns it (errors.As finds a
// *pgconn.PgError), not classified as store.ErrUnavailable since the
// transaction is the caller's: after it tx is aborted and must be rolled
// back.
func PublishTx(ctx context.Context, tx pgx.Tx, p store.PublishParams) (store.PublishResult, error) {
	if p.Now.IsZero() {
		p.Now = time.Now().UTC()
	}
	if p.NewDeliveryID == nil {
		p.NewDeliveryID = func() string { return store.NewID("dlv") }
	}
	op, err := newPublishOp(p)
	if err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	var (
		level    string
		revision int
	)
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_isolation'), "+catalogRevisionSQL,
		p.Event.Type).Scan(&level, &revision); err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	if level != "read committed" {
		return store.PublishResult{}, fmt.Errorf("publish: the transaction runs at %s: %w", level, ErrIsolation)
	}
	if !store.CatalogCurrent(p.CatalogRevision, revision) {
		return store.PublishResult{}, fmt.Errorf("publish: %w", store.ErrStaleCatalog)
	}
	b := &pgx.Batch{}
	b.Queue(lockTenantShared, tenantLockClass, p.Event.Tenant)
	tenants := map[endpointsKey]*tenantEndpoints{}
	key := endpointsKey{p.Event.Tenant, p.Event.Type}
	queueEndpoints(b, tenants, key)
	op.queueInsert(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	op.target(tenants[key])
	if err := finishOps(ctx, tx, []*publishOp{op}, "", true, nil); err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	if op.err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", op.err)
	}
	return op.res, nil
}

// publishOp is one publish: its insert (queued after a BEGIN, or on a
// caller's transaction) and what it found, then finishOps' deliveries and
// answer. A group commit (groupcommit.go) runs many on one transaction.
type publishOp struct {
	p                       store.PublishParams
	body                    []byte
	idem, headers, versions *string

	// Set by the insert's callback and target.
	inserted bool
	// numbered is the event with its sequence number (numberOps), nil
	// when it has none.
	numbered *store.Event
	targets  []publishTarget
	fanOut   bool // only the first chunk of targets is written (fanouts row)

	// The answer, set by finishOps: res, or err (a conflict) when the
	// transaction is still usable.
	res store.PublishResult
	err error
}

type publishTarget struct {
	id    string
	state store.DeliveryState
}

func newPublishOp(p store.PublishParams) (*publishOp, error) {
	op := &publishOp{p: p, body: p.Event.Body}
	if op.body == nil {
		op.body = []byte{}
	}
	if p.Event.IdempotencyKey != "" {
		op.idem = &p.Event.IdempotencyKey
	}
	if len(p.Event.Headers) > 0 { // none is NULL, read back as nil
		h, err := jsonOf(p.Event.Headers)
		if err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
		op.headers = &h
	}
	if len(p.Event.VersionBodies) > 0 {
		v, err := store.EncodeVersionBodies(p.Event.VersionBodies)
		if err != nil {
			return nil, fmt.Errorf("version bodies: %w", err)
		}
		op.versions = &v
	}
	return op, nil
}

// catalogRevisionSQL is the revision a publish's catalog check
// (PublishParams.CatalogRevision) is compared with: the type's ($1), else
// -1 when a name differing only in case is catalogued (never current; on
// the index event_types_lower_name), else 0 (not catalogued).
const catalogRevisionSQL = "COALESCE((SELECT revision FROM event_types WHERE name = $1), (SELECT -1 FROM event_types WHERE lower(name) = lower($1) LIMIT 1), 0)"

// catalogCheckSQL reads the revisions of the catalogued types whose folded
// names are in $1: on the index event_types_lower_name, for a catalogued
// name as for one that is not (a scan of event_types per publish before).
const catalogCheckSQL = "SELECT name, revision FROM event_types WHERE lower(name) = ANY($1::text[])"

// catalogRevisions are the stored revisions of the event types a
// transaction's publishes were checked against (PublishParams.
// CatalogRevision), read in its first round trip, before anything is
// written, as catalogRevisionSQL reads one: a type not in the map is not
// catalogued (revision 0), -1 when a case variant of it is.
type catalogRevisions map[string]int

// queueCatalogCheck queues the read of the revisions of the ops' checked
// event types (nothing when none is checked).
func queueCatalogCheck(b *pgx.Batch, ops []*publishOp) catalogRevisions {
	var names []string
	for _, op := range ops {
		if op.p.CatalogRevision != nil {
			names = append(names, op.p.Event.Type)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	revs := catalogRevisions{}
	// By the folded name (ASCII: store.ValidEventType), so that a case
	// variant of a catalogued type is seen.
	folded := make([]string, len(names))
	for i, n := range names {
		folded[i] = strings.ToLower(n)
	}
	b.Queue(catalogCheckSQL, folded).Query(func(rows pgx.Rows) error {
		variants := map[string]bool{} // folded names catalogued under some spelling
		for rows.Next() {
			var (
				name string
				rev  int
			)
			if err := rows.Scan(&name, &rev); err != nil {
				return err
			}
			revs[name] = rev
			variants[strings.ToLower(name)] = true
		}
		for _, n := range names {
			if _, ok := revs[n]; !ok && variants[strings.ToLower(n)] {
				revs[n] = -1
			}
		}
		return rows.Err()
	})
	return revs
}

// stale reports whether op was checked against another catalog entry than
// the stored one.
func (r catalogRevisions) stale(op *publishOp) bool {
	return !store.CatalogCurrent(op.p.CatalogRevision, r[op.p.Event.Type])
}

// lockTenantShared takes a tenant's advisory lock shared ($1 the class, $2
// the tenant): concurrent publishes do not wait on each other; a delete or
// a disable of one of the tenant's endpoints waits for them, and they for
// it.
const lockTenantShared = "SELECT pg_advisory_xact_lock_shared($1::integer, hashtext($2))"

// tenantEndpoints are the endpoints of one tenant that may match one event
// type, as a publish reads them (after the tenant lock), with their
// filters parsed once.
type tenantEndpoints struct {
	list []endpointFilter
}

// endpointsKey names what queueEndpoints read: a tenant's endpoints that
// may match an event type.
type endpointsKey struct{ tenant, typ string }

type endpointFilter struct {
	id       string
	enabled  bool
	patterns []string
}

// endpointsForTypeSQL reads a tenant's endpoints whose event types may
// match an event type ($2: typeCandidates), in id order. It is a superset
// of store.MatchEventType's answer (an empty list, "*", the type itself, or
// a "prefix.*" pattern the type starts with), which target then applies:
// the server filters, so a publish to a tenant with 10,000 endpoints that
// subscribe to other types reads none of them (each endpoint.created event
// of a bulk import read all of them before).
const endpointsForTypeSQL = `SELECT id, state, event_types FROM endpoints
	WHERE tenant = $1 AND (jsonb_array_length(event_types) = 0 OR event_types ?| $2::text[])
	ORDER BY id`

// endpointsForOperationalSQL is endpointsForTypeSQL for an operational
// type (store.IsOperational; $2: operationalCandidates): only an endpoint
// that names the type or a "prefix.*" pattern of it matches one (an empty
// list or "*" never does), so the server finds them through the GIN index
// endpoints_event_types (migration 00081) and reads none of a tenant's
// other endpoints — the housekeeper publishes one endpoint.created per
// endpoint of a bulk import, each of which read the whole tenant before.
const endpointsForOperationalSQL = `SELECT id, state, event_types FROM endpoints
	WHERE tenant = $1 AND event_types ?| $2::text[]
	ORDER BY id`

// typeCandidates are the patterns that can match typ: "*", typ, and
// "p.*" for every prefix "p." of typ (store.MatchEventType).
func typeCandidates(typ string) []string {
	out := []string{"*", typ}
	for i := range len(typ) {
		if typ[i] == '.' {
			out = append(out, typ[:i+1]+"*")
		}
	}
	return out
}

// queueEndpoints queues the read of the endpoints of k.tenant that may
// match k.typ into tenants[k] (after the tenant lock, which the caller
// queued first).
func queueEndpoints(b *pgx.Batch, tenants map[endpointsKey]*tenantEndpoints, k endpointsKey) {
	te := &tenantEndpoints{}
	tenants[k] = te
	query, candidates := endpointsForTypeSQL, typeCandidates(k.typ)
	if store.IsOperational(k.typ) {
		query, candidates = endpointsForOperationalSQL, candidates[1:] // not "*"
	}
	b.Queue(query, k.tenant, candidates).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				id, state string
				types     []byte
			)
			if err := rows.Scan(&id, &state, &types); err != nil {
				return err
			}
			var patterns []string
			if err := json.Unmarshal(types, &patterns); err != nil {
				return store.Internal(fmt.Errorf("endpoint %s event_types: %w", id, err))
			}
			te.list = append(te.list, endpointFilter{id: id, enabled: store.EndpointState(state) == store.EndpointEnabled, patterns: patterns})
		}
		return rows.Err()
	})
}

// queueInsert queues the insert of the event; a conflict with an existing
// event (same id, or same tenant and idempotency key) inserts nothing.
func (op *publishOp) queueInsert(b *pgx.Batch) {
	ev, p := op.p.Event, op.p
	b.Queue(`INSERT INTO events (id, tenant, type, occurred_at, body, idempotency_key, fingerprint, created_at, headers, version_bodies, traceparent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11) ON CONFLICT DO NOTHING`,
		ev.ID, ev.Tenant, ev.Type, ts(ev.OccurredAt), op.body, op.idem, ev.Fingerprint, ts(p.Now), op.headers, op.versions, ev.TraceParent).Exec(func(ct pgconn.CommandTag) error {
		op.inserted = ct.RowsAffected() == 1
		return nil
	})
}

// target picks the deliveries of the event among its tenant's endpoints:
// pending for an enabled endpoint, held (paused) otherwise.
func (op *publishOp) target(te *tenantEndpoints) {
	ev, p := op.p.Event, op.p
	op.targets = op.targets[:0]
	for _, e := range te.list {
		if e.id == p.ExcludeEndpointID || !store.MatchEventType(e.patterns, ev.Type) {
			continue
		}
		st := store.DeliveryPending
		if !e.enabled {
			st = store.DeliveryPaused
		}
		op.targets = append(op.targets, publishTarget{e.id, st})
	}
}

// finishOps runs on the transaction after the ops' inserts and targets: one
// statement inserts the deliveries of every op that inserted its event (and
// NOTIFY is queued for the commit when one of them is pending); then each
// op that inserted nothing is answered with the existing event, or a
// conflict (op.err). Ops are answered in op.res/op.err; a returned error is
// the database's and leaves tx aborted. payload is the notification's
// payload: the publishing store's tag (its own Listen skips it, since
// PublishEvent's callers wake their engine themselves), or "" (a caller's
// transaction: every node is woken). notify false leaves the NOTIFY out (a
// node alone in its cluster: Store.alone). ho, when not nil, offers the
// pending deliveries to this node's engine (handoff.go); the caller ends
// it (ho.end) once the transaction committed or failed.
func finishOps(ctx context.Context, tx pgx.Tx, ops []*publishOp, payload string, notify bool, ho *handOffBatch) error {
	if err := numberOps(ctx, tx, ops); err != nil {
		return err
	}
	var all deliveryRows
	var fanEvents, fanTenants, fanAfter, fanExclude []string
	var fanTimes []time.Time
	for _, op := range ops {
		if !op.inserted {
			continue
		}
		ev := op.p.Event
		// A fan-out larger than a chunk writes its first chunk (targets
		// are in endpoint id order) and a fanouts row; ContinueFanOut
		// creates the rest.
		first := op.targets
		if chunk := fanOutChunk(op.p.FanOutChunk); len(first) > chunk {
			first = first[:chunk]
			op.fanOut = true
			fanEvents = append(fanEvents, ev.ID)
			fanTenants = append(fanTenants, ev.Tenant)
			fanAfter = append(fanAfter, first[chunk-1].id)
			fanExclude = append(fanExclude, op.p.ExcludeEndpointID)
			fanTimes = append(fanTimes, ts(op.p.Now))
		}
		for _, t := range first {
			all.add(op.p.NewDeliveryID(), ev, t, ts(op.p.Now))
		}
	}
	plain, leased := all.handOff(ho)
	if len(all.ids) > 0 {
		b := &pgx.Batch{}
		if len(fanEvents) > 0 {
			b.Queue(`INSERT INTO fanouts (event_id, tenant, after_endpoint_id, exclude_endpoint, created_at)
				SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])`,
				fanEvents, fanTenants, fanAfter, fanExclude, fanTimes)
		}
		if len(plain.ids) > 0 {
			b.Queue(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
				SELECT u.id, u.event_id, u.endpoint_id, u.tenant, u.event_type, u.state, u.at, u.at, u.at
				FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
				     AS u (id, event_id, endpoint_id, tenant, event_type, state, at)`,
				plain.ids, plain.events, plain.endpoints, plain.tenants, plain.types, plain.states, plain.times)
		}
		if len(leased.ids) > 0 {
			ho.queueLeasedInsert(b, leased)
		}
		if plain.pending() && notify {
			// Sent by the server when the transaction commits; not by a
			// node alone in its cluster, whose notification would wake
			// nobody: PostgreSQL serialises notifying commits, each
			// holding a database-wide lock until its WAL flush. Nor for
			// deliveries handed off to this node's engine (none other
			// may claim them).
			b.Queue("SELECT pg_notify($1, $2)", notifyChannel, payload)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	for _, op := range ops {
		ev, p := op.p.Event, op.p
		if !op.inserted {
			// After the deliveries: an event inserted by an earlier op of
			// the same group is answered with its delivery count.
			existing, n, err := existingEvent(ctx, tx, ev, p.IDFromClient)
			switch {
			case errors.Is(err, store.ErrConflict):
				op.err = err
			case err != nil:
				return err
			default:
				op.res = store.PublishResult{Event: existing, Deliveries: n}
			}
			continue
		}
		if op.numbered != nil {
			ev = *op.numbered
		}
		// Answer with the event as stored, as GetEvent would: times
		// truncated to microseconds in UTC.
		ev.OccurredAt = ts(ev.OccurredAt)
		ev.CreatedAt = ts(p.Now)
		st := make([]store.DeliveryState, len(op.targets))
		for i, t := range op.targets {
			st[i] = t.state
		}
		op.res = store.PublishResult{Event: ev, Deliveries: len(op.targets), Pending: store.CountPending(st), Created: true, FanOut: op.fanOut}
	}
	if len(leased.ids) > 0 {
		// The claims' events are the answers' (the event as stored).
		n, err := ho.finish(ctx, tx, ops)
		if err != nil {
			return err
		}
		if n > 0 && notify && !plain.pending() {
			// Given back: claimable, and no NOTIFY was queued for them
			// (another node may hold the key this one lacks).
			if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, payload); err != nil {
				return err
			}
		}
	}
	return nil
}

// deliveryRows are deliveries to insert, column by column.
type deliveryRows struct {
	ids, events, endpoints, tenants, types, states []string
	times                                          []time.Time
}

func (d *deliveryRows) add(id string, ev store.Event, t publishTarget, at time.Time) {
	d.ids = append(d.ids, id)
	d.events = append(d.events, ev.ID)
	d.endpoints = append(d.endpoints, t.id)
	d.tenants = append(d.tenants, ev.Tenant)
	d.types = append(d.types, ev.Type)
	d.states = append(d.states, string(t.state))
	d.times = append(d.times, at)
}

func (d *deliveryRows) addRow(o *deliveryRows, i int) {
	d.ids = append(d.ids, o.ids[i])
	d.events = append(d.events, o.events[i])
	d.endpoints = append(d.endpoints, o.endpoints[i])
	d.tenants = append(d.tenants, o.tenants[i])
	d.types = append(d.types, o.types[i])
	d.states = append(d.states, o.states[i])
	d.times = append(d.times, o.times[i])
}

// pending reports whether one of d is pending.
func (d *deliveryRows) pending() bool {
	for _, st := range d.states {
		if st == string(store.DeliveryPending) {
			return true
		}
	}
	return false
}

// handOff splits d into the rows inserted as they are and those ho's
// engine reserved workers for (pending ones, the workers shared between
// the tenants as a claim shares its batch: store.ReserveShared), grouped
// by reservation in reserve's order. Without ho (or with nothing
// reserved) plain is d.
func (d *deliveryRows) handOff(ho *handOffBatch) (plain, leased deliveryRows) {
	if ho == nil || !d.pending() {
		return *d, leased
	}
	var idx []int // the pending rows, in creation order
	var tenants []string
	for i, st := range d.states {
		if st == string(store.DeliveryPending) {
			idx = append(idx, i)
			tenants = append(tenants, d.tenants[i])
		}
	}
	take := map[int]bool{}
	for _, r := range ho.reserve(tenants) {
		for _, j := range r.Rows {
			take[idx[j]] = true
			leased.addRow(d, idx[j])
		}
	}
	if len(take) == 0 {
		return *d, leased
	}
	for i := range d.ids {
		if !take[i] {
			plain.addRow(d, i)
		}
	}
	return plain, leased
}

// sequenceLockKey is the advisory lock (class sequenceLockClass) a
// transaction takes before it numbers events: one numbering transaction at
// a time in the whole cluster. Counter rows are then locked by one
// transaction at a time, so two group commits that number events of the
// same resources in different orders cannot deadlock, and each counter row
// stays locked until commit, so the numbers of a key increase in commit
// order.
const sequenceLockClass = 0x53455131 // "SEQ1"

// numberOps gives every op that inserted a new event with a SequenceKey
// the next number of its key, in op order, and rewrites the stored event
// (store.NumberEvent). Runs after the inserts, on the same transaction.
func numberOps(ctx context.Context, tx pgx.Tx, ops []*publishOp) error {
	locked := false
	for _, op := range ops {
		if !op.inserted || op.p.SequenceKey == "" {
			continue
		}
		if !locked {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::integer, 0)", sequenceLockClass); err != nil {
				return err
			}
			locked = true
		}
		var n int64
		if err := tx.QueryRow(ctx, `INSERT INTO event_sequences (key, last) VALUES ($1, 1)
			ON CONFLICT (key) DO UPDATE SET last = event_sequences.last + 1 RETURNING last`, op.p.SequenceKey).Scan(&n); err != nil {
			return err
		}
		ev := store.NumberEvent(op.p.Event, n)
		headers, err := jsonOf(ev.Headers)
		if err != nil {
			return err
		}
		var versions *string
		if len(ev.VersionBodies) > 0 {
			v, err := store.EncodeVersionBodies(ev.VersionBodies)
			if err != nil {
				return err
			}
			versions = &v
		}
		if _, err := tx.Exec(ctx, "UPDATE events SET body = $2, version_bodies = $3, headers = $4::jsonb, sequence = $5 WHERE id = $1",
			ev.ID, ev.Body, versions, headers, n); err != nil {
			return err
		}
		op.numbered = &ev
	}
	return nil
}

// fanOutChunk is the chunk size for a PublishParams.FanOutChunk or
// FanOutParams.Chunk (0: store.DefaultFanOutChunk).
func fanOutChunk(n int) int {
	if n <= 0 {
		return store.DefaultFanOutChunk
	}
	return n
}

// ContinueFanOut implements store.Store. The fan-out is taken FOR UPDATE
// SKIP LOCKED (the one exception to the lock order of the package comment:
// it never waits, so it cannot close a cycle), so several nodes each
// advance a different fan-out; then the tenant's lock is taken shared as a
// publish does, and the chunk's endpoints are read after it.
func (s *Store) ContinueFanOut(ctx context.Context, p store.FanOutParams) (store.FanOutResult, error) {
	chunk := fanOutChunk(p.Chunk)
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	if p.NewDeliveryID == nil {
		p.NewDeliveryID = func() string { return store.NewID("dlv") }
	}
	var res store.FanOutResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = store.FanOutResult{}
		var (
			tenant, after, exclude, eventType string
			publishedAt                       time.Time
		)
		// fanouts drives (a row per unfinished fan-out); the event's type
		// is looked up by primary key.
		err := tx.QueryRow(ctx, `SELECT f.event_id, f.tenant, f.after_endpoint_id, f.exclude_endpoint, f.created_at,
				COALESCE((SELECT e.type FROM events e WHERE e.id = f.event_id), '')
			FROM fanouts f
			ORDER BY f.event_id <= $1, f.event_id LIMIT 1 FOR UPDATE OF f SKIP LOCKED`, p.After).
			Scan(&res.EventID, &tenant, &after, &exclude, &publishedAt, &eventType)
		if errors.Is(err, pgx.ErrNoRows) {
			// None free; others may be held by other nodes.
			res = store.FanOutResult{}
			return tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM fanouts)").Scan(&res.More)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockTenantShared, tenantLockClass, tenant); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, state, event_types FROM endpoints
			WHERE tenant = $1 AND id > $2 AND created_at <= $3 ORDER BY id LIMIT $4`, tenant, after, publishedAt, chunk)
		if err != nil {
			return err
		}
		var ids, endpoints, states []string
		read := 0
		for rows.Next() {
			var (
				id, state string
				types     []byte
			)
			if err := rows.Scan(&id, &state, &types); err != nil {
				rows.Close()
				return err
			}
			read++
			after = id
			var patterns []string
			if err := json.Unmarshal(types, &patterns); err != nil {
				rows.Close()
				return store.Internal(fmt.Errorf("endpoint %s event_types: %w", id, err))
			}
			if id == exclude || !store.MatchEventType(patterns, eventType) {
				continue
			}
			st := store.DeliveryPending
			if store.EndpointState(state) != store.EndpointEnabled {
				st = store.DeliveryPaused
			} else {
				res.Pending++
			}
			ids = append(ids, p.NewDeliveryID())
			endpoints = append(endpoints, id)
			states = append(states, string(st))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		res.Created = len(ids)
		b := &pgx.Batch{}
		if len(ids) > 0 {
			b.Queue(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
				SELECT u.id, $4, u.endpoint_id, $5, $6, u.state, $7, $7, $7
				FROM unnest($1::text[], $2::text[], $3::text[]) AS u (id, endpoint_id, state)`,
				ids, endpoints, states, res.EventID, tenant, eventType, ts(p.Now))
		}
		if res.Pending > 0 {
			b.Queue("SELECT pg_notify($1, $2)", notifyChannel, "")
		}
		if read < chunk {
			res.Done = true
			b.Queue("DELETE FROM fanouts WHERE event_id = $1", res.EventID)
			b.Queue("SELECT EXISTS (SELECT 1 FROM fanouts WHERE event_id <> $1)", res.EventID).QueryRow(func(r pgx.Row) error {
				return r.Scan(&res.More)
			})
		} else {
			res.More = true
			b.Queue("UPDATE fanouts SET after_endpoint_id = $1 WHERE event_id = $2", after, res.EventID)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return store.FanOutResult{}, wrap("fan-out", err)
	}
	return res, nil
}
