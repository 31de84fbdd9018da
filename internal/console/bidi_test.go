package console

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestUserTextIsIsolated: user text shown in a page (an endpoint's or an
// event type's description, a source's name) cannot reorder the page's
// text around it (Trojan Source): it sits in <bdi>, and its bidirectional
// controls (U+202A–U+202E, U+2066–U+2069) are shown by their code points,
// never as the characters, so no override runs on past it and no PDI ends
// the isolation early. An emoji's zero-width joiner is kept as it is.
// Form fields keep the value as stored (an input isolates its text).
func TestUserTextIsIsolated(t *testing.T) {
	f := newFixture(t)
	b, _ := adminBrowser(t, f)
	const emoji = "\U0001F469\u200D\U0001F4BB" // woman technologist: a ZWJ sequence
	var ep api.EndpointOut
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"url":"https://example.com/hook","tenant":"acme","description":"billing \u202eevil text `+emoji+`"}`, &ep); code != http.StatusCreated {
		t.Fatalf("create endpoint: %d", code)
	}
	if code := f.apiCall(adminKey, "POST", "/v1/event-types", `{"name":"order.created","description":"orders \u2067\u2069\u202eplaced","versions":[{"version":1,"schema":{}}]}`, nil); code != http.StatusCreated {
		t.Fatalf("create event type: %d", code)
	}
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	// A name stored before the API refused invisible format characters.
	legacy := "stripe \u2069\u202ein"
	if _, err := f.st.UpdateSource(t.Context(), store.UpdateSourceParams{ID: src.ID, Name: &legacy, Now: f.clock()}); err != nil {
		t.Fatal(err)
	}
	control := func(r rune) bool { return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 }
	values := regexp.MustCompile(`value="[^"]*"`)
	for _, c := range []struct{ page, want string }{
		{"/ui/endpoints", "<bdi>billing <span class=\"bidi-control\""},
		{"/ui/endpoints/" + ep.ID, "<bdi>billing <span class=\"bidi-control\""},
		{"/ui/catalog", "<bdi>orders <span class=\"bidi-control\""},
		{"/ui/catalog/order.created", "<bdi>orders <span class=\"bidi-control\""},
		{"/ui/sources", "<bdi>stripe <span class=\"bidi-control\""},
		{"/ui/sources/" + src.ID, "<bdi>stripe <span class=\"bidi-control\""},
		{"/ui/sources/" + src.ID + "/delete", "<bdi>stripe <span class=\"bidi-control\""},
		{"/ui/endpoints/" + src.EndpointID + "/edit", "<bdi>stripe <span class=\"bidi-control\""},
		{"/ui/endpoints/" + src.EndpointID + "/delete", "<bdi>stripe <span class=\"bidi-control\""},
	} {
		w := b.do("GET", c.page, nil)
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Errorf("%s: %d", c.page, w.Code)
			continue
		}
		if !strings.Contains(body, c.want) || !strings.Contains(body, "&lt;U+202E&gt;</span>") {
			t.Errorf("%s: the user text is not isolated with its controls shown (want %s … &lt;U+202E&gt;)", c.page, c.want)
		}
		if i := strings.IndexFunc(values.ReplaceAllString(body, ""), control); i >= 0 {
			t.Errorf("%s: a bidirectional control is in the page's text: …%s…", c.page, values.ReplaceAllString(body, "")[max(0, i-80):i+3])
		}
		if strings.Contains(c.page, "endpoints/"+ep.ID) && !strings.Contains(body, emoji) {
			t.Errorf("%s: the emoji's ZWJ sequence is not shown as it is", c.page)
		}
	}
}
