package app_test

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/webhook"
)

type sourceResp struct {
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
	IngestPath string `json:"ingest_path"`
}

func (h *herald) createSource(body map[string]any) sourceResp {
	h.t.Helper()
	var s sourceResp
	if st, raw := h.call("POST", "/v1/sources", body, &s); st != 201 {
		h.t.Fatalf("create source: %d %s", st, raw)
	}
	return s
}

// ingest POSTs a provider request to the gateway (no API key).
func (h *herald) ingest(path string, hdr http.Header, body []byte) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.base+path, bytes.NewReader(body))
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func hmacB64(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// providerRequest signs body the way each provider does (their published
// rules; the interop module checks the real libraries).
func providerRequest(t *testing.T, scheme, secret string, ts time.Time, body []byte, id string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	unix := strconv.FormatInt(ts.Unix(), 10)
	switch scheme {
	case "stripe":
		h.Set("Stripe-Signature", "t="+unix+",v1="+hmacHex(secret, unix+"."+string(body)))
	case "herald":
		h.Set("X-Signature", "t="+unix+",v1="+webhook.SignHerald(secret, ts.Unix(), body))
		h.Set("X-Event-Id", id)
	case "github":
		h.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, string(body)))
		h.Set("X-GitHub-Delivery", id)
		h.Set("X-GitHub-Event", "push")
	case "shopify":
		h.Set("X-Shopify-Hmac-Sha256", hmacB64(secret, string(body)))
		h.Set("X-Shopify-Webhook-Id", id)
		h.Set("X-Shopify-Topic", "orders/create")
	case "slack":
		h.Set("X-Slack-Request-Timestamp", unix)
		h.Set("X-Slack-Signature", "v0="+hmacHex(secret, "v0:"+unix+":"+string(body)))
	case "standard-webhooks":
		sig, err := webhook.SignStandard(secret, id, ts.Unix(), body)
		if err != nil {
			t.Fatal(err)
		}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", unix)
		h.Set("Webhook-Signature", "v1,"+sig)
	}
	return h
}

