package delivery

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// admit is the limits alone (no parking, no grant), for these tests.
func (g *scheduler) admit(endpointID string, ratePerSecond int, now time.Time) (ok bool, retryAt time.Time, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(admitKey{endpoint: endpointID, tenant: "t", url: "https://h.example/", rate: ratePerSecond}, now)
}

// admitOrPark is decide with the decision spelt out, for these tests.
func (g *scheduler) admitOrPark(c job, now time.Time) (bool, bool, time.Time, string) {
	d := g.decide(c, now)
	return d.verdict == run, d.verdict == parked, d.at, d.reason
}

// done ends an attempt admitted by admit, admitAs or admitOrPark: release
// without its grant or follow-up, for these tests.
func (g *scheduler) done(endpointID string, failed bool, took time.Duration, now time.Time) (openUntil time.Time, opened bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// (These tests end the probe right after admitting it: an attempt
	// ending while the endpoint probes is the probe.)
	e := g.eps[endpointID]
	return g.endLocked(endpointID, failed, took, now, e != nil && e.probing)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestGateConcurrencyCap(t *testing.T) {
	g := newScheduler(2, 2, 5, 30*time.Second, time.Second)
	for i := range 2 {
		if ok, _, _ := g.admit("ep", 0, t0); !ok {
			t.Fatalf("attempt %d refused under the cap", i+1)
		}
	}
	ok, at, reason := g.admit("ep", 0, t0)
	if ok || reason != "concurrency_cap" || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("third attempt: ok=%v at=%v reason=%q, want deferred 1s for concurrency_cap", ok, at, reason)
	}
	if ok, _, _ := g.admit("other", 0, t0); !ok {
		t.Fatal("another endpoint is refused because of the first one's cap")
	}
	g.done("ep", false, time.Millisecond, t0)
	if ok, _, _ := g.admit("ep", 0, t0); !ok {
		t.Fatal("refused after a slot was freed")
	}
}

func TestGateRateLimit(t *testing.T) {
	g := newScheduler(100, 100, 5, 30*time.Second, time.Second)
	// 10 per second with a burst of 2: the third attempt at the same
	// instant waits 100 ms.
	for i := range 2 {
		if ok, _, _ := g.admit("ep", 10, t0); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
		g.done("ep", false, time.Millisecond, t0)
	}
	ok, at, reason := g.admit("ep", 10, t0)
	if ok || reason != "rate_limit" || at.Sub(t0) != 100*time.Millisecond+rateSlack {
		t.Fatalf("third attempt: ok=%v wait=%v reason=%q, want rate_limit 100ms (+slack)", ok, at.Sub(t0), reason)
	}
	if ok, _, _ := g.admit("ep", 10, t0.Add(100*time.Millisecond)); !ok {
		t.Fatal("refused once the rate allows")
	}
}

// Claims turned away by the rate limit come back one per token, in the
// order they were turned away, and each is admitted when it comes back.
func TestGateRateLimitSpreadsDeferrals(t *testing.T) {
	g := newScheduler(100, 100, 5, 30*time.Second, time.Second)
	for i := range 2 { // the burst
		if ok, _, _ := g.admit("ep", 10, t0); !ok {
			t.Fatalf("attempt %d refused", i+1)
		}
		g.done("ep", false, time.Millisecond, t0)
	}
	var due []time.Time
	for i := range 4 {
		ok, at, reason := g.admit("ep", 10, t0)
		want := t0.Add(time.Duration(i+1)*100*time.Millisecond + rateSlack)
		if ok || reason != "rate_limit" || !at.Equal(want) {
			t.Fatalf("claim %d: ok=%v due t0+%v (%s), want rate_limit due t0+%v", i+3, ok, at.Sub(t0), reason, want.Sub(t0))
		}
		due = append(due, at)
	}
	for i, at := range due {
		if ok, next, reason := g.admit("ep", 10, at); !ok {
			t.Fatalf("claim %d back at t0+%v: refused (%s, until t0+%v)", i+3, at.Sub(t0), reason, next.Sub(t0))
		}
		g.done("ep", false, time.Millisecond, at)
	}
	// Later, with tokens again, no spreading is left over.
	if ok, _, _ := g.admit("ep", 10, t0.Add(2*time.Second)); !ok {
		t.Fatal("refused after an idle second")
	}
}

