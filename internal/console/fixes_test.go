package console

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// adminBrowser signs in with the admin key and returns the browser and a
// CSRF token of its session.
func adminBrowser(t *testing.T, f *fixture) (*browser, string) {
	t.Helper()
	b := f.browser()
	if w := b.signIn(adminKey); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", w.Code)
	}
	return b, csrfOf(t, b.do("GET", "/ui/keys", nil).Body.String())
}

// Each state-changing form answers 303 to a GET page that shows its result
// (and any one-time secret) once: reloading that page repeats nothing and
// shows the secret no more. Revealing a secret changes nothing but is a
// POST too: its answer is a page of its own, so Back or a reload never
// re-posts the form and shows the secret again.
func TestCreateAndRotateRedirectAndShowSecretsOnce(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	count := func(path string) int {
		var l struct{ Data []map[string]any }
		f.apiCall(adminKey, "GET", path, "", &l)
		return len(l.Data)
	}
	secretOnce := func(what string, w interface {
		Result() *http.Response
	}, secret func(body string) string) {
		t.Helper()
		res := w.Result()
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusSeeOther || loc == "" {
			t.Fatalf("%s: %d, want 303 to a result page", what, res.StatusCode)
		}
		page := b.do("GET", loc, nil)
		if page.Code != http.StatusOK {
			t.Fatalf("%s: GET %s: %d", what, loc, page.Code)
		}
		s := secret(page.Body.String())
		if s == "" {
			t.Fatalf("%s: the result page shows no secret:\n%s", what, page.Body)
		}
		if strings.Contains(loc, s) {
			t.Fatalf("%s: the secret is in the URL %s", what, loc)
		}
		again := b.do("GET", loc, nil) // F5 on the result page
		if again.Code != http.StatusSeeOther || strings.Contains(again.Body.String(), s) {
			t.Fatalf("%s: reloading the result page: %d", what, again.Code)
		}
		if next := b.do("GET", again.Header().Get("Location"), nil).Body.String(); strings.Contains(next, s) || !strings.Contains(next, "shown once") {
			t.Fatalf("%s: after the reload the secret is shown again or no note says why", what)
		}
	}
	between := func(body, from, to string) string {
		_, after, ok := strings.Cut(body, from)
		if !ok {
			return ""
		}
		v, _, _ := strings.Cut(after, to)
		return v
	}

	w := b.do("POST", "/ui/endpoints", url.Values{"csrf": {token}, "tenant": {"acme"}, "url": {"https://receiver.example/hook"}})
	secretOnce("create endpoint", w, func(body string) string { return between(body, "whsec_", "<") })
	if n := count("/v1/endpoints"); n != 1 {
		t.Fatalf("endpoints after create and reloads: %d", n)
	}
	var eps struct{ Data []api.EndpointOut }
	f.apiCall(adminKey, "GET", "/v1/endpoints", "", &eps)
	id := eps.Data[0].ID

	w = b.do("POST", "/ui/endpoints/"+id+"/rotate", url.Values{"csrf": {token}, "overlap_seconds": {"60"}})
	secretOnce("rotate secret", w, func(body string) string { return between(body, "whsec_", "<") })
	var secrets struct{ Data []map[string]any }
	f.apiCall(adminKey, "GET", "/v1/endpoints/"+id+"/secrets", "", &secrets)
	if len(secrets.Data) != 2 {
		t.Fatalf("secrets after one rotation and reloads: %d", len(secrets.Data))
	}

	w = b.do("POST", "/ui/endpoints/"+id+"/secret", url.Values{"csrf": {token}})
	secretOnce("reveal secret", w, func(body string) string { return between(body, "whsec_", "<") })

	w = b.do("POST", "/ui/keys", url.Values{"csrf": {token}, "name": {"k"}, "role": {"viewer"}, "tenant": {"acme"}})
	secretOnce("create key", w, func(body string) string { return between(body, `data-testid="new-key">`, "<") })
	if n := count("/v1/api-keys"); n != 1 {
		t.Fatalf("keys after create and reloads: %d", n)
	}

	w = b.do("POST", "/ui/portal-links", url.Values{"csrf": {token}, "tenant": {"acme"}, "role": {"viewer"}, "ttl_minutes": {"60"}})
	secretOnce("create portal link", w, func(body string) string { return between(body, `data-testid="portal-url">`, "<") })
	if n := count("/v1/portal-sessions"); n != 1 {
		t.Fatalf("portal sessions after create and reloads: %d", n)
	}

	w = b.do("POST", "/ui/endpoints/"+id+"/test", url.Values{"csrf": {token}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("send test event: %d, want 303", w.Code)
	}
	if page := b.do("GET", w.Header().Get("Location"), nil); page.Code != http.StatusOK || !strings.Contains(page.Body.String(), "evt_test") {
		t.Fatalf("test result page: %d", page.Code)
	}
}

// A viewer is refused the forms and confirmations of what its role may not
// do, before any is shown.
func TestViewerRefusedFormsAndConfirmations(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep)
	var viewer api.APIKeyOut
	f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":"acme"}`, &viewer)
	b := f.browser()
	if w := b.signIn(viewer.Key); w.Code != http.StatusSeeOther {
		t.Fatalf("viewer sign-in: %d", w.Code)
	}
	token := csrfOf(t, b.do("GET", "/ui/endpoints/"+ep.ID, nil).Body.String())
	for _, p := range []string{"/ui/endpoints/new", "/ui/endpoints/" + ep.ID + "/edit", "/ui/endpoints/" + ep.ID + "/delete"} {
		w := b.do("GET", p, nil)
		if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "<form method=\"post\" action=\"/ui/endpoints") {
			t.Fatalf("GET %s as viewer: %d", p, w.Code)
		}
	}
	w := b.do("POST", "/ui/dead-letters/replay", url.Values{"csrf": {token}, "scope": {"range"}})
	if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "confirm") {
		t.Fatalf("replay confirmation as viewer: %d", w.Code)
	}
}

