package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// hookHandOff reserves every delivery offered, runs onReserve (once, set
// per publish) with the group's transaction open, and signals each Take.
type hookHandOff struct {
	onReserve func()
	mu        sync.Mutex
	taken     [][]store.Claim
	takes     chan struct{}
}

func (h *hookHandOff) Reserve(_ string, n int) int {
	if f := h.onReserve; f != nil {
		h.onReserve = nil
		f()
	}
	return n
}
func (h *hookHandOff) Lease() (string, time.Time) { return "node-a", time.Now().Add(time.Minute) }
func (h *hookHandOff) Take(claims []store.Claim, n int) {
	h.mu.Lock()
	h.taken = append(h.taken, claims)
	h.mu.Unlock()
	h.takes <- struct{}{}
}

// waitUntil polls cond off the test goroutine (no t.Fatal there).
func waitUntil(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// TestHandOffLoadIsOneSnapshot: API writes take the writer connection
// without the write gate (beginWrite), so one can commit the moment the
// group's transaction ends — e.g. the publisher, just answered, deleting
// the endpoint. The hand-off once read its claims after the commit, three
// statements each taking the connection anew (found by review): a delete
// between them left a claim with a zero Endpoint (no ID, no URL, no
// secrets) that went to a worker. The claims are now read, and leased, on
// the group's transaction, as a claim reads them on its own.
//
// The test takes the writer connection at the group's commit (queued
// during Reserve) and deletes the endpoint as soon as it frees it.
func TestHandOffLoadIsOneSnapshot(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	newEndpoint := func(id string) {
		t.Helper()
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: "acme",
			URL: "https://example.com/" + id, State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	newEndpoint("ep_keep")
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	h := &hookHandOff{takes: make(chan struct{}, 1)}
	s.SetHandOff(h)

	for i := range 20 {
		del := fmt.Sprintf("ep_del_%02d", i)
		newEndpoint(del)
		base := s.w.Stats().WaitCount
		conns := make(chan *sql.Conn, 1)
		h.onReserve = func() {
			go func() {
				c, err := s.w.Conn(ctx) // waits for the group's commit
				if err != nil {
					panic(err)
				}
				conns <- c
			}()
			if !waitUntil(func() bool { return s.w.Stats().WaitCount > base }) {
				panic("the connection request never queued")
			}
		}
		id := store.NewID("evt")
		res, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
			Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.HandedOff != 2 {
			t.Fatalf("handed off %d, want 2", res.HandedOff)
		}
		// The publisher has its answer; the test took the connection at
		// the commit and deletes the endpoint as soon as it frees it.
		c := <-conns
		c.Close()
		if err := s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: del, Now: now}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.takes:
		case <-time.After(10 * time.Second):
			t.Fatal("no Take")
		}
		h.mu.Lock()
		claims := h.taken[len(h.taken)-1]
		h.mu.Unlock()
		for _, cl := range claims {
			if cl.Endpoint.ID != cl.Delivery.EndpointID || cl.Event.ID != cl.Delivery.EventID {
				t.Fatalf("round %d: delivery %s of endpoint %s handed to a worker with endpoint %q (URL %q), event %q: "+
					"the endpoint was deleted between the hand-off's reads (not one transaction), and the claim was kept",
					i, cl.Delivery.ID, cl.Delivery.EndpointID, cl.Endpoint.ID, cl.Endpoint.URL, cl.Event.ID)
			}
		}
	}
}

// goroutinesIn reports whether every one of fns is on some goroutine's
// stack.
func goroutinesIn(fns ...string) bool {
	buf := make([]byte, 1<<20)
	st := string(buf[:runtime.Stack(buf, true)])
	for _, f := range fns {
		if !strings.Contains(st, f) {
			return false
		}
	}
	return true
}

// TestHandOffPauseAfterCommitHoldsNoHandedOffDelivery: the hand-off once
// recorded its leases after the group's commit (found by review, when the
// API's writes took the writer connection outside the write gate): a
// pause waiting for the connection got it at the commit and, reading the
// lease table before the leases were added, held the new delivery as not
// in flight; the hand-off then gave it to a worker anyway, a paused
// endpoint received it and the completion overwrote the held state. The
// leases are now recorded on the group's transaction, before the writer is
// free (and the pause now waits in the write gate, as every write). The
// test holds the lease table's lock until the pause and the hand-off both
// wait for it.
func TestHandOffPauseAfterCommitHoldsNoHandedOffDelivery(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_1"})
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	h := &hookHandOff{takes: make(chan struct{}, 1)}
	s.SetHandOff(h)

	paused := make(chan error, 1)
	locked := make(chan struct{})
	h.onReserve = func() { // the group's transaction open
		go func() {
			_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_1", State: store.EndpointPaused, Now: now})
			paused <- err
		}()
		if !waitUntil(func() bool { _, q := s.gate.waiting(); return q > 0 }) {
			panic("the pause never waited for the writer")
		}
		s.leases.mu.Lock() // released by the test once the pause and the hand-off wait for it
		close(locked)
	}
	type pub struct {
		res store.PublishResult
		err error
	}
	pubs := make(chan pub, 1)
	go func() {
		id := store.NewID("evt")
		res, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
			Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") },
		})
		pubs <- pub{res, err}
	}()
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reserved: no hand-off")
	}
	if !waitUntil(func() bool { return goroutinesIn("(*leaseTable).add") }) {
		s.leases.mu.Unlock()
		t.Fatal("the hand-off's lease never waited for the lease table")
	}
	// The pause reads the leases only once it has the writer: after the
	// commit, if the leases are added after it (a lease recorded before
	// the commit keeps the pause waiting for the writer: then go on).
	deadline := time.Now().Add(time.Second)
	for !goroutinesIn("(*leaseTable).ofEndpoint") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.leases.mu.Unlock()
	p := <-pubs
	if p.err != nil {
		t.Fatal(p.err)
	}
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.takes:
	case <-time.After(10 * time.Second):
		t.Fatal("no Take")
	}
	h.mu.Lock()
	claims := h.taken[len(h.taken)-1]
	h.mu.Unlock()
	for _, c := range claims {
		if c.Delivery.State != store.DeliveryPending {
			t.Fatalf("delivery %s handed to a worker (HandedOff %d) in state %s, endpoint %s: the pause held it before the hand-off leased it",
				c.Delivery.ID, p.res.HandedOff, c.Delivery.State, c.Endpoint.State)
		}
	}
}
