package delivery

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The scheduler alone, through the API the engine uses (decide, release),
// on a manual clock: no sleeps, no goroutines.

// manualClock is a Clock that moves only when told.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time          { return c.t }
func (c *manualClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newManualClock() *manualClock             { return &manualClock{t: t0} }
func claimOf(id, ep, tenant, url string, rate int) job {
	return job{Claim: store.Claim{
		Delivery: store.Delivery{ID: id, EndpointID: ep, Tenant: tenant},
		Endpoint: store.Endpoint{ID: ep, Tenant: tenant, URL: url, RateLimitPerSecond: rate},
	}}
}

// epClaim is a claim of delivery id to endpoint ep of tenant "t", on a host
// of its own, without a rate limit.
func epClaim(id, ep string) job { return claimOf(id, ep, "t", "https://"+ep+".example/", 0) }

func mustRun(t *testing.T, d decision) *grant {
	t.Helper()
	if d.verdict != run || d.grant == nil {
		t.Fatalf("%s: verdict %d (at %v, %q), want run with a grant", d.job.Delivery.ID, d.verdict, d.at, d.reason)
	}
	return d.grant
}

func mustDefer(t *testing.T, d decision, reason string, at time.Time) {
	t.Helper()
	if d.verdict != deferred || d.reason != reason || !d.at.Equal(at) || d.grant != nil {
		t.Fatalf("%s: verdict %d, reason %q, at t0+%v; want deferred for %q to t0+%v", d.job.Delivery.ID, d.verdict, d.reason, d.at.Sub(t0), reason, at.Sub(t0))
	}
}

func ids(ds []decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.job.Delivery.ID)
	}
	return out
}

var fine = outcome{took: time.Millisecond}

// Each way a claim is turned away, with the reason, the due time and
// whether the claimer is told to slow down (only at a cap).
func TestSchedulerDecisions(t *testing.T) {
	t.Run("endpoint cap: park, then defer", func(t *testing.T) {
		c := newManualClock()
		s := newScheduler(4, 4, 5, 30*time.Second, time.Second)
		for i := range 4 {
			mustRun(t, s.decide(epClaim(fmt.Sprint("d", i), "ep"), c.Now()))
		}
		// A quarter of the cap (1) parks behind the attempts in flight.
		if d := s.decide(epClaim("p", "ep"), c.Now()); d.verdict != parked || d.congested() {
			t.Fatalf("at the cap: verdict %d congested=%v, want parked", d.verdict, d.congested())
		}
		d := s.decide(epClaim("x", "ep"), c.Now())
		mustDefer(t, d, reasonConcurrencyCap, t0.Add(time.Second)) // no duration known: DeferDelay
		if !d.congested() {
			t.Fatal("a deferral at the endpoint cap does not tell the claimer to wait")
		}
		mustRun(t, s.decide(epClaim("o", "other"), c.Now())) // other endpoints are not held
	})
	t.Run("tenant cap", func(t *testing.T) {
		c := newManualClock()
		s := newScheduler(4, 4, 5, 30*time.Second, time.Second).withGroupCaps(2, 0, 10*time.Second)
		mustRun(t, s.decide(claimOf("a", "ep1", "acme", "https://one.example/", 0), c.Now()))
		mustRun(t, s.decide(claimOf("b", "ep2", "acme", "https://two.example/", 0), c.Now()))
		d := s.decide(claimOf("c", "ep3", "acme", "https://three.example/", 0), c.Now())
		mustDefer(t, d, reasonTenantCap, t0.Add(time.Second))
		if !d.congested() {
			t.Fatal("a deferral at the tenant cap does not tell the claimer to wait")
		}
		mustRun(t, s.decide(claimOf("d", "ep4", "globex", "https://four.example/", 0), c.Now()))
	})
	t.Run("host cap", func(t *testing.T) {
		c := newManualClock()
		s := newScheduler(4, 4, 5, 30*time.Second, time.Second).withGroupCaps(0, 2, 10*time.Second)
		mustRun(t, s.decide(claimOf("a", "ep1", "acme", "https://shared.example/1", 0), c.Now()))
		mustRun(t, s.decide(claimOf("b", "ep2", "globex", "https://SHARED.example/2", 0), c.Now()))
		d := s.decide(claimOf("c", "ep3", "initech", "https://shared.example/3", 0), c.Now())
		mustDefer(t, d, reasonHostCap, t0.Add(time.Second))
		if !d.congested() {
			t.Fatal("a deferral at the host cap does not tell the claimer to wait")
		}
		mustRun(t, s.decide(claimOf("d", "ep4", "initech", "https://elsewhere.example/", 0), c.Now()))
	})
	t.Run("rate limit", func(t *testing.T) {
		c := newManualClock()
		s := newScheduler(4, 4, 5, 30*time.Second, time.Second)
		for _, id := range []string{"a", "a2"} { // the burst of 2
			g := mustRun(t, s.decide(claimOf(id, "ep", "t", "https://ep.example/", 10), c.Now()))
			s.release(g, fine, c.Now(), false)
		}
		d := s.decide(claimOf("b", "ep", "t", "https://ep.example/", 10), c.Now())
		mustDefer(t, d, reasonRateLimit, t0.Add(100*time.Millisecond+rateSlack))
		if d.congested() {
			t.Fatal("a rate-limit deferral tells the claimer to wait for an attempt to end: none would make room")
		}
		c.advance(100 * time.Millisecond)
		mustRun(t, s.decide(claimOf("b", "ep", "t", "https://ep.example/", 10), c.Now()))
	})
}

