package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// waitFor polls cond (the gate's state changes on other goroutines; no
// timing is measured).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// openWithEndpoints opens a store in t's temporary directory, closed when
// t ends, with the enabled endpoints eps (tenant acme, a URL, one secret
// and the times filled in where not given), and returns the time they
// were created at.
func openWithEndpoints(t *testing.T, eps ...store.Endpoint) (*Store, time.Time) {
	t.Helper()
	s, now := openAtWithEndpoints(t, filepath.Join(t.TempDir(), "h.db"), eps...)
	t.Cleanup(func() { s.Close() })
	return s, now
}

// openAtWithEndpoints is openWithEndpoints for the database at path,
// which the caller closes (a test that reopens it).
func openAtWithEndpoints(t *testing.T, path string, eps ...store.Endpoint) (*Store, time.Time) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, ep := range eps {
		if ep.Tenant == "" {
			ep.Tenant = "acme"
		}
		ep.URL, ep.State = "https://example.com/", store.EndpointEnabled
		ep.Secrets = []store.Secret{{Value: "whsec_x", CreatedAt: now}}
		ep.CreatedAt, ep.UpdatedAt = now, now
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
			t.Fatal(err)
		}
	}
	return s, now
}

// TestWriteGateServesPublishesFirst: a publish that arrives after three
// queue transactions goes before them; queue work goes in arrival order.
func TestWriteGateServesPublishesFirst(t *testing.T) {
	var g writeGate
	ctx := context.Background()
	if err := g.acquireQueue(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	for _, name := range []string{"q1", "q2", "q3"} {
		_, before := g.waiting()
		go func() {
			if err := g.acquireQueue(ctx); err == nil {
				order <- name
				g.release()
			}
		}()
		waitFor(t, name+" waiting", func() bool { _, q := g.waiting(); return q == before+1 })
	}
	go func() {
		g.acquirePublish()
		order <- "publish"
		g.release()
	}()
	waitFor(t, "the publish waiting", func() bool { p, _ := g.waiting(); return p == 1 })
	g.release()
	var got []string
	for range 4 {
		got = append(got, <-order)
	}
	if want := []string{"publish", "q1", "q2", "q3"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestWriteGateBoundsPublishesInARow: queue work that waits through
// maxPublishesInARow publish groups goes before the next one.
func TestWriteGateBoundsPublishesInARow(t *testing.T) {
	var g writeGate
	g.acquirePublish()
	got := make(chan struct{})
	go func() {
		if err := g.acquireQueue(context.Background()); err == nil {
			close(got)
		}
	}()
	waitFor(t, "the queue waiting", func() bool { _, q := g.waiting(); return q == 1 })
	for i := range maxPublishesInARow + 1 {
		done := make(chan struct{})
		go func() { g.acquirePublish(); close(done) }()
		waitFor(t, "a publish waiting", func() bool { p, _ := g.waiting(); return p == 1 })
		g.release()
		if i < maxPublishesInARow {
			<-done // a publish group got the writer
			select {
			case <-got:
				t.Fatalf("queue work went after %d publish groups, want %d", i, maxPublishesInARow)
			default:
			}
			continue
		}
		<-got // the queue's turn
		g.release()
		<-done
	}
	g.release()
	if p, q := g.waiting(); p != 0 || q != 0 || g.held {
		t.Fatalf("gate not free: %d, %d, held %v", p, q, g.held)
	}
}

// TestWriteGateCancelledQueueWaiter: a queue waiter whose context ends
// leaves the line and holds nothing.
func TestWriteGateCancelledQueueWaiter(t *testing.T) {
	var g writeGate
	g.acquirePublish()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.acquireQueue(ctx) }()
	waitFor(t, "the queue waiting", func() bool { _, q := g.waiting(); return q == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("acquireQueue succeeded after its context ended")
	}
	g.release()
	if g.held {
		t.Fatal("the gate is held after its only holder released it")
	}
}

// TestQueueTransactionsWaitBehindPublishes: on a real store, the writer
// freed by a queue transaction (claims, completions, fan-out chunks) goes
// to the waiting publish group before the queue transactions queued
// earlier.
func TestQueueTransactionsWaitBehindPublishes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, done, err := s.queueTx(ctx) // the writer, as a claim running
	if err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 8, Lease: time.Minute, Now: time.Now()})
		claimed <- err
	}()
	waitFor(t, "the claim waiting", func() bool { _, q := s.gate.waiting(); return q == 1 })
	published := make(chan error, 1)
	go func() {
		id := store.NewID("evt")
		_, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: time.Now(), Body: []byte("{}"), Fingerprint: id},
			Now:   time.Now(), NewDeliveryID: func() string { return store.NewID("dlv") },
		})
		published <- err
	}()
	waitFor(t, "the publish waiting", func() bool { p, _ := s.gate.waiting(); return p == 1 })
	done()
	// The publish group holds the writer now; the claim still waits.
	if p, q := s.gate.waiting(); p != 0 || q != 1 {
		t.Fatalf("after the queue transaction: %d publishes and %d queue transactions waiting, want 0 and 1", p, q)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
}

