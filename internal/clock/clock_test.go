package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
)

func TestSystemNowIsUTC(t *testing.T) {
	before := time.Now()
	now := clock.System().Now()
	if now.Location() != time.UTC {
		t.Fatalf("System().Now() is in %v, want UTC", now.Location())
	}
	if now.Before(before.Add(-time.Second)) || now.After(time.Now().Add(time.Second)) {
		t.Fatalf("System().Now() = %v, not the wall clock (%v)", now, before)
	}
}

func TestSystemTimerFires(t *testing.T) {
	tm := clock.System().NewTimer(time.Millisecond)
	select {
	case <-tm.Chan():
	case <-time.After(10 * time.Second):
		t.Fatal("a 1 ms system timer did not fire in 10 s")
	}
}

// TestFakeFiresOnlyWhenAdvanced: the contract the engine's tests rely on —
// a fake timer fires when, and only when, the time passes its expiry, and
// BlockUntilContext tells when the code under test waits.
func TestFakeFiresOnlyWhenAdvanced(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := clock.NewFake(t0)
	got := make(chan time.Time, 1)
	go func() {
		tm := c.NewTimer(time.Minute)
		got <- <-tm.Chan()
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the timer never waited: %v", err)
	}
	c.Advance(time.Minute - time.Nanosecond)
	select {
	case at := <-got:
		t.Fatalf("the timer fired at %v, before its minute", at)
	default:
	}
	c.Advance(time.Nanosecond)
	if at := <-got; !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the timer fired with %v, want %v", at, t0.Add(time.Minute))
	}
	if !c.Now().Equal(t0.Add(time.Minute)) {
		t.Fatalf("Now = %v after advancing a minute", c.Now())
	}
}

// BenchmarkNow: the cost of the engine's Now through the Clock interface
// against time.Now().UTC() called directly (the engine reads it a few
// times per attempt).
func BenchmarkNow(b *testing.B) {
	b.Run("interface", func(b *testing.B) {
		c := clock.System()
		for b.Loop() {
			_ = c.Now()
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now().UTC()
		}
	})
}
