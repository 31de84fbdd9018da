package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/store"
)

// wakeStore is a store with nothing due: the claimer sleeps the whole poll
// interval unless something wakes it.
type wakeStore struct {
	store.Store
}

func (wakeStore) NextDueAt(context.Context, []string) (time.Time, error)       { return time.Time{}, nil }
func (wakeStore) CompleteDeliveries(context.Context, []store.Completion) error { return nil }

// A completion that schedules a retry before the sleeping claimer's
// wake-up wakes it (issue 13, point 1): with a poll interval of an hour,
// the claimer still returns from its wait as soon as the completion of a
// retry due in 200 ms is written.
func TestCompletionWakesClaimerForEarlierRetry(t *testing.T) {
	clk := clock.NewFake(t0)
	e, err := New(Config{Store: wakeStore{}, Sender: nopSender{}, Clock: clk, PollInterval: time.Hour})
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
	// Wait until the claimer sleeps on its timer; it has announced its
	// wake-up time (an hour on) before making it.
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := e.wakeAt.Load(); got != t0.Add(time.Hour).UnixNano() {
		t.Fatalf("wakeAt = %d, want an hour on (%d)", got, t0.Add(time.Hour).UnixNano())
	}
	go e.complete()
	e.results <- result{c: store.Completion{DeliveryID: "dlv_1", State: store.DeliveryPending, NextAttemptAt: t0.Add(200 * time.Millisecond), Now: t0}}
	defer close(e.results)
	select {
	case <-woke:
	case <-time.After(time.Minute): // a hang guard, not a speed assertion: without the wake-up the wait is an hour
		t.Fatal("the claimer slept through a retry due before its poll")
	}
}

// A retry due after the claimer's wake-up does not wake it, and nothing
// wakes a claimer that is not asleep.
func TestDueBefore(t *testing.T) {
	retry := []store.Completion{{State: store.DeliveryPending, NextAttemptAt: t0.Add(time.Second)}}
	done := []store.Completion{{State: store.DeliverySucceeded, NextAttemptAt: t0}}
	for _, c := range []struct {
		name   string
		batch  []store.Completion
		wakeAt int64
		want   bool
	}{
		{"retry before the wake-up", retry, t0.Add(2 * time.Second).UnixNano(), true},
		{"retry after the wake-up", retry, t0.Add(500 * time.Millisecond).UnixNano(), false},
		{"no claimer asleep", retry, 0, false},
		{"claimer reading its next due time", retry, 1<<63 - 1, true},
		{"success", done, t0.Add(time.Hour).UnixNano(), false},
	} {
		if got := dueBefore(c.batch, c.wakeAt); got != c.want {
			t.Errorf("%s: dueBefore = %v, want %v", c.name, got, c.want)
		}
	}
}

type nopSender struct{}

func (nopSender) Do(context.Context, egress.Request) egress.Result { return egress.Result{} }

type blockedSender struct{}

func (blockedSender) Do(context.Context, egress.Request) egress.Result {
	return egress.Result{ErrorClass: egress.ClassBlocked, ErrorDetail: "destination address is not allowed by the egress policy"}
}

// Issue 13, point 3: an attempt the egress policy refuses dead-letters the
// delivery at once, with the error "blocked", instead of retrying it on
// the whole schedule.
func TestBlockedDestinationIsDeadAtOnce(t *testing.T) {
	if egress.ClassBlocked != retry.ErrorClassBlocked {
		t.Fatalf("egress.ClassBlocked %q != retry.ErrorClassBlocked %q", egress.ClassBlocked, retry.ErrorClassBlocked)
	}
	e, err := New(Config{Store: wakeStore{}, Sender: blockedSender{}, Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	c := store.Claim{
		Delivery: store.Delivery{ID: "dlv_1", EndpointID: "ep_1"},
		Event:    store.Event{ID: "evt_1", Type: "invoice.paid", Body: []byte(`{}`)},
		Endpoint: store.Endpoint{ID: "ep_1", URL: "https://internal.example/", Secrets: []store.Secret{{Value: "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", CreatedAt: t0}}},
	}
	comp, _ := e.attempt(t.Context(), c)
	if comp.State != store.DeliveryDead || comp.Attempt.Error != "blocked" || comp.Attempt.Number != 1 {
		t.Fatalf("completion of a blocked first attempt: state %s, error %q, attempt %d; want dead, blocked, 1", comp.State, comp.Attempt.Error, comp.Attempt.Number)
	}
}

// countingStore counts NextDueAt calls (nothing is ever due).
type countingStore struct {
	store.Store
	nextDue *int
}

func (s countingStore) NextDueAt(context.Context, []string) (time.Time, error) {
	*s.nextDue++
	return time.Time{}, nil
}

// A publish notified while the claimer was claiming (issue 18): the
// claimer claims again at once, without first reading the next due time
// (a round trip per claim on a busy queue); with no notification pending
// it reads it before it sleeps.
func TestPendingNotificationSkipsNextDueRead(t *testing.T) {
	reads := 0
	e, err := New(Config{Store: countingStore{nextDue: &reads}, Sender: nopSender{}, Clock: clock.NewFake(t0), PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e.Notify()
	e.waitForWork(t.Context(), time.Time{}) // returns: the notification is pending
	if reads != 0 {
		t.Fatalf("NextDueAt read %d times with a notification pending, want 0", reads)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the wait ends at once, after the read
	e.waitForWork(ctx, time.Time{})
	if reads != 1 {
		t.Fatalf("NextDueAt read %d times without a notification pending, want 1", reads)
	}
}
