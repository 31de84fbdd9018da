package delivery

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/store"
)

// gate keeps one endpoint from taking more than its share of the workers:
// a per-endpoint concurrency cap, the endpoint's rate limit, and a circuit
// breaker that stops attempts to an endpoint that keeps failing at the
// transport level (timeouts, refused connections, 5xx) until a cooldown has
// passed, then lets a single probe through (half-open).
//
// A delivery that finds its endpoint at the cap is parked in memory (up to
// a quarter of the cap per endpoint): the worker that finishes an attempt to
// that endpoint takes the next parked delivery at once, with no database
// round trip. A parked delivery holds no worker, and waits at most about
// one attempt timeout, well inside its lease. A delivery the gate turns
// away otherwise (rate limit, open circuit, parking full) is deferred: its
// lease is released with a new due time and no attempt is consumed, so its
// own schedule (attempt count, dead-lettering) is unchanged, and the
// workers stay free for other endpoints.
//
// The state is per node. With several nodes on one database, each node
// applies its share of the cap and of the rate limit (setShare; see
// cluster.go), so both hold across the cluster.
//
// Lock order: gate.mu only; no other lock is taken while holding it.
type gate struct {
	mu        sync.Mutex
	eps       map[string]*endpointGate
	cap       int           // attempts in flight per endpoint until it has proven fast
	fastCap   int           // attempts in flight per endpoint that answers fast (all workers)
	threshold int           // consecutive failures that open the circuit
	cooldown  time.Duration // how long an open circuit stays open
	deferFor  time.Duration // wait of a delivery turned away at the cap
	rank      int           // this node's rank among the live nodes
	nodes     int           // live nodes; 0 = this node holds no share of the limits
}

type endpointGate struct {
	inflight  int
	failures  int       // consecutive transport-level failures
	openUntil time.Time // circuit open until then; zero = closed
	probing   bool      // half-open: one probe in flight
	limiter   *rate.Limiter
	limit     int           // the endpoint's rate limit per second the limiter was made for
	limNodes  int           // the nodes count the limiter's share was made for
	nextSlot  time.Time     // due time for the next claim turned away by the rate limit
	parked    []store.Claim // waiting for one of the endpoint's attempts to finish
	fast      int           // consecutive fast answers (2xx–4xx within fastAnswer)
}

// fastAnswer is the attempt duration under which an answer counts as fast,
// and fastProof how many fast answers in a row lift an endpoint from cap to
// fastCap. A healthy, quick endpoint may use every worker (a drain is not
// held back by the cap); one that is slow, times out or fails goes back to
// cap at once, so a black hole never holds more than cap workers.
const (
	fastAnswer = 250 * time.Millisecond
	fastProof  = 3
)

func (e *endpointGate) maxInflight(g *gate) int {
	if e.fast >= fastProof {
		return g.fastCap
	}
	return capShare(g.cap, g.rank, g.nodes)
}

// setShare records this node's rank among nodes live nodes (nodes == 0:
// it holds no share of the endpoints' caps and rate limits).
func (g *gate) setShare(rank, nodes int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rank, g.nodes = rank, nodes
}

func newGate(capPerEndpoint, fastCap, threshold int, cooldown, deferFor time.Duration) *gate {
	return &gate{eps: map[string]*endpointGate{}, cap: capPerEndpoint, fastCap: max(fastCap, capPerEndpoint),
		threshold: threshold, cooldown: cooldown, deferFor: deferFor, nodes: 1}
}

// rateSlack is added to the due time of a claim turned away by the rate
// limit, so that it comes back just after its token, not just before.
const rateSlack = 2 * time.Millisecond

