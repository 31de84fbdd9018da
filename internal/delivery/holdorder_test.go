package delivery

// The order of a half-open circuit's hold and its hand-back, on a real
// SQLite store (found by review: the hand-back could run before the hold).

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// gatedMoveStore lets a test hold back the probe's hold
// (MoveEndpointDeliveries with no lower bound): a database round trip that
// takes a while, as any may.
type gatedMoveStore struct {
	store.Store
	holdCalled chan time.Time // the hold's target (the probe's deadline)
	holdGate   chan struct{}  // closed: the hold goes through
	handBacks  atomic.Int32   // hand-backs carried out
}

func (s *gatedMoveStore) MoveEndpointDeliveries(ctx context.Context, p store.MoveParams) (int, error) {
	if p.DueFrom.IsZero() {
		select {
		case s.holdCalled <- p.At:
		default:
		}
		<-s.holdGate
		return s.Store.MoveEndpointDeliveries(ctx, p)
	}
	n, err := s.Store.MoveEndpointDeliveries(ctx, p)
	if !p.Unattempted {
		s.handBacks.Add(1)
	}
	return n, err
}

// scriptSender answers by event: "old" waits for oldGate and succeeds,
// "fail" fails once (503), any other waits for bGate and succeeds.
type scriptSender struct {
	oldGate, bGate chan struct{}
	failed         atomic.Bool
	inB            atomic.Int32 // attempts of the backlog in the sender
	mu             sync.Mutex
	ok             map[string]int // successes by event type
}

func (s *scriptSender) Do(_ context.Context, r egress.Request) egress.Result {
	typ := r.Header.Get(HeaderEventType)
	switch typ {
	case "old":
		<-s.oldGate
	case "fail":
		if !s.failed.Swap(true) {
			return egress.Result{StatusCode: 503, Duration: time.Millisecond}
		}
	default:
		s.inB.Add(1)
		<-s.bGate
	}
	s.mu.Lock()
	s.ok[typ]++
	s.mu.Unlock()
	return egress.Result{StatusCode: 204, Duration: time.Millisecond}
}

func holdEndpoint(id string) store.Endpoint {
	return store.Endpoint{ID: id, Tenant: "acme", URL: "https://example.com/hooks/" + id, EventTypes: []string{},
		Headers: map[string]string{}, State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: t0}}, CreatedAt: t0, UpdatedAt: t0}
}

// createHoldEndpoints creates n endpoints of tenant acme (holdEndpoint,
// fresh ids) and returns their ids in creation order.
func createHoldEndpoints(t *testing.T, st store.Store, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		ep := holdEndpoint(store.NewID("ep"))
		if _, err := st.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ep.ID)
	}
	return ids
}

func holdPublish(t *testing.T, st store.Store, typ string, now time.Time) string {
	t.Helper()
	id := store.NewID("evt")
	ev := store.Event{ID: id, Tenant: "acme", Type: typ, OccurredAt: now,
		Body:        fmt.Appendf(nil, `{"id":%q,"type":%q,"tenant":"acme","occurred_at":%q,"data":{}}`, id, typ, now.Format(time.RFC3339)),
		Fingerprint: store.Fingerprint("acme", typ, []byte(id))}
	if _, err := st.PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
		t.Fatal(err)
	}
	return id
}

