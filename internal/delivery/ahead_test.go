package delivery

// Claiming ahead (ahead.go) on a real SQLite store: a claim that waits in
// the line for a worker is checked at its turn.

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

// gateSender holds every attempt until the test opens its gate, and
// records the events attempted, in order.
type gateSender struct {
	gate     chan struct{}
	mu       sync.Mutex
	attempts []string // X-Event-Id of each attempt, as it began
}

func (s *gateSender) Do(ctx context.Context, r egress.Request) egress.Result {
	s.mu.Lock()
	s.attempts = append(s.attempts, r.Header.Get(HeaderEventID))
	s.mu.Unlock()
	select {
	case <-s.gate:
	case <-ctx.Done():
	}
	return egress.Result{StatusCode: 204, Duration: time.Millisecond}
}

func (s *gateSender) attempted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attempts)
}

// completionLog records the completions the engine writes, once the
// store's call returned (so a completion seen is one a read finds
// committed: recorded before the call, a test read the delivery still
// pending).
type completionLog struct {
	store.Store
	mu   sync.Mutex
	seen []store.Completion
}

func (s *completionLog) CompleteDeliveries(ctx context.Context, cs []store.Completion) error {
	err := s.Store.CompleteDeliveries(ctx, cs)
	s.mu.Lock()
	s.seen = append(s.seen, cs...)
	s.mu.Unlock()
	return err
}

func (s *completionLog) of(deliveryID string) []store.Completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Completion
	for _, c := range s.seen {
		if c.DeliveryID == deliveryID {
			out = append(out, c)
		}
	}
	return out
}

// aheadRun is a one-worker engine claiming ahead on a real SQLite store,
// with three deliveries to one endpoint: the first is attempted (held by
// the sender), the second waits in the line.
type aheadRun struct {
	sq         *sqlite.Store
	st         *completionLog
	snd        *gateSender
	e          *Engine
	deliveries []store.Delivery // in creation order
	open       func()           // lets every attempt through
	cancel     context.CancelFunc
	done       <-chan struct{} // closed when Run has returned
}

func aheadSetup(t *testing.T, clk *clock.Fake, lease time.Duration) *aheadRun {
	t.Helper()
	r := &aheadRun{sq: claimingStore(t)}
	ep := holdEndpoint("ep_ahead")
	if _, err := r.sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		holdPublish(t, r.sq, "t", t0)
	}
	r.deliveries = holdDeliveries(t, r.sq, ep.ID)
	slices.SortFunc(r.deliveries, func(a, b store.Delivery) int { return strings.Compare(a.ID, b.ID) })
	r.st = &completionLog{Store: r.sq}
	r.snd = &gateSender{gate: make(chan struct{})}
	var err error
	r.e, err = New(Config{Store: r.st, Sender: r.snd, Clock: clk, Workers: 1, EndpointConcurrency: 1, TenantConcurrency: 1, HostConcurrency: 1,
		AttemptTimeout: 10 * time.Second, Lease: lease, PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: r.sq.EndpointChanges, Renewer: r.sq})
	if err != nil {
		t.Fatal(err)
	}
	if r.e.cfg.ClaimAhead != 1 {
		t.Fatalf("ClaimAhead = %d, want 1 (Workers) with EndpointChanges and Renewer set", r.e.cfg.ClaimAhead)
	}
	r.cancel, r.done = runInBackground(t, r.e)
	r.open = sync.OnceFunc(func() { close(r.snd.gate) })
	t.Cleanup(func() { r.open(); r.cancel(); <-r.done })
	r.e.Notify()
	waitFor(t, "the first attempt in flight and the second claim in the line", func() bool {
		return len(r.snd.attempted()) == 1 && r.e.aheadN.Load() == 1
	})
	if got := r.snd.attempted(); got[0] != r.deliveries[0].EventID {
		t.Fatalf("first attempt of %s, want the oldest delivery's event %s", got[0], r.deliveries[0].EventID)
	}
	return r
}

// A claim that waited in the line while its endpoint was paused is not
// attempted: the count of endpoint changes moved, the endpoint is read
// again, and the delivery is held with the endpoint's others. Without the
// check it would be sent after the pause was answered.
func TestClaimAheadSeesAPauseMadeWhileItWaited(t *testing.T) {
	clk := clock.NewFake(t0)
	r := aheadSetup(t, clk, 0)
	if _, _, err := r.sq.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: "ep_ahead", State: store.EndpointPaused, Now: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	r.open()
	waitFor(t, "the first delivery succeeded and the others held", func() bool {
		n := map[store.DeliveryState]int{}
		for _, d := range holdDeliveries(t, r.sq, "ep_ahead") {
			n[d.State]++
		}
		return n[store.DeliverySucceeded] == 1 && n[store.DeliveryPaused] == 2
	})
	if got := r.snd.attempted(); len(got) != 1 {
		t.Fatalf("attempts %v; want only the first delivery's (%s): the claim in the line was attempted after the pause", got, r.deliveries[0].EventID)
	}
}

