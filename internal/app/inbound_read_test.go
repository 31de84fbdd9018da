package app_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestInboundEventReadShowsBodyAndHeaders: GET /v1/events/{id} of an event
// received through the gateway shows what was received: the provider's
// whole body as data when it is JSON (a Stripe body's own "data" member is
// not taken for it), and the provider's headers as stored and forwarded.
// A body that is not JSON (form-encoded) shows data null, its headers
// still shown; an event published through the API shows no headers.
func TestInboundEventReadShowsBodyAndHeaders(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	type eventOut struct {
		ID      string            `json:"id"`
		Type    string            `json:"type"`
		Data    json.RawMessage   `json:"data"`
		Headers map[string]string `json:"headers"`
	}
	read := func(ack string) (eventOut, string) {
		t.Helper()
		var a struct{ ID string }
		if err := json.Unmarshal([]byte(ack), &a); err != nil || a.ID == "" {
			t.Fatalf("ack %s: %v", ack, err)
		}
		var e eventOut
		st, raw := h.call("GET", "/v1/events/"+a.ID, nil, &e)
		if st != 200 {
			t.Fatalf("GET /v1/events/%s: %d %s", a.ID, st, raw)
		}
		return e, string(raw)
	}

	const stripeSecret = "whsec_stripe_read_0123"
	stripe := h.createSource(map[string]any{"name": "stripe", "scheme": "stripe", "secrets": []string{stripeSecret}, "destination_url": dest.URL})
	body := []byte(`{"id":"evt_1Stripe","type":"invoice.paid","data":{"object":{"id":"in_1","amount_due":1200}}}`)
	hdr := providerRequest(t, "stripe", stripeSecret, time.Now(), body, "")
	hdr.Set("X-Provider-Trace", "abc")
	st, ack := h.ingest(stripe.IngestPath, hdr, body)
	if st != 200 {
		t.Fatalf("stripe ingest: %d %s", st, ack)
	}
	e, raw := read(ack)
	var compact bytes.Buffer
	_ = json.Compact(&compact, e.Data)
	if compact.String() != string(body) {
		t.Errorf("stripe event data %s; want the body received, %s\n%s", e.Data, body, raw)
	}
	if e.Headers["Stripe-Signature"] != hdr.Get("Stripe-Signature") || e.Headers["Content-Type"] != "application/json" || e.Headers["X-Provider-Trace"] != "abc" {
		t.Errorf("stripe event headers %v; want the provider's as stored\n%s", e.Headers, raw)
	}

	const ghSecret = "s3cret-github-read-0123"
	gh := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{ghSecret}, "destination_url": dest.URL})
	form := []byte(`payload=%7B%22zen%22%3A%22hi%22%7D`)
	hdr = providerRequest(t, "github", ghSecret, time.Now(), form, "gh-form-1")
	hdr.Set("Content-Type", "application/x-www-form-urlencoded")
	if st, ack = h.ingest(gh.IngestPath, hdr, form); st != 200 {
		t.Fatalf("github ingest: %d %s", st, ack)
	}
	e, raw = read(ack)
	if string(e.Data) != "null" || e.Headers["Content-Type"] != "application/x-www-form-urlencoded" || e.Headers["X-Github-Delivery"] != "gh-form-1" {
		t.Errorf("form-encoded event: data %s, headers %v; want data null and the provider's headers\n%s", e.Data, e.Headers, raw)
	}

	pub := h.publish("acme", "file.created", `{"file_id":"f_1"}`)
	var plain map[string]json.RawMessage
	h.call("GET", "/v1/events/"+pub.ID, nil, &plain)
	if _, ok := plain["headers"]; ok || string(plain["data"]) != `{"file_id":"f_1"}` {
		t.Errorf("published event: %v; want its data and no headers", plain)
	}
	if strings.Contains(raw, "Authorization") {
		t.Errorf("an inbound event shows a credential header: %s", raw)
	}
}

// TestInboundEventReadShowsJSONAsReceived: a received JSON body with
// duplicate members or numbers beyond float64 is shown as received (only
// insignificant whitespace removed): both members, in order, and every
// digit; a body starting with a UTF-8 byte order mark, which a parser may
// ignore (RFC 8259 §8.1), is read without it: shown as data without the
// mark, and named after its type.
func TestInboundEventReadShowsJSONAsReceived(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const sec = "whsec_stripe_asis_0123"
	src := h.createSource(map[string]any{"name": "stripe", "scheme": "stripe", "secrets": []string{sec}, "destination_url": dest.URL})
	for body, want := range map[string]string{
		`{"id":"evt_d1", "type":"a.b","n":1,"n":2}`:                                                              `"type":"stripe.a.b","occurred_at"`,
		`{"id":"evt_n1","type":"a.b","big":123456789012345678901234567890,"f":1e400,"p":0.10000000000000000001}`: `"type":"stripe.a.b"`,
		"\xef\xbb\xbf{\"id\":\"evt_b1\",\"type\":\"a.b\"}":                                                       `"type":"stripe.a.b"`,
	} {
		hdr := providerRequest(t, "stripe", sec, time.Now(), []byte(body), "")
		st, ack := h.ingest(src.IngestPath, hdr, []byte(body))
		var a struct{ ID string }
		if err := json.Unmarshal([]byte(ack), &a); st != 200 || err != nil {
			t.Fatalf("ingest %q: %d %s", body, st, ack)
		}
		_, raw := h.call("GET", "/v1/events/"+a.ID, nil, nil)
		wantData := `"data":` + strings.ReplaceAll(body, `, "type"`, `,"type"`)
		if b, ok := strings.CutPrefix(body, "\xef\xbb\xbf"); ok {
			wantData = `"data":` + b
		}
		if !strings.Contains(string(raw), wantData+",") || !strings.Contains(string(raw), want) {
			t.Errorf("body %q: GET shows %s; want %s and %s", body, raw, wantData, want)
		}
	}
}
