package console

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// Rotating a signing secret with overlap none stops the current secret at
// once: the form needs its explicit confirmation ("The current secret
// stops working now"), without which it comes back on the endpoint's page
// (422) naming the box by its label, with the choices kept and nothing
// rotated. Other overlaps rotate without it.
func TestRotateWithOverlapNoneNeedsConfirmation(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	b, token := adminBrowser(t, f)
	type secrets struct {
		current string
		active  int
	}
	read := func() secrets {
		t.Helper()
		var cur struct{ Secret string }
		f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID+"/secret", "", &cur)
		var l struct{ Data []map[string]any }
		f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID+"/secrets", "", &l)
		if cur.Secret == "" {
			t.Fatal("no current secret")
		}
		return secrets{cur.Secret, len(l.Data)}
	}
	rotate := func(form url.Values) *http.Response {
		form.Set("csrf", token)
		return b.do("POST", "/ui/endpoints/"+ep.ID+"/rotate", form).Result()
	}
	body := func(r *http.Response) string {
		b, _ := io.ReadAll(r.Body)
		return string(b)
	}

	// The form offers the confirmation box.
	page := b.do("GET", "/ui/endpoints/"+ep.ID, nil).Body.String()
	if !strings.Contains(page, `name="expire_now" value="yes"`) || !strings.Contains(page, "The current secret stops working now") {
		t.Fatalf("the rotate form has no confirmation box:\n%s", page)
	}

	before := read()
	for _, form := range []url.Values{
		{"overlap_seconds": {"0"}},
		{"overlap_seconds": {"0"}, "expire_now": {""}},
		{"overlap_seconds": {"0"}, "expire_now": {"no"}},
	} {
		r := rotate(form)
		page := body(r)
		if r.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("overlap none without confirmation %v: %d, want 422", form, r.StatusCode)
		}
		if !strings.Contains(page, `<p class="error" role="alert">The current secret stops working now: tick it to rotate with overlap none`) {
			t.Fatalf("the refusal does not name the box by its label:\n%s", page)
		}
		if !strings.Contains(page, `id="rotate"`) || !strings.Contains(page, "<title>Endpoint "+ep.ID+" · Herald</title>") {
			t.Fatalf("the refusal is not the endpoint's page:\n%s", page)
		}
		if !strings.Contains(page, `<option value="0" selected>none</option>`) || strings.Contains(page, `value="86400" selected`) {
			t.Fatalf("the overlap chosen is not kept:\n%s", page)
		}
		if strings.Contains(page, "whsec_") {
			t.Fatal("the refused page shows a secret")
		}
		if got := read(); got != before {
			t.Fatalf("a refused rotation changed the secrets: %+v, was %+v", got, before)
		}
	}

	// A malformed overlap is named by its label too, and rotates nothing.
	r := rotate(url.Values{"overlap_seconds": {"soon"}, "expire_now": {"yes"}})
	if page := body(r); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "Overlap: &#34;soon&#34; is not a whole number") ||
		!strings.Contains(page, `name="expire_now" value="yes" checked`) {
		t.Fatalf("a malformed overlap: %d\n%s", r.StatusCode, page)
	}
	// One the API refuses (past 7 days) comes back naming the field by its label.
	r = rotate(url.Values{"overlap_seconds": {"9999999"}})
	if page := body(r); r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, ">Overlap: must be an integer number of seconds") || strings.Contains(page, "overlap_seconds:") {
		t.Fatalf("an overlap the API refuses: %d\n%s", r.StatusCode, page)
	}
	if got := read(); got != before {
		t.Fatalf("a refused rotation changed the secrets: %+v, was %+v", got, before)
	}

	// With the confirmation it rotates: the old secret stops at once.
	r = rotate(url.Values{"overlap_seconds": {"0"}, "expire_now": {"yes"}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ui/endpoints/"+ep.ID+"/rotated" {
		t.Fatalf("overlap none with confirmation: %d → %s", r.StatusCode, r.Header.Get("Location"))
	}
	after := read()
	if after.current == before.current || after.active != 1 {
		t.Fatalf("after a rotation with overlap none: %+v, was %+v (want a new secret, the old one gone)", after, before)
	}
	if shown := html.UnescapeString(b.do("GET", "/ui/endpoints/"+ep.ID+"/rotated", nil).Body.String()); !strings.Contains(shown, after.current) {
		t.Fatal("the rotated page does not show the new secret")
	}

	// Other overlaps need no confirmation, as before.
	r = rotate(url.Values{"overlap_seconds": {"3600"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("overlap 1 h: %d, want 303", r.StatusCode)
	}
	if got := read(); got.current == after.current || got.active != 2 {
		t.Fatalf("after a rotation with overlap 1 h: %+v (want a new secret and the previous one still active)", got)
	}
}

// A dead delivery's page has a Replay button for the roles that may replay
// (admin, manager), none for a viewer, whose forged POST is refused; the
// replay goes through replay-delivery with the session's key, so another
// tenant's delivery is not found, and the page says what happened.
func TestReplayFromTheDeliveryPage(t *testing.T) {
	f := newFixture(t)
	var acme, globex api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &acme)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"globex","url":"https://globex.example/hook"}`, &globex)
	for _, tenant := range []string{"acme", "globex"} {
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"`+tenant+`","type":"order.placed","data":{}}`, nil); st != http.StatusAccepted {
			t.Fatalf("publish: %d", st)
		}
	}
	claims := f.attemptAll(2, time.Now().UTC(), func(int, store.Claim) (store.DeliveryState, int) { return store.DeliveryDead, 500 })
	ids := map[string]string{} // tenant → its dead delivery
	for _, c := range claims {
		ids[c.Endpoint.Tenant] = c.Delivery.ID
	}
	state := func(id string) string {
		t.Helper()
		var d api.DeliveryOut
		f.apiCall(adminKey, "GET", "/v1/deliveries/"+id, "", &d)
		return d.State
	}
	signIn := func(role string) (*browser, string) {
		t.Helper()
		var k api.APIKeyOut
		if code := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"`+role+`","role":"`+role+`","tenant":"acme"}`, &k); code != http.StatusCreated {
			t.Fatal(role, code)
		}
		b := f.browser()
		if w := b.signIn(k.Key); w.Code != http.StatusSeeOther {
			t.Fatalf("%s sign-in: %d", role, w.Code)
		}
		return b, csrfOf(t, b.do("GET", "/ui/endpoints", nil).Body.String())
	}
	const button = `action="/ui/deliveries/`
	replay := func(b *browser, token, id string) *http.Response {
		return b.do("POST", "/ui/deliveries/"+id+"/replay", url.Values{"csrf": {token}}).Result()
	}

	// A viewer reads the page without the button, and a forged POST is refused.
	viewer, vtoken := signIn("viewer")
	page := viewer.do("GET", "/ui/deliveries/"+ids["acme"], nil)
	if page.Code != http.StatusOK || strings.Contains(page.Body.String(), button) || strings.Contains(page.Body.String(), ">Replay<") {
		t.Fatalf("viewer's delivery page: %d, offers Replay:\n%s", page.Code, page.Body)
	}
	if r := replay(viewer, vtoken, ids["acme"]); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's replay: %d, want 403", r.StatusCode)
	}
	if st := state(ids["acme"]); st != "dead" {
		t.Fatalf("after a viewer's refused replay the delivery is %s", st)
	}

	// A manager sees the button; a POST without the CSRF token is refused.
	manager, mtoken := signIn("manager")
	page = manager.do("GET", "/ui/deliveries/"+ids["acme"], nil)
	if !strings.Contains(page.Body.String(), button+ids["acme"]+`/replay"`) {
		t.Fatalf("manager's page of a dead delivery has no Replay:\n%s", page.Body)
	}
	if w := manager.do("POST", "/ui/deliveries/"+ids["acme"]+"/replay", url.Values{}); w.Code != http.StatusForbidden {
		t.Fatalf("a replay without CSRF token: %d", w.Code)
	}
	if w := manager.do("POST", "/ui/deliveries/"+ids["acme"]+"/replay", url.Values{"csrf": {vtoken}}); w.Code != http.StatusForbidden {
		t.Fatalf("a replay with another session's CSRF token: %d", w.Code)
	}
	// Another tenant's delivery is not found, and stays dead.
	if r := replay(manager, mtoken, ids["globex"]); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a manager of acme replaying globex's delivery: %d, want 404", r.StatusCode)
	}
	if st := state(ids["acme"]) + " " + state(ids["globex"]); st != "dead dead" {
		t.Fatalf("after refused replays: %s", st)
	}
	// The replay: back to its page, saying so; the button is gone.
	r := replay(manager, mtoken, ids["acme"])
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ui/deliveries/"+ids["acme"] {
		t.Fatalf("manager's replay: %d → %s", r.StatusCode, r.Header.Get("Location"))
	}
	if st := state(ids["acme"]); st != "pending" {
		t.Fatalf("after the replay the delivery is %s, want pending", st)
	}
	page = manager.do("GET", "/ui/deliveries/"+ids["acme"], nil)
	if body := page.Body.String(); !strings.Contains(body, `<p class="flash" role="status">Replayed 1 dead letter(s).</p>`) || strings.Contains(body, button) {
		t.Fatalf("the page after the replay:\n%s", body)
	}
	// Replayed again (from a page left open): nothing to replay, and it says so.
	replay(manager, mtoken, ids["acme"])
	if body := manager.do("GET", "/ui/deliveries/"+ids["acme"], nil).Body.String(); !strings.Contains(body, "Replayed 0 dead letter(s). "+ids["acme"]+" was no longer a dead letter.") {
		t.Fatalf("a second replay:\n%s", body)
	}

	// An admin replays any tenant's.
	admin, atoken := adminBrowser(t, f)
	if !strings.Contains(admin.do("GET", "/ui/deliveries/"+ids["globex"], nil).Body.String(), button+ids["globex"]+`/replay"`) {
		t.Fatal("admin's page of a dead delivery has no Replay")
	}
	if r := replay(admin, atoken, ids["globex"]); r.StatusCode != http.StatusSeeOther || state(ids["globex"]) != "pending" {
		t.Fatalf("admin's replay: %d, delivery %s", r.StatusCode, state(ids["globex"]))
	}
}
