package console

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
)

var navLink = regexp.MustCompile(`<nav>[\s\S]*?</nav>`)

// navOf returns the nav entries of a page, by their text.
func navOf(t *testing.T, body string) string {
	t.Helper()
	n := navLink.FindString(body)
	if n == "" {
		t.Fatalf("no nav in the page:\n%s", body)
	}
	return n
}

// Each role signs in to a page it can use, and the nav shows only the
// pages its role may read (the Policy rows the API enforces).
func TestEachRoleLandsOnAUsablePage(t *testing.T) {
	f := newFixture(t)
	keys := map[string]string{}
	for _, role := range []string{"publisher", "viewer", "manager"} {
		var k api.APIKeyOut
		if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"`+role+`","role":"`+role+`","tenant":"acme"}`, &k); code != 201 {
			t.Fatal(role, code)
		}
		keys[role] = k.Key
	}
	keys["admin"] = adminKey
	cases := []struct {
		role, landing string
		nav, notNav   []string
	}{
		{"publisher", "/ui/events", []string{"Events", "Event catalog", "API reference"}, []string{"Overview", "Endpoints", "Dead letters", "Inbound sources", "API keys"}},
		{"viewer", "/ui/", []string{"Overview", "Endpoints", "Events", "Dead letters", "Event catalog"}, []string{"Inbound sources", "API keys"}},
		{"manager", "/ui/", []string{"Overview", "Endpoints", "Events", "Dead letters", "Event catalog"}, []string{"Inbound sources", "API keys"}},
		{"admin", "/ui/", []string{"Overview", "Endpoints", "Events", "Dead letters", "Event catalog", "Inbound sources", "API keys"}, nil},
	}
	for _, c := range cases {
		b := f.browser()
		w := b.signIn(keys[c.role])
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != c.landing {
			t.Fatalf("%s sign-in: %d → %s, want %s", c.role, w.Code, w.Header().Get("Location"), c.landing)
		}
		page := b.do("GET", c.landing, nil)
		if page.Code != 200 {
			t.Fatalf("%s landing %s: %d %s", c.role, c.landing, page.Code, page.Body)
		}
		nav := navOf(t, page.Body.String())
		for _, n := range c.nav {
			if !strings.Contains(nav, ">"+n+"<") {
				t.Errorf("%s: nav lacks %q: %s", c.role, n, nav)
			}
		}
		for _, n := range c.notNav {
			if strings.Contains(nav, ">"+n+"<") {
				t.Errorf("%s: nav offers %q, which its role may not read: %s", c.role, n, nav)
			}
		}
		for _, href := range regexp.MustCompile(`href="(/ui/[^"]*)"`).FindAllStringSubmatch(nav, -1) {
			if w := b.do("GET", href[1], nil); w.Code != 200 {
				t.Errorf("%s: nav entry %s answers %d", c.role, href[1], w.Code)
			}
		}
	}
	// The publisher's way to the overview (the brand link, an old
	// bookmark) leads to its own first page, not to a 403.
	b := f.browser()
	b.signIn(keys["publisher"])
	if w := b.do("GET", "/ui/", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/events" {
		t.Fatalf("publisher GET /ui/: %d → %s", w.Code, w.Header().Get("Location"))
	}
}

// A throttled address gets the API's answer: 429 with Retry-After and the
// wait in the page, not a 401.
func TestThrottledSignInAnswers429(t *testing.T) {
	f := newFixtureWith(t, func(c *api.Config) { c.AuthFailureBurst, c.AuthFailureRate = 2, 0.01 })
	b := f.browser()
	for i := range 2 {
		if w := b.signIn("herald_key_wrong"); w.Code != http.StatusUnauthorized {
			t.Fatalf("bad key %d: %d, want 401", i+1, w.Code)
		}
	}
	w := b.signIn(adminKey) // even the right key, while throttled
	ra, _ := strconv.Atoi(w.Header().Get("Retry-After"))
	if w.Code != http.StatusTooManyRequests || ra < 90 || ra > 100 {
		t.Fatalf("throttled sign-in: %d, Retry-After %q; want 429, about 100 s", w.Code, w.Header().Get("Retry-After"))
	}
	if !strings.Contains(w.Body.String(), "too many attempts, retry in "+strconv.Itoa(ra)+" s") || b.cookies[sessionCookie] != "" {
		t.Fatalf("throttled sign-in page:\n%s", w.Body)
	}
	// The API answers the same address the same way.
	r := f.apiCall("herald_key_wrong", "GET", "/v1/endpoints", "", nil)
	if r != http.StatusTooManyRequests {
		t.Fatalf("API from the throttled address: %d", r)
	}
}