// An inverted time range is refused with the API's rule, not searched.
func TestInvertedTimeRangeIsRefused(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	w := b.do("GET", "/ui/events?from=2026-01-02T16:00&until=2026-01-02T15:00", nil)
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "Until must be after From") {
		t.Fatalf("events search with until before from: %d", w.Code)
	}
	w = b.do("POST", "/ui/dead-letters/replay", url.Values{"csrf": {token}, "scope": {"range"}, "since": {"2026-01-02T16:00"}, "until": {"2026-01-02T16:00"}})
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "Until must be after Dead-lettered since") {
		t.Fatalf("replay with until not after since: %d", w.Code)
	}
}

// Bad filter values on the endpoints list are refused as the API would.
func TestEndpointsListRefusesBadFilters(t *testing.T) {
	f := newFixture(t)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, nil)
	b, _ := adminBrowser(t, f)
	if w := b.do("GET", "/ui/endpoints?kind=bogus", nil); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "Kind:") {
		t.Fatalf("kind=bogus: %d", w.Code)
	}
	if w := b.do("GET", "/ui/endpoints?state=bogus", nil); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "State: &#34;bogus&#34; is not a state") {
		t.Fatalf("state=bogus: %d %s", w.Code, w.Body)
	}
	if w := b.do("GET", "/ui/endpoints?state=enabled&kind=all", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "acme.example") {
		t.Fatalf("good filters: %d", w.Code)
	}
}

