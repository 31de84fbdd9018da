package console

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestSourcePageSaysWhatItDoes: a source's page describes its dedupe as
// its scheme does it — a github or shopify source (no signed timestamp)
// is deduped on the SHA-256 of its body, not "the scheme's event id", and
// its form offers no header: rule (refused for it) — a stripe source on
// its event's JSON id; its summary gives the body cap; a disabled
// forwarding endpoint shows its reason after a separator and an Enable
// action that comes back to the source's page; and a save that changes
// nothing says so instead of "saved".
func TestSourcePageSaysWhatItDoes(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	gh := createSource(t, f, `{"name":"gh","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in","max_body_bytes":65536}`)
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+gh.ID, nil).Body.String())
	for _, want := range []string{"dedupe the SHA-256 of the body · body cap 64 KiB ·", "or json:/<JSON pointer> into the signed body", `placeholder="the SHA-256 of the body"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the github source's page lacks %q:\n%s", want, page)
		}
	}
	for _, bad := range []string{"the scheme's event id", "header:<Name>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the github source's page says %q (it is deduped on its body; header: is refused for it)", bad)
		}
	}
	// The create form on the sources list says the same, and takes no body
	// cap the API refuses.
	list := html.UnescapeString(b.do("GET", "/ui/sources", nil).Body.String())
	for _, want := range []string{"empty: the scheme's own (its event id; the SHA-256 of the body for github, shopify and hmac)", `name="max_body_bytes" type="number" min="1024"`} {
		if !strings.Contains(list, want) {
			t.Errorf("the sources list's create form lacks %q", want)
		}
	}
	if strings.Contains(list, "the scheme's event id") {
		t.Error(`the sources list's create form says "the scheme's event id" (github, shopify and hmac dedupe on the body)`)
	}
	st := createSource(t, f, `{"name":"st","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	page = html.UnescapeString(b.do("GET", "/ui/sources/"+st.ID, nil).Body.String())
	for _, want := range []string{"dedupe the event's JSON id · body cap 1 MiB ·", "empty: the event's JSON id; or header:<Name>, json:/<JSON pointer>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the stripe source's page lacks %q", want)
		}
	}

	// A disabled forwarding endpoint: its reason after a separator, and
	// an Enable action back to this page.
	if _, _, err := f.st.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: gh.EndpointID, State: store.EndpointDisabled, Reason: "the endpoint answered 410 Gone", Now: f.clock()}); err != nil {
		t.Fatal(err)
	}
	page = html.UnescapeString(b.do("GET", "/ui/sources/"+gh.ID, nil).Body.String())
	if !strings.Contains(page, `disabled</span> · the endpoint answered 410 Gone`) || !strings.Contains(page, `<input type="hidden" name="to" value="enable"><button type="submit">Enable</button>`) {
		t.Errorf("the page of a source whose forwarding endpoint is disabled lacks the separated reason or the Enable action:\n%s", page)
	}
	w := b.do("POST", "/ui/endpoints/"+gh.EndpointID+"/state", url.Values{"csrf": {token}, "to": {"enable"}, "source": {gh.ID}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/sources/"+gh.ID {
		t.Errorf("Enable from the source's page: %d to %q; want 303 back to /ui/sources/%s", w.Code, w.Header().Get("Location"), gh.ID)
	}
	var ep api.EndpointOut
	f.apiCall(adminKey, "GET", "/v1/endpoints/"+gh.EndpointID, "", &ep)
	if ep.State != "enabled" {
		t.Errorf("after Enable the forwarding endpoint is %s", ep.State)
	}

	// A save that changes nothing.
	var before api.SourceOut
	f.apiCall(adminKey, "GET", "/v1/sources/"+st.ID, "", &before)
	form := url.Values{"csrf": {token}, "name": {st.Name}, "destination_url": {st.DestinationURL}, "secrets": {""},
		"tolerance_seconds": {"300"}, "dedupe": {""}, "max_body_bytes": {"1048576"},
		"was_name": {st.Name}, "was_destination_url": {st.DestinationURL}, "was_tolerance_seconds": {"300"}, "was_dedupe": {""}, "was_max_body_bytes": {"1048576"}}
	for _, secrets := range []string{"", "source-secret-0123456789"} { // the form as shown; the same secret typed again
		form.Set("secrets", secrets)
		if w := b.do("POST", "/ui/sources/"+st.ID, form); w.Code != http.StatusSeeOther {
			t.Fatalf("saving the form unchanged: %d %s", w.Code, w.Body.String())
		}
		page = b.do("GET", "/ui/sources/"+st.ID, nil).Body.String()
		if !strings.Contains(page, "Source "+st.ID+": nothing changed.") || strings.Contains(page, "saved.") {
			t.Errorf("a save that changes nothing (secrets %q) does not say so", secrets)
		}
	}
	var after api.SourceOut
	f.apiCall(adminKey, "GET", "/v1/sources/"+st.ID, "", &after)
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a save that changes nothing wrote the source (updated_at %v → %v)", before.UpdatedAt, after.UpdatedAt)
	}
}

// TestHMACSourcePageShowsItsSigningSettings: an hmac source's page shows
// how its provider signs — the signature header, algorithm, encoding,
// prefix, timestamp header with its replay window, and the signed content
// — each labelled, with the defaults an empty setting means named, and
// never a secret. The summary used to say only "scheme hmac", so an
// operator could not see which header or algorithm the source expected.
func TestHMACSourcePageShowsItsSigningSettings(t *testing.T) {
	f := newFixture(t)
	b, _ := adminBrowser(t, f)
	const secret = "hmac-source-secret-0123456789"
	full := createSource(t, f, `{"name":"acme hooks","scheme":"hmac","secrets":["`+secret+`"],"destination_url":"http://10.0.0.9/in",
		"hmac":{"header":"X-Acme-Signature","algorithm":"sha512","encoding":"base64","prefix":"v1=","timestamp_header":"X-Acme-Timestamp","template":"{timestamp}.{body}"}}`)
	page := html.UnescapeString(b.do("GET", "/ui/sources/"+full.ID, nil).Body.String())
	sect := page
	if i := strings.Index(page, `data-testid="hmac-settings"`); i < 0 {
		t.Fatalf("the hmac source's page shows no signing settings:\n%s", page)
	} else if j := strings.Index(page[i:], "</table>"); j >= 0 {
		sect = page[i : i+j]
	}
	for _, want := range []string{
		"<th>Signature header</th><td><code class=\"exact\">\"X-Acme-Signature\"</code>",
		"<th>Algorithm</th><td>HMAC-SHA512",
		"<th>Encoding</th><td>base64",
		"<th>Prefix</th><td><code class=\"exact\">\"v1=\"</code>",
		"<th>Timestamp header</th><td><code class=\"exact\">\"X-Acme-Timestamp\"</code>",
		"tolerance 300 s",
		"<th>Signed content</th><td><code class=\"exact\">\"{timestamp}.{body}\"</code>",
	} {
		if !strings.Contains(sect, want) {
			t.Errorf("the hmac settings lack %q:\n%s", want, sect)
		}
	}
	if strings.Contains(page, secret) {
		t.Error("the hmac source's page shows its secret")
	}

	// Empty settings: the defaults they mean, and no replay window.
	plain := createSource(t, f, `{"name":"plain","scheme":"hmac","secrets":["`+secret+`"],"destination_url":"http://10.0.0.9/in","hmac":{"header":"X-Sig"}}`)
	page = html.UnescapeString(b.do("GET", "/ui/sources/"+plain.ID, nil).Body.String())
	for _, want := range []string{
		"<th>Signature header</th><td><code class=\"exact\">\"X-Sig\"</code>",
		"<th>Algorithm</th><td>HMAC-SHA256 (the default)",
		"<th>Encoding</th><td>hex (the default)",
		"<th>Prefix</th><td>none",
		"<th>Timestamp header</th><td>none: no signed timestamp, so no replay window",
		"<th>Signed content</th><td><code class=\"exact\">\"{body}\"</code> <span class=\"hint\">(the default: the raw body)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the plain hmac source's settings lack %q", want)
		}
	}
	// Another scheme has no such section.
	st := createSource(t, f, `{"name":"st","scheme":"stripe","secrets":["`+secret+`"],"destination_url":"http://10.0.0.9/in"}`)
	if page := b.do("GET", "/ui/sources/"+st.ID, nil).Body.String(); strings.Contains(page, "hmac-settings") {
		t.Error("a stripe source's page shows hmac settings")
	}
}