// A backlog behind a rate limit of 10/s whose claims come back up to 90 ms
// after their due times (the claimer's and the database's delays, as when
// each comes back through the queue) still gets the rate: the burst of 2
// keeps a token that accrued while no claim was there. With a burst of 1
// such a backlog got 6.5 attempts/s: a token accrued over a full bucket
// was lost, and a claim back earlier after its due time than the one
// before it found none and went to the end of the line.
func TestGateRateLimitDeliversItsRateThroughTheQueue(t *testing.T) {
	g := newScheduler(100, 100, 5, 30*time.Second, time.Second)
	type back struct {
		at time.Time
		id int
	}
	var queue []back
	for i := range 200 {
		queue = append(queue, back{t0, i})
	}
	jitter := func(n int) time.Duration { return time.Duration((n*37)%91) * time.Millisecond } // 0–90 ms, spread
	end := t0.Add(10 * time.Second)
	admitted, n := 0, 0
	for len(queue) > 0 {
		slices.SortStableFunc(queue, func(a, b back) int { return a.at.Compare(b.at) })
		c := queue[0]
		queue = queue[1:]
		if c.at.After(end) {
			break
		}
		ok, due, _ := g.admit("ep", 10, c.at)
		if ok {
			admitted++
			g.done("ep", false, time.Millisecond, c.at)
			continue
		}
		n++
		queue = append(queue, back{due.Add(jitter(n)), c.id})
	}
	if admitted < 98 || admitted > 10*10+2 {
		t.Fatalf("%d attempts admitted in 10 s at a limit of 10/s (burst 2), want 98 to 102", admitted)
	}
}

func TestGateCircuitBreaker(t *testing.T) {
	g := newScheduler(10, 10, 3, 30*time.Second, time.Second)
	now := t0
	for i := range 3 {
		if ok, _, _ := g.admit("ep", 0, now); !ok {
			t.Fatalf("attempt %d refused before the circuit opened", i+1)
		}
		until, opened := g.done("ep", true, time.Second, now)
		if cs := g.circuit("ep", now); i < 2 && (cs.State != CircuitClosed || cs.Failures != i+1) {
			t.Fatalf("after failure %d: circuit %+v, want closed with %d failures", i+1, cs, i+1)
		}
		if opened != (i == 2) {
			t.Fatalf("failure %d: opened=%v", i+1, opened)
		}
		if i == 2 && !until.Equal(now.Add(30*time.Second)) {
			t.Fatalf("open until %v, want +30s", until)
		}
	}
	if ok, at, reason := g.admit("ep", 0, now.Add(10*time.Second)); ok || reason != "circuit_open" || !at.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("while open: ok=%v at=%v reason=%q", ok, at, reason)
	}
	if cs := g.circuit("ep", now.Add(10*time.Second)); cs.State != CircuitOpen || !cs.OpenUntil.Equal(t0.Add(30*time.Second)) || cs.Failures != 3 || cs.Threshold != 3 {
		t.Fatalf("while open: circuit %+v", cs)
	}
	// Half-open: one probe only.
	later := t0.Add(31 * time.Second)
	if cs := g.circuit("ep", later); cs.State != CircuitHalfOpen || cs.Probing {
		t.Fatalf("after the cooldown: circuit %+v, want half_open without a probe yet", cs)
	}
	if ok, _, _ := g.admit("ep", 0, later); !ok {
		t.Fatal("the probe after the cooldown was refused")
	}
	if ok, _, reason := g.admit("ep", 0, later); ok || reason != "circuit_half_open" {
		t.Fatalf("second attempt during the probe: ok=%v reason=%q", ok, reason)
	}
	// The probe fails: open again.
	if until, opened := g.done("ep", true, time.Second, later); !opened || !until.Equal(later.Add(30*time.Second)) {
		t.Fatalf("failed probe: opened=%v until=%v", opened, until)
	}
	// Next probe succeeds: closed.
	later2 := later.Add(31 * time.Second)
	if ok, _, _ := g.admit("ep", 0, later2); !ok {
		t.Fatal("second probe refused")
	}
	if cs := g.circuit("ep", later2); cs.State != CircuitHalfOpen || !cs.Probing {
		t.Fatalf("during the probe: circuit %+v", cs)
	}
	if _, opened := g.done("ep", false, time.Millisecond, later2); opened {
		t.Fatal("a success opened the circuit")
	}
	if cs := g.circuit("ep", later2); cs.State != CircuitClosed || cs.Failures != 0 || !cs.OpenUntil.IsZero() {
		t.Fatalf("after a successful probe: circuit %+v", cs)
	}
	for range 5 {
		if ok, _, _ := g.admit("ep", 0, later2); !ok {
			t.Fatal("refused after the circuit closed")
		}
	}
}