// Errors name the form's fields and units, not the API's.
func TestErrorsUseTheFormsLabels(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	w := b.do("POST", "/ui/portal-links", url.Values{"csrf": {token}, "tenant": {"acme"}, "role": {"viewer"}, "ttl_minutes": {"0"}})
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Lifetime:") || !strings.Contains(body, "minutes") || strings.Contains(body, "ttl_seconds") {
		t.Fatalf("portal link lifetime 0: %d %s", w.Code, body)
	}
	w = b.do("POST", "/ui/endpoints", url.Values{"csrf": {token}, "tenant": {"acme"}, "url": {"https://receiver.example/hook"}, "rate_limit_per_second": {"-1"}})
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Rate limit:") || strings.Contains(body, "rate_limit_per_second:") {
		t.Fatalf("negative rate limit: %d %s", w.Code, body)
	}
	var e api.EventOut
	f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.created","payload":{}}`, &e)
	w = b.do("GET", "/ui/events?id=my-own-id", nil)
	if body := w.Body.String(); !strings.Contains(body, "fill in Tenant") || strings.Contains(body, "?tenant=") {
		t.Fatalf("event id without tenant: %d %s", w.Code, body)
	}
	// A refused id search stays on the search form, naming its fields.
	w = b.do("GET", "/ui/events?id="+strings.Repeat("x", 129), nil)
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Id: must be at most 128 characters long") || strings.Contains(body, "path.id") || !strings.Contains(body, `id="event-search"`) {
		t.Fatalf("an id of 129 characters: %d %s", w.Code, body)
	}
	w = b.do("GET", "/ui/events?id=inv-1&tenant=src_x", nil)
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Tenant: tenant names starting with src_") || strings.Contains(body, "query.tenant") || !strings.Contains(body, `id="event-search"`) {
		t.Fatalf("an id search in a reserved tenant: %d %s", w.Code, body)
	}
}

// The API keys page lists portal links and revokes one (after the page's
// confirmation); the revoked link no longer signs in.
func TestPortalLinksListedAndRevoked(t *testing.T) {
	f := newFixture(t)
	var ps api.PortalSessionOut
	if code := f.apiCall(adminKey, "POST", "/v1/portal-sessions", `{"tenant":"acme","role":"viewer"}`, &ps); code != http.StatusCreated {
		t.Fatal(code)
	}
	b, token := adminBrowser(t, f)
	page := b.do("GET", "/ui/keys", nil).Body.String()
	form := `action="/ui/portal-links/` + ps.ID + `/revoke" class="inline confirm-submit" data-confirm="Revoke portal link`
	if !strings.Contains(page, `data-link="`+ps.ID+`"`) || !strings.Contains(page, form) {
		t.Fatalf("the keys page does not list the portal link with a confirmed revoke:\n%s", page)
	}
	if w := b.do("POST", "/ui/portal-links/"+ps.ID+"/revoke", url.Values{"csrf": {token}}); w.Code != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", w.Code, w.Body)
	}
	if page := b.do("GET", "/ui/keys", nil).Body.String(); !strings.Contains(page, "Portal link "+ps.ID+" revoked.") || strings.Contains(page, form) {
		t.Fatal("after revoke the page still offers it or says nothing")
	}
	if code := f.apiCall(ps.Token, "GET", "/v1/endpoints", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("revoked link still works: %d", code)
	}
}

// TestEventLinksCarryTheTenant: an event id a producer chose is unique per
// tenant only, so every link to an event (the endpoint's deliveries, a
// delivery, the dead letters, the events list) names its tenant, and the
// admin following it reaches that tenant's event even when another tenant
// published the same id.
func TestEventLinksCarryTheTenant(t *testing.T) {
	f := newFixture(t)
	var ep struct{ ID string }
	for _, tn := range []string{"acme", "globex"} {
		if st := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"`+tn+`","url":"https://example.com/`+tn+`"}`, &ep); st != 201 {
			t.Fatalf("endpoint of %s: %d", tn, st)
		}
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"`+tn+`","type":"a.b","id":"prod-1","data":{}}`, nil); st != 202 {
			t.Fatalf("publish prod-1 for %s: %d", tn, st)
		}
	}
	var dl api.DeliveryList
	if st := f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID+"/deliveries", "", &dl); st != 200 || len(dl.Data) != 1 || dl.Data[0].Tenant != "globex" {
		t.Fatalf("globex's deliveries: %d %+v; want one, with its tenant", st, dl.Data)
	}
	b, _ := adminBrowser(t, f)
	want := "/ui/events/prod-1?tenant=globex"
	for _, page := range []string{"/ui/endpoints/" + ep.ID, "/ui/deliveries/" + dl.Data[0].ID, "/ui/events"} {
		if body := b.do("GET", page, nil).Body.String(); !strings.Contains(body, `href="`+want+`"`) {
			t.Errorf("%s does not link globex's prod-1 as %s", page, want)
		}
	}
	if w := b.do("GET", want, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "globex") {
		t.Errorf("GET %s: %d", want, w.Code)
	}
}

