package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// tenancyFixture is a running Herald with one Stripe source (forwarding to
// an internal destination that answers a private body) and tenant keys of
// acme.
type tenancyFixture struct {
	h                   *herald
	dest                *receiver // the source's internal destination
	attacker            *receiver // a receiver the attacker controls
	src                 sourceResp
	manager, publisher  string
	stripeSecret, event string
}

func newTenancyFixture(t *testing.T) *tenancyFixture {
	t.Helper()
	f := &tenancyFixture{h: startHerald(t, nil), stripeSecret: "whsec_stripe_provider_secret"}
	f.dest = newReceiver(t, 200)
	f.dest.headers = map[string]string{}
	f.attacker = newReceiver(t, 200)
	f.src = f.h.createSource(map[string]any{"name": "stripe", "scheme": "stripe", "secrets": []string{f.stripeSecret}, "destination_url": f.dest.URL})
	f.manager = f.key("manager", "acme")
	f.publisher = f.key("publisher", "acme")
	f.event = `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`
	return f
}

func (f *tenancyFixture) key(role, tenant string) string {
	f.h.t.Helper()
	var k struct{ Key string }
	if st, raw := f.h.call("POST", "/v1/api-keys", map[string]any{"name": role, "role": role, "tenant": tenant}, &k); st != 201 {
		f.h.t.Fatalf("create key: %d %s", st, raw)
	}
	return k.Key
}

// stored counts every non-operational event Herald holds (admin view, no
// filter), and the deliveries of the source's forwarding endpoint. The
// housekeeper's operational events (endpoint.created for the fixture's
// endpoints) may be stored at any moment and are left out.
func (f *tenancyFixture) stored() (events, sourceDeliveries int) {
	f.h.t.Helper()
	var evs struct{ Data []struct{ Type string } }
	var ds struct{ Data []json.RawMessage }
	f.h.call("GET", "/v1/events?limit=1000", nil, &evs)
	f.h.call("GET", "/v1/endpoints/"+f.src.EndpointID+"/deliveries?limit=1000", nil, &ds)
	for _, e := range evs.Data {
		if !store.IsOperational(e.Type) {
			events++
		}
	}
	return events, len(ds.Data)
}

// ingestStripe sends the provider's real, signed event to the gateway.
func (f *tenancyFixture) ingestStripe() string {
	f.h.t.Helper()
	body := []byte(f.event)
	st, resp := f.h.ingest(f.src.IngestPath, providerRequest(f.h.t, "stripe", f.stripeSecret, time.Now(), body, ""), body)
	if st != 200 {
		f.h.t.Fatalf("ingest: %d %s", st, resp)
	}
	return resp
}

func (f *tenancyFixture) waitForwarded(n int) {
	f.h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.dest.got()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // one more forward would show up here
	if got := len(f.dest.got()); got != n {
		f.h.t.Fatalf("the destination got %d requests, want %d", got, n)
	}
}

// TestAttackForgeInboundEvent: a key holder (even an admin) cannot publish
// into a source's internal tenant, so no forged "provider" event reaches
// the internal destination; nothing is stored.
func TestAttackForgeInboundEvent(t *testing.T) {
	t.Parallel()
	f := newTenancyFixture(t)
	ev0, d0 := f.stored()
	forged := map[string]any{"tenant": f.src.ID, "type": "invoice.paid", "data": map[string]any{"forged": true}}
	for name, key := range map[string]string{"admin": testAPIKey, "publisher": f.publisher} {
		st, raw := f.h.callWithKey(key, "POST", "/v1/events", forged, nil)
		if st != 422 || !strings.Contains(string(raw), "reserved for inbound sources") {
			t.Errorf("%s publishing into %s: %d %s, want 422 (reserved tenant)", name, f.src.ID, st, raw)
		}
	}
	// The prefix is reserved in any case: a look-alike tenant is refused too.
	lookalike := map[string]any{"tenant": "SRC_" + strings.TrimPrefix(f.src.ID, "src_"), "type": "invoice.paid", "data": map[string]any{}}
	for _, path := range []string{"/v1/events", "/v1/endpoints"} {
		body := lookalike
		if path == "/v1/endpoints" {
			body = map[string]any{"tenant": lookalike["tenant"], "url": "https://x.example/"}
		}
		if st, raw := f.h.callWithKey(testAPIKey, "POST", path, body, nil); st != 422 || !strings.Contains(string(raw), "reserved for inbound sources") {
			t.Errorf("admin POST %s naming %s: %d %s, want 422 (reserved tenant)", path, lookalike["tenant"], st, raw)
		}
	}
	if st, raw := f.h.callWithKey(f.manager, "POST", "/v1/events", forged, nil); st != 403 {
		t.Errorf("manager publishing: %d %s, want 403 (managers do not publish)", st, raw)
	}
	if ev, d := f.stored(); ev != ev0 || d != d0 {
		t.Fatalf("refused publishes stored events %d→%d, source deliveries %d→%d", ev0, ev, d0, d)
	}
	time.Sleep(200 * time.Millisecond) // a forward would show up here
	if n := len(f.dest.got()); n != 0 {
		t.Fatalf("the internal destination got %d forged requests", n)
	}
}

