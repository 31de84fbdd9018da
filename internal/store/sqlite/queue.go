package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

const eventColumns = "id, tenant, type, occurred_at, body, COALESCE(idempotency_key, ''), fingerprint, created_at, headers, version_bodies, sequence, traceparent"

func scanEvent(sc scanner) (store.Event, error) {
	var (
		e                     store.Event
		occurredAt, createdAt int64
		headers, versions     string
	)
	if err := sc.Scan(&e.ID, &e.Tenant, &e.Type, &occurredAt, &e.Body, &e.IdempotencyKey, &e.Fingerprint, &createdAt, &headers, &versions, &e.Sequence, &e.TraceParent); err != nil {
		return e, err
	}
	var err error
	if e.VersionBodies, err = store.DecodeVersionBodies([]byte(versions)); err != nil {
		return e, fmt.Errorf("event %s version bodies: %w", e.ID, err)
	}
	if headers != "" {
		if err := json.Unmarshal([]byte(headers), &e.Headers); err != nil {
			return e, store.Internal(fmt.Errorf("event %s headers: %w", e.ID, err))
		}
	}
	e.OccurredAt, e.CreatedAt = fromMicro(occurredAt), fromMicro(createdAt)
	return e, nil
}

// PublishEvent implements store.Store.
func (s *Store) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	return s.commits.publish(ctx, p)
}

// publishTx runs one publish inside tx (the group commit's transaction).
// Its result is final only once tx commits.
//
// headers is the event's Headers as stored (eventHeaders), encoded by the
// caller outside the single writer. g, when not nil, keeps what the rest
// of the transaction can reuse (a group commit reads each tenant's
// endpoints once and binds each statement to the transaction once).
func (s *Store) publishTx(ctx context.Context, tx *sql.Tx, p store.PublishParams, headers string, g *groupTx) (store.PublishResult, error) {
	ev := p.Event
	// Insert first: a new event (the common case) costs one statement. The
	// insert does nothing when the id, or the tenant and idempotency key,
	// is taken; only then is the existing event looked up, and it answers
	// the publish: same content → the original, other content → conflict.
	// The single writer makes the insert and the lookup atomic.
	if p.CatalogRevision != nil {
		rev, err := s.catalogRevision(ctx, tx, ev.Type, g)
		if err != nil {
			return store.PublishResult{}, wrap("publish", err)
		}
		if !store.CatalogCurrent(p.CatalogRevision, rev) {
			// Nothing written: the group goes on without it.
			return store.PublishResult{}, fmt.Errorf("publish: %w", store.ErrStaleCatalog)
		}
	}
	var idem any
	if ev.IdempotencyKey != "" {
		idem = ev.IdempotencyKey
	}
	versions, err := store.EncodeVersionBodies(ev.VersionBodies)
	if err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: version bodies: %w", err)
	}
	insStmt, err := g.stmt(ctx, s, tx, insertEventSQL)
	if err != nil {
		return store.PublishResult{}, wrap("publish", err)
	}
	ins, err := insStmt.ExecContext(ctx,
		ev.ID, ev.Tenant, ev.Type, micro(ev.OccurredAt), ev.Body, idem, ev.Fingerprint, micro(p.Now), headers, versions, ev.TraceParent)
	if err != nil {
		return store.PublishResult{}, wrap("publish", err)
	}
	if n, err := ins.RowsAffected(); err != nil {
		return store.PublishResult{}, wrap("publish", err)
	} else if n == 0 {
		// The group's earlier publishes may have created the event
		// answered here: their deliveries count.
		if err := g.flushDeliveries(ctx, s, tx); err != nil {
			return store.PublishResult{}, wrap("publish", err)
		}
		return s.existingPublish(ctx, tx, p)
	}
	if p.SequenceKey != "" {
		// The single writer orders the numbers by commit.
		if ev, err = s.numberEvent(ctx, tx, ev, p.SequenceKey); err != nil {
			return store.PublishResult{}, err
		}
	}
	all, err := s.targets(ctx, tx, ev.Tenant, g)
	if err != nil {
		return store.PublishResult{}, err
	}
	var targets []target
	for _, t := range all {
		if t.id == p.ExcludeEndpointID || !store.MatchEventType(t.patterns, ev.Type) {
			continue
		}
		targets = append(targets, t)
	}
	// A fan-out larger than a chunk writes its first chunk (targets are in
	// endpoint id order) and leaves the rest to ContinueFanOut.
	now := micro(p.Now)
	first, fanOut := targets, false
	if chunk := fanOutChunk(p.FanOutChunk); len(targets) > chunk {
		first, fanOut = targets[:chunk], true
		st, err := g.stmt(ctx, s, tx, insertFanOutSQL)
		if err != nil {
			return store.PublishResult{}, wrap("publish", err)
		}
		if _, err := st.ExecContext(ctx, ev.ID, ev.Tenant, first[chunk-1].id, p.ExcludeEndpointID, now); err != nil {
			return store.PublishResult{}, wrap("publish", err)
		}
	}
	if g != nil {
		// Written with the group's other deliveries (flushDeliveries).
		for _, t := range first {
			g.deliveries = append(g.deliveries, deliveryRow{p.NewDeliveryID(), ev.ID, t.id, ev.Tenant, ev.Type, t.state, now})
		}
	} else if len(first) > 0 {
		stmt, err := s.stmt(ctx, tx, insertDeliverySQL)
		if err != nil {
			return store.PublishResult{}, wrap("publish", err)
		}
		for _, t := range first {
			if _, err := stmt.ExecContext(ctx, p.NewDeliveryID(), ev.ID, t.id, ev.Tenant, ev.Type, string(t.state), now, now, now); err != nil {
				return store.PublishResult{}, wrap("publish", err)
			}
		}
	}
	// Answer with the event as stored, as GetEvent would: times truncated to
	// microseconds in UTC.
	ev.OccurredAt = fromMicro(micro(ev.OccurredAt))
	ev.CreatedAt = fromMicro(micro(p.Now))
	states := make([]store.DeliveryState, len(targets))
	for i, t := range targets {
		states[i] = t.state
	}
	return store.PublishResult{Event: ev, Deliveries: len(targets), Pending: store.CountPending(states), Created: true, FanOut: fanOut}, nil
}

// fanOutChunk is the chunk size for a PublishParams.FanOutChunk or
// FanOutParams.Chunk (0: store.DefaultFanOutChunk).
func fanOutChunk(n int) int {
	if n <= 0 {
		return store.DefaultFanOutChunk
	}
	return n
}

// fanOutYieldEvery is how many deliveries a fan-out chunk writes between
// looks for a waiting publish (writeGate): a chunk of 500 held the writer
// for several milliseconds while B's publishes waited (bench fanout). It
// is the largest of valuesChunks: each look follows one statement.
const fanOutYieldEvery = 64

// NextFanOutQuery picks the unfinished fan-out to advance: the first after
// ? in event id order, wrapping around. It reads fanouts (a row per
// unfinished fan-out) and looks each event's type up by primary key: as a
// join, without statistics the planner scanned every event and probed
// fanouts for each (5 ms per chunk with 15,000 events, growing with the
// table: TestNextFanOutQueryReadsFanOutsOnly).
const NextFanOutQuery = `SELECT f.event_id, f.tenant, f.after_endpoint_id, f.exclude_endpoint, f.created_at,
		COALESCE((SELECT e.type FROM events e WHERE e.id = f.event_id), '')
	FROM fanouts f ORDER BY f.event_id <= ?, f.event_id LIMIT 1`

const insertFanOutSQL = `INSERT INTO fanouts (event_id, tenant, after_endpoint_id, exclude_endpoint, created_at) VALUES (?,?,?,?,?)`

// ContinueFanOut implements store.Store: one chunk of the next unfinished
// fan-out after p.After, on the single writer.
func (s *Store) ContinueFanOut(ctx context.Context, p store.FanOutParams) (store.FanOutResult, error) {
	chunk := fanOutChunk(p.Chunk)
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	if p.NewDeliveryID == nil {
		p.NewDeliveryID = func() string { return store.NewID("dlv") }
	}
	// Polled every second by every engine: ask the read pool first, and
	// take the writer only when a fan-out is waiting.
	var waiting bool
	if err := s.r.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM fanouts)").Scan(&waiting); err != nil {
		return store.FanOutResult{}, wrap("fan-out", err)
	}
	if !waiting {
		return store.FanOutResult{}, nil
	}
	tx, done, err := s.queueTx(ctx)
	if err != nil {
		return store.FanOutResult{}, wrap("fan-out", err)
	}
	defer done()
	var (
		res                               store.FanOutResult
		tenant, after, exclude, eventType string
		publishedAt                       int64
	)
	err = tx.QueryRowContext(ctx, NextFanOutQuery, p.After).Scan(&res.EventID, &tenant, &after, &exclude, &publishedAt, &eventType)
	if errors.Is(err, sql.ErrNoRows) {
		return store.FanOutResult{}, nil
	}
	if err != nil {
		return store.FanOutResult{}, wrap("fan-out", err)
	}
	// The next chunk of endpoints that existed at the publish, after the
	// position, from the tenant's endpoints in id order (in memory for a
	// large tenant: targetCache).
	all, err := s.targets(ctx, tx, tenant, nil)
	if err != nil {
		return store.FanOutResult{}, wrap("fan-out", err)
	}
	var (
		targets []target
		read    int
	)
	for _, t := range all[sort.Search(len(all), func(i int) bool { return all[i].id > after }):] {
		if read == chunk {
			break
		}
		if t.createdAt > publishedAt {
			continue
		}
		read++
		after = t.id
		if t.id == exclude || !store.MatchEventType(t.patterns, eventType) {
			continue
		}
		targets = append(targets, t)
	}
	now := micro(p.Now)
	yielded := false
	rows := make([]deliveryRow, 0, min(len(targets), fanOutYieldEvery))
	for i := 0; i < len(targets); i += fanOutYieldEvery {
		// A publish waiting for the writer ends the chunk early (every
		// fanOutYieldEvery deliveries): the position moves to the last
		// endpoint written, in this transaction, so the next chunk goes
		// on from there and each delivery is still created once.
		if i > 0 && s.publishWaiting() {
			after, yielded = targets[i-1].id, true
			break
		}
		rows = rows[:0]
		for _, t := range targets[i:min(i+fanOutYieldEvery, len(targets))] {
			rows = append(rows, deliveryRow{p.NewDeliveryID(), res.EventID, t.id, tenant, eventType, t.state, now})
			res.Created++
			if t.state == store.DeliveryPending {
				res.Pending++
			}
		}
		if err := s.insertDeliveries(ctx, tx, nil, rows); err != nil {
			return store.FanOutResult{}, wrap("fan-out", err)
		}
	}
	if read < chunk && !yielded {
		res.Done = true
		if _, err := tx.ExecContext(ctx, "DELETE FROM fanouts WHERE event_id = ?", res.EventID); err != nil {
			return store.FanOutResult{}, wrap("fan-out", err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM fanouts)").Scan(&res.More); err != nil {
			return store.FanOutResult{}, wrap("fan-out", err)
		}
	} else {
		res.More = true
		if _, err := tx.ExecContext(ctx, "UPDATE fanouts SET after_endpoint_id = ? WHERE event_id = ?", after, res.EventID); err != nil {
			return store.FanOutResult{}, wrap("fan-out", err)
		}
	}
	return res, wrap("fan-out", tx.Commit())
}

