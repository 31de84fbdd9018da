package delivery

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
		burst := max(2, perSecond/10)
		for nodes := 1; nodes <= 7; nodes++ {
			limit, b := rateShare(perSecond, nodes)
			if got := float64(limit) * float64(nodes); math.Abs(got-float64(perSecond)) > 1e-9 {
				t.Errorf("rate %d over %d nodes: shares add up to %v/s", perSecond, nodes, got)
			}
			if want := max(2, (burst+nodes-1)/nodes); b != want {
				t.Errorf("rate %d (burst %d) over %d nodes: burst share %d, want %d (two at least, the shares adding up to at least the burst)", perSecond, burst, nodes, b, want)
			}
		}
	}
	if l, b := rateShare(10, 0); l != 0 || b != 0 {
		t.Errorf("no share: rateShare = (%v, %d), want (0, 0)", l, b)
	}
}

// TestClusterRateLimitDeliversItsRate: several nodes, each with its share
// of an endpoint's rate limit, drain a backlog whose claims turned away
// come back through the shared queue at their due time (0–20 ms late), to
// whichever node claims first (at random). The endpoint gets its whole
// rate, and never more than the rate plus the nodes' bursts in any second.
// Before: two nodes got 5.4 attempts/s at a limit of 10 and three 7.5/s
// with a burst of one each (a claim one node turned away to its next token
// was often taken by another whose tokens fall at other times, and turned
// away there to the end of its schedule, while the first node's token was
// lost), and 8.3/s with a burst of two but the claims turned away spaced by
// the node's share (a node offered fewer claims than its tokens for a
// while loses them).
func TestClusterRateLimitDeliversItsRate(t *testing.T) {
	for _, nodes := range []int{2, 3} {
		for _, limit := range []int{2, 10, 20, 50, 100, 1000} {
			gs := make([]*scheduler, nodes)
			sumBurst := 0
			for i := range gs {
				gs[i] = newScheduler(100, 100, 5, 30*time.Second, time.Second)
				gs[i].setShare(i, nodes)
				_, b := rateShare(limit, nodes)
				sumBurst += b
			}
			seconds := max(10, 100/limit) // 100 attempts at least
			var queue backQueue           // due claims in order of due time, then of their return
			for i := range max(1000, 2*limit*seconds) {
				queue.add(t0, i)
			}
			end := t0.Add(time.Duration(seconds) * time.Second)
			var sent []time.Time
			again := 0 // claims turned away again after coming back
			turned := map[int]bool{}
			rng := rand.New(rand.NewPCG(uint64(nodes), uint64(limit)))
			for n := 0; queue.Len() > 0; n++ {
				c := heap.Pop(&queue).(back)
				if c.at.After(end) {
					break
				}
				g := gs[rng.IntN(nodes)] // whichever node claims first
				ok, due, reason := g.admit("ep", limit, c.at)
				if ok {
					sent = append(sent, c.at)
					g.done("ep", false, time.Millisecond, c.at)
					continue
				}
				if reason != reasonRateLimit {
					t.Fatalf("turned away for %s", reason)
				}
				if turned[c.id] {
					again++
				}
				turned[c.id] = true
				late := time.Duration((n*37)%21) * time.Millisecond
				queue.add(due.Add(late), c.id)
			}
			perSecond := float64(len(sent)) / float64(seconds)
			worst := 0
			for i, j := 0, 0; i < len(sent); i++ {
				for sent[i].Sub(sent[j]) >= time.Second {
					j++
				}
				worst = max(worst, i-j+1)
			}
			if perSecond < 0.95*float64(limit) || len(sent) > limit*seconds+sumBurst || worst > limit+sumBurst {
				t.Errorf("%d nodes, limit %d/s: %.1f attempts/s, at most %d in one second; want %d/s (≥ 95 %%), at most %d in any second and %d in all",
					nodes, limit, perSecond, worst, limit, limit+sumBurst, limit*seconds+sumBurst)
			}
			// Each claim turned away costs a claim and a write: offered
			// at most three times its tokens (fewer at higher limits), a
			// node turns away at most about two claims that came back per
			// attempt, whatever the number of nodes.
			if perAttempt := float64(again) / float64(len(sent)); perAttempt > 2.1 {
				t.Errorf("%d nodes, limit %d/s: %.2f claims turned away again per attempt, want ≤ 2.1", nodes, limit, perAttempt)
			}
			t.Logf("%d nodes, limit %d/s: %.3f of the rate, %.2f turned away again per attempt", nodes, limit, perSecond/float64(limit), float64(again)/float64(len(sent)))
		}
	}
}

// back is a claim due back in the queue at at; seq orders claims due at
// the same time by their return.
type back struct {
	at      time.Time
	id, seq int
}

