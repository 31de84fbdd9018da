package api_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
)

// TestCursorsAreBoundToTheirQuery: every list that pages takes its
// next_cursor back only with the query that returned it — the same path,
// credential scope and filters, however spelled (a default written out, a
// tenant key's own tenant named, a time in another offset), with any
// limit. The same list with other filters answers 400 "cursor belongs to a
// different query; start again without it" (before, the position was
// applied to the other query: a page that looked right and was not);
// another list 400 "invalid cursor", as before.
func TestCursorsAreBoundToTheirQuery(t *testing.T) {
	cursorKey := bytes.Repeat([]byte{7}, 32)
	w := newWorld(t, func(c *api.Config) { c.CursorKey = cursorKey })
	// The world has acme and bravo, an endpoint, two events and their dead
	// deliveries each; acme gets a second endpoint and an event that
	// fans out to both (two pending deliveries).
	var ep2, ev struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-receiver.example/second"}`, 201, &ep2)
	w.mustCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.shipped","data":{"n":1}}`, 202, &ev)
	viewer, _ := w.newKey("viewer", "acme", "")
	bravoViewer, _ := w.newKey("viewer", "bravo", "")
	for range 2 {
		w.mustCall(adminKey, "POST", "/v1/portal-sessions", `{"tenant":"acme","role":"viewer","ttl_seconds":600}`, 201, nil)
	}
	for _, name := range []string{"b.second", "a.first", "c.third"} {
		w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"`+name+`","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
	}
	for _, name := range []string{"gh1", "gh2"} {
		w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"`+name+`","scheme":"github","secrets":["s3cret-provider-0123"],"destination_url":"https://ci.example/in"}`, 201, nil)
	}

	type variant struct {
		key, path string
		want      string // "ok", "query" (another query of the list) or "list" (another list)
	}
	ok := func(path string) variant { return variant{adminKey, path, "ok"} }
	query := func(path string) variant { return variant{adminKey, path, "query"} }
	list := func(path string) variant { return variant{adminKey, path, "list"} }
	as := func(key string, v variant) variant { v.key = key; return v }
	epA := "/v1/endpoints/" + w.epA + "/deliveries"
	for _, c := range []struct {
		name     string
		key      string
		first    string // a query whose first page (limit=1) has a next_cursor
		variants []variant
	}{
		{"events", adminKey, "/v1/events?tenant=acme&type=order.placed", []variant{
			ok("/v1/events?type=order.placed&tenant=acme&limit=7"),
			query("/v1/events?tenant=acme"),
			query("/v1/events?tenant=acme&type=order.shipped"),
			query("/v1/events?tenant=bravo&type=order.placed"),
			query("/v1/events?type=order.placed"),
			list("/v1/endpoints?tenant=acme"),
			list("/v1/deliveries?tenant=acme"),
		}},
		{"events of a tenant key", viewer, "/v1/events", []variant{
			as(viewer, ok("/v1/events?tenant=acme")), // its own tenant, named
			as(viewer, query("/v1/events?type=order.placed")),
			query("/v1/events"), // every tenant's, for an admin
			query("/v1/events?tenant=acme"),
		}},
		{"endpoints", adminKey, "/v1/endpoints?tenant=acme", []variant{
			ok("/v1/endpoints?tenant=acme&kind=tenant&limit=2"), // the default kind, written out
			query("/v1/endpoints?tenant=acme&kind=all"),
			query("/v1/endpoints?tenant=bravo"),
			query("/v1/endpoints"),
			list("/v1/sources"),
		}},
		{"deliveries", adminKey, "/v1/deliveries?tenant=acme&state=dead", []variant{
			ok("/v1/deliveries?state=dead&tenant=acme&limit=100"),
			query("/v1/deliveries?tenant=acme"),
			query("/v1/deliveries?tenant=acme&state=pending"),
			query("/v1/deliveries?tenant=bravo&state=dead"),
			query("/v1/deliveries?tenant=acme&state=dead&event_type=order.placed"),
			query("/v1/deliveries?tenant=acme&state=dead&since=2000-01-01T00:00:00Z"),
			query(epA + "?state=dead"), // the same list name, another route
			query("/v1/events/" + ev.ID + "/deliveries"),
			list("/v1/events?tenant=acme"),
		}},
		{"deliveries since", adminKey, "/v1/deliveries?since=2000-01-01T00:00:00Z", []variant{
			ok("/v1/deliveries?since=" + url.QueryEscape("2000-01-01T01:00:00+01:00")), // the same instant
			query("/v1/deliveries?since=2000-01-01T00:00:01Z"),
			query("/v1/deliveries"),
		}},
		{"endpoint deliveries", adminKey, epA, []variant{
			ok(epA + "?limit=3"),
			query(epA + "?state=dead"),
			query(epA + "?event_type=order.placed"),
			query("/v1/endpoints/" + ep2.ID + "/deliveries"),
			query("/v1/deliveries?tenant=acme"),
			as(viewer, query(epA)), // another credential's scope
		}},
		{"event deliveries", adminKey, "/v1/events/" + ev.ID + "/deliveries", []variant{
			ok("/v1/events/" + ev.ID + "/deliveries?tenant=acme"), // the same event, its tenant named
			query("/v1/events/" + w.evA + "/deliveries"),
			query("/v1/endpoints/" + ep2.ID + "/deliveries"),
		}},
		{"api keys", adminKey, "/v1/api-keys", []variant{ok("/v1/api-keys?limit=2"), list("/v1/portal-sessions"), list("/v1/sources")}},
		{"portal sessions", adminKey, "/v1/portal-sessions", []variant{ok("/v1/portal-sessions?limit=2"), list("/v1/api-keys")}},
		{"sources", adminKey, "/v1/sources", []variant{ok("/v1/sources?limit=2"), list("/v1/endpoints")}},
		// The catalog is the same for every key: its cursor is bound to the
		// query alone, so any credential continues another's page (a
		// viewer following an admin's "More event types").
		{"event types", adminKey, "/v1/event-types", []variant{ok("/v1/event-types?limit=2"), list("/v1/sources"), list("/v1/api-keys"),
			as(viewer, ok("/v1/event-types")), as(bravoViewer, ok("/v1/event-types?limit=2")), as(viewer, list("/v1/events"))}},
		{"event types of a tenant key", viewer, "/v1/event-types", []variant{
			ok("/v1/event-types"), as(bravoViewer, ok("/v1/event-types")), as(viewer, list("/v1/endpoints")),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var first struct {
				Data       []json.RawMessage `json:"data"`
				NextCursor string            `json:"next_cursor"`
			}
			w.mustCall(c.key, "GET", withParam(c.first, "limit=1"), "", 200, &first)
			if first.NextCursor == "" {
				t.Fatalf("GET %s: no next_cursor", c.first)
			}
			cursor := "cursor=" + url.QueryEscape(first.NextCursor)
			for _, v := range c.variants {
				path := withParam(v.path, cursor)
				code, raw := w.call(v.key, "GET", path, "")
				switch v.want {
				case "ok":
					if code != 200 {
						t.Errorf("GET %s = %d %s, want 200 (the same query)", path, code, raw)
					}
				case "query":
					if code != 400 || !strings.Contains(string(raw), `"detail":"cursor belongs to a different query; start again without it"`) ||
						!strings.Contains(string(raw), `"location":"query.cursor"`) {
						t.Errorf("GET %s = %d %s, want 400 cursor belongs to a different query", path, code, raw)
					}
				case "list":
					if code != 400 || !strings.Contains(string(raw), `"detail":"invalid cursor"`) {
						t.Errorf("GET %s = %d %s, want 400 invalid cursor", path, code, raw)
					}
				}
			}
		})
	}

	// A cursor issued before the binding (the store's cursor alone, sealed
	// with the list's name) still continues its list.
	t.Run("unbound cursor of the previous version", func(t *testing.T) {
		type page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			NextCursor string `json:"next_cursor"`
		}
		var p1, p2, legacy page
		w.mustCall(adminKey, "GET", "/v1/deliveries?tenant=acme&limit=1", "", 200, &p1)
		w.mustCall(adminKey, "GET", "/v1/deliveries?tenant=acme&limit=1&cursor="+url.QueryEscape(p1.NextCursor), "", 200, &p2)
		block, err := aes.NewCipher(cursorKey)
		if err != nil {
			t.Fatal(err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			t.Fatal(err)
		}
		nonce := make([]byte, aead.NonceSize())
		rand.Read(nonce)
		old := base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(p1.Data[0].ID), []byte("deliveries")))
		w.mustCall(adminKey, "GET", "/v1/deliveries?tenant=acme&limit=1&cursor="+old, "", 200, &legacy)
		if len(legacy.Data) != 1 || len(p2.Data) != 1 || legacy.Data[0].ID != p2.Data[0].ID {
			t.Errorf("the unbound cursor's page: %+v, want the bound cursor's %+v", legacy.Data, p2.Data)
		}
		if code, raw := w.call(adminKey, "GET", "/v1/events?cursor="+old, ""); code != 400 || !strings.Contains(string(raw), `"detail":"invalid cursor"`) {
			t.Errorf("the unbound cursor on another list: %d %s, want 400 invalid cursor", code, raw)
		}
	})
}

// withParam adds a query parameter to path.
func withParam(path, param string) string {
	if strings.Contains(path, "?") {
		return path + "&" + param
	}
	return path + "?" + param
}

// TestCursorRefusalNamesTheKey: a cursor continued with a key of another
// tenant (or an admin key for a tenant key's cursor) is refused with a
// rule that says cursors are bound to the API key's tenant as well as to
// the query, so that the reader knows to use the key that made it.
func TestCursorRefusalNamesTheKey(t *testing.T) {
	w := newWorld(t, nil)
	viewer, _ := w.newKey("viewer", "acme", "")
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	w.mustCall(viewer, "GET", "/v1/events?limit=1", "", 200, &page)
	if page.NextCursor == "" {
		t.Fatal("no next_cursor on a page of one of acme's two events")
	}
	code, raw := w.call(adminKey, "GET", "/v1/events?limit=1&cursor="+page.NextCursor, "")
	if code != 400 || !strings.Contains(string(raw), `"detail":"cursor belongs to a different query; start again without it"`) ||
		!strings.Contains(string(raw), "bound to the query") || !strings.Contains(string(raw), "API key") || !strings.Contains(string(raw), "same tenant") {
		t.Errorf("an acme key's cursor with the admin key: %d %s; want 400 saying the cursor is bound to the query and to the API key's tenant", code, raw)
	}
}