// The breaker through release: it opens at the threshold (the follow-up
// says so, with the cooldown's end), turns claims away while open, lets one
// probe through once the cooldown has passed, re-opens on a failed probe
// and closes on a good one.
func TestSchedulerBreaker(t *testing.T) {
	c := newManualClock()
	s := newScheduler(10, 10, 2, 30*time.Second, time.Second)
	failed := outcome{failed: true, took: time.Second}
	g1 := mustRun(t, s.decide(epClaim("a", "ep"), c.Now()))
	g2 := mustRun(t, s.decide(epClaim("b", "ep"), c.Now()))
	if f := s.release(g1, failed, c.Now(), false); f.opened || !f.openUntil.IsZero() {
		t.Fatalf("first failure: %+v, want the circuit still closed", f)
	}
	f := s.release(g2, failed, c.Now(), false)
	if !f.opened || !f.openUntil.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("second failure (the threshold): opened=%v until t0+%v, want opened until t0+30s", f.opened, f.openUntil.Sub(t0))
	}
	c.advance(10 * time.Second)
	d := s.decide(epClaim("c", "ep"), c.Now())
	mustDefer(t, d, reasonCircuitOpen, t0.Add(30*time.Second))
	if d.congested() {
		t.Fatal("an open circuit tells the claimer to wait for an attempt to end")
	}

	// Half-open: one probe, the others wait.
	c.advance(21 * time.Second)
	probe := mustRun(t, s.decide(epClaim("probe", "ep"), c.Now()))
	mustDefer(t, s.decide(epClaim("e", "ep"), c.Now()), reasonCircuitHalfOpen, c.Now().Add(time.Second))
	if cs := s.circuit("ep", c.Now()); cs.State != CircuitHalfOpen || !cs.Probing {
		t.Fatalf("during the probe: %+v", cs)
	}
	// The probe fails: open for another cooldown.
	if f := s.release(probe, failed, c.Now(), false); !f.opened || !f.openUntil.Equal(c.Now().Add(30*time.Second)) {
		t.Fatalf("failed probe: opened=%v until %v, want re-opened for 30 s", f.opened, f.openUntil)
	}
	c.advance(30 * time.Second)
	probe = mustRun(t, s.decide(epClaim("probe2", "ep"), c.Now()))
	if f := s.release(probe, fine, c.Now(), false); f.opened {
		t.Fatal("a good probe opened the circuit")
	}
	if cs := s.circuit("ep", c.Now()); cs.State != CircuitClosed || cs.Failures != 0 {
		t.Fatalf("after a good probe: %+v, want closed", cs)
	}
	for i := range 3 {
		mustRun(t, s.decide(epClaim(fmt.Sprint("f", i), "ep"), c.Now()))
	}
}

