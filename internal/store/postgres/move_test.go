package postgres

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// heldEndpoint is a paused endpoint of tenant acme with n held deliveries.
func heldEndpoint(t *testing.T, s *Store, dbURL string, n int) store.Endpoint {
	t.Helper()
	return heldEndpointOf(t, s, dbURL, "acme", n)
}

// heldEndpointOf is heldEndpoint of tenant. Tests that take a tenant's
// lock without waiting (the rescue's sweep) or hold it exclusively use a
// tenant of their own: the advisory locks are the database's, shared by
// the parallel tests' schemas.
func heldEndpointOf(t *testing.T, s *Store, dbURL, tenant string, n int) store.Endpoint {
	t.Helper()
	ep := createEndpoint(t, s, newEndpoint(tenant))
	if _, _, err := s.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base}); err != nil {
		t.Fatal(err)
	}
	seedDeliveries(t, rawConn(t, dbURL), ep.ID, n, seedShape{tenant: tenant, state: "'paused'", due: "$1", leased: "false", updated: "$1"})
	return ep
}

func countStates(t *testing.T, s *Store, epID string) map[store.DeliveryState]int {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), "SELECT state, count(*) FROM deliveries WHERE endpoint_id = $1 GROUP BY state", epID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[store.DeliveryState]int{}
	for rows.Next() {
		var (
			st string
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[store.DeliveryState(st)] = n
	}
	return out
}

// A resume releases an endpoint's held deliveries in chunks, and between
// them the tenant's publishes go on: before, one statement released them
// all under the tenant's exclusive lock, and every publish of the tenant
// waited for it (some 20 s per million deliveries).
func TestResumeLetsTheTenantPublishBetweenChunks(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := heldEndpoint(t, s, dbURL, 2*moveChunk+200)
	var chunks atomic.Int32
	s.beforeChunk = func() {
		chunks.Add(1)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		// The tenant lock is free: this publish does not wait for the
		// release to end (it would wait for ever: the release waits for it).
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: newEvent("acme"), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			t.Errorf("a publish of the tenant between the release's chunks: %v", err)
		}
	}
	_, moved, err := s.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2*moveChunk+200 {
		t.Errorf("released %d, want %d", moved, 2*moveChunk+200)
	}
	if n := chunks.Load(); n != 2 {
		t.Errorf("%d chunks after the first, want 2", n)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 0 || got[store.DeliveryPending] != 2*moveChunk+200+int(chunks.Load()) {
		t.Errorf("deliveries by state %v, want every one pending (the held and the %d published)", got, chunks.Load())
	}
	var mark *time.Time
	if err := s.pool.QueryRow(t.Context(), "SELECT releasing_since FROM endpoints WHERE id = $1", ep.ID).Scan(&mark); err != nil || mark != nil {
		t.Errorf("releasing_since = %v (%v) after the release, want NULL", mark, err)
	}
}

// A pause is in force from its change: a claim between the chunks that
// hold the endpoint's deliveries gets those not held yet with the
// endpoint as paused, so the engine puts them back without an attempt
// (TestClaimOfPausedEndpointNotAttempted) and their deferral holds them.
func TestPauseHoldsInChunksAndClaimsSeeItPaused(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("acme"))
	seedDeliveries(t, rawConn(t, dbURL), ep.ID, 2*moveChunk+200, seedShape{state: "'pending'", due: "$1", leased: "false", updated: "$1"})
	var claimed []store.Claim
	s.beforeChunk = func() {
		if claimed != nil {
			return
		}
		cs, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Now: base.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		claimed = cs
	}
	_, moved, err := s.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 10 {
		t.Fatalf("claimed %d between the chunks, want 10 of those not held yet", len(claimed))
	}
	if moved != 2*moveChunk+200-10 {
		t.Errorf("held %d, want %d (all but the 10 leased)", moved, 2*moveChunk+200-10)
	}
	var cs []store.Completion
	for _, c := range claimed {
		if c.Endpoint.State != store.EndpointPaused {
			t.Errorf("claim of %s: endpoint %s, want paused", c.Delivery.ID, c.Endpoint.State)
		}
		cs = append(cs, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: ep.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil,
			Deferred: true, NextAttemptAt: base.Add(time.Hour), Now: base.Add(time.Hour)})
	}
	if err := s.CompleteDeliveries(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 2*moveChunk+200 || len(got) != 1 {
		t.Errorf("deliveries by state %v, want every one held", got)
	}
}

