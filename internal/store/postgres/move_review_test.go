package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// nodeStopped is the panic that stands for a node stopping between a
// release's chunks.
type nodeStopped struct{}

// A release whose node stopped between its chunks is finished by a lease
// rescue; its deliveries come out as the resume would have released them:
// due at the resume, before deliveries published after the resume
// (creation order, as TestResumeAfterFailuresReleasesInCreationOrder), not
// due at the rescue's time, after every delivery published meanwhile.
func TestRescuedReleaseKeepsTheResumeDueTime(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := heldEndpointOf(t, s, dbURL, "due-t", 2*moveChunk+200)
	resumeAt := base.Add(time.Minute)
	s.beforeChunk = func() { panic(nodeStopped{}) }
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(nodeStopped); !ok {
					panic(r)
				}
			}
		}()
		if _, _, err := s.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: resumeAt}); err != nil {
			t.Fatal(err)
		}
		t.Fatal("the resume did not stop after its first chunk")
	}()
	s.beforeChunk = nil
	// The node is gone for more than staleRelease.
	if _, err := s.pool.Exec(t.Context(), "UPDATE endpoints SET releasing_since = now() - interval '1 minute' WHERE id = $1", ep.ID); err != nil {
		t.Fatal(err)
	}
	// A delivery published after the resume.
	later := publish(t, s, newEvent("due-t"), base.Add(2*time.Minute))
	_ = later
	if _, err := s.RescueExpiredLeases(t.Context(), base.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 0 {
		t.Fatalf("deliveries by state %v after the rescue, want none held", got)
	}
	var lateDue []time.Time
	rows, err := s.pool.Query(t.Context(), "SELECT DISTINCT next_attempt_at FROM deliveries WHERE endpoint_id = $1 AND id LIKE 'dlv_0000%' AND next_attempt_at <> $2 ORDER BY 1", ep.ID, resumeAt)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		lateDue = append(lateDue, at.UTC())
	}
	rows.Close()
	if len(lateDue) > 0 {
		t.Errorf("held deliveries released by the rescue are due at %v, want the resume's %v", lateDue, resumeAt)
	}
	// Claim in due order: the 1,200 held before the resume come before
	// the delivery published after it.
	cs, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w", Limit: 2*moveChunk + 201, Lease: time.Minute, Now: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.Delivery.EventID == later.Event.ID && i != len(cs)-1 {
			t.Errorf("the delivery published after the resume is claimed %dth of %d, before %d deliveries held before the resume", i+1, len(cs), len(cs)-1-i)
		}
	}
}

// The lease rescue finishes stopped releases after its own work, in the
// same round and under the same deadline, so it never waits for a
// tenant's lock: a stopped release of a tenant whose lock is held
// exclusively (a DeleteEndpoint of a large endpoint, a state change queued
// behind a long PublishTx) would make every round wait out its deadline
// and fail, for every tenant, and, the oldest mark being picked again each
// round, no other stopped release would ever be finished.
func TestStoppedReleaseOfALockedTenantDoesNotHoldUpTheRescue(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	stuck := createEndpoint(t, s, newEndpoint("locked-t"))
	other := createEndpoint(t, s, newEndpoint("beta-t"))
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || i, CASE WHEN i <= 10 THEN 'locked-t' ELSE 'beta-t' END, 't', $1, '{}', 'f', $1 FROM generate_series(1, 21) AS i`, base); err != nil {
		t.Fatal(err)
	}
	// 10 held of each endpoint, both enabled since, acme's release stopped
	// first; and one delivery of beta whose lease expired.
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at, lease_owner, lease_until)
		SELECT 'dlv_' || i, 'evt_' || i, CASE WHEN i <= 10 THEN $2 ELSE $3 END, CASE WHEN i <= 10 THEN 'locked-t' ELSE 'beta-t' END, 't',
		       CASE WHEN i = 21 THEN 'pending' ELSE 'paused' END, $1, $1, $1,
		       CASE WHEN i = 21 THEN 'gone-node' END, CASE WHEN i = 21 THEN $1::timestamptz END
		FROM generate_series(1, 21) AS i`, base, stuck.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE endpoints SET state = 'enabled',
		releasing_since = CASE WHEN id = $1 THEN now() - interval '5 minutes' ELSE now() - interval '1 minute' END, release_due_at = $3
		WHERE id IN ($1, $2)`, stuck.ID, other.ID, base); err != nil {
		t.Fatal(err)
	}
	// acme's lock, held exclusively meanwhile.
	locker := rawConn(t, dbURL)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::integer, hashtext('locked-t'))", tenantLockClass); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		start := time.Now()
		n, err := s.RescueExpiredLeases(rctx, base.Add(time.Hour))
		cancel()
		if err != nil || time.Since(start) > time.Second {
			t.Errorf("rescue round %d: rescued %d, error %v, after %v; want beta's lease rescued without waiting for acme's lock", round, n, err, time.Since(start).Round(time.Millisecond))
		}
	}
	if got := countStates(t, s, other.ID); got[store.DeliveryPaused] != 0 {
		t.Errorf("beta's stopped release after two rescue rounds: %v, want it finished", got)
	}
}

// A release's mark is written when its statement runs, on the server's
// clock: a resume whose state change waited for the tenant's exclusive
// lock (behind a long PublishTx, a delete of a large endpoint) must not
// commit a mark as old as its wait, or another node's lease rescue would
// take the live release for a stopped one. With now() (the transaction's
// start) a wait longer than staleRelease did exactly that.
func TestReleaseMarkWrittenAfterTheLockWait(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := heldEndpointOf(t, s, dbURL, "mark-t", 2*moveChunk+200)
	ctx := t.Context()
	locker := rawConn(t, dbURL)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1::integer, hashtext('mark-t'))", tenantLockClass); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var mark *time.Time
	s.beforeChunk = func() {
		if mark == nil {
			if err := s.pool.QueryRow(ctx, "SELECT releasing_since FROM endpoints WHERE id = $1", ep.ID).Scan(&mark); err != nil {
				t.Error(err)
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(time.Minute)})
		done <- err
	}()
	waitBlockedBy(t, s, pid, "nothing ever waited for the lock")
	var released time.Time
	if err := tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&released); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if mark == nil || mark.Before(released) {
		t.Errorf("the release's mark after its first chunk: %v, want no earlier than the end of its lock wait, %v", mark, released)
	}
}

// waitBlockedBy waits until a session of s waits for a lock that backend
// pid holds (about 5 s at most; failure is the test's message then).
func waitBlockedBy[P int | uint32](t *testing.T, s *Store, pid P, failure string) {
	t.Helper()
	for range 500 {
		var n int
		if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))", int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal(failure)
}
