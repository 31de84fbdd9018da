package postgres

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// countDeliveries counts endpoint id's deliveries and its deletions in
// progress (endpoint_deletions).
func countDeliveries(t *testing.T, s *Store, id string) (deliveries, deletions int) {
	t.Helper()
	if err := s.pool.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM deliveries WHERE endpoint_id = $1), (SELECT count(*) FROM endpoint_deletions WHERE endpoint_id = $1)", id).
		Scan(&deliveries, &deletions); err != nil {
		t.Fatal(err)
	}
	return deliveries, deletions
}

// A delete of an endpoint with a large backlog deletes its row and one
// chunk under the tenant's exclusive lock, the rest in chunks after: the
// tenant's publishes commit between them (before, one statement deleted
// them all under the exclusive lock).
func TestDeleteEndpointInChunksLetsTheTenantPublish(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-del-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := pendingEndpointOf(t, s, dbURL, tenant, 2*moveChunk+200)
	other := createEndpoint(t, s, newEndpoint(tenant))
	var chunks, published, amid int
	s.beforeChunk = func() {
		chunks++
		if n, _ := countDeliveries(t, s, ep.ID); n > 0 {
			amid++ // the delete is still running: deliveries left
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		res, err := s.PublishEvent(ctx, store.PublishParams{Event: newEvent(tenant), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }})
		if err != nil {
			t.Errorf("a publish of the tenant between the delete's chunks: %v", err)
		}
		published += res.Deliveries
	}
	if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
		t.Fatal(err)
	}
	if amid < 2 {
		t.Errorf("%d chunks after the first with deliveries left, want at least 2", amid)
	}
	if n, d := countDeliveries(t, s, ep.ID); n != 0 || d != 0 {
		t.Errorf("after the delete: %d deliveries, %d deletions in progress; want none", n, d)
	}
	if published != chunks {
		t.Errorf("the publishes between the chunks made %d deliveries, want %d (one each, to the other endpoint)", published, chunks)
	}
	if n, _ := countDeliveries(t, s, other.ID); n != chunks {
		t.Errorf("the other endpoint has %d deliveries, want %d", n, chunks)
	}
}

// A delete whose node stopped between its chunks is finished by a lease
// rescue, of any node, once its mark is stale; a claim meanwhile of a
// delivery left finds no endpoint: no attempt, the delivery deleted.
func TestRescueFinishesAStoppedDeleteAndClaimsDropOrphans(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-delstop-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	n := 2*moveChunk + 200
	ep := pendingEndpointOf(t, s, dbURL, tenant, n)
	s.beforeChunk = func() { panic(nodeStopped{}) }
	stopped(t, func() {
		if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
			t.Error(err)
		}
	})
	s.beforeChunk = nil
	left, marks := countDeliveries(t, s, ep.ID)
	if left != n-moveChunk || marks != 1 {
		t.Fatalf("after a delete stopped after its first chunk: %d deliveries, %d deletions; want %d and 1", left, marks, n-moveChunk)
	}
	cs, err := s2.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w2", Limit: 10, Lease: time.Minute, Now: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Errorf("claimed %d deliveries of the deleted endpoint (endpoint %q), want none", len(cs), cs[0].Endpoint.ID)
	}
	if got, _ := countDeliveries(t, s, ep.ID); got != left-10 {
		t.Errorf("after the claim: %d deliveries, want %d (the 10 claimed deleted)", got, left-10)
	}
	// A fresh mark is its node's: the rescue leaves it.
	if _, err := s2.RescueExpiredLeases(t.Context(), base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := countDeliveries(t, s, ep.ID); got != left-10 {
		t.Errorf("a rescue with the delete's mark fresh: %d deliveries, want %d", got, left-10)
	}
	if _, err := s.pool.Exec(t.Context(), "UPDATE endpoint_deletions SET deleting_since = now() - interval '31 seconds'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.RescueExpiredLeases(t.Context(), base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, marks := countDeliveries(t, s, ep.ID); got != 0 || marks != 0 {
		t.Errorf("after the rescue: %d deliveries, %d deletions; want none", got, marks)
	}
}

