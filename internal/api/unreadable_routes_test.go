package api_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestUnreadableEndpointRoutesAsDocumented: what the operations guide
// (HeraldEndpointValuesDoNotOpen) says each route answers for an endpoint
// whose stored secrets this node's keys do not open. Replaying its dead
// letters was left out of the guide, whose "every other read or change of
// it answers 409" read as if it were refused: it works (it needs none of
// the values), and the deliveries replayed wait, pending, with its others
// until the secrets are replaced. Pausing, resuming and enabling it work
// too (they were refused, needing none of the values).
func TestUnreadableEndpointRoutesAsDocumented(t *testing.T) {
	w := newWorld(t, nil)
	sealed := w.st.Capabilities().Sealed
	var col store.SealedColumn
	for _, c := range store.SealedColumns {
		if c.Table == "endpoints" && c.Column == "secrets" {
			col = c
		}
	}
	old, ok, err := sealed.SealedValue(t.Context(), col, w.epA)
	if err != nil || !ok {
		t.Fatalf("SealedValue: %v %v", ok, err)
	}
	foreign := "enc:v1:" + base64.StdEncoding.EncodeToString([]byte("a value sealed under another key"))
	if ok, err := sealed.ReplaceSealed(t.Context(), col, w.epA, old, foreign); err != nil || !ok {
		t.Fatalf("ReplaceSealed: %v %v", ok, err)
	}
	ep := "/v1/endpoints/" + w.epA
	// The reads that need none of its values, and the replays of its dead
	// letters.
	for _, r := range [][3]string{{"GET", ep, ""}, {"GET", ep + "/stats", ""}, {"GET", ep + "/deliveries?state=dead", ""},
		{"POST", "/v1/deliveries/" + w.dlvA + "/replay", ""}, {"POST", ep + "/replay", `{"state":"dead"}`}} {
		if st, raw := w.call(adminKey, r[0], r[1], r[2]); st != 200 {
			t.Errorf("%s %s = %d %s; want 200", r[0], r[1], st, raw)
		}
	}
	var dl struct{ Data []struct{ State string } }
	_, raw := w.call(adminKey, "GET", ep+"/deliveries", "")
	if err := json.Unmarshal(raw, &dl); err != nil || len(dl.Data) != 2 || dl.Data[0].State != "pending" || dl.Data[1].State != "pending" {
		t.Errorf("its deliveries after the replays: %s; want both pending", raw)
	}
	// Pausing, resuming and enabling need none of its values either (they
	// were refused only because the change read the whole endpoint): they
	// hold and release its deliveries, answering it as GET shows it;
	// another tenant's key still gets 404.
	bravo, _ := w.newKey("manager", "bravo", "")
	acme, _ := w.newKey("manager", "acme", "")
	if st, raw := w.call(bravo, "POST", ep+"/pause", ""); st != 404 {
		t.Errorf("POST %s/pause with another tenant's key = %d %s; want 404", ep, st, raw)
	}
	for _, c := range []struct {
		key, op, state string
		held, released int
	}{
		{adminKey, "pause", "paused", 2, 0},
		{acme, "resume", "enabled", 0, 2},
		{acme, "pause", "paused", 2, 0},
		{adminKey, "enable", "enabled", 0, 2},
	} {
		var out struct {
			Endpoint struct {
				State      string
				Unreadable []string
			}
			Held, Released int
		}
		st, raw := w.call(c.key, "POST", ep+"/"+c.op, "")
		if st == 200 {
			err := json.Unmarshal(raw, &out)
			if err != nil || out.Endpoint.State != c.state || strings.Join(out.Endpoint.Unreadable, ",") != "secrets" || out.Held != c.held || out.Released != c.released {
				t.Errorf("POST %s/%s = %s; want it %s, unreadable [secrets], %d held, %d released", ep, c.op, raw, c.state, c.held, c.released)
			}
		} else {
			t.Errorf("POST %s/%s = %d %s; want 200 (it needs none of the values)", ep, c.op, st, raw)
		}
	}
	// Every other read or change of it: 409 naming the values and the way
	// out.
	for _, r := range [][3]string{{"GET", ep + "/secret", ""}, {"GET", ep + "/secrets", ""}, {"PATCH", ep, `{"description":"x"}`},
		{"POST", ep + "/test", ""}} {
		if st, raw := w.call(adminKey, r[0], r[1], r[2]); st != 409 || !strings.Contains(string(raw), "(secrets;") || !strings.Contains(string(raw), "rotate-secret") {
			t.Errorf("%s %s = %d %s; want 409 naming the secrets and the rotation", r[0], r[1], st, raw)
		}
	}
}
