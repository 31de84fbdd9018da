package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-webhooks/herald/internal/store"
)

// SetEndpointState implements store.Store. The state changes under the
// tenant's exclusive lock, so no publish of the tenant is between reading
// the old state and committing its deliveries: none is left pending for a
// paused endpoint, or held for one that was just enabled. The endpoint's
// deliveries then move (held on a pause or disable, released on a resume)
// in chunks of moveChunk, the first in the same transaction, the rest each
// in one of its own under the shared lock, so that the tenant's publishes
// and completions do not wait for the whole move (a million deliveries
// took some 20 s in one statement). A pause is in force from its change,
// whatever its chunks' progress: the engine attempts no claim of an
// endpoint that is not enabled (it puts it back, and the completion holds
// it), so a pending delivery a chunk has not reached yet is held when a
// claim reaches it. A move's progress (a release's or a hold's) is marked
// on the endpoint (releasing_since) and finished by any node's lease
// rescue if this one stops between chunks (finishReleases).
func (s *Store) SetEndpointState(ctx context.Context, p store.SetEndpointStateParams) (store.Endpoint, int, error) {
	switch p.State {
	case store.EndpointEnabled, store.EndpointPaused, store.EndpointDisabled:
	default:
		return store.Endpoint{}, 0, store.BadEndpointState(p.State)
	}
	now := ts(p.Now)
	release := p.State == store.EndpointEnabled
	var e store.Endpoint
	b := newTxBatch()
	b.Queue("SELECT pg_advisory_xact_lock($2::integer, hashtext(tenant)) FROM endpoints WHERE id = $1", p.ID, tenantLockClass)
	// Enabling ends the failure streak. The notice, when given, joins the
	// outbox after any earlier one not yet emitted.
	b.Queue(`UPDATE endpoints SET state = $2, state_reason = $3, updated_at = $4,
		failing_since = CASE WHEN $2 = 'enabled' THEN NULL ELSE failing_since END,
		failure_count = CASE WHEN $2 = 'enabled' THEN `+enableCount+` ELSE failure_count END,
		releasing_since = clock_timestamp(),
		release_due_at = CASE WHEN $2 = 'enabled' THEN $4::timestamptz END,
		release_after = NULL, release_gen = release_gen + 1
		WHERE id = $1 RETURNING `+endpointColumns,
		p.ID, string(p.State), p.Reason, now).QueryRow(func(row pgx.Row) error {
		var err error
		if e, err = s.scanEndpoint(row); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("endpoint %s: %w", p.ID, store.ErrNotFound)
		}
		// A state change needs none of the endpoint's sealed values: one
		// whose values do not open changes state too, answered as a list
		// shows it (store.Listed: without them, named in Unreadable).
		e, err = store.Listed(e, err)
		return err
	})
	if p.Notice != "" {
		b.Queue(addNoticeQuery, p.ID, p.Notice, now)
	}
	var (
		chunk moveChunkResult
		mv    = move{id: p.ID, release: release, due: now}
	)
	b.Queue("SELECT release_gen FROM endpoints WHERE id = $1", p.ID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&mv.gen); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
	mv.queue(b, &chunk)
	if err := s.txBatch(ctx, "set endpoint state", b, func(tx pgx.Tx) error { return mv.mark(ctx, tx, &chunk) }); err != nil {
		return store.Endpoint{}, 0, err
	}
	moved := chunk.moved
	if chunk.found == moveChunk {
		// The rest is the change's own work: finished even if the caller
		// goes away (as a release whose node stops is finished by the
		// rescue).
		mv.after = chunk.last
		_, more, err := s.moveChunks(context.WithoutCancel(ctx), mv)
		moved += more
		if err != nil {
			return e, int(moved), s.leftToRescue("move the deliveries of endpoint "+p.ID+" ("+string(p.State)+")", err)
		}
	}
	return e, int(moved), nil
}

// moveChunk is the most deliveries one chunk of a pause's or a resume's
// move writes.
const moveChunk = store.DefaultFanOutChunk

