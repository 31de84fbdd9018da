package delivery

// A cold start's pull-in through the engine, on a real SQLite store.

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// pullInStore counts the pull-ins the engine writes.
type pullInStore struct {
	store.Store
	pullIns atomic.Int32
}

func (s *pullInStore) MoveEndpointDeliveries(ctx context.Context, p store.MoveParams) (int, error) {
	n, err := s.Store.MoveEndpointDeliveries(ctx, p)
	if p.Unattempted && err == nil {
		s.pullIns.Add(1)
	}
	return n, err
}

// coldSender answers its first two attempts once slow is closed, as if
// they took 5 s, and every later one at once, as if it took 100 ms.
type coldSender struct {
	slow    chan struct{}
	started atomic.Int32
	ok      atomic.Int32
}

func (s *coldSender) Do(context.Context, egress.Request) egress.Result {
	took := 100 * time.Millisecond
	if s.started.Add(1) <= 2 {
		<-s.slow
		took = 5 * time.Second
	}
	s.ok.Add(1)
	return egress.Result{StatusCode: 204, Duration: took}
}

// An endpoint met with a backlog at slow start whose first answers are
// slow and the rest fast: once it answers fast, the deliveries deferred
// ahead at the slow pace are pulled in and spaced at the new pace, and
// arrive well before their deferrals' end (TestColdStartPullsInItsDeferrals
// simulates the whole drain on the scheduler).
func TestColdStartPullInThroughTheEngine(t *testing.T) {
	clk := clock.NewFake(t0)
	sq, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &pullInStore{Store: sq}
	snd := &coldSender{slow: make(chan struct{})}
	ep := holdEndpoint("ep_cold")
	if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	const backlog = 40
	for range backlog {
		holdPublish(t, sq, "order.created", t0)
	}
	e, err := New(Config{Store: st, Sender: snd, Clock: clk, Workers: 32, EndpointConcurrency: 16, TenantConcurrency: 32, HostConcurrency: 64,
		AttemptTimeout: 10 * time.Second, PollInterval: time.Hour, RescueInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	defer func() { close(snd.slow); cancel(); <-done }()

	// settled: every delivery is delivered, in the sender, or due after
	// now (none claimed and not yet written back).
	settled := func() bool {
		now, n := clk.Now(), int(snd.started.Load()-snd.ok.Load())
		for _, d := range holdDeliveries(t, sq, ep.ID) {
			if d.State == store.DeliverySucceeded || (d.State == store.DeliveryPending && d.NextAttemptAt.After(now)) {
				n++
			}
		}
		return n == backlog
	}
	// Slow start: two attempts in the sender, the rest deferred.
	waitFor(t, "slow start's two attempts in flight, the rest deferred", func() bool { return snd.started.Load() == 2 && settled() })
	// Their deferrals come due while the first answers are awaited, and
	// are spaced by the attempts' age (2 s over the cap of 16).
	clk.Advance(2 * time.Second)
	waitFor(t, "the backlog deferred again", settled)
	var chainEnd time.Time
	for _, d := range holdDeliveries(t, sq, ep.ID) {
		if d.State == store.DeliveryPending && d.NextAttemptAt.After(chainEnd) {
			chainEnd = d.NextAttemptAt
		}
	}
	t.Logf("deferred up to %v after the start", chainEnd.Sub(t0))
	snd.slow <- struct{}{}
	snd.slow <- struct{}{}
	waitFor(t, "the two slow answers written", func() bool { return snd.ok.Load() == 2 && settled() })
	// The deferrals come due one by one and are answered fast, until the
	// endpoint's pace is far faster than their spacing.
	for st.pullIns.Load() == 0 {
		if !clk.Now().Before(chainEnd) {
			t.Fatalf("the clock reached the deferrals' end (%v) with %d of %d delivered and no pull-in", chainEnd.Sub(t0), snd.ok.Load(), backlog)
		}
		clk.Advance(100 * time.Millisecond)
		waitFor(t, "the deliveries due delivered", settled)
	}
	pulled := clk.Now()
	// The rest comes at the new pace: each delivery due as the claims
	// turned away now would be, not where the slow pace had put it.
	for snd.ok.Load() < backlog {
		if !clk.Now().Before(chainEnd) {
			t.Fatalf("the clock reached the deferrals' end (%v) with %d of %d delivered", chainEnd.Sub(t0), snd.ok.Load(), backlog)
		}
		clk.Advance(10 * time.Millisecond)
		waitFor(t, "the deliveries due delivered", settled)
	}
	t.Logf("pulled in at %v, all %d delivered at %v (deferred up to %v)", pulled.Sub(t0), backlog, clk.Now().Sub(t0), chainEnd.Sub(t0))
	if left, took := chainEnd.Sub(pulled), clk.Now().Sub(pulled); took > left/2 {
		t.Errorf("the rest took %v after the pull-in, want well under the %v their deferrals had left", took, left)
	}
}
