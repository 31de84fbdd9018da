package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// backlogOf gives endpoint ep (of tenant ep) n pending deliveries of one
// event, written by SQL (as many publishes would), ids in creation order.
func backlogOf(t *testing.T, s *Store, ep string, n int, now time.Time) {
	t.Helper()
	ctx := context.Background()
	evt := "evt_" + ep
	if _, err := s.PublishEvent(ctx, store.PublishParams{
		Event: store.Event{ID: evt, Tenant: ep, Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: evt},
		Now:   now, NewDeliveryID: func() string { return "dlv_" + ep + "_00000000" }}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?1)
		INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT printf('dlv_%s_%08d', ?3, n), ?4, ?3, ?3, 't', 'pending', ?2, ?2, ?2 FROM i`, n-1, micro(now), ep, evt); err != nil {
		t.Fatal(err)
	}
}

// publishOf publishes one event of tenant (its endpoint's delivery with it).
func publishOf(s *Store, tenant string, now time.Time) error {
	id := store.NewID("evt")
	_, err := s.PublishEvent(context.Background(), store.PublishParams{
		Event: store.Event{ID: id, Tenant: tenant, Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
		Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") }})
	return err
}

// countStates counts the deliveries of endpoint ep by state.
func countStates(t *testing.T, s *Store, ep string) map[string]int {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "SELECT state, COUNT(*) FROM deliveries WHERE endpoint_id = ? GROUP BY state", ep)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	return out
}

// TestPauseYieldsTheWriterBetweenChunks: a pause of an endpoint with more
// pending deliveries than holdChunk holds them chunk by chunk, so a
// publish of another tenant commits between two chunks; every pending
// delivery is held once.
func TestPauseYieldsTheWriterBetweenChunks(t *testing.T) {
	for _, st := range []store.EndpointState{store.EndpointPaused, store.EndpointDisabled} {
		t.Run(string(st), func(t *testing.T) {
			ctx := context.Background()
			s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
			pending := 2*holdChunk + 3
			backlogOf(t, s, "ep_a", pending, now)
			var between int
			s.beforeChunk = func() {
				between++
				if err := publishOf(s, "ep_b", now); err != nil {
					t.Errorf("publish between two chunks of a pause: %v", err)
				}
			}
			_, n, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: st, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if n != pending || between != 2 {
				t.Errorf("held %d with %d publishes between chunks; want %d and 2 (chunks of %d)", n, between, pending, holdChunk)
			}
			if got := countStates(t, s, "ep_a"); got["paused"] != pending || got["pending"] != 0 {
				t.Errorf("after the pause: %v, want %d paused", got, pending)
			}
			if got := countStates(t, s, "ep_b"); got["pending"] != between {
				t.Errorf("ep_b: %v, want %d pending", got, between)
			}
		})
	}
}

// TestDisableByCompletionYieldsTheWriterBetweenChunks: a completion that
// disables its endpoint (a 410 Gone) holds the first chunk of the
// endpoint's pending deliveries in its batch's transaction and the rest
// one chunk per transaction after the commit, a publish of another tenant
// committing between two chunks.
func TestDisableByCompletionYieldsTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	pending := 2*holdChunk + 3
	backlogOf(t, s, "ep_a", pending, now)
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 1, Lease: time.Minute, Now: now})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d, %v", len(cs), err)
	}
	var between int
	s.beforeChunk = func() {
		between++
		if err := publishOf(s, "ep_b", now); err != nil {
			t.Errorf("publish between two chunks of a disable: %v", err)
		}
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: cs[0].Delivery.ID, EndpointID: "ep_a", Owner: "n",
		LeaseUntil: cs[0].Delivery.LeaseUntil, State: store.DeliveryDead, DisableEndpoint: true, DisableReason: "410 Gone",
		Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 410}, Now: now}}); err != nil {
		t.Fatal(err)
	}
	s.waitBackground() // the rest of the hold runs beside the completer
	if between != 2 {
		t.Errorf("publishes committed between chunks: %d, want 2", between)
	}
	if got := countStates(t, s, "ep_a"); got["paused"] != pending-1 || got["dead"] != 1 || got["pending"] != 0 {
		t.Errorf("after the disable: %v, want %d paused and 1 dead", got, pending-1)
	}
	ep, err := s.GetEndpoint(ctx, "ep_a")
	if err != nil || ep.State != store.EndpointDisabled {
		t.Errorf("endpoint after a 410: %v, %v", ep.State, err)
	}
}

// TestDeleteYieldsTheWriterBetweenChunks: a delete of an endpoint with more
// deliveries than deleteChunk deletes them (and their attempts) chunk by
// chunk, a publish of another tenant committing between two chunks; the
// endpoint is not found from the first commit, and its mark is gone at
// the end.
func TestDeleteYieldsTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	total := 2*deleteChunk + 3
	backlogOf(t, s, "ep_a", total, now)
	// All dead letters (a dead endpoint's), the last one with an attempt:
	// the last chunk deletes it.
	last := "dlv_ep_a_00001002"
	if _, err := s.w.ExecContext(ctx, `INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code) VALUES (?1, 1, 0, 1, 503);
		UPDATE deliveries SET state = 'dead' WHERE endpoint_id = 'ep_a'`, last); err != nil {
		t.Fatal(err)
	}
	var between int
	s.beforeChunk = func() {
		between++
		if err := publishOf(s, "ep_b", now); err != nil {
			t.Errorf("publish between two chunks of a delete: %v", err)
		}
		if _, err := s.GetEndpoint(ctx, "ep_a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("endpoint between two chunks of its delete: %v, want not found", err)
		}
		if _, err := s.GetDelivery(ctx, last); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a delivery of the deleted endpoint between two chunks: %v, want not found", err)
		}
		if _, err := s.ListAttempts(ctx, last); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("attempts of a delivery of the deleted endpoint between two chunks: %v, want not found", err)
		}
		counts, err := s.DeadLetterCounts(ctx, "", time.Time{})
		if err != nil || len(counts) != 0 {
			t.Errorf("dead-letter counts between two chunks of a delete: %v, %v; want none", counts, err)
		}
		// The delete's notice carries no last attempt (a deleted
		// endpoint's attempts go with it), whether housekeeping reads it
		// now or once the chunks are done: the lookup found the 503 of a
		// delivery not yet deleted.
		ns, err := s.PendingNotices(ctx, 10)
		if err != nil || len(ns) != 1 || ns[0].Type != store.NoticeEndpointDeleted || ns[0].LastStatusCode != 0 || ns[0].LastError != "" {
			t.Errorf("PendingNotices between two chunks of a delete: %+v, %v; want the endpoint.deleted, last status 0", ns, err)
		}
	}
	if err := s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_a", Notice: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	if between != 2 {
		t.Errorf("publishes committed between chunks: %d, want 2 (chunks of %d)", between, deleteChunk)
	}
	var left, attempts, marks int
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM deliveries WHERE endpoint_id = 'ep_a'), (SELECT COUNT(*) FROM attempts),
		(SELECT COUNT(*) FROM meta WHERE key GLOB 'deleting_endpoint:*')`).Scan(&left, &attempts, &marks); err != nil {
		t.Fatal(err)
	}
	if left != 0 || attempts != 0 || marks != 0 {
		t.Errorf("after the delete: %d deliveries, %d attempts, %d marks left; want none", left, attempts, marks)
	}
}

