package delivery

import (
	"math"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// Admission is one concept: the scheduler decides what may run now, the
// engine runs it. For each claim a worker asks the scheduler once (admit)
// and acts on the decision: run the attempt, defer the claim to the time
// given, or leave it parked with the scheduler. When the attempt ends the
// worker hands its grant back once (release), which returns the capacity,
// feeds the circuit breaker and the moving averages, and tells the worker
// what to do next: the endpoint's next parked claim (already decided), the
// parked claims to put back (the circuit opened, or the node is stopping),
// and whether the endpoint's deliveries are to be postponed in the store.
//
// The scheduler keeps one endpoint from taking more than its share of the
// workers: a per-endpoint concurrency cap, caps per tenant and per
// destination host, the endpoint's rate limit (x/time/rate), and a circuit
// breaker that stops attempts to an endpoint that keeps failing at the
// transport level (timeouts, refused connections, 5xx) until a cooldown has
// passed, then lets a single probe through (half-open).
//
// A claim that finds its endpoint at the cap is parked in memory (up to a
// quarter of the cap per endpoint): the release of an attempt to that
// endpoint decides on the oldest parked claim at once, with no database
// round trip, and the worker that ran the attempt carries it out. A parked
// claim holds no worker, and waits at most about one attempt timeout, well
// inside its lease. A claim turned away otherwise (rate limit, open
// circuit, parking full, tenant or host cap) is deferred: its lease is
// released with a new due time and no attempt is consumed, so its retry
// schedule (attempt count, dead-lettering) is unchanged, and the workers
// stay free for other endpoints.
//
// The state is per node. With several nodes on one database, each node
// applies its share of the caps and of the rate limit (setShare; see
// cluster.go), so they hold across the cluster.
//
// The scheduler never reads a clock: every method takes now from the
// engine's Clock, so tests drive it through any sequence of instants.
//
// Lock order: scheduler.mu only; no other lock is taken while holding it.
type scheduler struct {
	mu        sync.Mutex
	eps       map[string]*endpointState
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
	tenants, hosts     map[string]*groupState
	// full holds the tenants whose attempts in flight reached their cap
	// share at an admission (a superset of those at it: skipTenants drops
	// the ones below it), so the skip list is built without walking every
	// tenant.
	full map[string]struct{}
	// lifted: a tenant reported by skipTenants has fallen below its cap
	// or has proven an endpoint fast since; release hands it to the worker
	// (followUp.wake), which wakes the claimer.
	lifted bool
	// ended holds the endpoints whose state was dropped (nothing worth
	// keeping) after one of their attempts had ended: their state, made
	// again, does not slow-start (endpointState.ended). An id is a few
	// dozen bytes; it leaves the set when its state is made again.
	ended map[string]struct{}
	// maxDefer bounds the adaptive wait of a claim turned away at a cap
	// (the attempt timeout: no slot stays taken longer).
	maxDefer time.Duration
}

// Reasons a claim is deferred: the reason label of
// herald_deliveries_deferred_total (docs/operations.md, "Metrics").
const (
	reasonConcurrencyCap  = "concurrency_cap"   // its endpoint's cap, with parking full
	reasonTenantCap       = "tenant_cap"        // its tenant's cap
	reasonHostCap         = "host_cap"          // its destination host's cap
	reasonRateLimit       = "rate_limit"        // its endpoint's rate limit (or no share of it)
	reasonCircuitOpen     = "circuit_open"      // its endpoint's circuit is open
	reasonCircuitHalfOpen = "circuit_half_open" // the half-open circuit's probe is in flight
	reasonShutdown        = "shutdown"          // the node is stopping before its turn
	reasonEndpointChanged = "endpoint_changed"  // parked or claimed ahead while its endpoint was paused, disabled or deleted
	reasonLeaseExpired    = "lease_expired"     // claimed ahead: its lease ran out while it waited in line
	reasonRenewalFailed   = "renewal_failed"    // claimed ahead: its lease could not be renewed (the database did not answer)
)

// verdict is what the scheduler decided for a claim.
type verdict uint8

const (
	// run: attempt it now; the decision's grant is released once the
	// attempt ends.
	run verdict = iota + 1
	// deferred: put it back without an attempt, due at the decision's at.
	deferred
	// parked: the scheduler holds it, with its worker token, until an
	// attempt to its endpoint ends (release decides on it then).
	parked
)

// decision is the scheduler's answer for one claim.
type decision struct {
	verdict verdict
	job     job       // the claim decided on, with its worker token
	grant   *grant    // run: the capacity the attempt holds
	at      time.Time // deferred: when the claim is due again
	reason  string    // deferred: why (reason… constants)
	// hold: run, and the attempt is the half-open circuit's probe: the
	// worker holds the endpoint's due backlog in the store until hold,
	// the probe's deadline (released by followUp.handBack).
	hold time.Time
}

// congested reports a deferral at a concurrency cap: claims are outrunning
// what the endpoints can take, and the claimer should wait for an attempt
// to end before claiming more.
func (d decision) congested() bool {
	return d.verdict == deferred && (d.reason == reasonConcurrencyCap || d.reason == reasonTenantCap || d.reason == reasonHostCap)
}

// grant is the capacity one admitted attempt holds: a place under its
// endpoint's cap (and its tenant's and host's), or the probe of a
// half-open circuit. It goes back exactly once, by release; a second
// release panics, as it would let more attempts run than the caps allow.
type grant struct {
	endpoint string
	// probeSeq is the endpoint's probeSeq when the attempt was admitted:
	// the attempt is the half-open circuit's probe while the endpoint
	// probes with that number (isProbe). Only the probe's end decides the
	// circuit: an attempt begun before the circuit opened may end during
	// the probe (a black hole's, at its timeout) and must not re-open the
	// circuit and let a second probe out beside the first.
	probeSeq uint64
	released bool // under scheduler.mu
}

// outcome is what release needs of an ended attempt.
type outcome struct {
	// failed is a transport-level failure (no answer, or 5xx): it counts
	// toward opening the circuit; anything else closes it.
	failed bool
	// took is the attempt's duration: it feeds the moving averages of the
	// adaptive defer delay and the endpoint's proof of being fast.
	took time.Duration
	// cancelled: no attempt ran (the parked claim's endpoint was paused,
	// disabled or deleted meanwhile): the grant's capacity is returned
	// without feeding the breaker or the averages.
	cancelled bool
}

// followUp is what the worker that ran an attempt does once it ended.
type followUp struct {
	// next is the decision on the endpoint's oldest parked claim, taken
	// off the parking (verdict 0: none to take).
	next decision
	// putBack are the endpoint's parked claims to defer: every one when
	// its circuit opened (due when the cooldown ends) or when the node is
	// stopping (due now).
	putBack []decision
	// opened: this release opened the endpoint's circuit until openUntil;
	// the engine postpones the endpoint's due deliveries in the store.
	opened    bool
	openUntil time.Time
	// wake: a tenant the claims skip (skipTenants) may be claimed again:
	// wake the claimer, so its due deliveries need not wait for the poll.
	wake bool
	// handBack: the half-open circuit whose probe held the endpoint's
	// backlog closed, re-opened or lost its probe: the held deliveries are
	// due now (closed, or no probe) or when the new cooldown ends.
	handBack *backlogMove
	// pullIn: the endpoint's attempts have become far faster than the
	// pace some of its claims turned away at its cap were spaced by: its
	// deliveries deferred within that schedule are spaced again at the new
	// pace (see pullInFactor).
	pullIn *backlogMove
}

// groupState is the state of a tenant or a destination host.
type groupState struct {
	inflight  int
	avg       time.Duration // moving average of its attempts' durations
	busySince time.Time     // when inflight last went from 0 to 1
	deferrals deferChain    // the claims turned away at its cap
	// Tenants only: fast counts the tenant's endpoints known to the
	// scheduler that have proven fast (endpointState.fast >= fastProof),
	// and skipped is set while skipTenants has reported the tenant and no
	// release has lifted it since.
	fast    int
	skipped bool
}

// endpointState is the state of an endpoint.
type endpointState struct {
	inflight  int
	failures  int       // consecutive transport-level failures
	openUntil time.Time // circuit open until then; zero = closed
	probing   bool      // half-open: one probe in flight
	probeSeq  uint64    // probes let out so far (the one in flight has this number)
	ended     bool      // one of its attempts has ended on this node: its slow start is over
	// holdUntil: the probe in flight holds the endpoint's due backlog in
	// the store until then (its deadline); claims that meet the backlog
	// anyway are deferred to it. Zero: nothing held.
	holdUntil time.Time
	// holding: the probe's worker has not yet written the hold
	// (holdWritten); a hand-back decided meanwhile waits in pendingBack
	// for it, or it would run first and leave the hold in place.
	holding     bool
	pendingBack *backlogMove
	limiter     *rate.Limiter
	limit       int           // the endpoint's rate limit per second the limiter was made for
	limNodes    int           // the nodes count the limiter's share was made for
	nextSlot    time.Time     // due time for the next claim turned away by the rate limit
	parked      []job         // waiting for one of the endpoint's attempts to finish (with their tokens)
	fast        int           // consecutive fast answers (2xx–4xx within fastAnswer)
	avg         time.Duration // moving average of its attempts' durations (0 = none yet)
	busySince   time.Time     // when inflight last went from 0 to 1
	deferrals   deferChain    // the claims turned away at its cap
	pullRest    pullRest      // what the last pull-in left of its schedule
	tenant      string        // the tenant and host its attempts in flight count for
	host        string
	// seen is the newest UpdatedAt of the endpoint its claims brought
	// (admitLocked: a resume closes the circuit).
	seen time.Time
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

// deferChain is the schedule of the claims turned away at one cap: next
// is the due time for the next one; avg is the slowest average of the
// attempts there (moving average, or the oldest attempt's age before any
// ended) among the deferrals since the schedule was last empty (next
// passed) or pulled in: the pace some of them were spaced by.
type deferChain struct {
	next time.Time
	avg  time.Duration
}

// capDefer is when a claim turned away at a cap of c attempts in flight
// should come back, the attempts there lasting avg on average: one slot
// frees about every avg/c, so successive claims turned away come back one
// per expected free slot (chain keeps the slot handed out last). Before any
// attempt there has ended (avg == 0), every attempt admitted since
// busySince is still in flight, so the oldest has lasted now − busySince
// and none is known to be faster: that age stands for avg (a black hole is
// recognized as slow long before its first timeout). With neither, the
// wait is fallback (DeferDelay). A claim comes back no sooner than
// minDefer and one slot is at most maxDefer; successive claims are spaced
// by the slot itself, however short: with the spacing floored at minDefer
// too, a tenant at its cap whose attempts take 2 ms over a cap of 32 (a
// slot every 60 µs) got its surplus back at 200 claims/s, and the last
// 4,000 deliveries of a fan-out crawled for 20 s (herald bench fanout).
func capDefer(now time.Time, avg time.Duration, busySince time.Time, c int, chain *deferChain, fallback, maxDefer time.Duration) time.Time {
	if avg == 0 {
		if busySince.IsZero() || !now.After(busySince) {
			return now.Add(fallback)
		}
		avg = now.Sub(busySince)
	}
	step := avg / time.Duration(max(1, c))
	if maxDefer > 0 {
		step = min(step, maxDefer)
	}
	at := now.Add(max(step, minDefer))
	if at.Before(chain.next) {
		at = chain.next
		chain.avg = max(chain.avg, avg)
	} else {
		chain.avg = avg // the schedule was empty: it starts here
	}
	chain.next = at.Add(step)
	return at
}

// A pull-in: an endpoint whose attempts have become pullInFactor times
// faster than the slowest pace among its claims turned away at its cap
// still to come (a cold start: first answers in seconds, then in
// milliseconds) has its deliveries deferred within that schedule spaced
// again at its new pace, from now: at most pullInMax of them, the earliest
// due first, one per expected free slot (average / cap), as if they had
// been turned away now. Without it, the deliveries deferred while the
// first answers were slow came back at that pace: 200 deliveries, first
// answer 5 s then 100 ms, drained in 30 s where the cap allows about 6
// (TestColdStartPullsInItsDeferrals). Only deliveries not attempted since
// they were created or replayed move, so no retry's backoff is shortened;
// a schedule reaching less than pullInAhead ahead is left to come due. The
// comparison is of attempt durations, not of paces (duration / cap): an
// endpoint lifted to its fast cap answers no faster, and pulled in on that
// alone, answers straddling fastAnswer turned 2,000 deliveries away 14
// times each; spaced again rather than all due at once, the deliveries
// pulled in are not turned away again when the endpoint slows down once
// more (TestPullInChurn).
const (
	pullInFactor = 4
	pullInAhead  = time.Second
	pullInMax    = 1024
)

// pullInLocked returns the pull-in of endpoint id's deferred claims at now,
// or nil (see pullInFactor): of the rest a previous pull-in left
// (pullRest), else of the schedule, which then starts afresh at now; once
// the pull-in is written, pulledIn extends the schedule past the
// deliveries it moved.
func (s *scheduler) pullInLocked(id string, e *endpointState, now time.Time) *backlogMove {
	if e.avg <= 0 {
		return nil
	}
	ch, rest := &e.deferrals, &e.pullRest
	m := &backlogMove{endpointID: id, at: now, pullIn: true}
	switch {
	case e.avg*pullInFactor <= rest.avg && rest.to.Sub(now) >= pullInAhead:
		// The rest of a schedule a pull-in moved only the first pullInMax
		// of: the next ones, spaced after the current schedule.
		// Read from the current schedule's end: the claims turned away
		// since the last pull-in are due before it, at the new pace
		// already (found by review: read from rest.from they took the
		// first of the 1,024 and were spaced after themselves).
		m.dueFrom, m.dueTo, m.srcAvg = rest.from, rest.to, rest.avg
		if ch.next.After(now) {
			m.at = ch.next
		}
		if m.dueFrom.Before(m.at) {
			m.dueFrom = m.at
		}
		*rest = pullRest{}
	case e.avg*pullInFactor <= ch.avg && ch.next.Sub(now) >= pullInAhead:
		m.dueFrom, m.dueTo, m.srcAvg = now, ch.next, ch.avg
		*ch = deferChain{}
	default:
		return nil
	}
	m.spacing = e.avg / time.Duration(max(1, e.maxInflight(s)))
	if s.maxDefer > 0 {
		m.spacing = min(m.spacing, s.maxDefer)
	}
	// The store keeps whole microseconds: a spacing under one put every
	// moved delivery at m.at, and the rest's next window began there and
	// read them again, pull-in after pull-in (found by review: one
	// delivery moved 151 times).
	m.spacing = max(m.spacing, time.Microsecond).Truncate(time.Microsecond)
	return m
}

// pulledIn records that pull-in m moved n of endpoint m.endpointID's
// deliveries, spaced from m.at: claims turned away from now on come after
// them, and if the pull-in took all it could (pullInMax), the rest of the
// schedule it read is the next pull-in's.
func (s *scheduler) pulledIn(m backlogMove, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.eps[m.endpointID]
	if e == nil {
		return
	}
	end := m.at.Add(time.Duration(n) * m.spacing)
	if ch := &e.deferrals; end.After(ch.next) {
		ch.next = end
		ch.avg = max(ch.avg, e.avg)
	}
	if n >= pullInMax {
		// From just after the last moved slot: the moved deliveries are
		// not the rest.
		e.pullRest = pullRest{from: end.Add(time.Microsecond), to: m.dueTo, avg: m.srcAvg}
	}
}

// pullRest is the part of a deferral schedule a pull-in left for the next
// one (it moved pullInMax): the deliveries due from from to to, spaced by
// attempts lasting avg.
type pullRest struct {
	from, to time.Time
	avg      time.Duration
}

// admitKey is what the scheduler needs of a claim.
type admitKey struct {
	endpoint, tenant, url string
	rate                  int // the endpoint's rate limit per second (0 = none)
	// updated and newStreak are the claimed endpoint's UpdatedAt and
	// whether the store has no failure streak for it (FailingSince zero):
	// see admitLocked's reset of the circuit.
	updated   time.Time
	newStreak bool
}

func keyOf(c store.Claim) admitKey {
	return admitKey{endpoint: c.Endpoint.ID, tenant: c.Delivery.Tenant, url: c.Endpoint.URL, rate: c.Endpoint.RateLimitPerSecond,
		updated: c.Endpoint.UpdatedAt, newStreak: c.Endpoint.FailingSince.IsZero()}
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

// slowStart is the cap of an endpoint none of whose attempts has ended on
// this node yet (its speed unknown), under a tenant cap: a black hole
// holds at most this many workers (and parks no claim) until its first
// attempt times out, instead of its full cap plus a quarter parked.
// Without it a tenant's black holes met first (their backlog the tenant's
// oldest due) filled the tenant's cap before its healthy endpoints had
// answered once, and the claims then skipped the tenant until the black
// holes' attempts timed out (herald bench isolation --blackholes-first:
// the healthy endpoints' throughput fell to a tenth). More black holes
// than half the tenant's cap share still fill it. The first attempt to
// end lifts the endpoint to its cap.
const slowStart = 2

func (e *endpointState) maxInflight(s *scheduler) int {
	if e.fast >= fastProof {
		return s.fastCap
	}
	c := capShare(s.cap, s.rank, s.nodes)
	if e.slowStarting(s) {
		return min(c, slowStart)
	}
	return c
}

// slowStarting reports whether e is held to slowStart: a tenant cap is set
// and none of e's attempts has ended on this node. Such an endpoint parks
// no claim either (a parked claim holds a worker token), so a tenant's
// endpoints of unknown speed hold no more tokens than its cap.
func (e *endpointState) slowStarting(s *scheduler) bool {
	return s.tenantCap > 0 && !e.ended
}

// setShare records this node's rank among nodes live nodes (nodes == 0:
// it holds no share of the endpoints' caps and rate limits). It reports
// whether a tenant the claims skip is below its new cap share (the claimer
// is to be woken).
func (s *scheduler) setShare(rank, nodes int) (wake bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rank == rank && s.nodes == nodes {
		return false
	}
	if nodes == 0 {
		// No share of the rate limits: the buckets go, or they would keep
		// accruing and the node would come back with full ones beside the
		// others' (TestRateLimitBoundAcrossJoin).
		for _, e := range s.eps {
			e.limiter = nil
		}
	}
	s.rank, s.nodes = rank, nodes
	if s.tenantCap <= 0 {
		return false
	}
	// The share changed: which tenants are at it may have too.
	c := capShare(s.tenantCap, s.rank, s.nodes)
	clear(s.full)
	for t, g := range s.tenants {
		if c > 0 && g.inflight >= c {
			s.full[t] = struct{}{}
		}
		s.liftLocked(g)
	}
	wake, s.lifted = s.lifted, false
	return wake
}

// skipTenants returns buf[:0] with the tenants whose every claim this node
// would turn away now (store.ClaimParams.SkipTenants): those with attempts
// in flight at or above their cap share (capShare of the tenant cap), no
// endpoint proven fast on this node, and slots that free slowly (one about
// every skipFrom or more, slotInterval). A tenant with a proven-fast
// endpoint is still claimed: its fast endpoints bypass the tenant cap
// (admitLocked). Each tenant reported is marked, so the release that
// brings it below its cap (or proves one of its endpoints fast) wakes the
// claimer (followUp.wake). It walks only the tenants that reached their
// cap, under the scheduler's lock, and appends nothing (no allocation)
// when none is at it.
func (s *scheduler) skipTenants(buf []string, now time.Time) []string {
	buf = buf[:0]
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.full) == 0 {
		return buf
	}
	c := capShare(s.tenantCap, s.rank, s.nodes)
	for t := range s.full {
		g := s.tenants[t]
		if g == nil || c <= 0 || g.inflight < c {
			delete(s.full, t)
			continue
		}
		if g.fast == 0 && slotInterval(g, c, now) >= skipFrom {
			g.skipped = true
			buf = append(buf, t)
		}
	}
	return buf
}

// skipFrom is the slot interval (slotInterval) from which a tenant at its
// cap is skipped. A tenant whose attempts are quick at its cap (a fan-out
// to thousands of healthy endpoints not yet proven fast) frees a slot every
// fraction of a millisecond: skipping it made every claim wait for the
// release of one slot, a claim per delivery (herald bench fanout: A's
// 2,500 deliveries/s fell to 590/s); claiming it and turning its surplus
// away for a few milliseconds costs less. A tenant whose attempts hang
// (black holes: 10 s over a cap of 32, one slot every 300 ms) is skipped
// from about 10 ms × its cap after its first attempt began.
const skipFrom = 10 * time.Millisecond

// slotInterval estimates how often one of g's attempts in flight ends at
// a cap of c, as capDefer does: their average duration over c, or, before
// any has ended, the age of the oldest (now − busySince) over c.
func slotInterval(g *groupState, c int, now time.Time) time.Duration {
	avg := g.avg
	if avg == 0 {
		if g.busySince.IsZero() || !now.After(g.busySince) {
			return 0
		}
		avg = now.Sub(g.busySince)
	}
	return avg / time.Duration(max(1, c))
}

// liftLocked clears g's skipped mark, and records that the claimer is to
// be woken, once its tenant may be claimed again: below its cap share, or
// with an endpoint proven fast.
func (s *scheduler) liftLocked(g *groupState) {
	if g.skipped && (g.inflight < capShare(s.tenantCap, s.rank, s.nodes) || g.fast > 0) {
		g.skipped = false
		s.lifted = true
	}
}

// countFast records that an endpoint of tenant became proven fast (fast)
// or stopped being so.
func (s *scheduler) countFast(tenant string, fast bool) {
	g := group(s.tenants, tenant)
	if fast {
		g.fast++
		s.liftLocked(g)
	} else if g.fast > 0 {
		g.fast--
	}
}

func newScheduler(capPerEndpoint, fastCap, threshold int, cooldown, deferFor time.Duration) *scheduler {
	return &scheduler{eps: map[string]*endpointState{}, cap: capPerEndpoint, fastCap: max(fastCap, capPerEndpoint),
		threshold: threshold, cooldown: cooldown, deferFor: deferFor, nodes: 1,
		tenants: map[string]*groupState{}, hosts: map[string]*groupState{}, full: map[string]struct{}{}, ended: map[string]struct{}{}}
}

// withGroupCaps sets the caps per tenant and per host (0 = none) and the
// longest adaptive wait.
func (s *scheduler) withGroupCaps(tenantCap, hostCap int, maxDefer time.Duration) *scheduler {
	s.tenantCap, s.hostCap, s.maxDefer = tenantCap, hostCap, maxDefer
	return s
}

// probeSlack is added to the attempt timeout for the end of a half-open
// circuit's hold: the probe has ended by then, unless its worker was late
// or the hold itself took longer to write (a large backlog on a busy
// database): the claims that meet the backlog after the hold's end are
// deferred by DeferDelay, as without a hold.
const probeSlack = 250 * time.Millisecond

// rateSlack is added to the due time of a claim turned away by the rate
// limit, so that it comes back just after its token, not just before.
const rateSlack = 2 * time.Millisecond

// decide decides on a claim at now: run it (the decision's grant is then
// released exactly once, by release, when the attempt ends), defer it to
// the decision's at (with the reason), or park it — only a claim turned
// away because its endpoint is at its cap, while an attempt to the
// endpoint is in flight and the endpoint's parking (a quarter of its cap,
// at least 1) has room. Deciding and parking happen under one lock with
// release, so a parked claim can never miss the end of the attempt that
// would take it.
func (s *scheduler) decide(j job, now time.Time) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decideLocked(j, now)
}

func (s *scheduler) decideLocked(j job, now time.Time) decision {
	ok, retryAt, reason := s.admitLocked(keyOf(j.Claim), now)
	if ok {
		e := s.eps[j.Endpoint.ID]
		d := decision{verdict: run, job: j, grant: &grant{endpoint: j.Endpoint.ID, probeSeq: e.probeSeq}}
		if e.probing { // admitLocked lets no claim but the probe out while probing
			d.hold = e.holdUntil
		}
		return d
	}
	if reason == reasonConcurrencyCap {
		e := s.eps[j.Endpoint.ID]
		// Only behind an attempt in flight, whose release takes the parked
		// claim (with a share of 0 nothing is in flight).
		if e.inflight > 0 && !e.slowStarting(s) && len(e.parked) < max(1, e.maxInflight(s)/4) {
			e.parked = append(e.parked, j)
			return decision{verdict: parked, job: j}
		}
	}
	return decision{verdict: deferred, job: j, at: retryAt, reason: reason}
}

// release hands back the capacity of an attempt admitted with g that ended
// at now with out, and returns what the worker that ran it does next:
//
//   - the circuit opened (out.failed, at the threshold or on the probe):
//     every claim parked behind the endpoint is to be deferred to the
//     cooldown's end (circuit_open), and the endpoint's due deliveries
//     postponed in the store;
//   - stopping (the node is shutting down): every parked claim is to be
//     deferred, due at now (shutdown);
//   - otherwise the endpoint's oldest parked claim, if any, is taken off
//     the parking and decided on at now (it may run, park again at the
//     back, or be deferred).
//
// Besides, a half-open circuit's held backlog is handed back when its
// probe ends (handBack), and an attempt without a transport failure may
// pull in the endpoint's deferred deliveries (pullIn, see pullInFactor).
//
// A second release of the same grant panics.
func (s *scheduler) release(g *grant, out outcome, now time.Time, stopping bool) followUp {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.released {
		panic("delivery: an admission grant released twice")
	}
	g.released = true
	var f followUp
	probe := s.isProbe(g)
	var held time.Time
	if e := s.eps[g.endpoint]; e != nil {
		held = e.holdUntil
	}
	if out.cancelled {
		s.cancelLocked(g.endpoint, probe)
	} else {
		f.openUntil, f.opened = s.endLocked(g.endpoint, out.failed, out.took, now, probe)
		if !f.opened {
			f.openUntil = time.Time{}
		}
		if e := s.eps[g.endpoint]; e != nil && !out.failed {
			f.pullIn = s.pullInLocked(g.endpoint, e, now)
		}
	}
	f.wake, s.lifted = s.lifted, false
	e := s.eps[g.endpoint]
	if !held.IsZero() && (e == nil || !e.probing) {
		// The probe that held the backlog is over: closed (or no probe
		// left), the deliveries are due now; re-opened, when the new
		// cooldown ends (circuitOpened's postponement moves those due
		// before it; this moves them if the hold ends later).
		switch {
		case !f.opened:
			f.handBack = &backlogMove{endpointID: g.endpoint, dueFrom: held, dueTo: held, at: now}
		case held.After(f.openUntil):
			f.handBack = &backlogMove{endpointID: g.endpoint, dueFrom: held, dueTo: held, at: f.openUntil}
		}
		if e != nil {
			e.holdUntil = time.Time{}
			if e.holding { // the hold is still being written: after it
				e.pendingBack, f.handBack = f.handBack, nil
			}
		}
	}
	if e == nil || len(e.parked) == 0 {
		return f
	}
	switch {
	case f.opened:
		f.putBack = s.unparkAllLocked(e, f.openUntil, reasonCircuitOpen)
	case stopping:
		f.putBack = s.unparkAllLocked(e, now, reasonShutdown)
	default:
		j := e.parked[0]
		e.parked[0] = job{} // the backing array keeps no reference to the claim
		e.parked = e.parked[1:]
		f.next = s.decideLocked(j, now)
	}
	return f
}

// unparkAllLocked takes every parked claim of e, each to be deferred to at
// for reason.
func (s *scheduler) unparkAllLocked(e *endpointState, at time.Time, reason string) []decision {
	out := make([]decision, len(e.parked))
	for i, j := range e.parked {
		out[i] = decision{verdict: deferred, job: j, at: at, reason: reason}
	}
	e.parked = nil
	return out
}

// admitLocked applies the limits to a claim of k at now: ok, and the
// attempt is counted in flight; or not, and retryAt is when the claim
// should come back, reason why (reason… constants). The order is circuit,
// endpoint cap, tenant cap, host cap, rate limit (docs/operations.md, "How
// the caps interact").
func (s *scheduler) admitLocked(k admitKey, now time.Time) (ok bool, retryAt time.Time, reason string) {
	endpointID, ratePerSecond := k.endpoint, k.rate
	e := s.eps[endpointID]
	if e == nil {
		e = &endpointState{}
		if _, ok := s.ended[endpointID]; ok {
			e.ended = true
			delete(s.ended, endpointID)
		}
		s.eps[endpointID] = e
	}
	if k.updated.After(e.seen) {
		if k.newStreak && (e.failures > 0 || !e.openUntil.IsZero()) {
			// The endpoint changed since this node last saw it, and the
			// store ended its failure streak: an operator resumed or
			// enabled it (or gave it a new URL). The breaker starts
			// afresh too, on every node (each learns it from its next
			// claim): the deliveries a resume released are due now, and
			// an open circuit would defer them to its cooldown's end. A
			// probe in flight is one no longer, as after a success.
			e.failures, e.openUntil, e.probing = 0, time.Time{}, false
		}
		e.seen = k.updated
	}
	if e.inflight == 0 {
		// Attempts in flight count for the tenant and host they were
		// admitted under; a changed URL applies once they have ended.
		if s.tenantCap > 0 && e.fast >= fastProof && e.tenant != k.tenant {
			s.countFast(e.tenant, false)
			s.countFast(k.tenant, true)
		}
		e.tenant = k.tenant
		if s.hostCap > 0 {
			e.host = hostOf(k.url)
		}
	}
	if !e.openUntil.IsZero() {
		if now.Before(e.openUntil) {
			return false, e.openUntil, reasonCircuitOpen
		}
		if e.probing {
			if now.Before(e.holdUntil) {
				return false, e.holdUntil, reasonCircuitHalfOpen
			}
			return false, now.Add(s.deferFor), reasonCircuitHalfOpen
		}
	}
	if c := e.maxInflight(s); e.inflight >= c {
		// Claims turned away at slow start come back spaced by the slots
		// of the endpoint's cap: slow start's 2 is a probe, not what the
		// endpoint takes once it answers. Spaced by 2, a backlog met at
		// slow start was spread over eight times its drain (200
		// deliveries to a 1.5 s endpoint over 45 s instead of 19).
		spacing := c
		if e.slowStarting(s) {
			spacing = capShare(s.cap, s.rank, s.nodes)
		}
		return false, capDefer(now, e.avg, e.busySince, spacing, &e.deferrals, s.deferFor, s.maxDefer), reasonConcurrencyCap
	}
	// The caps above the endpoint hold back endpoints that have not proven
	// fast: those are the ones that keep workers (a fast answer gives its
	// worker back within fastAnswer), so a tenant's or a host's slow or
	// black-holed endpoints together hold at most the cap, whatever their
	// number.
	var tg, hg *groupState
	if s.tenantCap > 0 {
		tg = group(s.tenants, e.tenant)
		if c := capShare(s.tenantCap, s.rank, s.nodes); e.fast < fastProof && tg.inflight >= c {
			return false, capDefer(now, tg.avg, tg.busySince, c, &tg.deferrals, s.deferFor, s.maxDefer), reasonTenantCap
		}
	}
	if s.hostCap > 0 {
		hg = group(s.hosts, e.host)
		if c := capShare(s.hostCap, s.rank, s.nodes); e.fast < fastProof && hg.inflight >= c {
			return false, capDefer(now, hg.avg, hg.busySince, c, &hg.deferrals, s.deferFor, s.maxDefer), reasonHostCap
		}
	}
	if ratePerSecond > 0 {
		if s.nodes == 0 {
			return false, now.Add(s.deferFor), reasonRateLimit // no share of the rate (setShare dropped the buckets)
		}
		if e.limiter == nil || e.limit != ratePerSecond || e.limNodes != s.nodes {
			limit, burst := rateShare(ratePerSecond, s.nodes)
			if e.limiter == nil {
				e.limiter = rate.NewLimiter(limit, burst)
				if s.nodes > 1 {
					// Sharing the limit, start with no token: this node may
					// have just joined while the others still hold the
					// tokens of their former, larger shares, and a full
					// bucket here would add its burst to theirs (a review
					// measured R·T + B + 50 attempts at 1,000/s across a
					// join, TestRateLimitBoundAcrossJoin).
					e.limiter.AllowN(now, burst)
				}
			} else { // the endpoint's rate or the cluster changed: keep the tokens
				e.limiter.SetLimitAt(now, limit)
				e.limiter.SetBurstAt(now, burst)
			}
			e.limit, e.limNodes = ratePerSecond, s.nodes
			// Claims turned away from now on are spread from the next
			// token at the new rate, not behind the old rate's schedule
			// (raised from 1/s to 1,000/s after a backlog of 10,000, a
			// claim was sent 2 h 47 min ahead).
			e.nextSlot = time.Time{}
		}
		r := e.limiter.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			// Spread the claims turned away over the coming tokens instead
			// of sending them all back for the next one (of which all but
			// one would be turned away again). Alone, a node offers itself
			// one claim per token. With several nodes a claim comes back to
			// whichever node claims it first, so a node may be offered fewer
			// claims than its tokens for a while and lose them: spaced by
			// the node's share, two nodes at a limit of 10 sent 8.3–8.7/s.
			// So each node offers claims at more than its share: by a
			// margin of 3/√b for a burst of b tokens (the spread of a
			// node's part of the claims over a burst's time; a larger
			// burst absorbs more of it), at most three times the share.
			// Then 0.97–1.0 of the rate on two and three nodes from an
			// empty start (0.92–0.95 at low limits with twice the share),
			// for at most two more claims turned away per attempt during a
			// backlog at low limits (each a claim and a write, a few a
			// second) and about half of one at 1,000/s
			// (TestClusterRateLimitDeliversItsRate).
			at := now.Add(d + rateSlack)
			if at.Before(e.nextSlot) {
				at = e.nextSlot
			}
			offer := float64(e.limiter.Limit())
			if s.nodes > 1 {
				offer *= min(3, 1+3/math.Sqrt(float64(e.limiter.Burst())))
			}
			e.nextSlot = at.Add(time.Duration(float64(time.Second) / offer))
			return false, at, reasonRateLimit
		}
	} else {
		e.limiter = nil
	}
	if !e.openUntil.IsZero() {
		e.probing = true // the circuit's cooldown passed: this is the probe
		e.probeSeq++
		if s.maxDefer > 0 && s.nodes == 1 {
			// No attempt outlasts the attempt timeout (maxDefer): hold the
			// backlog until just after it, in whole microseconds, the
			// stores' precision, so a hand-back finds the rows by their
			// due time. Only a node alone holds: the hold is written to
			// the shared queue, and circuits are per node, so with several
			// nodes one whose circuit is closed would be kept from the
			// backlog by another's probe.
			e.holdUntil = now.Add(s.maxDefer + probeSlack).Truncate(time.Microsecond)
			e.holding = true
		}
	}
	if e.inflight == 0 {
		e.busySince = now
	}
	e.inflight++
	for _, gg := range []*groupState{tg, hg} {
		if gg == nil {
			continue
		}
		if gg.inflight == 0 {
			gg.busySince = now
		}
		gg.inflight++
	}
	if tg != nil && tg.inflight >= capShare(s.tenantCap, s.rank, s.nodes) {
		s.full[e.tenant] = struct{}{}
	}
	return true, time.Time{}, ""
}

