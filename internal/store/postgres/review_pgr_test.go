package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// stoppedDeleteOf creates an endpoint of tenant with n deliveries (ids
// prefix + number, events evt_…, which must exist), starts its delete and
// stops the node after the first chunk, and makes the delete's mark stale:
// a delete for the lease rescue to finish.
func stoppedDeleteOf(t *testing.T, s *Store, tenant, prefix string, n int) store.Endpoint {
	t.Helper()
	ep := createEndpoint(t, s, newEndpoint(tenant))
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT $4 || lpad(i::text, 8, '0'), 'evt_' || lpad(i::text, 8, '0'), $2, $3, 't', CASE WHEN i % 2 = 0 THEN 'dead' ELSE 'pending' END, $1, $1, $1
		FROM generate_series(1, $5::integer) AS i`, base, ep.ID, tenant, prefix, n); err != nil {
		t.Fatal(err)
	}
	s.beforeChunk = func() { panic(nodeStopped{}) }
	stopped(t, func() {
		if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
			t.Error(err)
		}
	})
	s.beforeChunk = nil
	if _, err := s.pool.Exec(t.Context(), "UPDATE endpoint_deletions SET deleting_since = now() - interval '31 seconds' WHERE endpoint_id = $1", ep.ID); err != nil {
		t.Fatal(err)
	}
	return ep
}

// A lease rescue round whose sweep of a stale move fails (here a chunk of
// a disable's hold meets a row locked by a stuck session: the sweep's
// chunks wait at most sweepLockWait for a row, lowered here) still finishes the deletes whose node stopped: before,
// the round returned at the first error of finishReleases, and as long as
// that move kept failing no stopped delete ever finished (its deliveries
// left, dead and held ones for good: claims only meet pending ones).
func TestRescueFinishesDeletesWhenAMoveFails(t *testing.T) {
	t.Parallel()
	const tenant = "pgr-rescue-err-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	s2.sweepLockTimeout = "300ms"
	n := 2*moveChunk + 200
	ep := pendingEndpointOf(t, s, dbURL, tenant, n+1)
	if err := s.CompleteDeliveries(t.Context(), []store.Completion{goneCompletion(ep.ID)}); err != nil {
		t.Fatal(err)
	}
	if m := markOf(t, s, ep.ID); !m.marked {
		t.Fatalf("the disable left no stale hold: %+v", m)
	}
	// A stuck session holds a row the rescue's hold chunk must lock.
	conn := rawConn(t, dbURL)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM deliveries WHERE id = 'dlv_00000600' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	del := stoppedDeleteOf(t, s, "pgr-rescue-err-t2", "dlx_", 2*moveChunk+100)
	// Another stale move behind the failing one: a pause whose node
	// stopped before its first chunk's mark was renewed.
	paused := createEndpoint(t, s, newEndpoint("pgr-rescue-err-t3"))
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT 'dly_' || lpad(i::text, 8, '0'), 'evt_' || lpad(i::text, 8, '0'), $2, 'pgr-rescue-err-t3', 't', 'pending', $1, $1, $1
		FROM generate_series(1, 700) AS i`, base, paused.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `UPDATE endpoints SET state = 'paused', releasing_since = clock_timestamp() - interval '31 seconds',
		release_after = '', release_gen = release_gen + 1 WHERE id = $1`, paused.ID); err != nil {
		t.Fatal(err)
	}
	left, _ := countDeliveries(t, s, del.ID)
	if left == 0 {
		t.Fatal("the stopped delete left nothing")
	}
	_, err = s2.RescueExpiredLeases(t.Context(), base.Add(2*time.Second))
	if err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Logf("the round's error: %v (want the hold's lock timeout)", err)
	}
	if got := countStates(t, s, paused.ID); got[store.DeliveryPending] != 0 {
		t.Errorf("after a rescue round whose first move failed: the next stale move (a pause's hold) left %v, want every one held", got)
	}
	if got, marks := countDeliveries(t, s, del.ID); got != 0 || marks != 0 {
		t.Errorf("after a rescue round whose hold failed: the stopped delete has %d deliveries left (of %d), %d deletions; want none", got, left, marks)
	}
}

