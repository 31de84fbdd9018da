package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/herald-webhooks/herald/internal/store"
)

// notifyChannel is the channel of NOTIFY/LISTEN: a notification means
// "deliveries may have become claimable".
const notifyChannel = "herald_deliveries"

const eventColumns = "id, tenant, type, occurred_at, body, COALESCE(idempotency_key, ''), fingerprint, created_at, headers, COALESCE(version_bodies, ''), sequence, traceparent"

func scanEvent(row pgx.Row) (store.Event, error) {
	var (
		e        store.Event
		headers  []byte
		versions string
		occurred pgtype.Timestamptz
	)
	if err := row.Scan(&e.ID, &e.Tenant, &e.Type, &occurred, &e.Body, &e.IdempotencyKey, &e.Fingerprint, &e.CreatedAt, &headers, &versions, &e.Sequence, &e.TraceParent); err != nil {
		return e, err
	}
	// Herald never writes an infinite occurred_at, but a row set by hand
	// may hold one, which time.Time cannot: it is read as the bound the
	// API would show it as (store.ShownOccurredAt), not as an error.
	switch occurred.InfinityModifier {
	case pgtype.Infinity:
		e.OccurredAt = store.MaxOccurredAt
	case pgtype.NegativeInfinity:
		e.OccurredAt = store.MinOccurredAt
	default:
		e.OccurredAt = occurred.Time
	}
	var err error
	if e.VersionBodies, err = store.DecodeVersionBodies([]byte(versions)); err != nil {
		return e, fmt.Errorf("event %s version bodies: %w", e.ID, err)
	}
	if headers != nil {
		if err := json.Unmarshal(headers, &e.Headers); err != nil {
			return e, store.Internal(fmt.Errorf("event %s headers: %w", e.ID, err))
		}
	}
	e.OccurredAt, e.CreatedAt = e.OccurredAt.UTC(), e.CreatedAt.UTC()
	return e, nil
}

// PublishEvent implements store.Store.
//
// Concurrent publishes are group-committed (groupcommit.go): the publishes
// waiting when a group starts share one transaction, one commit (one WAL
// flush) and one NOTIFY, and each caller is answered after that commit.
//
// The event is inserted with ON CONFLICT DO NOTHING: when an event with the
// same id or (tenant, idempotency key) exists, or is being inserted by a
// concurrent publish (the insert waits for that transaction), nothing is
// inserted and the existing event is read back and answers the publish, as
// in the SQLite driver. A group takes two round trips and the commit:
// BEGIN + tenant locks + the tenants' endpoints + the inserts, then the
// deliveries of the whole group (one statement) + NOTIFY. The statements
// are those of PublishTx (publish.go), which runs them on a caller's
// transaction. A publish with PublishParams.CatalogRevision has it checked
// in the first round trip (one read of event_types for the group); a stale
// one is answered store.ErrStaleCatalog and the group's transaction is
// rolled back and run again without it.
//
// Errors: store.ErrStaleCatalog, store.ErrConflict (an id or idempotency
// key reused with other content), store.ErrUnavailable.
func (s *Store) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	return s.committer.publish(ctx, p)
}

// publishOne runs one publish in its own transaction (a group's fallback
// when one of its statements failed).
func (s *Store) publishOne(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	op, err := newPublishOp(p)
	if err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	b := newTxBatch()
	b.Queue(lockTenantShared, tenantLockClass, p.Event.Tenant)
	tenants := map[endpointsKey]*tenantEndpoints{}
	key := endpointsKey{p.Event.Tenant, p.Event.Type}
	queueEndpoints(b, tenants, key)
	revs := queueCatalogCheck(b, []*publishOp{op})
	op.queueInsert(b)
	ho := s.newHandOff()
	committing := false // the statements succeeded: only the commit may fail
	err = s.txBatch(ctx, "publish", b, func(tx pgx.Tx) error {
		if revs.stale(op) {
			return store.ErrStaleCatalog // rolled back: the insert is undone
		}
		op.target(tenants[key])
		if err := finishOps(ctx, tx, []*publishOp{op}, s.tag, !s.alone.Load(), ho); err != nil {
			return err
		}
		committing = op.err == nil
		return op.err
	})
	switch {
	case err == nil:
		ho.end(true)
	case committing:
		ho.fail(ctx) // a lost commit answer: the commit may have happened
	default:
		ho.end(false) // rolled back
	}
	if err != nil {
		return store.PublishResult{}, err
	}
	return op.res, nil
}

// errNoExisting: no event has the publish's idempotency key or id.
var errNoExisting = errors.New("no event has the id or the idempotency key")

// PublishedEvent implements store.Store: one read-only transaction (the
// event and its delivery count agree).
func (s *Store) PublishedEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return store.PublishResult{}, wrap("published event", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	existing, n, err := existingEvent(ctx, tx, p.Event, p.IDFromClient)
	switch {
	case errors.Is(err, errNoExisting):
		return store.PublishResult{}, fmt.Errorf("event %s: %w", store.PublicEventID(p.Event.ID), store.ErrNotFound)
	case errors.Is(err, store.ErrConflict):
		return store.PublishResult{}, err
	case err != nil:
		return store.PublishResult{}, wrap("published event", err)
	}
	return store.PublishResult{Event: existing, Deliveries: n}, nil
}

// existingEvent finds the event that made the insert of ev do nothing: the
// one with the same tenant and idempotency key, else the one with the same
// id (none: errNoExisting). Same fingerprint: it answers the publish (with
// its delivery count); otherwise, or when the producer chose an id and the
// key belongs to another, the publish is a conflict.
func existingEvent(ctx context.Context, tx pgx.Tx, ev store.Event, idFromClient bool) (store.Event, int, error) {
	var (
		existing store.Event
		err      = pgx.ErrNoRows
	)
	if ev.IdempotencyKey != "" {
		existing, err = scanEvent(tx.QueryRow(ctx, "SELECT "+eventColumns+" FROM events WHERE tenant = $1 AND idempotency_key = $2", ev.Tenant, ev.IdempotencyKey))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		existing, err = scanEvent(tx.QueryRow(ctx, "SELECT "+eventColumns+" FROM events WHERE id = $1", ev.ID))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// After an insert that conflicted with a committed row (events are
		// never deleted) this cannot happen, but must not pass for success.
		return store.Event{}, 0, fmt.Errorf("event %s: %w", ev.ID, errNoExisting)
	}
	if err != nil {
		return store.Event{}, 0, err
	}
	if err := store.RepeatConflict(existing, ev, idFromClient); err != nil {
		return store.Event{}, 0, err
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT COUNT(*) FROM deliveries WHERE event_id = $1", existing.ID).Scan(&n); err != nil {
		return store.Event{}, 0, err
	}
	return existing, n, nil
}

// GetEvent implements store.Store.
func (s *Store) GetEvent(ctx context.Context, id string) (store.Event, error) {
	e, err := scanEvent(s.pool.QueryRow(ctx, "SELECT "+eventColumns+" FROM events WHERE id = $1", id))
	return e, wrap("event "+id, err)
}

// ListEvents implements store.Store. Events are listed in insertion order
// (newest first) by seq, because producers may choose their own ids; the
// cursor is the seq of the last event of the page.
func (s *Store) ListEvents(ctx context.Context, p store.ListEventsParams) (store.Page[store.Event], error) {
	var f filter
	if p.Tenant != "" {
		f.add("tenant = ?", p.Tenant)
	}
	if p.Type != "" {
		f.add("type = ?", p.Type)
	}
	if p.Cursor != "" {
		seq, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || seq <= 0 {
			return store.Page[store.Event]{}, store.BadCursor(p.Cursor)
		}
		f.add("seq < ?", seq)
	}
	lim := p.ListParams.PageSize()
	rows, err := s.pool.Query(ctx, "SELECT seq, "+eventColumns+" FROM events"+f.clause()+" ORDER BY seq DESC"+f.limit(lim+1), f.args...)
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
	row   pgx.Row
	first any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.row.Scan(append([]any{p.first}, dest...)...)
}

const deliveryColumns = `id, event_id, endpoint_id, tenant, event_type, state, attempts, client_errors, next_attempt_at,
	last_status_code, last_error, COALESCE(lease_owner, ''), lease_until, created_at, updated_at, replay_base`