// Parked claims are taken in the order they parked, one per release, each
// decided on in the release itself (the freed slot goes to the oldest
// parked claim, not to a claim arriving after); a release with nothing
// parked has no next.
func TestSchedulerParkingOrder(t *testing.T) {
	c := newManualClock()
	s := newScheduler(8, 8, 5, 30*time.Second, time.Second) // parking: 8/4 = 2
	var grants []*grant
	for i := range 8 {
		grants = append(grants, mustRun(t, s.decide(epClaim(fmt.Sprint("d", i), "ep"), c.Now())))
	}
	for _, id := range []string{"p1", "p2"} {
		if d := s.decide(epClaim(id, "ep"), c.Now()); d.verdict != parked {
			t.Fatalf("%s: verdict %d, want parked", id, d.verdict)
		}
	}
	mustDefer(t, s.decide(epClaim("x", "ep"), c.Now()), reasonConcurrencyCap, t0.Add(time.Second))

	c.advance(300 * time.Millisecond)
	f := s.release(grants[0], outcome{took: 300 * time.Millisecond}, c.Now(), false)
	if f.next.job.Delivery.ID != "p1" || len(f.putBack) != 0 || f.opened {
		t.Fatalf("first release: next %q, put back %v; want p1 next", f.next.job.Delivery.ID, ids(f.putBack))
	}
	grants = append(grants, mustRun(t, f.next))
	// p1 took the freed slot: a claim arriving now finds the cap again
	// and parks behind p2 (parking has room for 2).
	if d := s.decide(epClaim("p3", "ep"), c.Now()); d.verdict != parked {
		t.Fatalf("p3 after p1 took the slot: verdict %d, want parked", d.verdict)
	}
	var order []string
	for _, g := range grants[1:3] {
		f := s.release(g, outcome{took: 300 * time.Millisecond}, c.Now(), false)
		mustRun(t, f.next)
		order = append(order, f.next.job.Delivery.ID)
	}
	if !slices.Equal(order, []string{"p2", "p3"}) {
		t.Fatalf("unparked in order %v, want [p2 p3]", order)
	}
	if f := s.release(grants[3], fine, c.Now(), false); f.next.verdict != 0 || f.next.grant != nil {
		t.Fatalf("release with nothing parked: next %+v, want none", f.next)
	}
}

// When a release opens the circuit, every parked claim is put back, in
// parking order, due when the cooldown ends; when the node is stopping,
// due now. Neither takes a parked claim to run.
func TestSchedulerPutsBackParked(t *testing.T) {
	setup := func(c *manualClock) (*scheduler, []*grant) {
		s := newScheduler(8, 8, 1, 30*time.Second, time.Second)
		var grants []*grant
		for i := range 8 {
			grants = append(grants, mustRun(t, s.decide(epClaim(fmt.Sprint("d", i), "ep"), c.Now())))
		}
		for _, id := range []string{"p1", "p2"} {
			if d := s.decide(epClaim(id, "ep"), c.Now()); d.verdict != parked {
				t.Fatalf("%s: verdict %d, want parked", id, d.verdict)
			}
		}
		return s, grants
	}
	t.Run("circuit opened", func(t *testing.T) {
		c := newManualClock()
		s, grants := setup(c)
		c.advance(time.Second)
		f := s.release(grants[0], outcome{failed: true, took: time.Second}, c.Now(), false)
		until := c.Now().Add(30 * time.Second)
		if !f.opened || !f.openUntil.Equal(until) || f.next.verdict != 0 {
			t.Fatalf("follow-up %+v, want opened until now+30s and no next", f)
		}
		if got := ids(f.putBack); !slices.Equal(got, []string{"p1", "p2"}) {
			t.Fatalf("put back %v, want [p1 p2]", got)
		}
		for _, d := range f.putBack {
			mustDefer(t, d, reasonCircuitOpen, until)
		}
		// Nothing is left parked: the next release takes none.
		if f := s.release(grants[1], outcome{failed: true, took: time.Second}, c.Now(), false); f.next.verdict != 0 || len(f.putBack) != 0 {
			t.Fatalf("after the put-back: %+v", f)
		}
	})
	t.Run("stopping", func(t *testing.T) {
		c := newManualClock()
		s, grants := setup(c)
		c.advance(time.Second)
		f := s.release(grants[0], fine, c.Now(), true)
		if f.opened || f.next.verdict != 0 {
			t.Fatalf("follow-up %+v, want no next", f)
		}
		if got := ids(f.putBack); !slices.Equal(got, []string{"p1", "p2"}) {
			t.Fatalf("put back %v, want [p1 p2]", got)
		}
		for _, d := range f.putBack {
			mustDefer(t, d, reasonShutdown, c.Now())
			if d.congested() {
				t.Fatal("a shutdown put-back tells the claimer to wait")
			}
		}
	})
}