// A replay of a delivery of an endpoint whose delete is in progress (its
// node stopped between the chunks) answers not found, as once the delete
// is done (and as the other stores answer: their delete is one
// transaction): before, it answered 1 replayed and moved the dead
// delivery to held (its endpoint gone), to be deleted by the chunks.
func TestReplayOfADeliveryOfADeleteInProgress(t *testing.T) {
	t.Parallel()
	const tenant = "pgr-replay-del-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(t.Context(), `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || lpad(i::text, 8, '0'), $2, 't', $1, '{}', 'f', $1 FROM generate_series(1, 1100) AS i`, base, tenant); err != nil {
		t.Fatal(err)
	}
	ep := stoppedDeleteOf(t, s, tenant, "dlx_", 2*moveChunk+100)
	var id string
	if err := s.pool.QueryRow(t.Context(), "SELECT id FROM deliveries WHERE endpoint_id = $1 AND state = 'dead' ORDER BY id DESC LIMIT 1", ep.ID).Scan(&id); err != nil {
		t.Fatalf("no dead delivery left by the stopped delete: %v", err)
	}
	n, err := s.ReplayDeliveries(t.Context(), store.ReplayParams{DeliveryID: id, Now: base.Add(time.Minute)})
	if !errors.Is(err, store.ErrNotFound) {
		var state string
		_ = s.pool.QueryRow(t.Context(), "SELECT state FROM deliveries WHERE id = $1", id).Scan(&state)
		t.Errorf("replay of %s (its endpoint deleted, the delete in progress): %d replayed, error %v, the delivery now %s; want not found", id, n, err, state)
	}
}

// A stopped delete whose chunk fails (a row a stuck session holds) does
// not stop the lease rescue from finishing the other stopped deletes:
// before, the rescue took only the oldest stale delete, and as long as
// its chunk failed (its mark staying the oldest) no other was finished.
func TestRescueFinishesOtherDeletesWhenOneFails(t *testing.T) {
	t.Parallel()
	const tenant = "pgr-del-err-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	s2.sweepLockTimeout = "300ms"
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(t.Context(), `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || lpad(i::text, 8, '0'), $2, 't', $1, '{}', 'f', $1 FROM generate_series(1, 1100) AS i`, base, tenant); err != nil {
		t.Fatal(err)
	}
	stuck := stoppedDeleteOf(t, s, tenant, "dlx_", 2*moveChunk+100)
	other := stoppedDeleteOf(t, s, tenant+"2", "dly_", 2*moveChunk+100)
	if _, err := s.pool.Exec(t.Context(), "UPDATE endpoint_deletions SET deleting_since = deleting_since - interval '1 minute' WHERE endpoint_id = $1", stuck.ID); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM deliveries WHERE endpoint_id = $1 ORDER BY state, id LIMIT 1 FOR UPDATE", stuck.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err = s2.RescueExpiredLeases(t.Context(), base.Add(time.Minute))
		t.Logf("the round's error: %v", err)
	}
	if got, marks := countDeliveries(t, s, other.ID); got != 0 || marks != 0 {
		t.Errorf("after two rescue rounds, the delete behind the failing one has %d deliveries left, %d deletions; want none", got, marks)
	}
}

// A claim's delete of the deliveries it took whose endpoint is gone
// (deleteOrphansSQL) locks them in id order, as a delete's chunk locks
// them: before, it locked them in the order of the index it read
// (deliveries_leased: lease end, then the rows' places in the table, which
// updates shuffle), so with two orphans placed against their id order it
// held the later one while waiting for the earlier one, which a chunk of
// the endpoint's delete held while it went on to the later one: a
// deadlock (one of the two aborted after deadlock_timeout, the delete's
// chunk failing the API's DELETE or the rescue's round).
func TestOrphanDeleteLocksInIDOrder(t *testing.T) {
	leasedPairLocksInIDOrder(t, "pgr-orphan-order-t", "o", "orphans' delete", true, func(ctx context.Context, s *Store, ids []string, until time.Time) error {
		_, err := s.pool.Exec(ctx, deleteOrphansSQL, ids, "w", until)
		return err
	}, "SELECT count(*) FROM deliveries WHERE endpoint_id = $1", "orphans left after their delete")
}

