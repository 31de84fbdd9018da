package app_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// waitForwarded waits (≤ 10 s) until dest has n requests and returns them.
func waitForwarded(t *testing.T, dest *receiver, n int) []received {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(dest.got()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := dest.got()
	if len(got) < n {
		t.Fatalf("destination got %d requests, want %d", len(got), n)
	}
	return got
}

// TestInboundForwardKeepsContentType: a forward carries the provider's
// Content-Type as sent (a form-encoded GitHub or Slack body, a charset),
// not application/json (docs/inbound.md, "What the destination receives").
func TestInboundForwardKeepsContentType(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "s3cret-github-form-0123"
	src := h.createSource(map[string]any{"name": "gh-form", "scheme": "github", "secrets": []string{secret}, "destination_url": dest.URL})
	for i, ct := range []string{"application/x-www-form-urlencoded", "application/json; charset=utf-8"} {
		body := []byte(fmt.Sprintf("payload=%%7B%%22n%%22%%3A%d%%7D", i))
		hdr := providerRequest(t, "github", secret, time.Now(), body, fmt.Sprintf("form-%d", i))
		hdr.Set("Content-Type", ct)
		if st, resp := h.ingest(src.IngestPath, hdr, body); st != 200 {
			t.Fatalf("%s: %d %s", ct, st, resp)
		}
		got := waitForwarded(t, dest, i+1)
		if r := got[i]; r.Header.Get("Content-Type") != ct || !bytes.Equal(r.Body, body) {
			t.Errorf("forwarded with Content-Type %q (body %q); want %q and the same bytes", r.Header.Get("Content-Type"), r.Body, ct)
		}
	}
}

// TestInboundSvixHeadersRenamed: a Standard Webhooks source fed svix-*
// headers forwards them as X-Original-Svix-*, so a receiver's Svix library
// (which reads svix-* before webhook-*) checks Herald's own signature.
func TestInboundSvixHeadersRenamed(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	src := h.createSource(map[string]any{"name": "svix", "scheme": "standard-webhooks", "secrets": []string{secret}, "destination_url": dest.URL})
	body := []byte(`{"type":"invoice.paid","data":{"n":1}}`)
	hdr := http.Header{"Content-Type": {"application/json"}}
	for k, v := range providerRequest(t, "standard-webhooks", secret, time.Now(), body, "msg_svix_1") {
		hdr[strings.Replace(k, "Webhook-", "Svix-", 1)] = v
	}
	if st, resp := h.ingest(src.IngestPath, hdr, body); st != 200 {
		t.Fatalf("svix-* request: %d %s", st, resp)
	}
	r := waitForwarded(t, dest, 1)[0]
	for _, k := range []string{"Svix-Id", "Svix-Timestamp", "Svix-Signature"} {
		if r.Header.Get(k) != "" || r.Header.Get("X-Original-"+k) == "" {
			t.Errorf("%s forwarded as %q, X-Original-%s %q; want only the latter", k, r.Header.Get(k), k, r.Header.Get("X-Original-"+k))
		}
	}
	var sec struct{ Secret string }
	h.call("GET", "/v1/endpoints/"+src.EndpointID+"/secret", nil, &sec)
	if err := (&webhook.Verifier{Secrets: []string{sec.Secret}}).Verify(r.Header, r.Body); err != nil {
		t.Errorf("the forward does not verify with the forwarding endpoint's secret: %v", err)
	}
}

// TestInboundManyHeaders: past 64 provider headers the same ones are
// forwarded every time, the provider's signature, id and event headers
// and Content-Type among them; a header longer than 4 KiB is left out.
func TestInboundManyHeaders(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "s3cret-github-many-0123"
	src := h.createSource(map[string]any{"name": "gh-many", "scheme": "github", "secrets": []string{secret}, "destination_url": dest.URL})
	var sets [][]string
	for i := range 3 {
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		hdr := providerRequest(t, "github", secret, time.Now(), body, fmt.Sprintf("many-%d", i))
		for j := range 80 {
			hdr.Set(fmt.Sprintf("X-Custom-%02d", j), "v")
		}
		hdr.Set("X-Aaa-Long", strings.Repeat("x", 5000))
		if st, resp := h.ingest(src.IngestPath, hdr, body); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, resp)
		}
		r := waitForwarded(t, dest, i+1)[i]
		for _, k := range []string{"Content-Type", "X-Hub-Signature-256", "X-Github-Delivery", "X-Github-Event"} {
			if r.Header.Get(k) == "" {
				t.Errorf("request %d: %s was not forwarded", i, k)
			}
		}
		if r.Header.Get("X-Aaa-Long") != "" {
			t.Errorf("request %d: a 5,000-byte header was forwarded", i)
		}
		var custom []string
		for k := range r.Header {
			if strings.HasPrefix(k, "X-Custom-") {
				custom = append(custom, k)
			}
		}
		slices.Sort(custom)
		sets = append(sets, custom)
	}
	// Content-Type and 3 GitHub headers first, then 60 of the 80 by name.
	if len(sets[0]) != 64-4 || sets[0][0] != "X-Custom-00" {
		t.Errorf("forwarded %d custom headers starting %v; want 60 from X-Custom-00", len(sets[0]), sets[0][:min(3, len(sets[0]))])
	}
	for i := 1; i < len(sets); i++ {
		if !slices.Equal(sets[i], sets[0]) {
			t.Errorf("request %d forwarded other headers than request 0", i)
		}
	}
}

