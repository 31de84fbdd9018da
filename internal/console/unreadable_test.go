package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
)

// TestEndpointWhoseValuesDoNotOpenIsMarked: an endpoint whose stored
// secrets this node cannot open is listed with a marker, and its page says
// what does not open and the ways out, with its deliveries listed (the
// page once failed as a whole on the deliveries' 409).
func TestEndpointWhoseValuesDoNotOpenIsMarked(t *testing.T) {
	f := newFixture(t)
	var bad, fine api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://receiver.example/bad"}`, &bad)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://receiver.example/fine"}`, &fine)
	if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, nil); st != 202 {
		t.Fatalf("publish: %d", st)
	}
	sealUnderLostKey(t, f, "endpoints", "secrets", bad.ID)
	b, _ := adminBrowser(t, f)
	w := b.do("GET", "/ui/endpoints", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /ui/endpoints: %d", w.Code)
	}
	rows := strings.Split(w.Body.String(), "<tr data-endpoint=")
	marked := map[string]bool{}
	for _, r := range rows[1:] {
		id := strings.Trim(strings.SplitN(r, ">", 2)[0], `"`)
		marked[id] = strings.Contains(strings.SplitN(r, "</tr>", 2)[0], `data-testid="unreadable"`)
	}
	if !marked[bad.ID] || marked[fine.ID] || len(marked) != 2 {
		t.Errorf("endpoints marked as not opening: %v; want only %s", marked, bad.ID)
	}
	w = b.do("GET", "/ui/endpoints/"+bad.ID, nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `data-testid="unreadable"`) || !strings.Contains(body, "do not open its stored secrets") ||
		!deliveryLink.MatchString(body) {
		t.Errorf("the endpoint's page = %d; want 200 naming its secrets as not opening, with its delivery listed:\n%s", w.Code, body)
	}
	if !strings.Contains(body, "Replace its secrets with a new one") || strings.Contains(body, "give its headers again") {
		t.Errorf("the page of an endpoint whose secrets alone do not open does not advise the replacing of the secrets alone:\n%s", body)
	}
	if w := b.do("GET", "/ui/endpoints/"+fine.ID, nil); strings.Contains(w.Body.String(), `data-testid="unreadable"`) {
		t.Error("an endpoint whose values open is marked as not opening")
	}
	// Secrets and header values: only a delete is left.
	d := endpointDetailData{E: api.EndpointOut{Unreadable: []string{"headers.X-Team", "secrets"}}}
	if a := d.UnreadableAdvice(); !strings.Contains(a, "delete it and create it again") || strings.Contains(a, "Rotate") {
		t.Errorf("advice for secrets and headers: %q; want deletion only", a)
	}
	d.E.Unreadable = []string{"headers.X-Team"}
	if a := d.UnreadableAdvice(); !strings.Contains(a, "give its headers again") || strings.Contains(a, "Rotate") {
		t.Errorf("advice for headers alone: %q; want the edit", a)
	}
}