type backQueue struct {
	items []back
	seq   int
}

func (q *backQueue) add(at time.Time, id int) {
	q.seq++
	heap.Push(q, back{at, id, q.seq})
}
func (q backQueue) Len() int { return len(q.items) }
func (q backQueue) Less(i, j int) bool {
	if c := q.items[i].at.Compare(q.items[j].at); c != 0 {
		return c < 0
	}
	return q.items[i].seq < q.items[j].seq
}
func (q backQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *backQueue) Push(x any)   { q.items = append(q.items, x.(back)) }
func (q *backQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// TestRateLimitRaisedSpreadsAtTheNewRate: claims turned away after an
// endpoint's limit was raised are spread at the new rate, not behind the
// old rate's schedule (found by a review: after 10,000 claims turned away
// at 1/s, a claim at 1,000/s was sent 2 h 47 min ahead).
func TestRateLimitRaisedSpreadsAtTheNewRate(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		g := newScheduler(1<<20, 1<<20, 5, 30*time.Second, time.Second)
		g.setShare(0, nodes)
		for range 10000 {
			if ok, _, _ := g.admit("ep", 1, t0); ok {
				g.done("ep", false, time.Millisecond, t0)
			}
		}
		now := t0.Add(time.Second)
		var worst time.Duration
		for range 1000 {
			if ok, at, _ := g.admit("ep", 1000, now); ok {
				g.done("ep", false, time.Millisecond, now)
			} else {
				worst = max(worst, at.Sub(now))
			}
		}
		if worst > 2*time.Second {
			t.Errorf("%d nodes: 1,000 claims at once after the limit was raised from 1/s to 1,000/s: one sent %v ahead, want ≤ 2 s", nodes, worst.Round(time.Millisecond))
		}
	}
}

func TestGateClusterShare(t *testing.T) {
	g := newScheduler(16, 128, 5, 30*time.Second, time.Second)
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
	g = newScheduler(16, 128, 5, 30*time.Second, time.Second)
	g.setShare(0, 0)
	c := store.Claim{Endpoint: store.Endpoint{ID: "ep"}}
	ok, parked, at, reason := g.admitOrPark(job{Claim: c}, t0)
	if ok || parked || reason != "concurrency_cap" || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("no share: ok=%v parked=%v at=%v reason=%q, want deferred 1 s for concurrency_cap", ok, parked, at, reason)
	}

	// A rate of 30/s over 3 nodes: 10/s with a burst of 2 on this node
	// (ceil(3/3) = 1, two at least), starting empty (the limit is shared):
	// the first token is there after 100 ms, the burst after 200 ms.
	g = newScheduler(100, 100, 5, 30*time.Second, time.Second)
	g.setShare(1, 3)
	ok, at, reason = g.admit("ep", 30, t0)
	if ok || reason != "rate_limit" || at.Sub(t0) != 100*time.Millisecond+rateSlack {
		t.Fatalf("first attempt on a shared limit: ok=%v wait=%v reason=%q, want rate_limit 100ms (+slack): the bucket starts empty", ok, at.Sub(t0), reason)
	}
	t1 := t0.Add(200 * time.Millisecond)
	for i := range 2 {
		if ok, _, reason := g.admit("ep", 30, t1); !ok {
			t.Fatalf("attempt %d of the burst of 2 refused (%s)", i+1, reason)
		}
	}
	ok, at, reason = g.admit("ep", 30, t1)
	if ok || reason != "rate_limit" || at.Sub(t1) != 100*time.Millisecond+rateSlack {
		t.Fatalf("third attempt at 10/s: ok=%v wait=%v reason=%q, want rate_limit 100ms (+slack)", ok, at.Sub(t1), reason)
	}
	// The node is alone now: the whole 30/s. 34 ms after the burst it
	// holds 0.34 token (accrued at 10/s); the rest accrues at 30/s and
	// is complete 22 ms later, not the 66 ms of 10/s: at t1+57ms an attempt
	// is admitted. Tokens are kept across the change.
	g.setShare(0, 1)
	// (The new share applies to the endpoint's limiter when the scheduler next
	// looks at it: here 34 ms after the burst, 0.34 token.)
	if ok, _, _ := g.admit("ep", 30, t1.Add(34*time.Millisecond)); ok {
		t.Fatal("admitted with 0.34 token")
	}
	if ok, at, reason := g.admit("ep", 30, t1.Add(57*time.Millisecond)); !ok {
		t.Fatalf("after the others left, at t1+57ms: refused (%s until t1+%v); at 30/s a token is there", reason, at.Sub(t1))
	}

	// A fast endpoint is not held to the cap, but its rate limit still
	// holds: with no share, it is not admitted.
	g = newScheduler(16, 128, 5, 30*time.Second, time.Second)
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