// A chunk re-checks its rows after waiting for their locks: a delivery a
// claim leased while the pause waited for it is left to its completion,
// not held under its lease. With the conditions only in the chunk's
// subquery, PostgreSQL would have written it anyway.
func TestPauseChunkLeavesARowLeasedDuringItsWait(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("acme"))
	conn := rawConn(t, dbURL)
	seedDeliveries(t, conn, ep.ID, 10, seedShape{state: "'pending'", due: "$1", leased: "false", updated: "$1"})
	ctx := t.Context()
	claim, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Rollback(ctx) //nolint:errcheck
	var pid int
	if err := claim.QueryRow(ctx, "SELECT pg_backend_pid() FROM deliveries WHERE id = 'dlv_00000001' FOR NO KEY UPDATE").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	type result struct {
		moved int
		err   error
	}
	done := make(chan result, 1)
	go func() {
		_, moved, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(time.Minute)})
		done <- result{moved, err}
	}()
	// Wait until the pause waits for the row's lock.
	waitBlockedBy(t, s, pid, "the pause never waited for the locked row")
	if _, err := claim.Exec(ctx, "UPDATE deliveries SET lease_owner = 'w', lease_until = $1 WHERE id = 'dlv_00000001'", base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := claim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.moved != 9 {
		t.Fatalf("SetEndpointState held %d (%v), want the 9 not leased", r.moved, r.err)
	}
	var state string
	var owner *string
	if err := s.pool.QueryRow(ctx, "SELECT state, lease_owner FROM deliveries WHERE id = 'dlv_00000001'").Scan(&state, &owner); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || owner == nil {
		t.Errorf("the delivery leased during the pause's wait: state %s, lease owner %v; want pending, still leased", state, owner)
	}
}

// A release whose node stopped between its chunks (its mark no longer
// renewed) is finished by a lease rescue, of any node; one in progress
// (a fresh mark) is left to its node.
func TestRescueFinishesAStoppedRelease(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	stopped := heldEndpointOf(t, s, dbURL, "sweep-t", 0)
	live := createEndpoint(t, s, newEndpoint("sweep-t"))
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	// The deliveries: 1,200 held of each endpoint, both enabled since.
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || i, 'sweep-t', 't', $1, '{}', 'f', $1 FROM generate_series(1, 2400) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT 'dlv_' || i, 'evt_' || i, CASE WHEN i <= 1200 THEN $2 ELSE $3 END, 'sweep-t', 't', 'paused', $1, $1, $1 FROM generate_series(1, 2400) AS i`,
		base, stopped.ID, live.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE endpoints SET state = 'enabled',
		releasing_since = CASE WHEN id = $1 THEN now() - interval '31 seconds' ELSE now() END, release_due_at = $3
		WHERE id IN ($1, $2)`, stopped.ID, live.ID, base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RescueExpiredLeases(ctx, base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, stopped.ID); got[store.DeliveryPending] != 1200 || len(got) != 1 {
		t.Errorf("the stopped release's endpoint: %v, want its 1,200 released", got)
	}
	if got := countStates(t, s, live.ID); got[store.DeliveryPaused] != 1200 || len(got) != 1 {
		t.Errorf("the live release's endpoint: %v, want it left to its node", got)
	}
	var mark *time.Time
	if err := conn.QueryRow(ctx, "SELECT releasing_since FROM endpoints WHERE id = $1", stopped.ID).Scan(&mark); err != nil || mark != nil {
		t.Errorf("the stopped release's mark: %v (%v), want cleared", mark, err)
	}
}