// groupTx is what one group commit's transaction reads once and reuses.
type groupTx struct {
	tenants     map[string][]target  // the endpoints of each tenant
	stmts       map[string]*sql.Stmt // hot statements bound to the transaction
	version     int64                // endpoints_version, once versionRead
	versionRead bool
	revisions   map[string]int // catalog revisions read (catalogRevision)
	deliveries  []deliveryRow  // created by the group's publishes, not yet written (flushDeliveries)
	due         []deliveryRow  // written by flushDeliveries, due now (pending): the hand-off's
}

// deliveryRow is a new delivery of a group commit, written with the
// group's others in multi-row statements: one statement per delivery was
// ~20 % of the statements' CPU of a publish (docs/BENCHMARKS.md, "Round 2,
// ninth session").
type deliveryRow struct {
	id, eventID, endpointID, tenant, eventType string
	state                                      store.DeliveryState
	now                                        int64 // µs: next_attempt_at, created_at, updated_at
}

// insertDeliveriesValuesSQL is insertDeliverySQL for rows deliveries.
func insertDeliveriesValuesSQL(rows int) string {
	const row = "(?,?,?,?,?,?,?,?,?)"
	return insertDeliveryColumns + strings.Repeat(row+",", rows-1) + row
}

var insertDeliveriesValues = newValuesSQL(insertDeliveriesValuesSQL)

// flushDeliveries writes the deliveries the group's publishes created so
// far (nothing for g nil: a publish alone writes its own).
func (g *groupTx) flushDeliveries(ctx context.Context, s *Store, tx *sql.Tx) error {
	if g == nil || len(g.deliveries) == 0 {
		return nil
	}
	if err := s.insertDeliveries(ctx, tx, g, g.deliveries); err != nil {
		return err
	}
	for _, d := range g.deliveries {
		if d.state == store.DeliveryPending {
			g.due = append(g.due, d)
		}
	}
	g.deliveries = g.deliveries[:0]
	return nil
}