// TestChangesBetweenHoldChunks: a resume, a delete or a disable made while
// a pause's chunks are still running ends in the state it set: the chunks
// stop at an enabled or deleted endpoint, and go on at a disabled one.
func TestChangesBetweenHoldChunks(t *testing.T) {
	for _, then := range []string{"resume", "delete", "disable"} {
		t.Run(then, func(t *testing.T) {
			ctx := context.Background()
			s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
			pending := 3*holdChunk + 3
			backlogOf(t, s, "ep_a", pending, now)
			var changed bool
			s.beforeChunk = func() {
				if changed {
					return
				}
				changed = true
				var err error
				switch then {
				case "resume":
					_, _, err = s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointEnabled, Now: now.Add(time.Second)})
				case "delete":
					err = s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_a", Now: now.Add(time.Second)})
				default:
					_, _, err = s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointDisabled, Now: now.Add(time.Second)})
				}
				if err != nil {
					t.Errorf("%s between two chunks of a pause: %v", then, err)
				}
			}
			if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointPaused, Now: now}); err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Fatalf("the pause ran no chunk after its first: nothing came between")
			}
			got := countStates(t, s, "ep_a")
			var want map[string]int
			switch then {
			case "resume":
				want = map[string]int{"pending": pending}
			case "delete":
				want = map[string]int{}
			default:
				want = map[string]int{"paused": pending}
			}
			if len(got) != len(want) || got["pending"] != want["pending"] || got["paused"] != want["paused"] {
				t.Errorf("pause, then %s between its chunks: %v, want %v", then, got, want)
			}
		})
	}
}

