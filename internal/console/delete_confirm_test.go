package console

import (
	"html"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
)

// TestEveryDeleteConfirmationNamesItsResourceAndAction: every resource
// deleted after a confirmation page (an endpoint, an inbound source) gets
// it from one shared template, and each still names its resource, says
// what goes with it, posts to its own delete action with the session's
// CSRF token, and cancels back to the resource's page. The pages used to
// be one template per resource, copies of each other.
func TestEveryDeleteConfirmationNamesItsResourceAndAction(t *testing.T) {
	if m, _ := fs.Glob(assets, "templates/confirm_delete*.html"); len(m) != 1 {
		t.Errorf("delete confirmations come from %d templates %v; want one shared template", len(m), m)
	}
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	var ep api.EndpointOut
	if code := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/hook"}`, &ep); code != http.StatusCreated {
		t.Fatalf("create endpoint: %d", code)
	}
	src := createSource(t, f, `{"name":"stripe <in>","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	for _, c := range []struct {
		what, page string
		want       []string
	}{
		{"endpoint", "/ui/endpoints/" + ep.ID, []string{
			"<h1>Delete endpoint <bdi>" + ep.ID + "</bdi>?</h1>",
			"https://acme.example/hook",
			"Its deliveries, attempts and dead letters are deleted with it.",
			`<button type="submit" class="danger">Delete endpoint</button>`,
		}},
		{"source", "/ui/sources/" + src.ID, []string{
			"<h1>Delete source <bdi>stripe <in></bdi>?</h1>", // isolated: user text
			src.ID, "ingest <code>/in/" + src.ID + "</code>", "forwards to http://10.0.0.9/in",
			"Its forwarding endpoint " + src.EndpointID + " is deleted with it",
			`<button type="submit" class="danger">Delete source</button>`,
		}},
	} {
		w := b.do("GET", c.page+"/delete", nil)
		raw := w.Body.String()
		body := html.UnescapeString(raw)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: the confirmation page answers %d", c.what, w.Code)
		}
		want := append(c.want, `data-testid="confirm-delete"`,
			`<form method="post" action="`+c.page+`/delete"`,
			`<input type="hidden" name="csrf" value="`+token+`">`,
			`<a href="`+c.page+`">Cancel</a>`,
			"This cannot be undone")
		for _, s := range want {
			if !strings.Contains(body, s) {
				t.Errorf("%s: the confirmation page lacks %q:\n%s", c.what, s, body)
			}
		}
		if strings.Contains(raw, "<in>") {
			t.Errorf("%s: a stored name is shown as markup", c.what)
		}
	}
}
