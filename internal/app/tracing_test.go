package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/testutil"
	"github.com/herald-webhooks/herald/internal/tracing"
	"github.com/herald-webhooks/herald/webhook"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTracePublishToAttempts: a publish carrying a traceparent, delivered
// in two attempts (503, then 200), is one trace in an in-memory span
// recorder: the publish's server span (child of the producer's span), its
// store commit, and one client span per attempt (children of the publish
// span) with the HTTP client attributes and Herald's; each request the
// receiver gets carries its attempt span's traceparent, and the signatures
// still verify. The attempt's log record carries the trace and span ids.
func TestTracePublishToAttempts(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logs := &testutil.SyncBuffer{}
	h := startHerald(t, func(c *app.Config) {
		c.TracerProvider = tp
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	rcv := newReceiver(t, 503, 200)
	ep := h.createEndpoint("acme", rcv.URL+"/hook?shard=7")

	const producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const producerSpan = "00f067aa0ba902b7"
	var pub publishResp
	st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.ready","data":{"file_id":"f_1"}}`, &pub,
		"traceparent", "00-"+producerTrace+"-"+producerSpan+"-01")
	if st != http.StatusAccepted {
		t.Fatalf("publish: %d %s", st, raw)
	}
	d := h.waitDelivery(pub.ID, "succeeded", 10*time.Second)
	if d.Attempts != 2 {
		t.Fatalf("delivery = %+v, want 2 attempts", d)
	}

	var publish, commit sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "POST /v1/events":
			publish = s
		case s.Name() == "store publish":
			commit = s
		case s.Name() == "POST" && s.SpanKind() == trace.SpanKindClient:
			attempts = append(attempts, s)
		}
	}
	if publish == nil || commit == nil || len(attempts) != 2 {
		t.Fatalf("spans: publish %v, commit %v, %d attempts; want one, one and two", publish != nil, commit != nil, len(attempts))
	}
	if got := publish.SpanContext().TraceID().String(); got != producerTrace {
		t.Errorf("publish span trace = %s, want the producer's %s", got, producerTrace)
	}
	if got := publish.Parent().SpanID().String(); got != producerSpan || publish.SpanKind() != trace.SpanKindServer {
		t.Errorf("publish span parent = %s kind %v, want %s, server", got, publish.SpanKind(), producerSpan)
	}
	if commit.Parent().SpanID() != publish.SpanContext().SpanID() || commit.SpanContext().TraceID() != publish.SpanContext().TraceID() {
		t.Errorf("store commit span is not the publish span's child")
	}
	if a := attrs(publish); a["herald.tenant"].AsString() != "acme" || a["http.response.status_code"].AsInt64() != 202 {
		t.Errorf("publish span attributes = %v", a)
	}

	reqs := rcv.got()
	if len(reqs) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(reqs))
	}
	v := &webhook.Verifier{Secrets: []string{ep.Secret}}
	for i, s := range attempts {
		a := attrs(s)
		number := a["herald.attempt"].AsInt64()
		if number != int64(i+1) {
			t.Fatalf("attempt span %d has herald.attempt %d (spans end in attempt order)", i, number)
		}
		if s.SpanContext().TraceID().String() != producerTrace || s.Parent().SpanID() != publish.SpanContext().SpanID() {
			t.Errorf("attempt %d: trace %s parent %s, want trace %s parent %s (the publish span)", number,
				s.SpanContext().TraceID(), s.Parent().SpanID(), producerTrace, publish.SpanContext().SpanID())
		}
		want := map[attribute.Key]any{
			"http.request.method":       "POST",
			"url.full":                  rcv.URL + "/hook",
			"herald.endpoint_id":        ep.ID,
			"herald.tenant":             "acme",
			"http.response.status_code": int64(503),
			"error.type":                "503",
		}
		if number == 2 {
			want["http.response.status_code"] = int64(200)
			delete(want, "error.type")
			if _, ok := a["error.type"]; ok {
				t.Errorf("attempt 2: error.type = %v on a success", a["error.type"])
			}
		}
		for k, w := range want {
			if got := a[k].AsInterface(); got != w {
				t.Errorf("attempt %d: %s = %v, want %v", number, k, got, w)
			}
		}
		// The receiver's traceparent: the attempt's own span, in the trace.
		got := reqs[i].Header.Get("Traceparent")
		sc, ok := tracing.ParseTraceParent(got)
		if !ok || sc.TraceID().String() != producerTrace || sc.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("attempt %d: receiver's traceparent %q, want trace %s span %s", number, got, producerTrace, s.SpanContext().SpanID())
		}
		if err := v.VerifyHerald(reqs[i].Header.Get("X-Signature"), reqs[i].Body); err != nil {
			t.Errorf("attempt %d: X-Signature does not verify with a traceparent: %v", number, err)
		}
		if err := v.VerifyStandard(reqs[i].Header.Get("Webhook-Id"), reqs[i].Header.Get("Webhook-Timestamp"), reqs[i].Header.Get("Webhook-Signature"), reqs[i].Body); err != nil {
			t.Errorf("attempt %d: webhook-signature does not verify with a traceparent: %v", number, err)
		}
	}
	// Two attempts of one delivery: one first attempt in the latency
	// histogram (the retry is not a first attempt); the gauges are served.
	_, metricsBody := h.call("GET", "/metrics", nil, nil)
	for _, want := range []string{"herald_first_attempt_latency_seconds_count 1\n", "herald_oldest_due_delivery_age_seconds ", "herald_attempts_in_flight "} {
		if !strings.Contains(string(metricsBody), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The attempt's log record carries its span's ids.
	want := "trace_id=" + producerTrace + " span_id=" + attempts[0].SpanContext().SpanID().String()
	if !strings.Contains(logs.String(), want) {
		t.Errorf("no log record with %q in:\n%s", want, logs.String())
	}
}

// TestTraceParentWithTracingOff: with tracing off, the traceparent a
// publish carried is stored with the event and sent unchanged on every
// attempt, so the receiver still joins the producer's trace.
func TestTraceParentWithTracingOff(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 503, 200)
	h.createEndpoint("acme", rcv.URL+"/hook")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var pub publishResp
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.ready","data":{}}`, &pub, "traceparent", tp); st != http.StatusAccepted {
		t.Fatalf("publish: %d %s", st, raw)
	}
	h.waitDelivery(pub.ID, "succeeded", 10*time.Second)
	for i, r := range rcv.got() {
		if got := r.Header.Get("Traceparent"); got != tp {
			t.Errorf("attempt %d: traceparent %q, want %q", i+1, got, tp)
		}
	}
	// An invalid traceparent is ignored, not refused (W3C Trace Context).
	rcv2 := newReceiver(t, 200)
	h.createEndpoint("other", rcv2.URL+"/hook")
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"other","type":"file.ready","data":{}}`, &pub, "traceparent", "00-zz-1-01"); st != http.StatusAccepted {
		t.Fatalf("publish with an invalid traceparent: %d %s", st, raw)
	}
	h.waitDelivery(pub.ID, "succeeded", 10*time.Second)
	if got := rcv2.got()[0].Header.Get("Traceparent"); got != "" {
		t.Errorf("invalid traceparent forwarded as %q", got)
	}
}

// TestTraceInbound: an inbound request carrying the provider's traceparent
// is one server span (verify, dedupe, store) under the provider's span,
// with its result; the forward's attempt span is its child, and the
// destination receives a traceparent of the same trace. A refused
// signature's log record carries its span's trace and span ids.
func TestTraceInbound(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	logs := &testutil.SyncBuffer{}
	h := startHerald(t, func(c *app.Config) {
		c.TracerProvider = tp
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	dest := newReceiver(t, 200)
	const secret = "shh-github-secret"
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{secret}, "destination_url": dest.URL + "/gh"})
	body := []byte(`{"action":"opened"}`)
	hdr := providerRequest(t, "github", secret, time.Now(), body, "gh-delivery-1")
	const providerTrace = "0af7651916cd43dd8448eb211c80319c"
	hdr.Set("Traceparent", "00-"+providerTrace+"-b7ad6b7169203331-01")
	if st, raw := h.ingest(src.IngestPath, hdr, body); st != http.StatusOK {
		t.Fatalf("ingest: %d %s", st, raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(dest.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := dest.got()
	if len(got) != 1 {
		t.Fatalf("destination got %d requests, want 1", len(got))
	}
	var in, attempt sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); (in == nil || attempt == nil) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, s := range rec.Ended() {
			switch s.Name() {
			case "POST /in/{source_id}":
				in = s
			case "POST":
				attempt = s
			}
		}
	}
	if in == nil || attempt == nil {
		t.Fatalf("spans: inbound %v, attempt %v", in != nil, attempt != nil)
	}
	if in.SpanContext().TraceID().String() != providerTrace || in.Parent().SpanID().String() != "b7ad6b7169203331" || in.SpanKind() != trace.SpanKindServer {
		t.Errorf("inbound span: trace %s parent %s kind %v; want the provider's", in.SpanContext().TraceID(), in.Parent().SpanID(), in.SpanKind())
	}
	if a := attrs(in); a["herald.result"].AsString() != "accepted" || a["herald.source_id"].AsString() != src.ID ||
		a["http.response.status_code"].AsInt64() != http.StatusOK || a["error.type"].AsString() != "" {
		t.Errorf("inbound span attributes = %v", a)
	}
	if attempt.Parent().SpanID() != in.SpanContext().SpanID() || attempt.SpanContext().TraceID().String() != providerTrace {
		t.Errorf("forward attempt span is not the inbound span's child")
	}
	if sc, ok := tracing.ParseTraceParent(got[0].Header.Get("Traceparent")); !ok || sc.SpanID() != attempt.SpanContext().SpanID() {
		t.Errorf("destination's traceparent %q, want the forward attempt's span %s", got[0].Header.Get("Traceparent"), attempt.SpanContext().SpanID())
	}

	// A request whose signature is refused: its span says so, and the
	// gateway's log record of the refusal carries the span's ids.
	const refusedTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
	bad := providerRequest(t, "github", "not-the-secret", time.Now(), body, "gh-delivery-2")
	bad.Set("Traceparent", "00-"+refusedTrace+"-b7ad6b7169203332-01")
	if st, raw := h.ingest(src.IngestPath, bad, body); st != http.StatusUnauthorized {
		t.Fatalf("ingest with a wrong signature: %d %s", st, raw)
	}
	var refused sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); refused == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, s := range rec.Ended() { // the span ends after the answer is written
			if s.Name() == "POST /in/{source_id}" && s.SpanContext().TraceID().String() == refusedTrace {
				refused = s
			}
		}
	}
	if refused == nil || attrs(refused)["herald.result"].AsString() != "unauthorized" {
		t.Fatalf("no inbound span with herald.result unauthorized in the refused request's trace")
	}
	// The status answered, as the HTTP server conventions ask (and as the
	// publish span has it), with error.type = the status of a refusal.
	if a := attrs(refused); a["http.response.status_code"].AsInt64() != http.StatusUnauthorized || a["error.type"].AsString() != "401" {
		t.Errorf("refused inbound span: status %v, error.type %q; want 401, \"401\"", a["http.response.status_code"], a["error.type"].AsString())
	}
	if want := "trace_id=" + refusedTrace + " span_id=" + refused.SpanContext().SpanID().String(); !strings.Contains(logs.String(), want) {
		t.Errorf("no log record with %q in:\n%s", want, logs.String())
	}

	// Another method is answered 405 before any span (one would be named
	// and attributed as a POST).
	const getTrace = "6cf92f3577b34da6a3ce929d0e0e4738"
	req, _ := http.NewRequest(http.MethodGet, h.base+src.IngestPath, nil)
	req.Header.Set("Traceparent", "00-"+getTrace+"-b7ad6b7169203333-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET %s: %d, want 405", src.IngestPath, resp.StatusCode)
	}
	for _, s := range rec.Started() { // a span would have started before the answer
		if s.SpanContext().TraceID().String() == getTrace {
			t.Errorf("a GET of the ingest path made span %q", s.Name())
		}
	}
}

// TestTracingExportErrorsInHeraldsLog: with tracing on from the OTEL_*
// variables and a collector that refuses the spans, the failed export is a
// WARN record of Herald's own log (tracing.LogErrors), not a bare line the
// OpenTelemetry SDK prints with the standard log package, outside Herald's
// log format and without a level. Not parallel: it sets the environment.
func TestTracingExportErrorsInHeraldsLog(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest) // not retried by the exporter: the export fails at once
	}))
	defer collector.Close()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	logs := &testutil.SyncBuffer{}
	h := startHerald(t, func(c *app.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	if !strings.Contains(logs.String(), "tracing on") {
		t.Fatalf("tracing is not on:\n%s", logs.String())
	}
	h.publish("acme", "file.ready", `{}`) // a publish span to export
	h.stop()                              // the stop flushes it: the export fails
	want := `level=WARN msg="tracing: spans not exported"`
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "400") {
		t.Errorf("no record %s naming the collector's 400 in Herald's log:\n%s", want, logs.String())
	}
}

// TestTracePublishRefusedBeforeTheHandler: a publish refused before its
// handler runs — malformed JSON (400), a body failing the schema (422), a
// role that may not publish (403) — still has its POST /v1/events span in
// the producer's trace, with the status and error.type, like a refusal by
// the handler (409); a request without a valid key (401) makes no span.
func TestTracePublishRefusedBeforeTheHandler(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := startHerald(t, func(c *app.Config) { c.TracerProvider = tp })
	var key struct {
		Key string `json:"key"`
	}
	if st, raw := h.call("POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":"acme"}`, &key); st != http.StatusCreated {
		t.Fatalf("create viewer key: %d %s", st, raw)
	}
	h.publish("acme", "file.ready", `{}`) // no traceparent: its own trace
	want := map[string]int{}              // trace id → status
	for i, tc := range []struct {
		key, body string
		status    int
	}{
		{testAPIKey, `{"tenant":"acme","type":`, http.StatusBadRequest},
		{testAPIKey, `{"tenant":"acme","data":{}}`, http.StatusUnprocessableEntity},
		{testAPIKey, `{"tenant":"acme","type":"file.ready","data":{},"extra":1}`, http.StatusUnprocessableEntity},
		{key.Key, `{"tenant":"acme","type":"file.ready","data":{}}`, http.StatusForbidden},
		{testAPIKey, `{"tenant":"acme","type":"file.ready","id":"dup-1","data":{}}`, http.StatusAccepted},
		{testAPIKey, `{"tenant":"acme","type":"file.ready","id":"dup-1","data":{"a":1}}`, http.StatusConflict},
		{"herald_key_unknown", `{"tenant":"acme","type":"file.ready","data":{}}`, http.StatusUnauthorized},
	} {
		trace := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e47%02d", i)
		st, raw := h.callWithKey(tc.key, "POST", "/v1/events", tc.body, nil, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
		if st != tc.status {
			t.Fatalf("publish %s: %d %s, want %d", tc.body, st, raw, tc.status)
		}
		if st != http.StatusUnauthorized {
			want[trace] = st
		}
	}
	got := map[string]int{}
	for _, s := range rec.Ended() {
		if s.Name() != "POST /v1/events" {
			continue
		}
		trace := s.SpanContext().TraceID().String()
		a := attrs(s)
		st := int(a["http.response.status_code"].AsInt64())
		if _, dup := got[trace]; dup {
			t.Errorf("trace %s: two publish spans", trace)
		}
		got[trace] = st
		if s.Parent().SpanID().String() != "00f067aa0ba902b7" && want[trace] != 0 {
			t.Errorf("trace %s: publish span parent %s, want the producer's span", trace, s.Parent().SpanID())
		}
		if wantErr := st >= 400; wantErr != (a["error.type"].AsString() == strconv.Itoa(st)) {
			t.Errorf("trace %s: status %d, error.type %q", trace, st, a["error.type"].AsString())
		}
	}
	for trace, st := range want {
		if got[trace] != st {
			t.Errorf("trace %s: publish span status %d, want a span with %d", trace, got[trace], st)
		}
	}
	if len(got) != len(want)+1 { // + the publish without a traceparent
		t.Errorf("%d publish spans (%v), want %d (none for the 401)", len(got), got, len(want)+1)
	}
}