// viewRun drives a nodeView: beat(at, live) is a successful heartbeat
// started at t0+at (ending 10 ms later); fail(at) a failed one; want
// checks the share at a moment.
type viewRun struct {
	t *testing.T
	v nodeView
}

func (r *viewRun) beat(at time.Duration, live ...store.Node) {
	r.v.observe(live, nil, t0.Add(at), t0.Add(at+10*time.Millisecond))
}

// beats is a successful heartbeat every second from from to to.
func (r *viewRun) beats(from, to time.Duration, live ...store.Node) {
	for at := from; at <= to; at += time.Second {
		r.beat(at, live...)
	}
}

func (r *viewRun) fail(at time.Duration) {
	r.v.observe(nil, errors.New("connection refused"), t0.Add(at), t0.Add(at+10*time.Millisecond))
}

func (r *viewRun) want(at time.Duration, rank, nodes int) {
	r.t.Helper()
	if gr, gn := r.v.current(t0.Add(at)); gr != rank || gn != nodes {
		r.t.Fatalf("at t0+%v: share (%d of %d), want (%d of %d)", at, gr, gn, rank, nodes)
	}
}

func TestNodeView(t *testing.T) {
	const sec = time.Second
	const ms = time.Millisecond
	self := store.Node{ID: "b", HeartbeatInterval: sec, AttemptTimeout: 10 * sec}
	node := func(id string) store.Node {
		return store.Node{ID: id, HeartbeatInterval: sec, AttemptTimeout: 4 * sec}
	}
	a, c, d := node("a"), node("c"), node("d")
	newRun := func(t *testing.T) *viewRun { return &viewRun{t: t, v: nodeView{self: self}} }

	t.Run("alone twice in a row: holds everything at once", func(t *testing.T) {
		r := newRun(t)
		r.beat(0, self)
		r.want(10*ms, 0, 0)
		r.beat(250*ms, self)
		r.want(260*ms, 0, 1)
	})
	t.Run("alone, then another node on the confirming heartbeat: waits as a joiner", func(t *testing.T) {
		r := newRun(t)
		r.beat(0, self)
		r.beat(250*ms, a, self)
		r.want(260*ms, 0, 0)
		r.beats(sec, 7*sec, a, self)
		r.want(7*sec+250*ms, 0, 0)
		r.want(7*sec+260*ms, 1, 2) // 3 s + a's 4 s attempt timeout after the confirming heartbeat
	})
	t.Run("joining others: 3 intervals plus their longest attempt timeout", func(t *testing.T) {
		r := newRun(t)
		r.beats(0, 6*sec, a, self, c)
		r.want(7*sec, 0, 0)
		r.want(7*sec+10*ms, 1, 3)
		r.beat(7*sec, self, c) // a left: no new wait
		r.want(7*sec+10*ms, 0, 2)
		r.beat(8*sec, a, self, c, d)
		r.want(8*sec+10*ms, 1, 4)
	})
	t.Run("waits for the slowest node's interval", func(t *testing.T) {
		r := newRun(t)
		slow := store.Node{ID: "a", HeartbeatInterval: 5 * sec, AttemptTimeout: sec}
		r.beats(0, 15*sec, slow, self)
		r.want(16*sec, 0, 0)
		r.want(16*sec+10*ms, 1, 2) // 3 × 5 s + 1 s after the first heartbeat ended
	})
	t.Run("own id missing from the list counts", func(t *testing.T) {
		r := newRun(t)
		r.beats(0, 7*sec, a, c)
		r.want(7*sec+10*ms, 1, 3)
	})
	t.Run("failed heartbeats: the share holds for 2.5 intervals, then none until one succeeds", func(t *testing.T) {
		r := newRun(t)
		r.beats(0, 8*sec, a, self)
		r.want(8*sec+10*ms, 1, 2)
		r.fail(9 * sec)
		r.fail(10 * sec)
		r.want(10*sec+500*ms, 1, 2) // 2.5 s after the last good start
		r.want(10*sec+501*ms, 0, 0)
		r.beat(11*sec, a, self) // back within half the TTL: no new wait
		r.want(11*sec+10*ms, 1, 2)
	})
	t.Run("cut off for half the TTL: rejoins with a wait", func(t *testing.T) {
		r := newRun(t)
		r.beats(0, 8*sec, a, self)
		for at := 9 * sec; at <= 13*sec; at += sec {
			r.fail(at)
		}
		r.beat(14*sec, a, self) // 6 s since the last success > 5 s
		r.want(14*sec+10*ms, 0, 0)
		r.beats(15*sec, 20*sec, a, self)
		r.want(21*sec, 0, 0)
		r.want(21*sec+10*ms, 1, 2)
	})
	t.Run("the first heartbeat fails", func(t *testing.T) {
		r := newRun(t)
		r.fail(0)
		r.want(10*ms, 0, 0)
		r.beat(sec, self)
		r.want(sec+10*ms, 0, 0)
		r.fail(1250 * ms) // the confirmation waits for a success
		r.want(1260*ms, 0, 0)
		r.beat(1500*ms, self)
		r.want(1510*ms, 0, 1)
	})
}

