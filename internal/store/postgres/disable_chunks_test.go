package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// pendingEndpointOf is an enabled endpoint of tenant with n pending
// deliveries (dlv_00000001 … in id order), the first leased by "w" until a
// minute after base.
func pendingEndpointOf(t *testing.T, s *Store, dbURL, tenant string, n int) store.Endpoint {
	t.Helper()
	ep := createEndpoint(t, s, newEndpoint(tenant))
	seedDeliveries(t, rawConn(t, dbURL), ep.ID, n, seedShape{tenant: tenant, state: "'pending'", due: "$1", leased: "i = 1", updated: "$1"})
	return ep
}

// goneCompletion is the completion of dlv_00000001 (leased by "w") with a
// 410 Gone that disables endpoint ep at base + 1 s.
func goneCompletion(ep string) store.Completion {
	return store.Completion{DeliveryID: "dlv_00000001", EndpointID: ep, Owner: "w", LeaseUntil: base.Add(time.Minute),
		State: store.DeliveryDead, Attempt: store.Attempt{StartedAt: base, StatusCode: 410},
		DisableEndpoint: true, DisableReason: "gone", Now: base.Add(time.Second)}
}

// releaseMark is an endpoint's move mark: whether releasing_since is
// set, release_after and release_due_at, and release_gen.
type releaseMark struct {
	marked bool
	after  *string
	due    *time.Time
	gen    int64
}

func markOf(t *testing.T, s *Store, id string) releaseMark {
	t.Helper()
	var m releaseMark
	if err := s.pool.QueryRow(t.Context(), "SELECT releasing_since IS NOT NULL, release_after, release_due_at, release_gen FROM endpoints WHERE id = $1", id).
		Scan(&m.marked, &m.after, &m.due, &m.gen); err != nil {
		t.Fatal(err)
	}
	return m
}