func TestGateFastEndpointUsesEveryWorker(t *testing.T) {
	g := newScheduler(2, 8, 5, 30*time.Second, time.Second)
	// Until proven fast: the cap.
	for range 2 {
		if ok, _, _ := g.admit("ep", 0, t0); !ok {
			t.Fatal("refused under the cap")
		}
	}
	if ok, _, _ := g.admit("ep", 0, t0); ok {
		t.Fatal("a new endpoint went past the cap")
	}
	g.done("ep", false, time.Millisecond, t0)
	g.done("ep", false, time.Millisecond, t0)
	for range 3 { // the third fast answer lifts it
		g.admit("ep", 0, t0)
		g.done("ep", false, time.Millisecond, t0)
	}
	for i := range 8 {
		if ok, _, _ := g.admit("ep", 0, t0); !ok {
			t.Fatalf("fast endpoint refused at %d in flight, want up to 8", i)
		}
	}
	if ok, _, reason := g.admit("ep", 0, t0); ok || reason != "concurrency_cap" {
		t.Fatal("fast endpoint went past every worker")
	}
	// One slow answer: back to the cap (8 in flight → 7, still over 2).
	g.done("ep", false, time.Second, t0)
	if ok, _, _ := g.admit("ep", 0, t0); ok {
		t.Fatal("a slow answer did not bring the endpoint back to its cap")
	}
}

func (g *scheduler) admitAs(endpoint, tenant, url string, now time.Time) (ok bool, retryAt time.Time, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(admitKey{endpoint: endpoint, tenant: tenant, url: url}, now)
}

// A tenant's endpoints together, and a host's endpoints of every tenant
// together, hold at most their caps; other tenants and hosts are not held.
func TestGateTenantAndHostCaps(t *testing.T) {
	g := newScheduler(4, 100, 5, 30*time.Second, time.Second).withGroupCaps(6, 8, 10*time.Second)
	// Tenant a: 10 endpoints on 10 hosts, 4 each allowed (slowStart until
	// an attempt ends); 6 for the tenant.
	admitted := 0
	for i := range 10 {
		for range 4 {
			if ok, _, _ := g.admitAs(fmt.Sprint("a", i), "a", fmt.Sprintf("https://a%d.example/", i), t0); ok {
				admitted++
			}
		}
	}
	if admitted != 6 {
		t.Fatalf("tenant a got %d attempts in flight, want its cap 6", admitted)
	}
	ok, at, reason := g.admitAs("a9", "a", "https://a9.example/", t0)
	if ok || reason != "tenant_cap" || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("over the tenant cap: ok=%v at=%v reason=%q, want tenant_cap in DeferDelay (no duration known yet)", ok, at, reason)
	}
	// Tenant b is not held by a, but shares host shared.example with c
	// (each endpoint at most slowStart in flight until one of its attempts
	// has ended: b's three reach b's cap, c's two the host's).
	admitted = 0
	for i := range 5 {
		for range 4 {
			tenant := "b"
			if i >= 3 {
				tenant = "c"
			}
			if ok, _, _ := g.admitAs(fmt.Sprint(tenant, i), tenant, "https://SHARED.example/"+fmt.Sprint(i), t0); ok {
				admitted++
			}
		}
	}
	if admitted != 8 {
		t.Fatalf("host shared.example got %d attempts in flight, want its cap 8", admitted)
	}
	if ok, _, reason := g.admitAs("c9", "c", "https://shared.example/x", t0); ok || reason != "host_cap" {
		t.Fatalf("over the host cap: ok=%v reason=%q, want host_cap", ok, reason)
	}
	if ok, _, _ := g.admitAs("d0", "d", "https://d.example/", t0); !ok {
		t.Fatal("tenant d on its own host refused")
	}
	// An attempt of a's ends: a has room again.
	g.done("a0", false, 3*time.Second, t0)
	if ok, _, _ := g.admitAs("a9", "a", "https://a9.example/", t0); !ok {
		t.Fatal("tenant a refused after one of its attempts ended")
	}
}

