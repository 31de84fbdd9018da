package delivery

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// switchSender answers 503 while down, 204 once up, and counts the
// successful attempts.
type switchSender struct {
	up atomic.Bool
	ok atomic.Int32
}

func (s *switchSender) Do(context.Context, egress.Request) egress.Result {
	if !s.up.Load() {
		return egress.Result{StatusCode: 503, Duration: time.Millisecond}
	}
	s.ok.Add(1)
	return egress.Result{StatusCode: 204, Duration: time.Millisecond}
}

// An operator pauses an endpoint whose circuit opened (the receiver is
// down), fixes the receiver and resumes it: the released deliveries are
// attempted at once (docs/operations.md, "resume"), as the answer's
// "released" promises. They used to wait for the circuit's cooldown: the
// engine's in-memory circuit stayed open and deferred each released claim
// to its end (circuit_open). The clock never moves past the cooldown here.
func TestResumeClosesTheCircuit(t *testing.T) {
	for _, db := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			sq, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			return sq
		}},
		// No EndpointChanges there: each node learns of the resume from the
		// endpoint its claims read.
		{"postgres", func(t *testing.T) store.Store { return postgresStore(t) }},
	} {
		for _, change := range []struct {
			name  string
			pause store.EndpointState
		}{{"pause and resume", store.EndpointPaused}, {"disable and enable", store.EndpointDisabled}} {
			t.Run(db.name+"/"+change.name, func(t *testing.T) {
				testResumeClosesTheCircuit(t, db.open(t), change.pause)
			})
		}
	}
}

func testResumeClosesTheCircuit(t *testing.T, sq store.Store, pause store.EndpointState) {
	clk := clock.NewFake(t0)
	snd := &switchSender{}
	ep := holdEndpoint("ep_resume")
	if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	const cooldown = 30 * time.Second
	e, err := New(Config{Store: sq, Sender: snd, Clock: clk, Workers: 8, EndpointConcurrency: 8, TenantConcurrency: 8, HostConcurrency: 8, BreakerThreshold: 1, BreakerCooldown: cooldown,
		PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: sq.Capabilities().EndpointChanges})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	defer func() { cancel(); <-done }()

	// The receiver is down: a failure opens the circuit. A backlog,
	// postponed to the cooldown's end. The caps take it all at once: a
	// claim turned away at a cap would come back a few milliseconds later
	// on a clock that does not move.
	openUntil, backlog := openCircuitWithBacklog(t, e, sq, ep.ID, 5)
	// The operator pauses the endpoint, fixes the receiver, resumes
	// it, a second later: well within the cooldown.
	clk.Advance(time.Second)
	if _, held, err := sq.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: pause, Now: clk.Now()}); err != nil || held < len(backlog) {
		t.Fatalf("pause: held %d, %v; want at least %d", held, err, len(backlog))
	}
	snd.up.Store(true)
	clk.Advance(time.Second)
	_, released, err := sq.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: clk.Now()})
	if err != nil || released < len(backlog) {
		t.Fatalf("resume: released %d, %v; want at least %d", released, err, len(backlog))
	}
	e.Notify()
	if !clk.Now().Before(openUntil) {
		t.Fatalf("the clock (%v) passed the cooldown's end (%v): the test proves nothing", clk.Now(), openUntil)
	}
	waitFor(t, "the released backlog delivered before the cooldown's end", func() bool {
		n := 0
		for _, d := range holdDeliveries(t, sq, ep.ID) {
			if backlog[d.EventID] && d.State == store.DeliverySucceeded {
				n++
			}
		}
		return n == len(backlog)
	})
	if cs := e.Circuit(ep.ID); cs.State != CircuitClosed || cs.Failures != 0 {
		t.Errorf("circuit after the resume and the successes: %+v, want closed with no failures", cs)
	}
}

// What closes a circuit from a claim: the claimed endpoint changed since
// the node last saw it (a newer UpdatedAt) and the store has no failure
// streak for it (a resume, an enable, a new URL clear it). A change that
// keeps the streak (a description, a secret rotation) and an older copy
// of the endpoint (a claim made before the change) leave it open.
func TestCircuitClosesOnlyOnANewStreak(t *testing.T) {
	g := newScheduler(10, 10, 1, 30*time.Second, time.Second)
	key := func(updated time.Time, failing bool) admitKey {
		return admitKey{endpoint: "ep", tenant: "t", url: "https://h.example/", updated: updated, newStreak: !failing}
	}
	admit := func(k admitKey, now time.Time) (bool, string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		ok, _, reason := g.admitLocked(k, now)
		return ok, reason
	}
	if ok, _ := admit(key(t0, false), t0); !ok {
		t.Fatal("first attempt refused")
	}
	if _, opened := g.done("ep", true, time.Second, t0); !opened {
		t.Fatal("the failure did not open the circuit")
	}
	now := t0.Add(5 * time.Second)
	for _, c := range []struct {
		what string
		k    admitKey
	}{
		{"the same copy", key(t0, true)},
		{"an older copy without a streak (claimed before the failures were recorded)", key(t0.Add(-time.Hour), false)},
		{"a newer copy that keeps the streak (an update, a rotation)", key(t0.Add(2*time.Second), true)},
	} {
		if ok, reason := admit(c.k, now); ok || reason != reasonCircuitOpen {
			t.Fatalf("%s: ok=%v reason=%q, want deferred for circuit_open", c.what, ok, reason)
		}
	}
	// The streak-keeping copy at 2 s is now the newest seen: a resume must
	// be newer still.
	if ok, reason := admit(key(t0.Add(time.Second), false), now); ok || reason != reasonCircuitOpen {
		t.Fatalf("a copy older than one seen: ok=%v reason=%q, want circuit_open", ok, reason)
	}
	if ok, reason := admit(key(t0.Add(3*time.Second), false), now); !ok {
		t.Fatalf("after a resume (newer copy, no streak): refused (%s), want the circuit closed", reason)
	}
	if cs := g.circuit("ep", now); cs.State != CircuitClosed || cs.Failures != 0 {
		t.Fatalf("after a resume: circuit %+v, want closed with no failures", cs)
	}
}
