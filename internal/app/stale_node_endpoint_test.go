package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
)

// TestStaleNodeUnreadableEndpoint: what docs/production.md ("A node whose
// key is stale seals nothing") and docs/operations.md
// (HeraldEndpointValuesDoNotOpen) say a node whose key is stale answers
// for an endpoint sealed since the rekey, whose values its keys do not
// open. docs/production.md said every operation but the reads answered
// 409, while the code (and docs/operations.md) lets the state changes
// through: pausing, resuming and enabling it need none of its values and
// seal nothing. Its secret is 409 (the values do not open); a rotation,
// which would seal, is the stale node's 503; a delete works.
func TestStaleNodeUnreadableEndpoint(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) { c.Clock = clk })
	ep := h.createEndpoint("acme", newReceiver(t, 200).URL)
	rekeyAway(t, h, oldKey)
	clk.Advance(11 * time.Second) // past the key check's 10 s: the node knows its key is stale
	base := "/v1/endpoints/" + ep.ID
	if st, raw := h.call("GET", base, nil, nil); st != 200 || !strings.Contains(string(raw), `"unreadable":["secrets"]`) {
		t.Errorf("GET %s: %d %s; want 200 naming the unreadable secrets", base, st, raw)
	}
	for _, op := range []struct{ path, state string }{{"/pause", "paused"}, {"/resume", "enabled"}, {"/pause", "paused"}, {"/enable", "enabled"}} {
		if st, raw := h.call("POST", base+op.path, nil, nil); st != 200 || !strings.Contains(string(raw), `"state":"`+op.state+`"`) {
			t.Errorf("POST %s%s on the stale node: %d %s; want 200, state %s", base, op.path, st, raw, op.state)
		}
	}
	if st, raw := h.call("GET", base+"/secret", nil, nil); st != 409 {
		t.Errorf("GET %s/secret on the stale node: %d %s; want 409 naming the values", base, st, raw)
	}
	if st, raw := h.call("POST", base+"/rotate-secret", map[string]any{}, nil); st != 503 || !strings.Contains(string(raw), "restart this node with the current key") {
		t.Errorf("rotate-secret on the stale node: %d %s; want 503 naming the node's key", st, raw)
	}
	if st, raw := h.call("PATCH", base, `{"description":"changed"}`, nil); st != 503 || !strings.Contains(string(raw), "restart this node with the current key") {
		t.Errorf("PATCH %s on the stale node: %d %s; want 503 naming the node's key", base, st, raw)
	}
	if st, raw := h.call("DELETE", base, nil, nil); st != 204 {
		t.Errorf("DELETE %s on the stale node: %d %s; want 204", base, st, raw)
	}
}