func scanDelivery(row pgx.Row) (store.Delivery, error) {
	var (
		d          store.Delivery
		state      string
		leaseUntil *time.Time
	)
	if err := row.Scan(&d.ID, &d.EventID, &d.EndpointID, &d.Tenant, &d.EventType, &state, &d.Attempts, &d.ClientErrors, &d.NextAttemptAt,
		&d.LastStatusCode, &d.LastError, &d.LeaseOwner, &leaseUntil, &d.CreatedAt, &d.UpdatedAt, &d.ReplayBase); err != nil {
		return d, err
	}
	d.State = store.DeliveryState(state)
	d.NextAttemptAt = d.NextAttemptAt.UTC()
	d.LeaseUntil = fromNullTS(leaseUntil)
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return d, nil
}

// notDeleting is the condition, on the column col holding a delivery's
// endpoint id, that leaves out the deliveries a delete has not reached
// yet (DeleteEndpoint deletes them in chunks after the endpoint's row,
// recorded in endpoint_deletions until the last): the lists, the
// dead-letter counts and the lookups by id do not show them. The
// deletions in progress are read once per statement (an InitPlan; empty
// but during a delete), each row only compared with them.
func notDeleting(col string) string {
	return col + " <> ALL (ARRAY(SELECT endpoint_id FROM endpoint_deletions))"
}

// GetDelivery implements store.Store.
func (s *Store) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, "SELECT "+deliveryColumns+" FROM deliveries WHERE id = $1 AND "+notDeleting("endpoint_id"), id))
	return d, wrap("delivery "+id, err)
}

// stateConditions are each delivery state's condition, written as a
// literal: a plan made for any value of a parameter (pgx prepares its
// statements, and PostgreSQL turns to a generic plan after five runs)
// cannot use a partial index, whose predicate only a literal proves.
// Succeeded, dead and paused rows each have their partial index
// (migration 00092); pending rows are in deliveries_due or, leased,
// deliveries_leased.
var stateConditions = map[store.DeliveryState]string{
	store.DeliveryPending:   "state = 'pending'",
	store.DeliverySucceeded: "state = 'succeeded'",
	store.DeliveryDead:      "state = 'dead'",
	store.DeliveryPaused:    "state = 'paused'",
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) (store.Page[store.Delivery], error) {
	query, args, lim := listDeliveriesQuery(p)
	rows, err := s.pool.Query(ctx, query, args...)
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
	var f filter
	if p.EndpointID != "" {
		f.add("endpoint_id = ?", p.EndpointID)
	}
	if p.EventID != "" {
		f.add("event_id = ?", p.EventID)
	}
	if p.Tenant != "" {
		f.add("tenant = ?", p.Tenant)
	}
	if p.State != "" {
		if cond, ok := stateConditions[p.State]; ok {
			f.where = append(f.where, cond)
		} else {
			f.add("state = ?", string(p.State)) // no delivery has it
		}
	}
	if p.EventType != "" {
		f.add("event_type = ?", p.EventType)
	}
	if !p.Since.IsZero() {
		f.add("updated_at >= ?", ts(p.Since))
	}
	if p.Cursor != "" {
		f.add("id < ?", p.Cursor)
	}
	f.where = append(f.where, notDeleting("endpoint_id"))
	lim := p.ListParams.PageSize()
	query := "SELECT " + deliveryColumns + " FROM deliveries" + f.clause() + " ORDER BY id DESC" + f.limit(lim+1)
	return query, f.args, lim
}

