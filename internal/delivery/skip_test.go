package delivery

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
)

// The skip list of the claims (store.ClaimParams.SkipTenants): the tenants
// at their cap with no proven-fast endpoint whose slots free slowly, and
// only while they are. The lists are read at t1, a second after the
// attempts began (none has ended: its slots free every 1 s / cap).
func TestSchedulerSkipTenants(t *testing.T) {
	t1 := t0.Add(time.Second)
	t.Run("at the cap until an attempt ends", func(t *testing.T) {
		s := newScheduler(4, 100, 5, 30*time.Second, time.Second).withGroupCaps(2, 0, 10*time.Second)
		if got := s.skipTenants(nil, t1); got != nil {
			t.Fatalf("skip list of an idle scheduler = %q, want nil (no allocation)", got)
		}
		g1 := mustRun(t, s.decide(claimOf("a1", "ea1", "a", "https://a1.example/", 0), t0))
		mustRun(t, s.decide(claimOf("b1", "eb1", "b", "https://b1.example/", 0), t0))
		if got := s.skipTenants(nil, t1); len(got) != 0 {
			t.Fatalf("skip list with every tenant under its cap = %q, want none", got)
		}
		g2 := mustRun(t, s.decide(claimOf("a2", "ea2", "a", "https://a2.example/", 0), t0))
		buf := make([]string, 0, 4)
		if got := s.skipTenants(buf, t1); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("skip list with tenant a at its cap of 2 = %q, want [a]", got)
		}
		// What the skip list stands for: a's next claim is turned away.
		mustDefer(t, s.decide(claimOf("a3", "ea3", "a", "https://a3.example/", 0), t0), reasonTenantCap, t0.Add(time.Second))
		// One of a's attempts ends (slow, as a black hole's): a is below
		// its cap, the worker is told to wake the claimer, and a is no
		// longer skipped.
		if f := s.release(g1, outcome{failed: true, took: 10 * time.Second}, t0.Add(10*time.Second), false); !f.wake {
			t.Fatal("the release that brought a skipped tenant below its cap does not wake the claimer")
		}
		if got := s.skipTenants(buf, t1); len(got) != 0 {
			t.Fatalf("skip list after one of a's attempts ended = %q, want none", got)
		}
		// Not skipped any more: the next release wakes nobody.
		if f := s.release(g2, outcome{failed: true, took: 10 * time.Second}, t0.Add(10*time.Second), false); f.wake {
			t.Fatal("a release of a tenant no claim skipped wakes the claimer")
		}
	})
	t.Run("a proven-fast endpoint keeps its tenant claimed", func(t *testing.T) {
		s := newScheduler(4, 100, 5, 30*time.Second, time.Second).withGroupCaps(2, 0, 10*time.Second)
		for i := range fastProof {
			g := mustRun(t, s.decide(claimOf("f", "fast", "a", "https://f.example/", 0), t0))
			if f := s.release(g, fine, t0, false); f.wake {
				t.Fatalf("fast answer %d woke the claimer with nothing skipped", i+1)
			}
		}
		mustRun(t, s.decide(claimOf("s1", "slow1", "a", "https://s1.example/", 0), t0))
		mustRun(t, s.decide(claimOf("s2", "slow2", "a", "https://s2.example/", 0), t0))
		if d := s.decide(claimOf("s3", "slow3", "a", "https://s3.example/", 0), t0); d.verdict != deferred || d.reason != reasonTenantCap {
			t.Fatalf("a slow endpoint's claim with its tenant at the cap: verdict %d (%q), want deferred for the tenant cap", d.verdict, d.reason)
		}
		if got := s.skipTenants(nil, t1); len(got) != 0 {
			t.Fatalf("skip list of a tenant at its cap with a proven-fast endpoint = %q, want none (its fast endpoint bypasses the cap)", got)
		}
		mustRun(t, s.decide(claimOf("f", "fast", "a", "https://f.example/", 0), t0))
		// The fast endpoint turns slow: a is skipped from then on.
		s.mu.Lock()
		s.endLocked("fast", true, 10*time.Second, t0, false)
		s.mu.Unlock()
		if got := s.skipTenants(nil, t1); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("skip list once a's fast endpoint failed = %q, want [a]", got)
		}
	})
	t.Run("quick attempts at the cap are not skipped", func(t *testing.T) {
		s := newScheduler(4, 100, 5, 30*time.Second, time.Second).withGroupCaps(2, 0, 10*time.Second)
		g1 := mustRun(t, s.decide(claimOf("a1", "ea1", "a", "https://a1.example/", 0), t0))
		mustRun(t, s.decide(claimOf("a2", "ea2", "a", "https://a2.example/", 0), t0))
		at := t0.Add(time.Millisecond)
		s.release(g1, outcome{took: time.Millisecond}, at, false)
		mustRun(t, s.decide(claimOf("a3", "ea3", "a", "https://a3.example/", 0), at))
		// At its cap of 2, its attempts lasting 1 ms: a slot frees about
		// every 0.5 ms, far under skipFrom.
		if got := s.skipTenants(nil, at.Add(time.Millisecond)); len(got) != 0 {
			t.Fatalf("skip list of a tenant at its cap with 1 ms attempts = %q, want none (a claim per freed slot would cost more than the deferrals)", got)
		}
		// The same tenant with attempts that hang: the oldest in flight
		// (a2, since t0) says nothing; the average of the ended ones does.
		// Once its attempts average 100 ms, a slot frees every 50 ms.
		s.mu.Lock()
		s.tenants["a"].avg = 100 * time.Millisecond
		s.mu.Unlock()
		if got := s.skipTenants(nil, at.Add(time.Millisecond)); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("skip list of a tenant at its cap with 100 ms attempts = %q, want [a]", got)
		}
	})
	t.Run("a smaller cap share", func(t *testing.T) {
		s := newScheduler(4, 100, 5, 30*time.Second, time.Second).withGroupCaps(4, 0, 10*time.Second)
		mustRun(t, s.decide(claimOf("a1", "ea1", "a", "https://a1.example/", 0), t0))
		mustRun(t, s.decide(claimOf("a2", "ea2", "a", "https://a2.example/", 0), t0))
		if got := s.skipTenants(nil, t1); len(got) != 0 {
			t.Fatalf("skip list with a at 2 of 4 = %q, want none", got)
		}
		s.setShare(0, 2) // a's share is 2: it is at it
		if got := s.skipTenants(nil, t1); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("skip list with a at its share of 2 = %q, want [a]", got)
		}
		if !s.setShare(0, 1) {
			t.Fatal("raising the share of a skipped tenant does not wake the claimer")
		}
		if got := s.skipTenants(nil, t1); len(got) != 0 {
			t.Fatalf("skip list with a at 2 of 4 again = %q, want none", got)
		}
	})
}