// A grant returns its capacity exactly once: the release frees one place
// under the endpoint's, the tenant's and the host's caps, and a second
// release of the same grant panics without freeing another.
func TestSchedulerReleaseOnce(t *testing.T) {
	c := newManualClock()
	s := newScheduler(2, 2, 5, 30*time.Second, time.Second).withGroupCaps(2, 2, 10*time.Second)
	g := mustRun(t, s.decide(epClaim("a", "ep"), c.Now()))
	mustRun(t, s.decide(epClaim("b", "ep"), c.Now()))
	if n := s.inFlight().Total; n != 2 {
		t.Fatalf("%d in flight, want 2", n)
	}
	s.release(g, outcome{took: time.Second}, c.Now(), false)
	if n := s.inFlight().Total; n != 1 {
		t.Fatalf("after one release: %d in flight, want 1", n)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a second release of a grant did not panic")
			}
		}()
		s.release(g, outcome{took: time.Second}, c.Now(), false)
	}()
	if n := s.inFlight().Total; n != 1 {
		t.Fatalf("after a second release: %d in flight, want still 1", n)
	}
	// One place free under each cap, not two.
	mustRun(t, s.decide(claimOf("c", "ep", "t", "https://ep.example/", 0), c.Now()))
	d := s.decide(claimOf("d", "ep2", "t", "https://ep.example/", 0), c.Now())
	mustDefer(t, d, reasonTenantCap, c.Now().Add(500*time.Millisecond)) // 1 s attempts, cap 2
}

// Releases feed the proof of being fast: three fast answers in a row lift
// an endpoint past its cap, one slow answer brings it back.
func TestSchedulerReleaseFeedsFastProof(t *testing.T) {
	c := newManualClock()
	s := newScheduler(1, 4, 5, 30*time.Second, time.Second)
	for i := range fastProof {
		g := mustRun(t, s.decide(epClaim(fmt.Sprint("d", i), "ep"), c.Now()))
		s.release(g, fine, c.Now(), false)
	}
	var grants []*grant
	for i := range 4 {
		grants = append(grants, mustRun(t, s.decide(epClaim(fmt.Sprint("f", i), "ep"), c.Now())))
	}
	s.release(grants[0], outcome{took: time.Second}, c.Now(), false) // slow: back to the cap of 1
	if d := s.decide(epClaim("x", "ep"), c.Now()); d.verdict == run {
		t.Fatal("admitted past the cap after a slow answer")
	}
}

