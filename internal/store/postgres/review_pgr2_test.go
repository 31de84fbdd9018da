package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// stuckSweepShape seeds, for tenant prefix p: n endpoints (ids p-stuck-k)
// each with one pending delivery, and one endpoint p-ok with three; it
// answers the stuck endpoints' ids.
func seedSweepEndpoints(t *testing.T, s *Store, p string, n int, withRows bool) []string {
	t.Helper()
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT $2 || '-evt-' || i, $2, 't', $1, '{}', 'f', $1 FROM generate_series(0, $3::integer + 3) AS i`, base, p, n); err != nil {
		t.Fatal(err)
	}
	var stuck []string
	for k := 0; k <= n; k++ {
		id, rows := fmt.Sprintf("%s-stuck-%d", p, k), 1
		if k == n {
			id, rows = p+"-ok", 3
		} else {
			stuck = append(stuck, id)
		}
		if withRows {
			e := newEndpoint(fmt.Sprintf("%s-t%d", p, k))
			e.ID = id
			createEndpoint(t, s, e)
		}
		if _, err := s.pool.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
			SELECT $2 || '-dlv-' || i, $4 || '-evt-' || ($5::integer + i), $2, $3, 't', 'pending', $1, $1, $1 FROM generate_series(1, $6::integer) AS i`,
			base, id, fmt.Sprintf("%s-t%d", p, k), p, k, rows); err != nil {
			t.Fatal(err)
		}
	}
	return stuck
}

// A lease rescue round whose sweep meets stale moves that keep failing (a
// chunk waiting out sweepLockWait on a row a stuck session holds) still
// reaches the other stale moves: before, a failed move kept its mark (the
// oldest), so it came first in every round, and the round read only the
// 8 oldest: with 8 failing moves no other move was ever finished (and 6
// of them, 5 s each, spent the whole 30 s of the engine's round, leaving
// no time for the stopped deletes).
func TestRescueSweepDoesNotStarveBehindFailingMoves(t *testing.T) {
	t.Parallel()
	const p = "pgr2-starve-mv"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL)
	s2.sweepLockTimeout = "100ms"
	stuck := seedSweepEndpoints(t, s, p, 8, true)
	ctx := t.Context()
	// Every endpoint paused by a node that stopped before its hold's first
	// chunk: the stuck ones older.
	if _, err := s.pool.Exec(ctx, `UPDATE endpoints SET state = 'paused', release_after = '', release_gen = release_gen + 1,
		releasing_since = clock_timestamp() - interval '5 minutes' + (CASE WHEN id = $1 THEN 60 ELSE right(id, 1)::integer END) * interval '1 second'
		WHERE id LIKE $2`, p+"-ok", p+"-%"); err != nil {
		t.Fatal(err)
	}
	tx, err := rawConn(t, dbURL).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE endpoint_id = ANY ($1) FOR UPDATE", stuck); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		_, err := s2.RescueExpiredLeases(ctx, base.Add(time.Minute))
		t.Logf("round %d: %v", i, err)
	}
	if got := countStates(t, s, p+"-ok"); got["pending"] != 0 {
		t.Errorf("after 6 rescue rounds, the stale move behind 8 failing ones left %v; want every delivery held", got)
	}
}

// As TestRescueSweepDoesNotStarveBehindFailingMoves, for the stopped
// deletes: the round read the 4 oldest, and a failed one kept its mark:
// with 4 failing deletes no other stopped delete was ever finished.
func TestRescueSweepDoesNotStarveBehindFailingDeletes(t *testing.T) {
	t.Parallel()
	const p = "pgr2-starve-del"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL)
	s2.sweepLockTimeout = "100ms"
	stuck := seedSweepEndpoints(t, s, p, 4, false) // no endpoint rows: deleted
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `INSERT INTO endpoint_deletions (endpoint_id, deleting_since)
		SELECT endpoint_id, clock_timestamp() - interval '5 minutes' + (CASE WHEN endpoint_id = $1 THEN 60 ELSE right(endpoint_id, 1)::integer END) * interval '1 second'
		FROM (SELECT DISTINCT endpoint_id FROM deliveries WHERE endpoint_id LIKE $2) AS e`, p+"-ok", p+"-%"); err != nil {
		t.Fatal(err)
	}
	tx, err := rawConn(t, dbURL).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE endpoint_id = ANY ($1) FOR UPDATE", stuck); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		_, err := s2.RescueExpiredLeases(ctx, base.Add(time.Minute))
		t.Logf("round %d: %v", i, err)
	}
	if got, marks := countDeliveries(t, s, p+"-ok"); got != 0 || marks != 0 {
		t.Errorf("after 6 rescue rounds, the stopped delete behind 4 failing ones has %d deliveries left, %d deletions; want none", got, marks)
	}
}

