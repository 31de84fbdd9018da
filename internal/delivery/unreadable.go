package delivery

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Endpoints whose stored values do not open on this node: signing secrets
// or a header value sealed under an encryption key this node does not hold
// (a node not restarted with the new key before `herald rekey`, or a value
// sealed under a key no node holds any more), or a corrupted value. A claim
// that meets one leaves its deliveries out, pending and unleased, and
// reports it (store.ClaimParams.Unreadable); the engine then:
//
//   - skips it in this node's claims for a while (ClaimParams.SkipEndpoints),
//     1 s the first time, twice as long at each claim that meets it again
//     after a skip, at most a minute: on PostgreSQL a node holding the key
//     claims the deliveries at once, and once the key problem is fixed
//     (herald rekey with the old key in HERALD_ENCRYPTION_KEY_PREVIOUS, or
//     the node restarted with the key) the next claim after the skip
//     delivers them, without a restart;
//   - logs a WARN naming the endpoint once per skip, not at every claim,
//     and counts the endpoints skipped (herald_endpoints_unreadable);
//   - postpones the endpoint's due deliveries to the skip's end when no
//     other claimer could open them (as an open circuit does: no attempt
//     is consumed, the deliveries stay pending): every one due, on a store
//     one process claims from (SQLite, Config.SoleClaimer); on a shared
//     one (PostgreSQL) only those that were due when the last claim here
//     gave them back and are still there a whole skip later (no node
//     delivered them), so that the ones due since stay due for a node that
//     may hold the key; and never on a node whose own key check fails
//     (Config.KeyCheck: the node lacks the current key, so nodes holding
//     it exist and may only have had no room yet). Otherwise each claim
//     would step over that backlog row by row while it is skipped.
//
// Nothing of this runs on a claim that meets no such endpoint: the claimer
// reads one atomic counter.

// The skip of an endpoint whose values do not open: the first, and the
// longest (it doubles each time a claim meets the endpoint again after a
// skip).
const (
	unreadableSkipMin = time.Second
	unreadableSkipMax = time.Minute
)

// unreadableSet is the node's endpoints whose values did not open at their
// last claim.
type unreadableSet struct {
	mu sync.Mutex
	m  map[string]*unreadableEntry
	n  atomic.Int32 // len(m): read on every claim without the lock
}

type unreadableEntry struct {
	until   time.Time     // this node's claims skip the endpoint until then
	period  time.Duration // the current skip (until − its start)
	lastMet time.Time     // when a claim last met it and gave its deliveries back
}

// skipEndpoints appends to dst the endpoints this node's claims skip at now
// and returns it with the earliest end of their skips (zero when none). An
// endpoint whose skip ended over unreadableSkipMax ago without a claim
// meeting it since is forgotten: nothing of it was due here (deleted,
// paused, or delivered by a node holding its key).
func (e *Engine) skipEndpoints(dst []string, now time.Time) ([]string, time.Time) {
	s := &e.unreadable
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	forgot := false
	for id, u := range s.m {
		switch {
		case now.Before(u.until):
			dst = append(dst, id)
			if first.IsZero() || u.until.Before(first) {
				first = u.until
			}
		case now.Sub(u.until) > unreadableSkipMax:
			delete(s.m, id)
			forgot = true
		}
	}
	if forgot {
		e.unreadableChanged()
	}
	return dst, first
}

// unreadableChanged publishes the set's size (the claimer's counter and
// the gauge); e.unreadable.mu is held.
func (e *Engine) unreadableChanged() {
	n := len(e.unreadable.m)
	e.unreadable.n.Store(int32(n))
	e.cfg.Metrics.UnreadableEndpoints(n)
}

