package delivery

import (
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The endpoints whose rows the claims hold (store.ClaimParams.Hold): at
// their cap with no attempt ended yet, held until the oldest attempt must
// have ended (busySince + the attempt timeout), and handed back (released)
// by the release that ends one of their attempts.
func TestSchedulerHoldEndpoints(t *testing.T) {
	const timeout = 10 * time.Second
	hold := func(ep string, busy time.Time) store.HeldEndpoint {
		return store.HeldEndpoint{EndpointID: ep, Until: busy.Add(timeout)}
	}
	t.Run("at the cap until an attempt ends", func(t *testing.T) {
		s := newScheduler(2, 100, 5, 30*time.Second, time.Second).withGroupCaps(0, 0, timeout)
		if got := s.holdEndpoints(nil, t0); got != nil {
			t.Fatalf("holds of an idle scheduler = %v, want nil (no allocation)", got)
		}
		g1 := mustRun(t, s.decide(claimOf("d1", "black", "a", "https://b.example/", 0), t0))
		mustRun(t, s.decide(claimOf("o1", "other", "a", "https://o.example/", 0), t0))
		if got := s.holdEndpoints(nil, t0); len(got) != 0 {
			t.Fatalf("holds with every endpoint under its cap = %v, want none", got)
		}
		t1 := t0.Add(time.Millisecond)
		mustRun(t, s.decide(claimOf("d2", "black", "a", "https://b.example/", 0), t1))
		buf := make([]store.HeldEndpoint, 0, 4)
		got := s.holdEndpoints(buf, t1)
		if want := []store.HeldEndpoint{hold("black", t0)}; !slices.Equal(got, want) {
			t.Fatalf("holds with black at its cap of 2 = %v, want %v (busy since its first attempt)", got, want)
		}
		// Its first attempt ends (answered slowly): the release hands the
		// held rows back and wakes the claimer; black is held no more,
		// although its cap is full again (its speed is known now: its
		// claims are deferred one per expected slot instead).
		f := s.release(g1, outcome{took: 3 * time.Second}, t0.Add(3*time.Second), false)
		if want := []store.HeldEndpoint{hold("black", t0)}; !f.wake || !slices.Equal(f.release, want) {
			t.Fatalf("release of black's first attempt: wake %v, release %v; want true, %v", f.wake, f.release, want)
		}
		mustRun(t, s.decide(claimOf("d3", "black", "a", "https://b.example/", 0), t0.Add(3*time.Second)))
		if got := s.holdEndpoints(buf, t0.Add(4*time.Second)); len(got) != 0 {
			t.Fatalf("holds once one of black's attempts ended = %v, want none", got)
		}
		if f := s.release(mustRun(t, s.decide(claimOf("o2", "other", "a", "https://o.example/", 0), t1)), fine, t1, false); f.wake || f.release != nil {
			t.Fatalf("release of an endpoint never held: wake %v, release %v; want neither", f.wake, f.release)
		}
	})
	t.Run("a cancelled claim lifts the hold", func(t *testing.T) {
		s := newScheduler(1, 100, 5, 30*time.Second, time.Second).withGroupCaps(0, 0, timeout)
		g := mustRun(t, s.decide(claimOf("d1", "black", "a", "https://b.example/", 0), t0))
		if got := s.holdEndpoints(nil, t0); len(got) != 1 {
			t.Fatalf("holds with black at its cap of 1 = %v, want it", got)
		}
		f := s.release(g, outcome{cancelled: true}, t0, false)
		if want := []store.HeldEndpoint{hold("black", t0)}; !f.wake || !slices.Equal(f.release, want) {
			t.Fatalf("cancelled attempt: wake %v, release %v; want true, %v", f.wake, f.release, want)
		}
	})
	t.Run("proven fast or known speed: never held", func(t *testing.T) {
		s := newScheduler(2, 3, 5, 30*time.Second, time.Second).withGroupCaps(0, 0, timeout)
		for range fastProof {
			s.release(mustRun(t, s.decide(claimOf("f", "fast", "a", "https://f.example/", 0), t0)), fine, t0, false)
		}
		for i := range 3 {
			mustRun(t, s.decide(claimOf("f", "fast", "a", "https://f.example/", 0), t0.Add(time.Duration(i))))
		}
		if got := s.holdEndpoints(nil, t0.Add(time.Second)); len(got) != 0 {
			t.Fatalf("holds with a proven-fast endpoint at its cap = %v, want none", got)
		}
	})
	t.Run("no attempt timeout: nothing held", func(t *testing.T) {
		s := newScheduler(1, 100, 5, 30*time.Second, time.Second)
		mustRun(t, s.decide(claimOf("d1", "black", "a", "https://b.example/", 0), t0))
		if got := s.holdEndpoints(nil, t0.Add(time.Second)); len(got) != 0 {
			t.Fatalf("holds without a bound on the attempts = %v, want none", got)
		}
	})
}