// TestInboundHeraldReplayNewEventID: a Herald source dedupes on the signed
// body's id, so a captured request replayed within the tolerance under
// another (unsigned) X-Event-Id is a duplicate, not a second forward.
func TestInboundHeraldReplayNewEventID(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	src := h.createSource(map[string]any{"name": "hrld", "scheme": "herald", "secrets": []string{secret}, "destination_url": dest.URL})
	body := []byte(`{"id":"evt_upstream_1","type":"a.b","data":{}}`)
	now := time.Now()
	for i, id := range []string{"evt_upstream_1", "evt_forged_2", ""} {
		hdr := providerRequest(t, "herald", secret, now, body, id)
		if id == "" {
			hdr.Del("X-Event-Id")
		}
		st, resp := h.ingest(src.IngestPath, hdr, body)
		if want := `"duplicate":true`; st != 200 || (i > 0) != strings.Contains(resp, want) {
			t.Errorf("request %d (X-Event-Id %q): %d %s; want 200, duplicate %v", i, id, st, resp, i > 0)
		}
	}
	waitForwarded(t, dest, 1)
	time.Sleep(300 * time.Millisecond) // a second forward would arrive here
	if n := len(dest.got()); n != 1 {
		t.Errorf("destination got %d forwards, want 1", n)
	}
}