// A claim that waited in the line longer than aheadSlowWait gets a fresh
// lease at its turn (SQLite: in memory), so its attempt runs under a whole
// lease as a claim taken then would, and claiming ahead pauses; its
// completion names the new lease and moves the delivery.
func TestClaimAheadRenewsTheLeaseOfAClaimThatWaited(t *testing.T) {
	clk := clock.NewFake(t0)
	r := aheadSetup(t, clk, 0)
	second := r.deliveries[1]
	clk.Advance(5 * time.Second) // the line's claim waits 5 s: its lease (25 s) has 20 s left
	turn := clk.Now()
	r.open()
	waitFor(t, "every delivery attempted", func() bool { return len(r.snd.attempted()) == 3 })
	waitFor(t, "the second delivery's success written", func() bool { return len(r.st.of(second.ID)) == 1 })
	c := r.st.of(second.ID)[0]
	if c.Deferred || c.State != store.DeliverySucceeded || !c.LeaseUntil.Equal(turn.Add(r.e.cfg.Lease)) {
		t.Fatalf("completion of the line's claim %+v; want a success under a lease renewed at its turn, until %v", c, turn.Add(r.e.cfg.Lease))
	}
	if got := r.snd.attempted(); !slices.Equal(got, []string{r.deliveries[0].EventID, r.deliveries[1].EventID, r.deliveries[2].EventID}) {
		t.Fatalf("attempts %v; want each delivery once, in creation order", got)
	}
	if d, err := r.sq.GetDelivery(t.Context(), second.ID); err != nil || d.State != store.DeliverySucceeded || d.Attempts != 1 {
		t.Fatalf("the line's delivery: %+v, %v; want succeeded after one attempt", d, err)
	}
	if off := r.e.aheadOff.Load(); off < turn.Add(aheadPause).UnixNano() {
		t.Fatalf("claiming ahead paused until %v; want until %v (a wait over %v)", time.Unix(0, off).UTC(), turn.Add(aheadPause), aheadSlowWait)
	}
}

// A claim whose lease ran out while it waited (the wait outlasted the
// lease; a rescue may have freed it) is not attempted: the renewal fails,
// and its delivery is due again as it was.
func TestClaimAheadDropsAClaimWhoseLeaseRanOut(t *testing.T) {
	clk := clock.NewFake(t0)
	r := aheadSetup(t, clk, 0)
	second := r.deliveries[1]
	clk.Advance(r.e.cfg.Lease + time.Second)
	if n, err := r.sq.RescueExpiredLeases(t.Context(), clk.Now()); err != nil || n != 2 {
		t.Fatalf("rescue: %d, %v; want the two claims' leases (the attempt's and the line's)", n, err)
	}
	r.open()
	waitFor(t, "the line's claim put back", func() bool { return len(r.st.of(second.ID)) >= 1 })
	if c := r.st.of(second.ID)[0]; !c.Deferred {
		t.Fatalf("first completion of the line's claim %+v; want a deferral (no attempt under a lost lease)", c)
	}
	waitAllSucceeded(t, r.sq, "ep_ahead")
}

// Stopping with a claim in the line puts it back due at once, without an
// attempt (the worker is still busy: the dispatcher does not wait for its
// token), and leaves nothing leased.
func TestClaimAheadShutdownPutsTheLineBack(t *testing.T) {
	clk := clock.NewFake(t0)
	r := aheadSetup(t, clk, 0)
	second := r.deliveries[1]
	r.cancel()
	waitFor(t, "the line's claim put back", func() bool { return len(r.st.of(second.ID)) == 1 })
	if c := r.st.of(second.ID)[0]; !c.Deferred || !c.NextAttemptAt.Equal(clk.Now()) {
		t.Fatalf("completion of the line's claim %+v; want a deferral due now (%v)", c, clk.Now())
	}
	r.open()
	<-r.done
	if got := r.snd.attempted(); len(got) != 1 {
		t.Fatalf("attempts %v; want only the first delivery's", got)
	}
	for _, d := range holdDeliveries(t, r.sq, "ep_ahead")[0:] {
		if d.LeaseOwner != "" {
			t.Errorf("delivery %s still leased to %s after the shutdown", d.ID, d.LeaseOwner)
		}
		if d.ID != r.deliveries[0].ID && (d.State != store.DeliveryPending || d.Attempts != 0) {
			t.Errorf("delivery %s: %s with %d attempts; want pending, unattempted", d.ID, d.State, d.Attempts)
		}
	}
}

