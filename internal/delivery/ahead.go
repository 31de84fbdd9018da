package delivery

import (
	"context"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Claiming ahead (Config.ClaimAhead; SQLite). While a backlog drains, the
// claimer of the usual loop waits for idle workers, then for its claim:
// the workers that finish meanwhile stay idle (docs/BENCHMARKS.md measured
// 65–78 of 128 busy in a SQLite drain). Claiming ahead, the claimer claims
// into a line without waiting for idle workers, and the dispatcher hands
// each claim of the line, in claim order, to the next worker token that
// frees, so a worker whose attempt ends takes a claim at once.
//
// A claim in the line may wait, so at its turn the dispatcher checks what
// the usual loop never has to:
//   - its endpoint: when the store's count of endpoint changes
//     (Config.EndpointChanges) moved since the claim, the endpoint is read
//     again (refreshEndpoint, as for a parked claim): a pause, disable or
//     deletion made meanwhile stops it, a rotation or new URL is used. The
//     count moves before such a change commits, so a change answered to its
//     caller before the claim's turn is always seen; with no change, the
//     check costs one atomic load;
//   - its lease: the lease (Config.Lease, default 2 × AttemptTimeout + 5
//     s) covers one parked wait behind an attempt and one attempt; a claim
//     whose lease no longer covers two attempt timeouts is put back
//     without an attempt, due at its own due time (it keeps its place), so
//     no lease runs out under an attempt (a rescue would have it sent
//     twice);
//   - how long it waited: a claim that waited longer than aheadSlowWait
//     means the workers are held by attempts, not starved by claims, so
//     claiming ahead stops for aheadPause (the usual loop claims only for
//     idle workers meanwhile).
//
// Claims ahead are only taken with one claim loop (Config.Claimers 1): with
// two, their claims reached the line out of due order. The hand-off
// (handoff.go) reserves no worker while claims wait in the line: they are
// older. The usual loop takes worker tokens only once the line is empty,
// or it could take the tokens the line's first claim waits for.

const (
	// aheadSlowWait is the longest a claim may wait in the line before
	// claiming ahead pauses.
	aheadSlowWait = 100 * time.Millisecond
	// aheadPause is how long claiming ahead stops after a slow wait.
	aheadPause = time.Second
	// aheadLeaseSlack is the least Config.Lease must exceed two attempt
	// timeouts by for claiming ahead to be on by default.
	aheadLeaseSlack = time.Second
)

// ahead is a claim in the line, without a worker token.
type ahead struct {
	claim   store.Claim
	at      time.Time // when it was claimed (engine clock)
	changes uint64    // Config.EndpointChanges() read before the claim
}

// claimsAhead reports whether the next claim goes to the line: claiming
// ahead is on, a backlog drains (the last claim was full), and no slow
// wait paused it.
func (e *Engine) claimsAhead(backlog bool) bool {
	return e.cfg.ClaimAhead > 0 && backlog && e.cfg.Clock.Now().UnixNano() >= e.aheadOff.Load()
}

// roomAhead waits until at least half of the line is free and returns how
// many claims to take into it (at most ClaimBatch), or 0 when ctx ended or
// claiming ahead paused meanwhile (the caller claims the usual way).
func (e *Engine) roomAhead(ctx context.Context) int {
	half := max(1, e.cfg.ClaimAhead/2)
	for {
		if !e.claimsAhead(true) {
			return 0
		}
		if room := e.cfg.ClaimAhead - int(e.aheadN.Load()); room >= half {
			return min(room, e.cfg.ClaimBatch)
		}
		select {
		case <-e.aheadRoom:
		case <-ctx.Done():
			return 0
		}
	}
}

// lineEmpty waits until no claim waits in the line (the usual loop may
// then take worker tokens); false when ctx ended first.
func (e *Engine) lineEmpty(ctx context.Context) bool {
	for e.aheadN.Load() > 0 {
		select {
		case <-e.aheadRoom:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// queueAhead puts a claim's deliveries in the line, in claim order.
func (e *Engine) queueAhead(claims []store.Claim, at time.Time, changes uint64) {
	e.aheadN.Add(int64(len(claims)))
	for _, c := range claims {
		e.line <- ahead{claim: c, at: at, changes: changes}
	}
}

// dispatch hands the line's claims to the workers, each with the next
// worker token that frees, until the line is closed (Run closes it after
// the claimer has stopped). When ctx ends, the claims still in the line are
// put back due at once, without an attempt, as the workers put back the
// claims they had not started.
func (e *Engine) dispatch(ctx context.Context) {
	for a := range e.line {
		var tok *token
		if ctx.Err() == nil {
			select {
			case <-e.slots:
				tok = e.takeToken()
			case <-ctx.Done():
			}
		}
		now := e.cfg.Clock.Now()
		if tok == nil {
			e.cfg.Metrics.Deferred(reasonShutdown)
			e.results <- result{c: store.Completion{DeliveryID: a.claim.Delivery.ID, EndpointID: a.claim.Endpoint.ID, Owner: e.cfg.Owner,
				LeaseUntil: a.claim.Delivery.LeaseUntil, Deferred: true, NextAttemptAt: now, Now: now}}
			e.aheadDone()
			continue
		}
		if now.Sub(a.at) > aheadSlowWait {
			e.aheadOff.Store(now.Add(aheadPause).UnixNano())
		}
		j := job{Claim: a.claim, tok: tok}
		switch {
		case j.Delivery.LeaseUntil.Sub(now) < 2*e.cfg.AttemptTimeout:
			e.putBack(decision{verdict: deferred, job: j, at: j.Delivery.NextAttemptAt, reason: reasonLeaseShort}, now)
		case e.cfg.EndpointChanges() != a.changes && !e.refreshEndpoint(ctx, &j):
			e.putBack(decision{verdict: deferred, job: j, at: now, reason: reasonEndpointChanged}, now)
		default:
			e.jobs <- j
		}
		e.aheadDone()
	}
}

// aheadDone counts a claim out of the line and tells a claimer waiting for
// room (roomAhead) or for an empty line (lineEmpty).
func (e *Engine) aheadDone() {
	if e.aheadN.Add(-1) <= int64(e.cfg.ClaimAhead/2) {
		select {
		case e.aheadRoom <- struct{}{}:
		default:
		}
	}
}