// The tenant and host caps are cluster-wide like the endpoint cap: each
// node takes its share (capShare).
func TestGateTenantAndHostCapsClusterShare(t *testing.T) {
	for _, tc := range []struct {
		name               string
		tenantCap, hostCap int
		rank, nodes        int
		want               int
		reason             string
	}{
		{"tenant cap 10, rank 0 of 3", 10, 100, 0, 3, 4, "tenant_cap"},
		{"tenant cap 10, rank 2 of 3", 10, 100, 2, 3, 3, "tenant_cap"},
		{"host cap 7, rank 1 of 2", 100, 7, 1, 2, 3, "host_cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newScheduler(100, 100, 5, 30*time.Second, time.Second).withGroupCaps(tc.tenantCap, tc.hostCap, 10*time.Second)
			g.setShare(tc.rank, tc.nodes)
			got := 0
			for i := range 20 {
				ok, _, reason := g.admitAs(fmt.Sprint("ep", i), "a", "https://h.example/", t0)
				if !ok {
					if reason != tc.reason {
						t.Fatalf("refused for %q, want %q", reason, tc.reason)
					}
					break
				}
				got++
			}
			if got != tc.want {
				t.Fatalf("%d attempts admitted, want the node's share %d", got, tc.want)
			}
		})
	}
}

// TestRateLimitBoundAcrossJoin: the cluster bound R·T + n·b holds in every
// window of T seconds while nodes join and leave as the membership
// protocol has them (the nodes already there shrink their shares before a
// new one claims; a leaving node stops before the others grow), through
// idle spells, bursts of claims and claims turned away coming back late to
// a random node. Found by a review: a node that joined, or came back after
// holding no share, started with a full bucket beside the others' (an
// excess of 50 attempts at 1,000/s across a join, of one in 59 of 300
// random runs).
func TestRateLimitBoundAcrossJoin(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		limit := []int{1, 2, 3, 7, 10, 19, 20, 33, 50, 100, 1000}[rng.IntN(11)]
		maxNodes := 2 + rng.IntN(4)
		gs := make([]*scheduler, maxNodes)
		for i := range gs {
			gs[i] = newScheduler(1<<20, 1<<20, 5, 30*time.Second, time.Second)
		}
		live := 1 + rng.IntN(maxNodes)
		for i := range live {
			gs[i].setShare(i, live)
		}
		now := t0
		var sent []time.Time
		var queue backQueue
		for step := range 20000 {
			switch r := rng.IntN(1000); {
			case r < 3: // membership change
				nl := 1 + rng.IntN(maxNodes)
				if nl > live { // the others shrink first, then the new ones claim
					for i := range nl {
						gs[i].setShare(i, nl)
					}
				} else if nl < live { // the leavers stop first
					for i := nl; i < live; i++ {
						gs[i].setShare(0, 0)
					}
					for i := range nl {
						gs[i].setShare(i, nl)
					}
				}
				live = nl
			case r < 10: // an idle spell
				now = now.Add(time.Duration(rng.IntN(20000)) * time.Millisecond)
			}
			now = now.Add(time.Duration(rng.ExpFloat64() * float64(time.Second) / float64(limit) / 3))
			if queue.Len() > 0 && !queue.items[0].at.After(now) {
				heap.Pop(&queue) // a claim turned away earlier comes back now
			}
			g := gs[rng.IntN(live)]
			if ok, due, _ := g.admit("ep", limit, now); ok {
				sent = append(sent, now)
				g.done("ep", false, time.Millisecond, now)
			} else if queue.Len() < 2000 {
				queue.add(due.Add(time.Duration(rng.IntN(30))*time.Millisecond), step)
			}
		}
		sumBurst := 0
		for n := 1; n <= maxNodes; n++ {
			_, b := rateShare(limit, n)
			sumBurst = max(sumBurst, n*b)
		}
		for _, T := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second} {
			bound := float64(limit)*T.Seconds() + float64(sumBurst)
			for i, j := 0, 0; i < len(sent); i++ {
				for sent[i].Sub(sent[j]) >= T {
					j++
				}
				if float64(i-j+1) > bound+1e-9 {
					t.Errorf("seed %d, limit %d/s, up to %d nodes: %d attempts within %v (from %v), bound R·T + n·b = %.2f", seed, limit, maxNodes, i-j+1, T, sent[j].Sub(t0), bound)
					break
				}
			}
		}
	}
}