// holdChunkSQL holds up to $3 of endpoint $1's deliveries in state $5
// (pending) that no claim leased, with ids above $4, the oldest first, at
// $2, and answers how many it found, how many it held and the last id it
// found. releaseChunkSQL releases up to $3 of its deliveries in state $5
// (paused) with ids above $4, due at $2.
//
//   - A chunk starts after the last id of the one before: each row moved
//     leaves a stale entry in deliveries_endpoint (no move is a HOT update,
//     the state being in that index), which a chunk starting from the
//     endpoint's first id would walk past again (a heap fetch each while
//     an older snapshot keeps them), making a move's cost grow with its
//     square.
//   - The candidates are locked (FOR NO KEY UPDATE) where they are chosen:
//     after waiting for a row's lock PostgreSQL re-checks the new version
//     against the SELECT's conditions and leaves it out if it no longer
//     meets them (a delivery leased or completed meanwhile), and LIMIT
//     counts only the rows kept. The UPDATE then finds the locked rows by
//     primary key alone: with the conditions repeated on it, a generic
//     plan read every held row of the endpoint through deliveries_endpoint
//     for each chunk, and a resume of 80,000 deliveries during a drain
//     took 20 to 80 s.
//   - The state is a parameter, not a literal, so that no plan made for
//     any value (the generic plan PostgreSQL turns to after five runs) can
//     read the candidates through deliveries_paused or the due indexes,
//     whose predicates only a literal proves and which hold every
//     endpoint's rows: they are read through deliveries_endpoint
//     (endpoint, state, id) from the cursor.
const (
	holdChunkSQL = `WITH c AS MATERIALIZED (
			SELECT id FROM deliveries WHERE endpoint_id = $1 AND state = $5 AND lease_owner IS NULL AND id > $4 ORDER BY id LIMIT $3
			FOR NO KEY UPDATE),
		u AS (UPDATE deliveries SET state = 'paused', updated_at = $2 WHERE id = ANY (ARRAY(SELECT id FROM c)) RETURNING 1)
		SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM u), COALESCE((SELECT max(id) FROM c), '')`
	releaseChunkSQL = `WITH c AS MATERIALIZED (
			SELECT id FROM deliveries WHERE endpoint_id = $1 AND state = $5 AND id > $4 ORDER BY id LIMIT $3
			FOR NO KEY UPDATE),
		u AS (UPDATE deliveries SET state = 'pending', next_attempt_at = $2, updated_at = $2 WHERE id = ANY (ARRAY(SELECT id FROM c)) RETURNING 1)
		SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM u), COALESCE((SELECT max(id) FROM c), '')`
)

// moveChunkArgs are the arguments of a release's chunk (releaseChunkSQL)
// or a hold's (holdChunkSQL).
func moveChunkArgs(id string, release bool, due time.Time, after string) []any {
	from := store.DeliveryPending
	if release {
		from = store.DeliveryPaused
	}
	return []any{id, due, moveChunk, after, string(from)}
}

// move is the move of an endpoint's deliveries a state change starts: a
// release (to pending, due at due) or a hold, of the deliveries with ids
// above after.
type move struct {
	id      string
	release bool
	due     time.Time
	after   string
	// gen is the endpoint's state change the move belongs to
	// (release_gen, counted by every change): a release goes on only
	// while it is the endpoint's last. Its due time cannot name it: two
	// resumes may share one.
	gen int64
	// limit is the most chunks moveChunks runs (0: until done); try makes it
	// stop instead of waiting when the tenant's lock is held exclusively
	// (the rescue's sweep: finishReleases).
	limit int
	try   bool
}

// moveChunkResult is what a chunk found and did: candidates found, rows
// moved, the last candidate's id, and the move's mark as the chunk left
// it (nil: cleared, or the move is no longer the endpoint's).
type moveChunkResult struct {
	found, moved int64
	last         string
	mark         *time.Time
}

// queue queues one chunk of m into b, r set when the batch runs, and,
// after a release's chunk, wakes every node's engine when a delivery of
// the endpoint is due.
func (m move) queue(b *pgx.Batch, r *moveChunkResult) {
	q := holdChunkSQL
	if m.release {
		q = releaseChunkSQL
	}
	b.Queue(q, moveChunkArgs(m.id, m.release, m.due, m.after)...).QueryRow(func(row pgx.Row) error { return row.Scan(&r.found, &r.moved, &r.last) })
	if m.release {
		b.Queue(`SELECT pg_notify($1, '') WHERE EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = $2 AND state = 'pending' AND lease_owner IS NULL)`,
			notifyChannel, m.id)
	}
}

