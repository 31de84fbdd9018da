package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// sealedElsewhere replaces the stored value of endpoint id's secrets
// (column "secrets") or of its header X-Team (column "headers") by one
// no key of this node made, as a value sealed under a lost key reads.
func sealedElsewhere(t *testing.T, f *fixture, id, column string) {
	t.Helper()
	sealUnderLostKey(t, f, "endpoints", column, id)
}

// sealUnderLostKey replaces the sealed value of table's column in row id
// (an endpoint's "secrets" or "headers", whose X-Team value it replaces;
// a source's "config") by one no key of this node made.
func sealUnderLostKey(t *testing.T, f *fixture, table, column, id string) {
	t.Helper()
	sealed := f.st.Capabilities().Sealed
	var col store.SealedColumn
	for _, c := range store.SealedColumns {
		if c.Table == table && c.Column == column {
			col = c
		}
	}
	old, ok, err := sealed.SealedValue(t.Context(), col, id)
	if err != nil || !ok {
		t.Fatalf("SealedValue %s of %s: %v %v", column, id, ok, err)
	}
	foreign := "enc:v1:" + base64.StdEncoding.EncodeToString([]byte("a value sealed under another key"))
	v := foreign
	if table == "endpoints" && column == "headers" {
		var m map[string]string
		if err := json.Unmarshal([]byte(old), &m); err != nil {
			t.Fatal(err)
		}
		m["X-Team"] = foreign
		b, _ := json.Marshal(m)
		v = string(b)
	}
	if ok, err := sealed.ReplaceSealed(t.Context(), col, id, old, v); err != nil || !ok {
		t.Fatalf("ReplaceSealed %s of %s: %v %v", column, id, ok, err)
	}
}

// unreadableEndpoint creates an endpoint of tenant acme with two custom
// headers, in state ("enabled", "paused" or "disabled"), and seals the
// given columns of it under a key this node does not hold.
func unreadableEndpoint(t *testing.T, f *fixture, state string, columns ...string) string {
	t.Helper()
	var ep api.EndpointOut
	if st := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://receiver.example/hook","headers":{"X-Team":"storage","X-Env":"prod"}}`, &ep); st != 201 {
		t.Fatalf("create endpoint: %d", st)
	}
	switch state {
	case "paused":
		if st := f.apiCall(adminKey, "POST", "/v1/endpoints/"+ep.ID+"/pause", "", nil); st != 200 {
			t.Fatalf("pause: %d", st)
		}
	case "disabled":
		if _, _, err := f.st.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointDisabled, Reason: "410 Gone", Now: f.clock()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range columns {
		sealedElsewhere(t, f, ep.ID, c)
	}
	return ep.ID
}

// The endpoint page's actions, each with the markup that offers it and the
// API call it makes (on an endpoint of its own: a call that works changes
// the endpoint), and the data-withheld name of the disabled button that
// stands in for it when it is withheld.
type endpointAction struct {
	name    string
	offered func(id string) string
	call    [3]string // method, path after /v1/endpoints/{id}, body
}

var endpointActions = []endpointAction{
	{"test", func(id string) string { return `action="/ui/endpoints/` + id + `/test"` }, [3]string{"POST", "/test", ""}},
	{"state", func(id string) string { return `action="/ui/endpoints/` + id + `/state"` }, [3]string{"POST", "/pause", ""}},
	{"edit", func(id string) string { return `href="/ui/endpoints/` + id + `/edit"` }, [3]string{"PATCH", "", `{"headers":{"X-Team":"search","X-Env":"prod"}}`}},
	{"reveal", func(id string) string { return `action="/ui/endpoints/` + id + `/secret"` }, [3]string{"GET", "/secret", ""}},
	{"rotate", func(id string) string { return `action="/ui/endpoints/` + id + `/rotate"` }, [3]string{"POST", "/rotate-secret", `{"overlap_seconds":3600}`}},
	{"dead-letters", func(id string) string { return `href="/ui/dead-letters?endpoint=` + id + `"` }, [3]string{"GET", "/deliveries?state=dead", ""}},
	{"delete", func(id string) string { return `href="/ui/endpoints/` + id + `/delete"` }, [3]string{"DELETE", "", ""}},
}

