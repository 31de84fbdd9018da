package delivery

import (
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/metrics"
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

	// Caps above the endpoint (0 = none): attempts in flight per tenant
	// and per destination host, counted for every attempt but enforced
	// only on endpoints that have not proven fast (see admitLocked).
	tenantCap, hostCap int
	tenants, hosts     map[string]*groupGate
	// maxDefer bounds the adaptive wait of a claim turned away at a cap
	// (the attempt timeout: no slot stays taken longer).
	maxDefer time.Duration
}

// groupGate is the state of a tenant or a destination host.
type groupGate struct {
	inflight  int
	avg       time.Duration // moving average of its attempts' durations
	busySince time.Time     // when inflight last went from 0 to 1
	nextDefer time.Time     // due time for the next claim turned away at its cap
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
	parked    []job         // waiting for one of the endpoint's attempts to finish (with their tokens)
	fast      int           // consecutive fast answers (2xx–4xx within fastAnswer)
	avg       time.Duration // moving average of its attempts' durations (0 = none yet)
	busySince time.Time     // when inflight last went from 0 to 1
	nextDefer time.Time     // due time for the next claim turned away at its cap
	tenant    string        // the tenant and host its attempts in flight count for
	host      string
}

// avgWeight is the weight of the newest duration in the moving averages
// (an exponentially weighted moving average over about the last 4).
const avgWeight = 4

func updateAvg(avg *time.Duration, took time.Duration) {
	if *avg == 0 {
		*avg = max(took, time.Microsecond)
		return
	}
	*avg += (took - *avg) / avgWeight
}

// minDefer is the shortest adaptive wait of a claim turned away at a cap.
const minDefer = 5 * time.Millisecond

// capDefer is when a claim turned away at a cap of c attempts in flight
// should come back, the attempts there lasting avg on average: one slot
// frees about every avg/c, so successive claims turned away come back one
// per expected free slot (next keeps the slot handed out last). Before any
// attempt there has ended (avg == 0), every attempt admitted since
// busySince is still in flight, so the oldest has lasted now − busySince
// and none is known to be faster: that age stands for avg (a black hole is
// recognized as slow long before its first timeout). With neither, the
// wait is fallback (DeferDelay). The interval is bounded by [minDefer,
// maxDefer].
func capDefer(now time.Time, avg time.Duration, busySince time.Time, c int, next *time.Time, fallback, maxDefer time.Duration) time.Time {
	if avg == 0 {
		if busySince.IsZero() || !now.After(busySince) {
			return now.Add(fallback)
		}
		avg = now.Sub(busySince)
	}
	step := avg / time.Duration(max(1, c))
	step = max(step, minDefer)
	if maxDefer > 0 {
		step = min(step, maxDefer)
	}
	at := now.Add(step)
	if at.Before(*next) {
		at = *next
	}
	*next = at.Add(step)
	return at
}

// admitKey is what the gate needs of a claim.
type admitKey struct {
	endpoint, tenant, url string
	rate                  int // the endpoint's rate limit per second (0 = none)
}

func keyOf(c store.Claim) admitKey {
	return admitKey{endpoint: c.Endpoint.ID, tenant: c.Delivery.Tenant, url: c.Endpoint.URL, rate: c.Endpoint.RateLimitPerSecond}
}

// hostOf is the host (with port, if any) an endpoint URL sends to.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Host)
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
		threshold: threshold, cooldown: cooldown, deferFor: deferFor, nodes: 1,
		tenants: map[string]*groupGate{}, hosts: map[string]*groupGate{}}
}