// TestSourceWhoseConfigDoesNotOpenIsMarked: an inbound source whose sealed
// configuration this node cannot open once made the sources page answer
// the API's 409 as a whole. It is listed with a marker now (the others
// as before), its page says what does not open and the ways out, and its
// edit form, which then asks for the scheme too, replaces the
// configuration.
func TestSourceWhoseConfigDoesNotOpenIsMarked(t *testing.T) {
	f := newFixture(t)
	var bad, fine api.SourceOut
	for name, out := range map[string]*api.SourceOut{"bad": &bad, "fine": &fine} {
		if code := f.apiCall(adminKey, "POST", "/v1/sources", `{"name":"`+name+`","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`, out); code != http.StatusCreated {
			t.Fatalf("create source %s: %d", name, code)
		}
	}
	sealUnderLostKey(t, f, "sources", "config", bad.ID)
	b, token := adminBrowser(t, f)
	w := b.do("GET", "/ui/sources", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /ui/sources: %d %s", w.Code, w.Body.String())
	}
	rows := strings.Split(w.Body.String(), "<tr data-source=")
	marked := map[string]bool{}
	for _, r := range rows[1:] {
		id := strings.Trim(strings.SplitN(r, ">", 2)[0], `"`)
		marked[id] = strings.Contains(strings.SplitN(r, "</tr>", 2)[0], `data-testid="unreadable"`)
	}
	if !marked[bad.ID] || marked[fine.ID] || len(marked) != 2 {
		t.Errorf("sources marked as not opening: %v; want only %s", marked, bad.ID)
	}
	// Its number of secrets is not known: not shown as 0.
	if row := strings.SplitN(strings.SplitN(w.Body.String(), `<tr data-source="`+bad.ID+`">`, 2)[1], "</tr>", 2)[0]; !strings.Contains(row, "<td>—</td>") || strings.Contains(row, "<td>0</td>") {
		t.Errorf("the unreadable source's row shows a count of secrets: %s", row)
	}
	w = b.do("GET", "/ui/sources/"+bad.ID, nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `data-testid="unreadable"`) || !strings.Contains(body, "do not open its stored configuration") ||
		!strings.Contains(body, "give its scheme and secrets again") || !strings.Contains(body, `<select name="scheme" required><option value="" selected disabled>choose the provider's scheme</option>`) {
		t.Errorf("the source's page = %d; want 200 naming its configuration as not opening, the ways out, and a scheme in the form:\n%s", w.Code, body)
	}
	if w := b.do("GET", "/ui/sources/"+fine.ID, nil); strings.Contains(w.Body.String(), `data-testid="unreadable"`) || strings.Contains(w.Body.String(), `<select name="scheme"`) {
		t.Error("a source whose configuration opens is marked as not opening, or asked for its scheme")
	}
	// A refused replacement shows the scheme chosen again.
	w = b.do("POST", "/ui/sources/"+bad.ID, url.Values{"csrf": {token}, "name": {"bad"}, "destination_url": {"http://10.0.0.9/in"},
		"scheme": {"stripe"}, "secrets": {"another-secret-0123456789"}, "tolerance_seconds": {"99999"}})
	if body := w.Body.String(); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "<option selected>stripe</option>") || !strings.Contains(body, `value="99999"`) {
		t.Errorf("a refused replacement: %d; want 422 with the scheme and tolerance typed shown again:\n%s", w.Code, body)
	}
	// The form replaces it, with the settings it gives (the others take
	// their defaults).
	w = b.do("POST", "/ui/sources/"+bad.ID, url.Values{"csrf": {token}, "name": {"bad"}, "destination_url": {"http://10.0.0.9/in"},
		"scheme": {"stripe"}, "secrets": {"another-secret-0123456789"}, "tolerance_seconds": {"120"}, "dedupe": {"header:X-Id"}, "max_body_bytes": {""}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("saving the source with scheme and secrets: %d %s", w.Code, w.Body.String())
	}
	var after api.SourceOut
	f.apiCall(adminKey, "GET", "/v1/sources/"+bad.ID, "", &after)
	if after.Scheme != "stripe" || after.Secrets != 1 || len(after.Unreadable) != 0 || after.ToleranceSeconds != 120 || after.Dedupe != "header:X-Id" || after.MaxBodyBytes != 1<<20 {
		t.Errorf("after saving: %+v; want scheme stripe, 1 secret, readable, tolerance 120, dedupe header:X-Id, the default body cap", after)
	}
}

// TestUnreadableNames: the console names an endpoint's values that do not
// open in words, not by the API's names ("headers.X-A, secrets").
func TestUnreadableNames(t *testing.T) {
	for in, want := range map[string]string{
		"secrets":                             "secrets",
		"headers.X-A":                         "the value of header X-A",
		"headers.X-A secrets":                 "secrets and the value of header X-A",
		"headers.X-A headers.X-B headers.X-C": "the values of headers X-A, X-B and X-C",
	} {
		if got := unreadableNames(strings.Fields(in)); got != want {
			t.Errorf("unreadableNames(%s) = %q; want %q", in, got, want)
		}
	}
}
