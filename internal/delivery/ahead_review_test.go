package delivery

// Claiming ahead (ahead.go): the fresh review's reproductions of the first
// build's defects, kept as tests of the build that answers them.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// keySender holds each attempt until the test releases its event, and
// records the events attempted, in order.
type keySender struct {
	mu       sync.Mutex
	gates    map[string]chan struct{}
	attempts []string
	status   int
}

func newKeySender() *keySender { return &keySender{gates: map[string]chan struct{}{}, status: 204} }

func (s *keySender) gate(ev string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gates[ev]
	if !ok {
		g = make(chan struct{})
		s.gates[ev] = g
	}
	return g
}

func (s *keySender) Do(ctx context.Context, r egress.Request) egress.Result {
	ev := r.Header.Get(HeaderEventID)
	s.mu.Lock()
	s.attempts = append(s.attempts, ev)
	s.mu.Unlock()
	select {
	case <-s.gate(ev):
	case <-ctx.Done():
	}
	return egress.Result{StatusCode: s.status, Duration: time.Millisecond}
}

func (s *keySender) release(ev string) { close(s.gate(ev)) }

func (s *keySender) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.attempts {
		g, ok := s.gates[ev]
		if !ok {
			g = make(chan struct{})
			s.gates[ev] = g
		}
		select {
		case <-g:
		default:
			close(g)
		}
	}
}

func (s *keySender) attempted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attempts)
}

// Claims that waited long in the line keep their order: the first build
// put a claim whose lease had run short back (lease_short), keeping its due
// time, but the claims behind it in the line (claimed a moment later, their
// leases still long enough) went first: deliveries 1..5 of one endpoint,
// all due at t0, were attempted 1, 2, 3, 5, 4. Now each gets a fresh lease
// at its turn; as without claiming ahead (ClaimAhead -1), 1..5.
func TestReviewAheadLongWaitKeepsTheOrder(t *testing.T) {
	for _, c := range []struct {
		name  string
		ahead int
	}{{"claiming ahead", 0}, {"without claiming ahead", -1}} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			sq := claimingStore(t)
			ep := holdEndpoint("ep_order")
			if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				holdPublish(t, sq, "t", t0)
			}
			ds := holdDeliveries(t, sq, ep.ID)
			slices.SortFunc(ds, func(a, b store.Delivery) int { return strings.Compare(a.ID, b.ID) })
			ev := make([]string, len(ds))
			for i, d := range ds {
				ev[i] = store.PublicEventID(d.EventID)
			}
			snd := newKeySender()
			e := startAhead(t, sq, sq, snd, clk, 2, c.ahead, nil)
			e.Notify()
			waitFor(t, "two attempts in flight", func() bool { return len(snd.attempted()) == 2 })
			if c.ahead == 0 {
				waitFor(t, "two claims in the line", func() bool { return e.aheadN.Load() == 2 })
			}
			clk.Advance(50 * time.Millisecond)
			snd.release(ev[0])
			waitFor(t, "the third attempt", func() bool { return len(snd.attempted()) == 3 })
			if c.ahead == 0 {
				// (as long as the pace measured over these 50 ms allows: one)
				waitFor(t, "the line refilled", func() bool { return e.aheadN.Load() >= 1 && e.aheadN.Load() == e.aheadLine.Load() })
			}
			// The second attempt took 5 s (well under the 10 s attempt timeout).
			clk.Advance(5*time.Second - 40*time.Millisecond)
			snd.release(ev[1])
			waitFor(t, "the fourth attempt", func() bool { return len(snd.attempted()) == 4 })
			snd.release(ev[2])
			waitFor(t, "the fifth attempt", func() bool { return len(snd.attempted()) == 5 })
			// The first two run side by side (either may start first); the
			// others start one at a time.
			if got := snd.attempted(); !slices.Equal(got[2:], ev[2:]) {
				t.Errorf("attempt order %v\nwant creation (= due) order [1 2 3 4 5] (the first two in either order)", idx(got, ev))
			}
		})
	}
}