// markReleaseSQL records a move's progress on endpoint $1 after a chunk
// (a release's, $5, or a hold's): with $2 (the chunk was full: more may
// be left) the mark renewed at the server's clock when the statement runs
// (every node reads its age on the same clock, and a chunk that waited
// for a lock does not write a mark already old) and the cursor $3;
// without, the move is done and all three are cleared. Only the move of
// generation $4 writes them: any state change between its chunks ends it
// (and a change to the other direction could not take it for its own). It
// reads no delivery: a chunk that finds fewer than moveChunk after its
// cursor leaves none to move (every writer of a held or a pending
// delivery holds the tenant's lock and reads the endpoint's state).
const markReleaseSQL = `UPDATE endpoints SET releasing_since = CASE WHEN $2 THEN clock_timestamp() END,
		release_after = CASE WHEN $2 THEN $3 END, release_due_at = CASE WHEN $2 THEN release_due_at END
	WHERE id = $1 AND (state = 'enabled') = $5 AND release_gen = $4 RETURNING releasing_since`

// mark runs markReleaseSQL for a move's chunk r in tx, setting r.mark
// (nil when cleared, or when the move is no longer the endpoint's).
func (m move) mark(ctx context.Context, tx pgx.Tx, r *moveChunkResult) error {
	err := tx.QueryRow(ctx, markReleaseSQL, m.id, r.found == moveChunk, r.last, m.gen, m.release).Scan(&r.mark)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// moveChunks runs m after its first chunk, one chunk per transaction
// under the tenant's shared lock, each after the last id of the one
// before, and stops when a chunk finds fewer than moveChunk, when the
// endpoint's state no longer calls for the move (paused again during a
// release, enabled during a hold, or deleted), after m.limit chunks, or,
// with m.try, when the tenant's lock is held exclusively. It answers the
// last chunk's result (zero when it did not run: the state changed, or the
// lock was not free) and the deliveries moved.
func (s *Store) moveChunks(ctx context.Context, m move) (moveChunkResult, int64, error) {
	var (
		total int64
		last  moveChunkResult
	)
	for i := 0; m.limit <= 0 || i < m.limit; i++ {
		if s.beforeChunk != nil {
			s.beforeChunk()
		}
		var (
			locked = true
			state  string
			gen    int64
			r      moveChunkResult
		)
		b := newTxBatch()
		// A lock held by a stuck session fails the chunk (sweepLockWait):
		// not the rescue's whole round, and not the state change's call,
		// whose chunks run whatever its caller's context (nor Close, which
		// waits for the pool's connections), for as long as the session
		// holds it; the rest is left marked for the rescue.
		b.Queue(setSweepLockTimeout, s.sweepLockSetting())
		if m.try {
			b.Queue("SELECT pg_try_advisory_xact_lock_shared($2::integer, hashtext(tenant)) FROM endpoints WHERE id = $1", m.id, tenantLockClass).QueryRow(func(row pgx.Row) error {
				if err := row.Scan(&locked); err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				return nil
			})
		} else {
			b.Queue("SELECT pg_advisory_xact_lock_shared($2::integer, hashtext(tenant)) FROM endpoints WHERE id = $1", m.id, tenantLockClass)
		}
		b.Queue("SELECT state, release_gen FROM endpoints WHERE id = $1", m.id).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&state, &gen); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
		err := s.txBatch(ctx, "move the endpoint's deliveries", b, func(tx pgx.Tx) error {
			if !locked || state == "" || m.release != (state == string(store.EndpointEnabled)) {
				return nil // the state changed since: the move is over
			}
			if gen != m.gen {
				return nil // changed again since (paused and resumed, disabled after a pause): that move goes on
			}
			b := &pgx.Batch{}
			m.queue(b, &r)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			return m.mark(ctx, tx, &r)
		})
		total += r.moved
		last = r
		if err != nil {
			return last, total, err
		}
		if r.found < moveChunk {
			return last, total, nil
		}
		m.after = r.last
	}
	return last, total, nil
}

