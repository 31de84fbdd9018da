package console

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

const adminKey = "console-test-admin-key-0123456789abcdef"

type okTester struct{}

func (okTester) SendTest(_ context.Context, ep store.Endpoint) (store.Attempt, string, error) {
	return store.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 204}, "evt_test", nil
}

type fixture struct {
	t   *testing.T
	st  store.Store
	api *api.Server
	c   *Console

	mu  sync.Mutex
	now time.Time
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func newFixture(t *testing.T) *fixture { t.Helper(); return newFixtureWith(t, nil) }

// newFixtureWith lets a test change the API's configuration.
func newFixtureWith(t *testing.T, cfg func(*api.Config)) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, now: time.Now().UTC()}
	ac := api.Config{Store: st, URLs: eg, Tester: okTester{}, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)},
		AuthFailureBurst: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	if cfg != nil {
		cfg(&ac)
	}
	f.api, err = api.New(ac)
	if err != nil {
		t.Fatal(err)
	}
	f.c, err = New(Config{API: f.api, Version: "test", Now: f.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// attemptAll claims every due delivery (there must be want of them) and
// completes each with the outcome given for it (its i-th claim), as one
// attempt of 1 ms started now; it returns the claims.
func (f *fixture) attemptAll(want int, now time.Time, outcome func(i int, c store.Claim) (state store.DeliveryState, status int)) []store.Claim {
	f.t.Helper()
	claims, err := f.st.ClaimDeliveries(f.t.Context(), store.ClaimParams{Owner: "test", Limit: want + 10, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != want {
		f.t.Fatalf("claim: %d deliveries, want %d (%v)", len(claims), want, err)
	}
	cs := make([]store.Completion, len(claims))
	for i, c := range claims {
		state, status := outcome(i, c)
		cs[i] = store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "test", LeaseUntil: c.Delivery.LeaseUntil, State: state, Now: now,
			Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: now, StatusCode: status, Duration: time.Millisecond}}
	}
	if err := f.st.CompleteDeliveries(f.t.Context(), cs); err != nil {
		f.t.Fatal(err)
	}
	return claims
}

// apiCall calls the API directly (not through the console).
func (f *fixture) apiCall(key, method, path, body string, out any) int {
	f.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	f.c.ServeHTTP(w, r)
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			f.t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
	}
	return w.Code
}

// browser keeps cookies between requests to the console.
type browser struct {
	f       *fixture
	cookies map[string]string
	tls     bool
}

func (f *fixture) browser() *browser { return &browser{f: f, cookies: map[string]string{}} }

func (b *browser) do(method, path string, form url.Values) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.tls {
		r.TLS = &tls.ConnectionState{}
	}
	for k, v := range b.cookies {
		r.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	w := httptest.NewRecorder()
	b.f.c.ServeHTTP(w, r)
	for _, ck := range w.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(b.cookies, ck.Name)
		} else {
			b.cookies[ck.Name] = ck.Value
		}
	}
	return w
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%s", body)
	}
	return m[1]
}

func (b *browser) signIn(key string) *httptest.ResponseRecorder {
	b.f.t.Helper()
	page := b.do("GET", "/ui/sign-in", nil)
	return b.do("POST", "/ui/sign-in", url.Values{"csrf": {csrfOf(b.f.t, page.Body.String())}, "key": {key}})
}