// ListAttempts implements store.Store. One query: the delivery left-joined
// with its attempts, so an unknown delivery (no row) is told apart from one
// without attempts (one row of NULLs).
func (s *Store) ListAttempts(ctx context.Context, deliveryID string) ([]store.Attempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.number IS NOT NULL, COALESCE(a.number, 0), COALESCE(a.started_at, 'epoch'), COALESCE(a.duration_us, 0),
		COALESCE(a.status_code, 0), COALESCE(a.error, ''), COALESCE(a.error_detail, ''), COALESCE(a.location, ''), COALESCE(a.response_excerpt, '')
		FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id
		WHERE d.id = $1 AND `+notDeleting("d.endpoint_id")+` ORDER BY a.number`, deliveryID)
	if err != nil {
		return nil, wrap("list attempts", err)
	}
	defer rows.Close()
	var (
		out   = []store.Attempt{}
		found bool
	)
	for rows.Next() {
		found = true
		var (
			a   = store.Attempt{DeliveryID: deliveryID}
			ok  bool
			dur int64
		)
		if err := rows.Scan(&ok, &a.Number, &a.StartedAt, &dur, &a.StatusCode, &a.Error, &a.ErrorDetail, &a.Location, &a.ResponseExcerpt); err != nil {
			return nil, wrap("list attempts", err)
		}
		if !ok {
			continue
		}
		a.StartedAt = a.StartedAt.UTC()
		a.Duration = time.Duration(dur) * time.Microsecond
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list attempts", err)
	}
	if !found {
		return nil, fmt.Errorf("delivery %s: %w", deliveryID, store.ErrNotFound)
	}
	return out, nil
}

// claimQuery leases due deliveries. The inner SELECT walks the partial index
// deliveries_due in (next_attempt_at, id) order — deliveries due at the same
// time (released by an enable or a replay) in creation order, ids being
// time-sortable — and stops after $4 rows it could
// lock (SKIP LOCKED: rows another claimer is taking are passed over, never
// waited for, never returned twice). ARRAY(…) makes it an InitPlan run once,
// so the UPDATE finds the rows by primary key whatever the planner thinks
// of LIMIT $4.
const claimQuery = `UPDATE deliveries SET lease_owner = $1, lease_until = $2
	WHERE id = ANY (ARRAY(
		SELECT id FROM deliveries
		WHERE state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= $3
		ORDER BY next_attempt_at, id
		LIMIT $4
		FOR UPDATE SKIP LOCKED))
	RETURNING ` + deliveryColumns

// claimFairSQL is the round-robin part of a claim (store.ClaimParams),
// claimFairQuery, with skip added to the filter of the rows it takes:
// a skip scan of deliveries_due_tenant (tenant, next_attempt_at, id) finds the
// tenants with claimable deliveries after the cursor $5 ("after"), then
// from the first tenant up to the cursor ("before"), one index probe per
// tenant and at most $6 probes each; the first $4 of them with a delivery
// due by $3 and not in $7 (the tenants to skip: "due", in that order) each
// get up to ceil($4 / their number)
// of their oldest due deliveries, locked with SKIP LOCKED. That range is
// written as row comparisons on (tenant, next_attempt_at), which only
// deliveries_due_tenant answers: with "tenant = x" the planner may filter
// deliveries_due instead, a walk that grows with the other tenants'
// backlog. The UPDATE returns each row's tenant's turn.
func claimFairSQL(skip string) string {
	return `WITH RECURSIVE
	after(tenant, due, n) AS (
		(SELECT tenant, next_attempt_at, 1 FROM deliveries
		 WHERE state = 'pending' AND lease_owner IS NULL AND tenant > $5
		 ORDER BY tenant, next_attempt_at LIMIT 1)
		UNION ALL
		SELECT x.tenant, x.next_attempt_at, a.n + 1 FROM after a CROSS JOIN LATERAL
			(SELECT tenant, next_attempt_at FROM deliveries
			 WHERE state = 'pending' AND lease_owner IS NULL AND tenant > a.tenant
			 ORDER BY tenant, next_attempt_at LIMIT 1) x
		WHERE a.n < $6),
	before(tenant, due, n) AS (
		(SELECT tenant, next_attempt_at, 1 FROM deliveries
		 WHERE state = 'pending' AND lease_owner IS NULL AND $5 <> '' AND tenant <= $5
		 ORDER BY tenant, next_attempt_at LIMIT 1)
		UNION ALL
		SELECT x.tenant, x.next_attempt_at, b.n + 1 FROM before b CROSS JOIN LATERAL
			(SELECT tenant, next_attempt_at FROM deliveries
			 WHERE state = 'pending' AND lease_owner IS NULL AND tenant > b.tenant AND tenant <= $5
			 ORDER BY tenant, next_attempt_at LIMIT 1) x
		WHERE b.n < $6),
	due AS MATERIALIZED (
		SELECT tenant, row_number() OVER (ORDER BY n) AS turn FROM (
			SELECT tenant, due, n FROM after UNION ALL SELECT tenant, due, n + $6 FROM before) t
		WHERE due <= $3 AND tenant <> ALL ($7::text[]) ORDER BY n LIMIT $4),
	per AS (SELECT ((($4)::bigint + count(*) - 1) / GREATEST(count(*), 1))::int AS k FROM due)
UPDATE deliveries SET lease_owner = $1, lease_until = $2
	WHERE id = ANY (ARRAY(
		SELECT p.id FROM due CROSS JOIN LATERAL
			(SELECT id FROM deliveries d
			 WHERE d.state = 'pending' AND d.lease_owner IS NULL
			   AND (d.tenant, d.next_attempt_at) >= (due.tenant, '-infinity') AND (d.tenant, d.next_attempt_at) <= (due.tenant, $3)` + skip + `
			 ORDER BY d.tenant, d.next_attempt_at, d.id
			 LIMIT (SELECT k FROM per)
			 FOR UPDATE SKIP LOCKED) p
		LIMIT $4))
	RETURNING ` + deliveryColumns + `, COALESCE((SELECT turn FROM due WHERE due.tenant = deliveries.tenant), 0)`
}

// claimFillSQL, claimFillQuery with skip added to the filter of the rows
// it takes, fills what the round left of the claim's $4 (tenants with
// fewer due than their share) with the oldest due deliveries of any
// tenant, as claimQuery does; it runs after claimFairQuery in the same
// transaction and counts that one's rows by owner and lease end.
func claimFillSQL(skip string) string {
	return `UPDATE deliveries SET lease_owner = $1, lease_until = $2
	WHERE id = ANY (ARRAY(
		SELECT id FROM deliveries
		WHERE state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= $3` + skip + `
		ORDER BY next_attempt_at, id
		LIMIT GREATEST(0, $4 - (SELECT count(*) FROM deliveries WHERE lease_owner = $1 AND lease_until = $2))
		FOR UPDATE SKIP LOCKED))
	RETURNING ` + deliveryColumns
}

// claimFillSkipSQL, claimFillSkipQuery with skip added to the filter of
// the rows it takes, is claimFillQuery for a claim with tenants to skip
// ($5): a skipped tenant's rows, however many and however old, are never
// stepped over one by one. The room left ("room": $4 less the rows the
// round leased, found by owner and lease end on deliveries_leased) is
// filled oldest due first from the candidates: up to that many of each
// tenant the round served ("mine", on deliveries_due_tenant), and the
// oldest due of any tenant not skipped among the first $6 × room rows of
// deliveries_due (the round may have run out of probes before reaching
// them). The first room candidates are read without locks, then locked by
// primary key, SKIP LOCKED (one taken meanwhile is passed over: the claim
// may take fewer).
func claimFillSkipSQL(skip string) string {
	return `WITH
	mine AS MATERIALIZED (
		SELECT tenant, count(*) AS n FROM deliveries WHERE lease_owner = $1 AND lease_until = $2 GROUP BY tenant),
	room AS MATERIALIZED (SELECT GREATEST(0, $4 - COALESCE(sum(n), 0))::int AS k FROM mine),
	cand AS MATERIALIZED (
		SELECT p.id, p.next_attempt_at FROM mine CROSS JOIN LATERAL
			(SELECT id, next_attempt_at FROM deliveries d
			 WHERE d.state = 'pending' AND d.lease_owner IS NULL
			   AND (d.tenant, d.next_attempt_at) >= (mine.tenant, '-infinity') AND (d.tenant, d.next_attempt_at) <= (mine.tenant, $3)` + skip + `
			 ORDER BY d.tenant, d.next_attempt_at, d.id
			 LIMIT (SELECT k FROM room)) p
		UNION
		SELECT w.id, w.next_attempt_at FROM
			(SELECT id, next_attempt_at, tenant FROM deliveries
			 WHERE state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= $3` + skip + `
			 ORDER BY next_attempt_at, id
			 LIMIT $6::int * (SELECT k FROM room)) w
		WHERE w.tenant <> ALL ($5::text[]))
UPDATE deliveries SET lease_owner = $1, lease_until = $2
	WHERE id = ANY (ARRAY(
		SELECT id FROM deliveries
		WHERE id = ANY (ARRAY(SELECT id FROM cand ORDER BY next_attempt_at, id LIMIT (SELECT k FROM room)))
		  AND state = 'pending' AND lease_owner IS NULL AND next_attempt_at <= $3
		FOR UPDATE SKIP LOCKED))
	RETURNING ` + deliveryColumns
}

// The claim's statements: without endpoints to skip, and with them
// (store.ClaimParams.SkipEndpoints, the last parameter: $8, $5 and $7). The
// endpoint is not in the due indexes, so the variants filter the rows they
// step over; a claim that skips none runs the statements unchanged. The
// filter compares the endpoint concatenated with the empty string, an
// expression without statistics, so the planner takes the default
// selectivity (most rows pass) rather than the column's: with few distinct
// endpoints it estimated that almost no row passes a filter against a
// parameter array, and a generic plan read every due row through a bitmap
// and sorted them instead of walking deliveries_due in order up to the
// LIMIT (TestQueueQueriesUseDueIndex).
var (
	claimFairQuery           = claimFairSQL("")
	claimFairSkipEPQuery     = claimFairSQL(" AND d.endpoint_id || '' <> ALL ($8::text[])")
	claimFillQuery           = claimFillSQL("")
	claimFillSkipEPQuery     = claimFillSQL(" AND endpoint_id || '' <> ALL ($5::text[])")
	claimFillSkipQuery       = claimFillSkipSQL("")
	claimFillSkipSkipEPQuery = claimFillSkipSQL(" AND endpoint_id || '' <> ALL ($7::text[])")
)

// nextDueQuery is the earliest due time of a claimable delivery: the first
// entry of deliveries_due.
const nextDueQuery = "SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending' AND lease_owner IS NULL"

// nextDueSkipQuery is nextDueQuery without the tenants $1: the earliest of
// the other tenants' earliest due times, found by a skip scan of
// deliveries_due_tenant (one probe per tenant, at most $2 tenants), so a
// skipped tenant's backlog is never stepped over.
const nextDueSkipQuery = `WITH RECURSIVE t(tenant, due, n) AS (
		(SELECT tenant, next_attempt_at, 1 FROM deliveries
		 WHERE state = 'pending' AND lease_owner IS NULL
		 ORDER BY tenant, next_attempt_at LIMIT 1)
		UNION ALL
		SELECT x.tenant, x.next_attempt_at, t.n + 1 FROM t CROSS JOIN LATERAL
			(SELECT tenant, next_attempt_at FROM deliveries
			 WHERE state = 'pending' AND lease_owner IS NULL AND tenant > t.tenant
			 ORDER BY tenant, next_attempt_at LIMIT 1) x
		WHERE t.n < $2)
	SELECT MIN(due) FROM t WHERE tenant <> ALL ($1::text[])`

// claimedEvents and claimedEndpoints read the events and endpoints of the
// deliveries a claim just leased ($1 the owner, $2 the lease end: the claim's
// own, Store.leaseEnd).
const (
	claimedEvents = "SELECT " + eventColumns + ` FROM events WHERE id IN
		(SELECT event_id FROM deliveries WHERE lease_owner = $1 AND lease_until = $2)`
	claimedEndpoints = "SELECT " + endpointColumns + ` FROM endpoints WHERE id IN
		(SELECT endpoint_id FROM deliveries WHERE lease_owner = $1 AND lease_until = $2)`
)

// asyncCommit makes the commit of the transaction it runs in return
// without waiting for the WAL flush. Only the queue's bookkeeping uses it
// (claims, completions): a crash of the database server may lose the last
// of those, which only repeats an attempt (at least once) — never a publish.
const asyncCommit = "SELECT set_config('synchronous_commit', 'off', true)"

// ClaimDeliveries implements store.Store: the claim and the events and
// endpoints of the batch, in one round trip (one implicit transaction,
// committed without waiting for the WAL flush: a lost claim is only a lease
// that never was).
func (s *Store) ClaimDeliveries(ctx context.Context, p store.ClaimParams) ([]store.Claim, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var (
		claims    []store.Claim
		fairTurns map[string]int
	)
	until := s.leaseEnd(p.Now.Add(p.Lease))
	events := map[string]store.Event{}
	endpoints := map[string]store.Endpoint{}
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	skip := p.SkipTenants
	if skip == nil {
		skip = []string{} // <> ALL of a NULL array is NULL
	}
	// A skipped tenant met by the round costs a probe: add them, so the
	// others get ClaimTenantProbes·Limit.
	fair, fairArgs := claimFairQuery, []any{p.Owner, until, ts(p.Now), p.Limit, p.TenantCursor, store.ClaimTenantProbes*p.Limit + len(skip), skip}
	if len(p.SkipEndpoints) > 0 {
		fair, fairArgs = claimFairSkipEPQuery, append(fairArgs, p.SkipEndpoints)
	}
	b.Queue(fair, fairArgs...).Query(func(rows pgx.Rows) error {
		turns := map[string]int{}
		for rows.Next() {
			var turn int
			d, err := scanDelivery(extraScanner{rows, &turn})
			if err != nil {
				return err
			}
			claims = append(claims, store.Claim{Delivery: d, Turn: turn})
			turns[d.Tenant] = turn
		}
		fairTurns = turns
		return rows.Err()
	})
	var fill *pgx.QueuedQuery
	switch {
	case len(skip) == 0 && len(p.SkipEndpoints) == 0:
		fill = b.Queue(claimFillQuery, p.Owner, until, ts(p.Now), p.Limit)
	case len(skip) == 0:
		fill = b.Queue(claimFillSkipEPQuery, p.Owner, until, ts(p.Now), p.Limit, p.SkipEndpoints)
	case len(p.SkipEndpoints) == 0:
		fill = b.Queue(claimFillSkipQuery, p.Owner, until, ts(p.Now), p.Limit, skip, store.ClaimTenantProbes)
	default:
		fill = b.Queue(claimFillSkipSkipEPQuery, p.Owner, until, ts(p.Now), p.Limit, skip, store.ClaimTenantProbes, p.SkipEndpoints)
	}
	fill.Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			claims = append(claims, store.Claim{Delivery: d, Turn: fairTurns[d.Tenant]})
		}
		return rows.Err()
	})
	var poisonedRows store.PoisonedRows
	b.Queue(claimedEvents, p.Owner, until).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := scanEvent(rows)
			if err != nil {
				// Its stored headers or version bodies do not decode
				// (jsonb that is not an object of strings, text that is
				// not JSON): its deliveries are dead-lettered below, not
				// the claim failed.
				if e.ID == "" {
					return err
				}
				poisonedRows.Event(e.ID, err)
				continue
			}
			events[e.ID] = e
		}
		return rows.Err()
	})
	var bad map[string]*store.UnreadableError
	b.Queue(claimedEndpoints, p.Owner, until).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := s.scanEndpoint(rows)
			if err != nil {
				// Its values do not open here: its deliveries are
				// left out below, not the claim.
				if err := store.NoteUnreadable(&bad, err); err != nil {
					return err
				}
				continue
			}
			endpoints[e.ID] = e
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		// The batch's statements committed together on the server before
		// a row failed here: give back the leases this claim took, or its
		// deliveries would wait out the lease and be counted as rescued.
		if len(claims) > 0 {
			ids := make([]string, len(claims))
			for i, c := range claims {
				ids[i] = c.Delivery.ID
			}
			if _, rerr := s.pool.Exec(context.WithoutCancel(ctx), releaseClaimSQL, ids, p.Owner, until); rerr != nil {
				err = errors.Join(err, fmt.Errorf("give back the claim's leases (they expire at %s): %w", until.Format(time.RFC3339), rerr))
			}
		}
		return nil, wrap("claim", err)
	}
	if poisonedRows.Any() {
		// Deliveries no attempt can be made of: dead-lettered, one round
		// trip on this abnormal path only.
		var poisoned []store.PoisonedDelivery
		claims, poisoned = poisonedRows.Drop(claims)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := s.deadLetterPoisoned(dctx, poisoned, p.Owner, until, p.Now)
		cancel()
		if err != nil {
			err = fmt.Errorf("dead-letter it (its lease expires at %s, then a claim meets it again): %w", until.Format(time.RFC3339), classify(err))
			for i := range poisoned {
				poisoned[i].Err, poisoned[i].Unwritten = errors.Join(poisoned[i].Err, err), true
			}
		}
		defer p.ReportPoisoned(poisoned)
	}
	if bad != nil {
		// The deliveries of an endpoint whose values do not open with this
		// node's keys: their leases are given back at once (a node holding
		// the key may claim them now), and they are reported, not claimed.
		var (
			dropped    []string
			unreadable []store.UnreadableEndpoint
		)
		claims, dropped, unreadable = store.DropUnreadable(claims, bad)
		if len(dropped) > 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := s.giveBack(rctx, dropped, p.Owner, until)
			cancel()
			if err != nil {
				err = fmt.Errorf("give back the leases of its deliveries (they expire at %s): %w", until.Format(time.RFC3339), classify(err))
				for i := range unreadable {
					unreadable[i].Err = errors.Join(unreadable[i].Err, err)
				}
			}
		}
		defer p.Report(unreadable)
	}
	if orphans := dropOrphans(&claims, endpoints, bad); len(orphans) > 0 {
		// Deliveries of an endpoint deleted since (its delete deletes them
		// in chunks after the row: DeleteEndpoint): no attempt, deleted
		// here. One round trip, only while a delete is in progress; if it
		// fails their leases expire, and the delete's chunks (or the
		// rescue's) delete them.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = s.pool.Exec(rctx, deleteOrphansSQL, orphans, p.Owner, until)
		cancel()
	}
	if len(claims) == 0 {
		return nil, nil
	}
	// RETURNING yields rows in update order, not in the subquery's order:
	// restore "oldest due first".
	slices.SortFunc(claims, func(a, b store.Claim) int {
		if c := a.Delivery.NextAttemptAt.Compare(b.Delivery.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.Delivery.ID, b.Delivery.ID)
	})
	for i := range claims {
		claims[i].Event = events[claims[i].Delivery.EventID]
		claims[i].Endpoint = endpoints[claims[i].Delivery.EndpointID]
	}
	return claims, nil
}

// deleteOrphansSQL deletes the deliveries $1 a claim of owner $2 (lease
// end $3) took whose endpoint is gone (deleted while the claim ran: its
// delete deletes the rest of its deliveries in chunks). It locks them in
// id order first, as the delete's chunks lock them (deleteChunkSQL): a
// DELETE alone locks rows in the order of the index it reads
// (deliveries_leased: the lease end, then the rows' places in the table),
// and could hold one while waiting for an earlier one that a chunk holds
// on its way to the first: a deadlock.
const deleteOrphansSQL = `WITH l AS MATERIALIZED (
		SELECT id FROM deliveries WHERE id = ANY ($1) AND lease_owner = $2 AND lease_until = $3
		  AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id)
		ORDER BY id FOR UPDATE)
	DELETE FROM deliveries WHERE id = ANY (ARRAY(SELECT id FROM l))`

// dropOrphans takes out of claims (in place, in order) the claims of a
// delivery whose endpoint the claim did not find, neither read nor
// unreadable (bad): a deleted one. It answers their delivery ids.
func dropOrphans(claims *[]store.Claim, endpoints map[string]store.Endpoint, bad map[string]*store.UnreadableError) []string {
	var orphans []string
	kept := (*claims)[:0]
	for _, c := range *claims {
		_, ok := endpoints[c.Delivery.EndpointID]
		_, unreadable := bad[c.Delivery.EndpointID]
		if !ok && !unreadable {
			orphans = append(orphans, c.Delivery.ID)
			continue
		}
		kept = append(kept, c)
	}
	*claims = kept
	return orphans
}

// giveBack gives back the leases of the deliveries ids that a claim of
// owner (until its lease end until) took but leaves out (their endpoint's
// values do not open here), and wakes the other nodes: one holding the key
// claims them at once instead of at its next poll. One round trip, on the
// abnormal path only.
func (s *Store) giveBack(ctx context.Context, ids []string, owner string, until time.Time) error {
	b := &pgx.Batch{}
	b.Queue(releaseClaimSQL, ids, owner, until)
	if !s.alone.Load() {
		b.Queue("SELECT pg_notify($1, $2)", notifyChannel, s.tag)
	}
	return s.pool.SendBatch(ctx, b).Close()
}

// deadLetterPoisonedSQL dead-letters the deliveries $1 a claim of owner
// $4 (lease end $5) took but cannot attempt, their stored event not
// decoding (store.PoisonedRows), each with its last_error ($2), at $3: no
// attempt, no failure streak; and records delivery.dead_lettered for each
// one moved (not for deliveries of operational events) and counts each in
// its endpoint's rollups as a dead letter, in the buckets of $3 (the
// minute $6 and the hour $7, as store.PoisonedRollups), in the same
// statement. The rows are locked in id order first (conditions re-checked
// after a wait), as completions and a delete's chunks lock them: the
// UPDATE ... FROM unnest alone locked them in the claim's order (due
// time), and held a later row while waiting for an earlier one that an
// id-ordered writer (the chunk of a delete of their endpoint) held on its
// way to the later: a deadlock.
const deadLetterPoisonedSQL = `WITH l AS MATERIALIZED (
		SELECT id FROM deliveries WHERE id = ANY ($1) AND state = 'pending' AND lease_owner = $4 AND lease_until = $5
		ORDER BY id FOR NO KEY UPDATE),
	dead AS (
		UPDATE deliveries d SET state = 'dead', last_error = u.reason, next_attempt_at = $3, updated_at = $3,
			lease_owner = NULL, lease_until = NULL
		FROM unnest($1::text[], $2::text[]) AS u (id, reason)
		WHERE d.id = u.id AND d.id = ANY (ARRAY(SELECT id FROM l)) AND d.state = 'pending' AND d.lease_owner = $4 AND d.lease_until = $5
		RETURNING d.id, d.endpoint_id, d.event_id, d.event_type, d.attempts, d.last_status_code, d.last_error),
	stats AS (
		INSERT INTO endpoint_stats (endpoint_id, span, start, dead_letters)
		SELECT dead.endpoint_id, b.span, b.start, count(*) FROM dead
		CROSS JOIN (VALUES ('h', $7::timestamptz), ('m', $6::timestamptz)) AS b (span, start)
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
		ON CONFLICT (endpoint_id, span, start) DO UPDATE SET dead_letters = endpoint_stats.dead_letters + excluded.dead_letters)
	INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at,
		delivery_id, event_id, event_type, attempts, last_status_code, last_error)
	SELECT e.id, e.tenant, e.url, e.kind, e.state, e.state_reason, 'delivery.dead_lettered', $3,
		dead.id, dead.event_id, dead.event_type, dead.attempts, dead.last_status_code, dead.last_error
	FROM dead JOIN endpoints e ON e.id = dead.endpoint_id
	WHERE dead.event_type NOT LIKE 'endpoint.%' AND dead.event_type <> 'delivery.dead_lettered'
	ORDER BY dead.id`

// deadLetterPoisoned dead-letters ps, deliveries a claim of owner (lease
// end until) at now took and left out (deadLetterPoisonedSQL).
func (s *Store) deadLetterPoisoned(ctx context.Context, ps []store.PoisonedDelivery, owner string, until, now time.Time) error {
	ids, reasons := make([]string, len(ps)), make([]string, len(ps))
	for i, pd := range ps {
		ids[i], reasons[i] = pd.ID, pd.LastError()
	}
	_, err := s.pool.Exec(ctx, deadLetterPoisonedSQL, ids, reasons, ts(now), owner, until,
		ts(now.UTC().Truncate(time.Minute)), ts(now.UTC().Truncate(time.Hour)))
	return err
}

// releaseClaimSQL gives back the leases of a claim that failed after its
// statements committed: $1 the claimed ids, $2 the owner, $3 the lease end
// the claim set (a lease taken since by another claim is left alone). The
// rows are locked in id order first, as the chunks of a hold or a delete
// lock them (a chunk that waited for the claim keeps the row it re-checked
// and left, and goes on in id order): an UPDATE alone locks them in the
// order of deliveries_leased (the lease end, then the rows' places in the
// table), and could hold a later row while waiting for an earlier one: a
// deadlock.
const releaseClaimSQL = `UPDATE deliveries SET lease_owner = NULL, lease_until = NULL
	WHERE id = ANY (ARRAY(SELECT id FROM deliveries WHERE id = ANY ($1) AND lease_owner = $2 AND lease_until = $3
		ORDER BY id FOR NO KEY UPDATE))`

// extraScanner scans one extra trailing column into last.
type extraScanner struct {
	rows pgx.Rows
	last any
}

func (x extraScanner) Scan(dest ...any) error {
	return x.rows.Scan(append(dest, x.last)...)
}

// lockTenantsOfCompletions takes the tenant locks of a batch of
// completions (deliveries $1), in key order: exclusive for a tenant where a
// completion disables an endpoint (a 410, $2) or probably will (its failure
// streak started before the cutoff $3 of its DisableAfter), shared
// otherwise. Unknown deliveries lock nothing.
const lockTenantsOfCompletions = `SELECT CASE WHEN s.x THEN pg_advisory_xact_lock($4::integer, s.h) ELSE pg_advisory_xact_lock_shared($4::integer, s.h) END
	FROM (SELECT hashtext(d.tenant) AS h,
	             bool_or(u.x OR (u.cutoff IS NOT NULL AND e.state = 'enabled' AND e.failing_since <= u.cutoff)) AS x
	      FROM unnest($1::text[], $2::boolean[], $3::timestamptz[]) AS u (id, x, cutoff)
	      JOIN deliveries d ON d.id = u.id
	      LEFT JOIN endpoints e ON e.id = d.endpoint_id
	      GROUP BY 1 ORDER BY 1) AS s`

// lockEndpointsOfCompletions locks, in id order, the endpoint rows of the
// attempts of a batch of completions ($1 the deliveries, $2 their
// Completion.EndpointID, empty for the delivery's, $3 whether an attempt was
// made, i.e. not deferred): the completions then update them one by one in
// batch order (a failure streak starts or ends, an endpoint is disabled).
// Without it, two batches (two nodes, or two completers of one node)
// updating two endpoints in opposite orders deadlock. Batches of successes
// only do not come here (queueSuccesses), so a healthy drain's batches never
// wait on each other for an endpoint row.
const lockEndpointsOfCompletions = `SELECT e.id FROM endpoints e
	WHERE e.id IN (SELECT COALESCE(NULLIF(u.endpoint_id, ''), d.endpoint_id)
	               FROM unnest($1::text[], $2::text[], $3::boolean[]) AS u (id, endpoint_id, attempted)
	               LEFT JOIN deliveries d ON d.id = u.id
	               WHERE u.attempted)
	ORDER BY e.id FOR NO KEY UPDATE`

// deadLetterNoticeQuery records delivery.dead_lettered for the delivery $1
// the completion (at $2) just moved to dead — not for a completion whose
// lease was lost, nor for a delivery of an operational event. The row's
// state alone cannot tell which completion moved it: a stale completion
// of the delivery after the current one, in the same batch and at the same
// microsecond, found it dead, updated then and unleased, and raised a
// second notice. So the completion's own update, when it matches the
// lease, sets the transaction-local movedSetting to the completion's
// token $3 (its index in the batch: deadCompletionSQL), and the notice
// needs that token: a stale completion's update matches no row and sets
// nothing.
const deadLetterNoticeQuery = `INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at,
		delivery_id, event_id, event_type, attempts, last_status_code, last_error)
	SELECT e.id, e.tenant, e.url, e.kind, e.state, e.state_reason, 'delivery.dead_lettered', $2,
		d.id, d.event_id, d.event_type, d.attempts, d.last_status_code, d.last_error
	FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
	WHERE d.id = $1 AND d.state = 'dead' AND d.updated_at = $2 AND d.lease_owner IS NULL
	  AND current_setting('` + movedSetting + `', true) = $3::text
	  AND d.event_type NOT LIKE 'endpoint.%' AND d.event_type <> 'delivery.dead_lettered'`

// movedSetting is the transaction-local setting a dead-lettering
// completion's update sets to its token when it moved the delivery
// (deadLetterNoticeQuery).
const movedSetting = "herald.completion_moved"

// completeDeliverySQL moves a delivery still under the completion's lease
// (owner $8, lease end $9); a retry of a delivery whose endpoint was paused
// or disabled meanwhile is held (paused) instead of pending.
// deadCompletionSQL is the same for a completion that dead-letters the
// delivery: when it moved the row it sets movedSetting to the
// completion's token $10 for deadLetterNoticeQuery.
const (
	completeDeliverySQL = `UPDATE deliveries SET
			state = CASE WHEN $1::text = 'pending' AND (SELECT e.state FROM endpoints e WHERE e.id = deliveries.endpoint_id) IS DISTINCT FROM 'enabled'
			             THEN 'paused' ELSE $1::text END,
			attempts = attempts + 1, client_errors = client_errors + $2, next_attempt_at = $3,
			last_status_code = $4, last_error = $5, lease_owner = NULL, lease_until = NULL, updated_at = $6
			WHERE id = $7 AND lease_owner = $8 AND lease_until = $9`
	deadCompletionSQL = completeDeliverySQL + `
			RETURNING set_config('` + movedSetting + `', $10::text, true)`
)

// completionEndpoint is the endpoint of a completion: $1 (Completion.EndpointID)
// or, when that is empty, the endpoint of the delivery $2.
const completionEndpoint = `COALESCE(NULLIF($1::text, ''), (SELECT endpoint_id FROM deliveries WHERE id = $2))`

// disableEndpointQuery disables the completion's endpoint if it is enabled
// (and cond holds; set, when not empty, adds ", column = value" to the
// update), records the notice endpoint.disabled, and holds the first
// moveChunk of the endpoint's pending, unleased deliveries (id order;
// leased ones are held when they complete); held, the parameter named by
// state (a parameter, not a literal: moveChunks' plans), is 'pending'. $3
// is the reason, $4 now. The rest are the lease rescue's (finishReleases,
// any node's next round): the disable starts a move of its own, named by
// release_gen, with its cursor (release_after, the chunk's last id) and a
// mark already stale (releasing_since: no node runs it); without more
// than a chunk it leaves no mark. So a disable by a completion, under the
// tenant's exclusive lock and in the node's completion batch, writes at
// most moveChunk deliveries, whatever the backlog (all of them, before:
// some 2 s for 150,000, the tenant's publishes and the node's completions
// waiting), and ends whatever move an earlier state change left marked.
// Until the sweep reaches them, a claim of the rest meets the endpoint
// disabled and puts the delivery back without an attempt (Engine.handle),
// and that deferral holds it. The EXISTS is a one-time filter: when
// nothing was disabled (every failed attempt asks) the deliveries are
// not scanned at all; without it the planner walked the whole due index
// once per failed attempt (110 attempts/s beside a million waiting
// deliveries, TestDisableQuerySkipsScan).
func disableEndpointQuery(reason, cond, set, held string) string {
	rest := `(SELECT id FROM deliveries d WHERE d.endpoint_id = endpoints.id AND d.state = ` + held + ` AND d.lease_owner IS NULL
		ORDER BY d.id OFFSET ` + strconv.Itoa(moveChunk) + ` LIMIT 1)`
	return `WITH dis AS (
		UPDATE endpoints SET state = 'disabled', state_reason = ` + reason + `, updated_at = $4` + set + `,
			releasing_since = CASE WHEN ` + rest + ` IS NOT NULL THEN clock_timestamp() - interval '` + staleRelease + `' - interval '1 second' END,
			release_after = CASE WHEN ` + rest + ` IS NOT NULL THEN
				(SELECT id FROM deliveries d WHERE d.endpoint_id = endpoints.id AND d.state = ` + held + ` AND d.lease_owner IS NULL
				 ORDER BY d.id OFFSET ` + strconv.Itoa(moveChunk-1) + ` LIMIT 1) END,
			release_due_at = NULL, release_gen = release_gen + 1
		WHERE id = ` + completionEndpoint + ` AND state = 'enabled'` + cond + `
		RETURNING id, tenant, url, kind, state, state_reason),
	notice AS (
		INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
		SELECT id, tenant, url, kind, state, state_reason, 'endpoint.disabled', $4 FROM dis),
	c AS MATERIALIZED (
		SELECT id FROM deliveries WHERE endpoint_id = (SELECT id FROM dis) AND state = ` + held + ` AND lease_owner IS NULL
		  AND EXISTS (SELECT 1 FROM dis)
		ORDER BY id LIMIT ` + strconv.Itoa(moveChunk) + ` FOR NO KEY UPDATE)
	UPDATE deliveries SET state = 'paused', updated_at = $4
	WHERE id = ANY (ARRAY(SELECT id FROM c)) AND EXISTS (SELECT 1 FROM dis)`
}

// streakDisables renders the disable rule (store.StreakDisableSQL) over
// the endpoint's streak, with the parameters cutoff (store.DisableCutoff)
// and min (the minimum failures).
func streakDisables(cutoff, min string) string {
	return store.StreakDisableSQL("failing_since", "failure_count", cutoff, min)
}

// failingQuery records endpoint.failing for the completion's endpoint
// (after its failure was counted) when store.StreakNotices raises it, the
// condition disables saying whether the failure disables the endpoint; $3
// is now.
func failingQuery(disables string) string {
	return `INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
		SELECT id, tenant, url, kind, state, state_reason, 'endpoint.failing', $3 FROM endpoints
		WHERE id = ` + completionEndpoint + ` AND failing_since IS NOT NULL AND ` + store.StreakFailingSQL("failure_count", disables)
}

var (
	// goneQuery: a 410 Gone; $3 is the reason given.
	goneQuery = disableEndpointQuery("$3::text", "", "", "$5::text")
	// streakQuery: the disable rule (streakDisables) with the cutoff $5
	// and the minimum $6; $3 describes the last attempt
	// (store.AttemptSummary), and the reason is store.DisableReason's
	// (store.StreakReasonSQL). The streak keeps store.StreakCountAtDisable's
	// count.
	streakQuery = disableEndpointQuery(store.StreakReasonSQL("failing_since", "$3::text"),
		" AND "+streakDisables("$5", "$6::integer"), ", failure_count = "+store.StreakCountAtDisableSQL("failure_count"), "$7::text")
	// failingNoRuleQuery: endpoint.failing when the rule is off
	// (DisableAfter 0: no failure disables).
	failingNoRuleQuery = failingQuery("false")
	// failingRuleQuery: endpoint.failing when the failure may disable
	// the endpoint (an enabled one the rule disables), with the cutoff $4
	// and the minimum $5 that streakQuery, which runs next, is given; so a
	// disable follows its streak's endpoint.failing, whose snapshot is of
	// the enabled endpoint.
	failingRuleQuery = failingQuery("state = 'enabled' AND " + streakDisables("$4", "$5::integer"))
)

// CompleteDeliveries implements store.Store: the whole batch in one round
// trip (one implicit transaction, committed without waiting for the WAL
// flush: a completion lost in a crash of the database server only repeats
// its attempt). In order: the tenant locks, the row locks of the
// batch's deliveries in id order (attempt numbers are MAX+1 under that
// lock), then per completion, in batch order (a later completion sees an
// earlier one's effects, as in SQLite): its attempt, its delivery, and its
// endpoint (a 410 disables it; otherwise the failure streak starts, ends or,
// past DisableAfter, disables it). A deferral only moves the delivery. A
// completion whose lease was lost (the row's lease_owner and lease_until
// are no longer the ones it was made under: rescued, or rescued and
// claimed again, maybe by the same node) records its attempt and its
// endpoint's part (the attempt was made: its answer counts for the failure
// streak, a 410 disables), but leaves the delivery as it is; one of a
// delivery that no longer exists changes nothing.
func (s *Store) CompleteDeliveries(ctx context.Context, cs []store.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	ids := make([]string, len(cs))
	gone := make([]bool, len(cs))
	cutoffs := make([]*time.Time, len(cs))
	endpointIDs := make([]string, len(cs))
	attempted := make([]bool, len(cs))
	for i, c := range cs {
		ids[i], gone[i] = c.DeliveryID, c.DisableEndpoint && !c.Deferred
		endpointIDs[i], attempted[i] = c.EndpointID, !c.Deferred
		if !c.Deferred && !c.DisableEndpoint && c.State != store.DeliverySucceeded && c.DisableAfter > 0 {
			cutoffs[i] = nullTS(store.DisableCutoff(c.Now, c.DisableAfter))
		}
	}
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	b.Queue(lockTenantsOfCompletions, ids, gone, cutoffs, tenantLockClass)
	b.Queue("SELECT id FROM deliveries WHERE id = ANY ($1) ORDER BY id FOR NO KEY UPDATE", ids)
	if allSuccesses(cs) {
		queueSuccesses(b, cs)
		if err := queueRollups(b, cs); err != nil {
			return wrap("complete: stats", err)
		}
		return wrap("complete", s.pool.SendBatch(ctx, b).Close())
	}
	b.Queue(lockEndpointsOfCompletions, ids, endpointIDs, attempted)
	for i, c := range cs {
		if c.Deferred {
			// No attempt was made: only the due time moves, and the lease
			// is given back (held if the endpoint is no longer enabled).
			b.Queue(`UPDATE deliveries SET
				state = CASE WHEN (SELECT e.state FROM endpoints e WHERE e.id = deliveries.endpoint_id) IS DISTINCT FROM 'enabled' THEN 'paused' ELSE state END,
				next_attempt_at = $1, lease_owner = NULL, lease_until = NULL
				WHERE id = $2 AND lease_owner = $3 AND lease_until = $4`,
				ts(c.NextAttemptAt), c.DeliveryID, c.Owner, nullTS(c.LeaseUntil))
			continue
		}
		a := c.Attempt
		b.Queue(`INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, error_detail, location, response_excerpt)
			SELECT d.id, COALESCE((SELECT MAX(a.number) FROM attempts a WHERE a.delivery_id = d.id), 0) + 1, $2, $3, $4, $5, $6, $7, $8
			FROM deliveries d WHERE d.id = $1`,
			c.DeliveryID, ts(a.StartedAt), a.Duration.Microseconds(), a.StatusCode, a.Error, a.ErrorDetail, a.Location, a.ResponseExcerpt)
		token := ""
		if c.State == store.DeliveryDead {
			token = strconv.Itoa(i)
			b.Queue(deadCompletionSQL, string(c.State), c.ClientErrors(), ts(c.DueAt()), a.StatusCode, a.Error, ts(c.Now), c.DeliveryID, c.Owner, nullTS(c.LeaseUntil), token)
		} else {
			b.Queue(completeDeliverySQL, string(c.State), c.ClientErrors(), ts(c.DueAt()), a.StatusCode, a.Error, ts(c.Now), c.DeliveryID, c.Owner, nullTS(c.LeaseUntil))
		}
		switch {
		case c.DisableEndpoint:
			b.Queue(goneQuery, c.EndpointID, c.DeliveryID, c.DisableReason, ts(c.Now), string(store.DeliveryPending))
		case c.State == store.DeliverySucceeded:
			// A success ends the failure streak (no write when there is
			// none); one that had raised endpoint.failing raises
			// endpoint.recovered.
			b.Queue(`WITH cleared AS (
				UPDATE endpoints SET failing_since = NULL, failure_count = `+recoverCount+` WHERE id = `+completionEndpoint+` AND (failing_since IS NOT NULL OR failure_count < 0)
				RETURNING id, tenant, url, kind, state, state_reason, failure_count)
			INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
			SELECT id, tenant, url, kind, state, state_reason, 'endpoint.recovered', $3 FROM cleared WHERE failure_count >= $4::integer`,
				c.EndpointID, c.DeliveryID, ts(c.Now), store.FailingAfter)
		default:
			// A failure starts the streak or adds to its count…
			b.Queue(`UPDATE endpoints SET failing_since = COALESCE(failing_since, $3),
				failure_count = CASE WHEN failing_since IS NULL THEN 1 ELSE failure_count + 1 END
				WHERE id = `+completionEndpoint,
				c.EndpointID, c.DeliveryID, nullTS(a.StartedAt))
			// …raising endpoint.failing at its FailingAfter-th failure, or
			// with a disable of a shorter streak (store.StreakNotices)…
			if cutoffs[i] == nil {
				b.Queue(failingNoRuleQuery, c.EndpointID, c.DeliveryID, ts(c.Now))
			} else {
				b.Queue(failingRuleQuery, c.EndpointID, c.DeliveryID, ts(c.Now), *cutoffs[i], c.DisableMinFailures)
				// …and one that has lasted DisableAfter with enough
				// failures disables the endpoint.
				b.Queue(streakQuery, c.EndpointID, c.DeliveryID, store.AttemptSummary(a), ts(c.Now), *cutoffs[i], c.DisableMinFailures, string(store.DeliveryPending))
			}
		}
		if c.State == store.DeliveryDead {
			b.Queue(deadLetterNoticeQuery, c.DeliveryID, ts(c.Now), token)
		}
	}
	if err := queueRollups(b, cs); err != nil {
		return wrap("complete: stats", err)
	}
	return wrap("complete", s.pool.SendBatch(ctx, b).Close())
}

// allSuccesses reports whether a batch holds only successful attempts, each
// of another delivery: the batch every healthy drain writes, which
// queueSuccesses writes with three statements whatever its size, since
// their order within the batch cannot change the outcome.
func allSuccesses(cs []store.Completion) bool {
	seen := make(map[string]struct{}, len(cs))
	for _, c := range cs {
		if c.Deferred || c.DisableEndpoint || c.State != store.DeliverySucceeded {
			return false
		}
		if _, dup := seen[c.DeliveryID]; dup {
			return false
		}
		seen[c.DeliveryID] = struct{}{}
	}
	return true
}

// queueSuccesses queues the statements of a batch of successes (after the
// tenant and row locks): the attempts (numbered MAX+1 under the row locks),
// the deliveries still under the leases their writers held, and the end of their
// endpoints' failure streaks — what the per-completion statements of
// CompleteDeliveries do for each success, in one statement each.
func queueSuccesses(b *pgx.Batch, cs []store.Completion) {
	n := len(cs)
	var (
		ids, owners, endpoints, errs, details, locations, excerpts = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		started, nows                                              = make([]time.Time, n), make([]time.Time, n)
		leases                                                     = make([]*time.Time, n)
		durations                                                  = make([]int64, n)
		codes                                                      = make([]int32, n)
	)
	for i, c := range cs {
		a := c.Attempt
		ids[i], owners[i], endpoints[i], leases[i] = c.DeliveryID, c.Owner, c.EndpointID, nullTS(c.LeaseUntil)
		started[i], nows[i], durations[i], codes[i] = ts(a.StartedAt), ts(c.Now), a.Duration.Microseconds(), int32(a.StatusCode)
		errs[i], details[i], locations[i], excerpts[i] = a.Error, a.ErrorDetail, a.Location, a.ResponseExcerpt
	}
	b.Queue(`INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, error_detail, location, response_excerpt)
		SELECT d.id, COALESCE((SELECT MAX(a.number) FROM attempts a WHERE a.delivery_id = d.id), 0) + 1,
		       u.started_at, u.duration_us, u.status_code, u.error, u.error_detail, u.location, u.response_excerpt
		FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::integer[], $5::text[], $6::text[], $7::text[], $8::text[])
		     AS u (id, started_at, duration_us, status_code, error, error_detail, location, response_excerpt)
		JOIN deliveries d ON d.id = u.id`,
		ids, started, durations, codes, errs, details, locations, excerpts)
	b.Queue(`UPDATE deliveries d SET state = 'succeeded', attempts = d.attempts + 1, next_attempt_at = u.now,
		       last_status_code = u.status_code, last_error = u.error, lease_owner = NULL, lease_until = NULL, updated_at = u.now
		FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::text[], $6::timestamptz[]) AS u (id, owner, now, status_code, error, lease_until)
		WHERE d.id = u.id AND d.lease_owner = u.owner AND d.lease_until = u.lease_until`,
		ids, owners, nows, codes, errs, leases)
	// The rows are locked in id order first (as lockEndpointsOfCompletions
	// does), and only those: a streak started by a batch that commits
	// meanwhile is left to run, as if it had come after this batch.
	// A streak that had raised endpoint.failing raises endpoint.recovered
	// (at the latest success of the endpoint in the batch).
	b.Queue(`WITH locked AS (
		SELECT id FROM endpoints
		WHERE id IN (SELECT COALESCE(NULLIF(u.endpoint_id, ''), d.endpoint_id)
		             FROM unnest($1::text[], $2::text[]) AS u (id, endpoint_id) LEFT JOIN deliveries d ON d.id = u.id)
		  AND (failing_since IS NOT NULL OR failure_count < 0)
		ORDER BY id FOR NO KEY UPDATE),
	cleared AS (
		UPDATE endpoints e SET failing_since = NULL, failure_count = `+recoverCountE+` FROM locked WHERE e.id = locked.id
		RETURNING e.id, e.tenant, e.url, e.kind, e.state, e.state_reason, e.failure_count)
	INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
	SELECT c.id, c.tenant, c.url, c.kind, c.state, c.state_reason, 'endpoint.recovered',
	       (SELECT MAX(u.now) FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u (id, endpoint_id, now)
	        LEFT JOIN deliveries d ON d.id = u.id WHERE COALESCE(NULLIF(u.endpoint_id, ''), d.endpoint_id) = c.id)
	FROM cleared c WHERE c.failure_count >= $4::integer ORDER BY c.id`,
		ids, endpoints, nows, store.FailingAfter)
}

// RescueExpiredLeases implements store.Store. A rescued delivery whose
// endpoint was paused or disabled while it was leased is held (paused), as
// its completion would have done; it does not count as claimable again.
// The round then finishes part of a move whose node stopped, or that a
// disable by a completion left (finishReleases), and part of a delete
// whose node stopped (finishDeletions); an error there is returned with
// the count of the leases rescued.
// The tenant locks and then the row locks (id order) are taken first, as
// completions take them.
func (s *Store) RescueExpiredLeases(ctx context.Context, now time.Time) (int, error) {
	now = ts(now)
	var ids []string
	b := newTxBatch()
	b.Queue(`SELECT pg_advisory_xact_lock_shared($2::integer, s.h)
		FROM (SELECT DISTINCT hashtext(tenant) AS h FROM deliveries WHERE lease_owner IS NOT NULL AND lease_until < $1 ORDER BY 1) AS s`,
		now, tenantLockClass)
	b.Queue("SELECT id FROM deliveries WHERE lease_owner IS NOT NULL AND lease_until < $1 ORDER BY id FOR NO KEY UPDATE", now).Query(func(rows pgx.Rows) error {
		var err error
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	var n int64
	err := s.txBatch(ctx, "rescue", b, func(tx pgx.Tx) error {
		if len(ids) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE deliveries SET state = 'paused', lease_owner = NULL, lease_until = NULL, updated_at = $1
			WHERE id = ANY ($2) AND lease_owner IS NOT NULL AND lease_until < $1 AND state = 'pending'
			  AND (SELECT e.state FROM endpoints e WHERE e.id = deliveries.endpoint_id) IS DISTINCT FROM 'enabled'`, now, ids)
		b.Queue("UPDATE deliveries SET lease_owner = NULL, lease_until = NULL WHERE id = ANY ($2) AND lease_owner IS NOT NULL AND lease_until < $1",
			now, ids).Exec(func(ct pgconn.CommandTag) error {
			n = ct.RowsAffected()
			return nil
		})
		// Wake every node's engine (sent on commit) when a delivery became
		// claimable.
		b.Queue(`SELECT pg_notify($1, '') WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = ANY ($2) AND state = 'pending' AND lease_owner IS NULL)`,
			notifyChannel, ids)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, err
	}
	// Each part runs whatever the other answered: a move that keeps
	// failing (a chunk meeting a row a stuck session holds) must not
	// leave every stopped delete unfinished.
	rerr := s.finishReleases(ctx, now)
	derr := s.finishDeletions(ctx)
	return int(n), errors.Join(rerr, derr)
}

