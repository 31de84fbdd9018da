package api_test

import (
	"strings"
	"testing"
)

// TestSourceRulesRefused: settings of a source that name no working rule
// are refused with 422 at their field, saying what a valid one looks like,
// on a create and on a PATCH, and nothing changes.
func TestSourceRulesRefused(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/sources", "")
	for _, c := range []struct{ field, value, want string }{
		// RFC 6901's empty pointer is the whole document, not an id.
		{"dedupe", `"json:"`, "json:/id"},
		// …and the empty rule it points to is not an event id everywhere.
		{"dedupe", `"json:"`, "an empty rule is the scheme's own (its event id; the SHA-256 of the body for github, shopify and hmac)"},
		// A body cap below 1 KiB refuses nearly every real provider's event.
		{"max_body_bytes", `1`, "1024 (1 KiB"},
		{"max_body_bytes", `1023`, "1024 (1 KiB"},
	} {
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/v1/sources", `{"name":"x","scheme":"hmac","hmac":{"header":"X-Sig"},"secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.3/in","` + c.field + `":` + c.value + `}`},
			{"PATCH", "/v1/sources/" + w.srcID, `{"` + c.field + `":` + c.value + `}`},
		} {
			st, got := w.call(adminKey, req.method, req.path, req.body)
			if st != 422 || !strings.Contains(string(got), `"location":"body.`+c.field+`"`) || !strings.Contains(string(got), c.want) {
				t.Errorf("%s %s %s = %d %s; want 422 at body.%s saying %q", req.method, req.path, req.body, st, got, c.field, c.want)
			}
		}
	}
	// A source has no headers: the userinfo refusal points to what
	// authenticates its forwards instead.
	if st, got := w.call(adminKey, "PATCH", "/v1/sources/"+w.srcID, `{"destination_url":"http://user:pw@10.0.0.3/in"}`); st != 422 || strings.Contains(string(got), "use a header") || !strings.Contains(string(got), "authenticate with their signature") {
		t.Errorf("a destination with userinfo = %d %s; want 422 without advice a source cannot follow", st, got)
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); string(after) != string(before) {
		t.Errorf("refused settings changed the sources:\n%s\nwant\n%s", after, before)
	}
	// The smallest cap is accepted.
	var src struct {
		MaxBodyBytes int64 `json:"max_body_bytes"`
	}
	w.mustCall(adminKey, "PATCH", "/v1/sources/"+w.srcID, `{"max_body_bytes":1024}`, 200, &src)
	if src.MaxBodyBytes != 1024 {
		t.Errorf("max_body_bytes 1024 stored as %d", src.MaxBodyBytes)
	}
}
