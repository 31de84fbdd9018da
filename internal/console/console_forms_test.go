package console

import (
	"context"
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

// Errors of a list's item, a map's key or the whole body name the form's
// field, never the API's path: "Event types (item 2)", not
// "event_types[1]"; "Headers (Bad Name)", not "headers.Bad Name";
// "Secret 1", not "body: secrets[0]". Errors the console finds
// itself start with the field's label as it is written on the form.
func TestErrorsNameListItemsAndKeysByTheFormsLabels(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	ep := func(field, value string) string {
		w := b.do("POST", "/ui/endpoints", url.Values{"csrf": {token}, "tenant": {"acme"}, "url": {"https://receiver.example/hook"}, field: {value}})
		if w.Code != http.StatusUnprocessableEntity {
			t.Fatalf("%s %q: %d, want 422", field, value, w.Code)
		}
		return w.Body.String()
	}
	for _, tc := range []struct{ field, value, want, not string }{
		{"event_types", "order.*\nbad type!", "Event types (item 2): must be", "event_types["},
		{"headers", "Bad Name: x", "Headers (Bad Name): header name must be", "headers.Bad"},
		{"headers", "Host: evil", "Headers (Host): header is set by Herald", "headers.Host"},
		{"headers", "NoColon", "Headers: &#34;NoColon&#34; is not a", "headers: &#34;"},
		{"versions", "order.created: x", "Pinned versions: &#34;order.created: x&#34;", "pinned versions:"},
		{"rate_limit_per_second", "1.5", "Rate limit: &#34;1.5&#34; is not a whole number", "rate limit:"},
	} {
		if body := ep(tc.field, tc.value); !strings.Contains(body, tc.want) || strings.Contains(body, tc.not) {
			t.Fatalf("%s %q: want %q, not %q:\n%s", tc.field, tc.value, tc.want, tc.not, body)
		}
	}
	// The refused form keeps its page's title.
	if body := ep("rate_limit_per_second", "x"); !strings.Contains(body, "<title>New endpoint · Herald</title>") {
		t.Fatalf("a refused new endpoint form's title:\n%s", body)
	}
	var l struct{ Data []api.EndpointOut }
	if f.apiCall(adminKey, "GET", "/v1/endpoints", "", &l); len(l.Data) != 0 {
		t.Fatalf("a refused form created %d endpoint(s)", len(l.Data))
	}
	w := b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {"stripe in"}, "scheme": {"stripe"},
		"secrets": {"short"}, "destination_url": {"http://10.0.0.9/in"}})
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Secret 1: shorter than 16 bytes") || strings.Contains(body, "body: secrets") {
		t.Fatalf("a source secret too short: %d %s", w.Code, body)
	}
}

func TestFieldLabel(t *testing.T) {
	labels := map[string]string{"event_types": "Event types", "headers": "Headers", "rate_limit_per_second": "Rate limit"}
	for in, want := range map[string]string{
		"rate_limit_per_second": "Rate limit",
		"event_types[0]":        "Event types (item 1)",
		"event_types[12]":       "Event types (item 13)",
		"headers.X-Team":        "Headers (X-Team)",
		"event_types[x]":        "",
		"event_types[0].y":      "",
		"unknown[0]":            "",
		"unknown.key":           "",
		"headers.":              "",
	} {
		got, ok := fieldLabel(in, labels)
		if got != want || ok != (want != "") {
			t.Errorf("fieldLabel(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// timeoutTester answers a test event as an attempt that got no answer.
type timeoutTester struct{}

func (timeoutTester) SendTest(_ context.Context, ep store.Endpoint) (store.Attempt, string, error) {
	return store.Attempt{Number: 1, StartedAt: time.Now(), Duration: 2 * time.Second, Error: "timeout",
		ErrorDetail: "no complete response within the attempt timeout (2s)"}, "evt_test_x", nil
}

// An attempt without a response body says so ("empty body", or "no
// answer" when no HTTP answer came) instead of showing an empty grey box,
// and the test page shows the error's detail under its class, as the
// attempts tables do.
func TestAttemptsWithoutABodySaySo(t *testing.T) {
	f := newFixtureWith(t, func(c *api.Config) { c.Tester = timeoutTester{} })
	var ep api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep)
	b, token := adminBrowser(t, f)
	w := b.do("POST", "/ui/endpoints/"+ep.ID+"/test", url.Values{"csrf": {token}})
	page := b.do("GET", w.Header().Get("Location"), nil).Body.String()
	if !strings.Contains(page, `data-testid="no-excerpt">— (no answer)<`) || strings.Contains(page, "<pre></pre>") ||
		!strings.Contains(page, `timeout<div class="sub">no complete response within the attempt timeout (2s)</div>`) {
		t.Fatalf("test page of an attempt without an answer:\n%s", page)
	}
	if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, nil); st != 202 {
		t.Fatalf("publish: %d", st)
	}
	claims := f.attemptAll(1, time.Now().UTC(), func(int, store.Claim) (store.DeliveryState, int) { return store.DeliveryDead, 500 })
	page = b.do("GET", "/ui/deliveries/"+claims[0].Delivery.ID, nil).Body.String()
	if !strings.Contains(page, `data-testid="no-excerpt">empty body<`) || strings.Contains(page, `<pre class="excerpt"></pre>`) {
		t.Fatalf("delivery page of an attempt with an empty body:\n%s", page)
	}
}

// A whole portal link pasted into the sign-in field (as the page of a link
// without its token invites) signs in with its token, instead of "invalid
// API key"; a key or token pasted alone still signs in.
func TestSignInWithAPastedPortalLink(t *testing.T) {
	f := newFixture(t)
	var ps api.PortalSessionOut
	if code := f.apiCall(adminKey, "POST", "/v1/portal-sessions", `{"tenant":"acme","role":"viewer"}`, &ps); code != http.StatusCreated {
		t.Fatal(code)
	}
	for _, key := range []string{ps.URL, " " + ps.URL + "\n", "https://herald.example.com/ui/portal#token=" + ps.Token + "&x=1", ps.Token} {
		w := f.browser().signIn(key)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/endpoints" {
			t.Fatalf("sign-in with %q: %d %s %s", key, w.Code, w.Header().Get("Location"), w.Body)
		}
	}
	if w := f.browser().signIn("https://herald.example.com/ui/portal#token=herald_portal_wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("a link with a wrong token: %d", w.Code)
	}
	if portalToken(adminKey) != adminKey || portalToken("x/ui/portal#token=") != "" {
		t.Fatal("portalToken changed a key, or found a token in a link without one")
	}
}

// TestFormShowsEveryRefusal: a form whose fields break several of the
// API's rules shows every refusal the API lists, each named by the
// form's label, not only the first.
func TestFormShowsEveryRefusal(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	w := b.do("POST", "/ui/endpoints", url.Values{"csrf": {token}, "tenant": {"acme"}, "url": {"https://receiver.example/hook"},
		"event_types": {"bad type!"}, "headers": {"Bad Name: x\nHost: evil"}})
	body := w.Body.String()
	if w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("%d, want 422:\n%s", w.Code, body)
	}
	for _, want := range []string{"Event types (item 1): must be", "Headers (Bad Name): header name must be", "Headers (Host): header is set by Herald"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused form does not say %q:\n%s", want, body)
		}
	}
}