// ReplayDeliveries implements store.Store. It takes the tenant lock shared,
// so whether a replayed delivery is pending or held agrees with the
// endpoint's state when the replay commits.
func (s *Store) ReplayDeliveries(ctx context.Context, p store.ReplayParams) (int, error) {
	if (p.DeliveryID == "") == (p.EndpointID == "") {
		return 0, store.BadReplayTarget()
	}
	states := p.States
	if len(states) == 0 {
		states = []store.DeliveryState{store.DeliveryDead}
	}
	var (
		found         bool
		moved, queued int
	)
	b := newTxBatch()
	if p.DeliveryID != "" {
		// Not a delivery of a deleted endpoint (its delete deletes them in
		// chunks after the endpoint's row: DeleteEndpoint): not found, as
		// once the delete is done. A delete that commits after this reads
		// waits for the replay (the tenant's lock), then deletes it.
		b.Queue(`SELECT pg_advisory_xact_lock_shared($2::integer, hashtext(tenant)) FROM deliveries d WHERE id = $1
			AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id)`, p.DeliveryID, tenantLockClass)
	} else {
		b.Queue("SELECT pg_advisory_xact_lock_shared($2::integer, hashtext(tenant)) FROM endpoints WHERE id = $1", p.EndpointID, tenantLockClass)
	}
	b.QueuedQueries[len(b.QueuedQueries)-1].Exec(func(ct pgconn.CommandTag) error {
		found = ct.RowsAffected() > 0
		return nil
	})
	err := s.txBatch(ctx, "replay", b, func(tx pgx.Tx) error {
		if found && p.EndpointID != "" {
			// Read again, as a delivery's replay does below: the lock's
			// statement returns the endpoint as it read it before waiting,
			// and a delete may have committed meanwhile, leaving the
			// deliveries its chunks have not reached yet (they are not the
			// endpoint's any more: not found, as once the delete is done).
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM endpoints WHERE id = $1)", p.EndpointID).Scan(&found); err != nil {
				return err
			}
		}
		if !found {
			if p.DeliveryID != "" {
				return fmt.Errorf("delivery %s: %w", p.DeliveryID, store.ErrNotFound)
			}
			return fmt.Errorf("endpoint %s: %w", p.EndpointID, store.ErrNotFound)
		}
		names := make([]string, len(states))
		for i, st := range states {
			if st != store.DeliveryDead && st != store.DeliverySucceeded {
				return store.NotReplayable(st)
			}
			names[i] = string(st)
		}
		f := filter{args: []any{ts(p.Now)}} // $1 is now
		if p.DeliveryID != "" {
			f.add("id = ?", p.DeliveryID)
			// Read again: the delete may have committed while the lock
			// was awaited.
			f.where = append(f.where, "EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id)")
		} else {
			f.add("endpoint_id = ?", p.EndpointID)
		}
		f.add("state = ANY (?::text[])", names)
		if !p.Since.IsZero() {
			f.add("updated_at >= ?", ts(p.Since))
		}
		if !p.Until.IsZero() {
			f.add("updated_at < ?", ts(p.Until))
		}
		if p.EventType != "" {
			f.add("event_type = ?", p.EventType)
		}
		// The attempts so far stay; the retry budget counts from here.
		// The rows are locked in id order first (the conditions re-checked
		// after a wait), as retention's purge and a delete's chunks lock
		// them: the UPDATE alone locked them in its plan's order (often
		// the table's), and could hold a later row while waiting for an
		// earlier one that the purge of old dead letters held on its way
		// to the later: a deadlock.
		q := `WITH r AS (UPDATE deliveries SET
			state = CASE WHEN (SELECT e.state FROM endpoints e WHERE e.id = deliveries.endpoint_id) = 'enabled' THEN 'pending' ELSE 'paused' END,
			next_attempt_at = $1, updated_at = $1, client_errors = 0, replay_base = attempts
			WHERE id = ANY (ARRAY(SELECT id FROM deliveries` + f.clause() + ` ORDER BY id FOR NO KEY UPDATE)) RETURNING state)
			SELECT count(*), count(*) FILTER (WHERE state = 'pending') FROM r`
		if err := tx.QueryRow(ctx, q, f.args...).Scan(&moved, &queued); err != nil {
			return err
		}
		if queued > 0 {
			_, err := tx.Exec(ctx, "SELECT pg_notify($1, '')", notifyChannel)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

// PostponeEndpointDeliveries implements store.Store. The rows are locked
// in id order first (conditions re-checked after a wait), as every chunk
// of a hold, a release or a delete locks them: an UPDATE alone locks them
// in the order of its plan (a walk of the table, or a bitmap of
// deliveries_due: the table's order), and held one of the endpoint's rows
// while waiting for another that a disable's chunk held on its way to the
// first, a deadlock (the circuit opens and the failure streak disables in
// the same outage, on the same backlog).
func (s *Store) PostponeEndpointDeliveries(ctx context.Context, endpointID string, until time.Time) (int, error) {
	ct, err := s.pool.Exec(ctx, `UPDATE deliveries SET next_attempt_at = $1
		WHERE id = ANY (ARRAY(SELECT id FROM deliveries
			WHERE endpoint_id = $2 AND state = 'pending' AND lease_owner IS NULL AND next_attempt_at < $1
			ORDER BY id FOR NO KEY UPDATE))`, ts(until), endpointID)
	if err != nil {
		return 0, wrap("postpone", err)
	}
	return int(ct.RowsAffected()), nil
}

// MoveEndpointDeliveries implements store.Store. With a limit the rows are
// read through deliveries_due (the window's rows, FOR UPDATE SKIP LOCKED:
// a row another node is claiming is left to it), else through
// deliveries_endpoint (the endpoint's pending rows).
func (s *Store) MoveEndpointDeliveries(ctx context.Context, p store.MoveParams) (int, error) {
	// Without a limit the rows are locked in id order first (conditions
	// re-checked after a wait), as a hold's chunks lock them: an UPDATE
	// alone locked them in its plan's order (the table's), and held one
	// while waiting for another that a disable's chunk held on its way to
	// the first, a deadlock (PostponeEndpointDeliveries).
	q := `UPDATE deliveries SET next_attempt_at = $1
		WHERE id = ANY (ARRAY(SELECT id FROM deliveries
			WHERE endpoint_id = $2 AND state = 'pending' AND lease_owner IS NULL
			  AND ($3::timestamptz IS NULL OR next_attempt_at >= $3) AND next_attempt_at <= $4
			  AND (NOT $5 OR attempts = replay_base)
			ORDER BY id FOR NO KEY UPDATE))`
	args := []any{ts(p.At), p.EndpointID, nullTS(p.DueFrom), ts(p.DueTo), p.Unattempted}
	if p.Limit > 0 {
		q = `UPDATE deliveries d SET next_attempt_at = LEAST(d.next_attempt_at, $1::timestamptz + (m.n - 1) * $7 * interval '1 microsecond')
			FROM (SELECT id, row_number() OVER (ORDER BY next_attempt_at, id) AS n FROM (
				SELECT id, next_attempt_at FROM deliveries
				WHERE state = 'pending' AND lease_owner IS NULL
				  AND next_attempt_at >= COALESCE($3::timestamptz, '-infinity') AND next_attempt_at <= $4 AND endpoint_id = $2
				  AND (NOT $5 OR attempts = replay_base)
				ORDER BY next_attempt_at, id LIMIT $6 FOR UPDATE SKIP LOCKED) w) m
			WHERE d.id = m.id`
		args = append(args, p.Limit, p.Spacing.Microseconds())
	}
	ct, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, wrap("move", err)
	}
	return int(ct.RowsAffected()), nil
}

// addNoticeQuery appends a notice of type $2 at $3 to the outbox with a
// snapshot of the endpoint $1 as it is in the transaction (queue it after
// the change, or before a delete).
const addNoticeQuery = `INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
	SELECT id, tenant, url, kind, state, state_reason, $2, $3 FROM endpoints WHERE id = $1`

// PendingNotices implements store.Store. LastStatusCode and LastError come
// from the attempt that started last among the endpoint's deliveries
// before the change (a delivery's updated_at is no guide: claims, pauses
// and replays move it without an attempt; attempts after the change are
// not part of it: an endpoint.created has none; an endpoint.deleted has
// none either, its attempts going with it, even while its delete's
// chunks have some left).
func (s *Store) PendingNotices(ctx context.Context, limit int) ([]store.Notice, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT n.id, n.endpoint_id, n.tenant, n.url, n.kind, n.state, n.state_reason, n.type, n.created_at,
			CASE WHEN n.delivery_id <> '' THEN n.last_status_code ELSE COALESCE(l.status_code, 0) END,
			CASE WHEN n.delivery_id <> '' THEN n.last_error ELSE COALESCE(l.error, '') END,
			n.delivery_id, n.event_id, n.event_type, n.attempts
		FROM notices n LEFT JOIN LATERAL (
			SELECT a.status_code, a.error FROM deliveries d JOIN attempts a ON a.delivery_id = d.id
			WHERE d.endpoint_id = n.endpoint_id AND n.delivery_id = '' AND n.type <> 'endpoint.deleted' AND a.started_at <= n.created_at
			ORDER BY a.started_at DESC, a.number DESC LIMIT 1) AS l ON true
		ORDER BY n.id LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("pending notices", err)
	}
	defer rows.Close()
	var out []store.Notice
	for rows.Next() {
		var (
			n     store.Notice
			state string
		)
		if err := rows.Scan(&n.ID, &n.Endpoint.ID, &n.Endpoint.Tenant, &n.Endpoint.URL, &n.Endpoint.Kind, &state, &n.Endpoint.StateReason,
			&n.Type, &n.At, &n.LastStatusCode, &n.LastError, &n.DeliveryID, &n.EventID, &n.EventType, &n.Attempts); err != nil {
			return nil, wrap("pending notices", err)
		}
		n.EventID = store.PublicEventID(n.EventID)
		n.Endpoint.State, n.At = store.EndpointState(state), n.At.UTC()
		out = append(out, n)
	}
	return out, wrap("pending notices", rows.Err())
}

