package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// work is one worker: attempt each job and pass the completion on.
func (e *Engine) work(ctx context.Context) {
	for j := range e.jobs {
		if ctx.Err() != nil {
			// Shutting down: put the claim back, due now, for another node
			// (or this one's next start) without waiting for its lease.
			now := e.cfg.Clock.Now()
			e.putBack(decision{verdict: deferred, job: j, at: now, reason: reasonShutdown}, now)
			continue
		}
		e.handle(ctx, j)
		select {
		case e.progress <- struct{}{}:
		default:
		}
	}
}

// handle asks the scheduler once about a claim and acts on its decision
// (a claim of an endpoint that is paused or disabled is put back at once):
// run the attempt, defer the claim, or leave it parked (the scheduler
// holds it, with its token, for the worker that ends the endpoint's
// current attempt). After an attempt it releases the attempt's grant once
// and acts on the follow-up: postpone an opened circuit's deliveries, put
// back the parked claims the scheduler gives up, and carry on with the
// endpoint's next parked claim, already decided on.
//
// Each claim's token (see token) is released once: by putBack, or after
// its attempt's completion is queued; a parked claim keeps it.
func (e *Engine) handle(ctx context.Context, j job) {
	now := e.cfg.Clock.Now()
	if j.Endpoint.State == store.EndpointPaused || j.Endpoint.State == store.EndpointDisabled {
		// Claimed after its endpoint was paused or disabled, before the
		// store's move held it (both stores hold an endpoint's deliveries
		// in chunks after the change): no attempt; the deferred completion
		// holds it.
		e.putBack(decision{verdict: deferred, job: j, at: now, reason: reasonEndpointChanged}, now)
		return
	}
	d := e.sched.decide(j, now)
	for unparked := false; ; unparked = true {
		switch d.verdict {
		case parked:
			return // the scheduler holds d.job and its token
		case deferred:
			e.putBack(d, now)
			return
		}
		if !d.hold.IsZero() {
			// The half-open circuit's probe: hold the endpoint's due
			// backlog until the probe's deadline, so that claims do not
			// meet it (and defer it) while the probe is in flight. A
			// hand-back decided while the hold is written (another
			// attempt's success closed the circuit) waits for it.
			e.moveBacklog(backlogMove{endpointID: d.job.Endpoint.ID, dueTo: now, at: d.hold})
			if back := e.sched.holdWritten(d.job.Endpoint.ID); back != nil {
				e.results <- result{move: back}
			}
		}
		var f followUp
		if unparked && !e.refreshEndpoint(ctx, &d.job) {
			// Parked while its endpoint was paused, disabled or deleted: no
			// attempt; the store holds the delivery (or has deleted it).
			now = e.cfg.Clock.Now()
			f = e.sched.release(d.grant, outcome{cancelled: true}, now, ctx.Err() != nil)
			e.putBack(decision{verdict: deferred, job: d.job, at: now, reason: reasonEndpointChanged}, now)
		} else {
			comp, transportFailure := e.attempt(ctx, d.job.Claim)
			e.results <- result{c: comp}
			now = e.cfg.Clock.Now()
			f = e.sched.release(d.grant, outcome{failed: transportFailure, took: comp.Attempt.Duration}, now, ctx.Err() != nil)
			d.job.tok.release() // after release: a claim this token brings sees the attempt ended
		}
		if f.wake {
			e.Notify() // a tenant the claims skipped may be claimed again
		}
		if f.opened {
			e.circuitOpened(d.job.Endpoint.ID, f.openUntil)
		}
		if f.handBack != nil {
			e.results <- result{move: f.handBack}
		}
		if f.pullIn != nil {
			e.results <- result{move: f.pullIn}
		}
		for _, p := range f.putBack {
			e.putBack(p, now)
		}
		if f.next.verdict == 0 {
			return
		}
		d = f.next
	}
}

// refreshEndpoint reads a parked claim's endpoint again before its
// attempt: the claim may have waited for seconds behind the endpoint's
// slow attempts, and what was claimed must not outlive an operator's
// change. A paused, disabled or deleted endpoint answers false (no
// attempt); otherwise the claim takes the endpoint as it is now — its URL,
// headers and secrets, so a rotation without overlap stops the old secret
// signing at once (docs/operations.md, "Rotating"). A failed read keeps
// the claimed copy (the attempt is no worse than one already in flight).
func (e *Engine) refreshEndpoint(ctx context.Context, j *job) bool {
	ep, err := e.cfg.Store.GetEndpoint(ctx, j.Endpoint.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		e.cfg.Logger.Warn("re-reading a parked claim's endpoint failed; attempting with the claimed copy", "endpoint", j.Endpoint.ID, "error", err)
		return true
	case ep.State != store.EndpointEnabled:
		return false
	}
	j.Endpoint = ep
	return true
}

// putBack carries out a deferral: the claim goes back without an attempt,
// due at d.at, and its token is released.
func (e *Engine) putBack(d decision, now time.Time) {
	e.cfg.Metrics.Deferred(d.reason)
	e.results <- result{c: store.Completion{DeliveryID: d.job.Delivery.ID, EndpointID: d.job.Endpoint.ID, Owner: e.cfg.Owner,
		LeaseUntil: d.job.Delivery.LeaseUntil, Deferred: true, NextAttemptAt: d.at, Now: now}}
	d.job.tok.release()
	if d.congested() {
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
