package delivery

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The nodes' shares of a cap add up to the cap exactly, and differ by at
// most one between nodes.
func TestCapShareAddsUp(t *testing.T) {
	for capacity := range 41 {
		for nodes := 1; nodes <= 7; nodes++ {
			sum, lo, hi := 0, math.MaxInt, 0
			for rank := range nodes {
				s := capShare(capacity, rank, nodes)
				sum += s
				lo, hi = min(lo, s), max(hi, s)
			}
			if sum != capacity || hi-lo > 1 {
				t.Errorf("cap %d over %d nodes: shares add up to %d (min %d, max %d), want %d, spread ≤ 1", capacity, nodes, sum, lo, hi, capacity)
			}
		}
	}
	if s := capShare(16, 0, 0); s != 0 {
		t.Errorf("no share (nodes 0): cap share %d, want 0", s)
	}
}

// The nodes' rates add up to the endpoint's rate; their bursts to at least
// the endpoint's burst and at most burst + nodes - 1.
func TestRateShareAddsUp(t *testing.T) {
	for _, perSecond := range []int{1, 2, 5, 10, 20, 99, 100, 1000} {
		burst := max(1, perSecond/10)
		for nodes := 1; nodes <= 7; nodes++ {
			limit, b := rateShare(perSecond, nodes)
			if got := float64(limit) * float64(nodes); math.Abs(got-float64(perSecond)) > 1e-9 {
				t.Errorf("rate %d over %d nodes: shares add up to %v/s", perSecond, nodes, got)
			}
			if b < 1 || b*nodes < burst || b*nodes > burst+nodes-1 {
				t.Errorf("rate %d (burst %d) over %d nodes: burst share %d, total %d not in [%d, %d]", perSecond, burst, nodes, b, b*nodes, burst, burst+nodes-1)
			}
		}
	}
	if l, b := rateShare(10, 0); l != 0 || b != 0 {
		t.Errorf("no share: rateShare = (%v, %d), want (0, 0)", l, b)
	}
}

func TestGateClusterShare(t *testing.T) {
	g := newGate(16, 128, 5, 30*time.Second, time.Second)
	g.setShare(2, 3) // 16 = 6 + 5 + 5: rank 2 gets 5
	for i := range 5 {
		if ok, _, reason := g.admit("ep", 0, t0); !ok {
			t.Fatalf("attempt %d refused (%s) within the node's share of 5", i+1, reason)
		}
	}
	if ok, _, reason := g.admit("ep", 0, t0); ok || reason != "concurrency_cap" {
		t.Fatalf("6th attempt on rank 2 of 3: ok=%v reason=%q, want concurrency_cap", ok, reason)
	}
	g.setShare(0, 3) // rank 0 gets 6
	if ok, _, _ := g.admit("ep", 0, t0); !ok {
		t.Fatal("6th attempt refused on rank 0 of 3 (share 6)")
	}

	// No share at all: nothing is admitted, and nothing parks (no attempt
	// in flight would ever take it).
	g = newGate(16, 128, 5, 30*time.Second, time.Second)
	g.setShare(0, 0)
	c := store.Claim{Endpoint: store.Endpoint{ID: "ep"}}
	ok, parked, at, reason := g.admitOrPark(c, t0)
	if ok || parked || reason != "concurrency_cap" || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("no share: ok=%v parked=%v at=%v reason=%q, want deferred 1 s for concurrency_cap", ok, parked, at, reason)
	}

	// A rate of 30/s over 3 nodes: 10/s with a burst of 1 on this node.
	g = newGate(100, 100, 5, 30*time.Second, time.Second)
	g.setShare(1, 3)
	if ok, _, _ := g.admit("ep", 30, t0); !ok {
		t.Fatal("first attempt refused")
	}
	ok, at, reason = g.admit("ep", 30, t0)
	if ok || reason != "rate_limit" || at.Sub(t0) != 100*time.Millisecond {
		t.Fatalf("second attempt at 10/s: ok=%v wait=%v reason=%q, want rate_limit 100ms", ok, at.Sub(t0), reason)
	}
	// The node is alone now: the whole 30/s. 34 ms after the first attempt
	// it holds 0.34 token (accrued at 10/s); the rest accrues at 30/s:
	// 22 ms more, not the 66 ms of 10/s. Tokens are kept across the change.
	g.setShare(0, 1)
	ok, at, reason = g.admit("ep", 30, t0.Add(34*time.Millisecond))
	if want := t0.Add(56 * time.Millisecond); ok || reason != "rate_limit" || !at.Equal(want) {
		t.Fatalf("after the others left, 34 ms later: ok=%v at=t0+%v reason=%q, want rate_limit until t0+56ms", ok, at.Sub(t0), reason)
	}
	if ok, _, reason := g.admit("ep", 30, t0.Add(56*time.Millisecond)); !ok {
		t.Fatalf("at t0+56ms: refused (%s)", reason)
	}

	// A fast endpoint is not held to the cap, but its rate limit still
	// holds: with no share, it is not admitted.
	g = newGate(16, 128, 5, 30*time.Second, time.Second)
	for range fastProof {
		if ok, _, reason := g.admit("fast", 0, t0); !ok {
			t.Fatalf("refused (%s)", reason)
		}
		g.done("fast", false, time.Millisecond, t0)
	}
	g.setShare(0, 0)
	if ok, _, reason := g.admit("fast", 0, t0); !ok {
		t.Fatalf("no share: a proven-fast endpoint without a rate limit refused (%s)", reason)
	}
	if ok, _, reason := g.admit("fast", 30, t0); ok || reason != "rate_limit" {
		t.Fatalf("no share: a rate-limited endpoint admitted (ok=%v, reason=%q), want rate_limit", ok, reason)
	}
}