// A 410 that disables an endpoint with a large backlog holds one chunk in
// the completion batch (under the tenant's exclusive lock), not the whole
// backlog; the rest is left marked for the lease rescue, whose chunks run
// under the shared lock: the tenant's publishes commit between them.
func TestGoneDisableHoldsOneChunkAndTheRescueTheRest(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-gone-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	n := 2*moveChunk + 200
	ep := pendingEndpointOf(t, s, dbURL, tenant, n+1)
	before := markOf(t, s, ep.ID)
	if err := s.CompleteDeliveries(t.Context(), []store.Completion{goneCompletion(ep.ID)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetEndpoint(t.Context(), ep.ID); got.State != store.EndpointDisabled {
		t.Fatalf("endpoint %s after the 410, want disabled", got.State)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != moveChunk || got[store.DeliveryPending] != n-moveChunk {
		t.Errorf("after the completion: %v, want %d held (one chunk) and %d pending", got, moveChunk, n-moveChunk)
	}
	m := markOf(t, s, ep.ID)
	if want := fmt.Sprintf("dlv_%08d", moveChunk+1); !m.marked || m.after == nil || *m.after != want || m.gen != before.gen+1 || m.due != nil {
		t.Errorf("the disable's mark: %+v, want marked after %s, generation %d, no due time", m, want, before.gen+1)
	}
	// The rescue finishes the hold; between its chunks, a publish of the
	// tenant commits (the tenant's lock is not held exclusively).
	var published atomic.Int32
	s.beforeChunk = func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: newEvent(tenant), Now: base.Add(2 * time.Second), NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			t.Errorf("a publish of the tenant between the hold's chunks: %v", err)
		}
		published.Add(1)
	}
	if _, err := s.RescueExpiredLeases(t.Context(), base.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if published.Load() == 0 {
		t.Error("no chunk ran after the disable")
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPending] != 0 || got[store.DeliveryPaused] != n+int(published.Load()) {
		t.Errorf("after the rescue: %v, want every one held (the %d and the %d published)", got, n, published.Load())
	}
	if m := markOf(t, s, ep.ID); m.marked || m.after != nil {
		t.Errorf("the mark after the hold: %+v, want cleared", m)
	}
}

// A disable by a completion (a 410, or the failure streak) ends the move
// an earlier state change left marked: a release whose node stopped is not
// resumed by the rescue over a disabled endpoint, its mark and cursor do
// not stay on it, and its generation is over (a chunk still running stops).
func TestCompletionDisableClearsAnEarlierMove(t *testing.T) {
	t.Parallel()
	for _, streak := range []bool{false, true} {
		t.Run(fmt.Sprintf("streak=%v", streak), func(t *testing.T) {
			t.Parallel()
			tenant := fmt.Sprintf("pgc-clear-%v", streak)
			dbURL := newSchema(t)
			s := openStore(t, dbURL)
			ep := pendingEndpointOf(t, s, dbURL, tenant, 3)
			// A release whose node stopped: mark, cursor and due time.
			if _, err := s.pool.Exec(t.Context(), `UPDATE endpoints SET releasing_since = now() - interval '31 seconds', release_after = 'dlv_00000002',
				release_due_at = $2, release_gen = 7, failing_since = $3, failure_count = 10 WHERE id = $1`, ep.ID, base, base.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			c := goneCompletion(ep.ID)
			if streak {
				c.DisableEndpoint, c.DisableReason, c.Attempt.StatusCode = false, "", 503
				c.DisableAfter, c.DisableMinFailures = time.Minute, 1
			}
			if err := s.CompleteDeliveries(t.Context(), []store.Completion{c}); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.GetEndpoint(t.Context(), ep.ID); got.State != store.EndpointDisabled {
				t.Fatalf("endpoint %s after the completion, want disabled", got.State)
			}
			if m := markOf(t, s, ep.ID); m.marked || m.after != nil || m.due != nil || m.gen != 8 {
				t.Errorf("the mark after the disable: %+v, want none, generation 8", m)
			}
			if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 2 || got[store.DeliveryDead] != 1 {
				t.Errorf("deliveries %v, want 2 held and the completed one dead", got)
			}
		})
	}
}

// A completion's disable reads the endpoint's pending deliveries (its one
// chunk, and the probes that say whether more are left) through
// deliveries_endpoint, in a custom plan and in the generic plan: not by
// walking the due indexes, which hold every endpoint's pending rows.
func TestCompletionDisableUsesTheEndpointIndex(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("pgc-displan-t"))
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || i, 'pgc-displan-t', 't', $1, '{}', 'f', $1 FROM generate_series(1, 40000) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT 'dlv_' || i, 'evt_' || i, CASE WHEN i % 4 = 0 THEN $2 ELSE 'ep_other_' || i % 4 END, 'pgc-displan-t', 't',
			CASE WHEN i <= 5000 THEN 'succeeded' ELSE 'pending' END, $1, $1, $1
		FROM generate_series(1, 40000) AS i`, base, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "PREPARE gone AS "+goneQuery); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		plan := explainPlan(t, conn, "EXPLAIN ", executeStatement(t, "gone", []any{ep.ID, "dlv_4", "gone", base, "pending"}))
		if strings.Contains(plan, "deliveries_due") || strings.Contains(plan, "Seq Scan on deliveries") || !strings.Contains(plan, "deliveries_endpoint") {
			t.Errorf("%s: the disable does not read the endpoint's deliveries through deliveries_endpoint alone:\n%s", mode, plan)
		}
	}
}

// A resume after a 410, before the rescue finished the disable's hold:
// the resume releases what the disable held, and the rescue does not hold
// the rest over the enabled endpoint (the hold's generation is over).
func TestResumeBeforeTheRescueEndsTheDisablesHold(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-gone-res-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	n := 2*moveChunk + 200
	ep := pendingEndpointOf(t, s, dbURL, tenant, n+1)
	if err := s.CompleteDeliveries(t.Context(), []store.Completion{goneCompletion(ep.ID)}); err != nil {
		t.Fatal(err)
	}
	_, released, err := s.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if released != moveChunk {
		t.Errorf("the resume released %d, want the %d the disable held", released, moveChunk)
	}
	if _, err := s.RescueExpiredLeases(t.Context(), base.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPending] != n || got[store.DeliveryPaused] != 0 {
		t.Errorf("after the resume and a rescue: %v, want all %d pending", got, n)
	}
	if m := markOf(t, s, ep.ID); m.marked {
		t.Errorf("the mark after the resume: %+v, want cleared", m)
	}
}

// A pause between two chunks of the rescue's hold of a disable, whose
// node stops after the pause's first chunk: the disable's hold stops (its
// generation is over: the pause's move is the endpoint's), and the pause's
// hold, once its mark is stale, is finished by a rescue.
func TestPauseBetweenTheChunksOfADisablesHold(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-gone-pause-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	n := 4*moveChunk + 200
	ep := pendingEndpointOf(t, s, dbURL, tenant, n+1)
	if err := s.CompleteDeliveries(t.Context(), []store.Completion{goneCompletion(ep.ID)}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	s2.beforeChunk = func() { panic(nodeStopped{}) }
	s.beforeChunk = func() {
		if calls++; calls == 1 {
			stopped(t, func() {
				if _, _, err := s2.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(time.Minute)}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if _, err := s.RescueExpiredLeases(t.Context(), base.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("the rescue ran %d chunks of the disable's hold, want 1 (then stopped: paused since)", calls)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPending] == 0 {
		t.Errorf("after the pause's first chunk: %v, want some left pending (the pause's node stopped)", got)
	}
	s.beforeChunk = nil
	if _, err := s.pool.Exec(t.Context(), "UPDATE endpoints SET releasing_since = now() - interval '31 seconds' WHERE id = $1", ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RescueExpiredLeases(t.Context(), base.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPending] != 0 || got[store.DeliveryPaused] != n {
		t.Errorf("after the rescue of the pause's hold: %v, want all %d held", got, n)
	}
	if m := markOf(t, s, ep.ID); m.marked {
		t.Errorf("the mark after the pause's hold: %+v, want cleared", m)
	}
}

// The disable's chunk re-checks its rows after waiting for their locks: a
// delivery a claim leased while the completion waited for it is left to
// its lease (held when it completes), not held under it.
func TestGoneDisableChunkLeavesARowLeasedDuringItsWait(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-gone-wait-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := pendingEndpointOf(t, s, dbURL, tenant, 10)
	ctx := t.Context()
	conn := rawConn(t, dbURL)
	claim, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Rollback(ctx) //nolint:errcheck
	var pid int
	if err := claim.QueryRow(ctx, "SELECT pg_backend_pid() FROM deliveries WHERE id = 'dlv_00000002' FOR NO KEY UPDATE").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.CompleteDeliveries(ctx, []store.Completion{goneCompletion(ep.ID)}) }()
	waitBlockedBy(t, s, pid, "the disable never waited for the locked row")
	if _, err := claim.Exec(ctx, "UPDATE deliveries SET lease_owner = 'w2', lease_until = $1 WHERE id = 'dlv_00000002'", base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := claim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var (
		state string
		owner *string
	)
	if err := s.pool.QueryRow(ctx, "SELECT state, lease_owner FROM deliveries WHERE id = 'dlv_00000002'").Scan(&state, &owner); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || owner == nil || *owner != "w2" {
		t.Errorf("the delivery leased during the wait: %s, leased by %v; want pending under its lease", state, owner)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 8 {
		t.Errorf("deliveries %v, want the 8 others held", got)
	}
}
