package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// reserveAll is an engine side that reserves every delivery offered.
type reserveAll struct{}

func (reserveAll) Reserve(_ string, n int) int      { return n }
func (reserveAll) Lease() (string, time.Time)       { return "w", time.Now().Add(time.Minute) }
func (reserveAll) Take(claims []store.Claim, n int) {}

var _ store.HandOff = reserveAll{}

// TestHandOffPublishDuringFirstClaim: the first claim takes the claim lock
// holding claimMu while it waits for the writer (takeClaimLock → queueTx),
// and a publish group asks claiming() holding the writer. claiming() took
// claimMu once (found by review): with a hand-off installed before the
// first claim the two waited for each other forever, and the store could
// no longer be closed. It reads an atomic flag now.
func TestHandOffPublishDuringFirstClaim(t *testing.T) {
	ctx := context.Background()
	// Not openWithEndpoints: its cleanup closes the store, which would
	// hang on the deadlock this test reports.
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: "ep_1", Tenant: "acme",
		URL: "https://example.com/", State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	s.SetHandOff(reserveAll{})

	_, done, err := s.queueTx(ctx) // the writer, as a completion batch running
	if err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 8, Lease: time.Minute, Now: time.Now()})
		claimed <- err
	}()
	// The first claim holds claimMu (takeClaimLock) and waits for the writer.
	waitFor(t, "the first claim waiting", func() bool { _, q := s.gate.waiting(); return q == 1 })
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
	done() // the publish group goes first (writeGate), then the claim

	timeout := time.After(10 * time.Second)
	for range 2 {
		select {
		case err := <-published:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-claimed:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			// Not closed: Close would wait for the stuck committer forever.
			t.Fatal("deadlock: a publish group holding the writer waits for claimMu in claiming(), held by the first claim waiting for the writer in takeClaimLock")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// tokenEngine models the engine's side of the hand-off: Reserve takes
// idle worker tokens without waiting (no backlog flag set: the last claim
// was not full), Take gives back the tokens of claims it was not given.
type tokenEngine struct {
	mu     sync.Mutex
	tokens int
}

func (e *tokenEngine) Reserve(_ string, n int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := min(n, e.tokens)
	e.tokens -= k
	return k
}
func (e *tokenEngine) Lease() (string, time.Time) { return "w", time.Now().Add(time.Minute) }
func (e *tokenEngine) Take(claims []store.Claim, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tokens += n - len(claims)
}
func (e *tokenEngine) set(n int) { e.mu.Lock(); e.tokens = n; e.mu.Unlock() }

// TestHandOffWaitsForAWaitingClaim: an older due delivery left to
// the claims (no worker was idle when it was published); the claimer,
// woken for it, waits for the writer; a worker frees meanwhile and a newer
// publish's group (which goes first at the gate) hands its delivery off to
// it. The newer delivery must not be handed off: the claim takes the
// older one first, then the newer (a publish group hands nothing off
// while a claim waits for the writer).
func TestHandOffWaitsForAWaitingClaim(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_1"})
	if _, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: now}); err != nil {
		t.Fatal(err) // the claim lock; nothing due: not full, no backlog
	}
	eng := &tokenEngine{}
	s.SetHandOff(eng)
	publish := func(id string, at time.Time) (store.PublishResult, error) {
		return s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: at, Body: []byte("{}"), Fingerprint: id},
			Now:   at, NewDeliveryID: func() string { return store.NewID("dlv") },
		})
	}
	// 1. The older publish: every worker busy, left to the claims.
	if r, err := publish("evt_old", now); err != nil || r.HandedOff != 0 || r.Pending != 1 {
		t.Fatalf("old publish: %+v %v", r, err)
	}
	// 2. The claimer, woken for it, waits for the writer (a completion
	// batch holds it).
	_, done, err := s.queueTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		c   []store.Claim
		err error
	}
	cl := make(chan claimed, 1)
	go func() {
		c, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: now.Add(2 * time.Second)})
		cl <- claimed{c, err}
	}()
	waitFor(t, "the claim waiting for the writer", func() bool { _, q := s.gate.waiting(); return q == 1 })
	// 3. A worker frees; a newer publish arrives and waits for the writer.
	eng.set(1)
	type published struct {
		r   store.PublishResult
		err error
	}
	pc := make(chan published, 1)
	go func() { r, err := publish("evt_new", now.Add(time.Second)); pc <- published{r, err} }()
	waitFor(t, "the publish waiting for the writer", func() bool { p, _ := s.gate.waiting(); return p == 1 })
	done()
	p := <-pc
	c := <-cl
	if p.err != nil || c.err != nil {
		t.Fatal(p.err, c.err)
	}
	if p.r.HandedOff > 0 {
		t.Fatalf("the newer delivery (evt_new) was handed off to the freed worker while the claim of the older due one (evt_old, claimed %d after it) waited for the writer: newer attempted first", len(c.c))
	}
	if len(c.c) != 1 || c.c[0].Event.ID != "evt_old" {
		t.Fatalf("the waiting claim took %d, want evt_old's delivery", len(c.c))
	}
}

// TestHandOffSharesAGroupsWorkersBetweenTenants: two tenants' publishes
// committed in one group, three deliveries each, and two idle workers:
// each tenant's first delivery is handed off, as a claim would share its
// batch, not both workers to the tenant met first.
func TestHandOffSharesAGroupsWorkersBetweenTenants(t *testing.T) {
	ctx := context.Background()
	var eps []store.Endpoint
	for _, tn := range []string{"a", "b"} {
		for i := range 3 {
			eps = append(eps, store.Endpoint{ID: fmt.Sprintf("ep_%s%d", tn, i), Tenant: tn})
		}
	}
	s, now := openWithEndpoints(t, eps...)
	if _, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: now}); err != nil {
		t.Fatal(err) // the claim lock
	}
	eng := &tokenEngine{tokens: 2}
	s.SetHandOff(eng)
	type published struct {
		r   store.PublishResult
		err error
	}
	publish := func(tenant string) chan published {
		c := make(chan published, 1)
		go func() {
			id := store.NewID("evt")
			r, err := s.PublishEvent(ctx, store.PublishParams{
				Event: store.Event{ID: id, Tenant: tenant, Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
				Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") },
			})
			c <- published{r, err}
		}()
		return c
	}
	// Both publishes queue behind a queue transaction holding the writer
	// and commit in one group.
	_, done, err := s.queueTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pa := publish("a")
	waitFor(t, "a's publish waiting", func() bool { p, _ := s.gate.waiting(); return p == 1 })
	pb := publish("b")
	// The committer holds a's publish at the gate; b's waits in its queue.
	waitFor(t, "b's publish queued", func() bool { return len(s.commits.queue) == 1 })
	done()
	a, b := <-pa, <-pb
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if a.r.Pending != 3 || b.r.Pending != 3 {
		t.Fatalf("pending a %d, b %d: want 3 each", a.r.Pending, b.r.Pending)
	}
	if a.r.HandedOff != 1 || b.r.HandedOff != 1 {
		t.Fatalf("handed off a %d, b %d: two idle workers shared by two tenants, want 1 each", a.r.HandedOff, b.r.HandedOff)
	}
}