// TestClaimBetweenHoldChunks: a claim between two chunks of a pause that
// meets deliveries the pause has not held yet holds them itself and
// leases none of them (no claim carries a paused endpoint); the pause
// ends with every delivery held once.
func TestClaimBetweenHoldChunks(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
	pending := 2*holdChunk + 3
	backlogOf(t, s, "ep_a", pending, now)
	// The claim lock taken (as by a running engine): the first claim's
	// start-up fix-up would hold them all.
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground()
	claimed := false
	s.beforeChunk = func() {
		if claimed {
			return
		}
		claimed = true
		before := countStates(t, s, "ep_a")["paused"]
		cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 10, Lease: time.Minute, Now: now.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 0 {
			t.Errorf("a claim between two chunks of a pause returned %d claims of the paused endpoint, want none", len(cs))
		}
		if after := countStates(t, s, "ep_a")["paused"]; after != before+10 {
			t.Errorf("a claim between two chunks of a pause: %d held before, %d after; want the 10 it met held", before, after)
		}
	}
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointPaused, Now: now}); err != nil {
		t.Fatal(err)
	}
	if !claimed {
		t.Fatalf("no claim between the chunks of the pause")
	}
	if got := countStates(t, s, "ep_a"); got["paused"] != pending || len(got) != 1 {
		t.Errorf("after the pause and the claim: %v, want %d paused", got, pending)
	}
}

// TestClaimDeletesDeliveriesOfDeletedEndpoint: a claim that meets a
// delivery whose endpoint is gone (its delete's chunks have not reached
// it) deletes it instead of leasing it with no endpoint.
func TestClaimDeletesDeliveriesOfDeletedEndpoint(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	backlogOf(t, s, "ep_a", 3, now)
	backlogOf(t, s, "ep_b", 2, now)
	if _, err := s.w.ExecContext(ctx, "DELETE FROM endpoints WHERE id = 'ep_a'"); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 10, Lease: time.Minute, Now: now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Endpoint.ID != "ep_b" {
			t.Errorf("claimed %s with endpoint %q", c.Delivery.ID, c.Endpoint.ID)
		}
	}
	if len(cs) != 2 {
		t.Errorf("claimed %d, want ep_b's 2", len(cs))
	}
	if got := countStates(t, s, "ep_a"); len(got) != 0 {
		t.Errorf("deliveries of the deleted endpoint after a claim: %v, want none", got)
	}
}