// A delivery leased before the delete whose completion moves it behind
// the chunks' cursor (pending to dead: deliveries_endpoint's order is
// state, id) is deleted all the same: the delete starts over from the
// first and ends on a chunk from the first that finds fewer than a chunk.
func TestDeleteLeavesNoDeliveryMovedBehindItsCursor(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-delcur-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	n := 2*moveChunk + 200
	ep := pendingEndpointOf(t, s, dbURL, tenant, n)
	// Two leased deliveries in the last chunk (in id order): one is
	// dead-lettered, the other put back, between the chunks.
	if _, err := s.pool.Exec(t.Context(), `UPDATE deliveries SET lease_owner = CASE WHEN id IN ('dlv_00001100', 'dlv_00001101') THEN 'w' END,
		lease_until = CASE WHEN id IN ('dlv_00001100', 'dlv_00001101') THEN $1::timestamptz END WHERE endpoint_id = $2`, base.Add(time.Minute), ep.ID); err != nil {
		t.Fatal(err)
	}
	calls := 0
	s.beforeChunk = func() {
		calls++
		if calls != 2 {
			return
		}
		// The cursor is at (pending, dlv_00001000): one dead-lettered, one
		// deferred (held: its endpoint is gone), both now behind it.
		c := store.Completion{DeliveryID: "dlv_00001100", EndpointID: ep.ID, Owner: "w", LeaseUntil: base.Add(time.Minute),
			State: store.DeliveryDead, Attempt: store.Attempt{StartedAt: base, StatusCode: 500}, Now: base}
		d := store.Completion{DeliveryID: "dlv_00001101", EndpointID: ep.ID, Owner: "w", LeaseUntil: base.Add(time.Minute), Deferred: true, NextAttemptAt: base, Now: base}
		if err := s.CompleteDeliveries(t.Context(), []store.Completion{c, d}); err != nil {
			t.Error(err)
		}
		var states []string
		if err := s.pool.QueryRow(t.Context(), "SELECT array_agg(state ORDER BY id) FROM deliveries WHERE id IN ('dlv_00001100', 'dlv_00001101')").Scan(&states); err != nil {
			t.Error(err)
		}
		if len(states) != 2 || states[0] != "dead" || states[1] != "paused" {
			t.Errorf("the two leased deliveries after their completions: %v, want [dead paused]", states)
		}
	}
	if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
		t.Fatal(err)
	}
	if got, marks := countDeliveries(t, s, ep.ID); got != 0 || marks != 0 {
		t.Errorf("after the delete: %d deliveries, %d deletions; want none", got, marks)
	}
}

