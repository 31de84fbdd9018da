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

// completionLog records the completions the engine writes.
type completionLog struct {
	store.Store
	mu   sync.Mutex
	seen []store.Completion
}

func (s *completionLog) CompleteDeliveries(ctx context.Context, cs []store.Completion) error {
	s.mu.Lock()
	s.seen = append(s.seen, cs...)
	s.mu.Unlock()
	return s.Store.CompleteDeliveries(ctx, cs)
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
		AttemptTimeout: 10 * time.Second, Lease: lease, PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: r.sq.EndpointChanges})
	if err != nil {
		t.Fatal(err)
	}
	if r.e.cfg.ClaimAhead != 1 {
		t.Fatalf("ClaimAhead = %d, want 1 (Workers) with EndpointChanges set", r.e.cfg.ClaimAhead)
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

// A claim that waited in the line until its lease no longer covers a
// parked wait and an attempt (two attempt timeouts) is put back without an
// attempt, due at its own due time, and delivered by a later claim: an
// attempt under the short lease could outlive it and be sent twice.
func TestClaimAheadPutsBackAClaimWhoseLeaseRanShort(t *testing.T) {
	clk := clock.NewFake(t0)
	const timeout = 10 * time.Second
	r := aheadSetup(t, clk, 2*timeout+aheadLeaseSlack)
	second := r.deliveries[1]
	clk.Advance(aheadLeaseSlack + time.Millisecond) // the line's claim now has less than 2 × timeout left
	r.open()
	waitFor(t, "every delivery attempted", func() bool { return len(r.snd.attempted()) == 3 })
	waitFor(t, "the second delivery's put-back and success written", func() bool { return len(r.st.of(second.ID)) == 2 })
	cs := r.st.of(second.ID)
	if !cs[0].Deferred || !cs[0].NextAttemptAt.Equal(second.NextAttemptAt) {
		t.Fatalf("first completion of the line's claim %+v; want a deferral due at its own due time %v", cs[0], second.NextAttemptAt)
	}
	if cs[1].Deferred || cs[1].State != store.DeliverySucceeded || !cs[1].LeaseUntil.After(cs[0].LeaseUntil) {
		t.Fatalf("second completion %+v; want the success of a later claim (a new lease)", cs[1])
	}
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
		EndpointChanges: func() uint64 { return 0 }})
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
// checked (EndpointChanges), with one claim loop (two put claims in the
// line out of due order) and a lease with room for the wait; an explicit
// value is refused without those.
func TestClaimAheadConfig(t *testing.T) {
	changes := func() uint64 { return 0 }
	for _, c := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"SQLite defaults", Config{Workers: 8, EndpointChanges: changes}, 8},
		{"no count of endpoint changes (PostgreSQL)", Config{Workers: 8}, 0},
		{"two claim loops", Config{Workers: 8, EndpointChanges: changes, Claimers: 2}, 0},
		{"a lease of 2 × attempt timeout + 999 ms", Config{Workers: 8, EndpointChanges: changes, AttemptTimeout: time.Second, Lease: 2999 * time.Millisecond}, 0},
		{"a lease of 2 × attempt timeout + 1 s", Config{Workers: 8, EndpointChanges: changes, AttemptTimeout: time.Second, Lease: 3 * time.Second}, 8},
		{"negative: none", Config{Workers: 8, EndpointChanges: changes, ClaimAhead: -1}, 0},
		{"explicit", Config{Workers: 8, EndpointChanges: changes, ClaimAhead: 3}, 3},
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
		{"without EndpointChanges", Config{ClaimAhead: 4}, "needs EndpointChanges"},
		{"two claim loops", Config{ClaimAhead: 4, EndpointChanges: changes, Claimers: 2}, "one claim loop"},
		{"a short lease", Config{ClaimAhead: 4, EndpointChanges: changes, AttemptTimeout: time.Second, Lease: 2500 * time.Millisecond}, "2 × AttemptTimeout + 1s"},
	} {
		c.cfg.Store, c.cfg.Sender = wakeStore{}, nopSender{}
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error %v, want one saying %q", c.name, err, c.want)
		}
	}
}