// A cap whose slots free faster than minDefer: the first claim turned
// away waits minDefer, the next ones come back one slot (avg/c) apart, not
// minDefer apart (which capped a fast tenant's surplus at 200 claims/s).
func TestCapDeferSpacesBySlot(t *testing.T) {
	var next deferChain
	step := 2 * time.Millisecond / 32
	first := capDefer(t0, 2*time.Millisecond, t0.Add(-time.Second), 32, &next, time.Second, 10*time.Second)
	if want := t0.Add(minDefer); !first.Equal(want) {
		t.Fatalf("first deferral at %v, want %v (minDefer)", first.Sub(t0), minDefer)
	}
	prev := first
	for i := range 100 {
		at := capDefer(t0, 2*time.Millisecond, t0.Add(-time.Second), 32, &next, time.Second, 10*time.Second)
		if got := at.Sub(prev); got != step {
			t.Fatalf("deferral %d came %v after the previous one, want one slot (%v)", i+2, got, step)
		}
		prev = at
	}
	// 101 claims turned away are back within 5 ms + 100 slots.
	if last := prev.Sub(t0); last != minDefer+100*step {
		t.Fatalf("the 101st deferral at %v, want %v", last, minDefer+100*step)
	}
	// A slow cap: slots a second apart, bounded by maxDefer.
	next = deferChain{}
	a := capDefer(t0, 64*time.Second, time.Time{}, 2, &next, time.Second, 10*time.Second)
	b := capDefer(t0, 64*time.Second, time.Time{}, 2, &next, time.Second, 10*time.Second)
	if a.Sub(t0) != 10*time.Second || b.Sub(a) != 10*time.Second {
		t.Fatalf("slow cap: %v then %v later, want 10s (maxDefer) each", a.Sub(t0), b.Sub(a))
	}
}

