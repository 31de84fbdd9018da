package delivery

import (
	"context"
	"math"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// claim is the claimer loop: wait for idle workers, claim up to that many
// due deliveries, hand them out; when the queue has nothing due, sleep until
// the next due time, a notification, or the poll interval.
func (e *Engine) claim(ctx context.Context) {
	log := e.cfg.Logger
	backoff := 100 * time.Millisecond
	backlog := false  // the last claim took all it asked for
	cursor := ""      // the tenant served last (round-robin; ClaimParams)
	var skip []string // the tenants this claim skips (ClaimParams.SkipTenants)
	plain := false    // the next claim skips no tenant (see below)
	// The endpoints this claim skips because their stored values did not
	// open (ClaimParams.SkipEndpoints, unreadable.go), the earliest end of
	// their skips, and those the claim met (ClaimParams.Unreadable).
	var (
		skipEP  []string
		skipEnd time.Time
		met     []store.UnreadableEndpoint
	)
	report := func(u store.UnreadableEndpoint) { met = append(met, u) }
	// The deliveries the claim dead-lettered because their stored row or
	// their event's does not decode (store.PoisonedRows): no attempt could
	// ever be made of them; the others of the claim were returned. Counted
	// and logged once per claim (deadLettered), not once each: a damaged
	// event dead-letters every delivery of it.
	var dead []store.PoisonedDelivery
	poisoned := func(pd store.PoisonedDelivery) { dead = append(dead, pd) }
	var pace aheadPace // the line's length (ahead.go)
	for ctx.Err() == nil {
		// After a congested batch, wait for an attempt to finish (or a
		// short while) before claiming more.
		select {
		case <-e.congested:
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-e.progress:
			case <-t.C:
			}
			t.Stop()
		default:
		}
		// During a backlog, claim ahead into the line (ahead.go) when it
		// has room; otherwise take at least one idle worker, then every
		// other idle one (once the line is empty: its first claim waits
		// for the next token).
		free, limit := 0, 0
		if e.cfg.ClaimAhead > 0 {
			e.lineLen(&pace, e.cfg.Clock.Now()) // keep the pace measured
		}
		if e.claimsAhead(backlog) {
			if limit = e.roomAhead(ctx, &pace); limit == 0 {
				continue // ctx ended, or claiming ahead paused meanwhile
			}
		} else {
			if !e.lineEmpty(ctx) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-e.slots:
			}
			free = e.gather(ctx, 1, backlog)
			limit = free
		}
		// Tenants at their cap on this node with no fast endpoint whose
		// slots free slowly (scheduler.skipTenants): all of their claims
		// would be turned away and written back (work on the database that
		// delays every other tenant), so the claim skips them; the release
		// that brings one below its cap wakes this loop.
		if plain {
			skip, plain = skip[:0], false
		} else {
			skip = e.sched.skipTenants(skip, e.cfg.Clock.Now())
		}
		skipEP, skipEnd, met, dead = skipEP[:0], time.Time{}, met[:0], dead[:0]
		if e.unreadable.n.Load() > 0 {
			skipEP, skipEnd = e.skipEndpoints(skipEP, e.cfg.Clock.Now())
		}
		// Not cancelled by shutdown: a claim cut short may still commit
		// (its leases would wait for a rescue); a finished one is handed to
		// the workers, which put its claims back at shutdown. The timeout
		// keeps a hung database from stalling the claimer forever.
		var changes uint64 // read before the claim (ahead.go)
		if e.cfg.ClaimAhead > 0 {
			changes = e.cfg.EndpointChanges()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		claims, err := e.cfg.Store.ClaimDeliveries(cctx, store.ClaimParams{
			Owner: e.cfg.Owner, Limit: limit, Lease: e.cfg.Lease, Now: e.cfg.Clock.Now(), TenantCursor: cursor,
			SkipTenants: skip, SkipEndpoints: skipEP, Unreadable: report, Poisoned: poisoned,
		})
		cancel()
		if len(dead) > 0 {
			e.deadLettered(dead)
			clear(dead) // no errors kept until the next such claim
		}
		if len(met) > 0 {
			// Left out of the claim, their leases given back: skip them.
			e.unreadableMet(ctx, met, e.cfg.Clock.Now())
		}
		if err != nil {
			e.giveBack(free)
			if ctx.Err() != nil {
				return
			}
			log.Warn("claim deliveries failed; retrying", "error", err, "retry_in", backoff)
			e.sleep(ctx, backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if len(claims) > 0 && e.unreadable.n.Load() > 0 {
			e.readableAgain(claims)
		}
		cursor = store.NextTenantCursor(cursor, claims)
		if free == 0 {
			e.queueAhead(claims, e.cfg.Clock.Now(), changes) // its wait in the line starts now
		} else {
			for _, c := range claims {
				e.jobs <- job{Claim: c, tok: e.takeToken()}
			}
			e.giveBack(free - len(claims))
		}
		backlog = len(claims) == limit
		e.backlog.Store(backlog)
		if backlog {
			if e.cfg.Claimers > 1 {
				e.Notify() // maybe more due: get the other claimers going
			}
			continue // maybe more due: claim again as soon as workers free up
		}
		// A claim that skipped tenants and took nothing while work of
		// others is due: its round ran out of probes on tenants with nothing
		// due, and the skipped tenants' deliveries are the oldest due, so
		// its bounded fill did not reach the others' (ClaimParams). The
		// next claim skips none (its fill takes the oldest due, as without
		// the skip list), rather than claiming nothing again and again.
		//
		// A claim that skipped endpoints whose values do not open took
		// all else that was due (it was not full), but the next due time
		// counts their deliveries: it waits for a notification, the poll
		// interval or the first of their skips to end (held) when the
		// next due time is already past, instead of claiming nothing
		// again at once.
		// A claim that left endpoints' deliveries out (met) was cut short
		// by them, not by a lack of due work: it does not hold (the next
		// claim skips them too), unless it took nothing on a shared store,
		// where a node lacking the key for every endpoint would otherwise
		// lease and give back the whole due queue without a pause (a sole
		// claimer postponed what it left out: nothing to step over).
		cutShort := len(met) > 0 && (len(claims) > 0 || e.cfg.SoleClaimer)
		held := time.Time{}
		if len(skipEP) > 0 && !cutShort && (len(claims) > 0 || len(skip) == 0) {
			held = skipEnd
		}
		dueNow := e.waitForWork(ctx, held)
		plain = dueNow && len(claims) == 0 && len(skip) > 0
	}
}

// claimGather is how long the claimer waits, while a backlog is being
// drained, for idle workers to add up to a worthwhile batch (see gather).
// Each claim transaction has a fixed cost, mostly its commit writing every
// page it touched to the WAL: in BenchmarkDrainQueue a claim and a
// completion of 32 deliveries cost 46 µs per delivery, of 128 28 µs.
const claimGather = 5 * time.Millisecond

// gather takes more idle workers' tokens in addition to the free ones the
// claimer holds, and returns how many it holds, at most ClaimBatch. Without
// a backlog it takes only the idle ones at hand: a delivery published now
// is claimed at once. During a backlog (the last claim was full), workers
// free up one at a time as their attempts finish, and claiming each one
// alone costs a transaction per delivery (13 deliveries per claim on
// average in a 128-worker drain); gather then waits up to claimGather for
// half of the workers (at most ClaimBatch) to be idle. The wait costs no
// CPU; it only lowers the attempts in flight, by at most claimGather's
// worth of finished attempts.
func (e *Engine) gather(ctx context.Context, free int, backlog bool) int {
	for free < e.cfg.ClaimBatch {
		select {
		case <-e.slots:
			free++
			continue
		default:
		}
		break
	}
	want := min(e.cfg.ClaimBatch, max(1, e.cfg.Workers/2))
	if !backlog || free >= want {
		return free
	}
	t := time.NewTimer(claimGather)
	defer t.Stop()
	for free < want {
		select {
		case <-e.slots:
			free++
		case <-t.C:
			return free
		case <-ctx.Done():
			return free
		}
	}
	return free
}

// giveBack returns n tokens the claimer took and no claim holds.
func (e *Engine) giveBack(n int) {
	for range n {
		e.slots <- struct{}{}
	}
}

// waitForWork sleeps until a notification, the next due time or the poll
// interval, whichever comes first; it returns at once when a notification
// is already pending. dueNow reports that it returned without waiting
// because a delivery of a tenant not skipped is due already. held, when
// not zero, is the end of the first skip of the endpoints the last claim
// skipped (their values do not open): a next due time already past is
// then taken as theirs, and it waits until held at the latest instead.
func (e *Engine) waitForWork(ctx context.Context, held time.Time) (dueNow bool) {
	// A publish committed since the claim began (its Notify is pending):
	// claim again at once, without reading the next due time first (a
	// round trip per claim on a busy queue, in every delivery's latency).
	select {
	case <-e.wake:
		return false
	default:
	}
	// Announce the sleep before reading the next due time: a completion
	// committed after the read sees a wake-up time and wakes the claimer
	// if it is due earlier; one committed before is found by the read.
	e.wakeAt.Store(math.MaxInt64)
	defer e.wakeAt.Store(0)
	wait := e.cfg.PollInterval
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	// The next claim skips the tenants at their cap (see claim): their due
	// deliveries must not make the claimer spin. The release that lifts
	// one of them notifies (e.wake), so none is waited for past its turn.
	next, err := e.cfg.Store.NextDueAt(nctx, e.sched.skipTenants(nil, e.cfg.Clock.Now()))
	cancel()
	if err == nil && !next.IsZero() {
		if d := next.Sub(e.cfg.Clock.Now()); d < wait {
			wait = max(d, 0)
		}
	}
	if wait == 0 && !held.IsZero() {
		wait = min(e.cfg.PollInterval, max(held.Sub(e.cfg.Clock.Now()), 0))
	}
	if wait == 0 {
		return true
	}
	e.wakeAt.Store(e.cfg.Clock.Now().Add(wait).UnixNano())
	t := e.cfg.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-e.wake:
	case <-t.Chan():
	}
	return false
}

// pause waits d on the engine's clock (a wait of the schedule), or until
// ctx ends.
func (e *Engine) pause(ctx context.Context, d time.Duration) {
	t := e.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	}
}

