package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// A refused replay form (a time that is not one, nothing selected) comes
// back on the dead letters page it was sent from: the error names the
// field by its label, the times typed are kept, and nothing is replayed.
// It used to answer a bare "422 Unprocessable Entity" page that named no
// field and lost the form.
func TestRefusedReplayFormsComeBackOnTheDeadLettersPage(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep)
	for range 2 {
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, nil); st != 202 {
			t.Fatalf("publish: %d", st)
		}
	}
	f.attemptAll(2, time.Now().UTC(), func(int, store.Claim) (store.DeliveryState, int) { return store.DeliveryDead, 500 })
	b, token := adminBrowser(t, f)
	dead := func() int {
		var l struct{ Data []api.DeadLetterCountOut }
		f.apiCall(adminKey, "GET", "/v1/dead-letters", "", &l)
		n := 0
		for _, x := range l.Data {
			n += x.Count
		}
		return n
	}
	for _, tc := range []struct {
		name        string
		form        url.Values
		want        []string
		since, till string
	}{
		{"since not a time", url.Values{"scope": {"range"}, "since": {"yesterday"}},
			[]string{"Dead-lettered since: &#34;yesterday&#34; is not a time"}, "yesterday", ""},
		{"until not a time", url.Values{"scope": {"range"}, "since": {"2026-01-02T15:04"}, "until": {"soon"}},
			[]string{"Until: &#34;soon&#34; is not a time"}, "2026-01-02T15:04", "soon"},
		{"both not times", url.Values{"scope": {"range"}, "since": {"x"}, "until": {"y"}},
			[]string{"Dead-lettered since: &#34;x&#34;", "; Until: &#34;y&#34;"}, "x", "y"},
		{"inverted", url.Values{"scope": {"range"}, "since": {"2026-01-02T16:00"}, "until": {"2026-01-02T15:00"}},
			[]string{"Until must be after Dead-lettered since"}, "2026-01-02T16:00", "2026-01-02T15:00"},
		{"nothing selected", url.Values{"endpoint": {ep.ID}},
			[]string{"Select at least one dead letter"}, "", ""},
	} {
		tc.form.Set("csrf", token)
		w := b.do("POST", "/ui/dead-letters/replay", tc.form)
		body := w.Body.String()
		if w.Code != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d, want 422", tc.name, w.Code)
		}
		for _, want := range tc.want {
			if !strings.Contains(body, want) {
				t.Fatalf("%s: the page does not say %q:\n%s", tc.name, want, body)
			}
		}
		if !strings.Contains(body, `id="replay-range"`) || !strings.Contains(body, `data-testid="dead-letters"`) || !strings.Contains(body, `class="error"`) {
			t.Fatalf("%s: not the dead letters page with its error:\n%s", tc.name, body)
		}
		if !strings.Contains(body, `name="since" value="`+tc.since+`"`) || !strings.Contains(body, `name="until" value="`+tc.till+`"`) {
			t.Fatalf("%s: the times typed are not kept:\n%s", tc.name, body)
		}
		if tc.form.Get("endpoint") != "" && !strings.Contains(body, "Dead letters of <a href=\"/ui/endpoints/"+ep.ID) {
			t.Fatalf("%s: not the endpoint's dead letters page", tc.name)
		}
		if n := dead(); n != 2 {
			t.Fatalf("%s: %d dead letters left, want 2 (nothing replayed)", tc.name, n)
		}
	}
	// The events search names its fields the same way.
	w := b.do("GET", "/ui/events?from=abc&until=def", nil)
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "From: &#34;abc&#34; is not a time") || !strings.Contains(body, "Until: &#34;def&#34; is not a time") {
		t.Fatalf("events search with bad times: %d %s", w.Code, body)
	}
}