// A move whose mark (endpoints.releasing_since) no chunk has renewed for
// staleRelease stopped with its node (a disable by a completion writes it
// stale: no node runs its move); a lease rescue finishes up to sweepChunks
// chunks of one such move (10,000 deliveries, some tenths of a second),
// so that the rescue's next round is not held up, and leaves the mark
// stale when more is left, for the next round of any node.
const (
	staleRelease = "30 seconds"
	sweepChunks  = 20
	// sweepFailures is the most failed moves (and, apart, failed
	// deletes) a round tries: at sweepLockWait each, the two parts stay
	// well within the engine's 30 s for a round.
	sweepFailures = 2
)

// backOffMoveSQL and backOffDeletionSQL back off the sweep of endpoint
// $1's move or delete whose chunk failed, if its mark is still $2 (no
// chunk renewed it): the mark renewed at the server's clock, so that the
// rescue tries it again after staleRelease, behind the others. They never
// wait for the row (SKIP LOCKED: a stuck session may hold it); a row
// skipped keeps its mark.
const (
	backOffMoveSQL = `UPDATE endpoints SET releasing_since = clock_timestamp()
		WHERE id = (SELECT id FROM endpoints WHERE id = $1 AND releasing_since = $2 FOR NO KEY UPDATE SKIP LOCKED)`
	backOffDeletionSQL = `UPDATE endpoint_deletions SET deleting_since = clock_timestamp()
		WHERE endpoint_id = (SELECT endpoint_id FROM endpoint_deletions WHERE endpoint_id = $1 AND deleting_since = $2 FOR NO KEY UPDATE SKIP LOCKED)`
)

