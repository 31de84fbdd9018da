package delivery

import (
	"fmt"
	"testing"
	"time"
)

// An endpoint whose state was dropped (nothing worth keeping) after its
// attempts ended does not slow-start again when it is met next (found by
// review: a proven-fast endpoint with one slower answer went back to 2).
func TestSlowStartNotAgainForAForgottenEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		took []time.Duration
	}{
		{"proven fast, then one 300 ms answer", []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}},
		{"answers around 250 ms", []time.Duration{240 * time.Millisecond, 260 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newScheduler(16, 128, 5, 30*time.Second, time.Second).withGroupCaps(32, 0, 10*time.Second)
			now := t0
			for _, d := range tc.took {
				if ok, _, r := g.admitAs("ep", "a", "https://ep.example/", now); !ok {
					t.Fatalf("refused: %s", r)
				}
				now = now.Add(d)
				g.done("ep", false, d, now)
			}
			now = now.Add(time.Second) // the next burst
			n := 0
			for range 16 {
				if ok, _, _ := g.admitAs("ep", "a", "https://ep.example/", now); ok {
					n++
				}
			}
			if n != 16 {
				t.Fatalf("after %d attempts ended on this node: %d admitted at once, want the endpoint cap 16 (state forgotten: back at slow start)", len(tc.took), n)
			}
		})
	}
}

// Endpoints at slow start park nothing (a parked claim holds a worker
// token): three tenants of black holes met one backlog at a time hold no
// more tokens than their tenant caps, and leave the rest to other tenants
// (found by review: 2 in flight + 1 parked each left none of 128).
func TestSlowStartParksNothing(t *testing.T) {
	const workers = 128
	g := newScheduler(16, workers, 5, 30*time.Second, time.Second).withGroupCaps(32, 64, 10*time.Second)
	held := map[string]int{}
	next := map[string]int{} // per tenant: index of its next claim (endpoint by endpoint)
	tokens := workers
	for round := 0; round < 400 && tokens > 0; round++ {
		for _, tenant := range []string{"a", "b", "c"} {
			for range 4 { // each claim gives each tenant a few of its oldest
				if tokens == 0 {
					break
				}
				i := next[tenant]
				next[tenant]++
				ep := fmt.Sprintf("%s-bh%d", tenant, i/20) // 20 due deliveries per black hole
				tokens--
				d := g.decide(claimOf(fmt.Sprint(tenant, i), ep, tenant, "https://"+ep+".example/", 0), t0)
				if d.verdict == deferred {
					tokens++
					continue
				}
				held[tenant]++
			}
		}
	}
	t.Logf("tokens held by the black holes' tenants: %v; left for every other tenant: %d of %d", held, tokens, workers)
	if tokens == 0 {
		t.Fatalf("three tenants of black holes hold all %d worker tokens (%v): no other tenant can be claimed until their attempts time out", workers, held)
	}
	for tenant, n := range held {
		if n > 32 {
			t.Errorf("tenant %s holds %d tokens, more than its cap of 32", tenant, n)
		}
	}
}

// A slow but healthy endpoint met with a backlog drains at its cap once its
// first attempt has answered: the claims turned away while it slow-started
// come back spaced by the slots of its cap, not of slow start's 2 (found
// by a new user: 200 deliveries to an endpoint answering in 1.5 s, cap 16,
// were spread over 45 s by their deferrals, 2–5 in flight at a time, about
// 4 attempts/s where the cap allows 10.7). Simulated on the scheduler: each
// delivery comes back at the time its deferral names, as a claim does, the
// claims of one round decided 20 µs apart; the claims turned away stay a
// few per delivery (each is a claim and a write).
func TestSlowStartDeferralsFollowTheCap(t *testing.T) {
	const (
		backlog = 200
		cap     = 16
		apart   = 20 * time.Microsecond // between two decisions of one round
	)
	for _, took := range []time.Duration{1500 * time.Millisecond, 4 * time.Second, 10 * time.Second} {
		t.Run(took.String(), func(t *testing.T) {
			g := newScheduler(cap, 128, 5, 30*time.Second, time.Second).withGroupCaps(32, 64, 10*time.Second)
			due := make([]time.Time, backlog) // per delivery: when it is claimed next (zero: done)
			for i := range due {
				due[i] = t0
			}
			var ends []time.Time // attempts in flight
			now, finished, maxInflight, deferrals := t0, t0, 0, 0
			for left := backlog; left > 0; {
				// The next event: an attempt's end, else the earliest due.
				next := time.Time{}
				for _, e := range ends {
					if next.IsZero() || e.Before(next) {
						next = e
					}
				}
				for _, d := range due {
					if !d.IsZero() && (next.IsZero() || d.Before(next)) {
						next = d
					}
				}
				if next.After(now) {
					now = next
				}
				kept := ends[:0]
				for _, e := range ends {
					if !e.After(now) {
						g.done("ep", false, took, e)
						left--
						finished = e
						continue
					}
					kept = append(kept, e)
				}
				ends = kept
				for i, d := range due {
					if d.IsZero() || d.After(now) {
						continue
					}
					ok, retryAt, _ := g.admitAs("ep", "a", "https://ep.example/", now)
					if ok {
						due[i] = time.Time{}
						ends = append(ends, now.Add(took))
						maxInflight = max(maxInflight, len(ends))
					} else {
						due[i] = retryAt
						deferrals++
					}
					now = now.Add(apart)
				}
			}
			t.Logf("%v: done in %v, at most %d in flight, %d claims turned away", took, finished.Sub(t0).Round(time.Millisecond), maxInflight, deferrals)
			// Slow start's first attempts, then the backlog at the cap.
			ideal := took + time.Duration(float64(backlog-2)/cap*float64(took))
			if got := finished.Sub(t0); got > ideal*5/4+took {
				t.Errorf("the backlog of %d to an endpoint answering in %v took %v (at most %d in flight), want about %v (its cap of %d)",
					backlog, took, got.Round(time.Millisecond), maxInflight, ideal.Round(time.Millisecond), cap)
			}
			if deferrals > 6*backlog {
				t.Errorf("%d claims turned away for %d deliveries, want at most 6 each", deferrals, backlog)
			}
		})
	}
}