// TestAttackSwallowProviderEvent: publishing a provider's event id first
// (as the event id or as an Idempotency-Key) no longer makes the real
// provider event a "duplicate": the real one is received and forwarded.
func TestAttackSwallowProviderEvent(t *testing.T) {
	t.Parallel()
	f := newTenancyFixture(t)
	const stripeID = "evt_1NG8Du2eZvKYlo2CUI79vXWy"
	// Into the source's tenant: refused.
	st, raw := f.h.callWithKey(f.publisher, "POST", "/v1/events", map[string]any{"tenant": f.src.ID, "type": "x.y", "data": map[string]any{}},
		nil, "Idempotency-Key", stripeID)
	if st != 422 {
		t.Fatalf("idempotency key into the source's tenant: %d %s, want 422", st, raw)
	}
	// Into the attacker's own tenant, with the provider's id and key: a
	// separate event of acme (ids are per tenant), harmless to the source.
	for _, hdr := range [][]string{nil, {"Idempotency-Key", stripeID}} {
		st, raw = f.h.callWithKey(f.publisher, "POST", "/v1/events", map[string]any{"id": stripeID, "type": "invoice.paid", "data": map[string]any{}}, nil, hdr...)
		if st != 202 && st != 200 {
			t.Fatalf("publish %s in acme: %d %s", stripeID, st, raw)
		}
	}
	if resp := f.ingestStripe(); !strings.Contains(resp, `"received":true`) {
		t.Fatalf("the real provider event was taken for a duplicate: %s", resp)
	}
	f.waitForwarded(1)
}

// TestAttackSubscribeToInternalTenant: no endpoint can be created in (or
// listed for) a source's tenant, so no one receives copies of its inbound
// webhooks.
func TestAttackSubscribeToInternalTenant(t *testing.T) {
	t.Parallel()
	f := newTenancyFixture(t)
	for name, key := range map[string]string{"admin": testAPIKey, "manager": f.manager} {
		st, raw := f.h.callWithKey(key, "POST", "/v1/endpoints", map[string]any{"tenant": f.src.ID, "url": f.attacker.URL}, nil)
		if st != 422 || !strings.Contains(string(raw), "reserved") {
			t.Errorf("%s subscribing to %s: %d %s, want 422", name, f.src.ID, st, raw)
		}
		for _, list := range []string{"/v1/endpoints", "/v1/events", "/v1/deliveries", "/v1/dead-letters"} {
			if st, raw := f.h.callWithKey(key, "GET", list+"?tenant="+f.src.ID, nil, nil); st != 422 {
				t.Errorf("%s listing %s?tenant=%s: %d %s, want 422", name, list, f.src.ID, st, raw)
			}
		}
	}
	var eps struct{ Data []json.RawMessage }
	f.h.call("GET", "/v1/endpoints?limit=1000", nil, &eps)
	if len(eps.Data) != 0 {
		t.Fatalf("refused creations stored %d endpoints", len(eps.Data))
	}
	f.ingestStripe()
	f.waitForwarded(1)
	if n := len(f.attacker.got()); n != 0 {
		t.Fatalf("the attacker's receiver got %d copies of inbound webhooks", n)
	}
}

