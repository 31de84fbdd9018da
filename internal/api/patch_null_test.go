package api_test

import (
	"strings"
	"testing"
)

// TestPatchNullRefused: Herald's PATCH of a source or an endpoint changes
// the fields it gives and keeps those it leaves out; null is neither
// (Herald does not implement JSON Merge Patch, RFC 7396, whose null
// removes a member): every field has a value, so a member given null is
// refused with 422 at the field, saying how to keep it or what to send
// instead, and nothing changes — with other, valid fields in the same
// PATCH too.
func TestPatchNullRefused(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		path  string
		valid string // a valid member, sent beside each null
		wants map[string]string
	}{
		{"/v1/sources/" + w.srcID, `"name":"renamed"`, map[string]string{
			"name":              "leave name out to keep it",
			"scheme":            "leave scheme out to keep it",
			"secrets":           "leave secrets out to keep them",
			"destination_url":   "leave destination_url out to keep it",
			"hmac":              "leave hmac out to keep it",
			"tolerance_seconds": "send 0 for the default",
			"max_body_bytes":    "send 0 for the default",
			"dedupe":            `send "" for the scheme's own`,
		}},
		{"/v1/endpoints/" + w.epA, `"description":"changed"`, map[string]string{
			"url":                   "leave url out to keep it",
			"event_types":           "send [] for every event type",
			"versions":              "send {} to change none",
			"description":           `send "" for none`,
			"headers":               "send {} for none",
			"rate_limit_per_second": "send 0 for no limit",
		}},
	} {
		_, before := w.call(adminKey, "GET", c.path, "")
		for field, want := range c.wants {
			bodies := []string{`{"` + field + `":null}`}
			if !strings.HasPrefix(c.valid, `"`+field+`"`) {
				bodies = append(bodies, `{`+c.valid+`,"`+field+`":null}`)
			}
			for _, body := range bodies {
				st, raw := w.call(adminKey, "PATCH", c.path, body)
				wantOneRefusal(t, "PATCH "+c.path+" "+body, st, raw, "body."+field, "cannot be null", want)
			}
		}
		if _, after := w.call(adminKey, "GET", c.path, ""); string(after) != string(before) {
			t.Errorf("PATCHes of %s with null changed it:\n%s\nwant\n%s", c.path, after, before)
		}
	}
}