func group(m map[string]*groupState, key string) *groupState {
	gg := m[key]
	if gg == nil {
		gg = &groupState{}
		m[key] = gg
	}
	return gg
}

// groupDone records the end of an attempt of a tenant or host.
func (s *scheduler) groupDone(m map[string]*groupState, key string, took time.Duration) {
	gg := m[key]
	if gg == nil {
		return
	}
	gg.inflight--
	updateAvg(&gg.avg, took)
	s.liftLocked(gg) // (a host is never skipped)
	if gg.inflight <= 0 && gg.avg < fastAnswer && gg.fast == 0 {
		delete(m, key) // nothing worth keeping: keep the map small
	}
}

// holdWritten records that the probe's worker has written the hold of
// endpointID's backlog, and returns the hand-back decided while it was
// being written (nil if none): the worker carries it out.
func (s *scheduler) holdWritten(endpointID string) *backlogMove {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.eps[endpointID]
	if e == nil {
		return nil
	}
	back := e.pendingBack
	e.holding, e.pendingBack = false, nil
	return back
}

// isProbe reports whether g's attempt is the probe its endpoint's half-open
// circuit waits for: the endpoint probes, with g's number. A probe whose
// circuit a success closed meanwhile is one no longer (the closing success
// cleared probing), nor is any attempt admitted before the probe.
func (s *scheduler) isProbe(g *grant) bool {
	e := s.eps[g.endpoint]
	return e != nil && e.probing && e.probeSeq == g.probeSeq
}

