package api_test

import "testing"

// TestSourceDedupePointerToArrayEnd: in an array, RFC 6901 §4's "-"
// designates the nonexistent element after the last, so a json: rule
// with a "-" reference token never finds an id (every event would be
// deduped on its body's SHA-256 instead): refused at body.dedupe when it
// is saved. Other pointers, a member name with spaces included, are kept.
func TestSourceDedupePointerToArrayEnd(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/sources", "")
	for _, rule := range []string{"json:/-", "json:/data/items/-", "json:/items/-/id"} {
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/v1/sources", `{"name":"x","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.3/in","dedupe":"` + rule + `"}`},
			{"PATCH", "/v1/sources/" + w.srcID, `{"dedupe":"` + rule + `"}`},
		} {
			st, raw := w.call(adminKey, req.method, req.path, req.body)
			wantOneRefusal(t, req.method+" "+rule, st, raw, "body.dedupe", `"-"`, "RFC 6901 §4", "json:/items/0")
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); string(after) != string(before) {
		t.Errorf("refused rules changed the sources:\n%s\nwant\n%s", after, before)
	}
	for _, rule := range []string{"json:/id ", "json:/a b/-x", "json:/x/~1-", "json:/data/items/0/id"} {
		var src struct{ Dedupe string }
		w.mustCall(adminKey, "PATCH", "/v1/sources/"+w.srcID, `{"dedupe":"`+rule+`"}`, 200, &src)
		if src.Dedupe != rule {
			t.Errorf("dedupe %q stored as %q", rule, src.Dedupe)
		}
	}
}