// TestExpiredKeysMarked: an API key past its expiry is shown as expired,
// without a Revoke button, like a revoked one; a live one keeps its button.
func TestExpiredKeysMarked(t *testing.T) {
	f := newFixture(t)
	exp := f.clock().Add(time.Hour).Format(time.RFC3339)
	var short, long struct{ ID string }
	f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"short","role":"viewer","tenant":"acme","expires_at":"`+exp+`"}`, &short)
	f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"long","role":"viewer","tenant":"acme"}`, &long)
	f.advance(2 * time.Hour)
	b, _ := adminBrowser(t, f)
	page := b.do("GET", "/ui/keys", nil).Body.String()
	row := func(id string) string {
		i := strings.Index(page, id)
		if i < 0 {
			t.Fatalf("key %s not listed", id)
		}
		return page[strings.LastIndex(page[:i], "<tr") : i+strings.Index(page[i:], "</tr>")]
	}
	if r := row(short.ID); !strings.Contains(r, "expired") || strings.Contains(r, "/revoke") {
		t.Errorf("the expired key's row:\n%s", r)
	}
	if r := row(long.ID); strings.Contains(r, "expired") || !strings.Contains(r, "/revoke") {
		t.Errorf("the live key's row:\n%s", r)
	}
}

// A refused new API key or portal link form is shown again with what was
// typed (it was emptied, and the role went back to the first option), and
// creates nothing.
func TestRefusedKeyFormsKeepWhatWasTyped(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	count := func(path string) int {
		var l struct{ Data []json.RawMessage }
		f.apiCall(adminKey, "GET", path, "", &l)
		return len(l.Data)
	}
	keys, links := count("/v1/api-keys"), count("/v1/portal-sessions")
	for _, c := range []struct {
		path string
		form url.Values
		want []string
	}{
		{"/ui/keys", url.Values{"name": {"ops <b>bot</b>"}, "role": {"viewer"}, "tenant": {"src_x"}, "expires_at": {"2099-01-01"}},
			[]string{`value="ops &lt;b&gt;bot&lt;/b&gt;"`, `<option selected>viewer</option>`, `value="src_x"`, `value="2099-01-01"`}},
		{"/ui/keys", url.Values{"name": {"late"}, "role": {"manager"}, "tenant": {"acme"}, "expires_at": {"whenever"}},
			[]string{`value="late"`, `<option selected>manager</option>`, `value="acme"`, `value="whenever"`}},
		{"/ui/portal-links", url.Values{"tenant": {"src_y"}, "role": {"manager"}, "ttl_minutes": {"90"}},
			[]string{`value="src_y"`, `<option selected>manager</option>`, `value="90"`}},
		{"/ui/portal-links", url.Values{"tenant": {"acme"}, "role": {"manager"}, "ttl_minutes": {"0"}},
			[]string{`value="acme"`, `<option selected>manager</option>`, `value="0"`}},
	} {
		c.form.Set("csrf", token)
		w := b.do("POST", c.path, c.form)
		page := w.Body.String()
		if w.Code != http.StatusUnprocessableEntity && w.Code != http.StatusForbidden {
			t.Fatalf("POST %s %v: %d, want a refusal", c.path, c.form, w.Code)
		}
		for _, want := range c.want {
			if !strings.Contains(page, want) {
				t.Errorf("POST %s %v: the form lost what was typed (%s)", c.path, c.form, want)
			}
		}
	}
	if keys != count("/v1/api-keys") || links != count("/v1/portal-sessions") {
		t.Error("a refused form created a key or a portal link")
	}
}