// ClearNotices implements store.Store.
func (s *Store) ClearNotices(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, "DELETE FROM notices WHERE id = ANY($1)", ids)
	return wrap("clear notices", err)
}

// DeadLetterCounts implements store.Store.
func (s *Store) DeadLetterCounts(ctx context.Context, tenant string, since time.Time) ([]store.DeadLetterCount, error) {
	query, args := deadLetterCountsQuery(tenant, since)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrap("dead letter counts", err)
	}
	defer rows.Close()
	out := []store.DeadLetterCount{}
	for rows.Next() {
		var c store.DeadLetterCount
		if err := rows.Scan(&c.EndpointID, &c.Tenant, &c.Count); err != nil {
			return nil, wrap("dead letter counts", err)
		}
		out = append(out, c)
	}
	return out, wrap("dead letter counts", rows.Err())
}

// deadLetterCountsQuery is DeadLetterCounts' statement and its arguments:
// the dead rows through deliveries_dead.
func deadLetterCountsQuery(tenant string, since time.Time) (string, []any) {
	var f filter
	f.where = append(f.where, stateConditions[store.DeliveryDead])
	if tenant != "" {
		f.add("tenant = ?", tenant)
	}
	if !since.IsZero() {
		f.add("updated_at >= ?", ts(since))
	}
	f.where = append(f.where, notDeleting("endpoint_id"))
	return "SELECT endpoint_id, tenant, COUNT(*) FROM deliveries" + f.clause() +
		" GROUP BY endpoint_id, tenant ORDER BY COUNT(*) DESC, endpoint_id", f.args
}

