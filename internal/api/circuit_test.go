package api_test

import (
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
)

// TestEndpointCircuit: with Config.Circuit (the engine's breakers) the
// endpoint list and read show each endpoint's circuit as the node sees
// it; without it the field is omitted.
func TestEndpointCircuit(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var open string // the endpoint whose circuit is open
	w := newWorld(t, func(c *api.Config) {
		c.Circuit = func(id string) api.CircuitOut {
			if id == open {
				return api.CircuitOut{State: "open", ConsecutiveFailures: 5, Threshold: 5, OpenUntil: &until}
			}
			return api.CircuitOut{State: "closed", Threshold: 5}
		}
	})
	open = w.epA
	var one api.EndpointOut
	w.mustCall(adminKey, "GET", "/v1/endpoints/"+w.epA, "", 200, &one)
	if c := one.Circuit; c == nil || c.State != "open" || c.ConsecutiveFailures != 5 || c.OpenUntil == nil || !c.OpenUntil.Equal(until) {
		t.Fatalf("GET endpoint: circuit %+v, want open until %v", c, until)
	}
	var list struct{ Data []api.EndpointOut }
	w.mustCall(adminKey, "GET", "/v1/endpoints", "", 200, &list)
	states := map[string]string{}
	for _, e := range list.Data {
		if e.Circuit == nil {
			t.Fatalf("list: endpoint %s without circuit", e.ID)
		}
		states[e.ID] = e.Circuit.State
	}
	if states[w.epA] != "open" || states[w.epB] != "closed" {
		t.Fatalf("list: circuits %v, want %s open and %s closed", states, w.epA, w.epB)
	}

	plain := newWorld(t, nil)
	var e api.EndpointOut
	plain.mustCall(adminKey, "GET", "/v1/endpoints/"+plain.epA, "", 200, &e)
	if e.Circuit != nil {
		t.Fatalf("without Config.Circuit: circuit %+v, want omitted", e.Circuit)
	}
}