// The dead-lettering of a claim's poisoned deliveries locks their rows in
// id order, as a delete's chunks (deleteChunkSQL) and completions lock
// them: before, its UPDATE ... FROM unnest locked them in the claim's
// order (due time), and held a later row while waiting for an earlier one
// that an id-ordered writer held on its way to the later: a deadlock (here
// the writer is a second connection locking the two rows in id order, as
// the chunk of a delete of their endpoint does; the dead-lettering was the
// one aborted, "deadlock detected").
func TestDeadLetterPoisonedLocksInIDOrder(t *testing.T) {
	t.Parallel()
	const tenant = "pgr2-poison-order-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint(tenant))
	until := base.Add(time.Hour)
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		VALUES ('evt_p1', $2, 't', $1, '{}', 'f', $1), ('evt_p2', $2, 't', $1, '{}', 'f', $1)`, base, tenant); err != nil {
		t.Fatal(err)
	}
	// b first in the table and in the claim's order.
	if _, err := s.pool.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at, lease_owner, lease_until)
		VALUES ('dlv_pb', 'evt_p1', $2, $3, 't', 'pending', $1, $1, $1, 'w', $4), ('dlv_pa', 'evt_p2', $2, $3, 't', 'pending', $1, $1, $1, 'w', $4)`,
		base, ep.ID, tenant, until); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, dbURL)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM deliveries WHERE id = 'dlv_pa' FOR UPDATE").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.deadLetterPoisoned(ctx, []store.PoisonedDelivery{
			{ID: "dlv_pb", EventID: "evt_p1", EndpointID: ep.ID, Tenant: tenant, Err: errors.New("bad headers")},
			{ID: "dlv_pa", EventID: "evt_p2", EndpointID: ep.ID, Tenant: tenant, Err: errors.New("bad headers")},
		}, "w", until, base.Add(time.Minute))
	}()
	waitBlockedBy(t, s, pid, "nothing ever waited for the lock")
	// The id-ordered writer goes on to the later row.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = 'dlv_pb' FOR UPDATE"); err != nil {
		t.Fatalf("the id-ordered writer's lock of the later row: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("dead-letter the poisoned deliveries: %v", err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryDead] != 2 {
		t.Errorf("deliveries %v, want both dead", got)
	}
}

// Retention's purge of finished deliveries locks their rows in id order,
// as a delete's chunks (deleteChunkSQL) lock them: before, its DELETE
// found them by primary key through a bitmap, locking them in the
// table's order, and held a later row while waiting for an earlier one
// that an id-ordered writer held on its way to the later: a deadlock
// (here a second connection locking the two rows in id order, as the
// chunk of a delete of their endpoint does, which deletes its old dead
// letters as the purge does; the purge was the one aborted).
func TestPurgeLocksInIDOrder(t *testing.T) {
	locksTwoDeadLettersInIDOrder(t, "pgr2-purge-order-t", "q", "purge", func(ctx context.Context, s *Store, _ string) (int, error) {
		return s.Purge(ctx, store.PurgeParams{DeadBefore: base.Add(time.Hour), Limit: 500})
	})
}

// A replay locks the rows it replays in id order, as retention's purge
// and a delete's chunks lock them: before, its UPDATE locked them in its
// plan's order (here the table's), and could hold a later row while
// waiting for an earlier one that an id-ordered writer held on its way to
// the later (retention's purge of old dead letters, the very rows a
// replay of an endpoint's dead letters moves): a deadlock.
func TestReplayLocksInIDOrder(t *testing.T) {
	locksTwoDeadLettersInIDOrder(t, "pgr2-replay-order-t", "r", "replay", func(ctx context.Context, s *Store, epID string) (int, error) {
		return s.ReplayDeliveries(ctx, store.ReplayParams{EndpointID: epID, Now: base.Add(time.Minute)})
	})
}

// locksTwoDeadLettersInIDOrder gives an endpoint of tenant two dead
// letters, dlv_<p>b first in the table and dlv_<p>a, locks dlv_<p>a on a
// second connection, runs run (which must lock both, what naming it),
// waits until run waits for that row, then locks dlv_<p>b as an
// id-ordered writer would: run must not hold it (a deadlock otherwise)
// and, once the first row is free, must answer 2.
func locksTwoDeadLettersInIDOrder(t *testing.T, tenant, p, what string, run func(ctx context.Context, s *Store, epID string) (int, error)) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint(tenant))
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		VALUES ('evt_'||$3||'1', $2, 't', $1, '{}', 'f', $1), ('evt_'||$3||'2', $2, 't', $1, '{}', 'f', $1)`, base, tenant, p); err != nil {
		t.Fatal(err)
	}
	// b first in the table.
	if _, err := s.pool.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		VALUES ('dlv_'||$4||'b', 'evt_'||$4||'1', $2, $3, 't', 'dead', $1, $1, $1), ('dlv_'||$4||'a', 'evt_'||$4||'2', $2, $3, 't', 'dead', $1, $1, $1)`,
		base, ep.ID, tenant, p); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, dbURL)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM deliveries WHERE id = 'dlv_'||$1||'a' FOR UPDATE", p).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := run(ctx, s, ep.ID)
		done <- result{n, err}
	}()
	waitBlockedBy(t, s, pid, "nothing ever waited for the lock")
	if _, err := tx.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = 'dlv_'||$1||'b' FOR UPDATE", p); err != nil {
		t.Fatalf("the id-ordered writer's lock of the later row: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 2 {
		t.Fatalf("%s: %d, %v; want 2", what, r.n, r.err)
	}
}
