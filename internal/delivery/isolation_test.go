package delivery

import (
	"testing"
	"time"
)

// admit is admitOrPark without parking, for these tests.
func (g *gate) admit(endpointID string, ratePerSecond int, now time.Time) (ok bool, retryAt time.Time, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(endpointID, ratePerSecond, now)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestGateConcurrencyCap(t *testing.T) {
	g := newGate(2, 2, 5, 30*time.Second, time.Second)
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
	g := newGate(100, 100, 5, 30*time.Second, time.Second)
	// 10 per second with a burst of 1: the second attempt at the same
	// instant waits 100 ms.
	if ok, _, _ := g.admit("ep", 10, t0); !ok {
		t.Fatal("first attempt refused")
	}
	g.done("ep", false, time.Millisecond, t0)
	ok, at, reason := g.admit("ep", 10, t0)
	if ok || reason != "rate_limit" || at.Sub(t0) != 100*time.Millisecond+rateSlack {
		t.Fatalf("second attempt: ok=%v wait=%v reason=%q, want rate_limit 100ms (+slack)", ok, at.Sub(t0), reason)
	}
	if ok, _, _ := g.admit("ep", 10, t0.Add(100*time.Millisecond)); !ok {
		t.Fatal("refused once the rate allows")
	}
}

// Claims turned away by the rate limit come back one per token, in the
// order they were turned away, and each is admitted when it comes back.
func TestGateRateLimitSpreadsDeferrals(t *testing.T) {
	g := newGate(100, 100, 5, 30*time.Second, time.Second)
	if ok, _, _ := g.admit("ep", 10, t0); !ok {
		t.Fatal("first attempt refused")
	}
	g.done("ep", false, time.Millisecond, t0)
	var due []time.Time
	for i := range 4 {
		ok, at, reason := g.admit("ep", 10, t0)
		want := t0.Add(time.Duration(i+1)*100*time.Millisecond + rateSlack)
		if ok || reason != "rate_limit" || !at.Equal(want) {
			t.Fatalf("claim %d: ok=%v due t0+%v (%s), want rate_limit due t0+%v", i+2, ok, at.Sub(t0), reason, want.Sub(t0))
		}
		due = append(due, at)
	}
	for i, at := range due {
		if ok, next, reason := g.admit("ep", 10, at); !ok {
			t.Fatalf("claim %d back at t0+%v: refused (%s, until t0+%v)", i+2, at.Sub(t0), reason, next.Sub(t0))
		}
		g.done("ep", false, time.Millisecond, at)
	}
	// Later, with tokens again, no spreading is left over.
	if ok, _, _ := g.admit("ep", 10, t0.Add(2*time.Second)); !ok {
		t.Fatal("refused after an idle second")
	}
}

func TestGateCircuitBreaker(t *testing.T) {
	g := newGate(10, 10, 3, 30*time.Second, time.Second)
	now := t0
	for i := range 3 {
		if ok, _, _ := g.admit("ep", 0, now); !ok {
			t.Fatalf("attempt %d refused before the circuit opened", i+1)
		}
		until, opened := g.done("ep", true, time.Second, now)
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
	// Half-open: one probe only.
	later := t0.Add(31 * time.Second)
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
	if _, opened := g.done("ep", false, time.Millisecond, later2); opened {
		t.Fatal("a success opened the circuit")
	}
	for range 5 {
		if ok, _, _ := g.admit("ep", 0, later2); !ok {
			t.Fatal("refused after the circuit closed")
		}
	}
}

func TestGateFastEndpointUsesEveryWorker(t *testing.T) {
	g := newGate(2, 8, 5, 30*time.Second, time.Second)
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