// TestAttackReadInternalAnswer: a tenant key cannot read the attempts of a
// source's deliveries (whose response excerpts hold the internal service's
// answers): they are another tenant's, so unknown (404), absent from lists.
func TestAttackReadInternalAnswer(t *testing.T) {
	t.Parallel()
	f := newTenancyFixture(t)
	const private = "internal-service-private-answer"
	f.dest.mu.Lock()
	f.dest.body = private
	f.dest.mu.Unlock()
	f.ingestStripe()
	f.waitForwarded(1)
	var ds struct {
		Data []struct{ ID string }
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		f.h.call("GET", "/v1/endpoints/"+f.src.EndpointID+"/deliveries?state=succeeded", nil, &ds)
		if len(ds.Data) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(ds.Data) != 1 {
		t.Fatalf("source deliveries: %+v", ds.Data)
	}
	dlv := ds.Data[0].ID
	if a := f.h.attempts(dlv); len(a) != 1 || !strings.Contains(a[0].ResponseExcerpt, private) {
		t.Fatalf("the admin's view of the attempt: %+v (the fixture must hold the private answer)", a)
	}
	viewer := f.key("viewer", "acme")
	for name, key := range map[string]string{"manager": f.manager, "viewer": viewer, "publisher": f.publisher} {
		for _, c := range []struct {
			path string
			want []int
		}{
			{"/v1/deliveries/" + dlv + "/attempts", []int{404, 403}},
			{"/v1/deliveries/" + dlv, []int{404, 403}},
			{"/v1/endpoints/" + f.src.EndpointID + "/deliveries", []int{404, 403}},
			{"/v1/endpoints/" + f.src.EndpointID, []int{404, 403}},
			{"/v1/deliveries?limit=1000", []int{200, 403}},
			{"/v1/events?limit=1000", []int{200}},
			{"/v1/sources", []int{403}},
			{"/v1/sources/" + f.src.ID, []int{403}},
		} {
			st, raw := f.h.callWithKey(key, "GET", c.path, nil, nil)
			if !containsInt(c.want, st) || strings.Contains(string(raw), private) || strings.Contains(string(raw), dlv) && st == http.StatusOK {
				t.Errorf("%s GET %s: %d %s; want one of %v and nothing of the source", name, c.path, st, raw, c.want)
			}
		}
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSameProducerIDTwoTenants: two tenants publish "inv-1" (and the same
// Idempotency-Key): both get 202 and each is delivered to its own
// endpoints only; an admin reads each by naming the tenant.
func TestSameProducerIDTwoTenants(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	f := &tenancyFixture{h: h}
	rcv := map[string]*receiver{}
	for _, tn := range []string{"acme", "bravo"} {
		rcv[tn] = newReceiver(t, 200)
		h.createEndpoint(tn, rcv[tn].URL)
		pub := f.key("publisher", tn)
		var out publishResp
		st, raw := h.callWithKey(pub, "POST", "/v1/events", `{"id":"inv-1","type":"invoice.paid","data":{"for":"`+tn+`"}}`, &out, "Idempotency-Key", "idem-1")
		if st != 202 || out.ID != "inv-1" || out.Duplicate || out.Deliveries != 1 {
			t.Fatalf("%s publishes inv-1: %d %s, want 202 with one delivery", tn, st, raw)
		}
	}
	for tn, r := range rcv {
		deadline := time.Now().Add(10 * time.Second)
		for len(r.got()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		got := r.got()
		if len(got) != 1 || got[0].Header.Get("X-Event-Id") != "inv-1" || got[0].Header.Get("Webhook-Id") != "inv-1" ||
			!strings.Contains(string(got[0].Body), `"for":"`+tn+`"`) || !strings.Contains(string(got[0].Body), `"id":"inv-1"`) {
			t.Fatalf("%s's receiver got %d requests: %+v", tn, len(got), got)
		}
	}
	// The admin names the tenant; without it, a producer's id is not guessed.
	for _, tn := range []string{"acme", "bravo"} {
		var ev struct{ ID, Tenant string }
		if st, raw := h.call("GET", "/v1/events/inv-1?tenant="+tn, nil, &ev); st != 200 || ev.ID != "inv-1" || ev.Tenant != tn {
			t.Fatalf("admin GET inv-1 of %s: %d %s", tn, st, raw)
		}
	}
	if st, raw := h.call("GET", "/v1/events/inv-1", nil, nil); st != 404 || !strings.Contains(string(raw), "?tenant=") {
		t.Fatalf("admin GET inv-1 without a tenant: %d %s, want 404 naming ?tenant=", st, raw)
	}
}

// TestPortalSession: an admin mints a portal session for a tenant; its URL
// opens the web UI (the token in the fragment), and the token acts as the
// tenant's key of that role. Out-of-range lifetimes and roles are refused.
func TestPortalSession(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	h.createEndpoint("acme", "https://acme.example/hook")
	h.createEndpoint("bravo", "https://bravo.example/hook")
	var ps struct {
		Token, URL string
		ExpiresAt  time.Time `json:"expires_at"`
	}
	before := time.Now()
	if st, raw := h.call("POST", "/v1/portal-sessions", map[string]any{"tenant": "acme", "role": "viewer", "ttl_seconds": 3600}, &ps); st != 201 {
		t.Fatalf("create portal session: %d %s", st, raw)
	}
	if !strings.HasPrefix(ps.Token, "herald_portal_") || ps.URL != h.base+"/ui/portal#token="+ps.Token ||
		ps.ExpiresAt.Before(before.Add(time.Hour-time.Minute)) || ps.ExpiresAt.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Fatalf("portal session %+v", ps)
	}
	resp, err := http.Get(ps.URL) // the client drops the fragment: the token never reaches the server
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s", ps.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var eps struct{ Data []struct{ Tenant string } }
	if st, raw := h.callWithKey(ps.Token, "GET", "/v1/endpoints", nil, &eps); st != 200 || len(eps.Data) != 1 || eps.Data[0].Tenant != "acme" {
		t.Fatalf("the token lists %d %s; want acme's endpoint only", st, raw)
	}
	if st, raw := h.callWithKey(ps.Token, "POST", "/v1/endpoints", map[string]any{"url": "https://x.example/"}, nil); st != 403 {
		t.Fatalf("a viewer token creating an endpoint: %d %s, want 403", st, raw)
	}
	for _, body := range []map[string]any{
		{"tenant": "acme", "role": "viewer", "ttl_seconds": 7*24*3600 + 1},
		{"tenant": "acme", "role": "admin"},
		{"tenant": "acme", "role": "publisher"},
		{"tenant": "src_x"},
		{"role": "viewer"},
	} {
		if st, raw := h.call("POST", "/v1/portal-sessions", body, nil); st != 422 {
			t.Errorf("portal session %v: %d %s, want 422", body, st, raw)
		}
	}
}

// TestShortAdminKeyRefused: HERALD_API_KEY under 32 characters stops the
// start with the reason.
func TestShortAdminKeyRefused(t *testing.T) {
	t.Parallel()
	db, key := testDB(t)
	_, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: key, APIKey: "dev-key"})
	if err == nil || !strings.Contains(err.Error(), "HERALD_API_KEY is 7 characters") || !strings.Contains(err.Error(), "at least 32") || strings.Contains(err.Error(), "dev-key") {
		t.Fatalf("app.New with a 7-character admin key: %v; want the reason, without the key", err)
	}
}

// TestBlankAdminKeyRefused: an admin key with whitespace (all blanks, or a
// stray newline from a file) is long enough but could never be presented
// as a bearer token; the start refuses it with the reason, never echoing it.
func TestBlankAdminKeyRefused(t *testing.T) {
	t.Parallel()
	for name, k := range map[string]string{
		"all spaces":       strings.Repeat(" ", 40),
		"trailing newline": "0123456789abcdef0123456789abcdef0123\n",
		"inner space":      "0123456789abcdef 0123456789abcdef0123",
		"non-ASCII":        "0123456789abcdef0123456789abcdef0123é",
	} {
		db, key := testDB(t)
		_, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: key, APIKey: k})
		if err == nil || !strings.Contains(err.Error(), "visible ASCII") || (strings.TrimSpace(k) != "" && strings.Contains(err.Error(), strings.TrimSpace(k))) {
			t.Errorf("%s: app.New: %v; want a refusal naming the rule, without the key", name, err)
		}
	}
}