// ClaimSpikeAlert implements store.Store. One conditional UPDATE: of
// concurrent callers (several nodes) exactly one wins. An alert emitted at
// windowStart exactly is not "after windowStart".
func (s *Store) ClaimSpikeAlert(ctx context.Context, endpointID string, windowStart, now time.Time) (bool, error) {
	ct, err := s.pool.Exec(ctx, "UPDATE endpoints SET last_spike_at = $1 WHERE id = $2 AND COALESCE(last_spike_at, '-infinity') <= $3",
		ts(now), endpointID, ts(windowStart))
	if err != nil {
		return false, wrap("spike alert", err)
	}
	return ct.RowsAffected() == 1, nil
}

// deliveryStateCountsSQL counts deliveries by state, each through its
// partial index (the pending ones through deliveries_due and
// deliveries_leased), and leaves out the states with none, as GROUP BY
// would (the store gauges). Since migration 00092 no index holds every
// row's state, and a GROUP BY state would read the whole table.
const deliveryStateCountsSQL = `SELECT state, n FROM (
	SELECT 'pending' AS state, (SELECT COUNT(*) FROM deliveries WHERE state = 'pending' AND lease_owner IS NULL)
	                         + (SELECT COUNT(*) FROM deliveries WHERE state = 'pending' AND lease_owner IS NOT NULL) AS n
	UNION ALL SELECT 'succeeded', COUNT(*) FROM deliveries WHERE state = 'succeeded'
	UNION ALL SELECT 'dead', COUNT(*) FROM deliveries WHERE state = 'dead'
	UNION ALL SELECT 'paused', COUNT(*) FROM deliveries WHERE state = 'paused') AS c
WHERE n > 0`

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{DeliveriesByState: map[store.DeliveryState]int{}, EndpointsByState: map[store.EndpointState]int{}}
	count := func(put func(string, int)) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					k string
					n int
				)
				if err := rows.Scan(&k, &n); err != nil {
					return err
				}
				put(k, n)
			}
			return rows.Err()
		}
	}
	b := &pgx.Batch{}
	b.Queue(deliveryStateCountsSQL).Query(count(func(k string, n int) { st.DeliveriesByState[store.DeliveryState(k)] = n }))
	b.Queue("SELECT state, COUNT(*) FROM endpoints GROUP BY state").Query(count(func(k string, n int) { st.EndpointsByState[store.EndpointState(k)] = n }))
	b.Queue("SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending' AND lease_owner IS NULL").QueryRow(func(row pgx.Row) error {
		var oldest *time.Time
		if err := row.Scan(&oldest); err != nil {
			return err
		}
		if oldest != nil {
			st.OldestDue = oldest.UTC()
		}
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return st, wrap("stats", err)
	}
	return st, nil
}