// A delete's chunk reads the endpoint's deliveries through
// deliveries_endpoint from its cursor (the row comparison in the index
// condition: a chunk starting from the endpoint's first entry would walk
// the dead entries of every chunk before it), and locks and deletes them
// by primary key, in a custom plan and in the generic plan.
func TestDeleteChunkUsesTheEndpointIndex(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("pgc-delplan-t"))
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || i, 'pgc-delplan-t', 't', $1, '{}', 'f', $1 FROM generate_series(1, 40000) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT 'dlv_' || i, 'evt_' || i, CASE WHEN i % 4 = 0 THEN $2 ELSE 'ep_other_' || i % 4 END, 'pgc-delplan-t', 't',
			CASE WHEN i <= 5000 THEN 'succeeded' WHEN i <= 30000 THEN 'pending' ELSE 'paused' END, $1, $1, $1
		FROM generate_series(1, 40000) AS i`, base, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "PREPARE del AS "+deleteChunkSQL); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for _, after := range [][2]string{{"", ""}, {"pending", "dlv_20000"}} {
			plan := explainPlan(t, conn, "EXPLAIN ", executeStatement(t, "del", []any{ep.ID, after[0], after[1], moveChunk}))
			if !strings.Contains(plan, "deliveries_endpoint") || strings.Contains(plan, "Seq Scan on deliveries") ||
				strings.Contains(plan, "deliveries_paused") || strings.Contains(plan, "deliveries_due") {
				t.Errorf("chunk after %q, %s: the plan does not read deliveries_endpoint alone:\n%s", after, mode, plan)
			}
			if !regexp.MustCompile(`Index Cond: \(.*ROW\(state, id\) > ROW\(`).MatchString(plan) {
				t.Errorf("chunk after %q, %s: the cursor is not in the index condition:\n%s", after, mode, plan)
			}
			del := plan[strings.Index(plan, "CTE d"):]
			if !strings.Contains(del, "deliveries_pkey") || strings.Contains(del, "Seq Scan") {
				t.Errorf("chunk after %q, %s: the DELETE does not find its rows by primary key:\n%s", after, mode, plan)
			}
		}
	}
}

// While a delete's chunks have not reached them, the deleted endpoint's
// deliveries are not in the tenant's or the event's lists.
func TestListsLeaveOutTheDeliveriesOfADeleteInProgress(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-dellist-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := pendingEndpointOf(t, s, dbURL, tenant, 2*moveChunk+200)
	s.beforeChunk = func() { panic(nodeStopped{}) }
	stopped(t, func() {
		if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
			t.Error(err)
		}
	})
	s.beforeChunk = nil
	if n, _ := countDeliveries(t, s, ep.ID); n == 0 {
		t.Fatal("the stopped delete left no delivery")
	}
	for _, p := range []store.ListDeliveriesParams{{Tenant: tenant}, {EventID: "evt_00001100"}, {Tenant: tenant, State: store.DeliveryPending}} {
		pg, err := s.ListDeliveries(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Data) != 0 {
			t.Errorf("ListDeliveries(%+v): %d deliveries of the deleted endpoint, e.g. %s", p, len(pg.Data), pg.Data[0].ID)
		}
	}
}

// A delete between two chunks of a resume (another node): the resume's
// next chunk finds no endpoint and stops, and the delete leaves nothing.
func TestDeleteBetweenAResumesChunks(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-delres-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	ep := heldEndpointOf(t, s, dbURL, tenant, 3*moveChunk+200)
	calls := 0
	s.beforeChunk = func() {
		if calls++; calls == 1 {
			if err := s2.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
				t.Error(err)
			}
		}
	}
	if _, _, err := s.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("%d chunks of the resume after the first, want 1 (stopped: the endpoint is gone)", calls)
	}
	if n, d := countDeliveries(t, s, ep.ID); n != 0 || d != 0 {
		t.Errorf("after the delete: %d deliveries, %d deletions; want none", n, d)
	}
}

// A publish of the tenant that read the endpoint before the delete (its
// transaction open, holding the tenant's lock shared) commits first: the
// delete, waiting for the lock, deletes its delivery too.
func TestDeleteWaitsForAPublishThatReadTheEndpoint(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-delpub-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := pendingEndpointOf(t, s, dbURL, tenant, 2*moveChunk+200)
	ctx := t.Context()
	conn := rawConn(t, dbURL)
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := PublishTx(ctx, tx, store.PublishParams{Event: newEvent(tenant), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: ep.ID, Now: base}) }()
	waitBlockedBy(t, s, pid, "the delete never waited for the publish")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, d := countDeliveries(t, s, ep.ID); n != 0 || d != 0 {
		t.Errorf("after the delete: %d deliveries, %d deletions; want none (the publish's too)", n, d)
	}
}

// While a delete whose node stopped is left to the rescue, its deliveries
// are not found by id (GET /v1/deliveries/{id}, their attempts), as the
// lists, the replays and the dead-letter counts leave them out, and as
// SQLite answers: the endpoint they would go to is gone.
func TestDeliveriesOfADeleteInProgressAreNotFound(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-delget-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	n := moveChunk + 100
	ep := pendingEndpointOf(t, s, dbURL, tenant, n)
	s.beforeChunk = func() { panic(nodeStopped{}) }
	stopped(t, func() {
		if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
			t.Error(err)
		}
	})
	s.beforeChunk = nil
	var left string
	if err := s.pool.QueryRow(t.Context(), "SELECT max(id) FROM deliveries WHERE endpoint_id = $1", ep.ID).Scan(&left); err != nil || left == "" {
		t.Fatalf("no delivery left after a stopped delete: %q, %v", left, err)
	}
	_, err := s.GetDelivery(t.Context(), left)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetDelivery of a leftover: %v; want not found", err)
	}
	_, err = s.ListAttempts(t.Context(), left)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListAttempts of a leftover: %v; want not found", err)
	}
}

// An endpoint.deleted notice read while the delete's chunks run carries
// no last attempt (docs/operations.md: a deleted endpoint's attempts go
// with it, so 0 and ""), as it does once they are done: before, the
// outbox read looked the last attempt up among the deliveries the chunks
// had not reached yet, and the same delete's notice said 503 or 0
// depending on when housekeeping read it.
func TestDeletedNoticeAmidChunksHasNoLastAttempt(t *testing.T) {
	t.Parallel()
	const tenant = "pgc-delnotice-t"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := pendingEndpointOf(t, s, dbURL, tenant, 2*moveChunk+200)
	if _, err := s.pool.Exec(t.Context(), "INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code) VALUES ('dlv_00000900', 1, $1, 1000, 503)", base); err != nil {
		t.Fatal(err)
	}
	checked := false
	s.beforeChunk = func() {
		if checked {
			return
		}
		checked = true
		if n, _ := countDeliveries(t, s, ep.ID); n == 0 {
			t.Fatal("no delivery left between the delete's chunks")
		}
		ns, err := s.PendingNotices(t.Context(), 10)
		if err != nil || len(ns) != 1 || ns[0].Type != store.NoticeEndpointDeleted {
			t.Fatalf("PendingNotices = %+v, %v; want the endpoint.deleted", ns, err)
		}
		if ns[0].LastStatusCode != 0 || ns[0].LastError != "" {
			t.Errorf("endpoint.deleted amid the delete's chunks: last status %d, error %q; want 0 and none", ns[0].LastStatusCode, ns[0].LastError)
		}
	}
	if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Notice: true, Now: base.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the delete ran no chunk after its first")
	}
}
