package delivery

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
)

// dueStore has one delivery due at a fixed time.
type dueStore struct {
	wakeStore
	due time.Time
}

func (s dueStore) NextDueAt(context.Context, []string) (time.Time, error) { return s.due, nil }

// The claimer sleeps until the next due time on the engine's clock: the
// retry due in 30 s is claimed when the clock reaches it, not a
// nanosecond before, and no wall time passes.
func TestClaimerSleepsUntilNextDueOnTheClock(t *testing.T) {
	clk := clock.NewFake(t0)
	e, err := New(Config{Store: dueStore{due: t0.Add(30 * time.Second)}, Sender: nopSender{}, Clock: clk, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	woke := make(chan struct{})
	go func() {
		e.waitForWork(ctx, time.Time{})
		close(woke)
	}()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := e.wakeAt.Load(); got != t0.Add(30*time.Second).UnixNano() {
		t.Fatalf("wakeAt = %v, want the due time %v", time.Unix(0, got).UTC(), t0.Add(30*time.Second))
	}
	clk.Advance(30*time.Second - time.Nanosecond)
	// The timer has not fired: it still waits on the clock.
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
		t.Fatal("the claimer woke before the delivery was due")
	default:
	}
	clk.Advance(time.Nanosecond)
	select {
	case <-woke:
	case <-time.After(10 * time.Second): // a hang guard: the fake clock has passed the due time
		t.Fatal("the claimer did not wake at the due time")
	}
}

// rescueStore records the times the rescuer rescues at.
type rescueStore struct {
	wakeStore
	mu  sync.Mutex
	ats []time.Time
	c   chan struct{}
}

func (s *rescueStore) RescueExpiredLeases(_ context.Context, now time.Time) (int, error) {
	s.mu.Lock()
	s.ats = append(s.ats, now)
	s.mu.Unlock()
	s.c <- struct{}{}
	return 0, nil
}

// The rescuer returns expired leases every RescueInterval of the engine's
// clock, comparing leases with the clock's time.
func TestRescuerTicksOnTheClock(t *testing.T) {
	clk := clock.NewFake(t0)
	st := &rescueStore{c: make(chan struct{}, 10)}
	e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, RescueInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.rescue(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	next := func(what string) {
		t.Helper()
		select {
		case <-st.c:
		case <-time.After(10 * time.Second):
			t.Fatalf("no rescue %s", what)
		}
	}
	next("at the start")
	for range 2 {
		clk.Advance(time.Hour)
		next("after advancing the clock by RescueInterval")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	want := []time.Time{t0, t0.Add(time.Hour), t0.Add(2 * time.Hour)}
	if len(st.ats) != len(want) {
		t.Fatalf("rescues at %v, want %v", st.ats, want)
	}
	for i := range want {
		if !st.ats[i].Equal(want[i]) {
			t.Fatalf("rescues at %v, want %v", st.ats, want)
		}
	}
}