// insertDeliveries writes rows in multi-row statements (chunks of
// valuesChunks sizes), bound to tx through g (nil: s.stmt).
func (s *Store) insertDeliveries(ctx context.Context, tx *sql.Tx, g *groupTx, rows []deliveryRow) error {
	var args []any
	for chunk := range valuesChunked(rows) {
		st, err := g.stmt(ctx, s, tx, insertDeliveriesValues[len(chunk)])
		if err != nil {
			return err
		}
		args = args[:0]
		for _, d := range chunk {
			args = append(args, d.id, d.eventID, d.endpointID, d.tenant, d.eventType, string(d.state), d.now, d.now, d.now)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func newGroupTx() *groupTx {
	return &groupTx{tenants: map[string][]target{}, stmts: map[string]*sql.Stmt{}, revisions: map[string]int{}}
}

// catalogRevisionSQL reads an event type's revision for a publish's
// catalog check (PublishParams.CatalogRevision): the type's (by the
// primary key), else -1 when a name differing only in case is catalogued
// (never current; on the index event_types_name_nocase), else 0. Names
// are ASCII (store.ValidEventType), which NOCASE folds.
const catalogRevisionSQL = "SELECT COALESCE((SELECT revision FROM event_types WHERE name = ?1), (SELECT -1 FROM event_types WHERE name = ?1 COLLATE NOCASE LIMIT 1), 0)"

// catalogRevision is the stored revision of event type typ (0: not
// catalogued; -1: a case variant is), read on tx — the single writer's, so no catalog change
// can commit between the check and the publish's commit — once per group.
func (s *Store) catalogRevision(ctx context.Context, tx *sql.Tx, typ string, g *groupTx) (int, error) {
	if g != nil {
		if rev, ok := g.revisions[typ]; ok {
			return rev, nil
		}
	}
	st, err := g.stmt(ctx, s, tx, catalogRevisionSQL)
	if err != nil {
		return 0, err
	}
	var rev int
	if err := st.QueryRowContext(ctx, typ).Scan(&rev); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	if g != nil {
		g.revisions[typ] = rev
	}
	return rev, nil
}

// stmt returns query bound to tx, once per transaction (s.stmt when g is
// nil). database/sql makes a new Stmt each time a statement is bound.
func (g *groupTx) stmt(ctx context.Context, s *Store, tx *sql.Tx, query string) (*sql.Stmt, error) {
	if g == nil {
		return s.stmt(ctx, tx, query)
	}
	if st, ok := g.stmts[query]; ok {
		return st, nil
	}
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	g.stmts[query] = st
	return st, nil
}

// eventHeaders encodes an event's forwarded headers as stored: a JSON
// object, or "" for none.
func eventHeaders(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("publish: headers: %w", err)
	}
	return string(b), nil
}

// insertEventSQL inserts an event unless its id, or its tenant and
// idempotency key, is taken (then it changes no row).
const insertEventSQL = `INSERT INTO events (id, tenant, type, occurred_at, body, idempotency_key, fingerprint, created_at, headers, version_bodies, traceparent)
	VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`

// numberEvent gives a new event the next number of its sequence key and
// rewrites its bodies and headers with it (store.PublishParams.SequenceKey).
func (s *Store) numberEvent(ctx context.Context, tx *sql.Tx, ev store.Event, key string) (store.Event, error) {
	var n int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO event_sequences (key, last) VALUES (?, 1)
		ON CONFLICT (key) DO UPDATE SET last = last + 1 RETURNING last`, key).Scan(&n); err != nil {
		return ev, wrap("publish: sequence", err)
	}
	ev = store.NumberEvent(ev, n)
	headers, err := eventHeaders(ev.Headers)
	if err != nil {
		return ev, err
	}
	versions, err := store.EncodeVersionBodies(ev.VersionBodies)
	if err != nil {
		return ev, fmt.Errorf("publish: version bodies: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE events SET body = ?, version_bodies = ?, headers = ?, sequence = ? WHERE id = ?",
		ev.Body, versions, headers, n, ev.ID); err != nil {
		return ev, wrap("publish: sequence", err)
	}
	return ev, nil
}

// existingPublish answers a publish whose insert found its id, or its
// tenant and idempotency key, taken: the event with the same key (else the
// same id) is the original when the content matches, a conflict otherwise.
func (s *Store) existingPublish(ctx context.Context, tx *sql.Tx, p store.PublishParams) (store.PublishResult, error) {
	ev := p.Event
	var existing store.Event
	var err error = sql.ErrNoRows
	if ev.IdempotencyKey != "" {
		var byKey *sql.Stmt
		if byKey, err = s.stmt(ctx, tx, "SELECT "+eventColumns+" FROM events WHERE tenant = ? AND idempotency_key = ?"); err == nil {
			existing, err = scanEvent(byKey.QueryRowContext(ctx, ev.Tenant, ev.IdempotencyKey))
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		var byID *sql.Stmt
		if byID, err = s.stmt(ctx, tx, "SELECT "+eventColumns+" FROM events WHERE id = ?"); err == nil {
			existing, err = scanEvent(byID.QueryRowContext(ctx, ev.ID))
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		// The insert changed nothing, yet no event holds the id or the key
		// (another uniqueness rule?): a fault, not "not found".
		return store.PublishResult{}, wrap("publish", fmt.Errorf("event %s: insert changed nothing and no event has its id or key", ev.ID))
	}
	if err != nil {
		return store.PublishResult{}, wrap("publish", err)
	}
	// When the producer chose the id, a key that belongs to another event
	// is a conflict too (not a retry of this publish).
	if err := store.RepeatConflict(existing, ev, p.IDFromClient); err != nil {
		return store.PublishResult{}, err
	}
	var n int
	count, err := s.stmt(ctx, tx, "SELECT COUNT(*) FROM deliveries WHERE event_id = ?")
	if err != nil {
		return store.PublishResult{}, wrap("publish", err)
	}
	if err := count.QueryRowContext(ctx, existing.ID).Scan(&n); err != nil {
		return store.PublishResult{}, wrap("publish", err)
	}
	return store.PublishResult{Event: existing, Deliveries: n}, nil
}

const (
	insertDeliveryColumns = "INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at) VALUES "
	insertDeliverySQL     = insertDeliveryColumns + "(?,?,?,?,?,?,?,?,?)"
)

// target is an endpoint a publish may fan out to.
type target struct {
	id       string
	state    store.DeliveryState // of its deliveries: pending, or paused when the endpoint is not enabled
	patterns []string
	// createdAt is the endpoint's creation (µs): a fan-out's later chunks
	// skip endpoints created after its publish.
	createdAt int64
}

// tenantTargets reads the endpoints of a tenant.
func (s *Store) tenantTargets(ctx context.Context, tx *sql.Tx, tenant string, g *groupTx) ([]target, error) {
	st, err := g.stmt(ctx, s, tx, tenantTargetsSQL)
	if err != nil {
		return nil, wrap("publish", err)
	}
	rows, err := st.QueryContext(ctx, tenant)
	if err != nil {
		return nil, wrap("publish", err)
	}
	defer rows.Close()
	var out []target
	for rows.Next() {
		var (
			id, state, types string
			createdAt        int64
		)
		if err := rows.Scan(&id, &state, &types, &createdAt); err != nil {
			return nil, wrap("publish", err)
		}
		t := target{id: id, state: store.DeliveryPending, createdAt: createdAt}
		if err := json.Unmarshal([]byte(types), &t.patterns); err != nil {
			return nil, store.Internal(fmt.Errorf("publish: endpoint %s event_types: %w", id, err))
		}
		if store.EndpointState(state) != store.EndpointEnabled {
			t.state = store.DeliveryPaused
		}
		out = append(out, t)
	}
	return out, wrap("publish", rows.Err())
}

// PublishedEvent implements store.Store: reads on the read pool, in one
// read transaction (the event and its delivery count agree).
func (s *Store) PublishedEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	ev := p.Event
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.PublishResult{}, wrap("published event", err)
	}
	defer tx.Rollback()
	var existing store.Event
	err = sql.ErrNoRows
	if ev.IdempotencyKey != "" {
		existing, err = scanEvent(tx.QueryRowContext(ctx, "SELECT "+eventColumns+" FROM events WHERE tenant = ? AND idempotency_key = ?", ev.Tenant, ev.IdempotencyKey))
	}
	if errors.Is(err, sql.ErrNoRows) {
		existing, err = scanEvent(tx.QueryRowContext(ctx, "SELECT "+eventColumns+" FROM events WHERE id = ?", ev.ID))
	}
	if err != nil {
		return store.PublishResult{}, wrap("event "+store.PublicEventID(ev.ID), err)
	}
	if err := store.RepeatConflict(existing, ev, p.IDFromClient); err != nil {
		return store.PublishResult{}, err
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM deliveries WHERE event_id = ?", existing.ID).Scan(&n); err != nil {
		return store.PublishResult{}, wrap("published event", err)
	}
	return store.PublishResult{Event: existing, Deliveries: n}, nil
}

// GetEvent implements store.Store.
func (s *Store) GetEvent(ctx context.Context, id string) (store.Event, error) {
	e, err := scanEvent(s.r.QueryRowContext(ctx, "SELECT "+eventColumns+" FROM events WHERE id = ?", id))
	return e, wrap("event "+id, err)
}

// ListEvents implements store.Store. Events are listed in insertion order
// (newest first) by rowid, because producers may choose their own ids; the
// cursor is the rowid of the last event of the page.
func (s *Store) ListEvents(ctx context.Context, p store.ListEventsParams) (store.Page[store.Event], error) {
	var (
		where []string
		args  []any
	)
	if p.Tenant != "" {
		where = append(where, "tenant = ?")
		args = append(args, p.Tenant)
	}
	if p.Type != "" {
		where = append(where, "type = ?")
		args = append(args, p.Type)
	}
	if p.Cursor != "" {
		seq, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || seq <= 0 {
			return store.Page[store.Event]{}, store.BadCursor(p.Cursor)
		}
		where = append(where, "rowid < ?")
		args = append(args, seq)
	}
	lim := p.ListParams.PageSize()
	args = append(args, lim+1)
	rows, err := s.r.QueryContext(ctx, "SELECT rowid, "+eventColumns+" FROM events"+whereClause(where)+" ORDER BY rowid DESC LIMIT ?", args...)
	if err != nil {
		return store.Page[store.Event]{}, wrap("list events", err)
	}
	defer rows.Close()
	var (
		out  []store.Event
		seqs []int64
	)
	for rows.Next() {
		var seq int64
		e, err := scanEvent(prefixScanner{rows, &seq})
		if err != nil {
			return store.Page[store.Event]{}, wrap("list events", err)
		}
		out = append(out, e)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Event]{}, wrap("list events", err)
	}
	pg := store.Paginate(out, lim, func(store.Event) string { return "" })
	if len(out) > lim {
		pg.NextCursor = strconv.FormatInt(seqs[lim-1], 10)
	}
	return pg, nil
}

// prefixScanner scans one extra leading column into first.
type prefixScanner struct {
	sc    scanner
	first any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.sc.Scan(append([]any{p.first}, dest...)...)
}

const deliveryColumns = `id, event_id, endpoint_id, tenant, event_type, state, attempts, client_errors, next_attempt_at,
	last_status_code, last_error, COALESCE(lease_owner, ''), lease_until, created_at, updated_at, replay_base`

func scanDelivery(sc scanner) (store.Delivery, error) {
	var (
		d                          store.Delivery
		state                      string
		next, createdAt, updatedAt int64
		leaseUntil                 sql.NullInt64
	)
	if err := sc.Scan(&d.ID, &d.EventID, &d.EndpointID, &d.Tenant, &d.EventType, &state, &d.Attempts, &d.ClientErrors, &next,
		&d.LastStatusCode, &d.LastError, &d.LeaseOwner, &leaseUntil, &createdAt, &updatedAt, &d.ReplayBase); err != nil {
		return d, err
	}
	d.State = store.DeliveryState(state)
	d.NextAttemptAt = fromMicro(next)
	d.LeaseUntil = nullMicro(leaseUntil)
	d.CreatedAt, d.UpdatedAt = fromMicro(createdAt), fromMicro(updatedAt)
	return d, nil
}

// liveEndpoint restricts a lookup of one delivery by id to one whose
// endpoint still exists: the deliveries of a deleted endpoint that its
// delete has not reached yet (DeleteEndpoint deletes them in chunks after
// the endpoint's row) are not found.
const liveEndpoint = " AND EXISTS (SELECT 1 FROM endpoints WHERE endpoints.id = deliveries.endpoint_id)"

// GetDelivery implements store.Store: store.ErrNotFound for a delivery
// whose endpoint was deleted (liveEndpoint).
func (s *Store) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	d, err := scanDelivery(s.r.QueryRowContext(ctx, "SELECT "+deliveryColumns+" FROM deliveries WHERE id = ?"+liveEndpoint, id))
	s.leases.overlay(&d)
	return d, wrap("delivery "+id, err)
}

// stateIndex is how the rows of one delivery state are found: the
// condition, written out so that the state's partial index is usable (a
// bound parameter proves no partial index usable), and that index
// (migration 00090; pending rows through deliveries_due: every pending row
// has lease_owner NULL, leases being in memory, leases.go). pinList pins a
// list filtered by the state, and by neither endpoint nor event (whose
// indexes serve those lists in id order), to the index: its rows, then
// sorted by id, as the (state, updated_at) index did before. Without the
// pin the planner walks the whole table in id order for the first page,
// quick for a state most rows have and a full scan for a rare one — dead
// letters among a million succeeded deliveries. Succeeded is left to that
// walk: it is the state most rows have, and sorting all of them was the
// old plan's cost.
type stateIndex struct {
	state   store.DeliveryState
	cond    string
	index   string
	pinList bool
}

var stateIndexes = []stateIndex{
	{store.DeliveryPending, "state = 'pending' AND lease_owner IS NULL", "deliveries_due", true},
	{store.DeliverySucceeded, "state = 'succeeded'", "deliveries_succeeded", false},
	{store.DeliveryDead, "state = 'dead'", "deliveries_dead", true},
	{store.DeliveryPaused, "state = 'paused'", "deliveries_paused", true},
}

func stateIndexOf(st store.DeliveryState) (stateIndex, bool) {
	for _, si := range stateIndexes {
		if si.state == st {
			return si, true
		}
	}
	return stateIndex{}, false
}

// deliveryStateCountsSQL counts deliveries by state, each through its
// index, and leaves out the states with none, as GROUP BY would (the store
// gauges). A GROUP BY state walks the covering deliveries_endpoint: 0.30 s
// at a million deliveries (sqlite3), these counts 0.03 s.
var deliveryStateCountsSQL = func() string {
	parts := make([]string, len(stateIndexes))
	for i, si := range stateIndexes {
		parts[i] = fmt.Sprintf("SELECT '%s' AS state, COUNT(*) AS n FROM deliveries INDEXED BY %s WHERE %s", si.state, si.index, si.cond)
	}
	return "SELECT state, n FROM (" + strings.Join(parts, " UNION ALL ") + ") WHERE n > 0"
}()

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) (store.Page[store.Delivery], error) {
	query, args, lim := listDeliveriesQuery(p)
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return store.Page[store.Delivery]{}, wrap("list deliveries", err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return store.Page[store.Delivery]{}, wrap("list deliveries", err)
		}
		s.leases.overlay(&d)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Delivery]{}, wrap("list deliveries", err)
	}
	return store.Paginate(out, lim, func(d store.Delivery) string { return d.ID }), nil
}

// listDeliveriesQuery is ListDeliveries' statement, its arguments and the
// page size.
func listDeliveriesQuery(p store.ListDeliveriesParams) (string, []any, int) {
	var (
		where []string
		args  []any
	)
	// The deliveries of a deleted endpoint that its delete has not reached
	// yet (DeleteEndpoint deletes them in chunks) are left out, as
	// GetDelivery answers not found for them (liveEndpoint): checked once
	// for a list of one endpoint's, else row by row.
	if p.EndpointID != "" {
		where = append(where, "endpoint_id = ?", "EXISTS (SELECT 1 FROM endpoints WHERE id = ?)")
		args = append(args, p.EndpointID, p.EndpointID)
	} else {
		where = append(where, strings.TrimPrefix(liveEndpoint, " AND "))
	}
	if p.EventID != "" {
		where = append(where, "event_id = ?")
		args = append(args, p.EventID)
	}
	if p.Tenant != "" {
		where = append(where, "tenant = ?")
		args = append(args, p.Tenant)
	}
	if p.State != "" {
		if si, ok := stateIndexOf(p.State); ok {
			where = append(where, si.cond)
		} else {
			where = append(where, "state = ?") // no delivery has it
			args = append(args, string(p.State))
		}
	}
	if p.EventType != "" {
		where = append(where, "event_type = ?")
		args = append(args, p.EventType)
	}
	if !p.Since.IsZero() {
		where = append(where, "updated_at >= ?")
		args = append(args, micro(p.Since))
	}
	if p.Cursor != "" {
		where = append(where, "id < ?")
		args = append(args, p.Cursor)
	}
	lim := p.ListParams.PageSize()
	args = append(args, lim+1)
	from := " FROM deliveries"
	if si, ok := stateIndexOf(p.State); ok && si.pinList && p.EndpointID == "" && p.EventID == "" {
		from += " INDEXED BY " + si.index
	}
	return "SELECT " + deliveryColumns + from + whereClause(where) + " ORDER BY id DESC LIMIT ?", args, lim
}

// ListAttempts implements store.Store.
func (s *Store) ListAttempts(ctx context.Context, deliveryID string) ([]store.Attempt, error) {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1 FROM deliveries WHERE id = ?"+liveEndpoint, deliveryID).Scan(&one); err != nil {
		return nil, wrap("delivery "+deliveryID, err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT delivery_id, number, started_at, duration_us, status_code, error, error_detail, location, response_excerpt
		FROM attempts WHERE delivery_id = ? ORDER BY number`, deliveryID)
	if err != nil {
		return nil, wrap("list attempts", err)
	}
	defer rows.Close()
	out := []store.Attempt{}
	for rows.Next() {
		var (
			a            store.Attempt
			started, dur int64
		)
		if err := rows.Scan(&a.DeliveryID, &a.Number, &started, &dur, &a.StatusCode, &a.Error, &a.ErrorDetail, &a.Location, &a.ResponseExcerpt); err != nil {
			return nil, wrap("list attempts", err)
		}
		a.StartedAt = fromMicro(started)
		a.Duration = time.Duration(dur) * time.Microsecond
		out = append(out, a)
	}
	return out, wrap("list attempts", rows.Err())
}

// The queue's hot queries. INDEXED BY pins them to the partial indexes
// deliveries_due and deliveries_due_tenant, which hold only pending rows
// without a lease column set (all pending rows: leases are in memory,
// leases.go), so their cost does not grow with succeeded, dead or held
// rows (the planner would otherwise pick the (state, updated_at) index and
// sort); SQLite fails the statement rather than silently falling back if
// the index is unusable. They read ids only (the indexes cover them): the
// claim steps past the leased ones, at most the deliveries in flight, and
// stops at its limit (no LIMIT clause: the statement is stepped lazily).
const (
	// ClaimQuery yields the due deliveries oldest due first.
	ClaimQuery = `SELECT id FROM deliveries INDEXED BY deliveries_due
		WHERE state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= ?
		ORDER BY next_attempt_at, id`
	// ClaimTenantQuery is ClaimQuery for one tenant's oldest due
	// deliveries, on deliveries_due_tenant (tenant, next_attempt_at, id):
	// those due together in creation order.
	ClaimTenantQuery = `SELECT id FROM deliveries INDEXED BY deliveries_due_tenant
		WHERE tenant = ? AND state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= ?
		ORDER BY next_attempt_at, id`
	// ClaimTenantDueQuery is ClaimTenantQuery with each row's due time
	// (the index covers it), for the fill of a claim with tenants to skip.
	ClaimTenantDueQuery = `SELECT id, next_attempt_at FROM deliveries INDEXED BY deliveries_due_tenant
		WHERE tenant = ? AND state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= ?
		ORDER BY next_attempt_at, id`
	// TenantDueQuery yields one tenant's pending deliveries (id, due
	// time) oldest due first: the claim's check that a tenant whose
	// earliest due delivery is leased has another one due.
	TenantDueQuery = `SELECT id, next_attempt_at FROM deliveries INDEXED BY deliveries_due_tenant
		WHERE tenant = ? AND state = 'pending' AND lease_owner IS NULL
		ORDER BY next_attempt_at, id`
	// NextTenantQuery is one step of the claim's skip scan over the
	// tenants with pending deliveries: the first tenant from ? on (the
	// tenant after t is from t+"\x00") and its earliest due time, one probe
	// of deliveries_due_tenant.
	NextTenantQuery = `SELECT tenant, next_attempt_at FROM deliveries INDEXED BY deliveries_due_tenant
		WHERE state = 'pending' AND lease_owner IS NULL AND tenant >= ?
		ORDER BY tenant, next_attempt_at LIMIT 1`
	// ClaimSkipQuery is ClaimQuery with each row's tenant, for the fill
	// of a claim with tenants to skip (store.ClaimParams.SkipTenants),
	// which reads a bounded number of its rows.
	ClaimSkipQuery = `SELECT id, tenant FROM deliveries INDEXED BY deliveries_due
		WHERE state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= ?
		ORDER BY next_attempt_at, id`
	// NextDueQuery yields the pending deliveries (id, due time) oldest
	// due first; the first one not leased is the next due.
	NextDueQuery = `SELECT id, next_attempt_at FROM deliveries INDEXED BY deliveries_due
		WHERE state = 'pending' AND lease_owner IS NULL ORDER BY next_attempt_at, id`
)

// skippingEndpoints maps each claim query to its variant for a claim with
// endpoints to skip (store.ClaimParams.SkipEndpoints): the same rows
// without those of the endpoints of a JSON array, the last parameter.
// The endpoint is not in the due indexes: each row stepped over is looked
// up in the table, so only a claim that skips endpoints pays for it.
var skippingEndpoints = func() map[string]string {
	m := map[string]string{}
	for _, q := range []string{ClaimQuery, ClaimTenantQuery, ClaimTenantDueQuery, ClaimSkipQuery} {
		i := strings.LastIndex(q, "ORDER BY")
		m[q] = q[:i] + "AND endpoint_id NOT IN (SELECT value FROM json_each(?))\n\t\t" + q[i:]
	}
	return m
}()

// claimQuery returns query, or its variant without the endpoints of
// skipJSON (a JSON array; "" = none) with skipJSON appended to args.
func claimQuery(query, skipJSON string, args ...any) (string, []any) {
	if skipJSON == "" {
		return query, args
	}
	return skippingEndpoints[query], append(args, skipJSON)
}

// claimDeliveriesQuery reads the claimed deliveries (ids as a JSON array).
var claimDeliveriesQuery = "SELECT " + deliveryColumns + " FROM deliveries WHERE id IN (SELECT value FROM json_each(?))"

// ClaimDeliveries implements store.Store. It reads the batch on the writer
// connection (so no completion, pause or rescue runs in between) and
// leases it in memory (leases.go): the transaction writes nothing. The
// first claim takes the claim lock; ErrClaimLocked (with
// store.ErrUnavailable) when another process holds it.
func (s *Store) ClaimDeliveries(ctx context.Context, p store.ClaimParams) ([]store.Claim, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	if err := s.takeClaimLock(ctx); err != nil {
		return nil, wrap("claim", err)
	}
	s.claimsWaiting.Add(1)
	tx, done, err := s.claimTx(ctx)
	s.claimsWaiting.Add(-1)
	if err != nil {
		return nil, wrap("claim", err)
	}
	defer done()
	now, until := micro(p.Now), micro(p.Now.Add(p.Lease))
	var skipEP string // p.SkipEndpoints as a JSON array ("" = none)
	if len(p.SkipEndpoints) > 0 {
		b, err := json.Marshal(p.SkipEndpoints)
		if err != nil {
			return nil, wrap("claim", err)
		}
		skipEP = string(b)
	}
	tenants, complete, err := s.dueTenants(ctx, tx, p)
	if err != nil {
		return nil, wrap("claim", err)
	}
	turns := make(map[string]int, len(tenants))
	for i, t := range tenants {
		turns[t] = i + 1
	}
	var ids []string
	taken := make(map[string]bool, p.Limit)
	// pick adds up to want ids of query's rows that are neither leased
	// nor taken already.
	pick := func(want int, query string, args ...any) error {
		query, args = claimQuery(query, skipEP, args...)
		st, err := s.stmt(ctx, tx, query)
		if err != nil {
			return err
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		// The leases change only while the writer is held (by this claim
		// now): one read lock for the walk, and the leased ids, most of
		// what is read, are looked up without copying them (RawBytes).
		s.leases.mu.RLock()
		defer s.leases.mu.RUnlock()
		var raw sql.RawBytes
		for want > 0 && rows.Next() {
			s.claimSteps.Add(1)
			if err := rows.Scan(&raw); err != nil {
				return err
			}
			if _, leased := s.leases.m[string(raw)]; leased || taken[string(raw)] {
				continue
			}
			id := string(raw)
			taken[id] = true
			ids = append(ids, id)
			want--
		}
		return rows.Err()
	}
	if len(tenants) > 0 {
		per := (p.Limit + len(tenants) - 1) / len(tenants)
		for _, t := range tenants {
			if err := pick(min(per, p.Limit-len(ids)), ClaimTenantQuery, t, now); err != nil {
				return nil, wrap("claim", err)
			}
			if len(ids) >= p.Limit {
				break
			}
		}
	}
	if rest := p.Limit - len(ids); rest > 0 && len(p.SkipTenants) == 0 {
		// Tenants with fewer due than their share leave room (or the probes
		// ran out before a due tenant was found): fill it oldest due first,
		// whatever the tenant.
		if err := pick(rest, ClaimQuery, now); err != nil {
			return nil, wrap("claim", err)
		}
	} else if rest > 0 {
		// The same, but a skipped tenant's rows, however many and however
		// old, must not be stepped over one by one: first the tenants the
		// round served, then, only if the round may have missed some, a
		// bounded walk of the oldest due.
		more, err := s.fillServed(ctx, tx, tenants, rest, now, skipEP, taken)
		if err != nil {
			return nil, wrap("claim", err)
		}
		ids = append(ids, more...)
		if rest -= len(more); rest > 0 && !complete {
			more, err := s.fillBounded(ctx, tx, p, rest, skipEP, taken)
			if err != nil {
				return nil, wrap("claim", err)
			}
			ids = append(ids, more...)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// The deliveries of an endpoint whose values do not open are left out
	// (unleased: only the claims returned are leased below) and reported;
	// those whose own row or event's row does not decode are dead-lettered
	// on this transaction (store.PoisonedRows) and reported.
	claims, unreadable, poisoned, err := s.loadClaims(ctx, tx, ids, p.Owner, fromMicro(until), now)
	if err != nil {
		return nil, wrap("claim", err)
	}
	if len(poisoned) > 0 {
		if err := s.deadLetterPoisoned(ctx, tx, poisoned, now); err != nil {
			return nil, wrap("claim: dead-letter deliveries whose stored rows do not decode", err)
		}
	}
	for i := range claims {
		claims[i].Turn = turns[claims[i].Delivery.Tenant]
	}
	if err := tx.Commit(); err != nil {
		return nil, wrap("claim", err)
	}
	// Lease them while the writer is still held (done runs after).
	leased := make([]string, len(claims))
	ls := make([]lease, len(claims))
	for i, c := range claims {
		leased[i] = c.Delivery.ID
		ls[i] = lease{owner: p.Owner, until: until, endpoint: c.Delivery.EndpointID, tenant: c.Delivery.Tenant}
	}
	s.leases.add(leased, ls)
	// Restore "oldest due first" (the id lookup yields rows in id order).
	slices.SortFunc(claims, func(a, b store.Claim) int {
		if c := a.Delivery.NextAttemptAt.Compare(b.Delivery.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.Delivery.ID, b.Delivery.ID)
	})
	p.Report(unreadable)
	p.ReportPoisoned(poisoned)
	return claims, nil
}

// deadLetterPoisonedSQL dead-letters a delivery a claim (at ?3) cannot
// attempt because its stored row or its event's does not decode, with
// last_error ?2 (store.PoisonedRows): no attempt, no failure streak.
const deadLetterPoisonedSQL = `UPDATE deliveries SET state = 'dead', last_error = ?2, next_attempt_at = ?3, updated_at = ?3
	WHERE id = ?1 AND state = 'pending'`

// deadLetterPoisoned dead-letters the deliveries of ps on tx, the claim's
// transaction at now (microseconds), with delivery.dead_lettered for
// those whose own row decodes (the notice copies from it), and counts them
// in their endpoints' rollups (store.PoisonedRollups).
func (s *Store) deadLetterPoisoned(ctx context.Context, tx *sql.Tx, ps []store.PoisonedDelivery, now int64) error {
	for _, pd := range ps {
		if err := s.exec(ctx, tx, deadLetterPoisonedSQL, pd.ID, pd.LastError(), now); err != nil {
			return err
		}
		if pd.OwnRow {
			continue
		}
		if err := s.exec(ctx, tx, deadLetterNoticeSQL, pd.ID, now); err != nil {
			return err
		}
	}
	return s.addRollups(ctx, tx, store.PoisonedRollups(ps, fromMicro(now)))
}

// loadClaims reads the claims of deliveries ids on tx: each delivery
// (leased to owner until until), its event and its endpoint, in the order
// the id lookup yields them (ClaimDeliveries). The deliveries of an
// endpoint whose stored values do not open (store.UnreadableError) are left
// out of claims and reported in unreadable (store.DropUnreadable); those
// whose own row or event's row does not decode are left out and returned
// in poisoned (store.PoisonedRows), for the caller to dead-letter; those
// whose endpoint no longer exists are deleted on tx and left out, those
// whose endpoint is paused or disabled held on tx (at now, µs) and left
// out. A row
// whose id does not even decode fails the load.
func (s *Store) loadClaims(ctx context.Context, tx *sql.Tx, ids []string, owner string, until time.Time, now int64) (claims []store.Claim, unreadable []store.UnreadableEndpoint, poisoned []store.PoisonedDelivery, _ error) {
	claims = make([]store.Claim, 0, len(ids))
	var rows store.PoisonedRows
	if err := s.loadByIDs(ctx, tx, claimDeliveriesQuery, ids, func(sc scanner) error {
		d, err := scanDelivery(sc)
		if err != nil {
			// Scan fills the columns before the failing one: the id
			// comes first.
			if d.ID == "" {
				return err
			}
			rows.Delivery(d.ID, err)
		}
		d.LeaseOwner, d.LeaseUntil = owner, until
		claims = append(claims, store.Claim{Delivery: d})
		return nil
	}); err != nil {
		return nil, nil, nil, err
	}
	events := map[string]store.Event{}
	endpoints := map[string]store.Endpoint{}
	for _, c := range claims {
		events[c.Delivery.EventID] = store.Event{}
		endpoints[c.Delivery.EndpointID] = store.Endpoint{}
	}
	if err := s.loadByIDs(ctx, tx, claimEventsQuery, keys(events), func(sc scanner) error {
		e, err := scanEvent(sc)
		if err != nil {
			if e.ID == "" {
				return err
			}
			rows.Event(e.ID, err)
			return nil
		}
		events[e.ID] = e
		return nil
	}); err != nil {
		return nil, nil, nil, err
	}
	if rows.Any() {
		claims, poisoned = rows.Drop(claims)
	}
	var bad map[string]*store.UnreadableError
	if err := s.loadByIDs(ctx, tx, claimEndpointsQuery, keys(endpoints), func(sc scanner) error {
		e, err := s.scanEndpoint(sc)
		if err != nil {
			return store.NoteUnreadable(&bad, err)
		}
		endpoints[e.ID] = e
		return nil
	}); err != nil {
		return nil, nil, nil, err
	}
	if bad != nil {
		claims, _, unreadable = store.DropUnreadable(claims, bad)
	}
	// A delivery whose endpoint is gone is one a delete has not reached
	// yet (DeleteEndpoint deletes them in chunks after the endpoint's row):
	// it is deleted here, not leased. One whose endpoint is paused or
	// disabled is one a hold has not reached yet (holdRest: the chunks of
	// a pause or a disable, the start-up fix-ups): it is held here, not
	// leased, as the hold would have.
	var orphans, unheld []string
	claims = slices.DeleteFunc(claims, func(c store.Claim) bool {
		switch e := endpoints[c.Delivery.EndpointID]; {
		case e.ID == "":
			orphans = append(orphans, c.Delivery.ID)
			return true
		case e.State == store.EndpointPaused || e.State == store.EndpointDisabled:
			unheld = append(unheld, c.Delivery.ID)
			return true
		}
		return false
	})
	if len(orphans) > 0 {
		// The statement checks the endpoint again itself: no delivery of an
		// existing endpoint is ever deleted here, whatever the map said.
		if _, err := tx.ExecContext(ctx, "DELETE FROM deliveries WHERE id IN (SELECT value FROM json_each(?))"+
			" AND NOT EXISTS (SELECT 1 FROM endpoints WHERE endpoints.id = deliveries.endpoint_id)", jsonIDs(orphans)); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(unheld) > 0 {
		if _, err := tx.ExecContext(ctx, "UPDATE deliveries SET state = 'paused', updated_at = ?2 WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'"+
			" AND (SELECT state FROM endpoints WHERE endpoints.id = deliveries.endpoint_id) IN ('paused', 'disabled')", jsonIDs(unheld), now); err != nil {
			return nil, nil, nil, err
		}
	}
	for i := range claims {
		claims[i].Event = events[claims[i].Delivery.EventID]
		claims[i].Endpoint = endpoints[claims[i].Delivery.EndpointID]
	}
	return claims, unreadable, poisoned, nil
}

// dueTenants walks the tenants with claimable deliveries in tenant order
// from after p.TenantCursor, wrapping around, and returns those with a
// delivery due by p.Now: at most p.Limit tenants, after at most
// store.ClaimTenantProbes × p.Limit probes (one index probe each; a tenant
// of p.SkipTenants is stepped over with one probe not counted). complete
// reports that the walk went all the way round (no due tenant was left
// out).
func (s *Store) dueTenants(ctx context.Context, tx *sql.Tx, p store.ClaimParams) (out []string, complete bool, _ error) {
	stmt, err := s.stmt(ctx, tx, NextTenantQuery)
	if err != nil {
		return nil, false, err
	}
	now := micro(p.Now)
	probes := store.ClaimTenantProbes * p.Limit
	// First the tenants after the cursor, then from the first tenant up to
	// the cursor (included).
	for pass := range 2 {
		from := p.TenantCursor + "\x00"
		if pass == 1 {
			if p.TenantCursor == "" {
				break
			}
			from = ""
		}
		for {
			if probes <= 0 || len(out) >= p.Limit {
				return out, false, nil
			}
			var (
				tenant string
				due    int64
			)
			s.claimSteps.Add(1)
			err := stmt.QueryRowContext(ctx, from).Scan(&tenant, &due)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return nil, false, err
			}
			if pass == 1 && tenant > p.TenantCursor {
				break // wrapped around to where the first pass began
			}
			from = tenant + "\x00"
			if slices.Contains(p.SkipTenants, tenant) {
				continue
			}
			probes--
			if due <= now && s.leases.tenantLeases(tenant) > 0 {
				// Its earliest may be in flight: find its first unleased.
				st, err := s.stmt(ctx, tx, TenantDueQuery)
				if err != nil {
					return nil, false, err
				}
				var ok bool
				due, ok, err = s.firstUnleasedDue(st.QueryContext(ctx, tenant))
				if err != nil {
					return nil, false, err
				}
				if !ok {
					due = now + 1
				}
			}
			if due <= now {
				out = append(out, tenant)
			}
		}
	}
	return out, true, nil
}

// fillServed returns up to want ids, neither leased nor in taken, of the
// due deliveries (by now) of tenants, oldest due first (the fill of a
// claim with tenants to skip), and adds them to taken. It reads at most
// want rows of each tenant besides its leased and taken ones.
func (s *Store) fillServed(ctx context.Context, tx *sql.Tx, tenants []string, want int, now int64, skipEP string, taken map[string]bool) ([]string, error) {
	if len(tenants) == 0 {
		return nil, nil
	}
	type cand struct {
		id  string
		due int64
	}
	var cands []cand
	query, _ := claimQuery(ClaimTenantDueQuery, skipEP)
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	for _, t := range tenants {
		if err := func() error {
			_, args := claimQuery(ClaimTenantDueQuery, skipEP, t, now)
			rows, err := st.QueryContext(ctx, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			s.leases.mu.RLock()
			defer s.leases.mu.RUnlock()
			var (
				raw sql.RawBytes
				due int64
			)
			for n := 0; n < want && rows.Next(); {
				s.claimSteps.Add(1)
				if err := rows.Scan(&raw, &due); err != nil {
					return err
				}
				if _, leased := s.leases.m[string(raw)]; leased || taken[string(raw)] {
					continue
				}
				cands = append(cands, cand{string(raw), due})
				n++
			}
			return rows.Err()
		}(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.due != b.due {
			return cmp.Compare(a.due, b.due)
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, 0, min(want, len(cands)))
	for _, c := range cands[:min(want, len(cands))] {
		taken[c.id] = true
		out = append(out, c.id)
	}
	return out, nil
}

// fillBounded returns up to want ids of the oldest due deliveries (by
// p.Now) of tenants not in p.SkipTenants, neither leased nor in taken, and
// adds them to taken. It reads at most store.ClaimTenantProbes·want rows
// besides the leased ones, whatever the skipped tenants' backlog.
func (s *Store) fillBounded(ctx context.Context, tx *sql.Tx, p store.ClaimParams, want int, skipEP string, taken map[string]bool) ([]string, error) {
	query, args := claimQuery(ClaimSkipQuery, skipEP, micro(p.Now))
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	s.leases.mu.RLock()
	defer s.leases.mu.RUnlock()
	var (
		out         []string
		raw, tenant sql.RawBytes
	)
	for budget := store.ClaimTenantProbes * want; want > 0 && budget > 0 && rows.Next(); {
		s.claimSteps.Add(1)
		if err := rows.Scan(&raw, &tenant); err != nil {
			return nil, err
		}
		if _, leased := s.leases.m[string(raw)]; leased {
			continue
		}
		budget--
		if taken[string(raw)] || slices.Contains(p.SkipTenants, string(tenant)) {
			continue
		}
		id := string(raw)
		taken[id] = true
		out = append(out, id)
		want--
	}
	return out, rows.Err()
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Statements that read a claim's events and endpoints: one prepared
// statement each, the ids passed as one JSON array (json_each), instead of
// SQL text that changes with the batch size and is parsed every time.
var (
	claimEventsQuery    = "SELECT " + eventColumns + " FROM events WHERE id IN (SELECT value FROM json_each(?))"
	claimEndpointsQuery = "SELECT " + endpointColumns + " FROM endpoints WHERE id IN (SELECT value FROM json_each(?))"
)

func (s *Store) loadByIDs(ctx context.Context, tx *sql.Tx, query string, ids []string, scan func(scanner) error) error {
	arr, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	st, err := s.stmt(ctx, tx, query)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, string(arr))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CompleteDeliveries implements store.Store.
func (s *Store) CompleteDeliveries(ctx context.Context, cs []store.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	tx, done, err := s.queueTx(ctx)
	if err != nil {
		return wrap("complete", err)
	}
	defer done()
	s.holdAfter = s.holdAfter[:0] // the writer is held: this batch's
	// held[i]: the delivery's lease (leases.go) is still the one cs[i] was
	// made under (its owner and end), so the delivery moves; the leases do
	// not change while the writer is held.
	held := make([]bool, len(cs))
	for i, c := range cs {
		held[i] = s.leases.held(c.DeliveryID, c.Owner, micro(c.LeaseUntil))
	}
	if err := s.completeBulk(ctx, tx, cs, held); err != errNotBulk {
		if err != nil {
			return wrap("complete", err)
		}
		return s.commitCompletions(ctx, tx, done, cs, held)
	}
	insAttempt, err := s.stmt(ctx, tx, insertAttemptSQL)
	if err != nil {
		return wrap("complete", err)
	}
	upd, err := s.stmt(ctx, tx, completeDeliverySQL)
	if err != nil {
		return wrap("complete", err)
	}
	deferStmt, err := s.stmt(ctx, tx, deferDeliverySQL)
	if err != nil {
		return wrap("complete", err)
	}
	// A batch naming a delivery twice: only the first completion holding
	// the lease moves it (the lease is then released).
	released := map[string]bool{}
	for i, c := range cs {
		if held[i] && released[c.DeliveryID] {
			held[i] = false
		}
		if held[i] {
			released[c.DeliveryID] = true
		}
		if c.Deferred {
			if held[i] {
				if _, err := deferStmt.ExecContext(ctx, micro(c.NextAttemptAt), c.DeliveryID); err != nil {
					return wrap("complete: defer", err)
				}
			}
			continue
		}
		a := c.Attempt
		if _, err := insAttempt.ExecContext(ctx, c.DeliveryID, micro(a.StartedAt), a.Duration.Microseconds(), a.StatusCode, a.Error, a.ErrorDetail, a.Location, a.ResponseExcerpt); err != nil {
			return wrap("complete: attempt", err)
		}
		if held[i] {
			if _, err := upd.ExecContext(ctx, string(c.State), c.ClientErrors(), micro(c.DueAt()), a.StatusCode, a.Error, micro(c.Now), c.DeliveryID); err != nil {
				return wrap("complete: delivery", err)
			}
		}
		endpointID := c.EndpointID
		if endpointID == "" {
			if err := tx.QueryRowContext(ctx, "SELECT endpoint_id FROM deliveries WHERE id = ?", c.DeliveryID).Scan(&endpointID); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					continue // deleted meanwhile
				}
				return wrap("complete", err)
			}
		}
		if c.DisableEndpoint {
			if err := s.disableEndpoint(ctx, tx, endpointID, c.DisableReason, c.Now, released); err != nil {
				return wrap("complete: disable endpoint", err)
			}
			continue
		}
		if err := s.updateStreak(ctx, tx, endpointID, c, released); err != nil {
			return wrap("complete: failure streak", err)
		}
	}
	return s.commitCompletions(ctx, tx, done, cs, held)
}

// commitCompletions ends a completion batch: the dead-letter notices of the
// completions that moved their delivery (held), the stats rollups, the
// commit; then, the writer still held, it releases the leases of held;
// then it releases the writer (done) and starts the hold of the rest of
// the pending deliveries of the endpoints the batch disabled, in the
// background (holdRestAfter): the batch does not wait for it.
func (s *Store) commitCompletions(ctx context.Context, tx *sql.Tx, done func(), cs []store.Completion, held []bool) error {
	if err := s.deadLetterNotices(ctx, tx, cs, held); err != nil {
		return wrap("complete: dead-letter notices", err)
	}
	if err := s.writeRollups(ctx, tx, cs); err != nil {
		return wrap("complete: stats", err)
	}
	if err := tx.Commit(); err != nil {
		return wrap("complete", err)
	}
	var ids []string
	for i, c := range cs {
		if held[i] {
			ids = append(ids, c.DeliveryID)
		}
	}
	s.leases.drop(ids)
	holds := slices.Clone(s.holdAfter)
	s.holdAfter = s.holdAfter[:0]
	done()
	s.holdRestAfter(holds)
	return nil
}

// deadLetterNoticeSQL records delivery.dead_lettered for a delivery the
// completion (?2: its time) just moved to dead — not for a delivery of an
// operational event (nor for a completion whose lease was lost: the caller
// skips those).
const deadLetterNoticeSQL = `INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at,
		delivery_id, event_id, event_type, attempts, last_status_code, last_error)
	SELECT e.id, e.tenant, e.url, e.kind, e.state, e.state_reason, 'delivery.dead_lettered', ?2,
		d.id, d.event_id, d.event_type, d.attempts, d.last_status_code, d.last_error
	FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
	WHERE d.id = ?1 AND d.state = 'dead' AND d.updated_at = ?2 AND d.lease_owner IS NULL
	  AND d.event_type NOT LIKE 'endpoint.%' AND d.event_type <> 'delivery.dead_lettered'`

// deadLetterNotices records delivery.dead_lettered for each completion of
// the batch that dead-lettered its delivery, in the batch's transaction.
func (s *Store) deadLetterNotices(ctx context.Context, tx *sql.Tx, cs []store.Completion, held []bool) error {
	for i, c := range cs {
		if !held[i] || c.Deferred || c.State != store.DeliveryDead {
			continue
		}
		if err := s.exec(ctx, tx, deadLetterNoticeSQL, c.DeliveryID, micro(c.Now)); err != nil {
			return err
		}
	}
	return nil
}

// successAt is the time of the last success of endpoint id in a batch.
func successAt(cs []store.Completion, id string) time.Time {
	var at time.Time
	for _, c := range cs {
		if c.EndpointID == id && c.State == store.DeliverySucceeded && !c.Deferred && c.Now.After(at) {
			at = c.Now
		}
	}
	return at
}

const (
	// insertAttemptSQL numbers the attempt after the delivery's last one,
	// so a repeated attempt (a rescued lease) never collides; nothing is
	// written for a delivery deleted meanwhile.
	insertAttemptSQL = `INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, error_detail, location, response_excerpt)
		SELECT ?1, COALESCE((SELECT MAX(number) FROM attempts WHERE delivery_id = ?1), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
		WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = ?1)`
	// completeDeliverySQL: a retry of a delivery whose endpoint was paused
	// or disabled meanwhile is held (paused) instead of pending. It and
	// deferDeliverySQL run only for a completion whose lease (owner and
	// end) is still the delivery's (leases.go).
	completeDeliverySQL = `UPDATE deliveries SET
		state = CASE WHEN ?1 = 'pending' AND (SELECT state FROM endpoints WHERE id = deliveries.endpoint_id) IS NOT 'enabled' THEN 'paused' ELSE ?1 END,
		attempts = attempts + 1, client_errors = client_errors + ?2, next_attempt_at = ?3,
		last_status_code = ?4, last_error = ?5, updated_at = ?6
		WHERE id = ?7`
	deferDeliverySQL = `UPDATE deliveries SET
		state = CASE WHEN (SELECT state FROM endpoints WHERE id = deliveries.endpoint_id) IS NOT 'enabled' THEN 'paused' ELSE state END,
		next_attempt_at = ?1 WHERE id = ?2`
	clearStreakSQL = "UPDATE endpoints SET failing_since = NULL, failure_count = " + recoverCount + " WHERE id = ? AND (failing_since IS NOT NULL OR failure_count < 0) RETURNING failure_count"
	startStreakSQL = `UPDATE endpoints SET failing_since = COALESCE(failing_since, ?1),
		failure_count = CASE WHEN failing_since IS NULL THEN 1 ELSE failure_count + 1 END
		WHERE id = ?2 RETURNING failing_since, failure_count, state`
)

var errNotBulk = errors.New("batch needs the row-by-row path")

// completionJSON is one deferral as a row of bulkDeferSQL.
type completionJSON struct {
	D string `json:"d"` // delivery id
	N int64  `json:"n"` // next_attempt_at, µs
}

const (
	// The deferral of a batch and the end of its endpoints' failure streaks
	// take it as one JSON array: one statement per batch, few fields.
	bulkDeferSQL = `UPDATE deliveries SET
		state = CASE WHEN (SELECT state FROM endpoints WHERE id = deliveries.endpoint_id) IS NOT 'enabled' THEN 'paused' ELSE state END,
		next_attempt_at = c.n
		FROM (SELECT value->>'d' AS id, value->>'n' AS n FROM json_each(?1)) AS c
		WHERE deliveries.id = c.id`
	bulkClearStreakSQL = `UPDATE endpoints SET failing_since = NULL, failure_count = ` + recoverCount + `
		WHERE id IN (SELECT value FROM json_each(?1)) AND (failing_since IS NOT NULL OR failure_count < 0) RETURNING id, failure_count`
)

// Attempted completions are written with multi-row VALUES statements
// prepared once per row count in valuesChunks (a batch of n is split into
// chunks, largest first): two statements per chunk, the attempt rows and
// the delivery updates. Passing the rows as JSON objects instead cost a
// conversion of each object back to text and a parse of it per field
// (value->>'x'): a fifth of BenchmarkDrainQueue's CPU. The small sizes
// serve a light load, whose batches hold a few rows: with sizes 64, 16, 4
// and 1 a batch of three was three statements of each kind, and the
// statements' fixed cost 9 % of BenchmarkTrickle's instructions.
var valuesChunks = []int{64, 16, 8, 4, 2, 1}

// attemptValuesRow and completeValuesRow are the parameters of one row of
// the statements below; their argument order is fixed by appendAttemptArgs
// and appendCompleteArgs.
const (
	attemptValuesRow  = "(?,?,?,?,?,?,?,?,?)" // delivery id, number, started_at µs, duration µs, status, error, error_detail, location, excerpt
	completeValuesRow = "(?,?,?,?,?,?,?)"     // delivery id, state, client error 0/1, next_attempt_at µs, status, error, now µs
)

// insertAttemptsValuesSQL writes each attempt with the number the engine
// gave it (the claimed delivery's attempts + 1), and nothing for a deleted
// delivery or a number already taken; insertAttempts numbers those after
// the delivery's last attempt instead. Looking the last number up for
// every row (insertAttemptSQL) cost 5 % of the store's instructions per
// delivered delivery (docs/BENCHMARKS.md, "Round 2, eighth session"); the
// number is taken only when an attempt was repeated (a rescued lease) or
// a completion did not hold the lease.
func insertAttemptsValuesSQL(rows int) string {
	return `INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, error_detail, location, response_excerpt)
		SELECT v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, v.column8, v.column9
		FROM (VALUES ` + repeatJoin(attemptValuesRow, rows) + `) AS v WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = v.column1)
		ON CONFLICT (delivery_id, number) DO NOTHING`
}

// completeValuesSQL applies completions as completeDeliverySQL does (for
// completions still under their lease).
func completeValuesSQL(rows int) string {
	return `UPDATE deliveries SET
		state = CASE WHEN c.column2 = 'pending' AND (SELECT state FROM endpoints WHERE id = deliveries.endpoint_id) IS NOT 'enabled' THEN 'paused' ELSE c.column2 END,
		attempts = attempts + 1, client_errors = client_errors + c.column3, next_attempt_at = c.column4,
		last_status_code = c.column5, last_error = c.column6, updated_at = c.column7
		FROM (VALUES ` + repeatJoin(completeValuesRow, rows) + `) AS c
		WHERE deliveries.id = c.column1`
}

func repeatJoin(s string, n int) string {
	return strings.TrimSuffix(strings.Repeat(s+",", n), ",")
}

func appendAttemptArgs(args []any, c store.Completion) []any {
	a := c.Attempt
	return append(args, c.DeliveryID, a.Number, micro(a.StartedAt), a.Duration.Microseconds(), a.StatusCode, a.Error, a.ErrorDetail, a.Location, a.ResponseExcerpt)
}

// attemptWrittenSQL finds an attempt written by insertAttemptsValuesSQL.
const attemptWrittenSQL = "SELECT 1 FROM attempts WHERE delivery_id = ? AND number = ? AND started_at = ?"

// insertAttempts records the attempts of cs: those with a number in bulk
// (insertAttemptsValuesSQL, chunks of valuesChunks); when a chunk wrote
// fewer rows than it had, and for attempts without a number, each one not
// written is inserted by insertAttemptSQL, numbered after the delivery's
// last attempt (nothing for a deleted delivery).
func (s *Store) insertAttempts(ctx context.Context, tx *sql.Tx, cs []store.Completion) error {
	numbered := make([]store.Completion, 0, len(cs))
	var rest []store.Completion
	for _, c := range cs {
		if c.Attempt.Number > 0 {
			numbered = append(numbered, c)
		} else {
			rest = append(rest, c)
		}
	}
	var args []any
	for chunk := range valuesChunked(numbered) {
		args = args[:0]
		for _, c := range chunk {
			args = appendAttemptArgs(args, c)
		}
		st, err := s.stmt(ctx, tx, insertAttemptsValues[len(chunk)])
		if err != nil {
			return err
		}
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == int64(len(chunk)) {
			continue
		}
		written, err := s.stmt(ctx, tx, attemptWrittenSQL)
		if err != nil {
			return err
		}
		for _, c := range chunk {
			var one int
			err := written.QueryRowContext(ctx, c.DeliveryID, c.Attempt.Number, micro(c.Attempt.StartedAt)).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				rest = append(rest, c)
			} else if err != nil {
				return err
			}
		}
	}
	for _, c := range rest {
		a := c.Attempt
		if err := s.exec(ctx, tx, insertAttemptSQL, c.DeliveryID, micro(a.StartedAt), a.Duration.Microseconds(), a.StatusCode, a.Error, a.ErrorDetail, a.Location, a.ResponseExcerpt); err != nil {
			return err
		}
	}
	return nil
}

func appendCompleteArgs(args []any, c store.Completion) []any {
	return append(args, c.DeliveryID, string(c.State), c.ClientErrors(), micro(c.DueAt()), c.Attempt.StatusCode, c.Attempt.Error, micro(c.Now))
}

// completeBulk applies a batch with the bulk statements: every attempt is
// recorded, a delivery moves only when held says its completion holds the
// lease. It returns errNotBulk (having changed nothing) for a batch the
// row-by-row path must handle: one naming a delivery twice, or without
// endpoint ids.
func (s *Store) completeBulk(ctx context.Context, tx *sql.Tx, cs []store.Completion, held []bool) error {
	seen := make(map[string]bool, len(cs))
	var (
		deferred           []completionJSON
		attempted          = make([]store.Completion, 0, len(cs))
		moved              = make([]store.Completion, 0, len(cs))
		succeededEndpoints []string
	)
	released := map[string]bool{}
	for i, c := range cs {
		if seen[c.DeliveryID] || c.EndpointID == "" {
			return errNotBulk
		}
		seen[c.DeliveryID] = true
		if held[i] {
			released[c.DeliveryID] = true
		}
		if c.Deferred {
			if held[i] {
				deferred = append(deferred, completionJSON{D: c.DeliveryID, N: micro(c.NextAttemptAt)})
			}
			continue
		}
		attempted = append(attempted, c)
		if held[i] {
			moved = append(moved, c)
		}
		if c.State == store.DeliverySucceeded && !c.DisableEndpoint && !slices.Contains(succeededEndpoints, c.EndpointID) {
			succeededEndpoints = append(succeededEndpoints, c.EndpointID)
		}
	}
	if len(deferred) > 0 {
		arr, err := json.Marshal(deferred)
		if err != nil {
			return err
		}
		if err := s.exec(ctx, tx, bulkDeferSQL, string(arr)); err != nil {
			return err
		}
	}
	if err := s.insertAttempts(ctx, tx, attempted); err != nil {
		return err
	}
	if err := execValues(ctx, s, tx, moved, completeValues, appendCompleteArgs); err != nil {
		return err
	}
	if len(succeededEndpoints) > 0 {
		arr, err := json.Marshal(succeededEndpoints)
		if err != nil {
			return err
		}
		clear, err := s.stmt(ctx, tx, bulkClearStreakSQL)
		if err != nil {
			return err
		}
		rows, err := clear.QueryContext(ctx, string(arr))
		if err != nil {
			return err
		}
		var recovered []string
		for rows.Next() {
			var (
				id       string
				failures int
			)
			if err := rows.Scan(&id, &failures); err != nil {
				rows.Close()
				return err
			}
			if failures >= store.FailingAfter {
				recovered = append(recovered, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range recovered {
			if err := addNotice(ctx, tx, id, store.NoticeEndpointRecovered, successAt(cs, id)); err != nil {
				return err
			}
		}
	}
	// Endpoint state changes stay row by row (rare: failures and 410s).
	for _, c := range cs {
		switch {
		case c.Deferred || c.State == store.DeliverySucceeded:
		case c.DisableEndpoint:
			if err := s.disableEndpoint(ctx, tx, c.EndpointID, c.DisableReason, c.Now, released); err != nil {
				return err
			}
		default:
			if err := s.updateStreak(ctx, tx, c.EndpointID, c, released); err != nil {
				return err
			}
		}
	}
	return nil
}

// execValues runs the multi-row statement query[n] over rows in chunks of
// valuesChunks sizes (largest first), appendArgs giving each row's
// parameters.
func execValues[R any](ctx context.Context, s *Store, tx *sql.Tx, rows []R, query valuesSQL, appendArgs func([]any, R) []any) error {
	var args []any
	for chunk := range valuesChunked(rows) {
		args = args[:0]
		for _, r := range chunk {
			args = appendArgs(args, r)
		}
		if err := s.exec(ctx, tx, query[len(chunk)], args...); err != nil {
			return err
		}
	}
	return nil
}

// valuesSQL is a multi-row statement's text for each size of
// valuesChunks, built once: building it per batch (strings.Repeat and the
// column lists of upsertStatsSQL) was 3 % of a light load's instructions
// (BenchmarkTrickle under callgrind).
type valuesSQL map[int]string

func newValuesSQL(build func(rows int) string) valuesSQL {
	m := make(valuesSQL, len(valuesChunks))
	for _, n := range valuesChunks {
		m[n] = build(n)
	}
	return m
}

var (
	insertAttemptsValues = newValuesSQL(insertAttemptsValuesSQL)
	completeValues       = newValuesSQL(completeValuesSQL)
	upsertStatsValues    = newValuesSQL(upsertStatsSQL)
)

// valuesChunked yields rows in chunks of valuesChunks sizes, largest first.
func valuesChunked[R any](rows []R) iter.Seq[[]R] {
	return func(yield func([]R) bool) {
		for rest := rows; len(rest) > 0; {
			n := valuesChunks[len(valuesChunks)-1]
			for _, size := range valuesChunks {
				if size <= len(rest) {
					n = size
					break
				}
			}
			if !yield(rest[:n]) {
				return
			}
			rest = rest[n:]
		}
	}
}

// updateStreak keeps the endpoint's failure streak: a success ends it; a
// failure starts it (if none) or adds to it and, when the rule says so
// (store.ShouldDisable) of an enabled endpoint, disables the endpoint. The
// notices of a failure are store.StreakNotices': endpoint.failing is
// written before the disable, so its snapshot is of the enabled endpoint.
//
// released: see disableEndpoint.
func (s *Store) updateStreak(ctx context.Context, tx *sql.Tx, endpointID string, c store.Completion, released map[string]bool) error {
	if c.State == store.DeliverySucceeded {
		var failures int
		clear, err := s.stmt(ctx, tx, clearStreakSQL)
		if err != nil {
			return err
		}
		err = clear.QueryRowContext(ctx, endpointID).Scan(&failures)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // no streak
		}
		if err != nil || failures < store.FailingAfter {
			return err
		}
		return addNotice(ctx, tx, endpointID, store.NoticeEndpointRecovered, c.Now)
	}
	var (
		since    sql.NullInt64
		failures int
		state    string
	)
	st, err := s.stmt(ctx, tx, startStreakSQL)
	if err != nil {
		return err
	}
	err = st.QueryRowContext(ctx, micro(c.Attempt.StartedAt), endpointID).Scan(&since, &failures, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	disables := state == string(store.EndpointEnabled) && since.Valid &&
		store.ShouldDisable(fromMicro(since.Int64), failures, c.Now, c.DisableAfter, c.DisableMinFailures)
	for _, typ := range store.StreakNotices(failures, disables) {
		if typ == store.NoticeEndpointDisabled {
			break // disableEndpoint writes it
		}
		if err := addNotice(ctx, tx, endpointID, typ, c.Now); err != nil {
			return err
		}
	}
	if !disables {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE endpoints SET failure_count = ? WHERE id = ?", store.StreakCountAtDisable(failures), endpointID); err != nil {
		return err
	}
	return s.disableEndpoint(ctx, tx, endpointID, store.DisableReason(fromMicro(since.Int64), c.Attempt), c.Now, released)
}

// disableEndpoint disables an enabled endpoint, records the notice
// endpoint.disabled, and holds the first chunk (holdChunk) of its pending,
// unleased deliveries (leased ones are held when they complete). tx is a
// completion batch's, on the writer connection. An endpoint with more
// pending deliveries is noted in s.holdAfter: the rest is held after the
// batch's commit, one chunk per transaction, in the background
// (holdRestAfter).
//
// released are the deliveries whose lease the transaction's completions
// already gave up (they move although the lease table still lists them
// until the commit): they are held too.
func (s *Store) disableEndpoint(ctx context.Context, tx *sql.Tx, endpointID, reason string, now time.Time, released map[string]bool) error {
	res, err := tx.ExecContext(ctx, `UPDATE endpoints SET state = 'disabled', state_reason = ?, updated_at = ?2
		WHERE id = ?3 AND state = 'enabled'`, reason, micro(now), endpointID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	s.endpointChanged()
	if err := addNotice(ctx, tx, endpointID, store.NoticeEndpointDisabled, now); err != nil {
		return err
	}
	res, err = tx.ExecContext(ctx, holdDeliveriesSQL, micro(now), endpointID, s.leases.ofEndpoint(endpointID, released), holdChunk)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == holdChunk {
		s.holdAfter = append(s.holdAfter, pendingHold{endpointID, micro(now)})
	}
	return nil
}

// A pendingHold is an endpoint a completion batch disabled with more
// pending deliveries than its first chunk held (disableEndpoint), and the
// time of the disable (µs).
type pendingHold struct {
	endpointID string
	at         int64
}

// holdRestAfter holds, after a completion batch's commit and without the
// writer, the rest of the pending deliveries of the endpoints it disabled
// (holds, as taken from s.holdAfter), one chunk per transaction, in the
// store's background (inBackground): the batch returns at once. Holding
// them in the batch's call kept the engine's completer, and with it every
// tenant's completions on the node, waiting for the whole hold (400
// chunks, seconds, for 200,000 deliveries; long enough, for a larger
// backlog behind publishes, for the leases of the completions waiting
// behind it to run out and their attempts to be repeated). A failure, or
// Close, stops it; what is left is held by the claims that meet it
// (loadClaims) and by the next start (takeClaimLock).
func (s *Store) holdRestAfter(holds []pendingHold) {
	if len(holds) == 0 {
		return
	}
	s.inBackground(func(ctx context.Context) {
		for _, h := range holds {
			if _, err := s.holdRest(ctx, h.endpointID, h.at); err != nil && ctx.Err() == nil {
				s.log.Warn("sqlite: holding the rest of a disabled endpoint's pending deliveries failed; claims hold each as it comes due, the next start holds the rest",
					"endpoint", h.endpointID, "error", err)
			}
		}
	})
}

// holdDeliveriesSQL holds (pauses) at most ?4 pending deliveries of
// endpoint ?2 at time ?1, the oldest first, except the leased ones (?3, a
// JSON array of ids: leases.go).
const holdDeliveriesSQL = `UPDATE deliveries SET state = 'paused', updated_at = ?1
	WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = ?2 AND state = 'pending' AND lease_owner IS NULL
	  AND id NOT IN (SELECT value FROM json_each(?3)) ORDER BY id LIMIT ?4)`

// RescueExpiredLeases implements store.Store: it forgets the leases that
// ended before now (leases.go) and returns how many of their deliveries
// still exist. A rescued delivery whose endpoint was paused or disabled
// while it was leased is held (paused), as its completion would have done;
// it does not count as claimable again. Without an expired lease it
// touches neither the database nor the writer.
func (s *Store) RescueExpiredLeases(ctx context.Context, now time.Time) (int, error) {
	if len(s.leases.expired(micro(now))) == 0 {
		return 0, nil
	}
	// A queue transaction (behind waiting publishes; not fsynced: a lost
	// rescue is done again at the next round).
	tx, done, err := s.queueTx(ctx)
	if err != nil {
		return 0, wrap("rescue", err)
	}
	defer done()
	expired := s.leases.expired(micro(now))
	ids := jsonIDs(expired)
	if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'paused', updated_at = ?1
		WHERE id IN (SELECT value FROM json_each(?2)) AND state = 'pending'
		  AND (SELECT state FROM endpoints WHERE id = deliveries.endpoint_id) IS NOT 'enabled'`, micro(now), ids); err != nil {
		return 0, wrap("rescue", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM deliveries WHERE id IN (SELECT value FROM json_each(?)) AND state = 'pending'", ids).Scan(&n); err != nil {
		return 0, wrap("rescue", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, wrap("rescue", err)
	}
	s.leases.drop(expired)
	return n, nil
}

// NextDueAt implements store.Store: the due time of the first pending
// delivery not leased (leases.go). With skipTenants, the earliest of each
// other tenant's, found by a skip scan of deliveries_due_tenant (one probe
// per tenant, as the claim's round: a skipped tenant's backlog is never
// stepped over), at most store.NextDueTenantProbes tenants besides the
// skipped ones.
func (s *Store) NextDueAt(ctx context.Context, skipTenants []string) (time.Time, error) {
	if len(skipTenants) > 0 {
		return s.nextDueSkipping(ctx, skipTenants)
	}
	due, ok, err := s.firstUnleasedDue(s.readStmts[NextDueQuery].QueryContext(ctx))
	if err != nil || !ok {
		return time.Time{}, wrap("next due", err)
	}
	return fromMicro(due), nil
}

func (s *Store) nextDueSkipping(ctx context.Context, skip []string) (time.Time, error) {
	var (
		best  int64
		found bool
		from  string
	)
	for probes := store.NextDueTenantProbes; probes > 0; {
		var (
			tenant string
			due    int64
		)
		s.claimSteps.Add(1)
		err := s.readStmts[NextTenantQuery].QueryRowContext(ctx, from).Scan(&tenant, &due)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return time.Time{}, wrap("next due", err)
		}
		from = tenant + "\x00"
		if slices.Contains(skip, tenant) {
			continue
		}
		probes--
		if s.leases.tenantLeases(tenant) > 0 {
			// Its earliest may be in flight: find its first unleased.
			var ok bool
			due, ok, err = s.firstUnleasedDue(s.readStmts[TenantDueQuery].QueryContext(ctx, tenant))
			if err != nil {
				return time.Time{}, wrap("next due", err)
			}
			if !ok {
				continue
			}
		}
		if !found || due < best {
			best, found = due, true
		}
	}
	if !found {
		return time.Time{}, nil
	}
	return fromMicro(best), nil
}

// An endpoint enabled while its failure streak had raised endpoint.failing
// keeps failure_count = -1 (store.PendingRecovery) with no streak, so its
// first success still raises endpoint.recovered: recoverCount is the count
// a success leaves (FailingAfter for that marker, so the recovered notice
// is raised; unchanged otherwise). enableCount sets the marker.
const (
	recoverCount = "CASE WHEN failure_count < 0 THEN 3 ELSE failure_count END"
	enableCount  = "CASE WHEN failing_since IS NOT NULL AND failure_count >= 3 THEN -1 ELSE failure_count END"
)
