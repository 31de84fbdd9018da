// Package tracing holds Herald's OpenTelemetry traces: the tracer the API,
// the engine and the inbound gateway start their spans with, W3C Trace
// Context (traceparent) parsing and formatting, the exporter chosen by the
// standard OTEL_* environment variables (FromEnv), and a slog handler that
// adds trace_id and span_id to the records logged under an active span.
//
// Tracing off is a nil *Tracer: callers test On() before building a span's
// attributes, so the hot paths then cost one nil comparison and allocate
// nothing (BenchmarkAttemptTracingOff in internal/delivery).
package tracing

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of Herald's spans.
const ScopeName = "github.com/herald-webhooks/herald"

// Attribute keys of Herald's own span attributes (the HTTP ones follow the
// OpenTelemetry semantic conventions for HTTP clients and servers).
const (
	AttrAttempt    = attribute.Key("herald.attempt")     // attempt number of the delivery, from 1
	AttrEndpointID = attribute.Key("herald.endpoint_id") // ep_…
	AttrTenant     = attribute.Key("herald.tenant")
	AttrEventID    = attribute.Key("herald.event_id")    // the public event id
	AttrEventType  = attribute.Key("herald.event_type")  //
	AttrDeliveryID = attribute.Key("herald.delivery_id") // dlv_…
	AttrSourceID   = attribute.Key("herald.source_id")   // src_… (inbound gateway)
	AttrResult     = attribute.Key("herald.result")      // inbound gateway result (accepted, duplicate, unauthorized…)
	AttrDuplicate  = attribute.Key("herald.duplicate")   // a publish answered with an existing event
	AttrDeliveries = attribute.Key("herald.deliveries")  // deliveries a publish fanned out to
)

// Tracer starts Herald's spans. A nil *Tracer is tracing off.
type Tracer struct {
	tr trace.Tracer
}

// New returns a Tracer over tp, or nil (tracing off) when tp is nil.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tr: tp.Tracer(ScopeName)}
}

// On reports whether spans are recorded (t is not nil).
func (t *Tracer) On() bool { return t != nil }

// Start starts a span as a child of the span in ctx (or of a remote parent
// put there by WithRemoteParent). Callers check On() first.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.tr.Start(ctx, name, opts...)
}

// ParseTraceParent parses a W3C traceparent header value
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>",
// https://www.w3.org/TR/trace-context/#traceparent-header). It answers
// false for anything else, an all-zero trace or parent id, or version ff;
// a later version is read by its first four fields, as the
// recommendation asks. An invalid traceparent is ignored by its callers,
// never refused (Trace Context §4.3).
func ParseTraceParent(s string) (trace.SpanContext, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	var ver [1]byte
	if _, err := hex.Decode(ver[:], []byte(s[0:2])); err != nil || ver[0] == 0xff || strings.ToLower(s[0:2]) != s[0:2] {
		return trace.SpanContext{}, false
	}
	if ver[0] == 0 && len(s) != 55 || ver[0] > 0 && len(s) > 55 && s[55] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return trace.SpanContext{}, false
	}
	_, _ = hex.Decode(tid[:], []byte(s[3:35]))
	_, _ = hex.Decode(sid[:], []byte(s[36:52]))
	_, _ = hex.Decode(flags[:], []byte(s[53:55]))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// FormatTraceParent renders sc as a version-00 traceparent; "" when sc is
// not valid.
func FormatTraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// WithRemoteParent returns ctx with the span context of traceparent as the
// remote parent of the next span started from it; ctx unchanged when
// traceparent is empty or invalid.
func WithRemoteParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	if sc, ok := ParseTraceParent(traceparent); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// URLWithoutQuery is u without its query, fragment and user information
// (the url.full attribute of an attempt: query strings often carry
// tokens).
func URLWithoutQuery(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			return u[:i]
		}
		return u
	}
	p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment, p.User = "", false, "", "", nil
	return p.String()
}

// StatusWriter remembers the status a handler answered, for its server
// span (EndServerSpan).
type StatusWriter struct {
	http.ResponseWriter
	Status int // 0 until the handler writes
}

// WriteHeader records the first final (>= 200) status written: an
// informational 1xx (103 Early Hints) is not the answer.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 && code >= 200 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 when the handler writes without a status.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// EndServerSpan records on a server span the status its request was
// answered with and ends it: http.response.status_code (as the HTTP server
// conventions ask), and for a refusal (400 and above) error.type = the
// status, with an error status from 500 on.
func EndServerSpan(span trace.Span, status int) {
	if status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if status >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// LogErrors sends OpenTelemetry's errors (chiefly a failed export: the
// collector away, refusing the spans or too slow) to l at WARN, as
// msg="tracing: spans not exported" error=…, instead of the SDK's default:
// a bare line of the standard log package, outside Herald's log format and
// without a level. It sets OpenTelemetry's global error handler (the SDK
// has no handler per provider), so it is called only when tracing is on.
func LogErrors(l *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		l.Warn("tracing: spans not exported", "error", err)
	}))
}

// LogHandler wraps h so that every record logged with a context holding a
// valid span context (an active span) carries trace_id and span_id.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}
