package api_test

import "testing"

// TestEndpointPatchNullRefused: an endpoint's PATCH, like a source's
// (TestSourcePatchNullRefused), changes the fields it gives and keeps those
// it leaves out; null removes nothing (Herald does not implement JSON
// Merge Patch, RFC 7396), so a member given null is refused with 422 at
// the field, saying how to keep it or what to send instead, and nothing
// changes — with other, valid fields in the same PATCH too.
func TestEndpointPatchNullRefused(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/endpoints/"+w.epA, "")
	for field, want := range map[string]string{
		"url":                   "leave url out to keep it",
		"event_types":           "send [] for every event type",
		"versions":              "send {} to change none",
		"description":           `send "" for none`,
		"headers":               "send {} for none",
		"rate_limit_per_second": "send 0 for no limit",
	} {
		for _, body := range []string{`{"` + field + `":null}`, `{"description":"changed","` + field + `":null}`} {
			if field == "description" && body != `{"description":null}` {
				continue
			}
			st, raw := w.call(adminKey, "PATCH", "/v1/endpoints/"+w.epA, body)
			wantOneRefusal(t, "PATCH "+body, st, raw, "body."+field, "cannot be null", want)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/endpoints/"+w.epA, ""); string(after) != string(before) {
		t.Errorf("PATCHes with null changed the endpoint:\n%s\nwant\n%s", after, before)
	}
}