// skipStore records the skip lists of the engine's claims and next-due
// reads; its first claim returns first, later ones nothing.
type skipStore struct {
	wakeStore
	first  []store.Claim
	claims chan []string // each claim's SkipTenants
	reads  chan []string // each NextDueAt's skip list
	// othersDue: NextDueAt with a skip list answers t0 (others' work is
	// due, which the claim did not reach); otherwise nothing is due.
	othersDue atomic.Bool
}

func (s *skipStore) ClaimDeliveries(_ context.Context, p store.ClaimParams) ([]store.Claim, error) {
	s.claims <- slices.Clone(p.SkipTenants)
	out := s.first
	s.first = nil
	return out, nil
}

func (s *skipStore) NextDueAt(_ context.Context, skip []string) (time.Time, error) {
	s.reads <- slices.Clone(skip)
	if len(skip) > 0 && s.othersDue.Load() {
		return t0, nil
	}
	return time.Time{}, nil
}

func (*skipStore) ContinueFanOut(context.Context, store.FanOutParams) (store.FanOutResult, error) {
	return store.FanOutResult{}, nil
}

func (*skipStore) RescueExpiredLeases(context.Context, time.Time) (int, error) { return 0, nil }

// skipEngine runs an engine (4 workers, a tenant cap of 2, a poll interval
// of an hour, a clock that does not move) on a skipStore whose first claim
// is two deliveries of tenant a, attempted by sender.
func skipEngine(t *testing.T) (*skipStore, gatedSender, *Engine, *clock.Fake, func()) {
	st := &skipStore{claims: make(chan []string, 64), reads: make(chan []string, 64)}
	for _, id := range []string{"a1", "a2"} {
		c := testClaim(id, "ep_"+id, 0)
		c.Delivery.Tenant = "a"
		st.first = append(st.first, c)
	}
	sender := gatedSender{started: make(chan struct{}, 4), release: make(chan int)}
	t.Helper()
	clk := clock.NewFake(t0)
	e, err := New(Config{Store: st, Sender: sender, Clock: clk, Workers: 4,
		TenantConcurrency: 2, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, ran := runInBackground(t, e)
	return st, sender, e, clk, func() {
		cancel()
		for { // the claimer may be sending to the channels as it stops
			select {
			case <-ran:
				return
			case <-st.claims:
			case <-st.reads:
			}
		}
	}
}

func nextSkip(t *testing.T, c chan []string, what string) []string {
	t.Helper()
	select {
	case got := <-c:
		return got
	case <-time.After(time.Minute): // a hang guard: the poll interval is an hour
		t.Fatalf("no %s", what)
		return nil
	}
}

// The engine's claims skip a tenant while its cap is full, and the end of
// one of its attempts wakes the claimer at once (the poll interval is an
// hour and the clock does not move), whose next claim no longer skips it.
func TestClaimsSkipTenantAtCap(t *testing.T) {
	st, sender, e, clk, stop := skipEngine(t)
	next := func(c chan []string, what string) []string {
		t.Helper()
		return nextSkip(t, c, what)
	}
	if got := next(st.claims, "first claim"); len(got) != 0 {
		t.Fatalf("first claim skips %q, want none", got)
	}
	next(st.reads, "next due read after the first claim") // then it sleeps
	<-sender.started
	<-sender.started         // both of a's attempts are in flight: a is at its cap
	clk.Advance(time.Second) // and they hang: a slot frees every 500 ms
	e.Notify()               // a publish
	if got := next(st.claims, "claim after the publish"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("claim with a at its cap skips %q, want [a]", got)
	}
	// The claimer then reads its next due time without a's (it would
	// claim nothing and be told work is due) and sleeps.
	if got := next(st.reads, "next due read"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("next due read with a at its cap skips %q, want [a]", got)
	}
	sender.release <- 200 // one of a's attempts ends
	if got := next(st.claims, "claim after a's attempt ended"); len(got) != 0 {
		t.Fatalf("claim after one of a's attempts ended skips %q, want none", got)
	}
	sender.release <- 200
	stop()
}

// A claim that skipped a tenant and took nothing while others' work is
// due (its round and bounded fill did not reach it): the next claim skips
// none, instead of claiming nothing over and over.
func TestClaimAfterEmptySkippingClaimSkipsNone(t *testing.T) {
	st, sender, e, clk, stop := skipEngine(t)
	nextSkip(t, st.claims, "first claim")
	nextSkip(t, st.reads, "next due read after the first claim")
	<-sender.started
	<-sender.started // a is at its cap
	clk.Advance(time.Second)
	st.othersDue.Store(true)
	e.Notify()
	if got := nextSkip(t, st.claims, "claim after the publish"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("claim with a at its cap skips %q, want [a]", got)
	}
	if got := nextSkip(t, st.claims, "claim after an empty claim with work due"); len(got) != 0 {
		t.Fatalf("claim after an empty skipping claim with others' work due skips %q, want none", got)
	}
	st.othersDue.Store(false)
	sender.release <- 200
	sender.release <- 200
	stop()
}