// Under a tenant cap, an endpoint none of whose attempts has ended yet
// holds at most slowStart attempts; its first attempt to end, however slow,
// lifts it to the endpoint cap. So a tenant's black holes met first cannot
// fill the tenant's cap before its other endpoints have had an attempt.
func TestSlowStartUntilAnAttemptEnds(t *testing.T) {
	g := newScheduler(8, 100, 5, 30*time.Second, time.Second).withGroupCaps(32, 0, 10*time.Second)
	admit := func(ep string) int {
		n := 0
		for range 10 {
			if ok, _, reason := g.admitAs(ep, "a", "https://"+ep+".example/", t0); ok {
				n++
			} else if reason != "concurrency_cap" {
				t.Fatalf("%s refused for %q, want concurrency_cap", ep, reason)
			}
		}
		return n
	}
	for _, bh := range []string{"bh1", "bh2", "bh3"} {
		if n := admit(bh); n != slowStart {
			t.Fatalf("%s (no attempt ended yet) got %d in flight, want slowStart %d", bh, n, slowStart)
		}
	}
	if n := admit("healthy"); n != slowStart {
		t.Fatalf("the tenant's next endpoint got %d in flight beside 3 black holes, want slowStart %d (the tenant cap of 32 not full)", n, slowStart)
	}
	g.done("bh1", true, 10*time.Second, t0.Add(10*time.Second)) // timed out
	if n := admit("bh1"); n != 8-(slowStart-1) {
		t.Fatalf("bh1 after its first attempt ended: %d more in flight, want up to the cap 8", n)
	}
	// Without a tenant cap there is nothing to share: the full cap at once.
	g2 := newScheduler(8, 100, 5, 30*time.Second, time.Second)
	for i := range 8 {
		if ok, _, reason := g2.admitAs("new", "a", "https://new.example/", t0); !ok {
			t.Fatalf("no tenant cap: attempt %d refused (%s)", i+1, reason)
		}
	}
}

// Endpoints that have proven fast are not held by the tenant cap (their
// attempts still count).
func TestGateTenantCapSparesFastEndpoints(t *testing.T) {
	g := newScheduler(2, 100, 5, 30*time.Second, time.Second).withGroupCaps(2, 0, 10*time.Second)
	for range 3 {
		g.admitAs("fast", "a", "https://f.example/", t0)
		g.done("fast", false, time.Millisecond, t0)
	}
	for i := range 5 {
		if ok, _, reason := g.admitAs("fast", "a", "https://f.example/", t0); !ok {
			t.Fatalf("fast endpoint refused at %d in flight: %s", i, reason)
		}
	}
	if ok, _, reason := g.admitAs("slow", "a", "https://s.example/", t0); ok || reason != "tenant_cap" {
		t.Fatalf("a slow endpoint of a tenant with 5 in flight: ok=%v reason=%q, want tenant_cap", ok, reason)
	}
}