// The retention of finished deliveries: at most $2 rows finished before
// $1, found through the state's partial index (migration 00092), then
// locked in id order (the conditions re-checked after a wait: a row
// changed meanwhile, a delivery replayed, is kept), as a delete's chunks
// lock them, and deleted by primary key: the DELETE alone found them
// through a bitmap of the primary key, locking them in the table's order,
// and could hold a later row while waiting for an earlier one that a
// delete's chunk held on its way to the later (both delete an old dead
// letter of a deleted endpoint): a deadlock.
func purgeFinishedSQL(state string) string {
	return `DELETE FROM deliveries WHERE id = ANY (ARRAY(
		SELECT id FROM deliveries WHERE id = ANY (ARRAY(SELECT id FROM deliveries WHERE state = '` + state + `' AND updated_at < $1 LIMIT $2))
		  AND state = '` + state + `' AND updated_at < $1
		ORDER BY id FOR UPDATE))`
}

var (
	purgeSucceededSQL = purgeFinishedSQL("succeeded")
	purgeDeadSQL      = purgeFinishedSQL("dead")
)

// Purge implements store.Store. Each kind is deleted by one statement of at
// most Limit rows, so no statement holds many locks for long. The locking
// conditions repeat the inner ones: a row changed meanwhile (a succeeded
// delivery replayed) is re-checked and kept.
func (s *Store) Purge(ctx context.Context, p store.PurgeParams) (int, error) {
	if p.Limit <= 0 {
		p.Limit = 500
	}
	total := 0
	for _, q := range []struct {
		sql   string
		bound time.Time
	}{
		{purgeSucceededSQL, p.SucceededBefore},
		{purgeDeadSQL, p.DeadBefore},
		{`DELETE FROM events WHERE id = ANY (ARRAY(
				SELECT e.id FROM events e WHERE e.created_at < $1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id) LIMIT $2))
			AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id)`, p.EventsBefore},
		{`DELETE FROM endpoint_stats WHERE (endpoint_id, span, start) IN (SELECT endpoint_id, span, start FROM endpoint_stats WHERE span = 'm' AND start < $1 LIMIT $2)`, p.MinuteStatsBefore},
		{`DELETE FROM endpoint_stats WHERE (endpoint_id, span, start) IN (SELECT endpoint_id, span, start FROM endpoint_stats WHERE span = 'h' AND start < $1 LIMIT $2)`, p.HourStatsBefore},
		{`DELETE FROM api_keys WHERE hash = ANY (ARRAY(SELECT hash FROM api_keys WHERE kind = 'portal' AND (expires_at < $1 OR revoked_at < $1) LIMIT $2))`, p.PortalSessionsBefore},
	} {
		if q.bound.IsZero() {
			continue
		}
		ct, err := s.pool.Exec(ctx, q.sql, ts(q.bound), p.Limit)
		if err != nil {
			return total, wrap("purge", err)
		}
		total += int(ct.RowsAffected())
	}
	return total, nil
}

