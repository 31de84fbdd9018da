package delivery

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// startAttemptSpan starts the client span of one attempt, a child of the
// traceparent stored with the event (the publish's span, or the
// publisher's own), named after the HTTP method as the semantic
// conventions for HTTP client spans ask. Only called with tracing on.
func (e *Engine) startAttemptSpan(ctx context.Context, c store.Claim, number int) (context.Context, trace.Span) {
	ctx = tracing.WithRemoteParent(ctx, c.Event.TraceParent)
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		semconv.HTTPRequestMethodPost,
		semconv.URLFull(tracing.URLWithoutQuery(c.Endpoint.URL)),
		tracing.AttrAttempt.Int(number),
		tracing.AttrEndpointID.String(c.Endpoint.ID),
		tracing.AttrTenant.String(c.Delivery.Tenant),
		tracing.AttrDeliveryID.String(c.Delivery.ID),
		tracing.AttrEventID.String(store.PublicEventID(c.Event.ID)),
		tracing.AttrEventType.String(c.Event.Type),
	)
	if u, err := url.Parse(c.Endpoint.URL); err == nil {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	return e.cfg.Tracer.Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endAttemptSpan records an attempt's result on its span and ends it:
// http.response.status_code when an answer came, error.type = Herald's
// error class of the attempt (timeout, connection, tls, redirect, …; the
// status code for an answer outside 2xx without one, as the conventions
// say), and an error status for anything but a 2xx.
func endAttemptSpan(span trace.Span, res egress.Result, a store.Attempt, success bool) {
	if res.StatusCode != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode))
	}
	if !success {
		class := a.Error
		if class == "" && res.StatusCode != 0 {
			class = strconv.Itoa(res.StatusCode)
		}
		if class == "" {
			class = "_OTHER"
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(class))
		span.SetStatus(codes.Error, class)
	}
	span.End()
}