var withheldButton = regexp.MustCompile(`<button type="button" disabled data-withheld="([a-z-]+)"[^>]*>([^<]+)</button>`)

// TestUnreadableEndpointOffersOnlyWhatWorks: the page of an endpoint whose
// stored values do not open on this node offered every action as for any
// endpoint (Send test event, Pause, Edit, Reveal secret, Rotate secret),
// and most of them answered 409. Now, for each case (its secrets, a header
// value, both; enabled, paused or disabled), it offers exactly the
// actions the API carries out for that endpoint, found by making each
// call on an endpoint in the same case: the replacing rotation (labelled
// so) when only the secrets do not open, the edit when only header values
// do not open, the state change (Pause, Resume, Enable), the dead letters
// and the delete always; every other action's button is there, disabled,
// with the reason next to it.
func TestUnreadableEndpointOffersOnlyWhatWorks(t *testing.T) {
	f := newFixture(t)
	b, _ := adminBrowser(t, f)
	cases := []struct {
		name    string
		columns []string
		want    []string // the actions offered
		label   map[string]string
		reason  string
	}{
		{"secrets", []string{"secrets"}, []string{"state", "rotate", "dead-letters", "delete"},
			map[string]string{"rotate": "Replace secrets"}, "secrets, until they are replaced"},
		{"headers", []string{"headers"}, []string{"state", "edit", "dead-letters", "delete"},
			map[string]string{"edit": "Edit headers"}, "until its headers are given again"},
		{"both", []string{"secrets", "headers"}, []string{"state", "dead-letters", "delete"},
			nil, "it can still be paused, resumed or enabled, its deliveries and dead letters read and replayed, and it can be deleted"},
	}
	for _, c := range cases {
		for _, state := range []string{"enabled", "paused", "disabled"} {
			id := unreadableEndpoint(t, f, state, c.columns...)
			w := b.do("GET", "/ui/endpoints/"+id, nil)
			body := w.Body.String()
			if w.Code != http.StatusOK {
				t.Fatalf("%s, %s: the page = %d", c.name, state, w.Code)
			}
			actions := body[strings.Index(body, `<div class="actions">`):]
			actions = actions[:strings.Index(actions, "<h2>Deliveries</h2>")]
			var offered []string
			for _, a := range endpointActions {
				if strings.Contains(actions, a.offered(id)) {
					offered = append(offered, a.name)
				}
			}
			withheld := map[string]string{}
			for _, m := range withheldButton.FindAllStringSubmatch(actions, -1) {
				withheld[m[1]] = m[2]
			}
			if !slices.Equal(offered, c.want) {
				t.Errorf("%s, %s: actions offered %v; want %v:\n%s", c.name, state, offered, c.want, actions)
			}
			for _, a := range endpointActions {
				if _, ok := withheld[a.name]; ok == slices.Contains(c.want, a.name) {
					t.Errorf("%s, %s: %s withheld (a disabled button) = %v; want %v", c.name, state, a.name, ok, !ok)
				}
			}
			if len(withheld) > 0 && (!strings.Contains(actions, `data-testid="withheld"`) || !strings.Contains(actions, c.reason)) {
				t.Errorf("%s, %s: the withheld actions' reason is not given next to them (want %q):\n%s", c.name, state, c.reason, actions)
			}
			if want := map[string]string{"enabled": "Pause", "paused": "Resume", "disabled": "Enable"}[state]; !regexp.MustCompile(`(?s)` +
				regexp.QuoteMeta(endpointActionNamed("state").offered(id)) + `.*?>` + want + `<`).MatchString(actions) {
				t.Errorf("%s, %s: the state button does not read %q:\n%s", c.name, state, want, actions)
			}
			for a, label := range c.label {
				if !regexp.MustCompile(`(?s)` + regexp.QuoteMeta(endpointActionNamed(a).offered(id)) + `.*?>` + regexp.QuoteMeta(label) + `<`).MatchString(actions) {
					t.Errorf("%s, %s: %s is not labelled %q:\n%s", c.name, state, a, label, actions)
				}
			}
		}
		// What the page offers is what the API does for such an endpoint:
		// each call made on an endpoint of its own in the same case.
		for _, a := range endpointActions {
			id := unreadableEndpoint(t, f, "enabled", c.columns...)
			st := f.apiCall(adminKey, a.call[0], "/v1/endpoints/"+id+a.call[1], a.call[2], nil)
			if works := st < 300; works != slices.Contains(c.want, a.name) {
				t.Errorf("%s: the API answers %s %s with %d, but the page offers it: %v", c.name, a.call[0], a.call[1], st, slices.Contains(c.want, a.name))
			}
		}
	}

	// A viewer sees no action it may not take, withheld or not.
	var vk struct{ Key string }
	if st := f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":"acme"}`, &vk); st != 201 {
		t.Fatalf("create viewer key: %d", st)
	}
	v := f.browser()
	if w := v.signIn(vk.Key); w.Code != http.StatusSeeOther {
		t.Fatalf("viewer sign-in: %d", w.Code)
	}
	id := unreadableEndpoint(t, f, "enabled", "secrets")
	if body := v.do("GET", "/ui/endpoints/"+id, nil).Body.String(); withheldButton.MatchString(body) || strings.Contains(body, `data-testid="withheld"`) {
		t.Errorf("a viewer's page shows withheld actions of a manager:\n%s", body)
	}
}