func TestSignInCreatesAStrictSession(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	w := b.signIn(adminKey)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("sign-in: %d %s", w.Code, w.Header().Get("Location"))
	}
	var sess *http.Cookie
	for _, ck := range w.Result().Cookies() {
		if ck.Name == sessionCookie {
			sess = ck
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure || len(sess.Value) < 40 {
		t.Fatalf("session cookie: %+v", sess)
	}
	if strings.Contains(sess.Value, adminKey) {
		t.Fatal("the cookie carries the key")
	}
	page := b.do("GET", "/ui/endpoints", nil)
	if page.Code != 200 || !strings.Contains(page.Body.String(), "admin · all tenants") {
		t.Fatalf("endpoints page: %d", page.Code)
	}
	if got := page.Header().Get("Content-Security-Policy"); got != csp || !strings.Contains(got, "script-src 'self'") {
		t.Fatalf("CSP: %q", got)
	}

	// Behind TLS the cookie is Secure.
	bt := f.browser()
	bt.tls = true
	w = bt.signIn(adminKey)
	for _, ck := range w.Result().Cookies() {
		if ck.Name == sessionCookie && !ck.Secure {
			t.Fatal("session cookie not Secure behind TLS")
		}
	}
}

func TestSignInRefusals(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	// No pre-session token (a cross-site sign-in form): refused.
	w := b.do("POST", "/ui/sign-in", url.Values{"key": {adminKey}, "csrf": {"guess"}})
	if w.Code != http.StatusForbidden || b.cookies[sessionCookie] != "" {
		t.Fatalf("sign-in without the pre-session token: %d", w.Code)
	}
	// A wrong key: 401 and the API's reason, no session.
	w = b.signIn("herald_key_not-a-key")
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "invalid API key") || b.cookies[sessionCookie] != "" {
		t.Fatalf("wrong key: %d %s", w.Code, w.Body)
	}
	// A portal token that is not one: the refusal speaks of the link.
	w = b.signIn("herald_portal_" + strings.Repeat("x", 43))
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "invalid portal link") || b.cookies[sessionCookie] != "" {
		t.Fatalf("wrong portal token: %d %s", w.Code, w.Body)
	}
	// Without a session, pages send the browser to sign in.
	w = b.do("GET", "/ui/events?type=x", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/sign-in?next=%2Fui%2Fevents%3Ftype%3Dx" {
		t.Fatalf("no session: %d %s", w.Code, w.Header().Get("Location"))
	}
}

func TestPostWithoutCSRFTokenChangesNothing(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://receiver.example/hook"}`, &ep); code != 201 {
		t.Fatal(code)
	}
	b := f.browser()
	b.signIn(adminKey)
	page := b.do("GET", "/ui/endpoints/"+ep.ID, nil)
	token := csrfOf(t, page.Body.String())
	for _, form := range []url.Values{{}, {"csrf": {"wrong"}}, {"csrf": {""}}} {
		w := b.do("POST", "/ui/endpoints/"+ep.ID+"/delete", form)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "CSRF") {
			t.Fatalf("POST with %v: %d", form, w.Code)
		}
	}
	// Another session's token does not work either.
	other := f.browser()
	other.signIn(adminKey)
	otherToken := csrfOf(t, other.do("GET", "/ui/endpoints", nil).Body.String())
	if w := b.do("POST", "/ui/endpoints/"+ep.ID+"/delete", url.Values{"csrf": {otherToken}}); w.Code != http.StatusForbidden {
		t.Fatalf("another session's token: %d", w.Code)
	}
	if code := f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID, "", nil); code != 200 {
		t.Fatalf("the endpoint was deleted by a refused request: %d", code)
	}
	// The page's own token works.
	if w := b.do("POST", "/ui/endpoints/"+ep.ID+"/delete", url.Values{"csrf": {token}}); w.Code != http.StatusSeeOther {
		t.Fatalf("POST with the token: %d %s", w.Code, w.Body)
	}
	if code := f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID, "", nil); code != 404 {
		t.Fatalf("endpoint not deleted: %d", code)
	}
}

func TestSessionExpiry(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn(adminKey)
	f.advance(DefaultIdleTimeout - time.Minute)
	if w := b.do("GET", "/ui/endpoints", nil); w.Code != 200 {
		t.Fatalf("before idle expiry: %d", w.Code)
	}
	f.advance(DefaultIdleTimeout)
	if w := b.do("GET", "/ui/endpoints", nil); w.Code != http.StatusSeeOther {
		t.Fatalf("after idle expiry: %d", w.Code)
	}
	// Absolute expiry: used every 20 minutes, still ends after 12 h.
	b2 := f.browser()
	b2.signIn(adminKey)
	for elapsed := time.Duration(0); elapsed < DefaultAbsoluteTimeout-20*time.Minute; elapsed += 20 * time.Minute {
		f.advance(20 * time.Minute)
		if w := b2.do("GET", "/ui/endpoints", nil); w.Code != 200 {
			t.Fatalf("at %v: %d", elapsed, w.Code)
		}
	}
	f.advance(40 * time.Minute)
	if w := b2.do("GET", "/ui/endpoints", nil); w.Code != http.StatusSeeOther {
		t.Fatalf("after absolute expiry: %d", w.Code)
	}
}