// TestInboundSlackURLVerification: Slack's signed url_verification
// request is answered with its challenge (Slack, "Events API") and neither
// stored nor forwarded; an unsigned one is refused.
func TestInboundSlackURLVerification(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "s3cret-slack-signing-0123"
	src := h.createSource(map[string]any{"name": "slack", "scheme": "slack", "secrets": []string{secret}, "destination_url": dest.URL})
	body := []byte(`{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	if st, resp := h.ingest(src.IngestPath, http.Header{"Content-Type": {"application/json"}}, body); st != 401 {
		t.Errorf("unsigned url_verification: %d %s; want 401", st, resp)
	}
	st, resp := h.ingest(src.IngestPath, providerRequest(t, "slack", secret, time.Now(), body, ""), body)
	var out map[string]string
	if st != 200 || json.Unmarshal([]byte(resp), &out) != nil || out["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" || len(out) != 1 {
		t.Fatalf("url_verification: %d %s; want 200 {\"challenge\": …}", st, resp)
	}
	var ds struct{ Data []any }
	h.call("GET", "/v1/endpoints/"+src.EndpointID+"/deliveries", nil, &ds)
	if len(ds.Data) != 0 || len(dest.got()) != 0 {
		t.Errorf("the handshake was stored (%d deliveries) or forwarded (%d)", len(ds.Data), len(dest.got()))
	}
}

// TestSourceHeaderDedupeRuleRefused: a header: dedupe rule on a scheme
// deduped on its signed body (no signed timestamp) would be accepted and
// never used: it is refused, naming the rule; on a scheme with a signed
// timestamp it is kept.
func TestSourceHeaderDedupeRuleRefused(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	for _, sch := range []string{"github", "shopify"} {
		st, raw := h.call("POST", "/v1/sources", map[string]any{"name": sch, "scheme": sch, "secrets": []string{"s3cret-0123456789ab"},
			"destination_url": "http://127.0.0.1:9/", "dedupe": "header:X-Request-Id"}, nil)
		if st != 422 || !strings.Contains(string(raw), "signs no timestamp") {
			t.Errorf("%s with a header: rule: %d %s; want 422 naming the rule", sch, st, raw)
		}
	}
	if st, raw := h.call("POST", "/v1/sources", map[string]any{"name": "st", "scheme": "stripe", "secrets": []string{"whsec_0123456789abcdef"},
		"destination_url": "http://127.0.0.1:9/", "dedupe": "header:X-Request-Id"}, nil); st != 201 {
		t.Errorf("stripe with a header: rule: %d %s; want 201", st, raw)
	}
	var list struct{ Data []any }
	h.call("GET", "/v1/sources", nil, &list)
	if len(list.Data) != 1 {
		t.Errorf("%d sources stored, want 1 (the refused ones store nothing)", len(list.Data))
	}
}

// TestInboundGzipMembers: a gzip body of several members (RFC 1952 §2.2)
// is verified and forwarded whole; bytes after the last member that are
// not gzip are refused with 400.
func TestInboundGzipMembers(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "s3cret-github-gzip-members"
	src := h.createSource(map[string]any{"name": "gz", "scheme": "github", "secrets": []string{secret}, "destination_url": dest.URL})
	member := func(b string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write([]byte(b))
		zw.Close()
		return buf.Bytes()
	}
	body := []byte(`{"action":"opened","number":9}`)
	hdr := providerRequest(t, "github", secret, time.Now(), body, "gzm-1")
	hdr.Set("Content-Encoding", "gzip")
	if st, resp := h.ingest(src.IngestPath, hdr, append(member(`{"action":"opened",`), member(`"number":9}`)...)); st != 200 {
		t.Fatalf("two gzip members: %d %s; want 200", st, resp)
	}
	if r := waitForwarded(t, dest, 1)[0]; !bytes.Equal(r.Body, body) {
		t.Errorf("forwarded %q, want the whole inflated body %q", r.Body, body)
	}
	body2 := []byte(`{"action":"closed","number":9}`)
	hdr = providerRequest(t, "github", secret, time.Now(), body2, "gzm-2")
	hdr.Set("Content-Encoding", "gzip")
	if st, resp := h.ingest(src.IngestPath, hdr, append(member(string(body2)), "trailing garbage"...)); st != 400 {
		t.Errorf("gzip followed by garbage: %d %s; want 400", st, resp)
	}
}

// TestInboundForwardThroughMiddleware: a forward (the provider's body,
// with no "id" or the provider's own) passes webhook.Middleware keyed on
// Herald's webhook-id; Herald's retry after an answer lost on the way back
// is a duplicate; and a copy of a forward resent without the webhook-*
// headers, under a new X-Event-Id or the body's "id", is refused 400
// (X-Signature signs no id): the handler ran once (docs/inbound.md).
func TestInboundForwardThroughMiddleware(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scheme, secret string
		body           []byte
	}{
		{"github", "s3cret-github-mw-0123", []byte(`{"action":"opened","number":4}`)},
		{"stripe", "whsec_stripe_mw_0123456789", []byte(`{"id":"evt_1StripeMw","object":"event","type":"invoice.paid"}`)},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			t.Parallel()
			h := startHerald(t, nil)
			type answered struct {
				status int
				body   string
				header http.Header
			}
			answers := make(chan answered, 8)
			var calls atomic.Int32
			var ids sync.Map
			var inner atomic.Pointer[http.Handler]
			var delivered atomic.Bool // the first answer is lost on the way back to Herald
			dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rec := httptest.NewRecorder()
				(*inner.Load()).ServeHTTP(rec, r)
				answers <- answered{rec.Code, rec.Body.String(), r.Header.Clone()}
				if !delivered.Swap(true) {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
			}))
			t.Cleanup(dest.Close)
			src := h.createSource(map[string]any{"name": "mw-" + tc.scheme, "scheme": tc.scheme, "secrets": []string{tc.secret}, "destination_url": dest.URL})
			var sec struct{ Secret string }
			h.call("GET", "/v1/endpoints/"+src.EndpointID+"/secret", nil, &sec)
			mw := webhook.Middleware(webhook.HandlerConfig{Verifier: &webhook.Verifier{Secrets: []string{sec.Secret}}, Store: webhook.NewMemoryStore()})(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					calls.Add(1)
					ids.Store(webhook.EventID(r), true)
				}))
			inner.Store(&mw)

			st, resp := h.ingest(src.IngestPath, providerRequest(t, tc.scheme, tc.secret, time.Now(), tc.body, "mw-1"), tc.body)
			var ack struct{ ID string }
			if st != 200 || json.Unmarshal([]byte(resp), &ack) != nil || ack.ID == "" {
				t.Fatalf("ingest: %d %s", st, resp)
			}
			next := func() answered {
				select {
				case a := <-answers:
					return a
				case <-time.After(10 * time.Second):
					t.Fatal("no forward within 10 s")
					return answered{}
				}
			}
			if a := next(); a.status != 200 || a.body != "" {
				t.Fatalf("first attempt: middleware answered %d %q, want the handler's 200", a.status, a.body)
			}
			retry := next()
			if retry.status != 200 || retry.body != `{"duplicate":true}` {
				t.Fatalf("Herald's retry: %d %s, want 200 duplicate", retry.status, retry.body)
			}
			if _, ok := ids.Load(ack.ID); !ok || calls.Load() != 1 {
				t.Fatalf("handler called %d times; want once, with EventID %s", calls.Load(), ack.ID)
			}

			for _, id := range []string{"evt_copy_1", "evt_copy_2", "evt_1StripeMw", ack.ID} {
				copied := retry.header.Clone()
				for _, k := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
					copied.Del(k)
				}
				copied.Set("X-Event-Id", id)
				req, _ := http.NewRequest("POST", dest.URL, bytes.NewReader(tc.body))
				req.Header = copied
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				a := next()
				if a.status != 400 || a.body != `{"error":"event id not signed"}` || calls.Load() != 1 {
					t.Fatalf("copy without webhook-*, X-Event-Id %s: %d %s, handler called %d times; want 400 event id not signed, once", id, a.status, a.body, calls.Load())
				}
			}
		})
	}
}

// TestSourceShowsForwardingEndpointState: a 410 from a source's
// destination disables its forwarding endpoint (docs/contract.md); the
// source's own answer says so (endpoint_state, endpoint_state_reason), in
// GET /v1/sources/{id} and the list, and enabling the endpoint shows again.
func TestSourceShowsForwardingEndpointState(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 410, 200)
	const secret = "s3cret-github-gone-0123"
	src := h.createSource(map[string]any{"name": "gone", "scheme": "github", "secrets": []string{secret}, "destination_url": dest.URL})
	type sourceState struct {
		ID                  string
		EndpointState       string `json:"endpoint_state"`
		EndpointStateReason string `json:"endpoint_state_reason"`
	}
	get := func() sourceState {
		var s sourceState
		if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, &s); st != 200 {
			t.Fatalf("GET source: %d %s", st, raw)
		}
		return s
	}
	if s := get(); s.EndpointState != "enabled" || s.EndpointStateReason != "" {
		t.Fatalf("new source: endpoint_state %q, reason %q; want enabled, none", s.EndpointState, s.EndpointStateReason)
	}
	body := []byte(`{"action":"deleted"}`)
	if st, resp := h.ingest(src.IngestPath, providerRequest(t, "github", secret, time.Now(), body, "gone-1"), body); st != 200 {
		t.Fatalf("ingest: %d %s", st, resp)
	}
	waitForwarded(t, dest, 1)
	deadline := time.Now().Add(10 * time.Second)
	s := get()
	for s.EndpointState != "disabled" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the attempt's result is written after the answer
		s = get()
	}
	if s.EndpointState != "disabled" || !strings.Contains(s.EndpointStateReason, "410") {
		t.Fatalf("after a 410: endpoint_state %q, reason %q; want disabled, naming the 410", s.EndpointState, s.EndpointStateReason)
	}
	var list struct{ Data []sourceState }
	h.call("GET", "/v1/sources", nil, &list)
	if len(list.Data) != 1 || list.Data[0].EndpointState != "disabled" {
		t.Fatalf("list: %+v; want the source with endpoint_state disabled", list.Data)
	}
	if st, raw := h.call("POST", "/v1/endpoints/"+src.EndpointID+"/enable", nil, nil); st != 200 {
		t.Fatalf("enable: %d %s", st, raw)
	}
	if s := get(); s.EndpointState != "enabled" {
		t.Fatalf("after enable: endpoint_state %q, want enabled", s.EndpointState)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage
			}
		}
	}
	if json.Unmarshal(h.mustCall("GET", "/openapi.json", "", 200), &doc) != nil {
		t.Fatal("openapi.json does not decode")
	}
	for _, f := range []string{"endpoint_state", "endpoint_state_reason"} {
		if _, ok := doc.Components.Schemas["SourceOut"].Properties[f]; !ok {
			t.Errorf("openapi.json's SourceOut lacks %s", f)
		}
	}
}
