package sqlite

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// complete410 claims one delivery of ep and completes it with a 410 Gone
// (the endpoint is disabled by the batch).
func complete410(t *testing.T, s *Store, ep string, now time.Time) store.Completion {
	t.Helper()
	cs, err := s.ClaimDeliveries(context.Background(), store.ClaimParams{Owner: "n", Limit: 1, Lease: time.Minute, Now: now})
	if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != ep {
		t.Fatalf("claim: %d, %v", len(cs), err)
	}
	return store.Completion{DeliveryID: cs[0].Delivery.ID, EndpointID: ep, Owner: "n",
		LeaseUntil: cs[0].Delivery.LeaseUntil, State: store.DeliveryDead, DisableEndpoint: true, DisableReason: "410 Gone",
		Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 410}, Now: now}
}

// TestDisableByCompletionDoesNotHoldTheCompleter: a completion batch that
// disables an endpoint with a large backlog returns once its own
// transaction has committed; the rest of the hold runs beside it, so the
// engine's completer (every tenant's completions on the node) does not
// wait for hundreds of chunks. The test blocks the hold's second chunk
// until the batch has returned: on a store that holds the rest inside
// CompleteDeliveries the batch never returns while it is blocked.
func TestDisableByCompletionDoesNotHoldTheCompleter(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	pending := 2*holdChunk + 3
	backlogOf(t, s, "ep_a", pending, now)
	c := complete410(t, s, "ep_a", now)
	returned := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	s.beforeChunk = func() {
		once.Do(func() { close(entered) })
		<-returned
	}
	errc := make(chan error, 1)
	go func() { errc <- s.CompleteDeliveries(ctx, []store.Completion{c}) }()
	<-entered
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second): // a deadlock detector, not a timing assertion
		close(returned)
		<-errc
		t.Fatal("CompleteDeliveries waited for the chunks of its endpoint's hold (the completer is held for the whole hold)")
	}
	// Another batch (another tenant's completion) commits while the hold
	// is still blocked before its second chunk.
	if err := publishOf(s, "ep_b", now); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 1, Lease: time.Minute, Now: now.Add(time.Second), SkipTenants: []string{"ep_a"}})
	if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != "ep_b" {
		t.Fatalf("claim of ep_b: %d, %v", len(cs), err)
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: cs[0].Delivery.ID, EndpointID: "ep_b", Owner: "n",
		LeaseUntil: cs[0].Delivery.LeaseUntil, State: store.DeliverySucceeded,
		Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 200}, Now: now.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	close(returned)
	s.waitBackground()
	if got := countStates(t, s, "ep_a"); got["paused"] != pending-1 || got["dead"] != 1 || got["pending"] != 0 {
		t.Errorf("after the disable: %v, want %d paused and 1 dead", got, pending-1)
	}
}