// TestFanOutChunkYieldsToPublishes: with a publish waiting for the writer,
// a fan-out chunk ends after fanOutYieldEvery deliveries; the next chunks
// go on from there and every endpoint gets its delivery once.
func TestFanOutChunkYieldsToPublishes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.publishWaiting = func() bool { return true }
	now := time.Now().UTC()
	const endpoints = 3*fanOutYieldEvery + 7
	for i := range endpoints {
		types := []string{"t"}
		if i%10 == 3 {
			types = []string{"other"} // read, not matched
		}
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: fmt.Sprintf("ep_%03d", i), Tenant: "acme",
			URL: "https://example.com/", State: store.EndpointEnabled, EventTypes: types,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	id := store.NewID("evt")
	if _, err := s.PublishEvent(ctx, store.PublishParams{
		Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
		Now:   now.Add(time.Second), NewDeliveryID: func() string { return store.NewID("dlv") }, FanOutChunk: 5,
	}); err != nil {
		t.Fatal(err)
	}
	var created []int
	for range 20 {
		res, err := s.ContinueFanOut(ctx, store.FanOutParams{Chunk: 500})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, res.Created)
		if res.Done {
			break
		}
	}
	if created[0] != fanOutYieldEvery {
		t.Fatalf("first chunk with a publish waiting created %d deliveries, want %d (chunks: %v)", created[0], fanOutYieldEvery, created)
	}
	var n, distinct int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT endpoint_id) FROM deliveries WHERE event_id = ?", id).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	want := endpoints - (endpoints+6)/10 // i%10 == 3 do not match
	if n != want || distinct != want {
		t.Fatalf("%d deliveries to %d endpoints after chunks %v, want %d each", n, distinct, created, want)
	}
}

// TestResumeYieldsTheWriterBetweenChunks: a resume of more held
// deliveries than releaseChunk commits them chunk by chunk, so a publish
// can commit between two chunks (it waited for the whole release before,
// 0.6 s and more for 20,000 deliveries); every held delivery is released
// once and the publish's own delivery is not counted.
func TestResumeYieldsTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"}, store.Endpoint{ID: "ep_b", Tenant: "ep_b"})
	publish := func(tenant string) error {
		id := store.NewID("evt")
		_, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: tenant, Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
			Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") }})
		return err
	}
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointPaused, Now: now}); err != nil {
		t.Fatal(err)
	}
	held := 2*releaseChunk + 3
	for range held {
		if err := publish("ep_a"); err != nil {
			t.Fatal(err)
		}
	}
	var between int
	s.beforeChunk = func() {
		between++
		// Synchronously, on the store the resume is running on: this
		// commits only if the resume does not hold the writer.
		if err := publish("ep_b"); err != nil {
			t.Errorf("publish between two chunks of a resume: %v", err)
		}
	}
	_, n, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointEnabled, Now: now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if n != held {
		t.Errorf("released %d, want %d", n, held)
	}
	if between != 2 {
		t.Errorf("publishes committed between chunks: %d, want 2 (chunks of %d)", between, releaseChunk)
	}
	var paused, pending int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FILTER (WHERE state = 'paused'), COUNT(*) FILTER (WHERE state = 'pending') FROM deliveries").Scan(&paused, &pending); err != nil {
		t.Fatal(err)
	}
	if paused != 0 || pending != held+2 {
		t.Errorf("after the resume: %d paused, %d pending; want 0 and %d", paused, pending, held+2)
	}
}