// RotateSecret implements store.Store. The endpoint's row is locked while
// the new list is computed (store.RotatedSecrets, the drivers' shared rule)
// and written, so concurrent rotations never lose a secret.
func (s *Store) RotateSecret(ctx context.Context, p store.RotateSecretParams) (store.Endpoint, error) {
	return s.changeSecrets(ctx, "rotate secret", p.ID, p.Now, p.ReplaceUnreadable, func(old []store.Secret) ([]store.Secret, error) {
		return store.RotatedSecrets(old, p), nil
	})
}

// RevokeSecret implements store.Store, as RotateSecret.
func (s *Store) RevokeSecret(ctx context.Context, p store.RevokeSecretParams) (store.Endpoint, error) {
	return s.changeSecrets(ctx, "revoke secret", p.ID, p.Now, false, func(old []store.Secret) ([]store.Secret, error) {
		return store.RevokedSecrets(old, p.SecretID, p.Now)
	})
}

// changeSecrets replaces an endpoint's secrets with change(its secrets),
// the row locked between the read and the write; with replaceUnreadable,
// secrets that do not open (and nothing else of the row) are taken for
// none (store.RotateSecretParams.ReplaceUnreadable).
func (s *Store) changeSecrets(ctx context.Context, op, id string, now time.Time, replaceUnreadable bool, change func([]store.Secret) ([]store.Secret, error)) (store.Endpoint, error) {
	var e store.Endpoint
	b := newTxBatch()
	b.Queue("SELECT "+endpointColumns+" FROM endpoints WHERE id = $1 FOR NO KEY UPDATE", id).QueryRow(func(row pgx.Row) error {
		var err error
		if e, err = s.scanEndpoint(row); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("endpoint %s: %w", id, store.ErrNotFound)
		}
		if err != nil && replaceUnreadable && store.OnlySecretsUnreadable(err) {
			e, err = store.Endpoint{ID: id}, nil // the old secrets: none
		}
		return err
	})
	err := s.txBatch(ctx, op, b, func(tx pgx.Tx) error {
		ss, err := change(e.Secrets)
		if err != nil {
			return err
		}
		sec, err := store.EncodeSecrets(s.box, e.ID, ss)
		if err != nil {
			return err
		}
		e, err = s.scanEndpoint(tx.QueryRow(ctx, "UPDATE endpoints SET secrets = $2, updated_at = $3 WHERE id = $1 RETURNING "+endpointColumns,
			id, sec, ts(now)))
		return err
	})
	if err != nil {
		return store.Endpoint{}, err
	}
	return e, nil
}

// EnsureMeta implements store.Store: the first writer wins, concurrent
// callers all get its value.
func (s *Store) EnsureMeta(ctx context.Context, key, value string) (string, error) {
	var stored string
	err := s.pool.QueryRow(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = meta.value RETURNING value`, key, value).Scan(&stored)
	return stored, wrap("meta "+key, err)
}
