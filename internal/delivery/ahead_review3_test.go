package delivery

// Claiming ahead (ahead.go), third review of the build answering the second
// review (1ea4fb2): reproductions, kept as tests of the build that answers
// them (idle workers count toward the line).

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// limitLog records each claim's Limit and the idle worker tokens at its
// start, and makes each claim take `took` of the engine's clock (a claim
// transaction that waited for the writer behind publish groups, as
// slowClaims). The clock steps only once the line is empty: with idle
// workers the dispatcher hands a claim ahead to one in microseconds, so a
// claim that would have waited in the line is not the test's artefact.
type limitLog struct {
	*sqlite.Store
	clk  *clock.Fake
	took time.Duration
	e    atomic.Pointer[Engine]
	mu   sync.Mutex
	lim  []int // Limit of each claim
	idle []int // idle worker tokens when it began
}

func (s *limitLog) ClaimDeliveries(ctx context.Context, p store.ClaimParams) ([]store.Claim, error) {
	e := s.e.Load()
	for deadline := time.Now().Add(5 * time.Second); e != nil && e.aheadN.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Microsecond)
	}
	s.mu.Lock()
	s.lim = append(s.lim, p.Limit)
	if e != nil {
		s.idle = append(s.idle, len(e.slots))
	}
	s.mu.Unlock()
	s.clk.Advance(s.took)
	return s.Store.ClaimDeliveries(ctx, p)
}

// ahead.go: the line is what the workers take in aheadHorizon at the pace
// their tokens freed, at least one. But while the claimer is the
// bottleneck (workers idle: a claim transaction slower than aheadHorizon,
// when the writer is busy with publish groups), the pace of freed tokens
// is the pace of claims: a line of L claims per transaction of T frees L
// per T, so the next line is L·aheadHorizon/T. With T > aheadHorizon the
// line shrinks at every measurement down to one, and stays there: one
// delivery per claim transaction with every worker idle, while the usual
// loop claims every idle worker at once. 1ea4fb2 lowered the floor from 8
// to 1, so the trap now costs a factor of Workers, not Workers/8.
func TestReview3AheadSlowClaimsShrinkTheLineToOne(t *testing.T) {
	const workers, endpoints, events = 16, 16, 12 // 192 deliveries
	claimsFor := map[string]int{}
	for _, c := range []struct {
		name  string
		ahead int
	}{{"without claiming ahead", -1}, {"claiming ahead", 0}} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			sq := claimingStore(t)
			eps := createHoldEndpoints(t, sq, endpoints)
			for range events {
				holdPublish(t, sq, "t", t0)
			}
			st := &limitLog{Store: sq, clk: clk, took: 150 * time.Millisecond}
			e, err := New(Config{Store: st, Sender: okSender{}, Clock: clk, Workers: workers, EndpointConcurrency: workers, TenantConcurrency: workers, HostConcurrency: workers,
				AttemptTimeout: 10 * time.Second, PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: sq.EndpointChanges, Renewer: sq, ClaimAhead: c.ahead})
			if err != nil {
				t.Fatal(err)
			}
			st.e.Store(e)
			cancel, done := runInBackground(t, e)
			t.Cleanup(func() { cancel(); <-done })
			e.Notify()
			waitAllSucceeded(t, sq, eps...)
			st.mu.Lock()
			defer st.mu.Unlock()
			claimsFor[c.name] = len(st.lim)
			ones, idleAtOnes := 0, 0
			for i, l := range st.lim {
				if l == 1 && i < len(st.idle) && st.idle[i] >= workers/2 {
					ones++
					idleAtOnes += st.idle[i]
				}
			}
			t.Logf("%d claims (%v of the engine's clock in claim transactions) for %d deliveries; %d claims of one delivery with %d+ workers idle; limits %v",
				len(st.lim), time.Duration(len(st.lim))*st.took, workers*events, ones, workers/2, st.lim)
			if c.ahead == 0 && ones > 10 {
				t.Errorf("%d claims of a single delivery while %d or more of %d workers were idle (a line shrunk to one by slow claim transactions); the usual loop took %d claims in all",
					ones, workers/2, workers, claimsFor["without claiming ahead"])
			}
		})
	}
}