// TestCapWarnings: caps that another cap or --workers makes ineffective
// are named with the value that holds; the defaults never are; on a
// cluster a cap above one node's workers is not a contradiction.
func TestCapWarnings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []string
		cluster bool
	}{
		{name: "defaults", cfg: Config{Workers: 128}},
		{name: "defaults, 4 workers", cfg: Config{Workers: 4}},
		{name: "everything contradicts", cfg: Config{Workers: 10, TenantConcurrency: 20, EndpointConcurrency: 64, HostConcurrency: 2}, want: []string{
			"--endpoint-concurrency 64 is above --tenant-concurrency 20: an endpoint that has not answered fast holds at most 20",
			"--endpoint-concurrency 64 is above --host-concurrency 2: an endpoint that has not answered fast holds at most 2",
			"--endpoint-concurrency 64 is above --workers 10",
			"--tenant-concurrency 20 is above --workers 10",
		}},
		{name: "endpoint above tenant", cfg: Config{Workers: 128, EndpointConcurrency: 64, TenantConcurrency: 8}, want: []string{
			"--endpoint-concurrency 64 is above --tenant-concurrency 8",
		}},
		{name: "cluster: above one node's workers", cfg: Config{Workers: 16, TenantConcurrency: 40, HostConcurrency: 60, EndpointConcurrency: 30}, cluster: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			if tc.cluster {
				c.Membership = fakeMembership{}
			}
			got := c.WithDefaults().capWarnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("warning %d = %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

// fakeMembership is a store.Membership that is never called (capWarnings
// only asks whether there is one).
type fakeMembership struct{ store.Membership }

// Only the probe decides a half-open circuit: an attempt begun before the
// circuit opened (a black hole's, timing out after the cooldown) that
// fails during the probe re-opens nothing, and no second probe goes out
// beside the first. Before, any failure while probing counted as the
// probe's: the circuit re-opened, and after the next cooldown a second
// probe ran while the first still hung.
func TestOnlyTheProbeDecidesHalfOpen(t *testing.T) {
	s := newScheduler(10, 10, 1, 2*time.Second, time.Second)
	failed := outcome{failed: true, took: 4 * time.Second}
	ga := mustRun(t, s.decide(epClaim("a", "ep"), t0))
	gb := mustRun(t, s.decide(epClaim("b", "ep"), t0))
	if f := s.release(ga, failed, t0.Add(time.Second), false); !f.opened {
		t.Fatal("a failure at the threshold of 1 did not open the circuit")
	}
	p := t0.Add(3 * time.Second) // the cooldown ended: the probe goes out
	probe := mustRun(t, s.decide(epClaim("probe", "ep"), p))
	if !s.isProbe(probe) {
		t.Fatal("the attempt admitted after the cooldown is not marked as the probe")
	}
	// b, begun before the circuit opened, times out during the probe.
	if f := s.release(gb, failed, t0.Add(4*time.Second), false); f.opened {
		t.Fatalf("an attempt older than the probe re-opened the circuit until +%v", f.openUntil.Sub(t0))
	}
	if cs := s.circuit("ep", t0.Add(4*time.Second)); cs.State != CircuitHalfOpen || !cs.Probing {
		t.Fatalf("after the old attempt failed: %+v, want half_open with the probe in flight", cs)
	}
	mustDefer(t, s.decide(epClaim("c", "ep"), t0.Add(6*time.Second)), reasonCircuitHalfOpen, t0.Add(7*time.Second))
	// The probe's own failure re-opens it.
	if f := s.release(probe, failed, t0.Add(7*time.Second), false); !f.opened || !f.openUntil.Equal(t0.Add(9*time.Second)) {
		t.Fatalf("failed probe: opened=%v until +%v, want re-opened until +9s", f.opened, f.openUntil.Sub(t0))
	}
}

// A probe whose circuit a success closed while it was in flight decides
// nothing: its failure re-opens neither the closed circuit (one failure,
// under the threshold, after successes) nor extends a circuit opened since
// by other failures.
func TestStaleProbeDecidesNothing(t *testing.T) {
	fail := outcome{failed: true, took: 4 * time.Second}
	good := outcome{took: 300 * time.Millisecond}
	t.Run("closed by a success", func(t *testing.T) {
		s := newScheduler(10, 10, 5, 2*time.Second, time.Second)
		var old []*grant
		for i := range 6 {
			old = append(old, mustRun(t, s.decide(epClaim(string(rune('a'+i)), "ep"), t0)))
		}
		for i := range 5 { // 5 failures open it until +3s
			if f := s.release(old[i], fail, t0.Add(time.Second), false); f.opened != (i == 4) {
				t.Fatalf("failure %d: opened=%v", i+1, f.opened)
			}
		}
		probe := mustRun(t, s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second)))
		s.release(old[5], good, t0.Add(3500*time.Millisecond), false) // closes the circuit
		for i := range 20 {
			s.release(mustRun(t, s.decide(epClaim("n"+string(rune('a'+i)), "ep"), t0.Add(4*time.Second))), good, t0.Add(4*time.Second), false)
		}
		if f := s.release(probe, fail, t0.Add(7*time.Second), false); f.opened {
			t.Fatalf("one failure (threshold 5) after 20 successes re-opened the closed circuit until +%v", f.openUntil.Sub(t0))
		}
	})
	t.Run("opened again since", func(t *testing.T) {
		s := newScheduler(10, 10, 1, 2*time.Second, time.Second)
		ga := mustRun(t, s.decide(epClaim("a", "ep"), t0))
		gb := mustRun(t, s.decide(epClaim("b", "ep"), t0))
		if !s.release(ga, fail, t0.Add(time.Second), false).opened {
			t.Fatal("not opened")
		}
		probe := mustRun(t, s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second)))
		s.release(gb, outcome{took: time.Second}, t0.Add(3500*time.Millisecond), false) // closes
		gc := mustRun(t, s.decide(epClaim("c", "ep"), t0.Add(4*time.Second)))
		f1 := s.release(gc, fail, t0.Add(5*time.Second), false) // opens until +7s
		if !f1.opened {
			t.Fatal("c's failure did not open")
		}
		if f2 := s.release(probe, fail, t0.Add(6*time.Second), false); f2.opened {
			t.Fatalf("the circuit, open until +%v, was opened again by the stale probe until +%v", f1.openUntil.Sub(t0), f2.openUntil.Sub(t0))
		}
		// The next probe after the cooldown is let out and decides.
		p2 := mustRun(t, s.decide(epClaim("probe2", "ep"), t0.Add(7*time.Second)))
		if f := s.release(p2, fail, t0.Add(8*time.Second), false); !f.opened {
			t.Fatal("the current probe's failure did not re-open the circuit")
		}
	})
}

