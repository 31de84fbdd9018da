package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// SetEndpointState implements store.Store.
func (s *Store) SetEndpointState(ctx context.Context, p store.SetEndpointStateParams) (store.Endpoint, int, error) {
	switch p.State {
	case store.EndpointEnabled, store.EndpointPaused, store.EndpointDisabled:
	default:
		return store.Endpoint{}, 0, store.BadEndpointState(p.State)
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return store.Endpoint{}, 0, wrap("set endpoint state", err)
	}
	defer done()
	now := micro(p.Now)
	var res sql.Result
	if p.State == store.EndpointEnabled {
		res, err = tx.ExecContext(ctx, `UPDATE endpoints SET state = 'enabled', state_reason = ?1, failing_since = NULL, failure_count = `+enableCount+`, updated_at = ?2 WHERE id = ?3`,
			p.Reason, now, p.ID)
	} else {
		res, err = tx.ExecContext(ctx, `UPDATE endpoints SET state = ?1, state_reason = ?2, updated_at = ?3 WHERE id = ?4`,
			string(p.State), p.Reason, now, p.ID)
	}
	if err != nil {
		return store.Endpoint{}, 0, wrap("set endpoint state", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.Endpoint{}, 0, fmt.Errorf("endpoint %s: %w", p.ID, store.ErrNotFound)
	}
	s.endpointChanged()
	if p.Notice != "" {
		if err := addNotice(ctx, tx, p.ID, p.Notice, p.Now); err != nil {
			return store.Endpoint{}, 0, wrap("set endpoint state", err)
		}
	}
	if p.State == store.EndpointEnabled {
		res, err = tx.ExecContext(ctx, releaseDeliveriesSQL, now, p.ID, releaseChunk)
	} else {
		res, err = tx.ExecContext(ctx, holdDeliveriesSQL, now, p.ID, s.leases.ofEndpoint(p.ID, nil), holdChunk)
	}
	if err != nil {
		return store.Endpoint{}, 0, wrap("set endpoint state", err)
	}
	moved, _ := res.RowsAffected()
	// A state change needs none of the endpoint's sealed values: one whose
	// values do not open changes state too, answered as a list shows it
	// (store.Listed: without them, named in Unreadable).
	e, err := store.Listed(s.getEndpoint(ctx, tx, p.ID))
	if err != nil {
		return store.Endpoint{}, 0, err
	}
	if err := tx.Commit(); err != nil {
		return store.Endpoint{}, 0, wrap("set endpoint state", err)
	}
	done() // the next chunks take the writer again
	switch {
	case p.State == store.EndpointEnabled && moved == releaseChunk:
		more, err := s.releaseRest(context.WithoutCancel(ctx), p.ID, now)
		moved += more
		if err != nil {
			// The resume is in force, but no claim meets a held delivery:
			// the rest is retried in the background (it stops by itself
			// once the endpoint is no longer enabled), not left held under
			// an enabled endpoint until another resume or the next start.
			id, relErr := p.ID, err
			s.inBackground(func(ctx context.Context) {
				s.retry(ctx, "release the held deliveries of resumed endpoint "+id, relErr, func(ctx context.Context) error {
					_, err := s.releaseRest(ctx, id, now)
					return err
				})
			})
			return e, int(moved), wrap("set endpoint state: release held deliveries", err)
		}
	case p.State != store.EndpointEnabled && moved == holdChunk:
		more, err := s.holdRest(context.WithoutCancel(ctx), p.ID, now)
		moved += more
		if err != nil {
			return e, int(moved), wrap("set endpoint state: hold pending deliveries", err)
		}
	}
	return e, int(moved), nil
}

// holdChunk is the most pending deliveries one transaction holds. A pause
// or a disable holds an endpoint's pending deliveries in id order, the
// first chunk with the state change, the rest one chunk per transaction
// behind waiting publishes (holdRest): holding 200,000 in one transaction
// held the single writer, and every tenant's publishes, for 3 s
// (docs/BENCHMARKS.md). The change is in force from its commit: a claim
// that meets a pending delivery not held yet holds it on its own
// transaction and leaves it out (loadClaims).
const holdChunk = releaseChunk

// deleteChunk is the most deliveries (with their attempts) one
// transaction of an endpoint's delete removes: the first chunk goes with
// the endpoint's row, the rest one chunk per transaction behind waiting
// publishes (deleteRest).
const deleteChunk = releaseChunk

// endpointState reads the state of endpoint id on tx; found is false when
// the endpoint does not exist (deleted).
func endpointState(ctx context.Context, tx *sql.Tx, id string) (state string, found bool, err error) {
	err = tx.QueryRowContext(ctx, "SELECT state FROM endpoints WHERE id = ?", id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return state, err == nil, err
}

// inChunks runs step in one queue transaction after another (behind
// waiting publish groups: writeGate), each committed, until a step moves
// fewer than chunk rows (0 to stop: step decided there is nothing left to
// do) or fails, and answers how many rows the steps moved. The test hook
// beforeChunk runs before each transaction, without the writer.
func (s *Store) inChunks(ctx context.Context, chunk int64, step func(tx *sql.Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		if s.beforeChunk != nil {
			s.beforeChunk()
		}
		n, err := func() (int64, error) {
			tx, done, err := s.queueTx(ctx)
			if err != nil {
				return 0, err
			}
			defer done()
			n, err := step(tx)
			if err != nil {
				return 0, err
			}
			return n, tx.Commit()
		}()
		total += n
		if err != nil || n < chunk {
			return total, err
		}
	}
}

// holdRest holds the pending deliveries of a paused or disabled endpoint
// left after the first chunk (holdChunk), one chunk per queue
// transaction, at now (µs), and stops when none is left or the endpoint
// is neither paused nor disabled any more (resumed, or deleted,
// meanwhile). Leased deliveries are skipped: their completion holds them.
// A crash between chunks leaves pending deliveries under a paused or
// disabled endpoint; the next start holds them (takeClaimLock), and a
// claim that meets one meanwhile holds it (loadClaims).
func (s *Store) holdRest(ctx context.Context, endpointID string, now int64) (int64, error) {
	return s.inChunks(ctx, holdChunk, func(tx *sql.Tx) (int64, error) {
		state, found, err := endpointState(ctx, tx, endpointID)
		if err != nil || !found || state == string(store.EndpointEnabled) {
			return 0, err
		}
		res, err := tx.ExecContext(ctx, holdDeliveriesSQL, now, endpointID, s.leases.ofEndpoint(endpointID, nil), holdChunk)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

// releaseChunk is the most held deliveries one transaction releases. A
// resume releases an endpoint's held deliveries in creation order (the
// endpoint index's id order, all due at the same instant), the first
// chunk with the state change, the rest one chunk per transaction behind
// waiting publishes (writeGate): releasing 20,000 in one transaction held
// the single writer for 0.6 s and more, and every publish with it.
const releaseChunk = store.DefaultFanOutChunk

// releaseDeliveriesSQL releases (?3) held deliveries of endpoint ?2, due
// at ?1, the oldest first.
const releaseDeliveriesSQL = `UPDATE deliveries SET state = 'pending', next_attempt_at = ?1, updated_at = ?1
	WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = ?2 AND state = 'paused' ORDER BY id LIMIT ?3)`

// releaseRest releases the held deliveries of an enabled endpoint left
// after the first chunk, one chunk per queue transaction, and stops when
// none is left or the endpoint is no longer enabled (paused again, or
// deleted, meanwhile). A crash between chunks leaves deliveries held
// under an enabled endpoint; the next start releases them
// (takeClaimLock).
func (s *Store) releaseRest(ctx context.Context, endpointID string, now int64) (int64, error) {
	return s.inChunks(ctx, releaseChunk, func(tx *sql.Tx) (int64, error) {
		state, found, err := endpointState(ctx, tx, endpointID)
		if err != nil || !found || state != string(store.EndpointEnabled) {
			return 0, err
		}
		res, err := tx.ExecContext(ctx, releaseDeliveriesSQL, now, endpointID, releaseChunk)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

// ReplayDeliveries implements store.Store. An endpoint's replay runs in
// chunks of replayChunk, each in id order within a state, the first in the
// transaction that checks the endpoint and the rest behind waiting
// publishes (writeGate), so replaying tens of thousands of dead letters
// does not hold the single writer (and every publish) for seconds. Every
// replayed delivery is due at p.Now, so they are claimed in creation
// order whatever the chunks. A delivery replayed by an earlier chunk is
// never taken again: a chunk starts after the last id of the one before,
// and only deliveries last changed at or before p.Now are taken.
func (s *Store) ReplayDeliveries(ctx context.Context, p store.ReplayParams) (int, error) {
	if (p.DeliveryID == "") == (p.EndpointID == "") {
		return 0, store.BadReplayTarget()
	}
	states := p.States
	if len(states) == 0 {
		states = []store.DeliveryState{store.DeliveryDead}
	}
	for _, st := range states {
		if st != store.DeliveryDead && st != store.DeliverySucceeded {
			return 0, store.NotReplayable(st)
		}
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return 0, wrap("replay", err)
	}
	defer done()
	var one int
	if p.DeliveryID != "" {
		err = tx.QueryRowContext(ctx, "SELECT 1 FROM deliveries WHERE id = ?"+liveEndpoint, p.DeliveryID).Scan(&one)
	} else {
		err = tx.QueryRowContext(ctx, "SELECT 1 FROM endpoints WHERE id = ?", p.EndpointID).Scan(&one)
	}
	if err != nil {
		return 0, wrap("replay", err)
	}
	if p.DeliveryID != "" {
		ph := make([]string, len(states))
		args := []any{micro(p.Now), p.DeliveryID}
		for i, st := range states {
			ph[i] = "?"
			args = append(args, string(st))
		}
		res, err := tx.ExecContext(ctx, numberPlaceholders(replaySet+"WHERE id = ? AND state IN ("+strings.Join(ph, ",")+")", 2), args...)
		if err != nil {
			return 0, wrap("replay", err)
		}
		n, _ := res.RowsAffected()
		return int(n), wrap("replay", tx.Commit())
	}
	// The endpoint's: state by state, chunk by chunk.
	var total int64
	for i, st := range states {
		after := ""
		for {
			var n int64
			var last string
			if i == 0 && after == "" {
				n, last, err = s.replayChunk(ctx, tx, p, st, after)
				if err == nil {
					err = tx.Commit()
				}
				done() // the next chunks take the writer again
			} else {
				if s.beforeChunk != nil {
					s.beforeChunk()
				}
				n, last, err = s.replayChunkTx(context.WithoutCancel(ctx), p, st, after)
			}
			total += n
			if err != nil {
				return int(total), wrap("replay", err)
			}
			if n < replayChunk {
				break
			}
			after = last
		}
	}
	return int(total), nil
}

// replayChunk is the most deliveries one transaction of an endpoint's
// replay moves (ReplayDeliveries).
const replayChunk = store.DefaultFanOutChunk

// replaySet is the SET clause of a replay: the delivery is due at ?1
// (pending, or held when its endpoint is not enabled), its attempts so far
// no longer count toward the schedule.
const replaySet = `UPDATE deliveries SET
		state = CASE WHEN (SELECT state FROM endpoints WHERE id = deliveries.endpoint_id) IS 'enabled' THEN 'pending' ELSE 'paused' END,
		next_attempt_at = ?1, updated_at = ?1, client_errors = 0, replay_base = attempts
		`

// replayChunkTx runs one chunk of an endpoint's replay in a queue
// transaction of its own.
func (s *Store) replayChunkTx(ctx context.Context, p store.ReplayParams, st store.DeliveryState, after string) (int64, string, error) {
	tx, done, err := s.queueTx(ctx)
	if err != nil {
		return 0, "", err
	}
	defer done()
	n, last, err := s.replayChunk(ctx, tx, p, st, after)
	if err != nil {
		return 0, "", err
	}
	return n, last, tx.Commit()
}

// replayChunk replays up to replayChunk of p.EndpointID's deliveries in
// state st with an id after after (the endpoint index's order), matching
// p's filters and last changed at or before p.Now; it returns how many it
// moved and the last id.
func (s *Store) replayChunk(ctx context.Context, tx *sql.Tx, p store.ReplayParams, st store.DeliveryState, after string) (int64, string, error) {
	where := []string{"endpoint_id = ?", "state = ?", "id > ?", "updated_at <= ?1"}
	args := []any{micro(p.Now), p.EndpointID, string(st), after}
	if !p.Since.IsZero() {
		where = append(where, "updated_at >= ?")
		args = append(args, micro(p.Since))
	}
	if !p.Until.IsZero() {
		where = append(where, "updated_at < ?")
		args = append(args, micro(p.Until))
	}
	if p.EventType != "" {
		where = append(where, "event_type = ?")
		args = append(args, p.EventType)
	}
	q := numberPlaceholders(replaySet+"WHERE id IN (SELECT id FROM deliveries WHERE "+strings.Join(where, " AND ")+
		" ORDER BY id LIMIT "+strconv.Itoa(replayChunk)+") RETURNING id", 2)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	var n int64
	var last string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return 0, "", err
		}
		n++
		last = max(last, id)
	}
	return n, last, rows.Err()
}

// numberPlaceholders rewrites each bare "?" as ?N, ?N+1, … so bare and
// numbered parameters can be mixed safely.
func numberPlaceholders(q string, from int) string {
	var b strings.Builder
	n := from
	for i := 0; i < len(q); i++ {
		if q[i] == '?' && (i+1 >= len(q) || q[i+1] < '0' || q[i+1] > '9') {
			fmt.Fprintf(&b, "?%d", n)
			n++
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// PostponeEndpointDeliveries implements store.Store.
func (s *Store) PostponeEndpointDeliveries(ctx context.Context, endpointID string, until time.Time) (int, error) {
	// A transaction holds the writer, so the leases (leases.go) do not
	// change between reading them and the update.
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return 0, wrap("postpone", err)
	}
	defer done()
	res, err := tx.ExecContext(ctx, `UPDATE deliveries SET next_attempt_at = ?1
		WHERE endpoint_id = ?2 AND state = 'pending' AND lease_owner IS NULL AND next_attempt_at < ?1
		  AND id NOT IN (SELECT value FROM json_each(?3))`, micro(until), endpointID, s.leases.ofEndpoint(endpointID, nil))
	if err != nil {
		return 0, wrap("postpone", err)
	}
	n, _ := res.RowsAffected()
	return int(n), wrap("postpone", tx.Commit())
}

// MoveEndpointDeliveries implements store.Store. With a limit the rows are
// read through deliveries_due (the window's rows), else through
// deliveries_endpoint (the endpoint's pending rows): on a backlog of
// 100,000 deliveries to one endpoint the latter held the writer 85–117 ms
// for a pull-in whose window held none (TestClaimUsesDueIndex checks the
// plan); the window's read is bounded too (moveScanPerRow).
func (s *Store) MoveEndpointDeliveries(ctx context.Context, p store.MoveParams) (int, error) {
	from := int64(math.MinInt64)
	if !p.DueFrom.IsZero() {
		from = micro(p.DueFrom)
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return 0, wrap("move", err)
	}
	defer done()
	q, args := MoveQuery, []any{micro(p.At), p.EndpointID, from, micro(p.DueTo), s.leases.ofEndpoint(p.EndpointID, nil), p.Unattempted}
	if p.Limit > 0 {
		q, args = MoveLimitQuery, append(args, p.Limit, p.Spacing.Microseconds(), p.Limit*moveScanPerRow)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, wrap("move", err)
	}
	n, _ := res.RowsAffected()
	return int(n), wrap("move", tx.Commit())
}

// MoveQuery and MoveLimitQuery move an endpoint's pending, unleased
// deliveries due from ?3 to ?4 to ?1 (MoveEndpointDeliveries): ?2 the
// endpoint, ?5 its leases in memory (JSON), ?6 only those not attempted
// since created or replayed, ?7 the limit, ?8 the spacing in microseconds
// and ?9 the most rows of the window read (MoveLimitQuery; exported for
// the query-plan tests).
const (
	MoveQuery = `UPDATE deliveries SET next_attempt_at = ?1
		WHERE endpoint_id = ?2 AND state = 'pending' AND lease_owner IS NULL AND next_attempt_at BETWEEN ?3 AND ?4
		  AND (?6 = 0 OR attempts = replay_base)
		  AND id NOT IN (SELECT value FROM json_each(?5))`
	MoveLimitQuery = `UPDATE deliveries SET next_attempt_at = min(next_attempt_at, ?1 + (m.n - 1) * ?8)
		FROM (SELECT id, row_number() OVER (ORDER BY next_attempt_at, id) AS n FROM (
			SELECT id, next_attempt_at FROM (
				SELECT id, next_attempt_at, endpoint_id, attempts, replay_base FROM deliveries INDEXED BY deliveries_due
				WHERE state = 'pending' AND lease_owner IS NULL AND next_attempt_at BETWEEN ?3 AND ?4
				ORDER BY next_attempt_at, id LIMIT ?9)
			WHERE endpoint_id = ?2 AND (?6 = 0 OR attempts = replay_base)
			  AND id NOT IN (SELECT value FROM json_each(?5))
			ORDER BY next_attempt_at, id LIMIT ?7)) AS m
		WHERE deliveries.id = m.id`
)

// moveScanPerRow bounds what a move with a limit reads of the window: at
// most moveScanPerRow × Limit due rows, of any endpoint. A window crowded
// with other endpoints' rows (200,000 due within it) cost 167 ms of the
// writer to move none; bounded, the endpoint's rows beyond the first
// 16,384 of the window keep their times (TestMoveWithLimitReadsABoundedWindow).
const moveScanPerRow = 16

// addNotice appends a notice of type typ to the outbox with a snapshot of
// the endpoint as it is in tx (call it after the change, or before a
// delete).
func addNotice(ctx context.Context, tx *sql.Tx, endpointID, typ string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
		SELECT id, tenant, url, kind, state, state_reason, ?, ? FROM endpoints WHERE id = ?`, typ, micro(now), endpointID)
	return err
}

// PendingNotices implements store.Store. LastStatusCode and LastError come
// from the attempt that started last among the endpoint's deliveries
// before the change: a delivery's own updated_at is no guide, since
// claims, pauses and replays move it without an attempt, and attempts
// after the change are not part of it (an endpoint.created has none).
func (s *Store) PendingNotices(ctx context.Context, limit int) ([]store.Notice, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, endpoint_id, tenant, url, kind, state, state_reason, type, created_at,
		delivery_id, event_id, event_type, attempts, last_status_code, last_error
		FROM notices ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, wrap("pending notices", err)
	}
	defer rows.Close()
	var out []store.Notice
	for rows.Next() {
		var (
			n     store.Notice
			at    int64
			state string
			kind  string
		)
		if err := rows.Scan(&n.ID, &n.Endpoint.ID, &n.Endpoint.Tenant, &n.Endpoint.URL, &kind, &state, &n.Endpoint.StateReason, &n.Type, &at,
			&n.DeliveryID, &n.EventID, &n.EventType, &n.Attempts, &n.LastStatusCode, &n.LastError); err != nil {
			return nil, wrap("pending notices", err)
		}
		n.Endpoint.Kind, n.Endpoint.State, n.At = kind, store.EndpointState(state), fromMicro(at)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("pending notices", err)
	}
	rows.Close()
	for i := range out {
		if out[i].DeliveryID != "" {
			out[i].EventID = store.PublicEventID(out[i].EventID)
			continue // the dead letter's own last attempt, recorded with it
		}
		if out[i].Type == store.NoticeEndpointDeleted {
			// None: a deleted endpoint's attempts go with it. While the
			// delete's chunks run, those of the deliveries not reached
			// yet would answer, or not, as housekeeping's read falls.
			continue
		}
		err := s.r.QueryRowContext(ctx, `SELECT a.status_code, a.error FROM deliveries d JOIN attempts a ON a.delivery_id = d.id
			WHERE d.endpoint_id = ? AND a.started_at <= ? ORDER BY a.started_at DESC, a.number DESC LIMIT 1`, out[i].Endpoint.ID, micro(out[i].At)).Scan(&out[i].LastStatusCode, &out[i].LastError)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, wrap("pending notices", err)
		}
	}
	return out, nil
}

// ClearNotices implements store.Store: one statement (the ids as a JSON
// array), one transaction.
func (s *Store) ClearNotices(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	arr, err := json.Marshal(ids)
	if err != nil {
		return wrap("clear notices", err)
	}
	_, err = s.execWrite(ctx, "DELETE FROM notices WHERE id IN (SELECT value FROM json_each(?))", string(arr))
	return wrap("clear notices", err)
}

// DeadLetterCounts implements store.Store; the endpoints that no longer
// exist are left out.
func (s *Store) DeadLetterCounts(ctx context.Context, tenant string, since time.Time) ([]store.DeadLetterCount, error) {
	// The dead rows only (the planner would otherwise walk every delivery in
	// deliveries_endpoint's order for the GROUP BY).
	q := "SELECT endpoint_id, tenant, COUNT(*) AS n FROM deliveries INDEXED BY deliveries_dead WHERE state = 'dead'"
	var args []any
	if tenant != "" {
		q += " AND tenant = ?"
		args = append(args, tenant)
	}
	if !since.IsZero() {
		q += " AND updated_at >= ?"
		args = append(args, micro(since))
	}
	// A deleted endpoint's dead letters that its delete has not reached
	// yet (DeleteEndpoint deletes them in chunks) are left out: one
	// lookup per endpoint counted, not per row.
	q = "SELECT endpoint_id, tenant, n FROM (" + q + ` GROUP BY endpoint_id, tenant) AS c
		WHERE EXISTS (SELECT 1 FROM endpoints WHERE endpoints.id = c.endpoint_id) ORDER BY n DESC, endpoint_id`
	rows, err := s.r.QueryContext(ctx, q, args...)
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

// ClaimSpikeAlert implements store.Store.
func (s *Store) ClaimSpikeAlert(ctx context.Context, endpointID string, windowStart, now time.Time) (bool, error) {
	res, err := s.execWrite(ctx, "UPDATE endpoints SET last_spike_at = ? WHERE id = ? AND last_spike_at <= ?", micro(now), endpointID, micro(windowStart))
	if err != nil {
		return false, wrap("spike alert", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	st := store.Stats{DeliveriesByState: map[store.DeliveryState]int{}, EndpointsByState: map[store.EndpointState]int{}}
	for _, q := range []struct {
		sql string
		put func(string, int)
	}{
		{deliveryStateCountsSQL, func(k string, n int) { st.DeliveriesByState[store.DeliveryState(k)] = n }},
		{"SELECT state, COUNT(*) FROM endpoints GROUP BY state", func(k string, n int) { st.EndpointsByState[store.EndpointState(k)] = n }},
	} {
		rows, err := s.r.QueryContext(ctx, q.sql)
		if err != nil {
			return st, wrap("stats", err)
		}
		for rows.Next() {
			var (
				k string
				n int
			)
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return st, wrap("stats", err)
			}
			q.put(k, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return st, wrap("stats", err)
		}
	}
	oldest, ok, err := s.firstUnleasedDue(s.r.QueryContext(ctx, NextDueQuery))
	if err != nil {
		return st, wrap("stats", err)
	}
	if ok {
		st.OldestDue = fromMicro(oldest)
	}
	return st, nil
}

// Purge implements store.Store. Each kind is deleted in one statement of at
// most Limit rows, so the writer is never held for long; each waits behind
// publish groups (writeGate).
func (s *Store) Purge(ctx context.Context, p store.PurgeParams) (int, error) {
	if p.Limit <= 0 {
		p.Limit = 500
	}
	total := 0
	for _, q := range []struct {
		sql   string
		bound time.Time
	}{
		{"DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE state = 'succeeded' AND updated_at < ? LIMIT ?)", p.SucceededBefore},
		{"DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE state = 'dead' AND updated_at < ? LIMIT ?)", p.DeadBefore},
		{"DELETE FROM events WHERE id IN (SELECT id FROM events e WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id) LIMIT ?)", p.EventsBefore},
		{"DELETE FROM endpoint_stats WHERE (endpoint_id, span, start) IN (SELECT endpoint_id, span, start FROM endpoint_stats WHERE span = 'm' AND start < ? LIMIT ?)", p.MinuteStatsBefore},
		{"DELETE FROM endpoint_stats WHERE (endpoint_id, span, start) IN (SELECT endpoint_id, span, start FROM endpoint_stats WHERE span = 'h' AND start < ? LIMIT ?)", p.HourStatsBefore},
		{"DELETE FROM api_keys WHERE hash IN (SELECT hash FROM api_keys WHERE kind = 'portal' AND (expires_at < ?1 OR revoked_at < ?1) LIMIT ?2)", p.PortalSessionsBefore},
	} {
		if q.bound.IsZero() {
			continue
		}
		// Behind waiting publishes, as every write (writeGate).
		res, err := s.execWrite(ctx, q.sql, micro(q.bound), p.Limit)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return total, err
			}
			return total, wrap("purge", err)
		}
		n, _ := res.RowsAffected()
		total += int(n)
	}
	return total, nil
}

// RotateSecret implements store.Store; the read and the write happen in one
// transaction, so concurrent rotations never lose a secret.
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

// changeSecrets replaces an endpoint's secrets with change(its secrets) in
// one transaction; with replaceUnreadable, secrets that do not open (and
// nothing else of the row) are taken for none
// (store.RotateSecretParams.ReplaceUnreadable).
func (s *Store) changeSecrets(ctx context.Context, op, id string, now time.Time, replaceUnreadable bool, change func([]store.Secret) ([]store.Secret, error)) (store.Endpoint, error) {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return store.Endpoint{}, wrap(op, err)
	}
	defer done()
	e, err := s.getEndpoint(ctx, tx, id)
	if err != nil && replaceUnreadable && store.OnlySecretsUnreadable(err) {
		e, err = store.Endpoint{ID: id}, nil // the old secrets: none
	}
	if err != nil {
		return store.Endpoint{}, err
	}
	if e.Secrets, err = change(e.Secrets); err != nil {
		return store.Endpoint{}, err
	}
	sec, err := store.EncodeSecrets(s.box, e.ID, e.Secrets)
	if err != nil {
		return store.Endpoint{}, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE endpoints SET secrets = ?, updated_at = ? WHERE id = ?", sec, micro(now), id); err != nil {
		return store.Endpoint{}, wrap(op, err)
	}
	s.endpointChanged()
	e, err = s.getEndpoint(ctx, tx, id)
	if err != nil {
		return store.Endpoint{}, err
	}
	return e, wrap(op, tx.Commit())
}

// EnsureMeta implements store.Store.
func (s *Store) EnsureMeta(ctx context.Context, key, value string) (string, error) {
	if err := s.acquireWriter(ctx); err != nil {
		return "", wrap("meta "+key, err)
	}
	defer s.gate.release()
	var stored string
	err := s.w.QueryRowContext(ctx, `INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = value RETURNING value`, key, value).Scan(&stored)
	return stored, wrap("meta "+key, err)
}