// TestViewerNeverReadsHeaderValues: custom header values are receivers'
// credentials; a viewer key and a viewer portal token see the header
// names with the values redacted, on get and list; a manager sees them.
func TestViewerNeverReadsHeaderValues(t *testing.T) {
	t.Parallel()
	f := newTenancyFixture(t)
	viewer := f.key("viewer", "acme")
	var ep struct{ ID string }
	if st, raw := f.h.callWithKey(f.manager, "POST", "/v1/endpoints", map[string]any{"url": "https://x.example/hook",
		"headers": map[string]string{"Authorization": "Bearer receiver-secret-123"}}, &ep); st != 201 {
		t.Fatalf("create endpoint: %d %s", st, raw)
	}
	var ps struct{ Token string }
	if st, raw := f.h.call("POST", "/v1/portal-sessions", map[string]any{"tenant": "acme", "role": "viewer"}, &ps); st != 201 {
		t.Fatalf("portal session: %d %s", st, raw)
	}
	for name, k := range map[string]string{"viewer key": viewer, "viewer portal token": ps.Token, "manager": f.manager} {
		for _, path := range []string{"/v1/endpoints/" + ep.ID, "/v1/endpoints"} {
			st, raw := f.h.callWithKey(k, "GET", path, nil, nil)
			if st != 200 || !strings.Contains(string(raw), `"Authorization"`) {
				t.Fatalf("%s GET %s: %d %s", name, path, st, raw)
			}
			leaked := strings.Contains(string(raw), "receiver-secret-123")
			if name == "manager" && !leaked {
				t.Errorf("manager GET %s does not show the header value: %s", path, raw)
			}
			if name != "manager" && (leaked || !strings.Contains(string(raw), "[redacted]")) {
				t.Errorf("%s GET %s: %s; want the header value redacted", name, path, raw)
			}
		}
	}
}

