package api_test

import (
	"strings"
	"testing"
)

// TestEveryProblemHasAType: the API's problems have one shape whoever
// builds them — huma's schema refusals (422), Herald's own rule refusals
// (422), store errors (404), the mux's own answers (404 no route, 401) —
// type about:blank first, then title, status and detail (RFC 9457
// §3.1.1), as the inbound gateway's; huma's left type out.
func TestEveryProblemHasAType(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		name, key, method, path, body string
		status                        int
	}{
		{"schema refusal", adminKey, "POST", "/v1/endpoints", `{"url":5}`, 422},
		{"Herald's rule", adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1/x"}`, 422},
		{"store error", adminKey, "GET", "/v1/endpoints/ep_nonexistent", "", 404},
		{"no route", adminKey, "GET", "/v1/nothing-here", "", 404},
		{"no key", "", "GET", "/v1/endpoints", "", 401},
	} {
		st, raw := w.call(c.key, c.method, c.path, c.body)
		if st != c.status || !strings.HasPrefix(string(raw), `{"type":"about:blank","title":`) || !strings.Contains(string(raw), `"status":`) {
			t.Errorf("%s: %d %s; want %d, a problem starting with type about:blank and its title", c.name, st, raw, c.status)
		}
	}
}
