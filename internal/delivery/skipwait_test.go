package delivery

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
)

// retryBehindSkipStore holds two deliveries: ep_bad's, due at t0, whose
// endpoint's values do not open (every claim that does not skip ep_bad
// meets it), and dlv_ok, a retry of ep_ok due at t0+500ms. NextDueAt
// answers as a store does: the earliest due delivery neither claimed nor
// of a skipped endpoint.
type retryBehindSkipStore struct {
	wakeStore
	mu      sync.Mutex
	okTaken bool
	claims  chan time.Time // the claim that took dlv_ok, at its Now
}

var okDue = t0.Add(500 * time.Millisecond)

func (s *retryBehindSkipStore) ClaimDeliveries(_ context.Context, p store.ClaimParams) ([]store.Claim, error) {
	if !slices.Contains(p.SkipEndpoints, "ep_bad") {
		p.Report([]store.UnreadableEndpoint{{ID: "ep_bad", Tenant: "acme", Deliveries: 1, OldestDue: t0,
			Err: &store.UnreadableError{EndpointID: "ep_bad", Err: errors.New("cannot decrypt")}}})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.okTaken || p.Now.Before(okDue) {
		return nil, nil
	}
	s.okTaken = true
	s.claims <- p.Now
	return []store.Claim{{Delivery: store.Delivery{ID: "dlv_ok", Tenant: "acme", EndpointID: "ep_ok", NextAttemptAt: okDue, Attempts: 1},
		Endpoint: holdEndpoint("ep_ok")}}, nil
}

func (s *retryBehindSkipStore) NextDueAt(_ context.Context, _, skipEndpoints []string) (time.Time, error) {
	if !slices.Contains(skipEndpoints, "ep_bad") {
		return t0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.okTaken {
		return time.Time{}, nil
	}
	return okDue, nil
}

func (*retryBehindSkipStore) ContinueFanOut(context.Context, store.FanOutParams) (store.FanOutResult, error) {
	return store.FanOutResult{}, nil
}

func (*retryBehindSkipStore) RescueExpiredLeases(context.Context, time.Time) (int, error) {
	return 0, nil
}

// While an endpoint whose values do not open is skipped (for 1 s), another
// endpoint's retry that comes due within the skip (at 500 ms) is claimed
// when it is due, not when the skip ends: the claimer's next-due read
// leaves the skipped endpoints out, as the claims do. Before, the read
// counted the skipped endpoint's delivery, due already, and the claimer
// then slept until the skip's end (or the poll interval), whatever else
// came due meanwhile. The clock is a fake: it moves only when the test
// advances it.
func TestRetryDueDuringASkipIsClaimedWhenDue(t *testing.T) {
	st := &retryBehindSkipStore{claims: make(chan time.Time, 1)}
	clk := clock.NewFake(t0)
	e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, Workers: 4, PollInterval: time.Hour, RescueInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cancel, ran := runInBackground(t, e)
	defer func() { cancel(); <-ran }()
	// The claimer meets ep_bad, claims again skipping it, and sleeps on
	// the clock (with the rescuer's and the fan-out loop's timers).
	bctx, bcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer bcancel()
	if err := clk.BlockUntilContext(bctx, 3); err != nil {
		t.Fatalf("the claimer never slept on the clock: %v", err)
	}
	clk.Advance(500 * time.Millisecond)
	select {
	case at := <-st.claims:
		if !at.Equal(okDue) {
			t.Errorf("ep_ok's retry claimed at %v, want when due (%v)", at.Sub(t0), okDue.Sub(t0))
		}
	case <-time.After(10 * time.Second): // a hang guard: on the fake clock nothing else would come
		t.Fatalf("ep_ok's retry, due at 500 ms, not claimed at 500 ms: the claimer sleeps until ep_bad's skip ends (1 s)")
	}
}
