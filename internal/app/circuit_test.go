package app_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/app"
)

// An endpoint's circuit breaker, opened by the engine after the threshold
// of failures in a row, is shown by the API (GET /v1/endpoints/{id} and the
// list) while the other endpoints stay closed.
func TestEndpointCircuitFromTheEngine(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer up.Close()
	h := startHerald(t, func(c *app.Config) { c.BreakerThreshold, c.BreakerCooldown = 3, time.Hour })
	bad := h.createEndpoint("acme", down.URL+"/hook")
	good := h.createEndpoint("acme", up.URL+"/hook")
	h.publish("acme", "order.created", `{"n":1}`)
	h.publish("acme", "order.created", `{"n":2}`)

	var ep api.EndpointOut
	for deadline := time.Now().Add(20 * time.Second); ; {
		h.call("GET", "/v1/endpoints/"+bad.ID, nil, &ep)
		if ep.Circuit != nil && ep.Circuit.State == "open" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failing endpoint's circuit never showed open: %+v", ep.Circuit)
		}
		time.Sleep(20 * time.Millisecond) // polling a state change, not timing anything
	}
	c := ep.Circuit
	if c.ConsecutiveFailures != 3 || c.Threshold != 3 || c.OpenUntil == nil || time.Until(*c.OpenUntil) < 50*time.Minute {
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
}
