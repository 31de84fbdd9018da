package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSinceTakesRFC3339: every `since` query parameter takes an RFC 3339
// date-time (§5.6), whose "T" and "Z" may be lower case, as the same
// instant as the upper-case form; anything else is a 422 at query.since
// naming the rule with an example, not Go's layout string.
func TestSinceTakesRFC3339(t *testing.T) {
	w := newWorld(t, nil)
	var ep struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, 201, &ep)
	for _, path := range []string{"/v1/deliveries?since=", "/v1/endpoints/" + ep.ID + "/deliveries?since=", "/v1/dead-letters?since="} {
		for _, v := range []string{"2000-01-01T00:00:00Z", "2000-01-01t00:00:00z", "2000-01-01t01:00:00.5+01:00"} {
			if st, raw := w.call(adminKey, "GET", path+url.QueryEscape(v), ""); st != http.StatusOK {
				t.Errorf("GET %s%s: %d %s; want 200", path, v, st, raw)
			}
		}
		for _, v := range []string{"yesterday", "2000-01-01", "2000-01-01 00:00:00Z", "2000-01-01T00:00:00", "2000-01-01tt00:00:00z"} {
			st, raw := w.call(adminKey, "GET", path+url.QueryEscape(v), "")
			if st != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"location":"query.since"`) ||
				!strings.Contains(string(raw), "RFC 3339") || strings.Contains(string(raw), "2006-01-02") {
				t.Errorf("GET %s%s: %d %s; want 422 at query.since naming RFC 3339", path, v, st, raw)
			}
		}
	}
}