func endpointActionNamed(name string) endpointAction {
	for _, a := range endpointActions {
		if a.name == name {
			return a
		}
	}
	panic(name)
}

// TestReplaceSecretsThatDoNotOpen: the Replace secrets form of an endpoint
// whose secrets do not open here replaces them by a new secret alone (the
// API's replacing rotation), shown once on a page that says so; the
// endpoint is readable again and offers every action. Posted again once
// they open (another tab, another operator), it rotates nothing.
func TestReplaceSecretsThatDoNotOpen(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	id := unreadableEndpoint(t, f, "enabled", "secrets")
	page := b.do("GET", "/ui/endpoints/"+id, nil).Body.String()
	i := strings.Index(page, `id="replace-secrets"`)
	if i < 0 {
		t.Fatalf("the page offers no Replace secrets form:\n%s", page)
	}
	form := page[i:]
	form = form[:strings.Index(form, "</form>")]
	if strings.Contains(form, "overlap_seconds") || strings.Contains(form, "expire_now") || !strings.Contains(form, `name="replace" value="secrets"`) {
		t.Fatalf("the Replace secrets form offers an overlap (the API ignores it) or does not say it replaces:\n%s", form)
	}
	w := b.do("POST", "/ui/endpoints/"+id+"/rotate", url.Values{"csrf": {token}, "replace": {"secrets"}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("replace the secrets: %d\n%s", w.Code, w.Body)
	}
	shown := b.do("GET", w.Header().Get("Location"), nil).Body.String()
	m := regexp.MustCompile(`data-testid="secret">(whsec_[^<]+)<`).FindStringSubmatch(shown)
	if m == nil || !strings.Contains(shown, "Secrets replaced") || !strings.Contains(shown, "replaced by this one alone") {
		t.Fatalf("the result page does not show the new secret as replacing the old ones:\n%s", shown)
	}
	var sec struct{ Secret string }
	if st := f.apiCall(adminKey, "GET", "/v1/endpoints/"+id+"/secret", "", &sec); st != 200 || sec.Secret != html.UnescapeString(m[1]) {
		t.Errorf("after the replacement: GET …/secret = %d %q; want 200 and the secret shown", st, sec.Secret)
	}
	page = b.do("GET", "/ui/endpoints/"+id, nil).Body.String()
	if strings.Contains(page, `data-testid="unreadable"`) || withheldButton.MatchString(page) || !strings.Contains(page, `id="rotate"`) || !strings.Contains(page, `/ui/endpoints/`+id+`/test"`) {
		t.Errorf("after the replacement the page still marks the endpoint or withholds actions:\n%s", page)
	}
	// The same form posted again, now that the secrets open: refused, the
	// secret kept.
	w = b.do("POST", "/ui/endpoints/"+id+"/rotate", url.Values{"csrf": {token}, "replace": {"secrets"}})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "nothing was replaced") {
		t.Errorf("replace secrets that open = %d; want 409 saying nothing was replaced:\n%s", w.Code, w.Body)
	}
	var again struct{ Secret string }
	if f.apiCall(adminKey, "GET", "/v1/endpoints/"+id+"/secret", "", &again); again.Secret != sec.Secret {
		t.Error("a Replace secrets form posted when the secrets open rotated them")
	}
}

