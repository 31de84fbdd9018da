package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/retry"
)

// newFakeClock is a fake clock (app.Config.Clock) at the wall clock's
// current second: the schedule moves only when the test advances it.
func newFakeClock() *clock.Fake {
	return clock.NewFake(time.Now().UTC().Truncate(time.Second))
}

// advanceTo moves the fake clock to at, a microsecond short first: an
// attempt made before its due time would start then, and show as an
// attempt that did not start at its next_attempt_at. Each step waits
// until the node sleeps on the clock (waitAsleep) before moving it.
func (h *herald) advanceTo(clk *clock.Fake, at time.Time) {
	h.t.Helper()
	if d := at.Sub(clk.Now()) - time.Microsecond; d > 0 {
		h.waitAsleep(clk)
		clk.Advance(d)
	}
	if d := at.Sub(clk.Now()); d > 0 {
		h.waitAsleep(clk)
		clk.Advance(d)
	}
}

// waitAsleep waits until every goroutine of the node that waits on the
// clock waits on it: each claimer's wait for work and the fan-out loop's
// (a timer each), the rescuer's and the housekeeping rounds' (a ticker
// each). A claimer reads the clock, then makes its timer for the time left
// until the next due delivery (or its poll): moved between the two, the
// clock would put that timer later by the step, past the due time the
// test then stops at, and the retry would never be made. It fails the test
// after 15 s of wall time.
func (h *herald) waitAsleep(clk *clock.Fake) {
	h.t.Helper()
	n := max(h.m.Store().Capabilities().Claimers, 1) + 3
	ctx, cancel := context.WithTimeout(h.t.Context(), 15*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, n); err != nil {
		h.t.Fatalf("the node never waited on the clock (%d timers and tickers) at %v: %v", n, clk.Now(), err)
	}
}

// waitAttempts waits (real I/O: the attempt goes over loopback HTTP) until
// the only delivery of eventID has made n attempts and returns it.
func (h *herald) waitAttempts(eventID string, n int) deliveryResp {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last deliveryResp
	for time.Now().Before(deadline) {
		if ds := h.eventDeliveries(eventID); len(ds) == 1 {
			if last = ds[0]; last.Attempts >= n {
				return last
			}
		}
		time.Sleep(10 * time.Millisecond) // polling the store, not timing anything
	}
	h.t.Fatalf("delivery of %s is %+v, want %d attempts", eventID, last, n)
	return last
}

// advanceUntil moves the fake clock on by step until cond holds, polling
// between steps (the work a step releases is real I/O); it fails the test
// after 20 s of wall time.
func (h *herald) advanceUntil(clk *clock.Fake, step time.Duration, what string, cond func() bool) {
	h.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not by %v on the clock", what, clk.Now())
		}
		clk.Advance(step)
		time.Sleep(10 * time.Millisecond) // let the released attempts run over loopback
	}
}

// attemptAt returns the start of attempt number n of delivery id.
func (h *herald) attemptAt(id string, n int) time.Time {
	h.t.Helper()
	for _, a := range h.attempts(id) {
		if a.Number == n {
			return a.StartedAt
		}
	}
	h.t.Fatalf("delivery %s has no attempt %d: %+v", id, n, h.attempts(id))
	return time.Time{}
}