// TestAdminKeyMustNotBeAStoredKey: HERALD_API_KEY equal to a stored key's
// secret (active or revoked) would turn that key into an admin key that
// revocation cannot stop; the start refuses it and names the key, never
// the secret. A key of its own still starts.
func TestAdminKeyMustNotBeAStoredKey(t *testing.T) {
	t.Parallel()
	db, encKey := testDB(t)
	start := func(apiKey string) (*app.Main, error) {
		return app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: encKey, APIKey: apiKey, Dev: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	m, err := start(testAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	viewer, revoked := "herald_viewer_secret_0123456789abcdef0123", "herald_revoked_secret_0123456789abcdef012"
	for id, secret := range map[string]string{"key_viewer": viewer, "key_revoked": revoked} {
		if _, err := m.Store().CreateAPIKey(t.Context(), store.APIKey{ID: id, Kind: store.KeyKindAPIKey, Name: id, Role: store.RoleViewer,
			Tenant: "acme", Hash: api.HashAPIKey(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Store().RevokeAPIKey(t.Context(), store.KeyKindAPIKey, "key_revoked", time.Now()); err != nil {
		t.Fatal(err)
	}
	m.Close()
	for secret, want := range map[string]string{viewer: "a stored API key (key_viewer, role viewer)", revoked: "a revoked API key (key_revoked"} {
		if _, err := start(secret); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
			t.Errorf("start with a stored key's secret as HERALD_API_KEY: %v; want a refusal naming %q", err, want)
		}
	}
	m, err = start(testAPIKey)
	if err != nil {
		t.Fatalf("restart with the admin key of its own: %v", err)
	}
	m.Close()
}

// TestLastAdminKeyKept: without HERALD_API_KEY, the last usable stored
// admin key cannot be revoked (409 naming the way out); once another admin
// key exists, the first can be revoked, and then the second cannot.
func TestLastAdminKeyKept(t *testing.T) {
	t.Parallel()
	var printed strings.Builder
	h := startHerald(t, func(c *app.Config) { c.APIKey = ""; c.Stdout = &printed })
	generated := regexp.MustCompile(`herald_key_[\w-]+`).FindString(printed.String())
	if generated == "" {
		t.Fatalf("no generated admin key printed: %q", printed.String())
	}
	var keys struct{ Data []struct{ ID, Role string } }
	if st, raw := h.callWithKey(generated, "GET", "/v1/api-keys", nil, &keys); st != 200 || len(keys.Data) != 1 {
		t.Fatalf("list keys: %d %s", st, raw)
	}
	first := keys.Data[0].ID
	if st, raw := h.callWithKey(generated, "DELETE", "/v1/api-keys/"+first, nil, nil); st != 409 || !strings.Contains(string(raw), "last usable admin key") {
		t.Fatalf("revoking the last admin key: %d %s, want 409", st, raw)
	}
	var second struct{ ID, Key string }
	if st, raw := h.callWithKey(generated, "POST", "/v1/api-keys", map[string]any{"name": "second admin", "role": "admin"}, &second); st != 201 {
		t.Fatalf("create admin key: %d %s", st, raw)
	}
	if st, raw := h.callWithKey(second.Key, "DELETE", "/v1/api-keys/"+first, nil, nil); st != 204 {
		t.Fatalf("revoking one of two admin keys: %d %s, want 204", st, raw)
	}
	if st, raw := h.callWithKey(second.Key, "DELETE", "/v1/api-keys/"+second.ID, nil, nil); st != 409 {
		t.Fatalf("revoking the now last admin key: %d %s, want 409", st, raw)
	}
	if st, _ := h.callWithKey(second.Key, "GET", "/v1/api-keys", nil, nil); st != 200 {
		t.Fatalf("the kept admin key no longer works: %d", st)
	}
}

// TestExpiringAdminKeyKeepsNoAdmin: without HERALD_API_KEY, an admin key
// that expires does not count as keeping an admin: with admin key A (no
// expiry) and admin key B expiring in 40 s, revoking A answers 409 naming
// the rule (before: 204, and 40 s later nobody was admin). Once an admin
// key without expiry exists, A can be revoked; B, which expires, can be
// revoked while a lasting one remains.
func TestExpiringAdminKeyKeepsNoAdmin(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	var printed strings.Builder
	h := startHerald(t, func(c *app.Config) { c.APIKey = ""; c.Stdout = &printed; c.Clock = clk })
	a := regexp.MustCompile(`herald_key_[\w-]+`).FindString(printed.String())
	var keys struct{ Data []struct{ ID string } }
	if st, raw := h.callWithKey(a, "GET", "/v1/api-keys", nil, &keys); st != 200 || len(keys.Data) != 1 {
		t.Fatalf("list keys: %d %s", st, raw)
	}
	aID := keys.Data[0].ID
	var b, c struct{ ID, Key string }
	expires := clk.Now().Add(40 * time.Second).Format(time.RFC3339)
	if st, raw := h.callWithKey(a, "POST", "/v1/api-keys", map[string]any{"name": "expiring admin", "role": "admin", "expires_at": expires}, &b); st != 201 {
		t.Fatalf("create expiring admin key: %d %s", st, raw)
	}
	st, raw := h.callWithKey(a, "DELETE", "/v1/api-keys/"+aID, nil, nil)
	if st != 409 || !strings.Contains(string(raw), "last admin key that never expires") || !strings.Contains(string(raw), expires) {
		t.Fatalf("revoking the last admin key without expiry beside one expiring at %s: %d %s; want 409 naming the rule", expires, st, raw)
	}
	if st, _ := h.callWithKey(a, "GET", "/v1/api-keys", nil, nil); st != 200 {
		t.Fatalf("the refused revocation changed the key: %d", st)
	}
	if st, raw := h.callWithKey(a, "POST", "/v1/api-keys", map[string]any{"name": "lasting admin", "role": "admin"}, &c); st != 201 {
		t.Fatalf("create admin key: %d %s", st, raw)
	}
	if st, raw := h.callWithKey(c.Key, "DELETE", "/v1/api-keys/"+b.ID, nil, nil); st != 204 {
		t.Fatalf("revoking an expiring admin key while two lasting ones remain: %d %s", st, raw)
	}
	if st, raw := h.callWithKey(c.Key, "DELETE", "/v1/api-keys/"+aID, nil, nil); st != 204 {
		t.Fatalf("revoking one of two lasting admin keys: %d %s", st, raw)
	}
	if st, raw := h.callWithKey(c.Key, "DELETE", "/v1/api-keys/"+c.ID, nil, nil); st != 409 || !strings.Contains(string(raw), "last usable admin key") {
		t.Fatalf("revoking the last admin key: %d %s", st, raw)
	}
}

// TestStartWarnsWithoutUsableAdminKey: a start without HERALD_API_KEY on
// a database whose admin keys are all revoked or expired (other keys
// remain, so none is generated) logs a WARN saying how to recover; one with
// a usable admin key does not.
func TestStartWarnsWithoutUsableAdminKey(t *testing.T) {
	t.Parallel()
	db, encKey := testDB(t)
	clk := newFakeClock()
	start := func(logs io.Writer) *app.Main {
		m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: encKey, Dev: true, Clock: clk, Stdout: io.Discard,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	warning := "no usable admin key"
	var logs testutil.SyncBuffer
	m := start(&logs) // the first start generates an admin key
	now := clk.Now()
	for _, k := range []store.APIKey{
		{ID: "key_viewer", Role: store.RoleViewer, Tenant: "acme"},
		{ID: "key_expiring", Role: store.RoleAdmin, ExpiresAt: now.Add(time.Hour)},
	} {
		k.Kind, k.Name, k.Hash, k.CreatedAt = store.KeyKindAPIKey, k.ID, api.HashAPIKey(k.ID+"-secret-0123456789abcdef"), now
		if _, err := m.Store().CreateAPIKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	pg, err := m.Store().ListAPIKeys(t.Context(), store.KeyKindAPIKey, store.ListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range pg.Data {
		if k.Name == "admin key (generated at first start)" {
			if err := m.Store().RevokeAPIKey(t.Context(), store.KeyKindAPIKey, k.ID, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.Close()
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("the first start warned: %s", logs.String())
	}
	var second testutil.SyncBuffer
	start(&second).Close() // the expiring admin key is still usable
	if strings.Contains(second.String(), warning) {
		t.Fatalf("a start with a usable (expiring) admin key warned: %s", second.String())
	}
	clk.Advance(time.Hour)
	var third testutil.SyncBuffer
	start(&third).Close()
	out := third.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, warning) || !strings.Contains(out, "HERALD_API_KEY") {
		t.Fatalf("a start whose admin keys are revoked or expired logged %q; want a WARN saying to set HERALD_API_KEY", out)
	}
}

// TestEnvPortalSessionsOutliveAKeyChange: a portal session created with
// HERALD_API_KEY shows created_by "env", which names no stored key: after
// a restart with another HERALD_API_KEY (or none) it still works until it
// expires, and only its own revocation (DELETE /v1/portal-sessions/{id})
// ends it sooner (docs/operations.md says so).
func TestEnvPortalSessionsOutliveAKeyChange(t *testing.T) {
	t.Parallel()
	var db, encKey string
	first := startHerald(t, func(c *app.Config) { db, encKey = c.DB, c.EncryptionKey })
	var ps struct {
		ID, Token string
		CreatedBy string `json:"created_by"`
	}
	if st, raw := first.call("POST", "/v1/portal-sessions", map[string]any{"tenant": "acme", "ttl_seconds": 3600}, &ps); st != 201 || ps.CreatedBy != "env" {
		t.Fatalf("portal session by HERALD_API_KEY: %d %s; want 201 with created_by env", st, raw)
	}
	first.stop()
	const otherKey = "herald_other_admin_key_0123456789abcdef0123"
	second := startHerald(t, func(c *app.Config) { c.DB, c.EncryptionKey, c.APIKey = db, encKey, otherKey })
	if st, raw := second.callWithKey(ps.Token, "GET", "/v1/endpoints", nil, nil); st != 200 {
		t.Fatalf("the env portal session after HERALD_API_KEY changed: %d %s; want it still valid", st, raw)
	}
	if st, _ := second.callWithKey(testAPIKey, "GET", "/v1/endpoints", nil, nil); st != 401 {
		t.Fatalf("the former HERALD_API_KEY after the change: %d, want 401", st)
	}
	if st, raw := second.callWithKey(otherKey, "DELETE", "/v1/api-keys/env", nil, nil); st != 404 {
		t.Fatalf("DELETE /v1/api-keys/env: %d %s; want 404 (env is no stored key)", st, raw)
	}
	if st, raw := second.callWithKey(otherKey, "DELETE", "/v1/portal-sessions/"+ps.ID, nil, nil); st != 204 {
		t.Fatalf("revoke the env portal session: %d %s", st, raw)
	}
	if st, _ := second.callWithKey(ps.Token, "GET", "/v1/endpoints", nil, nil); st != 401 {
		t.Fatalf("the revoked env portal session: %d, want 401", st)
	}
}

// TestSourceEndpointOwnedBySource: a source's forwarding endpoint cannot be
// changed or deleted through the endpoints API, even by an admin (409
// naming the source's routes): the gateway would otherwise answer 200 to
// the provider and forward nowhere. The source still forwards afterwards.
func TestSourceEndpointOwnedBySource(t *testing.T) {
	t.Parallel()
	f := newTenancyFixture(t)
	for _, c := range []struct{ method, body string }{{"PATCH", `{"url":"https://elsewhere.example/"}`}, {"DELETE", ""}} {
		var body any
		if c.body != "" {
			body = json.RawMessage(c.body)
		}
		st, raw := f.h.call(c.method, "/v1/endpoints/"+f.src.EndpointID, body, nil)
		if st != 409 || !strings.Contains(string(raw), "/v1/sources/"+f.src.ID) {
			t.Errorf("admin %s of the source's endpoint: %d %s, want 409 naming the source's routes", c.method, st, raw)
		}
	}
	f.ingestStripe()
	f.waitForwarded(1)
}

// TestPortalSessionRevocation: an operator lists portal sessions (never
// their tokens) and revokes one before it expires; revoking the admin key
// that created a session revokes the session too; a session never
// outlives its creating key's expiry.
func TestPortalSessionRevocation(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	var admin struct{ ID, Key string }
	expires := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if st, raw := h.call("POST", "/v1/api-keys", map[string]any{"name": "support admin", "role": "admin", "expires_at": expires}, &admin); st != 201 {
		t.Fatalf("create admin key: %d %s", st, raw)
	}
	type session struct {
		ID, Token string
		CreatedBy string    `json:"created_by"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	open := func(key string) session {
		t.Helper()
		var s session
		if st, raw := h.callWithKey(key, "POST", "/v1/portal-sessions", map[string]any{"tenant": "acme", "role": "manager", "ttl_seconds": 7 * 24 * 3600}, &s); st != 201 {
			t.Fatalf("create portal session: %d %s", st, raw)
		}
		return s
	}
	byAdmin, byEnv, direct := open(admin.Key), open(testAPIKey), open(testAPIKey)
	if !byAdmin.ExpiresAt.Equal(expires) {
		t.Errorf("a 7-day session made by a key expiring at %v expires at %v; want the key's expiry", expires, byAdmin.ExpiresAt)
	}
	works := func(s session) int {
		st, _ := h.callWithKey(s.Token, "GET", "/v1/endpoints", nil, nil)
		return st
	}
	for _, s := range []session{byAdmin, byEnv, direct} {
		if st := works(s); st != 200 {
			t.Fatalf("session %s: %d before any revocation", s.ID, st)
		}
	}
	var list struct{ Data []json.RawMessage }
	if st, raw := h.call("GET", "/v1/portal-sessions", nil, &list); st != 200 || len(list.Data) != 3 || strings.Contains(string(raw), "herald_portal_") ||
		!strings.Contains(string(raw), `"created_by":"`+admin.ID+`"`) {
		t.Fatalf("list portal sessions: %d %s; want 3 sessions, their creators, no tokens", st, raw)
	}
	// Revoking the creating key ends its session at once; others stay.
	if st, raw := h.call("DELETE", "/v1/api-keys/"+admin.ID, nil, nil); st != 204 {
		t.Fatalf("revoke admin key: %d %s", st, raw)
	}
	if st := works(byAdmin); st != 401 {
		t.Errorf("the session of a revoked key answers %d, want 401", st)
	}
	if st := works(byEnv); st != 200 {
		t.Errorf("another key's session answers %d after an unrelated revocation, want 200", st)
	}
	// Revoking one session directly.
	if st, raw := h.call("DELETE", "/v1/portal-sessions/"+direct.ID, nil, nil); st != 204 {
		t.Fatalf("revoke portal session: %d %s", st, raw)
	}
	if st := works(direct); st != 401 {
		t.Errorf("a revoked session answers %d, want 401", st)
	}
	if st, raw := h.call("DELETE", "/v1/portal-sessions/ps_unknown", nil, nil); st != 404 {
		t.Errorf("revoking an unknown session: %d %s, want 404", st, raw)
	}
	if st, _ := h.call("DELETE", "/v1/portal-sessions/"+admin.ID, nil, nil); st != 404 {
		t.Errorf("revoking an API key through the sessions route: %d, want 404", st)
	}
}

// TestWrongContentTypeNeverEchoesTheBody: a body sent with another
// Content-Type is refused (415) naming the rule, without repeating the
// body (it may hold secrets or header values), and nothing is created.
func TestWrongContentTypeNeverEchoesTheBody(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	const secret = "whsec_TOPSECRETVALUE123456"
	for path, body := range map[string]string{
		"/v1/sources":   `{"name":"x","scheme":"stripe","secrets":["` + secret + `"],"destination_url":"https://internal.example/in"}`,
		"/v1/endpoints": `{"tenant":"acme","url":"https://r.example/hook","headers":{"Authorization":"Bearer ` + secret + `"}}`,
	} {
		st, raw := h.callWithKey(testAPIKey, "POST", path, body, nil, "Content-Type", "text/plain")
		if st != 415 || strings.Contains(string(raw), secret) || !strings.Contains(strings.ToLower(string(raw)), "content-type") {
			t.Errorf("POST %s as text/plain: %d %s; want 415 naming the content type, without the body", path, st, raw)
		}
	}
	var eps struct{ Data []json.RawMessage }
	if h.call("GET", "/v1/endpoints?tenant=acme", nil, &eps); len(eps.Data) != 0 {
		t.Errorf("a refused request created %d endpoints", len(eps.Data))
	}
}

// TestCurlDefaultFormTypeIsReadAsJSON: a JSON body sent with curl's default
// Content-Type (application/x-www-form-urlencoded, what `curl -d` sends,
// as in docs/inbound.md) is read as the JSON it is, as operations.md says;
// multipart is another media type and answers 415.
func TestCurlDefaultFormTypeIsReadAsJSON(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	body := `{"tenant":"acme","url":"https://r.example/hook"}`
	if st, raw := h.callWithKey(testAPIKey, "POST", "/v1/endpoints", body, nil, "Content-Type", "application/x-www-form-urlencoded"); st != 201 {
		t.Errorf("POST /v1/endpoints as curl's form type: %d %s; want 201", st, raw)
	}
	if st, raw := h.callWithKey(testAPIKey, "POST", "/v1/endpoints", body, nil, "Content-Type", "multipart/form-data; boundary=x"); st != 415 {
		t.Errorf("POST /v1/endpoints as multipart: %d %s; want 415", st, raw)
	}
	var eps struct{ Data []json.RawMessage }
	if h.call("GET", "/v1/endpoints?tenant=acme", nil, &eps); len(eps.Data) != 1 {
		t.Errorf("%d endpoints, want the one created", len(eps.Data))
	}
}
