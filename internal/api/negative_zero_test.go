package api_test

import (
	"strings"
	"testing"
)

// TestIntegerNegativeZeroRefused: -0 is a second spelling of 0, refused
// like 0.0 and 0e0 at the field with the plain-digits rule.
func TestIntegerNegativeZeroRefused(t *testing.T) {
	w := newWorld(t, nil)
	for _, body := range []string{`{"tolerance_seconds":-0}`, `{"max_body_bytes":-0}`} {
		st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+w.srcID, body)
		loc := "body." + strings.Split(body[2:], `"`)[0]
		wantOneRefusal(t, "PATCH "+body, st, raw, loc, "plain digits")
	}
	st, raw := w.call(adminKey, "PATCH", "/v1/endpoints/"+w.epA, `{"rate_limit_per_second":-0}`)
	wantOneRefusal(t, "PATCH rate_limit_per_second -0", st, raw, "body.rate_limit_per_second", "plain digits")
}

// TestNegativeZeroInFreeFormDataAccepted: an event's data is the
// producer's JSON, kept as sent (its own numbers, any spelling): a -0 there,
// at any depth, is no integer field of the request and the publish is
// accepted.
func TestNegativeZeroInFreeFormDataAccepted(t *testing.T) {
	w := newWorld(t, nil)
	for _, data := range []string{`{"a":-0}`, `{"a":[1,-0],"b":{"c":-0}}`} {
		body := `{"tenant":"acme","type":"order.placed","data":` + data + `}`
		if st, raw := w.call(adminKey, "POST", "/v1/events", body); st != 202 {
			t.Errorf("publish %s = %d %s; want 202", body, st, raw)
		}
	}
}
