package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/store"
)

// sealedSnapshot returns every stored value of every sealed column
// (store.SealedColumns), as stored: a value sealed again, even with the
// same key, differs (a new nonce), and a new row adds one.
func sealedSnapshot(t *testing.T, h *herald) []string {
	t.Helper()
	sealed := h.m.Store().Capabilities().Sealed
	if sealed == nil {
		t.Fatalf("%T declares no Capabilities.Sealed", h.m.Store())
	}
	var out []string
	for _, c := range store.SealedColumns {
		after := ""
		for {
			rows, err := sealed.SealedValues(context.Background(), c, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				out = append(out, c.Table+"."+c.Column+" "+r.Key+" "+r.Value)
			}
			if len(rows) < 100 {
				break
			}
			after = rows[len(rows)-1].Key
		}
	}
	return out
}

// TestStaleSealingKeyRefusesSealingWrites: after herald rekey moved the
// database's sealed values to a key this node lacks, the node went on
// sealing new values with its old key (a new endpoint's secret, a
// rotation, a changed source…), values that no node holding only the
// current key can open, once it knew its key was stale (its key check,
// the one /readyz runs, kept 10 s). Every write that would seal a value
// is now refused with 503 naming the rule, and nothing is stored (every
// sealed value as it was, no new row); reads and publishes go on. The
// node's clock is fake: the key check's result is kept 10 s of it, so the
// test writes with a verdict still "current" (the endpoint and source it
// then changes are sealed with the old key, readable by this node), then
// moves the clock past the 10 s and sees the next check find the key
// stale. Without the refusal every one of these writes succeeds.
func TestStaleSealingKeyRefusesSealingWrites(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) { c.Clock = clk })
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 200 { // the key check: current, kept 10 s
		t.Fatalf("readyz: %d %s", st, raw)
	}
	early := h.createSource(map[string]any{"name": "early", "scheme": "github", "secrets": []string{"s3cret-0123456789ab"}, "destination_url": newReceiver(t, 200).URL})
	back := rekeyAway(t, h, oldKey)

	// Within those 10 s the node does not know yet: what it seals is under
	// its old key (the window the key check's interval leaves).
	rcv := newReceiver(t, 200).URL
	ep := h.createEndpoint("acme", rcv)
	if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", map[string]any{"overlap_seconds": 3600}, nil); st != 200 {
		t.Fatalf("rotate within the key check's interval: %d %s", st, raw)
	}
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"s3cret-0123456789ab"}, "destination_url": rcv})
	var secrets struct {
		Data []struct {
			ID      string `json:"id"`
			Current bool   `json:"current"`
		} `json:"data"`
	}
	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID+"/secrets", nil, &secrets); st != 200 || len(secrets.Data) != 2 {
		t.Fatalf("secrets: %d %s; want two", st, raw)
	}
	older := secrets.Data[1].ID

	clk.Advance(11 * time.Second) // the key check runs again at the next write
	before := sealedSnapshot(t, h)
	for _, w := range []struct{ name, method, path, body string }{
		{"create endpoint", "POST", "/v1/endpoints", `{"tenant":"acme","url":"` + rcv + `"}`},
		{"update endpoint", "PATCH", "/v1/endpoints/" + ep.ID, `{"description":"changed"}`},
		{"update endpoint headers", "PATCH", "/v1/endpoints/" + ep.ID, `{"headers":{"X-Token":"t0ken"}}`},
		{"rotate secret", "POST", "/v1/endpoints/" + ep.ID + "/rotate-secret", `{}`},
		{"revoke secret", "DELETE", "/v1/endpoints/" + ep.ID + "/secrets/" + older, ""},
		{"create source", "POST", "/v1/sources", `{"name":"gh2","scheme":"github","secrets":["s3cret-0123456789ab"],"destination_url":"` + rcv + `"}`},
		{"update source", "PATCH", "/v1/sources/" + src.ID, `{"secrets":["n3w-s3cret-0123456789"]}`},
	} {
		var body any
		if w.body != "" {
			body = w.body
		}
		st, raw := h.call(w.method, w.path, body, nil)
		if st != 503 || !strings.Contains(string(raw), "sealing key is older than the database") || !strings.Contains(string(raw), "restart this node with the current key") {
			t.Errorf("%s on a node whose key is stale: %d %s; want 503 naming the rule", w.name, st, raw)
		}
	}
	if after := sealedSnapshot(t, h); !slices.Equal(before, after) {
		t.Errorf("refused writes changed sealed values:\nbefore %q\nafter  %q", before, after)
	}
	if !strings.Contains(api.StaleSealingKeyMessage, "nothing was changed") {
		t.Errorf("the refusal does not say nothing was changed: %q", api.StaleSealingKeyMessage)
	}

	// Reads go on as before (this endpoint's values are under the node's
	// key), and publishes, which seal nothing.
	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID+"/secret", nil, nil); st != 200 {
		t.Errorf("reading the endpoint's secret: %d %s", st, raw)
	}
	if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, nil); st != 200 {
		t.Errorf("reading the source: %d %s", st, raw)
	}
	// A source sealed before the rekey is under the key the node lacks:
	// reading or listing it answers it marked, without its configuration
	// (not 503 "retry later", nor a 409 failing the whole list), and a
	// change of it answers the stale node's 503 (restart it with the
	// current key), never the advice to replace or recreate it
	// (TestStaleNodeSourceAdviceIsItsKey).
	for _, path := range []string{"/v1/sources/" + early.ID, "/v1/sources"} {
		if st, raw := h.call("GET", path, nil, nil); st != 200 || !strings.Contains(string(raw), `"unreadable":["config"]`) || strings.Contains(string(raw), "s3cret") {
			t.Errorf("GET %s with a source the node's key does not open: %d %s; want 200, the source marked unreadable [config]", path, st, raw)
		}
	}
	if st, raw := h.call("PATCH", "/v1/sources/"+early.ID, `{"name":"renamed"}`, nil); st != 503 || !strings.Contains(string(raw), "restart this node with the current key") {
		t.Errorf("PATCH of a source the node's key does not open: %d %s; want 503 naming the node's key", st, raw)
	}
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"after.rekey","data":{}}`, nil); st != 202 {
		t.Errorf("publish: %d %s; want 202", st, raw)
	}

	// With the key current again (the rekey undone), the writes go through.
	back()
	clk.Advance(11 * time.Second)
	if st, raw := h.call("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"changed"}`, nil); st != 200 {
		t.Errorf("update once the node's key is current again: %d %s", st, raw)
	}
}
