package app_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/store"
)

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location"`
	} `json:"errors"`
}

// TestAPIBadInput: every route answers bad input with the right status and
// an RFC 9457 problem naming the rule, and nothing is stored.
func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 200)
	ep := h.createEndpoint("acme", rcv.URL)
	good := h.publish("acme", "invoice.paid", `{"invoice_id":"in_1"}`)
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"in_r"},"id":"inv-reused"}`, nil); st != 202 {
		t.Fatalf("publish inv-reused: %d %s", st, raw)
	}

	big := `{"tenant":"acme","type":"invoice.paid","data":{"blob":"` + strings.Repeat("x", 70<<10) + `"}}`
	huge := `{"tenant":"acme","type":"invoice.paid","data":{"blob":"` + strings.Repeat("x", 90<<10) + `"}}`
	overMiB := `{"tenant":"acme","type":"invoice.paid","data":{"blob":"` + strings.Repeat("x", 1100<<10) + `"}}`
	bigEndpoint := `{"tenant":"acme","url":"https://example.com/","description":"` + strings.Repeat("x", 65<<10) + `"}`
	cases := []struct {
		name, method, path string
		body               string
		hdr                []string
		status             int
		want               string // substring of detail or an error message/location
	}{
		{"no key", "GET", "/v1/endpoints", "", []string{"Authorization", ""}, 401, "missing API key"},
		{"wrong key", "GET", "/v1/endpoints", "", []string{"Authorization", "Bearer nope"}, 401, "invalid API key"},
		{"not bearer", "GET", "/v1/endpoints", "", []string{"Authorization", "Basic abc"}, 401, "expected Bearer"},
		{"malformed json", "POST", "/v1/endpoints", `{"tenant":`, nil, 400, "malformed JSON"},
		{"missing url", "POST", "/v1/endpoints", `{"tenant":"acme"}`, nil, 422, "url"},
		{"missing tenant", "POST", "/v1/endpoints", `{"url":"https://example.com/"}`, nil, 422, "tenant"},
		{"mistyped url", "POST", "/v1/endpoints", `{"tenant":"acme","url":42}`, nil, 422, "body.url"},
		{"unknown field", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","colour":"red"}`, nil, 422, "colour"},
		{"bad tenant", "POST", "/v1/endpoints", `{"tenant":"a b","url":"https://example.com/"}`, nil, 422, "body.tenant"},
		{"url userinfo", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://user:pw@example.com/"}`, nil, 422, "userinfo"},
		{"url scheme", "POST", "/v1/endpoints", `{"tenant":"acme","url":"ftp://example.com/"}`, nil, 422, "scheme"},
		{"url fragment", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/#x"}`, nil, 422, "fragment"},
		{"url metadata ip", "POST", "/v1/endpoints", `{"tenant":"acme","url":"http://169.254.169.254/latest"}`, nil, 422, "blocked_address"},
		// Sources' destinations may be private, never link-local or
		// metadata (the harness runs in --dev mode: not even then).
		{"source destination metadata ip", "POST", "/v1/sources", `{"name":"m","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"http://169.254.169.254/latest/meta-data/"}`, nil, 422,
			"body.destination_url: url rule blocked_address: 169.254.169.254 is a link-local or cloud metadata address"},
		{"source destination link-local ipv6", "POST", "/v1/sources", `{"name":"m","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"http://[fe80::1]/hook"}`, nil, 422,
			"url rule blocked_address: fe80::1 is a link-local or cloud metadata address"},
		{"source destination aws ipv6 metadata", "POST", "/v1/sources", `{"name":"m","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"http://[fd00:ec2::254]/latest/meta-data/"}`, nil, 422,
			"url rule blocked_address: fd00:ec2::254 is a link-local or cloud metadata address"},
		{"bad event type filter", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","event_types":["file..x"]}`, nil, 422, "body.event_types[0]"},
		{"reserved header", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","headers":{"X-Signature":"x"}}`, nil, 422, "set by Herald"},
		{"header crlf", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","headers":{"X-A":"a\r\nb"}}`, nil, 422, "CR, LF"},
		{"negative rate", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","rate_limit_per_second":-1}`, nil, 422, "rate_limit_per_second"},
		{"unknown endpoint", "GET", "/v1/endpoints/ep_nope", "", nil, 404, "endpoint ep_nope not found"},
		{"unknown endpoint patch", "PATCH", "/v1/endpoints/ep_nope", `{"description":"x"}`, nil, 404, "not found"},
		{"patch bad url", "PATCH", "/v1/endpoints/" + ep.ID, `{"url":"https://example.com/a b"}`, nil, 422, "whitespace"},
		{"patch unknown field", "PATCH", "/v1/endpoints/" + ep.ID, `{"tenant":"other"}`, nil, 422, "a tenant cannot be changed"},
		{"viewer key with an empty tenant", "POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":""}`, nil, 422, "role viewer needs a tenant"},
		{"key with an empty name", "POST", "/v1/api-keys", `{"name":"","role":"admin"}`, nil, 422, "body.name: expected length >= 1"},
		{"unknown endpoint delete", "DELETE", "/v1/endpoints/ep_nope", "", nil, 404, "not found"},
		{"unknown endpoint secret", "GET", "/v1/endpoints/ep_nope/secret", "", nil, 404, "not found"},
		{"bad state filter", "GET", "/v1/endpoints/" + ep.ID + "/deliveries?state=lost", "", nil, 422, "state"},
		{"bad limit", "GET", "/v1/endpoints?limit=0", "", nil, 422, "limit"},
		{"bad cursor", "GET", "/v1/endpoints?cursor=!!!", "", nil, 400, "cursor"},
		{"publish malformed", "POST", "/v1/events", `not json`, nil, 400, "malformed JSON"},
		{"publish no type", "POST", "/v1/events", `{"tenant":"acme","data":{}}`, nil, 422, "type"},
		{"publish bad type", "POST", "/v1/events", `{"tenant":"acme","type":"a..b","data":{}}`, nil, 422, "body.type"},
		{"publish data not object", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":[1]}`, nil, 422, "JSON object"},
		{"publish no data", "POST", "/v1/events", `{"tenant":"acme","type":"a.b"}`, nil, 422, "data"},
		{"publish occurred_at before year 0 in UTC", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{},"occurred_at":"0000-01-01T00:30:00+01:00"}`, nil, 422, "0000–9999"},
		{"publish occurred_at after year 9999 in UTC", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{},"occurred_at":"9999-12-31T23:30:00-01:00"}`, nil, 422, "body.occurred_at"},
		{"publish reserved type", "POST", "/v1/events", `{"tenant":"acme","type":"endpoint.disabled","data":{}}`, nil, 422, "reserved"},
		{"publish reserved type in other case", "POST", "/v1/events", `{"tenant":"acme","type":"Endpoint.disabled","data":{}}`, nil, 422, "reserved"},
		{"publish reserved herald type in capitals", "POST", "/v1/events", `{"tenant":"acme","type":"HERALD.x","data":{}}`, nil, 422, "reserved"},
		{"publish under the delivery. prefix", "POST", "/v1/events", `{"tenant":"acme","type":"delivery.x","data":{}}`, nil, 422, "delivery."},
		{"publish a delivery. look-alike", "POST", "/v1/events", `{"tenant":"acme","type":"Delivery.dead_lettered.v2","data":{}}`, nil, 422, "reserved"},
		{"publish bad id", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{},"id":"has space"}`, nil, 422, "body.id"},
		{"publish unknown field", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{},"extra":1}`, nil, 422, "extra"},
		{"publish too large", "POST", "/v1/events", big, nil, 413, "the limit is 65536 bytes"},
		{"publish body over the route's limit", "POST", "/v1/events", huge, nil, 413, "POST /v1/events takes at most 81920 bytes: the event's delivered body may be at most 65536 bytes (--max-payload-bytes), plus 16 KiB"},
		{"publish body over 1 MiB", "POST", "/v1/events", overMiB, nil, 413, "request body larger than 1048576 bytes; POST /v1/events takes at most 81920 bytes: the event's delivered body"},
		{"endpoint body over the route's limit", "POST", "/v1/endpoints", bigEndpoint, nil, 413, "POST /v1/endpoints takes at most 65536 bytes"},
		{"publish Herald's id", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"other"},"id":"` + good.ID + `"}`, nil, 422, "Herald's own"},
		{"publish Herald's operational id in capitals", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{},"id":"EVT_OP_x"}`, nil, 422, "(in any case) are Herald's own"},
		{"publish a test event's id", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{},"id":"evt_test_06h4kfnxjhypvf17c40098w9ww"}`, nil, 422, "evt_test_ + 26 characters"},
		{"publish a test event's id in capitals", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{},"id":"EVT_TEST_06H4KFNXJHYPVF17C40098W9WW"}`, nil, 422, "(in any case) are Herald's own"},
		{"publish Herald's id in capitals", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{},"id":"EVT_06H4KFNXJHYPVF17C40098W9WW"}`, nil, 422, "(in any case) are Herald's own"},
		{"publish Herald's id in mixed case", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{},"id":"Evt_Op_x"}`, nil, 422, "body.id"},
		{"publish key with a tab", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{}}`, []string{"Idempotency-Key", "a\tb"}, 422, "without control characters"},
		{"publish key not UTF-8", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{}}`, []string{"Idempotency-Key", "a\xffb"}, 422, "header.Idempotency-Key"},
		{"publish id reused", "POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"other"},"id":"inv-reused"}`, nil, 409, "already exists with a different"},
		{"duplicate member", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","tenant":"other"}`, nil, 400, "appears twice"},
		{"invalid utf-8", "POST", "/v1/events", "{\"tenant\":\"acme\",\"type\":\"a.b\",\"data\":{\"k\":\"\xff\xfe\"}}", nil, 400, "UTF-8"},
		{"byte-order mark", "POST", "/v1/events", "\xef\xbb\xbf{}", nil, 400, "byte-order mark"},
		{"number out of range", "POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{"n":1e400}}`, nil, 422, "body.data.n: number 1e400 is out of range"},
		{"header DEL", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","headers":{"X-U":"a\u007fb"}}`, nil, 422, "control characters"},
		{"header case duplicate", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","headers":{"X-A":"1","x-a":"2"}}`, nil, 422, "case-insensitive"},
		// [unreadable] is what the API shows for a value that does not
		// open: stored as a value it would look like one (new-user review).
		{"header value [unreadable]", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","headers":{"X-L":"[unreadable]"}}`, nil, 422, "reserved"},
		{"header value [unreadable] padded", "PATCH", "/v1/endpoints/" + ep.ID, `{"headers":{"X-L":" [unreadable]\t"}}`, nil, 422, "body.headers.X-L"},
		// No id or name is anything but text: on PostgreSQL these answered
		// 503 "the store is unavailable" (SQLite 404 or an empty list).
		{"event id not UTF-8", "GET", "/v1/events/%FF?tenant=acme", "", nil, 422, "path.id"},
		{"event id with a NUL", "GET", "/v1/events/a%00b/deliveries?tenant=acme", "", nil, 422, "UTF-8 text without NUL"},
		{"endpoint id not UTF-8", "GET", "/v1/endpoints/%FF", "", nil, 422, "path.id"},
		{"type filter not UTF-8", "GET", "/v1/events?type=%FF", "", nil, 422, "query.type"},
		{"event_type filter with a NUL", "GET", "/v1/deliveries?event_type=a%00b", "", nil, 422, "query.event_type"},
		// PostgreSQL refuses a NUL in text: these answered 503 there.
		{"endpoint description with a NUL", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/","description":"a\u0000b"}`, nil, 422, "no NUL characters"},
		{"endpoint description patched with a NUL", "PATCH", "/v1/endpoints/" + ep.ID, `{"description":"a\u0000b"}`, nil, 422, "body.description"},
		{"event type description with a NUL", "POST", "/v1/event-types", `{"name":"nul.x","description":"a\u0000b","versions":[{"version":1,"schema":{"type":"object"}}]}`, nil, 422, "no NUL characters"},
		{"repeated tenant query", "GET", "/v1/endpoints?tenant=globex&tenant=acme", "", nil, 422, "query parameter tenant given 2 times"},
		{"repeated type query", "GET", "/v1/events?type=a&type=b", "", nil, 422, "query.type"},
		{"bad tenant query", "GET", "/v1/endpoints?tenant=a%20b", "", nil, 422, "1–128 letters, digits, _ . : or -"},
		{"bad tenant in a publish", "POST", "/v1/events", `{"tenant":"a b","type":"a.b","data":{}}`, nil, 422, "body.tenant: expected string to be 1–128 letters, digits, _ . : or -"},
		{"bad tenant query (events)", "GET", "/v1/events?tenant=a%20b", "", nil, 422, "tenant"},
		{"bad type filter (events)", "GET", "/v1/events?type=bad%20type!", "", nil, 422, "query.type"},
		{"bad event_type filter (deliveries)", "GET", "/v1/deliveries?event_type=a..b", "", nil, 422, "segments of letters, digits"},
		{"bad event_type filter (an endpoint's deliveries)", "GET", "/v1/endpoints/" + ep.ID + "/deliveries?event_type=x%20y", "", nil, 422, "query.event_type"},
		{"bad tenant query (deliveries)", "GET", "/v1/deliveries?tenant=a%20b", "", nil, 422, "tenant"},
		{"bad tenant query (dead letters)", "GET", "/v1/dead-letters?tenant=a%20b", "", nil, 422, "tenant"},
		{"bad tenant query (event)", "GET", "/v1/events/evt_x?tenant=a%20b", "", nil, 422, "tenant"},
		{"unknown route", "GET", "/v2/things", "", nil, 404, "no route"},
		{"unknown event", "GET", "/v1/events/evt_nope", "", nil, 404, "not found"},
		{"unknown event deliveries", "GET", "/v1/events/evt_nope/deliveries", "", nil, 404, "not found"},
		{"unknown delivery", "GET", "/v1/deliveries/dlv_nope", "", nil, 404, "not found"},
		{"unknown delivery attempts", "GET", "/v1/deliveries/dlv_nope/attempts", "", nil, 404, "not found"},
	}
	// Producers' events only: the housekeeper publishes endpoint.created
	// for the endpoint above whenever its next round runs (an operational
	// event, store.IsOperational), which may be during the cases; an
	// endpoint created by bad input would show in countEndpoints.
	countEvents := func() int {
		pg, err := h.m.Store().ListEvents(context.Background(), store.ListEventsParams{ListParams: store.ListParams{Limit: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range pg.Data {
			if !store.IsOperational(e.Type) {
				n++
			}
		}
		return n
	}
	countEndpoints := func() int {
		pg, err := h.m.Store().ListEndpoints(context.Background(), store.ListEndpointsParams{ListParams: store.ListParams{Limit: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		return len(pg.Data)
	}
	events0, endpoints0 := countEvents(), countEndpoints()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			st, raw := h.call(c.method, c.path, body, nil, c.hdr...)
			if st != c.status {
				t.Fatalf("status = %d, want %d; body %s", st, c.status, raw)
			}
			var p problem
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("body is not a problem document: %s", raw)
			}
			if p.Status != c.status || p.Title == "" {
				t.Fatalf("problem = %+v, want status %d with a title", p, c.status)
			}
			all := p.Detail
			for _, e := range p.Errors {
				all += " | " + e.Location + ": " + e.Message
			}
			if !strings.Contains(all, c.want) {
				t.Fatalf("problem %q does not name %q", all, c.want)
			}
		})
	}
	// The content type of a problem is application/problem+json.
	req, _ := http.NewRequest("GET", h.base+"/v1/endpoints/ep_nope", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	if e, n := countEvents(), countEndpoints(); e != events0 || n != endpoints0 {
		t.Fatalf("bad input changed the store: events %d→%d, endpoints %d→%d", events0, e, endpoints0, n)
	}
}

// TestPublishRepeatedIdempotencyKey: two Idempotency-Key headers answer
// 422 naming the header, and nothing is stored; before, the first was used
// and the second ignored, so a retry sending only the second published
// the event again.
func TestPublishRepeatedIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	req, err := http.NewRequest("POST", h.base+"/v1/events", strings.NewReader(`{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"in_1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Idempotency-Key", "k-1")
	req.Header.Add("Idempotency-Key", "k-2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 422 || !strings.Contains(string(raw), "header.Idempotency-Key") || !strings.Contains(string(raw), "given 2 times") {
		t.Fatalf("two keys: %d %s, want 422 naming the header", resp.StatusCode, raw)
	}
	if st, raw := h.call("GET", "/v1/events?tenant=acme", nil, nil); st != 200 || !strings.Contains(string(raw), `"data":[]`) {
		t.Fatalf("events after the refusal: %d %s, want none", st, raw)
	}
	// One key (even one a proxy made of two, joined by a comma) is a key.
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"in_1"}}`, nil, "Idempotency-Key", "k-1, k-2"); st != 202 {
		t.Fatalf("one key: %d %s", st, raw)
	}
}

// TestPublishIdempotency: the same Idempotency-Key or id again answers 200
// with the original event and adds no delivery.
func TestPublishIdempotency(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 200)
	h.createEndpoint("acme", rcv.URL)
	body := `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"in_1"}}`
	var first, again publishResp
	if st, raw := h.call("POST", "/v1/events", body, &first, "Idempotency-Key", "k-1"); st != 202 {
		t.Fatalf("first publish: %d %s", st, raw)
	}
	if st, raw := h.call("POST", "/v1/events", body, &again, "Idempotency-Key", "k-1"); st != 200 {
		t.Fatalf("second publish: %d %s, want 200", st, raw)
	}
	if again.ID != first.ID || !again.Duplicate || again.Deliveries != 1 {
		t.Fatalf("second publish = %+v, want the original %s marked duplicate", again, first.ID)
	}
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"other"}}`, nil, "Idempotency-Key", "k-1"); st != 409 {
		t.Fatalf("key reused with other data: %d %s, want 409", st, raw)
	}
	// A client-chosen id.
	withID := `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"in_2"},"id":"order-42"}`
	var a, b publishResp
	if st, raw := h.call("POST", "/v1/events", withID, &a); st != 202 || a.ID != "order-42" {
		t.Fatalf("publish with id: %d %s", st, raw)
	}
	if st, raw := h.call("POST", "/v1/events", withID, &b); st != 200 || b.ID != "order-42" || !b.Duplicate {
		t.Fatalf("publish with the same id: %d %s, want 200 duplicate", st, raw)
	}
	if n := len(h.eventDeliveries(first.ID)); n != 1 {
		t.Fatalf("event %s has %d deliveries, want 1", first.ID, n)
	}
	// A producer-chosen id is unique per tenant: an admin names the tenant.
	var ds struct{ Data []deliveryResp }
	if st, raw := h.call("GET", "/v1/events/order-42/deliveries?tenant=acme", nil, &ds); st != 200 || len(ds.Data) != 1 {
		t.Fatalf("event order-42 of acme: %d %s, want 1 delivery", st, raw)
	}
}

// TestEndpointLifecycle: create, read, list by tenant with pagination,
// update, read secret, delete.
func TestEndpointLifecycle(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	var ids []string
	for range 3 {
		ids = append(ids, h.createEndpoint("acme", "https://example.com/hook").ID)
	}
	h.createEndpoint("globex", "https://example.com/other")
	var page1, page2 struct {
		Data       []endpointResp `json:"data"`
		NextCursor string         `json:"next_cursor"`
	}
	h.call("GET", "/v1/endpoints?tenant=acme&limit=2", nil, &page1)
	if len(page1.Data) != 2 || page1.NextCursor == "" {
		t.Fatalf("page 1 = %+v", page1)
	}
	h.call("GET", "/v1/endpoints?tenant=acme&limit=2&cursor="+page1.NextCursor, nil, &page2)
	if len(page2.Data) != 1 || page2.NextCursor != "" {
		t.Fatalf("page 2 = %+v", page2)
	}
	seen := map[string]bool{}
	for _, e := range append(page1.Data, page2.Data...) {
		seen[e.ID] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("endpoint %s missing from the tenant's list", id)
		}
	}
	var upd endpointResp
	if st, raw := h.call("PATCH", "/v1/endpoints/"+ids[0], `{"url":"https://example.org/new","description":"moved"}`, &upd); st != 200 || upd.URL != "https://example.org/new" {
		t.Fatalf("patch: %d %s", st, raw)
	}
	var sec struct{ Secret string }
	if st, _ := h.call("GET", "/v1/endpoints/"+ids[0]+"/secret", nil, &sec); st != 200 || !strings.HasPrefix(sec.Secret, "whsec_") {
		t.Fatalf("secret = %q", sec.Secret)
	}
	if st, raw := h.call("DELETE", "/v1/endpoints/"+ids[0], nil, nil); st != 204 {
		t.Fatalf("delete: %d %s", st, raw)
	}
	if st, _ := h.call("GET", "/v1/endpoints/"+ids[0], nil, nil); st != 404 {
		t.Fatalf("get after delete: %d, want 404", st)
	}
}

// TestOperationalRoutes: health, readiness, OpenAPI and the contract need no
// key.
func TestOperationalRoutes(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json", "/contract"} {
		resp, err := http.Get(h.base + p)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("%s: %d %v", p, resp.StatusCode, err)
		}
		if p == "/contract" {
			r, _ := v["retries"].(map[string]any)
			if r["schedule"] != "20ms,20ms,20ms" || r["max_attempts"] != float64(4) {
				t.Errorf("contract retries = %v, want the running schedule 20ms,20ms,20ms and 4 attempts", r)
			}
			// Issue 13, point 2: the contract says how the breaker
			// stretches the schedule, with the running values.
			cb, _ := v["circuit_breaker"].(string)
			for _, want := range []string{"after 1000 consecutive" /* the harness's --breaker-threshold */, "opens for 30s", "without consuming attempts", "lower bounds", "one attempt per 30s"} {
				if !strings.Contains(cb, want) {
					t.Errorf("contract circuit_breaker = %q, want it to say %q", cb, want)
				}
			}
		}
		if p == "/openapi.json" {
			paths, _ := v["paths"].(map[string]any)
			for _, want := range []string{"/v1/endpoints", "/v1/events", "/v1/deliveries/{id}/attempts"} {
				if _, ok := paths[want]; !ok {
					t.Errorf("openapi.json lacks %s", want)
				}
			}
		}
	}
}

// TestWebUI: the served binary routes GET / and /ui/ to the console's
// sign-in page (no session yet), serves its embedded assets and /docs
// without any external reference, and leaves /v1/ to the API. The console's
// own behaviour is tested in internal/console and in the browser tests
// (internal/console/e2e).
func TestWebUI(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	resp, err := http.Get(h.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/ui/sign-in" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / ended at %s: %d %s", resp.Request.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(b), `action="/ui/sign-in"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatal("the sign-in page or its Content-Security-Policy is missing")
	}
	for _, p := range []string{"/ui/static/console.css", "/ui/static/console.js", "/docs"} {
		r, err := http.Get(h.base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || strings.Contains(string(body), "://cdn") || strings.Contains(string(body), "unpkg.com") {
			t.Fatalf("%s: %d", p, r.StatusCode)
		}
	}
	r, _ := http.Get(h.base + "/v1/endpoints")
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/v1/endpoints without a key: %d", r.StatusCode)
	}
}

// TestContractDocsSayHowTheBreakerStretchesRetries (issue 13, point 2):
// docs/contract.md and the README tell receivers that an open circuit
// turns the schedule's delays into lower bounds.
func TestContractDocsSayHowTheBreakerStretchesRetries(t *testing.T) {
	for _, f := range []string{"../../docs/contract.md", "../../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"--breaker-cooldown", "lower bounds"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not say %q about the circuit breaker and the retry schedule", f, want)
			}
		}
	}
}

