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
// The line is short: what the workers take in aheadHorizon at the pace
// their tokens freed lately (aheadPace, measured by the claimer at every
// round, claiming ahead or not; aheadFirstLine until a first measurement),
// at least one and at most ClaimAhead, and never fewer than the idle
// workers (they take their claims at once); it is refilled when half of it
// is free. So a claim waits in it about aheadHorizon, or one
// attempt's end when fewer end in that time, and a tenant's new event,
// claimed in the next claim (fair claiming), waits behind about that much
// of others' work. While attempts hold every worker the line stays full
// and claims nothing more.
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
//   - its lease: a claim that waited in the line (from the end of its
//     claim to its turn) longer than aheadSlowWait gets a fresh lease
//     (Config.Renewer: SQLite's leases are in memory, renewed without a
//     write), so it starts parked or attempted with a whole lease, as a
//     claim taken at that moment would (the lease covers one parked wait
//     behind an attempt and one attempt, with room to spare). A lease that
//     ended meanwhile (the wait outlasted --lease) is not renewed: the
//     claim is put back without an attempt, due as it was (reason
//     lease_expired); so is one whose renewal failed (renewal_failed: the
//     database did not answer);
//   - how long it waited: a wait longer than aheadSlowWait also means the
//     workers are held by attempts, not starved by claims, so claiming
//     ahead stops for aheadPause (the usual loop claims only for idle
//     workers meanwhile).
//
// Claims ahead are only taken with one claim loop (Config.Claimers 1): with
// two, their claims reached the line out of due order. The hand-off
// (handoff.go) reserves no worker while claims wait in the line: they are
// older. The usual loop takes worker tokens only once the line is empty,
// or it could take the tokens the line's first claim waits for.

const (
	// aheadSlowWait is the longest a claim may wait in the line before it
	// is given a fresh lease and claiming ahead pauses.
	aheadSlowWait = 100 * time.Millisecond
	// aheadPause is how long claiming ahead stops after a slow wait.
	aheadPause = time.Second
	// aheadHorizon is how far ahead the line reaches: the claims the
	// workers take in this long at their recent pace.
	aheadHorizon = 50 * time.Millisecond
	// aheadFirstLine is the line's length until a first pace is measured
	// (or ClaimAhead, if smaller).
	aheadFirstLine = 8
)

// ahead is a claim in the line, without a worker token.
type ahead struct {
	claim   store.Claim
	at      time.Time // when its claim returned (engine clock)
	changes uint64    // Config.EndpointChanges() read before the claim
}

// aheadPace measures how fast worker tokens free (attempts end or claims
// are put back), for the length of the line. Used by the claimer's
// goroutine only, on the engine's clock (as the attempts' durations).
type aheadPace struct {
	since time.Time // start of the current measurement
	freed int64     // Engine.freed at since
	line  int       // the line's length from the last measurement
}

// lineLen returns the line's length for the pace measured over the last
// aheadHorizon or more: the tokens freed per aheadHorizon, between 1 and
// ClaimAhead.
func (e *Engine) lineLen(p *aheadPace, now time.Time) int {
	freed := e.freed.Load()
	if p.since.IsZero() {
		p.since, p.freed, p.line = now, freed, min(aheadFirstLine, e.cfg.ClaimAhead)
	} else if d := now.Sub(p.since); d >= aheadHorizon {
		n := int((freed - p.freed) * int64(aheadHorizon) / int64(d))
		p.since, p.freed, p.line = now, freed, min(max(n, 1), e.cfg.ClaimAhead)
	}
	return p.line
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
func (e *Engine) roomAhead(ctx context.Context, p *aheadPace) int {
	for {
		if !e.claimsAhead(true) {
			return 0
		}
		// Idle workers take their claims at once, whatever the pace: a
		// line shorter than them would claim fewer than the usual loop
		// (and a pace measured while claims were slow would keep it so).
		line := max(e.lineLen(p, e.cfg.Clock.Now()), min(len(e.slots), e.cfg.ClaimAhead))
		e.aheadLine.Store(int64(line))
		if room := line - int(e.aheadN.Load()); room >= max(1, line/2) {
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
		j := job{Claim: a.claim, tok: tok}
		renewed := ""
		if now.Sub(a.at) > aheadSlowWait {
			renewed = e.renew(ctx, &j, now)
		}
		switch {
		case renewed != "":
			e.putBack(decision{verdict: deferred, job: j, at: j.Delivery.NextAttemptAt, reason: renewed}, now)
		case e.cfg.EndpointChanges() != a.changes && !e.refreshEndpoint(ctx, &j):
			e.putBack(decision{verdict: deferred, job: j, at: now, reason: reasonEndpointChanged}, now)
		default:
			e.jobs <- j
		}
		e.aheadDone()
	}
}

// renew gives a claim that waited in the line a fresh lease (from now) and
// pauses claiming ahead. It returns "" when renewed, else the reason to put
// the claim back with: reasonLeaseExpired when the lease ended (and may
// have been rescued), reasonRenewalFailed when the store did not answer.
func (e *Engine) renew(ctx context.Context, j *job, now time.Time) string {
	e.aheadOff.Store(now.Add(aheadPause).UnixNano())
	until := now.Add(e.cfg.Lease)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ok, err := e.cfg.Renewer.RenewLease(rctx, store.RenewLeaseParams{DeliveryID: j.Delivery.ID, Owner: e.cfg.Owner,
		Until: j.Delivery.LeaseUntil, NewUntil: until, Now: now})
	switch {
	case err != nil:
		e.cfg.Logger.Warn("renewing the lease of a claim that waited failed; putting it back", "delivery", j.Delivery.ID, "error", err)
		return reasonRenewalFailed
	case !ok:
		return reasonLeaseExpired
	}
	j.Delivery.LeaseUntil = until
	return ""
}

// aheadDone counts a claim out of the line and tells a claimer waiting for
// room (roomAhead) or for an empty line (lineEmpty).
func (e *Engine) aheadDone() {
	if e.aheadN.Add(-1) <= e.aheadLine.Load()/2 {
		select {
		case e.aheadRoom <- struct{}{}:
		default:
		}
	}
}
