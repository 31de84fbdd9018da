package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
)

// TestEndpointStats: the world's two dead-lettered attempts per endpoint
// shows in its endpoint's stats (to the admin and to a viewer portal of its
// tenant, never to another tenant), with the circuit breaker the engine reports; a
// bad window answers 422 naming the allowed values and changes nothing.
func TestEndpointStats(t *testing.T) {
	openUntil := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWorld(t, func(c *api.Config) {
		c.Circuit = func(id string) api.CircuitOut {
			return api.CircuitOut{State: "open", ConsecutiveFailures: 5, Threshold: 5, OpenUntil: &openUntil}
		}
	})
	var out api.EndpointStatsOut
	w.mustCall(adminKey, "GET", "/v1/endpoints/"+w.epA+"/stats?window=1h", "", 200, &out)
	if out.Attempts != 2 || out.Failures != 2 || out.DeadLetters != 2 || out.AttemptsByStatusFamily["5xx"] != 2 ||
		out.FailuresByClass["http_status"] != 2 || out.SuccessRate == nil || *out.SuccessRate != 0 || out.Window != "1h" ||
		out.LastFailureAt == nil || out.LastSuccessAt != nil || out.Duration.P50Ms == nil || *out.Duration.P50Ms != 5 ||
		len(out.Duration.Counts) != len(out.Duration.BucketsMs)+1 {
		t.Fatalf("stats: %+v", out)
	}
	if c := out.Circuit; c == nil || c.State != "open" || c.OpenUntil == nil || !c.OpenUntil.Equal(openUntil) || c.ConsecutiveFailures != 5 {
		t.Fatalf("circuit: %+v", out.Circuit)
	}
	viewer := w.portal("acme", "viewer", 600)
	w.mustCall(viewer, "GET", "/v1/endpoints/"+w.epA+"/stats", "", 200, &out)
	if out.Window != "24h" || out.Attempts != 2 {
		t.Fatalf("viewer, default window: %+v", out)
	}
	if st, _ := w.call(viewer, "GET", "/v1/endpoints/"+w.epB+"/stats", ""); st != 404 {
		t.Fatalf("another tenant's stats: %d, want 404", st)
	}
	st, body := w.call(adminKey, "GET", "/v1/endpoints/"+w.epA+"/stats?window=2h", "")
	if st != 422 || !strings.Contains(string(body), "1h, 24h, 7d") || !strings.Contains(string(body), "window") {
		t.Fatalf("window=2h: %d %s, want 422 naming 1h, 24h, 7d", st, body)
	}
}