// The claimer waits in roomAhead for the signal aheadDone sends when the
// line is half free (by aheadLine, as the claimer last measured it). A line
// that shrinks to one while eight claims wait, or grows past them, must
// still wake it: the threshold is checked against the line the waiter
// measured, and the line's last claim always signals. Checked, not a
// defect.
func TestReview3AheadLineChangeWakesTheClaimer(t *testing.T) {
	for _, c := range []struct {
		name  string
		freed int64 // tokens freed in one aheadHorizon before the wait
		want  int   // the line measured by roomAhead
	}{{"shrinks to one", 0, 1}, {"stays", 8, 8}, {"grows", 16, 16}} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			e, err := New(Config{Store: wakeStore{}, Sender: nopSender{}, Clock: clk, Workers: 16, Lease: time.Minute,
				EndpointChanges: func() uint64 { return 0 }, Renewer: renewNothing{}})
			if err != nil {
				t.Fatal(err)
			}
			var p aheadPace
			if n := e.lineLen(&p, clk.Now()); n != aheadFirstLine {
				t.Fatalf("first line %d", n)
			}
			for range 16 { // every worker busy: no idle token counts toward the line
				<-e.slots
			}
			e.aheadN.Store(8) // a full first line
			e.freed.Add(c.freed)
			clk.Advance(aheadHorizon)
			e.backlog.Store(true)
			got := make(chan int, 1)
			go func() { got <- e.roomAhead(t.Context(), &p) }()
			for range 8 { // the line's claims leave one by one
				e.aheadDone()
			}
			select {
			case n := <-got:
				if p.line != c.want || n < 1 || n > p.line {
					t.Fatalf("roomAhead %d with line %d; want a line of %d with room", n, p.line, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("roomAhead still waiting with the line empty (line %d)", p.line)
			}
		})
	}
}

// A claim ahead whose lease ended while it waited, not yet rescued (its
// lease still listed: RescueInterval 1 h), is put back lease_expired: the
// put-back names the claim's lease (still held, so it is written), due as
// it was (t0), the lease is forgotten, and the delivery is then claimed
// again and attempted once. Checked, not a defect.
func TestReview3AheadLeaseExpiredPutBackWritesDueAsItWas(t *testing.T) {
	clk := clock.NewFake(t0)
	r := aheadSetup(t, clk, 0)
	second := r.deliveries[1]
	clk.Advance(r.e.cfg.Lease + time.Second)
	r.open()
	waitFor(t, "the line's claim put back", func() bool { return len(r.st.of(second.ID)) >= 1 })
	c := r.st.of(second.ID)[0]
	if !c.Deferred || !c.NextAttemptAt.Equal(second.NextAttemptAt) || !c.LeaseUntil.Equal(t0.Add(r.e.cfg.Lease)) {
		t.Fatalf("put-back %+v; want a deferral due %v (as it was) under the claim's lease until %v", c, second.NextAttemptAt, t0.Add(r.e.cfg.Lease))
	}
	waitAllSucceeded(t, r.sq, "ep_ahead")
	if d, err := r.sq.GetDelivery(t.Context(), second.ID); err != nil || d.Attempts != 1 || d.LeaseOwner != "" {
		t.Fatalf("the put-back delivery: %+v, %v; want succeeded after one attempt, unleased", d, err)
	}
	n := 0
	for _, ev := range r.snd.attempted() {
		if ev == second.EventID {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the put-back delivery attempted %d times, want once", n)
	}
}

// The same trap on an engine whose clock stepped once over a quiet spell
// and then stands still (a fake clock, or a backlog of retries made due
// after a quiet second on a real clock, for its first aheadHorizon): the
// measurement over the quiet spell (no token freed) makes the line one,
// and with the clock standing still it is never measured again, so every
// claim of the backlog takes one delivery while the workers are idle.
// Before 1ea4fb2 the line never went below aheadFirstLine.
func TestReview3AheadQuietSpellLeavesALineOfOne(t *testing.T) {
	const workers, endpoints, events = 16, 16, 12
	clk := clock.NewFake(t0)
	sq := claimingStore(t)
	eps := createHoldEndpoints(t, sq, endpoints)
	st := &limitLog{Store: sq, clk: clk}
	e, err := New(Config{Store: st, Sender: okSender{}, Clock: clk, Workers: workers, EndpointConcurrency: workers, TenantConcurrency: workers, HostConcurrency: workers,
		AttemptTimeout: 10 * time.Second, PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: sq.EndpointChanges, Renewer: sq})
	if err != nil {
		t.Fatal(err)
	}
	st.e.Store(e)
	cancel, done := runInBackground(t, e)
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the first (empty) claim", func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.lim) == 1 })
	clk.Advance(time.Second) // a quiet second
	for range events {
		holdPublish(t, sq, "t", clk.Now())
	}
	e.Notify()
	waitAllSucceeded(t, sq, eps...)
	st.mu.Lock()
	defer st.mu.Unlock()
	ones := 0
	for i, l := range st.lim {
		if l == 1 && st.idle[i] >= workers/2 {
			ones++
		}
	}
	t.Logf("%d claims for %d deliveries; limits %v", len(st.lim)-1, workers*events, st.lim[1:])
	if ones > 10 {
		t.Errorf("%d claims of a single delivery while %d or more of %d workers were idle (the line measured over a quiet second, never measured again)", ones, workers/2, workers)
	}
}
