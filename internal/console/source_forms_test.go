package console

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
)

// createSource creates a source through the API.
func createSource(t *testing.T, f *fixture, body string) api.SourceOut {
	t.Helper()
	var src api.SourceOut
	if code := f.apiCall(adminKey, "POST", "/v1/sources", body, &src); code != http.StatusCreated {
		t.Fatalf("create source %s: %d", body, code)
	}
	return src
}

// A source's page edits its settings (the replay window, the dedupe rule,
// the body cap), not only its name, destination and secrets: the form
// shows them as stored and sends only what changed, so a scheme that
// signs no timestamp (whose form has no tolerance) is not refused for one.
func TestSourceFormEditsItsSettings(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	for _, want := range []string{`name="tolerance_seconds" type="number" min="0" max="3600" value="300"`, `name="dedupe" value=""`,
		`name="max_body_bytes" type="number" min="1024" max="16777216" value="1048576"`, `href="/ui/sources/` + src.ID + `/delete"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the source's page lacks %s:\n%s", want, page)
		}
	}
	form := func(tolerance, dedupe, maxBody string) url.Values {
		return url.Values{"csrf": {token}, "name": {src.Name}, "destination_url": {src.DestinationURL}, "secrets": {""},
			"tolerance_seconds": {tolerance}, "dedupe": {dedupe}, "max_body_bytes": {maxBody}}
	}
	if w := b.do("POST", "/ui/sources/"+src.ID, form("600", "header:X-Delivery", "2048")); w.Code != http.StatusSeeOther {
		t.Fatalf("saving the settings: %d %s", w.Code, w.Body.String())
	}
	var after api.SourceOut
	f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
	if after.ToleranceSeconds != 600 || after.Dedupe != "header:X-Delivery" || after.MaxBodyBytes != 2048 || after.Secrets != 1 {
		t.Fatalf("after saving: tolerance %d, dedupe %q, max body %d, %d secret(s); want 600, header:X-Delivery, 2048, 1",
			after.ToleranceSeconds, after.Dedupe, after.MaxBodyBytes, after.Secrets)
	}
	// Emptying the dedupe field goes back to the scheme's event id.
	if w := b.do("POST", "/ui/sources/"+src.ID, form("600", "", "2048")); w.Code != http.StatusSeeOther {
		t.Fatalf("clearing the dedupe rule: %d %s", w.Code, w.Body.String())
	}
	f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
	if after.Dedupe != "" || after.ToleranceSeconds != 600 {
		t.Fatalf("after clearing the dedupe rule: %q, tolerance %d", after.Dedupe, after.ToleranceSeconds)
	}

	gh := createSource(t, f, `{"name":"github in","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	page = b.do("GET", "/ui/sources/"+gh.ID, nil).Body.String()
	if strings.Contains(page, `name="tolerance_seconds"`) {
		t.Error("a github source's form offers a tolerance, which its scheme refuses")
	}
	w := b.do("POST", "/ui/sources/"+gh.ID, url.Values{"csrf": {token}, "name": {"github renamed"}, "destination_url": {gh.DestinationURL},
		"secrets": {""}, "dedupe": {""}, "max_body_bytes": {"1048576"}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("renaming a github source from its form: %d %s", w.Code, w.Body.String())
	}
	f.apiCall(adminKey, "GET", "/v1/sources/"+gh.ID, "", &after)
	if after.Name != "github renamed" {
		t.Fatalf("the github source's name: %q", after.Name)
	}
}

// A refused edit shows the form again as typed (never the secrets) with
// the refusal naming the field, and changes nothing.
func TestSourceFormRefusedKeepsWhatWasTyped(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	for _, c := range []struct{ field, value, says string }{
		{"dedupe", "bogus-rule", `Dedupe: invalid dedupe rule: "bogus-rule" (not "", "header:<Name>" or "json:/<JSON pointer>")`},
		{"tolerance_seconds", "soon", "Tolerance: a whole number of seconds"},
		{"max_body_bytes", "big", "Max body size: a whole number of bytes"},
		{"tolerance_seconds", "99999", "Tolerance: "},
		{"max_body_bytes", "-1", "Max body size: "},
	} {
		form := url.Values{"csrf": {token}, "name": {"typed name"}, "destination_url": {"http://10.0.0.7/typed"}, "secrets": {"typed-secret-0123456789"},
			"tolerance_seconds": {"300"}, "dedupe": {"json:/id"}, "max_body_bytes": {"4096"}}
		form.Set(c.field, c.value)
		w := b.do("POST", "/ui/sources/"+src.ID, form)
		body := html.UnescapeString(w.Body.String())
		alert, _, _ := strings.Cut(strings.SplitN(body+`<p class="error" role="alert">`, `<p class="error" role="alert">`, 2)[1], "</p>")
		if w.Code < 400 || w.Code >= 500 || !strings.Contains(alert, c.says) {
			t.Errorf("%s=%q: %d %q; want a refusal saying %q", c.field, c.value, w.Code, alert, c.says)
			continue
		}
		for _, typed := range []string{`value="typed name"`, `value="http://10.0.0.7/typed"`, `value="` + form.Get("tolerance_seconds") + `"`,
			`value="` + form.Get("dedupe") + `"`, `value="` + form.Get("max_body_bytes") + `"`} {
			if !strings.Contains(body, typed) {
				t.Errorf("%s=%q: the form shown again lacks %s", c.field, c.value, typed)
			}
		}
		if strings.Contains(body, "typed-secret-0123456789") {
			t.Errorf("%s=%q: the page shows the typed secret", c.field, c.value)
		}
		var after api.SourceOut
		f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
		if !after.UpdatedAt.Equal(src.UpdatedAt) || after.Name != src.Name {
			t.Errorf("%s=%q: the refused edit changed the source: %+v", c.field, c.value, after)
		}
	}
}

// A source is deleted from its page after a confirmation page that says
// what goes with it; only an admin is offered (and allowed) either.
func TestSourceDeletedFromItsPage(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	w := b.do("GET", "/ui/sources/"+src.ID+"/delete", nil)
	body := html.UnescapeString(w.Body.String())
	if w.Code != http.StatusOK || !strings.Contains(body, "Delete source <bdi>stripe in</bdi>?") || !strings.Contains(body, src.EndpointID) ||
		!strings.Contains(body, `<form method="post" action="/ui/sources/`+src.ID+`/delete"`) {
		t.Fatalf("the confirmation page: %d\n%s", w.Code, body)
	}
	if code := f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", nil); code != http.StatusOK {
		t.Fatalf("the confirmation page deleted the source: GET %d", code)
	}
	w = b.do("POST", "/ui/sources/"+src.ID+"/delete", url.Values{"csrf": {token}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/sources" {
		t.Fatalf("deleting: %d → %s", w.Code, w.Header().Get("Location"))
	}
	if code := f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", nil); code != http.StatusNotFound {
		t.Fatalf("after deleting, GET the source: %d; want 404", code)
	}
	if code := f.apiCall(adminKey, "GET", "/v1/endpoints/"+src.EndpointID, "", nil); code != http.StatusNotFound {
		t.Fatalf("after deleting, GET its forwarding endpoint: %d; want 404", code)
	}
	if page := b.do("GET", "/ui/sources", nil).Body.String(); !strings.Contains(page, "Source "+src.ID+" deleted") {
		t.Errorf("the sources page does not say the source was deleted")
	}

	// A manager is not offered the deletion (its POST is refused:
	// TestAdminFormsRefusedNamingTheirOperation).
	other := createSource(t, f, `{"name":"other","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	var manager api.APIKeyOut
	f.apiCall(adminKey, "POST", "/v1/api-keys", `{"name":"m","role":"manager","tenant":"acme"}`, &manager)
	mb := f.browser()
	mb.signIn(manager.Key)
	if w := mb.do("GET", "/ui/sources/"+other.ID+"/delete", nil); w.Code != http.StatusForbidden || !strings.Contains(html.UnescapeString(w.Body.String()), "(operation delete-source,") {
		t.Errorf("a manager's confirmation page: %d; want 403 naming delete-source", w.Code)
	}
	if code := f.apiCall(adminKey, "GET", "/v1/sources/"+other.ID, "", nil); code != http.StatusOK {
		t.Fatalf("the manager's refused page deleted the source: %d", code)
	}
}

// An edit sends only what the user changed from what the page showed
// (its was_* fields): a change made meanwhile by someone else, through
// the API or another page, is not undone by fields left as they were
// shown. Emptying the tolerance or body cap sets its default, as on the
// new-source form.
func TestSourceEditKeepsChangesMadeMeanwhile(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in","tolerance_seconds":600}`)
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	shown := url.Values{"csrf": {token}, "secrets": {""}}
	for _, k := range []string{"name", "destination_url", "tolerance_seconds", "dedupe", "max_body_bytes"} {
		for _, name := range []string{k, "was_" + k} {
			m := regexp.MustCompile(`name="` + name + `"[^>]*value="([^"]*)"`).FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("the page has no %s field with a value:\n%s", name, page)
			}
			shown.Set(name, m[1])
		}
	}
	// Meanwhile, through the API.
	if code := f.apiCall(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"destination_url":"http://10.0.0.8/moved","tolerance_seconds":700,"dedupe":"json:/id","max_body_bytes":9000}`, nil); code != http.StatusOK {
		t.Fatalf("PATCH through the API: %d", code)
	}
	form := url.Values{}
	for k, v := range shown {
		form[k] = v
	}
	form.Set("name", "renamed")
	if w := b.do("POST", "/ui/sources/"+src.ID, form); w.Code != http.StatusSeeOther {
		t.Fatalf("saving the name: %d %s", w.Code, w.Body.String())
	}
	var after api.SourceOut
	f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
	if after.Name != "renamed" || after.DestinationURL != "http://10.0.0.8/moved" || after.ToleranceSeconds != 700 || after.Dedupe != "json:/id" || after.MaxBodyBytes != 9000 {
		t.Fatalf("after saving only the name: %+v; want the name changed and the API's changes kept", after)
	}
	// Emptying the tolerance and body cap of a fresh page: their defaults.
	page = html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	form = url.Values{"csrf": {token}, "secrets": {""}}
	for _, k := range []string{"name", "destination_url", "tolerance_seconds", "dedupe", "max_body_bytes"} {
		for _, name := range []string{k, "was_" + k} {
			form.Set(name, regexp.MustCompile(`name="` + name + `"[^>]*value="([^"]*)"`).FindStringSubmatch(page)[1])
		}
	}
	form.Set("tolerance_seconds", "")
	form.Set("max_body_bytes", "")
	if w := b.do("POST", "/ui/sources/"+src.ID, form); w.Code != http.StatusSeeOther {
		t.Fatalf("emptying tolerance and body cap: %d %s", w.Code, w.Body.String())
	}
	f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
	if after.ToleranceSeconds != 300 || after.MaxBodyBytes != 1<<20 || after.Name != "renamed" {
		t.Fatalf("after emptying tolerance and body cap: %+v; want 300 and 1 MiB, the rest as it was", after)
	}
}