// idx names events by their place (from 1) in the creation order.
func idx(got, order []string) []int {
	out := make([]int, len(got))
	for i, g := range got {
		out[i] = slices.Index(order, g) + 1
	}
	return out
}

// slowReads makes each GetEndpoint take a little of the engine's clock (a
// read on the read pool is never free: here 1 ms).
type slowReads struct {
	store.Store
	clk  *clock.Fake
	took time.Duration
}

func (s *slowReads) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	s.clk.Advance(s.took)
	return s.Store.GetEndpoint(ctx, id)
}

// The dispatcher lets a claim through with exactly 2 × AttemptTimeout of
// lease left, but the claim may then wait parked behind an attempt that
// began a moment before (up to one attempt timeout), be read again
// (refreshEndpoint, a database read), and take up to one attempt timeout
// of its own: with no slack left, its lease ends while its attempt is in
// flight, the rescuer frees it, the claimer claims it again, and the
// receiver gets the delivery twice although every attempt stayed within
// the attempt timeout and nothing crashed. (Before claiming ahead a claim
// was attempted or parked at once, with Lease − 2 × AttemptTimeout = 5 s
// to spare.)
func TestReviewAheadLeaseRunsOutUnderAParkedClaimsAttempt(t *testing.T) {
	const timeout = 10 * time.Second
	clk := clock.NewFake(t0)
	sq := claimingStore(t)
	for _, id := range []string{"e", "f", "g"} {
		ep := holdEndpoint("ep_" + id)
		ep.EventTypes = []string{id}
		if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
			t.Fatal(err)
		}
	}
	snd := newKeySender()
	e, err := New(Config{Store: &slowReads{Store: sq, clk: clk, took: time.Millisecond}, Sender: snd, Clock: clk,
		Workers: 2, EndpointConcurrency: 1, TenantConcurrency: 2, HostConcurrency: 2,
		AttemptTimeout: timeout, PollInterval: time.Hour, RescueInterval: time.Second, EndpointChanges: sq.EndpointChanges, Renewer: sq})
	if err != nil {
		t.Fatal(err)
	}
	if e.cfg.Lease != 2*timeout+5*time.Second || e.cfg.ClaimAhead != 2 {
		t.Fatalf("lease %v, claim ahead %d: want the defaults 25 s and 2", e.cfg.Lease, e.cfg.ClaimAhead)
	}
	cancel, done := runInBackground(t, e)
	t.Cleanup(func() { snd.releaseAll(); cancel(); <-done })

	// ep_e has answered once (so it may park a claim behind its attempt).
	e0 := store.PublicEventID(holdPublish(t, sq, "e", t0))
	e.Notify()
	waitFor(t, "e0 attempted", func() bool { return len(snd.attempted()) == 1 })
	snd.release(e0)
	waitFor(t, "e0 delivered", func() bool {
		ds := holdDeliveries(t, sq, "ep_e")
		return len(ds) == 1 && ds[0].State == store.DeliverySucceeded
	})

	// f1 and g1 take both workers; e2 and e3 are claimed ahead at t0.
	f1 := store.PublicEventID(holdPublish(t, sq, "f", t0))
	g1 := store.PublicEventID(holdPublish(t, sq, "g", t0))
	e2 := store.PublicEventID(holdPublish(t, sq, "e", t0))
	e3 := store.PublicEventID(holdPublish(t, sq, "e", t0))
	e.Notify()
	waitFor(t, "f1 and g1 in flight, e2 and e3 in the line", func() bool {
		return len(snd.attempted()) == 3 && e.aheadN.Load() == 2
	})
	// f1 and g1 take 5 s: the line's claims have exactly 2 × 10 s of lease left
	// at their turn, which the dispatcher accepts.
	clk.Advance(5 * time.Second)
	snd.release(f1)
	snd.release(g1)
	parked := func() int {
		e.sched.mu.Lock()
		defer e.sched.mu.Unlock()
		if st := e.sched.eps["ep_e"]; st != nil {
			return len(st.parked)
		}
		return 0
	}
	waitFor(t, "one of e2, e3 in flight, the other parked behind it", func() bool {
		return len(snd.attempted()) == 4 && parked() == 1 && e.aheadN.Load() == 0
	})
	first := snd.attempted()[3]
	second := e2
	if first == e2 {
		second = e3
	}
	// The first takes the full attempt timeout (a receiver that hangs);
	// the parked one follows at once.
	clk.Advance(timeout)
	snd.release(first)
	waitFor(t, "the parked claim's attempt", func() bool { return len(snd.attempted()) == 5 })
	// Its attempt is still inside its own attempt timeout when its lease
	// (claimed at t0, 25 s) ends.
	clk.Advance(timeout - time.Millisecond/2)
	lease := func() time.Time {
		for _, d := range holdDeliveries(t, sq, "ep_e") {
			if store.PublicEventID(d.EventID) == second {
				return d.LeaseUntil
			}
		}
		return time.Time{}
	}
	// The lease it was claimed with (t0 + 25 s) has ended; the one renewed
	// at its turn in the line (t0 + 5 s + 25 s) has not: nothing to rescue.
	if !lease().After(t0.Add(e.cfg.Lease)) {
		t.Fatalf("lease of %s ends %v; want it renewed past %v at its turn in the line", second, lease(), t0.Add(e.cfg.Lease))
	}
	if n, err := sq.RescueExpiredLeases(t.Context(), clk.Now()); err != nil || n != 0 {
		t.Fatalf("rescue: %d, %v; want nothing expired (the attempt in flight holds a renewed lease)", n, err)
	}
	snd.release(second) // the receiver has it: 204
	waitFor(t, "the delivery succeeded", func() bool {
		for _, d := range holdDeliveries(t, sq, "ep_e") {
			if store.PublicEventID(d.EventID) == second {
				return d.State == store.DeliverySucceeded
			}
		}
		return false
	})
	n := 0
	for _, a := range snd.attempted() {
		if a == second {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the delivery of %s was attempted %d times (attempts %v): its lease ran out under its first attempt and it was claimed again", second, n, snd.attempted())
	}
}