// TestEditGivesHeadersThatDoNotOpenAgain: the Edit headers page of an
// endpoint one of whose header values does not open says to replace each
// [unreadable]; saved unchanged it is refused (422, nothing changed),
// saved with the value the endpoint is readable again. The edit form of
// an endpoint whose secrets do not open says a save is refused.
func TestEditGivesHeadersThatDoNotOpenAgain(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	id := unreadableEndpoint(t, f, "enabled", "headers")
	form := b.do("GET", "/ui/endpoints/"+id+"/edit", nil).Body.String()
	if !strings.Contains(form, `data-testid="unreadable"`) || !strings.Contains(form, "replace each [unreadable]") || !strings.Contains(form, "X-Team: [unreadable]") {
		t.Fatalf("the edit form does not say to replace the [unreadable] value:\n%s", form)
	}
	post := func(headers string) *httptest.ResponseRecorder {
		return b.do("POST", "/ui/endpoints/"+id, url.Values{"csrf": {token}, "url": {"https://receiver.example/hook"}, "description": {""},
			"event_types": {""}, "headers": {headers}, "versions": {""}, "rate_limit_per_second": {"0"}})
	}
	// The form shown again keeps its note on what a save does.
	if w := post("X-Env: prod\nX-Team: [unreadable]"); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "give the header") ||
		!strings.Contains(w.Body.String(), "The headers saved are the whole set") {
		t.Errorf("save with [unreadable] kept = %d; want 422 asking for the value, with the form's note:\n%s", w.Code, w.Body)
	}
	if w := post("X-Env: prod\nX-Team: search"); w.Code != http.StatusSeeOther {
		t.Fatalf("save with the value = %d:\n%s", w.Code, w.Body)
	}
	var e api.EndpointOut
	if f.apiCall(adminKey, "GET", "/v1/endpoints/"+id, "", &e); len(e.Unreadable) != 0 || e.Headers["X-Team"] != "search" || e.Headers["X-Env"] != "prod" {
		t.Errorf("after the save: unreadable %v, headers %v; want none, X-Team search, X-Env prod", e.Unreadable, e.Headers)
	}

	id = unreadableEndpoint(t, f, "enabled", "secrets")
	if form := b.do("GET", "/ui/endpoints/"+id+"/edit", nil).Body.String(); !strings.Contains(form, "Herald refuses to save any change until they are replaced") {
		t.Errorf("the edit form of an endpoint whose secrets do not open does not say a save is refused:\n%s", form)
	}
}