// TestCloseStopsHoldAfterDisable: Close during the background hold of a
// disabled endpoint's backlog waits for it to stop (no chunk runs on a
// closed store), and the next start holds what it left.
func TestCloseStopsHoldAfterDisable(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/h.db"
	s, now := openAtWithEndpoints(t, path, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
	pending := 3*holdChunk + 3
	backlogOf(t, s, "ep_a", pending, now)
	c := complete410(t, s, "ep_a", now)
	closing := make(chan struct{})
	var chunks int
	s.beforeChunk = func() {
		chunks++
		if chunks == 2 {
			close(closing)
			// Close has begun (it cancels the background work first).
			<-s.bgCtx.Done()
		}
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{c}); err != nil {
		t.Fatal(err)
	}
	<-closing
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground() // the start-up fix-ups (startFixUps)
	if got := countStates(t, s, "ep_a"); got["paused"] != pending-1 || got["pending"] != 0 {
		t.Errorf("after a close in the middle of the hold and a start: %v, want %d paused", got, pending-1)
	}
}

// TestDeleteSourceYieldsTheWriterBetweenChunks: the delete of a source
// deletes its forwarding endpoint's deliveries as DeleteEndpoint does,
// one chunk per transaction behind waiting publishes, not all of them in
// the one transaction that holds the single writer (and every tenant's
// publishes) meanwhile.
func TestDeleteSourceYieldsTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	if _, err := s.CreateSource(ctx, store.CreateSourceParams{
		Source: store.Source{ID: "src_a", Name: "a", Config: []byte("{}"), CreatedAt: now, UpdatedAt: now},
		Endpoint: store.Endpoint{ID: "ep_src", URL: "https://example.com/", Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}},
			CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	total := 2*deleteChunk + 3
	if _, err := s.w.ExecContext(ctx, `INSERT INTO events (id, tenant, type, occurred_at, created_at, body, fingerprint)
		SELECT 'evt_src', 'src_a', 't', ?1, ?1, '{}', 'evt_src'`, micro(now)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?1)
		INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT printf('dlv_src_%08d', n), 'evt_src', 'ep_src', 'src_a', 't', 'pending', ?2, ?2, ?2 FROM i`, total, micro(now)); err != nil {
		t.Fatal(err)
	}
	var between int
	s.beforeChunk = func() {
		between++
		if err := publishOf(s, "ep_b", now); err != nil {
			t.Errorf("publish between two chunks of a source's delete: %v", err)
		}
	}
	if err := s.DeleteSource(ctx, "src_a"); err != nil {
		t.Fatal(err)
	}
	if between != 2 {
		t.Errorf("publishes committed between the chunks of a source's delete: %d, want 2 (chunks of %d)", between, deleteChunk)
	}
	var left, marks, eps int
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM deliveries WHERE endpoint_id = 'ep_src'),
		(SELECT COUNT(*) FROM meta WHERE key GLOB 'deleting_endpoint:*'), (SELECT COUNT(*) FROM endpoints WHERE id = 'ep_src')`).Scan(&left, &marks, &eps); err != nil {
		t.Fatal(err)
	}
	if left != 0 || marks != 0 || eps != 0 {
		t.Errorf("after the source's delete: %d deliveries, %d marks, %d endpoints left; want none", left, marks, eps)
	}
}

// TestFirstClaimDoesNotWaitForStartFixUps: what a dead process left
// unfinished (here the delete of an endpoint with more deliveries than a
// chunk) is finished after the next process's first claim has taken the
// claim lock, beside its claims, not before them: a million deliveries
// took 13 s on an idle machine, all of it with the node delivering
// nothing and, past the claimer's 30 s timeout, its first claim failing.
// The test blocks the fix-up's second chunk until the first claim has
// returned.
func TestFirstClaimDoesNotWaitForStartFixUps(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, id := range []string{"ep_a", "ep_c"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: id,
			URL: "https://example.com/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	backlogOf(t, s, "ep_a", 2*deleteChunk+3, now)
	backlogOf(t, s, "ep_c", 2, now)
	if _, err := s.w.ExecContext(ctx, `DELETE FROM endpoints WHERE id = 'ep_a';
		INSERT INTO meta (key, value) VALUES ('deleting_endpoint:ep_a', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	returned := make(chan struct{})
	var chunks int
	s.beforeChunk = func() {
		chunks++
		if chunks == 2 {
			<-returned
		}
	}
	type answer struct {
		cs  []store.Claim
		err error
	}
	ac := make(chan answer, 1)
	go func() {
		cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 10, Lease: time.Minute, Now: now.Add(time.Second)})
		ac <- answer{cs, err}
	}()
	var a answer
	select {
	case a = <-ac:
	case <-time.After(20 * time.Second): // a deadlock detector, not a timing assertion
		close(returned)
		<-ac
		t.Fatal("the first claim after a start waited for the start-up fix-ups' chunks")
	}
	close(returned)
	if a.err != nil {
		t.Fatal(a.err)
	}
	for _, c := range a.cs {
		if c.Endpoint.ID != "ep_c" {
			t.Errorf("first claim: %s of endpoint %q, want ep_c's only", c.Delivery.ID, c.Endpoint.ID)
		}
	}
	if len(a.cs) != 2 {
		t.Errorf("first claim: %d claims, want ep_c's 2", len(a.cs))
	}
	s.waitBackground()
	var left, marks int
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM deliveries WHERE endpoint_id = 'ep_a'),
		(SELECT COUNT(*) FROM meta WHERE key GLOB 'deleting_endpoint:*')`).Scan(&left, &marks); err != nil {
		t.Fatal(err)
	}
	if left != 0 || marks != 0 {
		t.Errorf("after the start-up fix-ups: %d deliveries of the deleted endpoint, %d marks; want none", left, marks)
	}
}

// TestListDeliveriesDuringDelete: between the chunks of an endpoint's
// delete, the lists of deliveries (by endpoint, by event, by tenant, by
// state) leave out the deleted endpoint's deliveries, as GetDelivery (not
// found) does: a list must not name deliveries whose GET answers 404.
func TestListDeliveriesDuringDelete(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	backlogOf(t, s, "ep_a", 2*deleteChunk+3, now)
	backlogOf(t, s, "ep_b", 2, now)
	checked := false
	s.beforeChunk = func() {
		if checked {
			return
		}
		checked = true
		for _, p := range []store.ListDeliveriesParams{{EndpointID: "ep_a"}, {EventID: "evt_ep_a"}, {Tenant: "ep_a"},
			{State: store.DeliveryPending}, {}} {
			page, err := s.ListDeliveries(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Data {
				if d.EndpointID == "ep_a" {
					t.Errorf("ListDeliveries(%+v) between two chunks of ep_a's delete lists %s of the deleted endpoint", p, d.ID)
					break
				}
			}
		}
	}
	if err := s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_a", Now: now}); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the delete ran no chunk after its first")
	}
}

