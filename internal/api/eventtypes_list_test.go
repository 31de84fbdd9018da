package api_test

import (
	"strings"
	"testing"
)

// TestEventTypesArePaged: GET /v1/event-types answers the catalog a page
// at a time, by name, with the next_cursor of the other lists (absent on
// the last page), to every key; a limit beyond 1,000 is refused naming the
// rule.
func TestEventTypesArePaged(t *testing.T) {
	w := newWorld(t, nil)
	for _, name := range []string{"b.second", "a.first", "c.third"} {
		w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"`+name+`","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
	}
	viewer, _ := w.newKey("viewer", "acme", "")
	type page struct {
		Data []struct {
			Name     string `json:"name"`
			Versions []struct {
				Version int `json:"version"`
			} `json:"versions"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	for _, key := range []string{adminKey, viewer} {
		var names []string
		path := "/v1/event-types?limit=2"
		for pages := 0; ; pages++ {
			if pages == 3 {
				t.Fatalf("more than 2 pages of 2 for 3 types: %v", names)
			}
			var pg page
			w.mustCall(key, "GET", path, "", 200, &pg)
			for _, et := range pg.Data {
				if len(et.Versions) != 1 {
					t.Errorf("%s listed with %d versions; want 1", et.Name, len(et.Versions))
				}
				names = append(names, et.Name)
			}
			if pg.NextCursor == "" {
				break
			}
			path = "/v1/event-types?limit=2&cursor=" + pg.NextCursor
		}
		if got := strings.Join(names, " "); got != "a.first b.second c.third" {
			t.Errorf("pages of 2 listed %q; want a.first b.second c.third", got)
		}
	}
	if code, raw := w.call(adminKey, "GET", "/v1/event-types?limit=1001", ""); code != 422 || !strings.Contains(string(raw), "query.limit") {
		t.Errorf("limit=1001: %d %s; want 422 naming query.limit", code, raw)
	}
}