// TestStartReleasesHeldUnderEnabledEndpoint: a process that died between
// the chunks of a resume left deliveries held under an enabled endpoint;
// the next process releases them when it takes the claim lock.
func TestStartReleasesHeldUnderEnabledEndpoint(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, now := openAtWithEndpoints(t, path, store.Endpoint{ID: "ep_a", Tenant: "acme"})
	for range 3 {
		id := store.NewID("evt")
		if _, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
			Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			t.Fatal(err)
		}
	}
	// What a resume interrupted after its first chunk leaves behind.
	if _, err := s.w.ExecContext(ctx, "UPDATE deliveries SET state = 'paused'"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The release runs in the background once the claim lock is taken
	// (startFixUps): the claims after it find them due.
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground()
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 10, Lease: time.Minute, Now: now.Add(time.Second)})
	if err != nil || len(cs) != 3 {
		t.Fatalf("first claims of the next process: %d claims, %v; want the 3 held under an enabled endpoint", len(cs), err)
	}
}

// TestReplayYieldsTheWriterBetweenChunks: an endpoint's replay of more dead
// letters than replayChunk commits them chunk by chunk, so a publish can
// commit between two chunks; every dead letter is replayed once.
func TestReplayYieldsTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	for _, id := range []string{"ep_a", "ep_b"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: id,
			URL: "https://example.com/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(tenant string) error {
		id := store.NewID("evt")
		_, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: tenant, Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
			Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") }})
		return err
	}
	dead := 2*replayChunk + 3
	for range dead {
		if err := publish("ep_a"); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: dead, Lease: time.Hour, Now: now})
	if err != nil || len(cs) != dead {
		t.Fatalf("claim: %d, %v", len(cs), err)
	}
	var done []store.Completion
	for _, c := range cs {
		done = append(done, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: "ep_a", Owner: "n", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliveryDead,
			Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 500}, Now: now})
	}
	if err := s.CompleteDeliveries(ctx, done); err != nil {
		t.Fatal(err)
	}
	var between int
	s.beforeChunk = func() {
		between++
		if err := publish("ep_b"); err != nil {
			t.Errorf("publish between two chunks of a replay: %v", err)
		}
	}
	n, err := s.ReplayDeliveries(ctx, store.ReplayParams{EndpointID: "ep_a", Now: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if n != dead || between != 2 {
		t.Errorf("replayed %d with %d publishes between chunks; want %d and 2", n, between, dead)
	}
	var left int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM deliveries WHERE state = 'dead'").Scan(&left); err != nil || left != 0 {
		t.Errorf("dead letters left after the replay: %d, %v", left, err)
	}
}