// The API keys page lists keys a page at a time and links to the next
// page: the page read the next_cursor but offered no link, so keys past
// the first page (1000) could not be seen or revoked in the console.
func TestKeysPageLinksToMoreKeys(t *testing.T) {
	defer func(n int) { keysPageSize = n }(keysPageSize)
	keysPageSize = 2
	f := newFixture(t)
	for _, name := range []string{"k-one", "k-two", "k-three", "k-four", "k-five"} {
		if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"`+name+`","role":"viewer","tenant":"acme"}`, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", name, code)
		}
	}
	b, _ := adminBrowser(t, f)
	seen := map[string]bool{}
	next := regexp.MustCompile(`href="(/ui/keys\?cursor=[^"]+)" data-testid="keys-next"`)
	path := "/ui/keys"
	for range 10 {
		page := b.do("GET", path, nil).Body.String()
		for _, name := range []string{"k-one", "k-two", "k-three", "k-four", "k-five"} {
			if strings.Contains(page, ">"+name+"<") {
				seen[name] = true
			}
		}
		m := next.FindStringSubmatch(page)
		if m == nil {
			break
		}
		path = html.UnescapeString(m[1])
	}
	if len(seen) != 5 {
		t.Fatalf("keys reached through the pages: %v, want all 5", seen)
	}
}