func TestSignOutEndsTheSession(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn(adminKey)
	sid := b.cookies[sessionCookie]
	token := csrfOf(t, b.do("GET", "/ui/endpoints", nil).Body.String())
	if w := b.do("POST", "/ui/sign-out", url.Values{"csrf": {token}}); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", w.Code)
	}
	b.cookies[sessionCookie] = sid // a stolen copy of the cookie is dead too
	if w := b.do("GET", "/ui/endpoints", nil); w.Code != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d", w.Code)
	}
}

// A tenant's session sees what the API lets its key see: the console
// makes no decision of its own.
func TestTenantSessionIsScopedByTheAPI(t *testing.T) {
	f := newFixture(t)
	var epA, epB api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook","description":"acme hook"}`, &epA)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"bravo","url":"https://bravo.example/hook","description":"bravo hook"}`, &epB)
	var viewer api.APIKeyOut
	if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":"acme"}`, &viewer); code != 201 {
		t.Fatal(code)
	}
	b := f.browser()
	if w := b.signIn(viewer.Key); w.Code != http.StatusSeeOther {
		t.Fatalf("viewer sign-in: %d", w.Code)
	}
	list := b.do("GET", "/ui/endpoints", nil).Body.String()
	if !strings.Contains(list, epA.ID) || strings.Contains(list, epB.ID) || strings.Contains(list, "bravo") {
		t.Fatal("the viewer's list is not acme's only")
	}
	if strings.Contains(list, "New endpoint") || strings.Contains(list, "API keys") {
		t.Fatal("the viewer is offered what its role may not do")
	}
	if w := b.do("GET", "/ui/endpoints/"+epB.ID, nil); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "bravo.example") {
		t.Fatalf("another tenant's endpoint: %d", w.Code)
	}
	if w := b.do("GET", "/ui/keys", nil); w.Code != http.StatusForbidden {
		t.Fatalf("keys page for a viewer: %d", w.Code)
	}
	token := csrfOf(t, b.do("GET", "/ui/endpoints/"+epA.ID, nil).Body.String())
	if w := b.do("POST", "/ui/endpoints/"+epA.ID+"/test", url.Values{"csrf": {token}}); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "role viewer may not") {
		t.Fatalf("a viewer's test event: %d %s", w.Code, w.Body)
	}
	// Revoking the key ends the session at its next request.
	if code := f.apiCall(adminKey, "DELETE", "/v1/api-keys/"+viewer.ID, "", nil); code != 204 {
		t.Fatal(code)
	}
	if w := b.do("GET", "/ui/endpoints", nil); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/ui/sign-in") {
		t.Fatalf("after revocation: %d %s", w.Code, w.Header().Get("Location"))
	}
}

func TestStoredMarkupRendersAsText(t *testing.T) {
	f := newFixture(t)
	desc := `<script>alert(1)</script><img src=x onerror=alert(2)>`
	var ep api.EndpointOut
	body, _ := json.Marshal(map[string]any{"tenant": "acme", "url": `https://receiver.example/hook?q=<b>x</b>"><svg/onload=alert(3)>`, "description": desc})
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", string(body), &ep); code != 201 {
		t.Fatal(code)
	}
	b := f.browser()
	b.signIn(adminKey)
	for _, p := range []string{"/ui/endpoints", "/ui/endpoints/" + ep.ID} {
		page := b.do("GET", p, nil).Body.String()
		for _, bad := range []string{"<script>alert", "<img src=x", "<svg/onload", "<b>x</b>"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s: stored markup %q reached the page unescaped", p, bad)
			}
		}
		if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the description is not shown escaped", p)
		}
	}
}