// withGroupCaps sets the caps per tenant and per host (0 = none) and the
// longest adaptive wait.
func (g *gate) withGroupCaps(tenantCap, hostCap int, maxDefer time.Duration) *gate {
	g.tenantCap, g.hostCap, g.maxDefer = tenantCap, hostCap, maxDefer
	return g
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
func (g *gate) admitOrPark(c job, now time.Time) (ok, parked bool, retryAt time.Time, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ok, retryAt, reason = g.admitLocked(keyOf(c.Claim), now)
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
func (g *gate) next(endpointID string) (job, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.eps[endpointID]
	if e == nil || len(e.parked) == 0 {
		return job{}, false
	}
	c := e.parked[0]
	e.parked = e.parked[1:]
	return c, true
}

// unparkAll takes every parked claim of the endpoint (its circuit opened).
func (g *gate) unparkAll(endpointID string) []job {
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

func (g *gate) admitLocked(k admitKey, now time.Time) (ok bool, retryAt time.Time, reason string) {
	endpointID, ratePerSecond := k.endpoint, k.rate
	e := g.eps[endpointID]
	if e == nil {
		e = &endpointGate{}
		g.eps[endpointID] = e
	}
	if e.inflight == 0 {
		// Attempts in flight count for the tenant and host they were
		// admitted under; a changed URL applies once they have ended.
		e.tenant = k.tenant
		if g.hostCap > 0 {
			e.host = hostOf(k.url)
		}
	}
	if !e.openUntil.IsZero() {
		if now.Before(e.openUntil) {
			return false, e.openUntil, "circuit_open"
		}
		if e.probing {
			return false, now.Add(g.deferFor), "circuit_half_open"
		}
	}
	if c := e.maxInflight(g); e.inflight >= c {
		return false, capDefer(now, e.avg, e.busySince, c, &e.nextDefer, g.deferFor, g.maxDefer), "concurrency_cap"
	}
	// The caps above the endpoint hold back endpoints that have not proven
	// fast: those are the ones that keep workers (a fast answer gives its
	// worker back within fastAnswer), so a tenant's or a host's slow or
	// black-holed endpoints together hold at most the cap, whatever their
	// number.
	var tg, hg *groupGate
	if g.tenantCap > 0 {
		tg = group(g.tenants, e.tenant)
		if c := capShare(g.tenantCap, g.rank, g.nodes); e.fast < fastProof && tg.inflight >= c {
			return false, capDefer(now, tg.avg, tg.busySince, c, &tg.nextDefer, g.deferFor, g.maxDefer), "tenant_cap"
		}
	}
	if g.hostCap > 0 {
		hg = group(g.hosts, e.host)
		if c := capShare(g.hostCap, g.rank, g.nodes); e.fast < fastProof && hg.inflight >= c {
			return false, capDefer(now, hg.avg, hg.busySince, c, &hg.nextDefer, g.deferFor, g.maxDefer), "host_cap"
		}
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
	if e.inflight == 0 {
		e.busySince = now
	}
	e.inflight++
	for _, gg := range []*groupGate{tg, hg} {
		if gg == nil {
			continue
		}
		if gg.inflight == 0 {
			gg.busySince = now
		}
		gg.inflight++
	}
	return true, time.Time{}, ""
}

func group(m map[string]*groupGate, key string) *groupGate {
	gg := m[key]
	if gg == nil {
		gg = &groupGate{}
		m[key] = gg
	}
	return gg
}

// groupDone records the end of an attempt of a tenant or host.
func (g *gate) groupDone(m map[string]*groupGate, key string, took time.Duration) {
	gg := m[key]
	if gg == nil {
		return
	}
	gg.inflight--
	updateAvg(&gg.avg, took)
	if gg.inflight <= 0 && gg.avg < fastAnswer {
		delete(m, key) // nothing worth keeping: keep the map small
	}
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
	updateAvg(&e.avg, took)
	if g.tenantCap > 0 {
		g.groupDone(g.tenants, e.tenant, took)
	}
	if g.hostCap > 0 {
		g.groupDone(g.hosts, e.host, took)
	}
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
		if e.inflight == 0 && e.limiter == nil && len(e.parked) == 0 && e.fast == 0 && e.avg < fastAnswer {
			delete(g.eps, endpointID) // nothing worth keeping: keep the map small
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

// inFlight counts the attempts in flight on this node, the tenants they
// are for and the most of any one tenant (the in-flight gauges, read at a
// scrape: O(endpoints known to the gate) under the gate's lock).
func (g *gate) inFlight() metrics.InFlight {
	g.mu.Lock()
	defer g.mu.Unlock()
	var v metrics.InFlight
	per := map[string]int{}
	for _, e := range g.eps {
		if e.inflight > 0 {
			v.Total += e.inflight
			per[e.tenant] += e.inflight
		}
	}
	v.Tenants = len(per)
	for _, n := range per {
		v.TenantMax = max(v.TenantMax, n)
	}
	return v
}

// Circuit breaker states (CircuitState.State).
const (
	CircuitClosed   = "closed"    // attempts go out; Failures counts the consecutive failures so far
	CircuitOpen     = "open"      // no attempt until OpenUntil (the cooldown's end)
	CircuitHalfOpen = "half_open" // the cooldown ended: the next attempt is a probe (or one is in flight)
)

// CircuitState is an endpoint's circuit breaker as this node sees it at
// one instant. The breaker lives in each node's memory: another node may
// see the same endpoint in another state.
type CircuitState struct {
	State     string    // CircuitClosed, CircuitOpen or CircuitHalfOpen
	Failures  int       // consecutive transport-level failures (no answer, or 5xx)
	Threshold int       // consecutive failures that open the circuit
	OpenUntil time.Time // open or half-open: when the (last) cooldown ends; zero when closed
	Probing   bool      // half-open: a probe attempt is in flight
}

// circuit returns the endpoint's breaker state at now.
func (g *gate) circuit(endpointID string, now time.Time) CircuitState {
	g.mu.Lock()
	defer g.mu.Unlock()
	cs := CircuitState{State: CircuitClosed, Threshold: g.threshold}
	e := g.eps[endpointID]
	if e == nil {
		return cs
	}
	cs.Failures = e.failures
	if e.openUntil.IsZero() {
		return cs
	}
	cs.OpenUntil, cs.Probing = e.openUntil, e.probing
	if now.Before(e.openUntil) {
		cs.State = CircuitOpen
	} else {
		cs.State = CircuitHalfOpen
	}
	return cs
}

// Circuit reports an endpoint's circuit breaker state on this node now.
func (e *Engine) Circuit(endpointID string) CircuitState {
	return e.gate.circuit(endpointID, e.cfg.Clock.Now())
}