// The dead-letter counts (GET /v1/dead-letters/counts, the spike monitor)
// leave out the deliveries of a delete in progress, as the delivery lists
// do: before, the deleted endpoint was counted (its dead deliveries the
// chunks had not reached) until the delete was done.
func TestDeadLetterCountsLeaveOutADeleteInProgress(t *testing.T) {
	t.Parallel()
	const tenant = "pgr-dlc-del-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(t.Context(), `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || lpad(i::text, 8, '0'), $2, 't', $1, '{}', 'f', $1 FROM generate_series(1, 1100) AS i`, base, tenant); err != nil {
		t.Fatal(err)
	}
	ep := stoppedDeleteOf(t, s, tenant, "dlx_", 2*moveChunk+100)
	cs, err := s.DeadLetterCounts(t.Context(), tenant, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.EndpointID == ep.ID {
			t.Errorf("dead-letter counts of tenant %s: %d of the deleted endpoint %s", tenant, c.Count, ep.ID)
		}
	}
}

// An open circuit's postponement of an endpoint's backlog
// (PostponeEndpointDeliveries, no tenant lock) does not hold one of the
// endpoint's pending rows while waiting for another that a disable's
// chunk holds: the chunk (a completion's disable, the rescue's hold, a
// pause's) locks them in id order, and the postponement read them in the
// table's order (a walk of the table, or a bitmap of deliveries_due): with
// two rows placed against their id order, the chunk holding the earlier
// and going on to the later, the two deadlocked (one aborted after
// deadlock_timeout: the completion batch, every completion in it, or the
// postponement). The circuit opens and the failure streak disables in the
// same outage, on the same backlog.
func TestPostponeDoesNotHoldARowAgainstADisablesChunk(t *testing.T) {
	holdsNoRowAgainstAChunk(t, "pgr-postpone-order-t", "postponement", func(ctx context.Context, s *Store, epID string) error {
		_, err := s.PostponeEndpointDeliveries(ctx, epID, base.Add(time.Hour))
		return err
	})
}

