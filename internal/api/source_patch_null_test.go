package api_test

import "testing"

// TestSourcePatchNullRefused: Herald's PATCH of a source changes the
// fields it gives and keeps those it leaves out; null is neither (Herald
// does not implement JSON Merge Patch, RFC 7396, whose null removes a
// member): every field of a source has a value, so null is refused with
// 422 at the field, saying how to keep it or reset it, and nothing
// changes — with other, valid fields in the same PATCH too.
func TestSourcePatchNullRefused(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/sources/"+w.srcID, "")
	for field, want := range map[string]string{
		"name":              "leave name out to keep it",
		"scheme":            "leave scheme out to keep it",
		"secrets":           "leave secrets out to keep them",
		"destination_url":   "leave destination_url out to keep it",
		"hmac":              "leave hmac out to keep it",
		"tolerance_seconds": "send 0 for the default",
		"max_body_bytes":    "send 0 for the default",
		"dedupe":            `send "" for the scheme's own`,
	} {
		for _, body := range []string{`{"` + field + `":null}`, `{"name":"renamed","` + field + `":null}`} {
			if field == "name" && body != `{"name":null}` {
				continue
			}
			st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+w.srcID, body)
			wantOneRefusal(t, "PATCH "+body, st, raw, "body."+field, "null", want)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+w.srcID, ""); string(after) != string(before) {
		t.Errorf("PATCHes with null changed the source:\n%s\nwant\n%s", after, before)
	}
}