// A key revoked after sign-in: every page, the new endpoint form too (it
// read only the catalog, and ignored its refusal), sends the browser to
// sign in instead of showing a page of the ended session.
func TestRevokedKeysSessionShowsNoForm(t *testing.T) {
	f := newFixture(t)
	var k api.APIKeyOut
	if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"m","role":"manager","tenant":"acme"}`, &k); code != http.StatusCreated {
		t.Fatalf("create key: %d", code)
	}
	b := f.browser()
	if w := b.signIn(k.Key); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", w.Code)
	}
	if w := b.do("GET", "/ui/endpoints/new", nil); w.Code != http.StatusOK {
		t.Fatalf("new endpoint form: %d", w.Code)
	}
	if code := f.apiCall(adminKey, "DELETE", "/v1/api-keys/"+k.ID, "", nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	w := b.do("GET", "/ui/endpoints/new", nil)
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/ui/sign-in") {
		t.Fatalf("new endpoint form after the key was revoked: %d %s, want 303 to sign in", w.Code, w.Header().Get("Location"))
	}
	if w := b.do("GET", "/ui/endpoints", nil); w.Code != http.StatusSeeOther {
		t.Fatalf("the session outlived its revoked key: %d", w.Code)
	}
}

// A time range holding more dead letters than one confirmation replays
// (maxReplayBatch) says so on the confirmation instead of silently
// replaying only the first ones; a range within the bound does not.
func TestReplayRangeBeyondTheBatchSaysSo(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep)
	for range 5 {
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, nil); st != 202 {
			t.Fatalf("publish: %d", st)
		}
	}
	f.attemptAll(5, time.Now().UTC(), func(int, store.Claim) (store.DeliveryState, int) { return store.DeliveryDead, 500 })
	b, token := adminBrowser(t, f)
	confirm := func() string {
		w := b.do("POST", "/ui/dead-letters/replay", url.Values{"csrf": {token}, "scope": {"range"}, "endpoint": {ep.ID}})
		if w.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	if page := confirm(); !strings.Contains(page, "Replay <b>5</b>") || strings.Contains(page, `data-testid="more"`) {
		t.Fatalf("5 dead letters within the bound: want 5 and no notice:\n%s", page)
	}
	defer func(n int) { maxReplayBatch = n }(maxReplayBatch)
	maxReplayBatch = 3
	page := confirm()
	if !strings.Contains(page, "Replay <b>3</b>") || !strings.Contains(page, `data-testid="more"`) || strings.Count(page, `name="id"`) != 3 {
		t.Fatalf("5 dead letters, a batch of 3: want 3 listed and the notice:\n%s", page)
	}
}

// A sign-in page left open past its token's 10 minutes (the browser has
// dropped the token's cookie) answers the sign-in page again with a
// fresh token and the reason, not a bare error page; the key is not
// used, and the fresh form signs in. A form whose token is not the
// cookie's is refused the same way.
func TestExpiredSignInPageComesBack(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	stale := csrfOf(t, b.do("GET", "/ui/sign-in", nil).Body.String())
	delete(b.cookies, signinCookie) // Max-Age 600 has passed
	w := b.do("POST", "/ui/sign-in", url.Values{"csrf": {stale}, "key": {adminKey}})
	page := w.Body.String()
	if w.Code != http.StatusForbidden || !strings.Contains(page, "the sign-in page expired") || b.cookies[sessionCookie] != "" {
		t.Fatalf("expired sign-in page: %d, session %q:\n%s", w.Code, b.cookies[sessionCookie], page)
	}
	fresh := csrfOf(t, page)
	if fresh == stale || b.cookies[signinCookie] != fresh {
		t.Fatalf("no fresh sign-in token: %q (cookie %q)", fresh, b.cookies[signinCookie])
	}
	w = b.do("POST", "/ui/sign-in", url.Values{"csrf": {"forged"}, "key": {adminKey}})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "the sign-in form was not valid") || b.cookies[sessionCookie] != "" {
		t.Fatalf("forged sign-in token: %d", w.Code)
	}
	fresh = csrfOf(t, w.Body.String())
	if w := b.do("POST", "/ui/sign-in", url.Values{"csrf": {fresh}, "key": {adminKey}}); w.Code != http.StatusSeeOther || b.cookies[sessionCookie] == "" {
		t.Fatalf("sign-in from the page that came back: %d", w.Code)
	}
}

// The admin forms posted by a tenant's key are refused naming the
// operation the form asked for (create-api-key…), not the list the
// refusal page would have read (GET /v1/api-keys), and change nothing.
func TestAdminFormsRefusedNamingTheirOperation(t *testing.T) {
	f := newFixture(t)
	var manager api.APIKeyOut
	f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"v","role":"manager","tenant":"acme"}`, &manager)
	b := f.browser()
	if w := b.signIn(manager.Key); w.Code != http.StatusSeeOther {
		t.Fatalf("manager sign-in: %d", w.Code)
	}
	token := csrfOf(t, b.do("GET", "/ui/endpoints", nil).Body.String())
	for _, c := range []struct{ path, op string }{
		{"/ui/keys", "create-api-key"},
		{"/ui/keys/key_x/revoke", "revoke-api-key"},
		{"/ui/portal-links", "create-portal-session"},
		{"/ui/portal-links/key_x/revoke", "revoke-portal-session"},
		{"/ui/sources", "create-source"},
		{"/ui/sources/src_x", "update-source"},
		{"/ui/sources/src_x/delete", "delete-source"},
	} {
		w := b.do("POST", c.path, url.Values{"csrf": {token}, "name": {"k"}, "role": {"viewer"}, "tenant": {"acme"}})
		if body := html.UnescapeString(w.Body.String()); w.Code != http.StatusForbidden || !strings.Contains(body, "(operation "+c.op+",") {
			t.Errorf("POST %s as a manager: %d; want 403 naming %s:\n%s", c.path, w.Code, c.op, body)
		}
	}
	var keys struct{ Data []api.APIKeyOut }
	f.apiCall(adminKey, "GET", "/v1/api-keys", "", &keys)
	if len(keys.Data) != 1 {
		t.Errorf("keys after the refused forms: %d, want 1", len(keys.Data))
	}
}