// startAhead starts an engine of workers workers on st (sq's, maybe
// wrapped), every cap at workers, attempts of at most 10 s, no poll or
// rescue on the fake clock's time, claiming ahead as SQLite has it unless
// ahead is -1, and sending through snd; the test's cleanup lets every
// attempt through and stops it. edit, if not nil, changes the Config first.
func startAhead(t *testing.T, st store.Store, sq *sqlite.Store, snd *keySender, clk clock.Clock, workers, ahead int, edit func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Store: st, Sender: snd, Clock: clk, Workers: workers, EndpointConcurrency: workers, TenantConcurrency: workers, HostConcurrency: workers,
		AttemptTimeout: 10 * time.Second, PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: sq.EndpointChanges, Renewer: sq, ClaimAhead: ahead}
	if edit != nil {
		edit(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	t.Cleanup(func() { snd.releaseAll(); cancel(); <-done })
	return e
}

// tenantPublish publishes an event of tenant (holdPublish is acme's only).
func tenantPublish(t *testing.T, st store.Store, tenant string, now time.Time) string {
	t.Helper()
	id := store.NewID("evt")
	ev := store.Event{ID: id, Tenant: tenant, Type: "t", OccurredAt: now,
		Body:        []byte(`{"id":"` + id + `","type":"t","tenant":"` + tenant + `","occurred_at":"` + now.Format(time.RFC3339) + `","data":{}}`),
		Fingerprint: store.Fingerprint(tenant, "t", []byte(id))}
	if _, err := st.PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
		t.Fatal(err)
	}
	return store.PublicEventID(id)
}