// endLocked records the end of an attempt of the endpoint admitted by
// admitLocked that took took; probe: it was the half-open circuit's probe
// (isProbe). failed is a transport-level failure (no answer, or 5xx).
// It returns the time until which the circuit is now open (zero if it is
// closed), and whether this call opened it.
func (s *scheduler) endLocked(endpointID string, failed bool, took time.Duration, now time.Time, probe bool) (openUntil time.Time, opened bool) {
	e := s.eps[endpointID]
	if e == nil {
		return time.Time{}, false
	}
	e.inflight--
	updateAvg(&e.avg, took)
	e.ended = true
	wasFast := e.fast >= fastProof
	if !failed && took < fastAnswer {
		e.fast++
	} else {
		e.fast = 0
	}
	if s.tenantCap > 0 {
		if fast := e.fast >= fastProof; fast != wasFast {
			s.countFast(e.tenant, fast)
		}
		s.groupDone(s.tenants, e.tenant, took)
	}
	if s.hostCap > 0 {
		s.groupDone(s.hosts, e.host, took)
	}
	wasProbe := probe
	if probe {
		e.probing = false
	}
	if !failed {
		e.failures = 0
		e.openUntil = time.Time{}
		e.probing = false // closed: a probe in flight decides nothing now
		if e.inflight == 0 && e.limiter == nil && len(e.parked) == 0 && e.fast == 0 && e.avg < fastAnswer {
			delete(s.eps, endpointID) // nothing worth keeping: keep the map small
			s.ended[endpointID] = struct{}{}
		}
		return time.Time{}, false
	}
	e.failures++
	if wasProbe || (e.failures >= s.threshold && e.openUntil.IsZero()) {
		e.openUntil = now.Add(s.cooldown)
		return e.openUntil, true
	}
	return e.openUntil, false
}