// The hand-off reserves no worker while claims wait in the line: they are
// older than the publish's deliveries.
func TestHandOffWaitsForTheLine(t *testing.T) {
	e, err := New(Config{Store: wakeStore{}, Sender: nopSender{}, Clock: clock.NewFake(t0), Workers: 4, Lease: time.Minute,
		EndpointChanges: func() uint64 { return 0 }, Renewer: renewNothing{}})
	if err != nil {
		t.Fatal(err)
	}
	e.handOpen = true
	e.sched.nodes = 1
	e.aheadN.Store(1)
	if n := e.Reserve("acme", 1); n != 0 {
		t.Fatalf("Reserve with a claim in the line = %d, want 0", n)
	}
	e.aheadN.Store(0)
	if n := e.Reserve("acme", 1); n != 1 {
		t.Fatalf("Reserve with the line empty = %d, want 1", n)
	}
	e.giveBack(1)
	e.handOffs.Done()
}

// Claiming ahead is on by default only where a claim that waited can be
// checked (EndpointChanges) and given a fresh lease (Renewer), with one
// claim loop (two put claims in the line out of due order); an explicit
// value is refused without those.
func TestClaimAheadConfig(t *testing.T) {
	changes := func() uint64 { return 0 }
	renewer := renewNothing{}
	for _, c := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"SQLite defaults", Config{Workers: 8, EndpointChanges: changes, Renewer: renewer}, 8},
		{"no count of endpoint changes (PostgreSQL)", Config{Workers: 8, Renewer: renewer}, 0},
		{"no lease renewal", Config{Workers: 8, EndpointChanges: changes}, 0},
		{"two claim loops", Config{Workers: 8, EndpointChanges: changes, Renewer: renewer, Claimers: 2}, 0},
		{"negative: none", Config{Workers: 8, EndpointChanges: changes, Renewer: renewer, ClaimAhead: -1}, 0},
		{"explicit", Config{Workers: 8, EndpointChanges: changes, Renewer: renewer, ClaimAhead: 3}, 3},
	} {
		if got := c.cfg.WithDefaults().ClaimAhead; got != c.want {
			t.Errorf("%s: ClaimAhead = %d, want %d", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"without EndpointChanges", Config{ClaimAhead: 4, Renewer: renewer}, "needs EndpointChanges"},
		{"without Renewer", Config{ClaimAhead: 4, EndpointChanges: changes}, "needs Renewer"},
		{"two claim loops", Config{ClaimAhead: 4, EndpointChanges: changes, Renewer: renewer, Claimers: 2}, "one claim loop"},
	} {
		c.cfg.Store, c.cfg.Sender = wakeStore{}, nopSender{}
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

type renewNothing struct{}

func (renewNothing) RenewLease(context.Context, store.RenewLeaseParams) (bool, error) {
	return false, nil
}

// The line's length follows the pace at which worker tokens free: what the
// workers take in aheadHorizon, between 1 and ClaimAhead, so a claim waits
// in it about aheadHorizon (or one attempt's end, when fewer end in that
// time) whether attempts take 2 ms or 2 s.
func TestClaimAheadLineFollowsThePace(t *testing.T) {
	e, err := New(Config{Store: wakeStore{}, Sender: nopSender{}, Workers: 128, EndpointChanges: func() uint64 { return 0 }, Renewer: renewNothing{}})
	if err != nil {
		t.Fatal(err)
	}
	var p aheadPace
	at := t0
	if n := e.lineLen(&p, at); n != aheadFirstLine {
		t.Fatalf("first line %d, want %d before any pace is known", n, aheadFirstLine)
	}
	for _, c := range []struct {
		freed int64         // tokens freed during the step
		after time.Duration // the step
		want  int
	}{
		{700, aheadHorizon, 128},       // 14,000 attempts/s: ClaimAhead
		{40, aheadHorizon / 2, 128},    // under one horizon: unchanged
		{80, aheadHorizon, 80},         // 120 in the 75 ms since the last reading: 80 per horizon
		{6, aheadHorizon, 6},           // 120 attempts/s (128 workers on about 1 s attempts)
		{0, 10 * aheadHorizon, 1},      // a stall: the shortest line
		{2 * 64, 2 * aheadHorizon, 64}, // 64 per horizon
	} {
		e.freed.Add(c.freed)
		at = at.Add(c.after)
		if n := e.lineLen(&p, at); n != c.want {
			t.Errorf("after %d tokens freed in %v: line %d, want %d", c.freed, c.after, n, c.want)
		}
	}
}

// waitAllSucceeded waits until every delivery of the endpoints has
// succeeded.
func waitAllSucceeded(t *testing.T, st store.Store, endpointIDs ...string) {
	t.Helper()
	waitFor(t, "every delivery succeeded", func() bool {
		for _, id := range endpointIDs {
			for _, d := range holdDeliveries(t, st, id) {
				if d.State != store.DeliverySucceeded {
					return false
				}
			}
		}
		return true
	})
}
