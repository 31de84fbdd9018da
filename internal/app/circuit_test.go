package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/app"
)

// An endpoint's circuit breaker, opened by the engine after the threshold
// of failures in a row, is shown by the API (GET /v1/endpoints/{id} and the
// list) while the other endpoints stay closed. On a fake clock
// (app.Config.Clock): when the cooldown has passed, the endpoint, now
// answering, gets its probe and its circuit closes.
func TestEndpointCircuitFromTheEngine(t *testing.T) {
	var recovered atomic.Bool
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if recovered.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer up.Close()
	// One attempt in flight per endpoint: the breaker counts every attempt
	// that finishes, so with two of the failing endpoint's attempts in
	// flight when the third failure opens the circuit, the fourth failure
	// counts too (4 of 3). Serialized, the circuit opens at exactly 3 and
	// no attempt follows.
	clk := newFakeClock()
	h := startHerald(t, func(c *app.Config) {
		c.Clock = clk
		c.BreakerThreshold, c.BreakerCooldown = 3, time.Hour
		c.EndpointConcurrency = 1
	})
	bad := h.createEndpoint("acme", down.URL+"/hook")
	good := h.createEndpoint("acme", up.URL+"/hook")
	p1 := h.publish("acme", "order.created", `{"n":1}`)
	p2 := h.publish("acme", "order.created", `{"n":2}`)

	// The retries of the 20 ms schedule come as the clock moves on.
	var ep api.EndpointOut
	h.advanceUntil(clk, 20*time.Millisecond, "the failing endpoint's circuit shows open", func() bool {
		h.call("GET", "/v1/endpoints/"+bad.ID, nil, &ep)
		return ep.Circuit != nil && ep.Circuit.State == "open"
	})
	c := ep.Circuit
	if c.ConsecutiveFailures != 3 || c.Threshold != 3 || c.OpenUntil == nil || c.OpenUntil.Sub(clk.Now()) < 59*time.Minute || c.OpenUntil.Sub(clk.Now()) > time.Hour {
		t.Fatalf("open circuit: %+v (open until %v), want 3 of 3 failures, open for about an hour", c, c.OpenUntil)
	}
	var list struct{ Data []api.EndpointOut }
	h.call("GET", "/v1/endpoints", nil, &list)
	states := map[string]string{}
	for _, e := range list.Data {
		if e.Circuit != nil {
			states[e.ID] = e.Circuit.State
		}
	}
	if states[bad.ID] != "open" || states[good.ID] != "closed" {
		t.Fatalf("list circuits %v, want %s open and %s closed", states, bad.ID, good.ID)
	}

	// The endpoint answers again; once the hour has passed on the clock,
	// its probe goes through and the circuit closes.
	recovered.Store(true)
	h.advanceTo(clk, *c.OpenUntil)
	h.advanceUntil(clk, time.Second, "the recovered endpoint's deliveries succeed and its circuit closes", func() bool {
		h.call("GET", "/v1/endpoints/"+bad.ID, nil, &ep)
		if ep.Circuit == nil || ep.Circuit.State != "closed" {
			return false
		}
		for _, p := range []publishResp{p1, p2} {
			for _, d := range h.eventDeliveries(p.ID) {
				if d.EndpointID == bad.ID && d.State != "succeeded" {
					return false
				}
			}
		}
		return true
	})
	if ep.Circuit.ConsecutiveFailures != 0 {
		t.Fatalf("closed circuit after the probe: %+v, want no failures", ep.Circuit)
	}
}