// Fair claiming gives a tenant's new event the next claim whatever backlog
// another tenant has built (docs/operations.md, "Fair claiming"). With
// claiming ahead, the next claim comes once half of the line is free, and
// the new event then waits behind the line's claims of the busy tenant:
// with both workers busy and two claims in the line, tenant B's event is
// attempted 5th instead of 3rd, and never later: the line is at most what
// the workers take in aheadHorizon at their pace (at least one), so the
// wait it adds is bounded in time (TestClaimAheadLineFollowsThePace).
func TestReviewAheadNewTenantWaitsBehindTheLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		ahead int
		want  int // B's place among the attempts, from 1
	}{{"without claiming ahead", -1, 3}, {"claiming ahead", 0, 5}} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			sq := claimingStore(t)
			a := holdEndpoint("ep_acme")
			b := holdEndpoint("ep_beta")
			b.Tenant = "beta"
			for _, ep := range []store.Endpoint{a, b} {
				if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
					t.Fatal(err)
				}
			}
			for range 4 {
				tenantPublish(t, sq, "acme", t0)
			}
			snd := newKeySender()
			e := startAhead(t, sq, sq, snd, clk, 2, c.ahead, nil)
			e.Notify()
			waitFor(t, "two of acme's attempts in flight", func() bool { return len(snd.attempted()) == 2 })
			if c.ahead == 0 {
				waitFor(t, "acme's other two claims in the line", func() bool { return e.aheadN.Load() == 2 })
			}
			bev := tenantPublish(t, sq, "beta", t0)
			e.Notify()
			// acme's attempts end one at a time; each freed worker takes the
			// next claim.
			for i := 0; ; i++ {
				got := snd.attempted()
				if slices.Contains(got, bev) {
					if place := slices.Index(got, bev) + 1; place != c.want {
						t.Fatalf("beta's new event attempted %d. (attempts %v, beta = %s); want %d.", place, got, bev, c.want)
					}
					return
				}
				if i == len(got) {
					t.Fatalf("no attempt of beta's event; attempts %v", got)
				}
				snd.release(got[i])
				waitFor(t, "the next attempt", func() bool { return len(snd.attempted()) > len(got) || len(got) == 5 })
			}
		})
	}
}

// When every worker is held by attempts that hang until their timeout
// (10 s), the line's claims wait longer than the lease's room beyond two
// attempts (5 s): the first build put the whole line back (lease_short) at
// the first token that freed, once per stall, and the put-back deliveries
// lost their place. Now each gets a fresh lease at its turn and is
// attempted.
func TestReviewAheadStallFlushesTheLine(t *testing.T) {
	for _, c := range []struct {
		name      string
		ahead     int
		putBackOK int
	}{{"without claiming ahead", -1, 0}, {"claiming ahead", 0, 0}} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			sq := claimingStore(t)
			// Two endpoints: one of unknown speed takes at most 2 workers (slowStart).
			for _, id := range []string{"ep_hang1", "ep_hang2"} {
				if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: holdEndpoint(id)}); err != nil {
					t.Fatal(err)
				}
			}
			for range 6 {
				holdPublish(t, sq, "t", t0)
			}
			st := &completionLog{Store: sq}
			snd := newKeySender()
			e := startAhead(t, st, sq, snd, clk, 4, c.ahead, nil)
			e.Notify()
			waitFor(t, "four attempts in flight", func() bool { return len(snd.attempted()) == 4 })
			if c.ahead == 0 {
				waitFor(t, "four claims in the line", func() bool { return e.aheadN.Load() == 4 })
			}
			clk.Advance(10 * time.Second) // the four attempts hang until their timeout
			snd.releaseAll()
			waitFor(t, "four more attempts", func() bool { return len(snd.attempted()) == 8 })
			st.mu.Lock()
			putBack := 0
			for _, cp := range st.seen {
				// A put-back of the line keeps the claim's due time (t0); a
				// deferral at a cap (slow start) is due later.
				if cp.Deferred && !cp.NextAttemptAt.After(t0) {
					putBack++
				}
			}
			st.mu.Unlock()
			if putBack != c.putBackOK {
				t.Fatalf("%d claims put back without an attempt after one stall of one attempt timeout; want %d", putBack, c.putBackOK)
			}
		})
	}
}