// TestStaleNodeAdvisesItsKey: on a node whose own key is older than the
// database's (its readiness check fails on the key: herald rekey moved the
// values on), every endpoint's values look unreadable while they are fine
// on the nodes with the current key. The page advised deleting an endpoint
// whose secrets and headers "do not open", and offered Replace secrets,
// which the API refuses there (503). Now it says to restart the node with
// the current key and not to replace or delete the endpoint, and offers
// neither the replacing rotation nor the edit; the edit form says the same.
// With the key check passing again the same endpoint gets the usual advice.
func TestStaleNodeAdvisesItsKey(t *testing.T) {
	f, stale := staleKeyFixture(t)
	b, _ := adminBrowser(t, f)
	both := unreadableEndpoint(t, f, "enabled", "secrets", "headers")
	secrets := unreadableEndpoint(t, f, "enabled", "secrets")
	stale.Store(true)
	for _, id := range []string{both, secrets} {
		page := html.UnescapeString(b.do("GET", "/ui/endpoints/"+id, nil).Body.String())
		if !strings.Contains(page, "restart this node with the current key") || !strings.Contains(page, "Do not replace or delete the endpoint for this") ||
			strings.Contains(page, "delete it and create it again") || strings.Contains(page, `action="/ui/endpoints/`+id+`/rotate"`) ||
			strings.Contains(page, `href="/ui/endpoints/`+id+`/edit"`) || !strings.Contains(page, "this node's key is older than the database's") ||
			!strings.Contains(page, `action="/ui/endpoints/`+id+`/state"`) {
			t.Errorf("%s on a stale node: want the restart advice, no replacing or editing, the state change offered (it needs no value):\n%s", id, page)
		}
		form := html.UnescapeString(b.do("GET", "/ui/endpoints/"+id+"/edit", nil).Body.String())
		if !strings.Contains(form, "restart this node with the current key") {
			t.Errorf("%s's edit form on a stale node: want the restart advice:\n%s", id, form)
		}
	}
	stale.Store(false)
	page := html.UnescapeString(b.do("GET", "/ui/endpoints/"+secrets, nil).Body.String())
	if strings.Contains(page, "restart this node") || !strings.Contains(page, `action="/ui/endpoints/`+secrets+`/rotate"`) {
		t.Errorf("with the key check passing: want the usual advice and Replace secrets:\n%s", page)
	}
}

// TestSourcePageOnAStaleNodeAndItsForwarding: a source whose configuration
// does not open on a node whose own key is stale was advised to be
// replaced or deleted (it is probably fine) and offered the replacing
// form, which answers 503 there; now the page says to restart the node
// with the current key and offers no edit. A source whose forwarding
// endpoint's secrets do not open (sealed under the same lost key) showed
// nothing of it, and what it accepted waited unforwarded; now its page
// says so and where to replace them.
func TestSourcePageOnAStaleNodeAndItsForwarding(t *testing.T) {
	f, stale := staleKeyFixture(t)
	b, _ := adminBrowser(t, f)
	var src api.SourceOut
	if code := f.apiCall(adminKey, "POST", "/v1/sources", `{"name":"gh","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`, &src); code != http.StatusCreated {
		t.Fatalf("create source: %d", code)
	}
	sealedElsewhere(t, f, src.EndpointID, "secrets")
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	if !strings.Contains(page, `data-testid="forwarding-unreadable"`) || !strings.Contains(page, "Replace secrets: a new forwarding secret") ||
		!strings.Contains(page, `<form method="post" action="/ui/sources/`+src.ID+`"`) {
		t.Errorf("a source whose forwarding endpoint's secrets do not open: want it said, with the way out, and the edit form:\n%s", page)
	}
	// Its own configuration too, on a node whose key is stale.
	sealUnderLostKey(t, f, "sources", "config", src.ID)
	stale.Store(true)
	page = html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	if !strings.Contains(page, "restart this node with the current key") || !strings.Contains(page, "Do not replace or delete the source for this") ||
		strings.Contains(page, "Edit it below") || strings.Contains(page, `<select name="scheme"`) || !strings.Contains(page, `data-testid="edit-waits"`) ||
		!strings.Contains(page, "until this node runs with the current key") {
		t.Errorf("on a stale node: want the restart advice and no replacing form:\n%s", page)
	}
	stale.Store(false)
	page = html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	if strings.Contains(page, "restart this node") || !strings.Contains(page, `<select name="scheme"`) {
		t.Errorf("with the key check passing: want the replacing form:\n%s", page)
	}
}

// staleKeyFixture is a fixture whose API's key check fails with
// store.ErrWrongKey (a node whose own key is stale) while the flag it
// returns is set, checked afresh on every call.
func staleKeyFixture(t *testing.T) (*fixture, *atomic.Bool) {
	t.Helper()
	stale := new(atomic.Bool)
	f := newFixtureWith(t, func(c *api.Config) {
		c.KeyCheck = func(context.Context) error {
			if stale.Load() {
				return store.ErrWrongKey
			}
			return nil
		}
		c.KeyCheckEvery = time.Nanosecond
	})
	return f, stale
}
