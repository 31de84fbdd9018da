package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/herald-webhooks/herald/internal/tracing"
)

var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"}

// env sets exactly the OTEL_* variables given (the others empty) for the
// rest of the test.
func env(t *testing.T, kv ...string) {
	for _, k := range otelVars {
		t.Setenv(k, "")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestFromEnv(t *testing.T) {
	ctx := context.Background()
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"nothing set", nil},
		{"none", []string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}},
		{"sdk disabled", []string{"OTEL_SDK_DISABLED", "true", "OTEL_TRACES_EXPORTER", "otlp"}},
	} {
		env(t, tc.env...)
		if tp, err := tracing.FromEnv(ctx, "test", nil); tp != nil || err != nil {
			t.Errorf("%s: FromEnv = %v, %v; want tracing off", tc.name, tp, err)
		}
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"OTEL_TRACES_EXPORTER", "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "not-a-url"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TIMEOUT", "abc"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS", "garbage"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		// The exporter would ignore these (no compression, no TLS
		// verification change, system roots instead of the CA file) with
		// at most a line outside Herald's log.
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_COMPRESSION", "brotli"}, "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_INSECURE", "maybe"}, "OTEL_EXPORTER_OTLP_TRACES_INSECURE"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(t.TempDir(), "missing.pem")}, "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", notPEM}, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_CLIENT_KEY", filepath.Join(t.TempDir(), "missing.key")}, "OTEL_EXPORTER_OTLP_CLIENT_KEY"},
		{[]string{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "bogus"}, "OTEL_TRACES_SAMPLER"},
		{[]string{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "abc"}, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		env(t, tc.env...)
		if _, err := tracing.FromEnv(ctx, "test", nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromEnv error = %v, want one naming %s", err, tc.want)
		}
	}

	// An endpoint alone turns OTLP/HTTP on: spans reach the collector.
	var posts atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()
	env(t, "OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	tp, err := tracing.FromEnv(ctx, "test", nil)
	if err != nil || tp == nil {
		t.Fatalf("FromEnv with an endpoint = %v, %v", tp, err)
	}
	_, span := tracing.New(tp).Start(ctx, "x")
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("no OTLP export reached the collector")
	}

	// console: JSON spans on the writer given.
	var out bytes.Buffer
	env(t, "OTEL_TRACES_EXPORTER", "console", "OTEL_SERVICE_NAME", "herald-eu")
	tp, err = tracing.FromEnv(ctx, "test", &out)
	if err != nil || tp == nil {
		t.Fatalf("FromEnv console = %v, %v", tp, err)
	}
	_, span = tracing.New(tp).Start(ctx, "console-span")
	span.End()
	_ = tp.Shutdown(ctx)
	if !strings.Contains(out.String(), `"console-span"`) || !strings.Contains(out.String(), "herald-eu") {
		t.Errorf("console output lacks the span or OTEL_SERVICE_NAME:\n%s", out.String())
	}
}

func TestTraceParent(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := tracing.ParseTraceParent(valid)
	if !ok || !sc.IsSampled() || !sc.IsRemote() || tracing.FormatTraceParent(sc) != valid {
		t.Fatalf("ParseTraceParent(%q) = %v %v, formats back as %q", valid, sc, ok, tracing.FormatTraceParent(sc))
	}
	if sc, ok := tracing.ParseTraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra"); !ok || sc.IsSampled() {
		t.Errorf("a later version with more fields: %v %v; want read by its first four", sc, ok)
	}
	for _, bad := range []string{
		"", "garbage",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent id
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		if _, ok := tracing.ParseTraceParent(bad); ok {
			t.Errorf("ParseTraceParent(%q) accepted", bad)
		}
	}
	if got := tracing.URLWithoutQuery("https://user:pw@hooks.example:8443/in/x?token=s#frag"); got != "https://hooks.example:8443/in/x" {
		t.Errorf("URLWithoutQuery = %q", got)
	}
}

// Records logged under an active span carry its ids; others do not.
func TestLogHandler(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewTextHandler(&out, nil)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	ctx, span := tracing.New(tp).Start(context.Background(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.InfoContext(context.Background(), "outside")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := "trace_id=" + span.SpanContext().TraceID().String() + " span_id=" + span.SpanContext().SpanID().String()
	if len(lines) != 2 || !strings.Contains(lines[0], want) || strings.Contains(lines[1], "trace_id") {
		t.Errorf("log lines:\n%s\nwant the first with %q, the second without ids", out.String(), want)
	}
}

// TestStatusWriterRecordsTheFinalStatus: the status a server span carries
// is the final answer, not an informational 1xx sent before it, and a
// handler that writes without a status answered 200.
func TestStatusWriterRecordsTheFinalStatus(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &tracing.StatusWriter{ResponseWriter: rec}
	w.WriteHeader(http.StatusEarlyHints)
	w.WriteHeader(http.StatusUnauthorized)
	if w.Status != http.StatusUnauthorized {
		t.Errorf("after 103 then 401: Status %d, want 401", w.Status)
	}
	w2 := &tracing.StatusWriter{ResponseWriter: httptest.NewRecorder()}
	_, _ = w2.Write([]byte("ok"))
	if w2.Status != http.StatusOK {
		t.Errorf("a write without a status: Status %d, want 200", w2.Status)
	}
}
