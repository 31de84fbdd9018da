package delivery

import (
	"context"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// work is one worker: attempt each job and pass the completion on.
func (e *Engine) work(ctx context.Context) {
	for j := range e.jobs {
		if ctx.Err() != nil {
			// Shutting down: put the claim back, due now, for another node
			// (or this one's next start) without waiting for its lease.
			e.deferClaim(j, e.cfg.Clock.Now(), "shutdown", e.cfg.Clock.Now())
			continue
		}
		e.handle(ctx, j)
		select {
		case e.progress <- struct{}{}:
		default:
		}
	}
}

// handle passes a claim through its endpoint's gate. An admitted claim is
// attempted, and then this worker carries on with the endpoint's next
// parked claim, if any; a claim parked at the cap is left, with its token,
// for the worker that finishes the endpoint's current attempt; any other
// claim turned away is deferred without consuming an attempt.
//
// Each claim's token (see token) is released once: by deferClaim, or
// after its attempt's completion is queued; a parked claim keeps it.
func (e *Engine) handle(ctx context.Context, j job) {
	for {
		now := e.cfg.Clock.Now()
		ok, parked, retryAt, reason := e.gate.admitOrPark(j, now)
		if parked {
			return // the gate holds j and its token
		}
		if !ok {
			e.deferClaim(j, retryAt, reason, now)
			return
		}
		comp, transportFailure := e.attempt(ctx, j.Claim)
		e.results <- comp
		until, opened := e.gate.done(j.Endpoint.ID, transportFailure, comp.Attempt.Duration, e.cfg.Clock.Now())
		j.tok.release() // after done: a claim this token brings sees the attempt ended
		if opened {
			e.circuitOpened(j.Endpoint.ID, until)
			for _, p := range e.gate.unparkAll(j.Endpoint.ID) {
				e.deferClaim(p, until, "circuit_open", e.cfg.Clock.Now())
			}
			return
		}
		next, more := e.gate.next(j.Endpoint.ID)
		if !more {
			return
		}
		if ctx.Err() != nil {
			// Shutting down: put back next and every other claim parked
			// behind this endpoint.
			now := e.cfg.Clock.Now()
			e.deferClaim(next, now, "shutdown", now)
			for _, p := range e.gate.unparkAll(j.Endpoint.ID) {
				e.deferClaim(p, now, "shutdown", now)
			}
			return
		}
		j = next
	}
}

// deferClaim puts a claim back without an attempt, due at retryAt, and
// releases its token.
func (e *Engine) deferClaim(c job, retryAt time.Time, reason string, now time.Time) {
	e.cfg.Metrics.Deferred(reason)
	e.results <- store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: e.cfg.Owner,
		Deferred: true, NextAttemptAt: retryAt, Now: now}
	c.tok.release()
	if reason == "concurrency_cap" || reason == "tenant_cap" || reason == "host_cap" {
		// Claims are outrunning what the endpoints can take: tell the
		// claimer to wait for progress instead of claiming more of them.
		select {
		case e.congested <- struct{}{}:
		default:
		}
	}
}

// circuitOpened postpones the endpoint's due deliveries in the store.
func (e *Engine) circuitOpened(endpointID string, until time.Time) {
	e.cfg.Metrics.CircuitOpened()
	e.cfg.Logger.Warn("circuit opened: the endpoint keeps failing; its deliveries wait without consuming attempts",
		"endpoint", endpointID, "until", until)
	e.background.Go(func() {
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.cfg.Store.PostponeEndpointDeliveries(pctx, endpointID, until); err != nil {
			e.cfg.Logger.Warn("postpone deliveries of an open circuit failed", "endpoint", endpointID, "error", err)
		}
	})
}