// The half-open circuit's probe holds the endpoint's due backlog until its
// deadline (the attempt timeout, plus probeSlack): claims that meet the
// backlog anyway are deferred to that deadline, not by DeferDelay each
// time, and the end of the probe hands the held deliveries back — due now
// when the circuit closes (or the probe is cancelled), due when the new
// cooldown ends when it re-opens earlier than the hold would.
func TestProbeHoldsTheBacklog(t *testing.T) {
	fail := outcome{failed: true, took: 10 * time.Millisecond}
	// openAndProbe: a failure at +1s opens the circuit (threshold 1,
	// cooldown 2s), and the probe goes out at +3s.
	openAndProbe := func(t *testing.T) (*scheduler, *grant, time.Time) {
		t.Helper()
		s := newScheduler(10, 10, 1, 2*time.Second, time.Second).withGroupCaps(0, 0, 4*time.Second)
		if f := s.release(mustRun(t, s.decide(epClaim("a", "ep"), t0)), fail, t0.Add(time.Second), false); !f.opened || f.handBack != nil {
			t.Fatalf("first failure: opened=%v handBack=%+v, want opened, nothing held", f.opened, f.handBack)
		}
		d := s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second))
		g := mustRun(t, d)
		hold := t0.Add(3*time.Second + 4*time.Second + probeSlack)
		if !d.hold.Equal(hold) {
			t.Fatalf("the probe holds the backlog until t0+%v, want t0+%v (cooldown end + attempt timeout + slack)", d.hold.Sub(t0), hold.Sub(t0))
		}
		if back := s.holdWritten("ep"); back != nil {
			t.Fatalf("hold written: hand-back %+v before anything ended", back)
		}
		mustDefer(t, s.decide(epClaim("b", "ep"), t0.Add(3500*time.Millisecond)), reasonCircuitHalfOpen, hold)
		mustDefer(t, s.decide(epClaim("c", "ep"), t0.Add(6*time.Second)), reasonCircuitHalfOpen, hold)
		// A worker late past the hold: back to DeferDelay.
		mustDefer(t, s.decide(epClaim("d", "ep"), hold), reasonCircuitHalfOpen, hold.Add(time.Second))
		return s, g, hold
	}
	wantBack := func(t *testing.T, f followUp, hold, at time.Time) {
		t.Helper()
		want := backlogMove{endpointID: "ep", dueFrom: hold, dueTo: hold, at: at}
		if f.handBack == nil || *f.handBack != want {
			t.Fatalf("hand-back %+v, want %+v", f.handBack, want)
		}
	}
	t.Run("closed: due now", func(t *testing.T) {
		s, probe, hold := openAndProbe(t)
		now := t0.Add(3200 * time.Millisecond)
		wantBack(t, s.release(probe, outcome{took: 200 * time.Millisecond}, now, false), hold, now)
		mustRun(t, s.decide(epClaim("e", "ep"), now))
	})
	t.Run("re-opened at the timeout: the postponement moves them", func(t *testing.T) {
		s, probe, _ := openAndProbe(t)
		f := s.release(probe, outcome{failed: true, took: 4 * time.Second}, t0.Add(7*time.Second), false)
		if !f.opened || f.handBack != nil {
			t.Fatalf("probe timed out: opened=%v handBack=%+v; want re-opened until +9s, after the hold (no hand-back)", f.opened, f.handBack)
		}
		// The next probe holds again.
		if d := s.decide(epClaim("p2", "ep"), t0.Add(9*time.Second)); d.verdict != run || !d.hold.Equal(t0.Add(13*time.Second+probeSlack)) {
			t.Fatalf("second probe: verdict %d hold t0+%v", d.verdict, d.hold.Sub(t0))
		}
	})
	t.Run("re-opened early: due when the new cooldown ends", func(t *testing.T) {
		s, probe, hold := openAndProbe(t)
		f := s.release(probe, fail, t0.Add(3100*time.Millisecond), false) // refused at once
		if !f.opened {
			t.Fatal("the failed probe did not re-open the circuit")
		}
		wantBack(t, f, hold, t0.Add(5100*time.Millisecond))
	})
	t.Run("probe cancelled: due now", func(t *testing.T) {
		s, probe, hold := openAndProbe(t)
		now := t0.Add(3100 * time.Millisecond)
		wantBack(t, s.release(probe, outcome{cancelled: true}, now, false), hold, now)
	})
	t.Run("an older attempt's failure keeps the hold; its success hands back", func(t *testing.T) {
		s := newScheduler(10, 10, 1, 2*time.Second, time.Second).withGroupCaps(0, 0, 4*time.Second)
		ga := mustRun(t, s.decide(epClaim("a", "ep"), t0))
		gb := mustRun(t, s.decide(epClaim("b", "ep"), t0))
		gc := mustRun(t, s.decide(epClaim("c", "ep"), t0))
		s.release(ga, fail, t0.Add(time.Second), false)
		d := s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second))
		mustRun(t, d)
		s.holdWritten("ep")
		if f := s.release(gb, fail, t0.Add(3100*time.Millisecond), false); f.handBack != nil || f.opened {
			t.Fatalf("an attempt older than the probe failed: opened=%v handBack=%+v, want neither", f.opened, f.handBack)
		}
		now := t0.Add(3200 * time.Millisecond)
		wantBack(t, s.release(gc, outcome{took: time.Second}, now, false), d.hold, now)
	})
	t.Run("a hand-back decided while the hold is written waits for it", func(t *testing.T) {
		s := newScheduler(10, 10, 1, 2*time.Second, time.Second).withGroupCaps(0, 0, 4*time.Second)
		ga := mustRun(t, s.decide(epClaim("a", "ep"), t0))
		gb := mustRun(t, s.decide(epClaim("b", "ep"), t0))
		s.release(ga, fail, t0.Add(time.Second), false)
		d := s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second))
		mustRun(t, d)
		// b, begun before the circuit opened, succeeds before the probe's
		// worker has written the hold: the hand-back must not run first.
		now := t0.Add(3001 * time.Millisecond)
		if f := s.release(gb, outcome{took: 3 * time.Second}, now, false); f.handBack != nil {
			t.Fatalf("hand-back %+v handed out before the hold was written", f.handBack)
		}
		want := backlogMove{endpointID: "ep", dueFrom: d.hold, dueTo: d.hold, at: now}
		if back := s.holdWritten("ep"); back == nil || *back != want {
			t.Fatalf("hold written: hand-back %+v, want %+v", back, want)
		}
		if back := s.holdWritten("ep"); back != nil {
			t.Fatalf("a second holdWritten handed back %+v again", back)
		}
	})
	t.Run("several nodes: nothing held (circuits are per node, the queue shared)", func(t *testing.T) {
		s := newScheduler(10, 10, 1, 2*time.Second, time.Second).withGroupCaps(0, 0, 4*time.Second)
		s.setShare(0, 2)
		s.release(mustRun(t, s.decide(epClaim("a", "ep"), t0)), fail, t0.Add(time.Second), false)
		d := s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second))
		if mustRun(t, d); !d.hold.IsZero() {
			t.Fatalf("hold %v with two nodes", d.hold)
		}
		mustDefer(t, s.decide(epClaim("b", "ep"), t0.Add(3500*time.Millisecond)), reasonCircuitHalfOpen, t0.Add(4500*time.Millisecond))
	})
	t.Run("no attempt timeout known: nothing held", func(t *testing.T) {
		s := newScheduler(10, 10, 1, 2*time.Second, time.Second)
		s.release(mustRun(t, s.decide(epClaim("a", "ep"), t0)), fail, t0.Add(time.Second), false)
		d := s.decide(epClaim("probe", "ep"), t0.Add(3*time.Second))
		if mustRun(t, d); !d.hold.IsZero() {
			t.Fatalf("hold %v without an attempt timeout", d.hold)
		}
		mustDefer(t, s.decide(epClaim("b", "ep"), t0.Add(3500*time.Millisecond)), reasonCircuitHalfOpen, t0.Add(4500*time.Millisecond))
		if f := s.release(d.grant, outcome{took: time.Millisecond}, t0.Add(4*time.Second), false); f.handBack != nil {
			t.Fatalf("hand-back %+v of nothing held", f.handBack)
		}
	})
}
