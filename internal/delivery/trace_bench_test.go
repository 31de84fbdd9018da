package delivery

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
	"github.com/herald-webhooks/herald/webhook"
)

type okSender struct{}

func (okSender) Do(context.Context, egress.Request) egress.Result {
	return egress.Result{StatusCode: 200, Duration: time.Millisecond}
}

// attemptFixture is an engine with the given tracer (nil: tracing off)
// and sender, and a claim of an event carrying traceparent ("" = none),
// attempted once so that the endpoint's signer exists.
func attemptFixture(tb testing.TB, tr *tracing.Tracer, traceparent string, sender Sender) (*Engine, store.Claim) {
	tb.Helper()
	secret, err := webhook.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	e, err := New(Config{Store: wakeStore{}, Sender: sender, Clock: clock.NewFake(t0), Tracer: tr})
	if err != nil {
		tb.Fatal(err)
	}
	c := store.Claim{
		Delivery: store.Delivery{ID: "dlv_1", Tenant: "acme", EventID: "evt_1", EndpointID: "ep_1", Attempts: 1},
		Event: store.Event{ID: "evt_1", Tenant: "acme", Type: "file.ready", Body: []byte(`{"id":"evt_1","type":"file.ready","data":{}}`),
			CreatedAt: t0, TraceParent: traceparent},
		Endpoint: store.Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://receiver.example/hook?shard=1",
			Secrets: []store.Secret{{Value: secret, CreatedAt: t0.Add(-time.Hour)}}},
	}
	e.attempt(context.Background(), c) // the endpoint's signer is made once, then reused
	return e, c
}

// benchmarkAttempt measures one attempt's own work (headers, signature,
// classification, completion) against a sender that answers 200 at once,
// with the given tracer (nil: tracing off).
func benchmarkAttempt(b *testing.B, tr *tracing.Tracer, traceparent string) {
	e, c := attemptFixture(b, tr, traceparent, okSender{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.attempt(ctx, c)
	}
}

// BenchmarkAttemptTracingOff is the attempt with tracing off and an event
// without a traceparent: its allocations are the attempt's own, the same
// as before tracing existed (docs/BENCHMARKS.md, "Tracing").
func BenchmarkAttemptTracingOff(b *testing.B) { benchmarkAttempt(b, nil, "") }

// BenchmarkAttemptTracingOffTraceParent: tracing off, the event carries a
// producer's traceparent, sent on as a header.
func BenchmarkAttemptTracingOffTraceParent(b *testing.B) {
	benchmarkAttempt(b, nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
}

// BenchmarkAttemptTracingOn: a span per attempt, recorded in memory.
func BenchmarkAttemptTracingOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	defer tp.Shutdown(context.Background())
	benchmarkAttempt(b, tracing.New(tp), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
}