// TestErrorPagesCutEchoedInput: the console's 404 names the path asked for,
// cut to 256 bytes like the API's problems, so a 40 KB path does not come
// back as a 40 KB page; an API problem shown on a page is already bounded.
func TestErrorPagesCutEchoedInput(t *testing.T) {
	f := newFixture(t)
	b, _ := adminBrowser(t, f)
	long := "/ui/no" + strings.Repeat("%20x", 10000)
	w := b.do("GET", long, nil)
	if w.Code != http.StatusNotFound {
		t.Fatalf("GET a long unknown page: %d", w.Code)
	}
	if n := strings.Count(w.Body.String(), " x"); n*2 > 2*256 { // the page shows the path and may repeat it in the title
		t.Errorf("the 404 page repeats %d bytes of the path; want it cut to 256", n*2)
	}
	if !strings.Contains(w.Body.String(), "…") {
		t.Errorf("the 404 page does not show where the path was cut")
	}
	if w := b.do("GET", "/ui/endpoints/ep_a"+strings.Repeat("%20a", 10000), nil); w.Code < 400 || strings.Count(w.Body.String(), " a")*2 > 2*256 {
		t.Errorf("a long unknown endpoint: %d, %d bytes of the id repeated; want a refusal repeating at most 256", w.Code, strings.Count(w.Body.String(), " a")*2)
	}
}