func TestPrettyJSONKeepsEscapesApart(t *testing.T) {
	got := prettyJSON(json.RawMessage(`{"a":"\u003cb\u003e \u0026","b":"\\u003c","c":"\"q\""}`))
	want := "{\n  \"a\": \"<b> &\",\n  \"b\": \"\\\\u003c\",\n  \"c\": \"\\\"q\\\"\"\n}"
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/events?id=1": "/ui/events?id=1", "": "/ui/", "https://evil.example/ui/": "/ui/",
		"//evil.example": "/ui/", "/ui/\\evil": "/ui/", "/v1/endpoints": "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDocsAndRootWorkOffline(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	w := b.do("GET", "/docs", nil)
	page := w.Body.String()
	if w.Code != 200 || !strings.Contains(page, "/v1/endpoints/{id}/rotate-secret") || !strings.Contains(page, "overlap_seconds") {
		t.Fatalf("/docs: %d", w.Code)
	}
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindString(page); m != "" {
		t.Fatalf("/docs loads something from elsewhere: %s", m)
	}
	if w := b.do("GET", "/", nil); w.Code != http.StatusFound || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("GET /: %d %s", w.Code, w.Header().Get("Location"))
	}
	if w := b.do("GET", "/ui/static/console.js", nil); w.Code != 200 {
		t.Fatalf("console.js: %d", w.Code)
	}
	// The pages name their icon, so a browser does not ask for
	// /favicon.ico (a 404 in its console on every page), and it is served.
	for _, p := range []string{"/ui/sign-in", "/docs"} {
		if page := b.do("GET", p, nil).Body.String(); !strings.Contains(page, `<link rel="icon" href="/ui/static/icon.svg"`) {
			t.Fatalf("%s names no icon", p)
		}
	}
	if w := b.do("GET", "/ui/static/icon.svg", nil); w.Code != 200 || w.Header().Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("icon.svg: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	// Everything else is the API's.
	if w := b.do("GET", "/openapi.json", nil); w.Code != 200 {
		t.Fatalf("/openapi.json: %d", w.Code)
	}
}

// TestEndpointsPageShowsSourceEndpoints (issue 13 point 19): an admin sees
// inbound sources' forwarding endpoints on the endpoints page with
// kind=source (or all); the default page shows tenants' endpoints.
func TestEndpointsPageShowsSourceEndpoints(t *testing.T) {
	f := newFixture(t)
	var src struct {
		EndpointID string `json:"endpoint_id"`
	}
	if st := f.apiCall(adminKey, "POST", "/v1/sources", `{"name":"gh","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`, &src); st != 201 {
		t.Fatalf("create source: %d", st)
	}
	b := f.browser()
	b.signIn(adminKey)
	if page := b.do("GET", "/ui/endpoints", nil).Body.String(); strings.Contains(page, src.EndpointID) {
		t.Error("the default endpoints page lists a source's forwarding endpoint")
	}
	for _, kind := range []string{"source", "all"} {
		if page := b.do("GET", "/ui/endpoints?kind="+kind, nil).Body.String(); !strings.Contains(page, src.EndpointID) {
			t.Errorf("kind=%s: the source's forwarding endpoint %s is not listed", kind, src.EndpointID)
		}
	}
}

// TestEventPageShowsInboundBodyAndHeaders: the page of an event received
// through the inbound gateway shows the provider's body as its payload
// and the provider's headers as stored.
func TestEventPageShowsInboundBodyAndHeaders(t *testing.T) {
	f := newFixture(t)
	var src struct {
		ID string `json:"id"`
	}
	if st := f.apiCall(adminKey, "POST", "/v1/sources", `{"name":"gh","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`, &src); st != 201 {
		t.Fatalf("create source: %d", st)
	}
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":42}`)
	id := store.NewID("evt")
	now := f.clock()
	if _, err := f.st.PublishEvent(t.Context(), store.PublishParams{
		Event: store.Event{ID: id, Tenant: src.ID, Type: "github.ping", OccurredAt: now, Body: body, IdempotencyKey: "k1",
			Fingerprint: store.Fingerprint(src.ID, "github.ping", body), Headers: map[string]string{"Content-Type": "application/json", "X-Github-Event": "ping"}},
		Now: now, NewDeliveryID: func() string { return store.NewID("dlv") },
	}); err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.signIn(adminKey)
	page := b.do("GET", "/ui/events/"+id, nil).Body.String()
	for _, want := range []string{"Keep it logically awesome.", "X-Github-Event", "ping", `data-testid="provider-headers"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the inbound event's page does not show %q:\n%s", want, page)
		}
	}
}