func holdDeliveries(t *testing.T, st store.Store, epID string) []store.Delivery {
	t.Helper()
	p, err := st.ListDeliveries(t.Context(), store.ListDeliveriesParams{EndpointID: epID, ListParams: store.ListParams{Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return p.Data
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An attempt begun before the circuit opened succeeds while the probe's
// worker is still writing the hold: the success closes the circuit, and
// its hand-back must wait for the hold (scheduler.holdWritten), or the
// hold would move the backlog to the probe's deadline after it and nothing
// would hand it back: with the clock stopped it would never be delivered.
func TestHandBackWaitsForTheHold(t *testing.T) {
	clk := clock.NewFake(t0)
	sq, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &gatedMoveStore{Store: sq, holdCalled: make(chan time.Time, 1), holdGate: make(chan struct{})}
	snd := &scriptSender{oldGate: make(chan struct{}), bGate: make(chan struct{}), ok: map[string]int{}}
	ep := holdEndpoint("ep_hold")
	if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	const cooldown, timeout = time.Minute, 10 * time.Second
	e, err := New(Config{Store: st, Sender: snd, Clock: clk, Workers: 2, EndpointConcurrency: 2, TenantConcurrency: 2, HostConcurrency: 2,
		BreakerThreshold: 1, BreakerCooldown: cooldown, AttemptTimeout: timeout, PollInterval: time.Hour, RescueInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	openGates := sync.OnceFunc(func() {
		for _, c := range []chan struct{}{st.holdGate, snd.oldGate, snd.bGate} {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	defer func() { openGates(); cancel(); <-done }()

	// 1. An attempt in flight from before the circuit opens.
	holdPublish(t, sq, "old", t0)
	e.Notify()
	waitFor(t, "the old attempt in flight", func() bool { return e.InFlight().Total == 1 })
	// 2. A failure opens the circuit; 3. a backlog, turned away until the
	// cooldown's end.
	openUntil, backlog := openCircuitWithBacklog(t, e, sq, ep.ID, 6)
	// 4. The cooldown ends: the probe is claimed, its worker writes the hold
	// (held back here).
	clk.Advance(openUntil.Sub(clk.Now()))
	var hold time.Time
	select {
	case hold = <-st.holdCalled:
	case <-time.After(15 * time.Second):
		t.Fatal("no probe hold")
	}
	// 5. Meanwhile the old attempt succeeds: the circuit closes, and the
	// hold is handed back before it is written.
	close(snd.oldGate)
	waitFor(t, "the circuit closed", func() bool {
		return e.Circuit(ep.ID).State == CircuitClosed
	})
	// The worker freed by the old attempt takes a delivery of the backlog
	// (the circuit is closed: it runs).
	waitFor(t, "a backlog attempt in flight", func() bool { return snd.inB.Load() >= 1 })
	// 6. The hold is written now, and the attempts end.
	close(st.holdGate)
	close(snd.bGate)
	time.Sleep(2 * time.Second) // real time, the clock stopped: the engine's own work
	if cs := e.Circuit(ep.ID); cs.State != CircuitClosed {
		t.Fatalf("circuit %+v, want closed", cs)
	}
	var stuck []string
	for _, d := range holdDeliveries(t, sq, ep.ID) {
		if backlog[d.EventID] && d.State != store.DeliverySucceeded {
			stuck = append(stuck, fmt.Sprintf("%s %s due %v (probe deadline %v)", d.ID, d.State, d.NextAttemptAt.Sub(clk.Now()), hold.Sub(clk.Now())))
		}
	}
	if len(stuck) > 0 {
		t.Fatalf("circuit closed at %v, clock stopped there; %d deliveries not delivered, held until the probe's deadline by a hold written after its hand-back:\n%v", clk.Now(), len(stuck), stuck)
	}
}

// openCircuitWithBacklog publishes a delivery of type "fail" (the test's
// sender fails it), waits for it to open endpoint
// epID's circuit, then publishes n more (type "b") and waits until the
// store holds each of them pending, unleased, due no earlier than the
// circuit's end. It answers that end and the backlog's event ids.
func openCircuitWithBacklog(t *testing.T, e *Engine, sq store.Store, epID string, n int) (time.Time, map[string]bool) {
	t.Helper()
	holdPublish(t, sq, "fail", t0)
	e.Notify()
	waitFor(t, "the circuit open", func() bool { return e.Circuit(epID).State == CircuitOpen })
	openUntil := e.Circuit(epID).OpenUntil
	backlog := map[string]bool{}
	for range n {
		backlog[holdPublish(t, sq, "b", t0)] = true
	}
	e.Notify()
	waitFor(t, "the backlog postponed to the cooldown's end", func() bool {
		for _, d := range holdDeliveries(t, sq, epID) {
			if backlog[d.EventID] && (d.State != store.DeliveryPending || d.LeaseOwner != "" || d.NextAttemptAt.Before(openUntil)) {
				return false
			}
		}
		return true
	})
	return openUntil, backlog
}
