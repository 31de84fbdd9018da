package inbound

import (
	"os"
	"strings"
	"testing"
)

// TestDocsNameWhatAForwardDrops: docs/inbound.md, "What the destination
// receives", names every provider header a forward drops (a destination
// that looks for the provider's User-Agent or Forwarded must learn there
// that it never arrives), that a request without a Content-Type is
// forwarded as application/json, and the type of a request that names
// none.
func TestDocsNameWhatAForwardDrops(t *testing.T) {
	page, err := os.ReadFile("../../docs/inbound.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "## What the destination receives")
	if !ok {
		t.Fatal(`docs/inbound.md has no section "What the destination receives"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	lower := strings.ToLower(section)
	for k := range dropHeaders {
		if !strings.Contains(lower, "`"+strings.ToLower(k)+"`") {
			t.Errorf("the section does not name the dropped header `%s`", k)
		}
	}
	if got := eventType("stripe", nil, []byte("not json")); got != "stripe.event" {
		t.Fatalf("eventType without a type: %q", got)
	}
	for _, want := range []string{"`application/json` when the provider sent none", "`<scheme>.event`"} {
		if !strings.Contains(section, want) {
			t.Errorf("the section does not say %s", want)
		}
	}
}