// A session that ended on its own (idle or absolute expiry, its key or
// portal link revoked or expired) sends the browser to a sign-in page that
// says so and leads back to the page asked for, instead of a bare sign-in
// form (an endpoint owner holding only a portal link would not know why).
// Signing out, or never having signed in, shows no such note.
func TestEndedSessionSaysSoAtSignIn(t *testing.T) {
	f := newFixture(t)
	ended := func(what string, b *browser, path string) {
		t.Helper()
		w := b.do("GET", path, nil)
		loc := w.Header().Get("Location")
		if w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/sign-in?") {
			t.Fatalf("%s: GET %s: %d %s, want 303 to sign in", what, path, w.Code, loc)
		}
		page := b.do("GET", loc, nil).Body.String()
		if !strings.Contains(page, "session has ended") {
			t.Fatalf("%s: the sign-in page does not say the session ended:\n%s", what, page)
		}
		if !strings.Contains(page, `name="next" value="`+html.EscapeString(path)+`"`) {
			t.Fatalf("%s: the sign-in page does not lead back to %s", what, path)
		}
	}

	var k api.APIKeyOut
	if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"m","role":"manager","tenant":"acme"}`, &k); code != http.StatusCreated {
		t.Fatalf("create key: %d", code)
	}
	b := f.browser()
	if w := b.signIn(k.Key); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", w.Code)
	}
	if code := f.apiCall(adminKey, "DELETE", "/v1/api-keys/"+k.ID, "", nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	ended("revoked key", b, "/ui/endpoints?state=paused")

	b2 := f.browser()
	b2.signIn(adminKey)
	f.advance(DefaultIdleTimeout)
	ended("idle expiry", b2, "/ui/events")

	b3 := f.browser()
	if page := b3.do("GET", "/ui/sign-in?next=/ui/events", nil).Body.String(); strings.Contains(page, "session has ended") {
		t.Fatal("a first sign-in says a session ended")
	}
	b3.signIn(adminKey)
	token := csrfOf(t, b3.do("GET", "/ui/endpoints", nil).Body.String())
	b3.do("POST", "/ui/sign-out", url.Values{"csrf": {token}})
	w := b3.do("GET", "/ui/endpoints", nil)
	if page := b3.do("GET", w.Header().Get("Location"), nil).Body.String(); strings.Contains(page, "session has ended") {
		t.Fatal("after signing out, the sign-in page says the session ended")
	}
}

// The inbound source forms name their fields as the page does, and saving
// the source with its name (or destination) cleared is refused, changing
// nothing, instead of answering "saved" and keeping the old name.
func TestSourceFormsNameTheirFieldsAndRefuseClearedOnes(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	w := b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {""}, "scheme": {"stripe"},
		"secrets": {"source-secret-0123456789"}, "destination_url": {"http://10.0.0.9/in"}})
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Name: must not be empty") {
		t.Fatalf("a source without a name: %d %s", w.Code, body)
	}
	var src api.SourceOut
	if code := f.apiCall(adminKey, "POST", "/v1/sources", `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`, &src); code != http.StatusCreated {
		t.Fatalf("create source: %d", code)
	}
	for field, label := range map[string]string{"name": "Name", "destination_url": "Destination URL"} {
		form := url.Values{"csrf": {token}, "name": {src.Name}, "destination_url": {src.DestinationURL}, "secrets": {""}}
		form.Set(field, "")
		w := b.do("POST", "/ui/sources/"+src.ID, form)
		if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, label+": ") || strings.Contains(body, field+": ") {
			t.Fatalf("source saved with %s cleared: %d %s", field, w.Code, body)
		}
		var after api.SourceOut
		f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
		if !after.UpdatedAt.Equal(src.UpdatedAt) || after.Name != src.Name || after.DestinationURL != src.DestinationURL {
			t.Fatalf("source saved with %s cleared: it changed (%+v)", field, after)
		}
	}
}

// The API keys page lists portal links a page at a time and links to the
// next page, as it does keys: it read only the newest 1000 and offered no
// link, so an older link still valid (up to 7 days) behind 1000 newer ones
// (expired or revoked ones are listed too, and are never deleted) could not
// be seen or revoked in the console. Paging one list keeps the other's page.
func TestKeysPageLinksToMorePortalLinks(t *testing.T) {
	defer func(n, m int) { keysPageSize, linksPageSize = n, m }(keysPageSize, linksPageSize)
	keysPageSize, linksPageSize = 1, 2
	f := newFixture(t)
	for _, name := range []string{"k-one", "k-two"} {
		if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"`+name+`","role":"viewer","tenant":"acme"}`, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", name, code)
		}
	}
	ids := map[string]bool{}
	for range 5 {
		var ps api.PortalSessionOut
		if code := f.apiCall(adminKey, "POST", "/v1/portal-sessions", `{"tenant":"acme","role":"viewer"}`, &ps); code != http.StatusCreated {
			t.Fatalf("create portal session: %d", code)
		}
		ids[ps.ID] = true
	}
	b, _ := adminBrowser(t, f)
	seen := map[string]bool{}
	next := regexp.MustCompile(`href="(/ui/keys\?[^"]+)" data-testid="links-next"`)
	path := "/ui/keys"
	for range 10 {
		w := b.do("GET", path, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		page := w.Body.String()
		for id := range ids {
			if strings.Contains(page, `data-link="`+id+`"`) {
				seen[id] = true
			}
		}
		m := next.FindStringSubmatch(page)
		if m == nil {
			break
		}
		path = html.UnescapeString(m[1])
	}
	if len(seen) != len(ids) {
		t.Fatalf("portal links reached through the pages: %d of %d", len(seen), len(ids))
	}
	// The keys' next page keeps the portal links' page, and the reverse.
	page := b.do("GET", path, nil).Body.String()
	keysNext := regexp.MustCompile(`href="(/ui/keys\?[^"]+)" data-testid="keys-next"`).FindStringSubmatch(page)
	if keysNext == nil {
		t.Fatal("no next page of keys on a later page of portal links")
	}
	if u, _ := url.Parse(html.UnescapeString(keysNext[1])); u.Query().Get("links_cursor") == "" || u.Query().Get("cursor") == "" {
		t.Fatalf("the keys' next page %s does not keep the portal links' page", keysNext[1])
	}
}