// TestInboundSchemes: each scheme's correctly signed request is accepted
// (200) and forwarded with the original bytes, the provider's headers and
// Herald's own signature; tampered bodies, wrong secrets, old and future
// timestamps, missing and malformed headers get 401 and store nothing.
func TestInboundSchemes(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const sw = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, sch := range []string{"stripe", "herald", "github", "shopify", "slack", "standard-webhooks"} {
		t.Run(sch, func(t *testing.T) {
			secret := "shh-" + sch + "-secret"
			if sch == "standard-webhooks" || sch == "herald" {
				secret = sw
			}
			old := "old-secret-xyz-0123"
			if sch == "standard-webhooks" || sch == "herald" {
				old = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
			}
			var src sourceResp
			if st, raw := h.call("POST", "/v1/sources", map[string]any{"name": sch, "scheme": sch, "secrets": []string{old, secret}, "destination_url": dest.URL + "/" + sch}, &src); st != 201 {
				t.Fatalf("create source: %d %s", st, raw)
			}
			now := time.Now()
			mk := func(n int) []byte {
				// A trailing newline, escaped slashes and non-ASCII text:
				// the bytes are never re-serialised.
				return []byte(fmt.Sprintf("{\"id\":\"evt_%s_%d\",\"type\":\"thing.happened\",\"url\":\"https:\\/\\/x.example\\/a\",\"name\":\"Zoë 🚀\",\"event_id\":\"Ev%d\"}\n", sch, n, n))
			}
			body := mk(1)
			id := sch + "-delivery-1"
			wrongSecret := "not-the-secret"
			if sch == "standard-webhooks" {
				wrongSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
			}
			bad := []struct {
				name string
				hdr  http.Header
				body []byte
			}{
				{"tampered body", providerRequest(t, sch, secret, now, body, id), append(bytes.TrimSuffix(body, []byte("\n")), ' ')},
				{"wrong secret", providerRequest(t, sch, wrongSecret, now, body, id), body},
				{"no signature", http.Header{"Content-Type": {"application/json"}}, body},
			}
			if sch == "stripe" || sch == "slack" || sch == "standard-webhooks" || sch == "herald" {
				bad = append(bad,
					struct {
						name string
						hdr  http.Header
						body []byte
					}{"old timestamp", providerRequest(t, sch, secret, now.Add(-10*time.Minute), body, id), body},
					struct {
						name string
						hdr  http.Header
						body []byte
					}{"future timestamp", providerRequest(t, sch, secret, now.Add(10*time.Minute), body, id), body})
			}
			malformed := providerRequest(t, sch, secret, now, body, id)
			for k := range malformed {
				if k != "Content-Type" && !strings.Contains(k, "Id") && !strings.Contains(k, "Delivery") && !strings.Contains(k, "Topic") && !strings.Contains(k, "Event") {
					malformed.Set(k, "garbage=,,=")
				}
			}
			bad = append(bad, struct {
				name string
				hdr  http.Header
				body []byte
			}{"malformed header", malformed, body})
			for _, b := range bad {
				st, resp := h.ingest(src.IngestPath, b.hdr, b.body)
				if st != 401 || strings.Contains(resp, "secret") {
					t.Errorf("%s: %d %s, want 401 without detail", b.name, st, resp)
				}
			}
			var evs struct{ Data []any }
			h.call("GET", "/v1/endpoints/"+src.EndpointID+"/deliveries", nil, &evs) // one delivery per stored inbound event (its tenant cannot be named)
			if len(evs.Data) != 0 {
				t.Fatalf("refused requests stored %d events", len(evs.Data))
			}
			st, resp := h.ingest(src.IngestPath, providerRequest(t, sch, secret, now, body, id), body)
			if st != 200 || !strings.Contains(resp, `"received":true`) {
				t.Fatalf("valid request: %d %s", st, resp)
			}
			// Forwarded: same bytes, provider headers, Herald's signature.
			deadline := time.Now().Add(10 * time.Second)
			var got *received
			for got == nil && time.Now().Before(deadline) {
				for _, r := range dest.got() {
					if bytes.Equal(r.Body, body) {
						got = &r
						break
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got == nil {
				t.Fatal("the event was not forwarded to the destination")
			}
			var sec struct{ Secret string }
			h.call("GET", "/v1/endpoints/"+src.EndpointID+"/secret", nil, &sec)
			if err := (&webhook.Verifier{Secrets: []string{sec.Secret}}).VerifyHerald(got.Header.Get("X-Signature"), got.Body); err != nil {
				t.Errorf("forward is not signed by Herald: %v", err)
			}
			for k := range providerRequest(t, sch, secret, now, body, id) {
				if k == "X-Signature" || strings.HasPrefix(k, "Webhook-") {
					k = "X-Original-" + k
				}
				if got.Header.Get(k) == "" {
					t.Errorf("provider header %s was not forwarded", k)
				}
			}
		})
	}
}

// TestInboundDedupeConcurrent: 50 concurrent copies of one event → every
// answer 2xx, exactly one stored and one forwarded.
func TestInboundDedupeConcurrent(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"s3cret-github-0123"}, "destination_url": dest.URL})
	body := []byte(`{"action":"opened","number":7}`)
	hdr := providerRequest(t, "github", "s3cret-github-0123", time.Now(), body, "7f1c-delivery")
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[int]int{}
	received := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, resp := h.ingest(src.IngestPath, hdr, body)
			mu.Lock()
			answers[st]++
			if strings.Contains(resp, `"received":true`) {
				received++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if answers[200] != 50 || received != 1 {
		t.Fatalf("answers %v, %d received; want 50 × 200 with exactly one received", answers, received)
	}
	var evs struct{ Data []any }
	h.call("GET", "/v1/endpoints/"+src.EndpointID+"/deliveries", nil, &evs) // one delivery per stored inbound event (its tenant cannot be named)
	if len(evs.Data) != 1 {
		t.Fatalf("%d events stored, want 1", len(evs.Data))
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(dest.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a second forward would show up here
	if n := len(dest.got()); n != 1 {
		t.Fatalf("destination got %d requests, want 1", n)
	}
}

// TestInboundAckDoesNotWait: with a destination that never answers, the
// provider still gets 200 at once, and the event arrives once the
// destination recovers; a 2 MiB body gets 413.
func TestInboundAckDoesNotWait(t *testing.T) {
	t.Parallel()
	h := startHerald(t, func(c *app.Config) {
		c.AttemptTimeout = 200 * time.Millisecond
		c.RetrySchedule = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	})
	dest := newReceiver(t, 200)
	dest.mu.Lock()
	dest.block = make(chan struct{})
	dest.mu.Unlock()
	src := h.createSource(map[string]any{"name": "sh", "scheme": "shopify", "secrets": []string{"shopify-key-0123456"}, "destination_url": dest.URL})
	body := []byte(`{"id":1}`)
	st, resp := h.ingest(src.IngestPath, providerRequest(t, "shopify", "shopify-key-0123456", time.Now(), body, "wh-1"), body)
	if st != 200 {
		t.Fatalf("ack with a hanging destination: %d %s", st, resp)
	}
	// The first attempt hangs and times out; once a retry has arrived too,
	// the destination recovers.
	deadline := time.Now().Add(10 * time.Second)
	for len(dest.got()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(dest.got()) < 2 {
		t.Fatalf("no retry reached the hanging destination")
	}
	dest.mu.Lock()
	close(dest.block)
	dest.block = nil
	dest.mu.Unlock()
	for time.Now().Before(deadline) {
		var ds struct{ Data []deliveryResp }
		h.call("GET", "/v1/endpoints/"+src.EndpointID+"/deliveries", nil, &ds)
		if len(ds.Data) == 1 && ds.Data[0].State == "succeeded" && ds.Data[0].Attempts >= 2 {
			goto arrived
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the event never reached the recovered destination")
arrived:
	big := bytes.Repeat([]byte("a"), 2<<20)
	if st, _ := h.ingest(src.IngestPath, providerRequest(t, "shopify", "shopify-key-0123456", time.Now(), big, "wh-2"), big); st != 413 {
		t.Fatalf("2 MiB body: %d, want 413", st)
	}
	if st, _ := h.ingest("/in/src_nope", nil, body); st != 404 {
		t.Fatalf("unknown source: %d, want 404", st)
	}
}

// TestSourcesAPIBadInput: the sources API refuses bad configurations with
// 422 naming the rule.
func TestSourcesAPIBadInput(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	for _, c := range []struct {
		name string
		body string
		want string
	}{
		{"unknown scheme", `{"name":"x","scheme":"carrier-pigeon","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.1/"}`, "scheme"},
		{"no secrets", `{"name":"x","scheme":"github","secrets":[],"destination_url":"http://10.0.0.1/"}`, "secrets"},
		{"bad destination", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"ftp://10.0.0.1/"}`, "destination_url"},
		{"destination userinfo", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://u:p@10.0.0.1/"}`, "userinfo"},
		{"hmac without config", `{"name":"x","scheme":"hmac","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.1/"}`, "hmac"},
		{"bad dedupe", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.1/","dedupe":"cookie:x"}`, "dedupe"},
		{"unknown field", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.1/","colour":1}`, "colour"},
		// A limit is written as the number it is, not 1.6777216e+07, in
		// the field's rule.
		{"body cap too large", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.1/","max_body_bytes":17000000}`, "max_body_bytes must be an integer number of bytes from 1024 (1 KiB: real providers' webhooks do not fit in less) to 16777216 (16 MiB)"},
	} {
		st, raw := h.call("POST", "/v1/sources", c.body, nil)
		if st != 422 || !strings.Contains(string(raw), c.want) {
			t.Errorf("%s: %d %s, want 422 naming %q", c.name, st, raw, c.want)
		}
	}
	var list struct{ Data []any }
	h.call("GET", "/v1/sources", nil, &list)
	if len(list.Data) != 0 {
		t.Fatalf("bad input stored %d sources", len(list.Data))
	}
	// A source's scheme cannot be changed in place: the PATCH says so and
	// changes nothing; the scheme it has is accepted as a no-op.
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"source-secret-0123456789"}, "destination_url": "http://10.0.0.1/"})
	st, raw := h.call("PATCH", "/v1/sources/"+src.ID, `{"scheme":"stripe","name":"renamed"}`, nil)
	if st != 422 || !strings.Contains(string(raw), "scheme cannot be changed (this one is github): create a new source") {
		t.Errorf("PATCH scheme: %d %s, want 422 saying the scheme cannot be changed", st, raw)
	}
	var got struct{ Name, Scheme string }
	if h.call("GET", "/v1/sources/"+src.ID, nil, &got); got.Name != "gh" || got.Scheme != "github" {
		t.Errorf("after the refused PATCH: %+v", got)
	}
	if st, raw := h.call("PATCH", "/v1/sources/"+src.ID, `{"scheme":"github","name":"renamed"}`, &got); st != 200 || got.Name != "renamed" || got.Scheme != "github" {
		t.Errorf("PATCH with the source's own scheme: %d %s, want 200", st, raw)
	}
}

// TestSourceToleranceNeedsATimestamp: a scheme that signs no timestamp
// (github, shopify, hmac without timestamp_header) has no replay window, so
// a source of one is shown with tolerance_seconds 0, not the 300 s default
// it never applies, and a tolerance set on one is refused (422 naming the
// rule) rather than stored and never used. An update that does not set
// tolerance_seconds still goes through.
func TestSourceToleranceNeedsATimestamp(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	const secret = "source-secret-0123456789"
	create := func(body string) (int, string, int) {
		t.Helper()
		var got struct {
			ToleranceSeconds int `json:"tolerance_seconds"`
		}
		st, raw := h.call("POST", "/v1/sources", body, &got)
		return st, string(raw), got.ToleranceSeconds
	}
	for _, c := range []struct{ scheme, hmac string }{
		{"github", ""}, {"shopify", ""}, {"hmac", `,"hmac":{"header":"X-Sig"}`},
	} {
		st, raw, _ := create(`{"name":"x","scheme":"` + c.scheme + `","secrets":["` + secret + `"],"destination_url":"http://10.0.0.1/","tolerance_seconds":60` + c.hmac + `}`)
		if st != 422 || !strings.Contains(raw, `"location":"body.tolerance_seconds"`) || !strings.Contains(raw, "signs no timestamp") {
			t.Errorf("%s with tolerance_seconds 60: %d %s, want 422 naming the field and the rule", c.scheme, st, raw)
		}
		st, raw, tol := create(`{"name":"x","scheme":"` + c.scheme + `","secrets":["` + secret + `"],"destination_url":"http://10.0.0.1/"` + c.hmac + `}`)
		if st != 201 || tol != 0 {
			t.Errorf("%s without tolerance: %d tolerance_seconds %d (%s), want 201 and 0: it has no replay window", c.scheme, st, tol, raw)
		}
	}
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"name":"x","scheme":"stripe","secrets":["` + secret + `"],"destination_url":"http://10.0.0.1/"}`, 300},
		{`{"name":"x","scheme":"slack","secrets":["` + secret + `"],"destination_url":"http://10.0.0.1/","tolerance_seconds":60}`, 60},
		{`{"name":"x","scheme":"hmac","secrets":["` + secret + `"],"destination_url":"http://10.0.0.1/","tolerance_seconds":60,"hmac":{"header":"X-Sig","timestamp_header":"X-Ts","template":"{timestamp}.{body}"}}`, 60},
	} {
		if st, raw, tol := create(c.body); st != 201 || tol != c.want {
			t.Errorf("%s: %d tolerance_seconds %d (%s), want 201 and %d", c.body, st, tol, raw, c.want)
		}
	}
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{secret}, "destination_url": "http://10.0.0.1/"})
	if st, raw := h.call("PATCH", "/v1/sources/"+src.ID, `{"tolerance_seconds":30}`, nil); st != 422 || !strings.Contains(string(raw), "signs no timestamp") {
		t.Errorf("PATCH github tolerance_seconds 30: %d %s, want 422 naming the rule", st, raw)
	}
	if st, raw := h.call("PATCH", "/v1/sources/"+src.ID, `{"name":"renamed"}`, nil); st != 200 {
		t.Errorf("PATCH github name: %d %s, want 200", st, raw)
	}
	// Every setting's refusal names its field as the location, as the
	// schema's own checks do (a form can then point at it).
	for body, loc := range map[string]string{
		`{"dedupe":"bogus"}`:          "body.dedupe",
		`{"dedupe":"header:X-Id"}`:    "body.dedupe", // github: deduped on the signed body
		`{"tolerance_seconds":30}`:    "body.tolerance_seconds",
		`{"max_body_bytes":99999999}`: "body.max_body_bytes",
	} {
		if st, raw := h.call("PATCH", "/v1/sources/"+src.ID, body, nil); st != 422 || !strings.Contains(string(raw), `"location":"`+loc+`"`) {
			t.Errorf("PATCH %s: %d %s, want 422 at %s", body, st, raw, loc)
		}
	}
}

// TestInboundGzipBody (issue 13 point 10): a gzip body whose provider
// signed the uncompressed bytes is inflated, verified and forwarded
// inflated (without Content-Encoding); an inflated body over the source's
// cap is 413; an encoding Herald does not support is 415 and stores
// nothing.
func TestInboundGzipBody(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "s3cret-github-gzip-0123"
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{secret}, "destination_url": dest.URL, "max_body_bytes": 4096})
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	body := []byte(`{"action":"opened","number":8}`)
	hdr := providerRequest(t, "github", secret, time.Now(), body, "gz-1")
	hdr.Set("Content-Encoding", "gzip")
	if st, resp := h.ingest(src.IngestPath, hdr, gz(body)); st != 200 || !strings.Contains(resp, `"received":true`) {
		t.Fatalf("gzip body signed uncompressed: %d %s; want 200 received", st, resp)
	}
	for _, c := range []struct {
		name, encoding string
		body           []byte
		want           int
	}{
		{"brotli", "br", body, 415},
		{"gzip twice", "gzip, gzip", gz(gz(body)), 415},
		{"not gzip", "gzip", body, 400},
		{"inflates past the cap", "gzip", gz(bytes.Repeat([]byte(" "), 1<<20)), 413},
	} {
		hdr := providerRequest(t, "github", secret, time.Now(), body, "gz-"+c.name)
		hdr.Set("Content-Encoding", c.encoding)
		if st, resp := h.ingest(src.IngestPath, hdr, c.body); st != c.want {
			t.Errorf("%s: %d %s; want %d", c.name, st, resp, c.want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(dest.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := dest.got()
	if len(got) != 1 {
		t.Fatalf("destination got %d requests, want 1", len(got))
	}
	if string(got[0].Body) != string(body) || got[0].Header.Get("Content-Encoding") != "" {
		t.Errorf("forwarded %q with Content-Encoding %q; want the inflated body without it", got[0].Body, got[0].Header.Get("Content-Encoding"))
	}
	var ds struct{ Data []any }
	h.call("GET", "/v1/endpoints/"+src.EndpointID+"/deliveries", nil, &ds)
	if len(ds.Data) != 1 {
		t.Errorf("%d events stored; want 1 (refused requests store nothing)", len(ds.Data))
	}
	// herald_inbound_requests_total counts each answer by its result
	// (issue 13 point 20: operations.md said it was not emitted).
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	counted := map[string]float64{}
	if f := fams["herald_inbound_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					counted[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	// unreadable is there from the start, at 0 (an alert takes its
	// increase()).
	if want := map[string]float64{"accepted": 1, "unsupported_encoding": 2, "bad_request": 1, "too_large": 1, "unreadable": 0}; !maps.Equal(counted, want) {
		t.Errorf("herald_inbound_requests_total by result = %v, want %v", counted, want)
	}
}

// TestInboundReplayWithNewIDIsDuplicate (issue 13 point 11): for a scheme
// with no signed timestamp (GitHub, Shopify), a captured body replayed
// with a new, unsigned delivery-id header is a duplicate, not a new event;
// a scheme with a replay window (Stripe) keeps its event id.
func TestInboundReplayWithNewIDIsDuplicate(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	for _, sch := range []string{"github", "shopify"} {
		secret := "replay-" + sch + "-secret-0123"
		src := h.createSource(map[string]any{"name": sch, "scheme": sch, "secrets": []string{secret}, "destination_url": dest.URL})
		body := []byte(`{"id":42,"action":"paid"}`)
		if st, resp := h.ingest(src.IngestPath, providerRequest(t, sch, secret, time.Now(), body, "delivery-1"), body); st != 200 || !strings.Contains(resp, `"received":true`) {
			t.Fatalf("%s first: %d %s", sch, st, resp)
		}
		if st, resp := h.ingest(src.IngestPath, providerRequest(t, sch, secret, time.Now(), body, "delivery-forged-2"), body); st != 200 || !strings.Contains(resp, `"duplicate":true`) {
			t.Errorf("%s replay with a new delivery id: %d %s; want a duplicate", sch, st, resp)
		}
		other := []byte(`{"id":43,"action":"paid"}`)
		if st, resp := h.ingest(src.IngestPath, providerRequest(t, sch, secret, time.Now(), other, "delivery-3"), other); st != 200 || !strings.Contains(resp, `"received":true`) {
			t.Errorf("%s another body: %d %s; want received", sch, st, resp)
		}
	}
}

// TestInboundSvixReplayWithEmptyWebhookIDIsDuplicate: a request signed with
// svix-* headers is keyed on its signed svix-id, so the same captured request
// sent again within the tolerance with an empty webhook-id header added is a
// duplicate, not a second event keyed on its body.
func TestInboundSvixReplayWithEmptyWebhookIDIsDuplicate(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	dest := newReceiver(t, 200)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	src := h.createSource(map[string]any{"name": "svix", "scheme": "standard-webhooks", "secrets": []string{secret}, "destination_url": dest.URL})
	body := []byte(`{"type":"user.created","data":{"id":"u_1"}}`)
	now := time.Now()
	sig, err := webhook.SignStandard(secret, "msg_svix_1", now.Unix(), body)
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Svix-Id": {"msg_svix_1"},
		"Svix-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Svix-Signature": {"v1," + sig}}
	if st, resp := h.ingest(src.IngestPath, hdr, body); st != 200 || !strings.Contains(resp, `"received":true`) {
		t.Fatalf("first: %d %s", st, resp)
	}
	replay := hdr.Clone()
	replay["Webhook-Id"] = []string{""}
	if st, resp := h.ingest(src.IngestPath, replay, body); st != 200 || !strings.Contains(resp, `"duplicate":true`) {
		t.Errorf("replay with an empty webhook-id: %d %s; want a duplicate", st, resp)
	}
}