// unreadableMet acts on the endpoints a claim at now left out because
// their stored values do not open (see the top of this file).
func (e *Engine) unreadableMet(ctx context.Context, us []store.UnreadableEndpoint, now time.Time) {
	// A postponement moves the endpoint's due deliveries to until: those
	// due by dueTo (nobody took them for a whole skip), or every one due
	// before until for a sole claimer (zero dueTo).
	type postponement struct {
		id           string
		dueTo, until time.Time
	}
	var postpone []postponement
	s := &e.unreadable
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*unreadableEntry{}
	}
	for _, u := range us {
		ent, known := s.m[u.ID]
		if known && now.Before(ent.until) {
			// Met by a claim that began before the skip (a second
			// claimer's): already logged; only a sole claimer moves what
			// came due since.
			ent.lastMet = now
			if e.cfg.SoleClaimer {
				postpone = append(postpone, postponement{u.ID, time.Time{}, ent.until})
			}
			continue
		}
		if !known {
			ent = &unreadableEntry{period: unreadableSkipMin}
			s.m[u.ID] = ent
		} else {
			ent.period = min(2*ent.period, unreadableSkipMax)
		}
		// A delivery due when the last claim here gave the endpoint's back
		// is still there after a whole skip: no node delivered it, none
		// holds the key (or none has room). Those are moved to the skip's
		// end; the ones due since are left due for a node that may hold
		// it (so that one joining meanwhile waits at most a skip).
		p := postponement{id: u.ID}
		switch {
		case e.cfg.SoleClaimer:
		case known && !u.OldestDue.After(ent.lastMet):
			p.dueTo = ent.lastMet
		default:
			p.id = ""
		}
		ent.until, ent.lastMet = now.Add(ent.period), now
		if p.id != "" {
			p.until = ent.until
			postpone = append(postpone, p)
		}
		e.cfg.Logger.Warn("endpoint's stored values do not open with this node's encryption keys: its deliveries stay pending, and this node skips the endpoint until then",
			"endpoint", u.ID, "tenant", u.Tenant, "deliveries", u.Deliveries, "until", ent.until, "postponed", p.id != "", "error", u.Err)
	}
	e.unreadableChanged()
	s.mu.Unlock()
	if !e.cfg.SoleClaimer && len(postpone) > 0 && e.cfg.KeyCheck != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := e.cfg.KeyCheck(kctx)
		cancel()
		if err != nil {
			// This node lacks the current key: the nodes that hold it
			// deliver these when they have room; moving them would delay
			// those nodes (up to a skip each time).
			e.cfg.Logger.Info("not postponing the deliveries of endpoints whose values do not open here: this node's key check failed, other nodes may hold the key", "endpoints", len(postpone), "error", err)
			postpone = nil
		}
	}
	for _, p := range postpone {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		var err error
		if p.dueTo.IsZero() {
			_, err = e.cfg.Store.PostponeEndpointDeliveries(pctx, p.id, p.until)
		} else {
			_, err = e.cfg.Store.MoveEndpointDeliveries(pctx, store.MoveParams{EndpointID: p.id, DueTo: p.dueTo, At: p.until})
		}
		cancel()
		if err != nil {
			e.cfg.Logger.Warn("postponing the deliveries of an endpoint whose values do not open failed; the claims skip them meanwhile", "endpoint", p.id, "error", err)
		}
	}
}

// readableAgain forgets the endpoints of claims that are in the set: a
// claim opened their values (the key problem was fixed).
func (e *Engine) readableAgain(claims []store.Claim) {
	s := &e.unreadable
	s.mu.Lock()
	found := false
	for _, c := range claims {
		if _, ok := s.m[c.Endpoint.ID]; ok {
			delete(s.m, c.Endpoint.ID)
			found = true
			e.cfg.Logger.Info("endpoint's stored values open again: its deliveries are delivered", "endpoint", c.Endpoint.ID, "tenant", c.Endpoint.Tenant)
		}
	}
	if found {
		e.unreadableChanged()
	}
	s.mu.Unlock()
}

// UnreadableEndpoints returns how many endpoints this node's claims skip
// or skipped last because their stored values did not open (the gauge
// herald_endpoints_unreadable).
func (e *Engine) UnreadableEndpoints() int { return int(e.unreadable.n.Load()) }
