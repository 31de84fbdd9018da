package app_test

import (
	"net/http"
	"net/http/httptest"
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
	advanceTo(clk, *c.OpenUntil)
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