// TestListCursorsAreSealedAndBoundToTheirList: next_cursor reveals nothing
// (the events list pages by a sequence shared by every tenant), works on
// the list that made it — also after a restart — and is refused (400
// "invalid cursor") on another list or when altered.
func TestListCursorsAreSealedAndBoundToTheirList(t *testing.T) {
	t.Parallel()
	db, key := testDB(t)
	same := func(c *app.Config) { c.DB, c.EncryptionKey = db, key }
	h := startHerald(t, same)
	var ids []string
	for range 3 {
		ids = append(ids, h.publish("acme", "invoice.paid", `{"invoice_id":"in_1"}`).ID)
	}
	type page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	var p1 page
	if code, raw := h.call("GET", "/v1/events?tenant=acme&limit=1", nil, &p1); code != 200 || p1.NextCursor == "" {
		t.Fatalf("page 1: %d %s", code, raw)
	}
	plain, err := base64.RawURLEncoding.DecodeString(p1.NextCursor)
	if err != nil {
		t.Fatalf("next_cursor %q is not base64url: %v", p1.NextCursor, err)
	}
	if _, err := strconv.Atoi(string(plain)); err == nil || len(plain) < 28 {
		t.Fatalf("next_cursor decodes to %q: the sequence is readable", plain)
	}
	var again page
	h.call("GET", "/v1/events?tenant=acme&limit=1", nil, &again)
	if again.NextCursor == p1.NextCursor {
		t.Errorf("two cursors for the same page are equal (%q): a cursor must not be a function of the position", p1.NextCursor)
	}
	var p2 page
	if code, raw := h.call("GET", "/v1/events?tenant=acme&limit=1&cursor="+p1.NextCursor, nil, &p2); code != 200 || len(p2.Data) != 1 || p2.Data[0].ID != ids[1] {
		t.Fatalf("page 2: %d %s, want %s", code, raw, ids[1])
	}
	altered := []byte(p1.NextCursor)
	altered[len(altered)/2] ^= 1
	for _, path := range []string{
		"/v1/endpoints?cursor=" + p1.NextCursor,                                  // another list
		"/v1/deliveries?cursor=" + p1.NextCursor,                                 // another list
		"/v1/events?cursor=" + string(altered),                                   // altered
		"/v1/events?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("2")), // forged (the old form)
	} {
		if code, raw := h.call("GET", path, nil, nil); code != 400 || !strings.Contains(string(raw), `"detail":"invalid cursor"`) {
			t.Errorf("GET %s = %d %s, want 400 invalid cursor", path, code, raw)
		}
	}
	h.stop()
	h2 := startHerald(t, same)
	var p2b page
	if code, raw := h2.call("GET", "/v1/events?tenant=acme&limit=1&cursor="+p1.NextCursor, nil, &p2b); code != 200 || len(p2b.Data) != 1 || p2b.Data[0].ID != ids[1] {
		t.Fatalf("page 2 after a restart: %d %s, want %s", code, raw, ids[1])
	}
}