func TestNodeView(t *testing.T) {
	const interval = time.Second
	type step struct {
		at        time.Duration // since t0
		live      []string      // nil with err
		err       bool
		rank, nds int // expected share (nds 0 = none)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"alone: waits two intervals, then holds everything", []step{
			{0, []string{"b"}, false, 0, 0},
			{time.Second, []string{"b"}, false, 0, 0},
			{2 * time.Second, []string{"b"}, false, 0, 1},
		}},
		{"joining two others", []step{
			{0, []string{"a", "b", "c"}, false, 0, 0},
			{2 * time.Second, []string{"a", "b", "c"}, false, 1, 3},
			{3 * time.Second, []string{"b", "c"}, false, 0, 2}, // a left
			{4 * time.Second, []string{"a", "b", "c", "d"}, false, 1, 4},
		}},
		{"own id missing from the list is added", []step{
			{0, []string{"a", "c"}, false, 0, 0},
			{2 * time.Second, []string{"a", "c"}, false, 1, 3},
		}},
		{"a failed heartbeat keeps the view for half the TTL, then holds nothing", []step{
			{0, []string{"a", "b"}, false, 0, 0},
			{2 * time.Second, []string{"a", "b"}, false, 1, 2},
			{4 * time.Second, nil, true, 1, 2},
			{7 * time.Second, nil, true, 1, 2},                 // 5 s since the last success = TTL/2
			{8 * time.Second, nil, true, 0, 0},                 // 6 s: the others may forget us soon
			{9 * time.Second, []string{"a", "b"}, false, 0, 0}, // rejoined: warm up again
			{11 * time.Second, []string{"a", "b"}, false, 1, 2},
		}},
		{"the first heartbeat fails", []step{
			{0, nil, true, 0, 0},
			{time.Second, []string{"b"}, false, 0, 0},
			{3 * time.Second, []string{"b"}, false, 0, 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := nodeView{self: "b", interval: interval, ttl: 10 * interval}
			for i, s := range tc.steps {
				var err error
				if s.err {
					err = errors.New("connection refused")
				}
				rank, nodes := v.observe(s.live, err, t0.Add(s.at))
				if rank != s.rank || nodes != s.nds {
					t.Fatalf("step %d (t+%v, live %v, err %v): share (%d of %d), want (%d of %d)", i, s.at, s.live, err, rank, nodes, s.rank, s.nds)
				}
			}
		})
	}
}