// admitOrPark reports whether an attempt of the claim may start now; if
// not, retryAt says when to try again — except that a claim turned away
// only because its endpoint is at the cap is parked (parked = true) while
// there is room. An admitted attempt must be followed by exactly one call
// to done.
// Both happen under one lock, so a parked claim can never miss the finish
// of the attempt that would take it.
func (g *gate) admitOrPark(c store.Claim, now time.Time) (ok, parked bool, retryAt time.Time, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ok, retryAt, reason = g.admitLocked(c.Endpoint.ID, c.Endpoint.RateLimitPerSecond, now)
	if !ok && reason == "concurrency_cap" {
		e := g.eps[c.Endpoint.ID]
		// Only behind an attempt in flight, whose end takes the parked claim
		// (with a share of 0 nothing is in flight).
		if e.inflight > 0 && len(e.parked) < max(1, e.maxInflight(g)/4) {
			e.parked = append(e.parked, c)
			return false, true, time.Time{}, reason
		}
	}
	return ok, false, retryAt, reason
}

// next takes the endpoint's oldest parked claim, if any.
func (g *gate) next(endpointID string) (store.Claim, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.eps[endpointID]
	if e == nil || len(e.parked) == 0 {
		return store.Claim{}, false
	}
	c := e.parked[0]
	e.parked = e.parked[1:]
	return c, true
}

// unparkAll takes every parked claim of the endpoint (its circuit opened).
func (g *gate) unparkAll(endpointID string) []store.Claim {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.eps[endpointID]
	if e == nil {
		return nil
	}
	out := e.parked
	e.parked = nil
	return out
}

func (g *gate) admitLocked(endpointID string, ratePerSecond int, now time.Time) (ok bool, retryAt time.Time, reason string) {
	e := g.eps[endpointID]
	if e == nil {
		e = &endpointGate{}
		g.eps[endpointID] = e
	}
	if !e.openUntil.IsZero() {
		if now.Before(e.openUntil) {
			return false, e.openUntil, "circuit_open"
		}
		if e.probing {
			return false, now.Add(g.deferFor), "circuit_half_open"
		}
	}
	if e.inflight >= e.maxInflight(g) {
		return false, now.Add(g.deferFor), "concurrency_cap"
	}
	if ratePerSecond > 0 {
		if g.nodes == 0 {
			return false, now.Add(g.deferFor), "rate_limit" // no share of the rate
		}
		if e.limiter == nil || e.limit != ratePerSecond || e.limNodes != g.nodes {
			limit, burst := rateShare(ratePerSecond, g.nodes)
			if e.limiter == nil {
				e.limiter = rate.NewLimiter(limit, burst)
			} else { // the endpoint's rate or the cluster changed: keep the tokens
				e.limiter.SetLimitAt(now, limit)
				e.limiter.SetBurstAt(now, burst)
			}
			e.limit, e.limNodes = ratePerSecond, g.nodes
		}
		r := e.limiter.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			// Spread the claims turned away over the coming tokens, one per
			// token, instead of sending them all back for the next one (of
			// which all but one would be turned away again).
			at := now.Add(d + rateSlack)
			if at.Before(e.nextSlot) {
				at = e.nextSlot
			}
			e.nextSlot = at.Add(time.Duration(float64(time.Second) / float64(e.limiter.Limit())))
			return false, at, "rate_limit"
		}
	} else {
		e.limiter = nil
	}
	if !e.openUntil.IsZero() {
		e.probing = true // the circuit's cooldown passed: this is the probe
	}
	e.inflight++
	return true, time.Time{}, ""
}

// done records the end of an admitted attempt that took took. failed is a
// transport-level failure (no answer, or 5xx). It returns the time until which the circuit
// is now open (zero if it is closed), and whether this call opened it.
func (g *gate) done(endpointID string, failed bool, took time.Duration, now time.Time) (openUntil time.Time, opened bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.eps[endpointID]
	if e == nil {
		return time.Time{}, false
	}
	e.inflight--
	if !failed && took < fastAnswer {
		e.fast++
	} else {
		e.fast = 0
	}
	wasProbe := e.probing
	e.probing = false
	if !failed {
		e.failures = 0
		e.openUntil = time.Time{}
		if e.inflight == 0 && e.limiter == nil && len(e.parked) == 0 && e.fast == 0 {
			delete(g.eps, endpointID) // keep the map small
		}
		return time.Time{}, false
	}
	e.failures++
	if wasProbe || (e.failures >= g.threshold && e.openUntil.IsZero()) {
		e.openUntil = now.Add(g.cooldown)
		return e.openUntil, true
	}
	return e.openUntil, false
}