// sleep waits d on the wall clock (a backoff after a failed database
// call), or until ctx ends.
func (e *Engine) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// deadLettered counts (herald_deliveries_poisoned_total) and logs, in one
// ERROR line, the deliveries a claim dead-lettered without an attempt
// because their stored rows could not be read (ClaimParams.Poisoned): the
// first one named, with its error, and how many deliveries and events
// there were. A dead letter the store could not write (PostgreSQL: its
// lease runs out and a later claim meets it again) is not counted.
func (e *Engine) deadLettered(ps []store.PoisonedDelivery) {
	written := 0
	events := map[string]struct{}{}
	for _, pd := range ps {
		if !pd.Unwritten {
			written++
		}
		events[pd.EventID] = struct{}{}
	}
	e.cfg.Metrics.DeliveriesPoisoned(written)
	msg := "deliveries dead-lettered without an attempt: their stored rows could not be read"
	if written < len(ps) {
		msg = "deliveries whose stored rows could not be read: dead-lettering them failed (a later claim meets them again)"
	}
	pd := ps[0]
	e.cfg.Logger.Error(msg, "deliveries", len(ps), "events", len(events), "delivery", pd.ID, "event", pd.EventID,
		"endpoint", pd.EndpointID, "tenant", pd.Tenant, "error", pd.Err)
}