// TestDeleteRetriedAfterFailedChunk: a delete whose later chunk fails
// (here: the database file is away, checkFile) answers an error although
// the endpoint is gone, and the operator's retry through the API answers
// not found without reaching the store (the endpoint is read first): the
// rest of the delete must be retried by the store itself, not left (its
// dead letters, which no claim meets, and its mark) until the next start.
func TestDeleteRetriedAfterFailedChunk(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
	s.retryWait = 0
	var logged bytes.Buffer
	var logMu sync.Mutex
	s.log = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil))
	total := 2*deleteChunk + 3
	backlogOf(t, s, "ep_a", total, now)
	if _, err := s.w.ExecContext(ctx, "UPDATE deliveries SET state = 'dead' WHERE endpoint_id = 'ep_a'"); err != nil {
		t.Fatal(err)
	}
	away := make(chan struct{})
	back := make(chan struct{})
	calls := 0
	s.beforeChunk = func() {
		switch calls++; calls {
		case 1:
			if err := os.Rename(s.path, s.path+".away"); err != nil {
				t.Error(err)
			}
			close(away)
		case 2:
			<-back // the retry waits for the file to be back
		}
	}
	if err := s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_a", Now: now}); err == nil {
		t.Fatal("the delete whose second chunk failed answered no error")
	}
	<-away
	if err := os.Rename(s.path+".away", s.path); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, "ep_a"); got["dead"] == 0 {
		t.Fatalf("the failed chunk left nothing: %v", got)
	}
	close(back)
	s.waitBackground()
	var marks int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM meta WHERE key GLOB 'deleting_endpoint:*'").Scan(&marks); err != nil {
		t.Fatal(err)
	}
	logMu.Lock()
	log := logged.String()
	logMu.Unlock()
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "deleted endpoint ep_a") || !strings.Contains(log, "background work done after a retry") {
		t.Errorf("the store's log of the failed chunk and its retry:\n%s\nwant a WARN naming the endpoint's delete, then its success", log)
	}
	if got := countStates(t, s, "ep_a"); len(got) != 0 || marks != 0 {
		t.Errorf("after the delete's retry: %v, %d marks; want none", got, marks)
	}
}

// lockedWriter serialises the writes of a log handler shared with the
// store's background work.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