// TestGroupDuplicatesCountTheGroupsDeliveries: retries of one publish
// committed in one group with its first copy (the writer held until every
// copy is queued) are answered "duplicate" with the first copy's deliveries,
// which the group writes together at its end (flushDeliveries): they are
// flushed before a duplicate's count reads them.
func TestGroupDuplicatesCountTheGroupsDeliveries(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	for i := range 3 {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: fmt.Sprintf("ep_%d", i), Tenant: "acme",
			URL: "https://example.com/", State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	_, done, err := s.queueTx(ctx) // the writer, as a claim running
	if err != nil {
		t.Fatal(err)
	}
	const copies = 6
	id := store.NewID("evt")
	ev := store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte(`{"n":1}`), Fingerprint: id}
	results := make([]store.PublishResult, copies)
	errs := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			results[i], errs[i] = s.PublishEvent(ctx, store.PublishParams{Event: ev, Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }})
		})
	}
	// The committer took the first copy and waits for the writer; the
	// others wait in its queue: one group.
	waitFor(t, "every copy queued", func() bool { p, _ := s.gate.waiting(); return p == 1 && len(s.commits.queue) == copies-1 })
	done()
	wg.Wait()
	created := 0
	for i := range copies {
		if errs[i] != nil {
			t.Fatalf("copy %d: %v", i, errs[i])
		}
		if results[i].Created {
			created++
		}
		if results[i].Deliveries != 3 {
			t.Errorf("copy %d: Created %v, Deliveries %d, want 3", i, results[i].Created, results[i].Deliveries)
		}
	}
	if created != 1 {
		t.Errorf("%d copies created the event, want 1", created)
	}
}

// TestEveryWriteWaitsInTheWriteGate: the API's changes and the
// housekeeping's writes wait in the write gate like the queue's
// transactions (they took the writer connection directly, unseen by the
// gate: a publish group that had the gate then waited for the connection
// behind them, and the gate's count of waiting work, which the hand-off
// and the fan-out chunks read, missed them). Queued behind a running queue
// transaction, each lets a publish group that arrives after it go first.
func TestEveryWriteWaitsInTheWriteGate(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i, w := range []struct {
		name  string
		write func() error
	}{
		{"CreateEndpoint", func() error {
			_, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h", CreatedAt: now, UpdatedAt: now}})
			return err
		}},
		{"CreateAPIKey", func() error {
			_, err := s.CreateAPIKey(ctx, store.APIKey{ID: store.NewID("key"), Kind: "api", Name: "k", Role: "admin", Hash: []byte(store.NewID("h")), CreatedAt: now})
			return err
		}},
		{"CreateEventType", func() error {
			_, err := s.CreateEventType(ctx, store.EventType{Name: "t" + strconv.Itoa(int(now.UnixNano()%1000)) + ".x", CreatedAt: now, UpdatedAt: now})
			return err
		}},
		{"ClearNotices", func() error { return s.ClearNotices(ctx, []int64{1}) }},
		{"TouchAPIKeys", func() error { return s.TouchAPIKeys(ctx, map[string]time.Time{"key_x": now}) }},
		{"EnsureMeta", func() error { _, err := s.EnsureMeta(ctx, "k", "v"); return err }},
		{"Ping", func() error { return s.Ping(ctx) }},
	} {
		t.Run(w.name, func(t *testing.T) {
			_, done, err := s.queueTx(ctx) // the writer, as a claim running
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			defer once.Do(done) // also when the test fails before it is released
			wrote := make(chan error, 1)
			go func() { wrote <- w.write() }()
			waitFor(t, "the write waiting in the gate", func() bool { _, q := s.gate.waiting(); return q == 1 })
			published := make(chan error, 1)
			go func() {
				id := store.NewID("evt")
				_, err := s.PublishEvent(ctx, store.PublishParams{
					Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
					Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") },
				})
				published <- err
			}()
			waitFor(t, "the publish waiting", func() bool { p, _ := s.gate.waiting(); return p == 1 })
			once.Do(done)
			if p, q := s.gate.waiting(); p != 0 || q != 1 {
				t.Fatalf("after the queue transaction: %d publishes and %d writes waiting, want 0 and 1 (the publish first)", p, q)
			}
			if err := <-published; err != nil {
				t.Fatal(err)
			}
			if err := <-wrote; err != nil {
				t.Fatalf("%s (#%d): %v", w.name, i, err)
			}
		})
	}
}