// TestStartFinishesInterruptedDeleteAndPause: a process that died between
// the chunks of a delete left the endpoint's mark and deliveries, and
// between the chunks of a pause pending deliveries under a paused
// endpoint; the next process deletes the ones and holds the others when it
// takes the claim lock.
func TestStartFinishesInterruptedDeleteAndPause(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"ep_a", "ep_b", "ep_c"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: id,
			URL: "https://example.com/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	backlogOf(t, s, "ep_a", 2*deleteChunk+3, now)
	backlogOf(t, s, "ep_b", 2*holdChunk+3, now)
	backlogOf(t, s, "ep_c", 2, now)
	// What a delete and a pause interrupted after their first chunk leave.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM endpoints WHERE id = 'ep_a';
		INSERT INTO meta (key, value) VALUES ('deleting_endpoint:ep_a', '');
		UPDATE endpoints SET state = 'paused' WHERE id = 'ep_b';
		UPDATE deliveries SET state = 'paused' WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = 'ep_b' ORDER BY id LIMIT 500)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The fix-ups run in the background once the claim lock is taken
	// (beside the claims: TestFirstClaimDoesNotWaitForStartFixUps).
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground()
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 10, Lease: time.Minute, Now: now.Add(time.Second)})
	if err != nil || len(cs) != 2 || cs[0].Endpoint.ID != "ep_c" {
		t.Fatalf("first claim of the next process: %d claims, %v; want ep_c's 2", len(cs), err)
	}
	var left, marks int
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM deliveries WHERE endpoint_id = 'ep_a'),
		(SELECT COUNT(*) FROM meta WHERE key GLOB 'deleting_endpoint:*')`).Scan(&left, &marks); err != nil {
		t.Fatal(err)
	}
	if left != 0 || marks != 0 {
		t.Errorf("after the start: %d deliveries of the deleted endpoint, %d marks; want none", left, marks)
	}
	if got := countStates(t, s, "ep_b"); got["paused"] != 2*holdChunk+3 {
		t.Errorf("paused endpoint after the start: %v, want all paused", got)
	}
}

// TestStartFixUpsYieldTheWriterBetweenChunks: what a process that died in
// the middle of a pause, a resume and a delete left (each 2 chunks and 3
// deliveries) is finished by the next process's first claim one chunk per
// transaction, a publish of another tenant committing between chunks (it
// held the pause's and the resume's rest in one transaction before).
func TestStartFixUpsYieldTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"ep_a", "ep_b", "ep_c", "ep_d"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: id,
			URL: "https://example.com/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	n := 2*holdChunk + 3
	for _, id := range []string{"ep_a", "ep_b", "ep_c"} {
		backlogOf(t, s, id, n, now)
	}
	// A pause of ep_a, a resume of ep_b and a delete of ep_c, each
	// interrupted before its second chunk (their first chunks' work left
	// out: it changes nothing here).
	if _, err := s.w.ExecContext(ctx, `UPDATE endpoints SET state = 'paused' WHERE id = 'ep_a';
		UPDATE deliveries SET state = 'paused' WHERE endpoint_id = 'ep_b';
		DELETE FROM endpoints WHERE id = 'ep_c';
		INSERT INTO meta (key, value) VALUES ('deleting_endpoint:ep_c', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var between int
	s.beforeChunk = func() {
		between++
		if err := publishOf(s, "ep_d", now); err != nil {
			t.Errorf("publish between two chunks of the start-up fix-ups: %v", err)
		}
	}
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground()
	if between != 9 {
		t.Errorf("publishes committed between the fix-ups' chunks: %d, want 9 (3 moves of 3 chunks)", between)
	}
	if got := countStates(t, s, "ep_a"); got["paused"] != n || len(got) != 1 {
		t.Errorf("paused endpoint after the start: %v, want %d paused", got, n)
	}
	if got := countStates(t, s, "ep_b"); got["pending"] != n || len(got) != 1 {
		t.Errorf("enabled endpoint after the start: %v, want %d pending", got, n)
	}
	if got := countStates(t, s, "ep_c"); len(got) != 0 {
		t.Errorf("deleted endpoint after the start: %v, want none", got)
	}
}