// The wait of a claim turned away at the cap follows the endpoint's
// attempt durations: a 300 ms endpoint with a cap of 2 frees a slot every
// 150 ms, and successive claims come back one per slot.
func TestGateAdaptiveDeferDelay(t *testing.T) {
	g := newScheduler(2, 2, 5, 30*time.Second, time.Second).withGroupCaps(0, 0, 10*time.Second)
	for range 2 {
		g.admit("ep", 0, t0)
	}
	g.done("ep", false, 300*time.Millisecond, t0)
	g.admit("ep", 0, t0)
	var got []time.Duration
	for range 3 {
		ok, at, reason := g.admit("ep", 0, t0)
		if ok || reason != "concurrency_cap" {
			t.Fatalf("ok=%v reason=%q, want concurrency_cap", ok, reason)
		}
		got = append(got, at.Sub(t0))
	}
	want := []time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 450 * time.Millisecond}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("defer delays %v, want %v", got, want)
	}
	// A black hole (10 s timeouts) with a cap of 2: 5 s, bounded by the
	// attempt timeout.
	h := newScheduler(1, 1, 100, 30*time.Second, time.Second).withGroupCaps(0, 0, 2*time.Second)
	h.admit("hole", 0, t0)
	h.done("hole", true, 10*time.Second, t0)
	h.admit("hole", 0, t0)
	if _, at, _ := h.admit("hole", 0, t0); !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("black hole: back at %v, want after the 2 s bound", at.Sub(t0))
	}
}

// Before any attempt has ended, the age of the oldest attempt in flight
// stands for the average: a black hole is seen as slow before its first
// timeout, and the claims turned away are spread accordingly.
func TestGateDeferDelayBeforeFirstAnswer(t *testing.T) {
	g := newScheduler(100, 100, 5, 30*time.Second, time.Second).withGroupCaps(4, 0, 10*time.Second)
	for i := range 4 {
		if ok, _, _ := g.admitAs(fmt.Sprint("hole", i), "a", "https://h.example/", t0); !ok {
			t.Fatal("refused under the tenant cap")
		}
	}
	// At t0 nothing is known: DeferDelay.
	if _, at, reason := g.admitAs("hole9", "a", "https://h.example/", t0); reason != "tenant_cap" || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("at t0: back at %v (%s), want after DeferDelay", at.Sub(t0), reason)
	}
	// 2 s later the oldest of the 4 has run 2 s: one slot every 500 ms.
	now := t0.Add(2 * time.Second)
	var got []time.Duration
	for range 2 {
		_, at, _ := g.admitAs("hole9", "a", "https://h.example/", now)
		got = append(got, at.Sub(now))
	}
	if fmt.Sprint(got) != fmt.Sprint([]time.Duration{500 * time.Millisecond, time.Second}) {
		t.Fatalf("defer delays %v, want [500ms 1s]", got)
	}
}

// The in-flight gauges: attempts admitted and not done, per tenant.
func TestGateInFlight(t *testing.T) {
	g := newScheduler(10, 10, 5, 30*time.Second, time.Second)
	claim := func(ep, tenant string) store.Claim {
		return store.Claim{Delivery: store.Delivery{Tenant: tenant}, Endpoint: store.Endpoint{ID: ep, URL: "https://" + ep + ".example/"}}
	}
	for _, c := range []store.Claim{claim("a1", "acme"), claim("a1", "acme"), claim("a2", "acme"), claim("g1", "globex")} {
		if ok, _, _, reason := g.admitOrPark(job{Claim: c}, t0); !ok {
			t.Fatalf("%s refused: %s", c.Endpoint.ID, reason)
		}
	}
	if got, want := g.inFlight(), (metrics.InFlight{Total: 4, Tenants: 2, TenantMax: 3, ByTenant: map[string]int{"acme": 3, "globex": 1}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("inFlight = %+v, want %+v", got, want)
	}
	g.done("g1", false, time.Millisecond, t0)
	g.done("a1", false, time.Millisecond, t0)
	if got, want := g.inFlight(), (metrics.InFlight{Total: 2, Tenants: 1, TenantMax: 2, ByTenant: map[string]int{"acme": 2}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after two ended, inFlight = %+v, want %+v", got, want)
	}
	g.done("a1", false, time.Millisecond, t0)
	g.done("a2", false, time.Millisecond, t0)
	if got, want := g.inFlight(), (metrics.InFlight{ByTenant: map[string]int{}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after all ended, inFlight = %+v, want %+v", got, want)
	}
}