// The chunks' statements read the endpoint's deliveries through
// deliveries_endpoint, from their cursor, in a custom plan and in the
// generic plan PostgreSQL turns to after five runs, whatever the share of
// the endpoint among the held or pending rows: not through
// deliveries_paused or the due indexes, whose walk (every endpoint's held
// or pending rows, filtered and sorted) a generic plan chose when an
// endpoint was a quarter of them, and which made a resume of 80,000
// deliveries during a drain take 20 to 80 s.
func TestMoveChunksUseTheEndpointIndex(t *testing.T) {
	t.Parallel()
	for _, shape := range []struct {
		name      string
		endpoints int    // ep is one of them
		state     string // of row i of 40,000
		moves     []string
	}{
		{"one endpoint in 30, most rows held", 30, "CASE WHEN i <= 5000 THEN 'succeeded' WHEN i <= 35000 THEN 'paused' ELSE 'pending' END", []string{"hold", "release"}},
		{"one endpoint in 4, every row held", 4, "'paused'", []string{"release"}},
		{"one endpoint in 4, every row pending", 4, "'pending'", []string{"hold"}},
	} {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			dbURL := newSchema(t)
			s := openStore(t, dbURL)
			ep := createEndpoint(t, s, newEndpoint("acme"))
			conn := rawConn(t, dbURL)
			ctx := t.Context()
			if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
				SELECT 'evt_' || i, 'acme', 't', $1, '{}', 'f', $1 FROM generate_series(1, 40000) AS i`, base); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
				SELECT 'dlv_' || i, 'evt_' || i, CASE WHEN i % $3 = 0 THEN $2 ELSE 'ep_other_' || i % $3 END, 'acme', 't', `+shape.state+`, $1, $1, $1
				FROM generate_series(1, 40000) AS i`, base, ep.ID, shape.endpoints); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries"); err != nil {
				t.Fatal(err)
			}
			for _, name := range shape.moves {
				q := map[string]string{"hold": holdChunkSQL, "release": releaseChunkSQL}[name]
				if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+q); err != nil {
					t.Fatal(err)
				}
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
						t.Fatal(err)
					}
					for _, after := range []string{"", "dlv_20000"} {
						plan := explainPlan(t, conn, "EXPLAIN ", executeStatement(t, name, moveChunkArgs(ep.ID, name == "release", base, after)))
						if !strings.Contains(plan, "deliveries_endpoint") || strings.Contains(plan, "Seq Scan on deliveries") ||
							strings.Contains(plan, "deliveries_paused") || strings.Contains(plan, "deliveries_due") {
							t.Errorf("%s chunk after %q, %s: the plan does not read deliveries_endpoint alone:\n%s", name, after, mode, plan)
						}
						// The UPDATE finds the chunk's rows by primary key,
						// not by reading the endpoint's rows again.
						update := plan[strings.Index(plan, "CTE u"):]
						update = update[:strings.Index(update, "InitPlan 4")]
						if !strings.Contains(update, "deliveries_pkey") || strings.Contains(update, "deliveries_endpoint") || strings.Contains(update, "Seq Scan") {
							t.Errorf("%s chunk after %q, %s: the UPDATE does not find its rows by primary key:\n%s", name, after, mode, plan)
						}
						// A chunk starts at its cursor in the index, not at
						// the endpoint's first id, past the stale entries of
						// the rows the chunks before it moved (their cost
						// would grow with the square of the move).
						if !regexp.MustCompile(`Index Cond: \(.*\(id > `).MatchString(plan) {
							t.Errorf("%s chunk after %q, %s: the cursor (id > $4) is not in the index condition:\n%s", name, after, mode, plan)
						}
					}
				}
			}
		})
	}
}
