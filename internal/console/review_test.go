package console

import (
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
)

// errorText is the text of a page's error box.
func errorText(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<p class="error" role="alert">(.*?)</p>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page shows no error:\n%s", page)
	}
	return html.UnescapeString(m[1])
}

// TestHMACSettingsShowWhitespaceExactly: an hmac source's prefix, signed
// content and header names are shown quoted, in cells that keep every
// space (white-space: pre-wrap), so a prefix "v1  =" is not shown as
// "v1 =" and a template's double and trailing spaces can be seen: a user
// signing as the page shows is not refused.
func TestHMACSettingsShowWhitespaceExactly(t *testing.T) {
	f := newFixture(t)
	b, _ := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"acme","scheme":"hmac","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in",
		"hmac":{"header":"X-Acme-Signature","prefix":"v1  =","timestamp_header":"X-Acme-Timestamp","template":"{timestamp}  {body} "}}`)
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+src.ID, nil).Body.String())
	for _, want := range []string{`<code class="exact">"v1  ="</code>`, `<code class="exact">"{timestamp}  {body} "</code>`,
		`<code class="exact">"X-Acme-Signature"</code>`, `<code class="exact">"X-Acme-Timestamp"</code>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the hmac source's page lacks %s:\n%s", want, page)
		}
	}
	css, err := fs.ReadFile(assets, "static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`code\.exact\s*\{[^}]*white-space:\s*pre-wrap`).Match(css) {
		t.Error("console.css gives code.exact no white-space: pre-wrap: double spaces collapse in the browser")
	}
}

// TestSourceEndpointEditAndDeleteLeadToTheSource: an inbound source's
// forwarding endpoint is changed and deleted through its source. Its edit
// and delete pages say so with a link to the source's page (and its
// delete page), instead of a form the API refuses (409), and a POST to
// them changes nothing and answers the same way.
func TestSourceEndpointEditAndDeleteLeadToTheSource(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe <in>","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	ep := "/ui/endpoints/" + src.EndpointID
	srcPage := `href="/ui/sources/` + src.ID + `"`
	for _, c := range []struct {
		what, method, path string
		form               url.Values
		status             int
		want               []string
	}{
		{"edit page", "GET", ep + "/edit", nil, http.StatusOK, []string{"is changed through its source", srcPage}},
		{"delete page", "GET", ep + "/delete", nil, http.StatusOK, []string{"is deleted with its source", `href="/ui/sources/` + src.ID + `/delete"`}},
		{"edit POST", "POST", ep, url.Values{"csrf": {token}, "url": {"http://10.0.0.8/x"}}, http.StatusConflict, []string{"is changed through its source", srcPage}},
		{"delete POST", "POST", ep + "/delete", url.Values{"csrf": {token}}, http.StatusConflict, []string{"is deleted with its source", `href="/ui/sources/` + src.ID + `/delete"`}},
	} {
		w := b.do(c.method, c.path, c.form)
		raw := w.Body.String()
		body := html.UnescapeString(raw)
		if w.Code != c.status {
			t.Errorf("%s: %d; want %d", c.what, w.Code, c.status)
		}
		for _, s := range append(c.want, "stripe <in>") {
			if !strings.Contains(body, s) {
				t.Errorf("%s lacks %q:\n%s", c.what, s, body)
			}
		}
		for _, bad := range []string{`data-testid="confirm-delete"`, `id="endpoint-form"`, "Delete endpoint " + src.EndpointID + "?"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s still shows %q", c.what, bad)
			}
		}
		if strings.Contains(raw, "<in>") {
			t.Errorf("%s: the source's name is shown as markup", c.what)
		}
	}
	var e api.EndpointOut
	if code := f.apiCall(adminKey, "GET", "/v1/endpoints/"+src.EndpointID, "", &e); code != http.StatusOK || e.URL != "http://10.0.0.9/in" {
		t.Errorf("after the POSTs the forwarding endpoint is %d %q; want it unchanged", code, e.URL)
	}
}

// TestRefusedNewSourceSaysSecretsNotKept: a refused New source form comes
// back without the secrets typed (they are write-only, never sent back to
// the browser) and says so, as a refused edit does.
func TestRefusedNewSourceSaysSecretsNotKept(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	w := b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {"x"}, "scheme": {"stripe"}, "secrets": {"source-secret-0123456789"},
		"destination_url": {"http://10.0.0.9/in"}, "max_body_bytes": {"100"}})
	if w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("refused create: %d", w.Code)
	}
	if msg := errorText(t, w.Body.String()); !strings.HasSuffix(msg, " The secrets typed were not kept (they are never sent back to the browser): type them again.") {
		t.Errorf("a refused New source does not say the secrets were not kept: %q", msg)
	}
	// Nothing typed in Secrets: nothing to say of them.
	w = b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {"x"}, "scheme": {"stripe"}, "secrets": {""},
		"destination_url": {"http://10.0.0.9/in"}})
	if msg := errorText(t, w.Body.String()); strings.Contains(msg, "not kept") {
		t.Errorf("a refusal without secrets typed speaks of them: %q", msg)
	}
}