// A refused edit that carried new secrets says they were not kept (the
// form never shows them again), so that saving again without them is not
// taken for a rotation.
func TestSourceEditRefusedSaysSecretsWereNotKept(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	w := b.do("POST", "/ui/sources/"+src.ID, url.Values{"csrf": {token}, "name": {src.Name}, "destination_url": {src.DestinationURL},
		"secrets": {"rotated-secret-0123456789"}, "dedupe": {"bogus"}})
	if body := html.UnescapeString(w.Body.String()); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "The secrets typed were not kept") {
		t.Fatalf("a refused edit with new secrets: %d; want 422 saying they were not kept:\n%s", w.Code, body)
	}
	w = b.do("POST", "/ui/sources/"+src.ID, url.Values{"csrf": {token}, "name": {src.Name}, "destination_url": {src.DestinationURL},
		"secrets": {""}, "dedupe": {"bogus"}})
	if strings.Contains(w.Body.String(), "The secrets typed were not kept") {
		t.Fatal("a refused edit without secrets says secrets were not kept")
	}
}

// A source's forwarding endpoint belongs to the source: its page says so
// and links to it, and offers neither Edit nor Delete (the API refuses
// both, naming the source's route for each).
func TestForwardingEndpointPageLeadsToItsSource(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	page := html.UnescapeString(b.do("GET", "/ui/endpoints/"+src.EndpointID, nil).Body.String())
	if !strings.Contains(page, `data-testid="forwarding-of"`) || !strings.Contains(page, `<a href="/ui/sources/`+src.ID+`">`) {
		t.Errorf("the forwarding endpoint's page does not lead to its source:\n%s", page)
	}
	if strings.Contains(page, `href="/ui/endpoints/`+src.EndpointID+`/edit"`) || strings.Contains(page, `href="/ui/endpoints/`+src.EndpointID+`/delete"`) {
		t.Errorf("the forwarding endpoint's page offers Edit or Delete, which the API refuses")
	}
	w := b.do("POST", "/ui/endpoints/"+src.EndpointID+"/delete", url.Values{"csrf": {token}})
	if body := html.UnescapeString(w.Body.String()); w.Code != http.StatusConflict || !strings.Contains(body, "DELETE /v1/sources/"+src.ID) || strings.Contains(body, "PATCH or DELETE") {
		t.Errorf("deleting the forwarding endpoint: %d; want 409 naming the source's DELETE alone:\n%s", w.Code, body)
	}
	// A tenant's endpoint still has both.
	var ep api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"url":"https://example.com/hook","tenant":"acme"}`, &ep)
	if page := b.do("GET", "/ui/endpoints/"+ep.ID, nil).Body.String(); !strings.Contains(page, `/ui/endpoints/`+ep.ID+`/edit"`) || !strings.Contains(page, `/ui/endpoints/`+ep.ID+`/delete"`) || strings.Contains(page, `data-testid="forwarding-of"`) {
		t.Errorf("a tenant's endpoint page lost Edit or Delete, or calls itself a forwarding endpoint")
	}
}

// TestSourceNameAsTyped: the console sends a source's name as typed, as
// the API keeps it (docs/inbound.md: spaces around a visible character
// are kept), so a name of only spaces gets the API's "not blank" refusal,
// not one about an empty string the user did not type; and the tolerance
// hint says a timestamp ahead of the clock is refused too.
func TestSourceNameAsTyped(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	if !strings.Contains(page, "seconds a signed timestamp may be off from now, older or ahead") {
		t.Errorf("the tolerance hint does not say a timestamp ahead is refused too:\n%s", page)
	}
	save := func(name string) *httptest.ResponseRecorder {
		return b.do("POST", "/ui/sources/"+src.ID, url.Values{"csrf": {token}, "name": {name}, "destination_url": {src.DestinationURL}, "secrets": {""},
			"was_name": {src.Name}, "was_destination_url": {src.DestinationURL}})
	}
	if w := save(" spaced name "); w.Code != http.StatusSeeOther {
		t.Fatalf("saving a name with spaces around it: %d %s", w.Code, w.Body.String())
	}
	var after api.SourceOut
	f.apiCall(adminKey, "GET", "/v1/sources/"+src.ID, "", &after)
	if after.Name != " spaced name " {
		t.Errorf("the name was stored as %q, want it as typed", after.Name)
	}
	w := save("   ")
	if body := html.UnescapeString(w.Body.String()); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Name: must not be blank") || strings.Contains(body, "expected ") {
		t.Errorf("a name of spaces: %d, want 422 saying not blank:\n%s", w.Code, body)
	}
}

// TestSourceSecretsAreNumberedFromOne: the console numbers a source's
// secrets as a person counts them, the first one "secret 1", in every
// message, also inside the API's own words: a secret given twice said
// "Secrets (item 2): the same as secrets[0]", one label 1-based and the
// other 0-based. On the create and the edit form alike; the API may name
// the secret as the location (body.secrets[1]) or inside the message of
// the whole body (body: "secrets[1]: …"), and both read the same.
func TestSourceSecretsAreNumberedFromOne(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	const same = "source-secret-0123456789"
	check := func(what string, w *httptest.ResponseRecorder, want string) {
		t.Helper()
		body := html.UnescapeString(w.Body.String())
		if w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, want) {
			t.Errorf("%s: %d; want 422 saying %q:\n%s", what, w.Code, want, body)
		}
		if m := regexp.MustCompile(`secrets\[\d+\]|\(item \d+\)`).FindString(body); m != "" {
			t.Errorf("%s: the page numbers a secret as %q", what, m)
		}
	}
	w := b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {"stripe in"}, "scheme": {"stripe"},
		"secrets": {same + "\nanother-secret-0123456789\n" + same}, "destination_url": {"http://10.0.0.9/in"}})
	check("create with a secret given twice", w, "Secret 3: the same as secret 1: secrets must be distinct")
	w = b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {"stripe in"}, "scheme": {"stripe"},
		"secrets": {"long-enough-secret-0123456789\nshort"}, "destination_url": {"http://10.0.0.9/in"}})
	check("create with a short second secret", w, "Secret 2: shorter than 16 bytes")

	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["`+same+`"],"destination_url":"http://10.0.0.9/in"}`)
	w = b.do("POST", "/ui/sources/"+src.ID, url.Values{"csrf": {token}, "name": {src.Name}, "destination_url": {src.DestinationURL},
		"secrets": {"rotated-secret-0123456789\n" + "rotated-secret-0123456789"}})
	check("edit with a secret given twice", w, "Secret 2: the same as secret 1: secrets must be distinct")

	// Both ways the API may locate the error read the same.
	for _, fe := range []fieldError{
		{"body", "secrets[1]: the same as secrets[0]: secrets must be distinct"},
		{"body.secrets[1]", "secrets[1]: the same as secrets[0]: secrets must be distinct"},
		{"body.secrets[1]", "the same as secrets[0]: secrets must be distinct"},
	} {
		err := relabel(&apiError{Status: 422, head: "validation failed", fields: []fieldError{fe}}, sourceLabels)
		if got, want := err.Error(), "Secret 2: the same as secret 1: secrets must be distinct"; got != want {
			t.Errorf("%+v: %q; want %q", fe, got, want)
		}
	}
}