// TestRetryScheduleOnTheClock: the default schedule (docs/contract.md:
// 8 attempts over about 35 h) end to end, in no wall time. Each retry is
// due at a time drawn in [d/2, d] after the attempt before it, where d is
// the schedule's entry (retry.Policy), is attempted when the clock reaches
// that time and not before, and after the last one the delivery is dead.
func TestRetryScheduleOnTheClock(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h := startHerald(t, func(c *app.Config) {
		c.Clock = clk
		c.RetrySchedule = retry.DefaultSchedule
		c.RescueInterval = time.Minute
	})
	rcv := newReceiver(t, 503)
	h.createEndpoint("acme", rcv.URL)
	pub := h.publish("acme", "invoice.paid", `{"invoice_id":"in_1"}`)
	d := h.waitAttempts(pub.ID, 1)
	if at := h.attemptAt(d.ID, 1); !at.Equal(clk.Now()) {
		t.Fatalf("first attempt at %v, want at once (%v)", at, clk.Now())
	}
	for k, step := range retry.DefaultSchedule {
		prev := h.attemptAt(d.ID, k+1)
		if d.State != "pending" || d.NextAttemptAt == nil {
			t.Fatalf("after attempt %d: %+v, want pending with a next attempt", k+1, d)
		}
		due := *d.NextAttemptAt
		if gap := due.Sub(prev); gap < step/2 || gap > step {
			t.Fatalf("attempt %d due %v after attempt %d, want in [%v, %v]", k+2, gap, k+1, step/2, step)
		}
		h.advanceTo(clk, due)
		d = h.waitAttempts(pub.ID, k+2)
		if at := h.attemptAt(d.ID, k+2); !at.Equal(due) {
			t.Fatalf("attempt %d started at %v, want its due time %v", k+2, at, due)
		}
	}
	if d.State != "dead" || d.Attempts != len(retry.DefaultSchedule)+1 || len(rcv.got()) != len(retry.DefaultSchedule)+1 {
		t.Fatalf("after the schedule: %+v, receiver saw %d; want dead after %d attempts", d, len(rcv.got()), len(retry.DefaultSchedule)+1)
	}
}

// TestShortRetryScheduleOnTheClock (issue 13, point 1): with a schedule
// shorter than the claimer's poll interval (200ms,400ms,800ms against a
// second), each retry of an always-500 endpoint starts at its due time,
// not at the next poll: the completion that schedules it wakes the
// sleeping claimer. The clock is fake, so "at its due time" is exact: a
// claimer left asleep would wait for a poll the test never reaches. The
// schedule is spent within --disable-after (2 s here, one failure
// enough), so the delivery is dead-lettered and the endpoint stays
// enabled.
func TestShortRetryScheduleOnTheClock(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	schedule := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	h := startHerald(t, func(c *app.Config) {
		c.Clock = clk
		c.RetrySchedule = schedule
		c.DisableAfter = 2 * time.Second
		c.DisableMinFailures = 1
		c.RescueInterval = time.Minute
	})
	rcv := newReceiver(t, 500)
	ep := h.createEndpoint("acme", rcv.URL)
	pub := h.publish("acme", "invoice.paid", `{"invoice_id":"in_1"}`)
	d := h.waitAttempts(pub.ID, 1)
	for k, step := range schedule {
		prev := h.attemptAt(d.ID, k+1)
		if d.State != "pending" || d.NextAttemptAt == nil {
			t.Fatalf("after attempt %d: %+v, want pending with a next attempt", k+1, d)
		}
		due := *d.NextAttemptAt
		if gap := due.Sub(prev); gap < step/2 || gap > step {
			t.Fatalf("attempt %d due %v after attempt %d, want in [%v, %v]", k+2, gap, k+1, step/2, step)
		}
		h.advanceTo(clk, due)
		d = h.waitAttempts(pub.ID, k+2)
		if at := h.attemptAt(d.ID, k+2); !at.Equal(due) {
			t.Fatalf("attempt %d started at %v, want its due time %v", k+2, at, due)
		}
	}
	if d.State != "dead" || d.Attempts != len(schedule)+1 {
		t.Fatalf("after the schedule: %+v; want dead after %d attempts", d, len(schedule)+1)
	}
	var got endpointResp
	if code, raw := h.call("GET", "/v1/endpoints/"+ep.ID, nil, &got); code != 200 || got.State != "enabled" {
		t.Fatalf("endpoint after the schedule: %d %s; want enabled (the schedule was spent within --disable-after)", code, raw)
	}
}