// TestTraceParentCustomHeaderNeverSent: an endpoint's custom traceparent
// header never reaches the receiver. With tracing off, a publish with a
// traceparent sends the producer's; one without sends none, not the custom
// value (which would put every event in one made-up trace).
func TestTraceParentCustomHeaderNeverSent(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 200, 200)
	const custom = "00-abababababababababababababababab-1111111111111111-01"
	var ep endpointResp
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcv.URL + "/hook",
		"headers": map[string]string{"traceparent": custom}}, &ep); st != http.StatusCreated {
		t.Fatalf("create endpoint: %d %s", st, raw)
	}
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var pub publishResp
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.ready","data":{}}`, &pub, "traceparent", producer); st != http.StatusAccepted {
		t.Fatalf("publish: %d %s", st, raw)
	}
	h.waitDelivery(pub.ID, "succeeded", 10*time.Second)
	pub = h.publish("acme", "file.ready", `{}`)
	h.waitDelivery(pub.ID, "succeeded", 10*time.Second)
	got := rcv.got()
	if len(got) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(got))
	}
	if tp := got[0].Header.Values("Traceparent"); len(tp) != 1 || tp[0] != producer {
		t.Errorf("publish with a traceparent: receiver got %q, want the producer's %q", tp, producer)
	}
	if tp := got[1].Header.Values("Traceparent"); len(tp) != 0 {
		t.Errorf("publish without a traceparent, tracing off: receiver got %q, want none", tp)
	}
}

// TestTraceParentOverLongIgnored: a traceparent header longer than any
// valid one (here a future version's with 600 bytes of extra fields, whose
// first four are valid) is read by its first four fields, never refused
// (docs/contract.md, "Tracing": "an invalid value is ignored, never
// refused").
func TestTraceParentOverLongIgnored(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 200)
	h.createEndpoint("acme", rcv.URL+"/hook")
	const head = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var pub publishResp
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.ready","data":{}}`, &pub,
		"traceparent", head+"-"+strings.Repeat("x", 600)); st != http.StatusAccepted {
		t.Fatalf("publish with a 656-byte traceparent: %d %s, want 202", st, raw)
	}
	h.waitDelivery(pub.ID, "succeeded", 10*time.Second)
	if got, want := rcv.got()[0].Header.Get("Traceparent"), "00"+head[2:]; got != want {
		t.Errorf("receiver got traceparent %q, want %q", got, want)
	}
}