// cancelLocked returns the capacity of an admitted claim that ran no
// attempt: the endpoint's, its tenant's and its host's counts in flight,
// and a half-open probe's slot (the next claim probes).
func (s *scheduler) cancelLocked(endpointID string, probe bool) {
	e := s.eps[endpointID]
	if e == nil {
		return
	}
	e.inflight--
	if probe {
		e.probing = false
	}
	if g := s.tenants[e.tenant]; s.tenantCap > 0 && g != nil {
		g.inflight--
		s.liftLocked(g)
	}
	if g := s.hosts[e.host]; s.hostCap > 0 && g != nil {
		g.inflight--
	}
}

// inFlight counts the attempts in flight on this node, the tenants they
// are for, the most of any one tenant and each tenant's (the in-flight
// gauges, read at a scrape: O(endpoints known to the scheduler) under its
// lock; nothing is counted per attempt for them).
func (s *scheduler) inFlight() metrics.InFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v metrics.InFlight
	per := map[string]int{}
	for _, e := range s.eps {
		if e.inflight > 0 {
			v.Total += e.inflight
			per[e.tenant] += e.inflight
		}
	}
	v.Tenants, v.ByTenant = len(per), per
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
func (s *scheduler) circuit(endpointID string, now time.Time) CircuitState {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := CircuitState{State: CircuitClosed, Threshold: s.threshold}
	e := s.eps[endpointID]
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
	return e.sched.circuit(endpointID, e.cfg.Clock.Now())
}