const orderSchema = `{"type":"object","properties":{"order_id":{"type":"string"},"note":{"type":"string"}},"required":["order_id"]}`

// The catalog pages show types, versions, schemas and examples (as
// text); the endpoint form pins versions and shows the pins on edit.
func TestCatalogPagesAndPinnedVersions(t *testing.T) {
	f := newFixture(t)
	if code := f.apiCall(adminKey, "POST", "/v1/event-types", `{"name":"order.created","description":"an order <b>was</b> placed","versions":[{"version":1,"schema":`+orderSchema+`,"example":{"order_id":"o-1","note":"<i>first</i>"}}]}`, nil); code != 201 {
		t.Fatal(code)
	}
	if code := f.apiCall(adminKey, "POST", "/v1/event-types/order.created/versions", `{"version":2,"schema":`+orderSchema+`,"example":{"order_id":"o-2"}}`, nil); code != 201 {
		t.Fatal(code)
	}
	b := f.browser()
	b.signIn(adminKey)
	list := b.do("GET", "/ui/catalog", nil)
	if list.Code != 200 || !strings.Contains(list.Body.String(), `href="/ui/catalog/order.created"`) || !strings.Contains(list.Body.String(), "an order &lt;b&gt;was&lt;/b&gt; placed") ||
		!strings.Contains(list.Body.String(), ">v1<") || !strings.Contains(list.Body.String(), ">v2<") {
		t.Fatalf("catalog page: %d\n%s", list.Code, list.Body)
	}
	one := b.do("GET", "/ui/catalog/order.created", nil).Body.String()
	for _, want := range []string{"Version 2", "Version 1", `&#34;required&#34;: [`, `&#34;note&#34;: &#34;&lt;i&gt;first&lt;/i&gt;&#34;`} {
		if !strings.Contains(one, want) {
			t.Fatalf("event type page lacks %q:\n%s", want, one)
		}
	}
	if w := b.do("GET", "/ui/catalog/no.such", nil); w.Code != http.StatusNotFound {
		t.Fatalf("unknown type: %d", w.Code)
	}

	form := b.do("GET", "/ui/endpoints/new", nil).Body.String()
	if !strings.Contains(form, `name="versions"`) || !strings.Contains(form, "order.created</a> v1, v2") {
		t.Fatalf("the endpoint form offers no pins:\n%s", form)
	}
	token := csrfOf(t, form)
	post := func(path string, v url.Values) *http.Response {
		v.Set("csrf", token)
		return b.do("POST", path, v).Result()
	}
	// A bad line is refused naming the rule, and creates nothing.
	r := post("/ui/endpoints", url.Values{"tenant": {"acme"}, "url": {"https://receiver.example/hook"}, "event_types": {"order.*"}, "versions": {"order.created = one"}})
	if r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad pin: %d", r.StatusCode)
	}
	var eps struct{ Data []api.EndpointOut }
	f.apiCall(adminKey, "GET", "/v1/endpoints", "", &eps)
	if len(eps.Data) != 0 {
		t.Fatal("a refused form created an endpoint")
	}
	if r := post("/ui/endpoints", url.Values{"tenant": {"acme"}, "url": {"https://receiver.example/hook"}, "event_types": {"order.*"}, "versions": {"order.created: 1"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("create with a pin: %d", r.StatusCode)
	}
	f.apiCall(adminKey, "GET", "/v1/endpoints", "", &eps)
	if len(eps.Data) != 1 || eps.Data[0].Versions["order.created"] != 1 {
		t.Fatalf("pins after create: %+v", eps.Data)
	}
	id := eps.Data[0].ID
	edit := b.do("GET", "/ui/endpoints/"+id+"/edit", nil).Body.String()
	if !strings.Contains(edit, "order.created: 1\n</textarea>") {
		t.Fatalf("the edit form does not show the pin:\n%s", edit)
	}
	if r := post("/ui/endpoints/"+id, url.Values{"url": {"https://receiver.example/hook"}, "event_types": {"order.*"}, "versions": {"order.created: 2"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit the pin: %d", r.StatusCode)
	}
	var ep api.EndpointOut
	f.apiCall(adminKey, "GET", "/v1/endpoints/"+id, "", &ep)
	if ep.Versions["order.created"] != 2 {
		t.Fatalf("pins after edit: %v", ep.Versions)
	}
	// A pin the API refuses (no such version) comes back with its reason.
	w := b.do("POST", "/ui/endpoints/"+id, url.Values{"csrf": {token}, "url": {"https://receiver.example/hook"}, "event_types": {"order.*"}, "versions": {"order.created: 7"}})
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "versions") {
		t.Fatalf("unknown version: %d\n%s", w.Code, w.Body)
	}
}

// The endpoints list, an endpoint's page and the overview show the
// circuit breaker the API reports (the engine's, on this node).
func TestCircuitStateShown(t *testing.T) {
	until := time.Now().Add(20 * time.Second).UTC()
	var open string
	f := newFixtureWith(t, func(c *api.Config) {
		c.Circuit = func(id string) api.CircuitOut {
			if id == open {
				return api.CircuitOut{State: "open", ConsecutiveFailures: 5, Threshold: 5, OpenUntil: &until}
			}
			return api.CircuitOut{State: "closed", ConsecutiveFailures: 2, Threshold: 5}
		}
	})
	var a, b2 api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://a.example/hook"}`, &a)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://b.example/hook"}`, &b2)
	open = a.ID
	b := f.browser()
	b.signIn(adminKey)
	list := b.do("GET", "/ui/endpoints", nil).Body.String()
	if !strings.Contains(list, `data-circuit="open"`) || !strings.Contains(list, "2 of 5 failures") {
		t.Fatalf("endpoints list without circuits:\n%s", list)
	}
	if one := b.do("GET", "/ui/endpoints/"+a.ID, nil).Body.String(); !strings.Contains(one, `data-circuit="open"`) || !strings.Contains(one, "probe in ") {
		t.Fatalf("endpoint page without its circuit:\n%s", one)
	}
	ov := b.do("GET", "/ui/", nil).Body.String()
	if !regexp.MustCompile(`data-testid="open-circuits">1<`).MatchString(ov) || !strings.Contains(ov, a.ID) || strings.Contains(ov, b2.ID) {
		t.Fatalf("overview: open circuits not counted or listed:\n%s", ov)
	}
}

// The edit form posts back every pin it shows, also one Herald set itself
// when the endpoint subscribed: changing the endpoint's event types away
// from a pinned type, then any later save (the API keeps the old pin), was
// refused with "the endpoint does not subscribe to …: a pin needs a
// subscription". Unchanged pins are not sent; a changed one still is.
func TestEditEventTypesAwayFromAPinnedType(t *testing.T) {
	f := newFixture(t)
	if code := f.apiCall(adminKey, "POST", "/v1/event-types", `{"name":"order.created","versions":[{"version":1,"schema":`+orderSchema+`,"example":{"order_id":"o-1"}}]}`, nil); code != 201 {
		t.Fatal(code)
	}
	var ep api.EndpointOut
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://receiver.example/hook","event_types":["order.created"]}`, &ep); code != 201 || ep.Versions["order.created"] != 1 {
		t.Fatalf("create: %d %v", code, ep.Versions)
	}
	b, token := adminBrowser(t, f)
	save := func(form url.Values) *httptest.ResponseRecorder {
		t.Helper()
		edit := b.do("GET", "/ui/endpoints/"+ep.ID+"/edit", nil).Body.String()
		m := regexp.MustCompile(`(?s)<textarea name="versions"[^>]*>(.*?)</textarea>`).FindStringSubmatch(edit)
		if m == nil {
			t.Fatalf("no versions field:\n%s", edit)
		}
		v := url.Values{"csrf": {token}, "url": {"https://receiver.example/hook"}, "versions": {html.UnescapeString(m[1])}}
		for k := range form {
			v.Set(k, form.Get(k))
		}
		return b.do("POST", "/ui/endpoints/"+ep.ID, v)
	}
	// What the form shows, with other event types.
	if w := save(url.Values{"event_types": {"invoice.paid"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("change the event types: %d\n%s", w.Code, w.Body)
	}
	var got api.EndpointOut
	f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID, "", &got)
	if !slices.Equal(got.EventTypes, []string{"invoice.paid"}) {
		t.Fatalf("event types after the save: %v", got.EventTypes)
	}
	// A later save of the form as shown (the kept pin is in it).
	if w := save(url.Values{"event_types": {"invoice.paid"}, "description": {"renamed"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("save again: %d\n%s", w.Code, w.Body)
	}
	f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID, "", &got)
	if got.Description != "renamed" {
		t.Fatalf("description after the save: %q", got.Description)
	}
	// A pin the user changes is still sent and checked.
	if w := save(url.Values{"event_types": {"invoice.paid"}, "versions": {"order.created: 2"}}); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "a pin needs a subscription") {
		t.Fatalf("a changed pin of an unsubscribed type: %d", w.Code)
	}
}

// A pin to a deprecated version saved through the console says so, as the
// API's Warning header (and the CLI) does: the console dropped the
// warning, so an edit or a new endpoint pinned to a deprecated version
// was saved without a word, on the page after it and on the secret page
// of a new endpoint alike.
func TestDeprecatedPinWarnedInTheConsole(t *testing.T) {
	f := newFixture(t)
	if code := f.apiCall(adminKey, "POST", "/v1/event-types", `{"name":"order.created","versions":[{"version":1,"schema":`+orderSchema+`}]}`, nil); code != 201 {
		t.Fatal(code)
	}
	if code := f.apiCall(adminKey, "POST", "/v1/event-types/order.created/versions", `{"version":2,"schema":`+orderSchema+`}`, nil); code != 201 {
		t.Fatal(code)
	}
	if code := f.apiCall(adminKey, "PATCH", "/v1/event-types/order.created", `{"deprecate":[1]}`, nil); code != 200 {
		t.Fatal(code)
	}
	b := f.browser()
	b.signIn(adminKey)
	token := csrfOf(t, b.do("GET", "/ui/endpoints/new", nil).Body.String())
	const want = "order.created version 1 is deprecated (the newest is 2)"
	after := func(what string, w *httptest.ResponseRecorder) string {
		t.Helper()
		if w.Code != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", what, w.Code, w.Body)
		}
		return b.do("GET", w.Header().Get("Location"), nil).Body.String()
	}
	page := after("create", b.do("POST", "/ui/endpoints", url.Values{"csrf": {token}, "tenant": {"acme"}, "url": {"https://receiver.example/hook"},
		"event_types": {"order.*"}, "versions": {"order.created: 1"}}))
	if !strings.Contains(page, want) || !strings.Contains(page, "whsec_") {
		t.Fatalf("the new endpoint's page does not warn of its deprecated pin:\n%s", page)
	}
	var eps struct{ Data []api.EndpointOut }
	f.apiCall(adminKey, "GET", "/v1/endpoints", "", &eps)
	if len(eps.Data) != 1 || eps.Data[0].Versions["order.created"] != 1 {
		t.Fatalf("pins after create: %+v", eps.Data)
	}
	id := eps.Data[0].ID
	if page := after("edit to 2", b.do("POST", "/ui/endpoints/"+id, url.Values{"csrf": {token}, "url": {"https://receiver.example/hook"}, "event_types": {"order.*"}, "versions": {"order.created: 2"}})); strings.Contains(page, "deprecated") {
		t.Fatalf("a pin to the newest version warned:\n%s", page)
	}
	page = after("edit to 1", b.do("POST", "/ui/endpoints/"+id, url.Values{"csrf": {token}, "url": {"https://receiver.example/hook"}, "event_types": {"order.*"}, "versions": {"order.created: 1"}}))
	if !strings.Contains(page, "Endpoint "+id+" saved.") || !strings.Contains(page, want) {
		t.Fatalf("the endpoint's page after a pin to a deprecated version does not warn:\n%s", page)
	}
}