// A half-open circuit's probe holds the endpoint's backlog in the store
// until the probe's deadline, and its success hands the backlog back at
// once: with the clock stopped after the cooldown, every held delivery is
// delivered (without the hand-back they would wait for the deadline, an
// attempt timeout on).
func TestProbeHoldsAndHandsBackTheBacklog(t *testing.T) {
	var recovered atomic.Bool
	probeIn := make(chan struct{}, 1)
	releaseProbe := make(chan struct{})
	var oks atomic.Int32
	var seenMu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !recovered.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		seenMu.Lock()
		seen[r.Header.Get("X-Event-Id")]++
		seenMu.Unlock()
		if oks.Add(1) == 1 { // the probe: in flight until the test lets it answer
			probeIn <- struct{}{}
			<-releaseProbe
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-releaseProbe:
		default:
			close(releaseProbe)
		}
	}()
	clk := newFakeClock()
	const timeout = 10 * time.Second
	h := startHerald(t, func(c *app.Config) {
		c.Clock = clk
		c.BreakerThreshold, c.BreakerCooldown = 1, time.Hour
		// Room for the whole backlog at once: with the clock stopped, a
		// claim deferred at the endpoint's cap would wait for ever.
		c.EndpointConcurrency = 64
		c.AttemptTimeout = timeout
	})
	ep := h.createEndpoint("acme", srv.URL+"/hook")
	first := h.publish("acme", "order.created", `{"n":0}`)
	var out api.EndpointOut
	h.advanceUntil(clk, 20*time.Millisecond, "the circuit opens", func() bool {
		h.call("GET", "/v1/endpoints/"+ep.ID, nil, &out)
		return out.Circuit != nil && out.Circuit.State == "open"
	})
	openUntil := *out.Circuit.OpenUntil
	events := []publishResp{first}
	for i := 1; i <= 30; i++ {
		events = append(events, h.publish("acme", "order.created", fmt.Sprintf(`{"n":%d}`, i)))
	}

	// Every delivery waits for the cooldown's end before the clock jumps
	// there (the claimer's waits run on the clock, so it moves in small
	// steps until then): a claim begun before the jump would lease with a
	// lease the jump expires at once, which no claim outlasts outside a
	// test.
	h.advanceUntil(clk, 20*time.Millisecond, "the deliveries postponed to the cooldown's end", func() bool {
		for _, p := range events {
			for _, d := range h.eventDeliveries(p.ID) {
				if d.State != "pending" || d.NextAttemptAt == nil || d.NextAttemptAt.Before(openUntil) {
					return false
				}
			}
		}
		return true
	})
	recovered.Store(true)
	h.advanceTo(clk, openUntil)
	select {
	case <-probeIn:
	case <-time.After(15 * time.Second): // a hang guard
		t.Fatal("no probe after the cooldown")
	}
	// While the probe is in flight, the other deliveries are held until
	// its deadline: the cooldown's end plus the attempt timeout (and a
	// quarter second's slack).
	holdMin, holdMax := openUntil.Add(timeout), openUntil.Add(timeout+time.Second)
	waitReal(t, "the backlog held until the probe's deadline", func() bool {
		held := 0
		for _, p := range events {
			for _, d := range h.eventDeliveries(p.ID) {
				if d.State == "pending" && d.NextAttemptAt != nil && !d.NextAttemptAt.Before(holdMin) && d.NextAttemptAt.Before(holdMax) {
					held++
				} else {
				}
			}
		}
		return held >= len(events)-1 // all but the probe's (in flight)
	})

	close(releaseProbe)
	stopped := clk.Now()
	waitReal(t, "every held delivery delivered with the clock stopped", func() bool {
		for _, p := range events {
			for _, d := range h.eventDeliveries(p.ID) {
				if d.State != "succeeded" {
					t.Logf("%+v %v now %v", d, d.NextAttemptAt, clk.Now())
					return false
				}
			}
		}
		return true
	})
	if !clk.Now().Equal(stopped) {
		t.Fatalf("the clock moved from %v to %v", stopped, clk.Now())
	}
	if n := oks.Load(); n != int32(len(events)) {
		for id, n := range seen {
			if n > 1 {
				for _, d := range h.eventDeliveries(id) {
					t.Logf("twice: %s %+v attempts %+v", id, d, h.attempts(d.ID))
				}
			}
		}
		t.Fatalf("%d successful attempts, want %d (each delivery once)", n, len(events))
	}
}

// waitReal polls cond for up to 15 s of real time (a hang guard, not a
// speed assertion: loopback I/O and the engine's goroutines run on it).
func waitReal(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
