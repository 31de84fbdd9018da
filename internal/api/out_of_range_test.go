package api_test

import (
	"bytes"
	"strings"
	"testing"
)

// TestNumberPastFloatRangeLocatedAtField: a number too large for a 64-bit
// float (1e400, -1e999), which no decoder reads, answers 422 with one
// error per such number at its field (members and array items as huma
// locates them), naming the field's rule where it has one, as an integer
// out of range is, not 400 "malformed JSON" for the whole body; nothing
// is stored.
func TestNumberPastFloatRangeLocatedAtField(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		name, method, path, body, get string
		want                          []string // location, then a text its message holds, per error
	}{
		{"endpoint rate limit", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://big.example/hook","rate_limit_per_second":1e400}`, "/v1/endpoints?tenant=acme",
			[]string{"body.rate_limit_per_second", "rate_limit_per_second must be an integer number of attempts per second from 0 (unlimited) to 100000"}},
		{"publish data, in an array", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{"x":[1,{"y":1e400}]}}`, "/v1/events?tenant=acme",
			[]string{"body.data.x[1].y", "number 1e400 is out of range"}},
		{"source, two numbers", "PATCH", "/v1/sources/" + w.srcID, `{"tolerance_seconds":1e400,"max_body_bytes":-1e999}`, "/v1/sources/" + w.srcID,
			[]string{"body.tolerance_seconds", "tolerance_seconds must be an integer number of seconds", "body.max_body_bytes", "max_body_bytes must be an integer number of bytes"}},
	} {
		_, before := w.call(adminKey, "GET", c.get, "")
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		if st != 422 {
			t.Errorf("%s = %d %s; want 422 at the field", c.name, st, raw)
			continue
		}
		errs := problemErrors(t, raw)
		if len(errs) != len(c.want)/2 {
			t.Errorf("%s = %s; want %d errors", c.name, raw, len(c.want)/2)
			continue
		}
		for i, e := range errs {
			if e.Location != c.want[2*i] || !strings.Contains(e.Message, c.want[2*i+1]) {
				t.Errorf("%s: error %d at %s: %q; want at %s saying %q", c.name, i, e.Location, e.Message, c.want[2*i], c.want[2*i+1])
			}
		}
		if _, after := w.call(adminKey, "GET", c.get, ""); !bytes.Equal(before, after) {
			t.Errorf("%s changed %s", c.name, c.get)
		}
	}
}
