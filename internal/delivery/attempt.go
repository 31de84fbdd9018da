package delivery

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// Headers set on every attempt besides the signature headers (docs/contract.md,
// "Every outbound request").
const (
	HeaderEventID         = "X-Event-Id"
	HeaderEventType       = "X-Event-Type"
	HeaderDeliveryAttempt = "X-Delivery-Attempt"
	// HeaderTraceParent is the W3C Trace Context header of each attempt
	// (https://www.w3.org/TR/trace-context/): not signed, like the other
	// headers (docs/contract.md, "What is signed").
	HeaderTraceParent = "Traceparent"
)

// attempt makes one HTTP try of a claimed delivery and returns its
// completion, and whether it failed at the transport level (no answer, or
// 5xx) for the circuit breaker.
func (e *Engine) attempt(ctx context.Context, c store.Claim) (store.Completion, bool) {
	d, ev, ep := c.Delivery, c.Event, c.Endpoint
	number := d.Attempts + 1
	start := e.cfg.Clock.Now()
	if d.Attempts == 0 && !ev.CreatedAt.IsZero() {
		e.cfg.Metrics.FirstAttempt(start.Sub(ev.CreatedAt))
	}
	// The receiver joins the publisher's trace: with tracing on, through
	// this attempt's span; off, through the traceparent the publish
	// carried (docs/contract.md, "Tracing").
	traceparent := ev.TraceParent
	var span trace.Span
	if e.cfg.Tracer.On() {
		ctx, span = e.startAttemptSpan(ctx, c, number)
		traceparent = tracing.FormatTraceParent(span.SpanContext())
	}
	// The bytes of the version the endpoint receives (its pin, else the
	// type's first version: store.Endpoint.VersionOf; docs/contract.md,
	// "Versions and pinning"), the same event id across versions.
	res := e.send(ctx, ep, store.PublicEventID(ev.ID), ev.Type, ev.BodyFor(ep.VersionOf(ev.Type)), ev.Headers, number, start, traceparent)
	now := e.cfg.Clock.Now()

	// When the status line arrived, the status is the endpoint's answer; a
	// failure while reading the body afterwards only shortens the excerpt
	// (a 2xx whose body was cut is still a success: the receiver has it).
	out := retry.Outcome{StatusCode: res.StatusCode, ErrorClass: res.ErrorClass}
	if res.StatusCode != 0 {
		out.ErrorClass = ""
	}
	if res.RetryAfter != "" && (res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable) {
		if ra, ok := retry.ParseRetryAfter(res.RetryAfter, now); ok {
			out.RetryAfter = ra
		}
	}
	clientErr := retry.IsClientError(res.StatusCode)
	clientErrors := d.ClientErrors
	if clientErr {
		clientErrors++
	}
	// The retry budget counts from the last replay; the attempt number sent
	// in X-Delivery-Attempt counts every attempt of the delivery.
	dec := e.cfg.Policy.Decide(number-d.ReplayBase, clientErrors, out)

	a := attemptRecord(d.ID, number, start, res)
	comp := store.Completion{
		DeliveryID:         d.ID,
		EndpointID:         ep.ID,
		Owner:              e.cfg.Owner,
		LeaseUntil:         d.LeaseUntil, // the claim's lease: a completion applies only under it
		Attempt:            a,
		ClientError:        clientErr,
		DisableAfter:       e.cfg.DisableAfter,
		DisableMinFailures: e.cfg.DisableMinFailures,
		Now:                now,
	}
	switch dec.Verdict {
	case retry.Succeeded:
		comp.State = store.DeliverySucceeded
	case retry.Retry:
		comp.State = store.DeliveryPending
		comp.NextAttemptAt = now.Add(dec.Delay)
	default:
		comp.State = store.DeliveryDead
		if dec.DisableEndpoint {
			comp.DisableEndpoint = true
			comp.DisableReason = "the endpoint answered 410 Gone"
		}
	}
	if span != nil {
		endAttemptSpan(span, res, a, comp.State == store.DeliverySucceeded)
	}
	e.cfg.Logger.DebugContext(ctx, "attempt", "delivery", d.ID, "event", ev.ID, "endpoint", ep.ID, "attempt", number,
		"status", res.StatusCode, "error", a.Error, "verdict", dec.Verdict.String(), "reason", dec.Reason)
	outcome := "retry"
	switch comp.State {
	case store.DeliverySucceeded:
		outcome = "succeeded"
	case store.DeliveryDead:
		outcome = "dead"
	}
	e.cfg.Metrics.Attempt(comp.State == store.DeliverySucceeded, res.Duration, outcome)
	transportFailure := res.StatusCode == 0 || res.StatusCode >= 500
	return comp, transportFailure
}