// TestContractNamesTheSecretCap: rotations with an overlap keep at most
// store.MaxSecrets secrets signing (the oldest is dropped before its
// overlap ends), and GET /contract says so: a receiver that still holds
// only the oldest secret learns there it can stop verifying early.
func TestContractNamesTheSecretCap(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	ep := h.createEndpoint("acme", "http://127.0.0.1:9/hook")
	for range store.MaxSecrets {
		if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"overlap_seconds":3600}`, nil); st != 200 {
			t.Fatalf("rotate: %d %s", st, raw)
		}
	}
	var list struct{ Data []any }
	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID+"/secrets", nil, &list); st != 200 || len(list.Data) != store.MaxSecrets {
		t.Fatalf("secrets after %d rotations: %d %s, want %d", store.MaxSecrets, st, raw, store.MaxSecrets)
	}
	var c struct{ Signature string }
	if st, raw := h.call("GET", "/contract", nil, &c); st != 200 {
		t.Fatalf("contract: %d %s", st, raw)
	}
	if want := fmt.Sprintf("at most %d secrets sign at once", store.MaxSecrets); !strings.Contains(c.Signature, want) {
		t.Errorf("contract signature = %q, want it to say %q", c.Signature, want)
	}
}

// TestContractNamesEmbeddedIPv4AndGuardReadings: /contract's egress rules
// say that NAT64 addresses (64:ff9b::/96, 64:ff9b:1::/48) are judged by
// the IPv4 address they embed, and its payload says which readings of a
// string the personal-data guard applies (percent-encoded, entity and
// full-width forms), unless the guard is off.
func TestContractNamesEmbeddedIPv4AndGuardReadings(t *testing.T) {
	var c struct {
		Payload      string `json:"payload"`
		EndpointURLs string `json:"endpoint_urls"`
	}
	h := startHerald(t, nil)
	st, raw := h.call("GET", "/contract", nil, &c)
	if st != 200 {
		t.Fatalf("GET /contract: %d %s", st, raw)
	}
	for _, want := range []string{"64:ff9b::/96", "64:ff9b:1::/48", "judged by the IPv4 address they embed", "::ffff:0:0/96", "2002::/16"} {
		if !strings.Contains(c.EndpointURLs, want) {
			t.Errorf("endpoint_urls does not say %q: %s", want, c.EndpointURLs)
		}
	}
	for _, want := range []string{"%40", "%2540", "&#64;", "&#x40;", "&commat;", "U+FF20", "U+FE6B", "NFKC", "RFC 3986", "Public Suffix List", "logo@2x.png", "U+200B", "U+00AD", "Cf"} {
		if !strings.Contains(c.Payload, want) {
			t.Errorf("payload does not say %q: %s", want, c.Payload)
		}
	}
	if p := app.Contract(app.Config{PersonalData: "off"}).Payload; strings.Contains(p, "%40") {
		t.Errorf("guard off, the payload still describes its readings: %s", p)
	}
}

// TestContractEndpointURLsSchemeMatchesTheSettings: endpoint_urls states
// the schemes the node accepts without contradicting itself: "https
// only" by default; https and http with --allow-http; https and http with
// loopback destinations in dev mode. It read "http allowed by the
// operator. https only; …" with --allow-http (and "DEV MODE: http … allowed.
// https only; …" in dev mode).
func TestContractEndpointURLsSchemeMatchesTheSettings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       app.Config
		want, not []string
	}{
		{"default", app.Config{}, []string{"https only;"}, []string{"http allowed", "http://"}},
		{"--allow-http", app.Config{AllowHTTP: true}, []string{"https or http (http allowed by the operator: --allow-http);"}, []string{"https only", "loopback destinations allowed"}},
		{"--dev", app.Config{Dev: true}, []string{"DEV MODE", "https or http;", "loopback destinations allowed"}, []string{"https only"}},
	} {
		u := app.Contract(tc.cfg).EndpointURLs
		for _, w := range tc.want {
			if !strings.Contains(u, w) {
				t.Errorf("%s: endpoint_urls does not say %q: %s", tc.name, w, u)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(u, n) {
				t.Errorf("%s: endpoint_urls says %q: %s", tc.name, n, u)
			}
		}
	}
}