// sweepBackOff runs q (backOffMoveSQL, backOffDeletionSQL) for id's mark,
// even when ctx has expired (the failure may be its deadline).
func (s *Store) sweepBackOff(ctx context.Context, q, id string, mark time.Time) error {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := s.pool.Exec(bctx, q, id, mark)
	return err
}

// finishReleases finishes, in part, the oldest move whose node stopped
// between its chunks (SetEndpointState) or that a disable by a completion
// left (disableEndpointQuery): a release (the endpoint is enabled), its
// held deliveries due at the resume's time (release_due_at), so they keep
// their place before what was published since; or a hold (paused,
// disabled). It never waits for a tenant's lock: a move whose tenant is
// locked exclusively (a state change or a delete in progress) is left for
// a later round, and the next stale one tried. Two nodes may work on one
// move at once; each chunk re-checks its rows.
func (s *Store) finishReleases(ctx context.Context, now time.Time) error {
	rows, err := s.pool.Query(ctx, `SELECT id, releasing_since, COALESCE(release_due_at, $1), COALESCE(release_after, ''), release_gen, state = 'enabled' FROM endpoints
		WHERE releasing_since < clock_timestamp() - interval '`+staleRelease+`'
		ORDER BY releasing_since LIMIT 8`, now)
	if err != nil {
		return wrap("finish a stopped release", err)
	}
	type stale struct {
		id        string
		mark, due time.Time
		after     string
		gen       int64
		release   bool
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stale, error) {
		var st stale
		err := row.Scan(&st.id, &st.mark, &st.due, &st.after, &st.gen, &st.release)
		return st, err
	})
	if err != nil {
		return wrap("finish a stopped release", err)
	}
	// restale leaves a release for a later round, behind the others that
	// stopped: its mark just stale, unless a chunk or a new resume renewed
	// it since.
	restale := func(id string, mark time.Time) error {
		_, err := s.pool.Exec(ctx, `UPDATE endpoints SET releasing_since = clock_timestamp() - interval '`+staleRelease+`' - interval '1 second'
			WHERE id = $1 AND releasing_since = $2`, id, mark)
		return err
	}
	// A move whose chunk fails is backed off (sweepBackOff: its mark
	// renewed, stale again after staleRelease) and the next one tried:
	// one failing move (a chunk meeting a row a stuck session holds) does
	// not stop every other. Left stale, it stayed the oldest and came
	// first in every round, and 8 failing moves filled the round's LIMIT
	// for good; a round gives up after sweepFailures failures, so that
	// failing moves (sweepLockWait each) leave it the time for the
	// stopped deletes.
	var (
		errs     []error
		failures int
	)
	for _, st := range found {
		last, moved, err := s.moveChunks(ctx, move{id: st.id, release: st.release, due: st.due, after: st.after, gen: st.gen, limit: sweepChunks, try: true})
		if err != nil {
			errs = append(errs, wrap("finish a stopped release", err))
			if berr := s.sweepBackOff(ctx, backOffMoveSQL, st.id, st.mark); berr != nil {
				errs = append(errs, wrap("finish a stopped release: back off", berr))
			}
			if failures++; failures >= sweepFailures || ctx.Err() != nil {
				break
			}
			continue
		}
		switch {
		case last.mark != nil: // more is left
			err = restale(st.id, *last.mark)
		case last.found == 0 && moved == 0: // its tenant's lock was taken, or the release ended since
			err = restale(st.id, st.mark)
		}
		if err != nil {
			errs = append(errs, wrap("finish a stopped release", err))
			break
		}
		if moved > 0 {
			break
		}
	}
	return errors.Join(errs...)
}