// holdsNoRowAgainstAChunk checks that run (what, for the messages), a
// statement over an endpoint's whole pending backlog (100,000 deliveries,
// of tenant), does not hold one of its rows while it waits for another
// that a chunk holds, the chunk going on in id order: one of the first rows
// in id order is moved to the table's end, the chunk holds it, and then
// must be able to take the next one (NOWAIT) while run waits.
func holdsNoRowAgainstAChunk(t *testing.T, tenant, what string, run func(ctx context.Context, s *Store, epID string) error) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ctx := t.Context()
	// A backlog as a failing endpoint has (the planner walks the table, or
	// reads deliveries_due into a bitmap: the table's order), one of its
	// first rows (in id order) updated since, so placed at the table's end.
	ep := pendingEndpointOf(t, s, dbURL, tenant, 100000)
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(ctx, "UPDATE deliveries SET updated_at = updated_at + interval '1 second' WHERE id = 'dlv_00000002'"); err != nil {
		t.Fatal(err)
	}
	var before bool
	if err := conn.QueryRow(ctx, "SELECT (SELECT ctid FROM deliveries WHERE id = 'dlv_00000002') > (SELECT ctid FROM deliveries WHERE id = 'dlv_00000003')").Scan(&before); err != nil || !before {
		t.Fatalf("dlv_00000002 is not placed after dlv_00000003 (%v): the test needs them against their id order", err)
	}
	chunk := rawConn(t, dbURL)
	var pid uint32
	if err := chunk.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := chunk.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The chunk's first row, in id order.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = 'dlv_00000002' FOR NO KEY UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, s, ep.ID) }()
	finished := false
	for range 500 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		if finished {
			break
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break // run waits for the chunk's row
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The chunk goes on to its next row.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = 'dlv_00000003' FOR NO KEY UPDATE NOWAIT"); err != nil {
		t.Errorf("the chunk's next row (in id order) is held by the %s waiting for the chunk's first: %v", what, err)
	}
	tx.Rollback(ctx)
	if !finished {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A claim's give-back of the leases it took but cannot use (their
// endpoint's values do not open on this node; releaseClaimSQL, also on a
// failed claim) locks the rows in id order, as the chunks of a disable's
// hold lock them: a chunk that waited for the claim keeps the row it
// re-checked and left (leased meanwhile), goes on in id order, and met the
// give-back holding a later row while waiting for that one (a plain
// UPDATE locks in the order of deliveries_leased: the lease end, then the
// rows' places in the table): a deadlock.
func TestGiveBackLocksInIDOrder(t *testing.T) {
	leasedPairLocksInIDOrder(t, "pgr-giveback-order-t", "g", "give-back", false, func(ctx context.Context, s *Store, ids []string, until time.Time) error {
		return s.giveBack(ctx, ids, "w", until)
	}, "SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND lease_owner IS NOT NULL", "deliveries still leased after the give-back")
}

// leasedPairLocksInIDOrder gives an endpoint of tenant two deliveries
// leased by "w", dlv_<p>2 first in the table and dlv_<p>1 (the endpoint's
// row deleted when orphaned), locks dlv_<p>1 on another connection (a
// delete's or a hold's chunk), runs run on both (what naming it), waits
// until run waits for that row, and checks that dlv_<p>2, the chunk's
// next row in id order, is free (run holding it would be a deadlock);
// once the first row is free, count (of the endpoint's id) must find
// none: left says what it counts.
func leasedPairLocksInIDOrder(t *testing.T, tenant, p, what string, orphaned bool, run func(ctx context.Context, s *Store, ids []string, until time.Time) error, count, left string) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint(tenant))
	conn := rawConn(t, dbURL)
	evt, first, second := "evt_"+p+"1", "dlv_"+p+"1", "dlv_"+p+"2"
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		VALUES ($3, $2, 't', $1, '{}', 'f', $1)`, base, tenant, evt); err != nil {
		t.Fatal(err)
	}
	until := base.Add(time.Minute)
	// The later id first in the table.
	for _, id := range []string{second, first} {
		if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, lease_owner, lease_until, created_at, updated_at)
			VALUES ($1, $6, $2, $3, 't', 'pending', $4, 'w', $5, $4, $4)`, id, ep.ID, tenant, base, until, evt); err != nil {
			t.Fatal(err)
		}
	}
	if orphaned {
		if _, err := conn.Exec(ctx, "DELETE FROM endpoints WHERE id = $1", ep.ID); err != nil {
			t.Fatal(err)
		}
	}
	// The chunk (another connection) holds the earlier one.
	chunk := rawConn(t, dbURL)
	var pid uint32
	if err := chunk.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := chunk.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE", first); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, s, []string{first, second}, until) }()
	waitBlockedBy(t, s, pid, "the "+what+" never waited for the chunk's row")
	// The chunk goes on to the later one: free unless run took it out of
	// order.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE NOWAIT", second); err != nil {
		t.Errorf("the chunk's next row (in id order) is held by the %s waiting for the chunk's first: %v", what, err)
	}
	tx.Rollback(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, count, ep.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d %s, want none", n, left)
	}
}

// The same for a move of an endpoint's backlog without a limit
// (MoveEndpointDeliveries: the half-open circuit's probe holds the
// endpoint's due backlog, hand-backs), a plain UPDATE before.
func TestMoveDoesNotHoldARowAgainstADisablesChunk(t *testing.T) {
	holdsNoRowAgainstAChunk(t, "pgr-move-order-t", "move", func(ctx context.Context, s *Store, epID string) error {
		_, err := s.MoveEndpointDeliveries(ctx, store.MoveParams{EndpointID: epID, DueTo: base.Add(time.Minute), At: base.Add(time.Hour)})
		return err
	})
}
