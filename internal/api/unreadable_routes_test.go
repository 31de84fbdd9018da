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
// until the secrets are replaced.
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
	// Every other read or change of it: 409 naming the values and the way
	// out.
	for _, r := range [][3]string{{"GET", ep + "/secret", ""}, {"GET", ep + "/secrets", ""}, {"PATCH", ep, `{"description":"x"}`},
		{"POST", ep + "/pause", ""}, {"POST", ep + "/resume", ""}, {"POST", ep + "/enable", ""}, {"POST", ep + "/test", ""}} {
		if st, raw := w.call(adminKey, r[0], r[1], r[2]); st != 409 || !strings.Contains(string(raw), "(secrets;") || !strings.Contains(string(raw), "rotate-secret") {
			t.Errorf("%s %s = %d %s; want 409 naming the secrets and the rotation", r[0], r[1], st, raw)
		}
	}
}