// NextDueAt implements store.Store (with skipTenants: nextDueSkipQuery).
func (s *Store) NextDueAt(ctx context.Context, skipTenants []string) (time.Time, error) {
	var next *time.Time
	var row pgx.Row
	if len(skipTenants) == 0 {
		row = s.pool.QueryRow(ctx, nextDueQuery)
	} else {
		row = s.pool.QueryRow(ctx, nextDueSkipQuery, skipTenants, store.NextDueTenantProbes+len(skipTenants))
	}
	if err := row.Scan(&next); err != nil {
		return time.Time{}, wrap("next due", err)
	}
	return fromNullTS(next), nil
}

// An endpoint enabled while its failure streak had raised endpoint.failing
// keeps failure_count = -1 with no streak, so its first success still
// raises endpoint.recovered: recoverCount is the count a success leaves
// (FailingAfter for that marker, so the recovered notice is raised;
// unchanged otherwise). enableCount sets the marker.
const (
	recoverCount  = "CASE WHEN failure_count < 0 THEN 3 ELSE failure_count END"
	recoverCountE = "CASE WHEN e.failure_count < 0 THEN 3 ELSE e.failure_count END"
	enableCount   = "CASE WHEN failing_since IS NOT NULL AND failure_count >= 3 THEN -1 ELSE failure_count END"
)
