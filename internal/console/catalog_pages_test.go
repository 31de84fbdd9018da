package console

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestCatalogIsPaged: the catalog page shows catalogPage event types at a
// time, by name, with a link to the next page that shows the rest; the
// endpoint form's hint still names every type.
func TestCatalogIsPaged(t *testing.T) {
	f := newFixture(t)
	n := catalogPage + 1
	for i := range n {
		body := fmt.Sprintf(`{"name":"t.%03d","versions":[{"version":1,"schema":{"type":"object"}}]}`, i)
		if code := f.apiCall(adminKey, "POST", "/v1/event-types", body, nil); code != 201 {
			t.Fatal(code)
		}
	}
	b := f.browser()
	b.signIn(adminKey)
	types := regexp.MustCompile(`<tr data-type="(t\.\d+)">`)
	first := b.do("GET", "/ui/catalog", nil)
	page := first.Body.String()
	if got := types.FindAllStringSubmatch(page, -1); first.Code != 200 || len(got) != catalogPage || got[0][1] != "t.000" || got[catalogPage-1][1] != fmt.Sprintf("t.%03d", catalogPage-1) {
		t.Fatalf("first catalog page: %d, %d types; want %d from t.000\n%s", first.Code, len(got), catalogPage, page)
	}
	next := regexp.MustCompile(`<a href="(/ui/catalog\?cursor=[^"]+)" data-testid="catalog-next">`).FindStringSubmatch(page)
	if next == nil {
		t.Fatalf("first catalog page has no link to the next:\n%s", page)
	}
	second := b.do("GET", strings.ReplaceAll(next[1], "&amp;", "&"), nil)
	page = second.Body.String()
	if got := types.FindAllStringSubmatch(page, -1); second.Code != 200 || len(got) != 1 || got[0][1] != fmt.Sprintf("t.%03d", n-1) || strings.Contains(page, "catalog-next") {
		t.Fatalf("second catalog page: %d, %v; want only t.%03d and no further link\n%s", second.Code, got, n-1, page)
	}
	form := b.do("GET", "/ui/endpoints/new", nil).Body.String()
	if !strings.Contains(form, fmt.Sprintf("t.%03d</a>", n-1)) {
		t.Fatalf("the endpoint form's hint lacks the last type t.%03d:\n%s", n-1, form)
	}
	// So many types are folded away, not spread over the form.
	if !strings.Contains(form, fmt.Sprintf("<summary>Catalog: %d event types</summary>", n)) {
		t.Fatalf("the endpoint form's hint of %d types is not folded:\n%s", n, form)
	}
}