// send signs and sends one attempt of a body to an endpoint with the
// contract's headers (docs/contract.md, "headers").
//
// traceparent, when not empty, is sent as the W3C traceparent header
// (after the forwarded and custom headers, so neither overrides it); when
// empty, none is sent, whatever the forwarded or custom headers say.
func (e *Engine) send(ctx context.Context, ep store.Endpoint, eventID, eventType string, body []byte, forwarded map[string]string, number int, start time.Time, traceparent string) egress.Result {
	h := make(http.Header, 12+len(ep.Headers)+len(forwarded))
	// Forwarded headers (an inbound provider's) first, then the endpoint's
	// custom headers, then Herald's own, which nothing overrides.
	for k, v := range forwarded {
		h.Set(k, v)
	}
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	// Herald's own values share one backing array (one allocation instead
	// of one per header); the keys are in canonical form, and assigning
	// replaces any value set above, as Set would.
	own := [...]string{"application/json", e.cfg.UserAgent, eventID, eventType, strconv.Itoa(number)}
	vals := own[:]
	if h.Get("Content-Type") == "" {
		h["Content-Type"] = vals[0:1:1]
	}
	h["User-Agent"] = vals[1:2:2]
	h[HeaderEventID] = vals[2:3:3]
	h[HeaderEventType] = vals[3:4:4]
	h[HeaderDeliveryAttempt] = vals[4:5:5]
	if traceparent != "" {
		h[HeaderTraceParent] = []string{traceparent} // replaces a forwarded or custom one
	} else {
		// No trace to join: a forwarded or custom traceparent would put
		// every event in one made-up trace (docs/contract.md, "Tracing").
		delete(h, HeaderTraceParent)
	}
	signer, err := e.signers.get(&ep, start)
	if err != nil {
		// An endpoint without a usable secret is a storage fault; never
		// send an unsigned request.
		return egress.Result{ErrorClass: "signing", ErrorDetail: "the endpoint has no usable signing secret"}
	}
	signer.Sign(h, eventID, start, body)
	// The attempt outlives a shutdown of ctx: its result must be recorded,
	// and it is bounded by the timeout anyway.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.AttemptTimeout)
	defer cancel()
	sender := e.cfg.Sender
	if ep.Kind == store.EndpointKindSource {
		sender = e.cfg.TrustedSender
	}
	return sender.Do(actx, egress.Request{URL: ep.URL, Header: h, Body: body})
}

// TestEventType is the type of the events sent by SendTest.
const TestEventType = "herald.test"

// SendTest sends a signed test event to the endpoint now, through the same
// egress policy, signing and headers as every delivery, and returns the
// attempt without storing anything (POST /v1/endpoints/{id}/test).
func (e *Engine) SendTest(ctx context.Context, ep store.Endpoint) (store.Attempt, string, error) {
	start := e.cfg.Clock.Now()
	id := store.NewID("evt_test")
	body, err := store.EncodeBody(id, TestEventType, ep.Tenant, start, []byte(`{"message":"test event from Herald"}`))
	if err != nil {
		return store.Attempt{}, "", err
	}
	res := e.send(ctx, ep, id, TestEventType, body, nil, 1, start, "")
	return attemptRecord("", 1, start, res), id, nil
}

// attemptRecord is the record of one attempt's result. A 3xx is recorded
// with the error class "redirect" and its Location (redirects are never
// followed).
func attemptRecord(deliveryID string, number int, start time.Time, res egress.Result) store.Attempt {
	a := store.Attempt{
		DeliveryID:      deliveryID,
		Number:          number,
		StartedAt:       start,
		Duration:        res.Duration,
		StatusCode:      res.StatusCode,
		Error:           res.ErrorClass,
		ErrorDetail:     res.ErrorDetail,
		Location:        res.Location,
		ResponseExcerpt: res.Excerpt,
	}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		a.Error = "redirect"
		a.ErrorDetail = "redirects are not followed; the endpoint answered " + strconv.Itoa(res.StatusCode) + " with Location: " + res.Location
	}
	return a
}
