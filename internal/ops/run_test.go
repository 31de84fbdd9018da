package ops_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestRunTicksOnTheClock: Run's rounds follow the injected clock's
// ticker (Config.Clock), so a test moves housekeeping on by advancing
// time instead of sleeping through Interval. The interval is an hour: a
// wall-clock ticker would not fire during the test.
func TestRunTicksOnTheClock(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	newEndpoint(t, s, "ep_watch", "acme", "endpoint.*")
	disable := func(id string, at time.Time) {
		t.Helper()
		ep := newEndpoint(t, s, id, "acme")
		if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointDisabled, Reason: "gone",
			Notice: ops.TypeEndpointDisabled, Now: at}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewFake(t0.Add(time.Second))
	disable("ep_1", t0)
	published := make(chan struct{}, 10)
	h := ops.New(ops.Config{Store: s, Clock: clk, Interval: time.Hour, SpikeThreshold: -1, Logger: slog.New(slog.DiscardHandler),
		Notify: func() { published <- struct{}{} }})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-published:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no round published the notice", what)
		}
	}
	wait("first round, at Run's start")
	// The first round has emitted its notices; the next one waits for
	// the ticker.
	disable("ep_2", clk.Now())
	clk.Advance(time.Hour)
	wait("round after advancing the clock by Interval")
	if got := countEvents(t, s, "acme")[ops.TypeEndpointDisabled]; got != 2 {
		t.Fatalf("endpoint.disabled events: %d, want 2", got)
	}
}