// TestConsoleNotesFollowTheAPIMessageAsSentences: where the console adds
// its own sentence to the API's message, the message ends as a sentence
// first (a period), instead of "…github, shopify and hmac) The secrets…".
func TestConsoleNotesFollowTheAPIMessageAsSentences(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"gh","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	for _, c := range []struct{ what, path string }{{"edit", "/ui/sources/" + src.ID}, {"create", "/ui/sources"}} {
		form := url.Values{"csrf": {token}, "name": {"gh"}, "scheme": {"github"}, "destination_url": {src.DestinationURL}, "secrets": {"source-secret-abcdefghijk"},
			"dedupe": {"header:X-Id"}}
		if c.what == "edit" {
			for k, v := range map[string]string{"was_name": "gh", "was_destination_url": src.DestinationURL, "was_tolerance_seconds": "0", "was_dedupe": "", "was_max_body_bytes": "1048576", "max_body_bytes": "1048576"} {
				form.Set(k, v)
			}
		}
		msg := errorText(t, b.do("POST", c.path, form).Body.String())
		if !regexp.MustCompile(`[a-z)]\. The secrets typed were not kept`).MatchString(msg) {
			t.Errorf("%s: the console's note does not follow the API's message as a sentence: %q", c.what, msg)
		}
	}
}

// TestSourceRefusalsSpeakTheFormsTerms: a refusal shown on a source form
// names the form's fields by their labels, not the API's names
// (tolerance_seconds, max_body_bytes), and says "empty" where the API
// says 0 for the default, which the form does not accept (min=1024) and
// its hint calls empty.
func TestSourceRefusalsSpeakTheFormsTerms(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	base := func(k, v string) url.Values {
		return url.Values{"csrf": {token}, "name": {"x"}, "scheme": {"github"}, "secrets": {"source-secret-0123456789"},
			"destination_url": {"http://10.0.0.9/in"}, k: {v}}
	}
	for _, c := range []struct {
		field, value string
		want         []string
	}{
		{"tolerance_seconds", "60", []string{"Tolerance: 60: scheme github signs no timestamp", "leave Tolerance empty"}},
		{"max_body_bytes", "100", []string{"Max body size: must be an integer number of bytes from 1024", "or empty for the default (1048576, 1 MiB)"}},
	} {
		msg := errorText(t, b.do("POST", "/ui/sources", base(c.field, c.value)).Body.String())
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s %s: the refusal lacks %q: %q", c.field, c.value, w, msg)
			}
		}
		for _, bad := range []string{"tolerance_seconds", "max_body_bytes", "0 for the default", " 0;", " 0."} {
			if strings.Contains(msg, bad) || strings.HasSuffix(msg, " 0") {
				t.Errorf("%s %s: the refusal says %q, the API's terms: %q", c.field, c.value, bad, msg)
			}
		}
	}
}

// TestDeleteConfirmationSpacingAndTenant: the shared delete confirmation
// keeps its Delete button and Cancel link apart (in an actions row, whose
// gap spaces them), and an endpoint's names its tenant (an admin works
// across tenants).
func TestDeleteConfirmationSpacingAndTenant(t *testing.T) {
	f := newFixture(t)
	b, _ := adminBrowser(t, f)
	var ep api.EndpointOut
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep); code != http.StatusCreated {
		t.Fatalf("create endpoint: %d", code)
	}
	body := html.UnescapeString(b.do("GET", "/ui/endpoints/"+ep.ID+"/delete", nil).Body.String())
	if !strings.Contains(body, "tenant acme") {
		t.Errorf("the endpoint's delete confirmation does not name its tenant:\n%s", body)
	}
	if !regexp.MustCompile(`(?s)<div class="actions">\s*<form [^>]*data-testid="confirm-delete".*?</form>\s*<a href="/ui/endpoints/` + ep.ID + `">Cancel</a>\s*</div>`).MatchString(body) {
		t.Errorf("the Delete button and Cancel are not in one actions row:\n%s", body)
	}
}

// TestInFormTermsLeavesValuesAlone: an API field name inside a value (a
// JSON pointer, a header) is the user's, not a field to name by its label.
func TestInFormTermsLeavesValuesAlone(t *testing.T) {
	for _, c := range []struct{ field, in, want string }{
		{"max_body_bytes", `dedupe "json:/max_body_bytes": no such member; leave max_body_bytes 0`,
			`dedupe "json:/max_body_bytes": no such member; leave Max body size empty`},
		{"tolerance_seconds", "tolerance_seconds 60: set tolerance_seconds, or send 0 for the default (300)",
			"Tolerance 60: set Tolerance, or leave it empty for the default (300)"},
	} {
		if got := inFormTerms(c.in, c.field, sourceLabels); got != c.want {
			t.Errorf("inFormTerms(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestQuotedEscapesFormatCharacters: a setting's value is shown as a JSON
// string with its invisible format characters (Unicode category Cf)
// written as escapes, as control characters are, so a value stored with a
// bidi control (U+202E) cannot reverse the page's text nor a U+200B hide
// in it.
func TestQuotedEscapesFormatCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"\u202ev1=":      `"\u202ev1="`,
		"{body}\u200b":   `"{body}\u200b"`,
		"\ufeffa\u2066b": `"\ufeffa\u2066b"`,
		"x\U000e0001y":   `"x\udb40\udc01y"`,
		"v1  =\t<é>":     `"v1  =\t<é>"`,
	} {
		if got := quoted(in); got != want {
			t.Errorf("quoted(%q) = %s; want %s", in, got, want)
		}
	}
}
