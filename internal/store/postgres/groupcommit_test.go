package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestGroupCommitAnswersEachCaller: one group holding new events of two
// tenants, a duplicate of an event of the same group, a reuse of its id
// with other content, and an idempotency key used twice: every caller gets
// the answer it would get publishing alone. With a publish the database
// refuses in the group, the others are run one by one and still get theirs.
func TestGroupCommitAnswersEachCaller(t *testing.T) {
	t.Parallel()
	for _, withBad := range []bool{false, true} {
		s := openStore(t, newSchema(t))
		createEndpoint(t, s, newEndpoint("acme"))
		createEndpoint(t, s, newEndpoint("acme"))
		createEndpoint(t, s, newEndpoint("globex"))

		a := newEvent("acme")
		aAgain := a
		aOther := a
		aOther.Fingerprint = "other content"
		g := newEvent("globex")
		k1 := newEvent("acme")
		k1.IdempotencyKey, k1.Fingerprint = "key-1", "same"
		k2 := newEvent("acme")
		k2.IdempotencyKey, k2.Fingerprint = "key-1", "same"
		bad := newEvent("acme")
		bad.Type = "bad\x00type" // PostgreSQL refuses NUL in text

		evs := []store.Event{a, aAgain, aOther, g, k1, k2}
		if withBad {
			evs = append(evs[:2:2], append([]store.Event{bad}, evs[2:]...)...)
		}
		var group []*publishRequest
		for _, ev := range evs {
			group = append(group, &publishRequest{ctx: t.Context(), done: make(chan publishAnswer, 1),
				p: store.PublishParams{Event: ev, Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}})
		}
		s.committer.commit(group)
		answers := map[string][]publishAnswer{}
		for i, r := range group {
			a := <-r.done
			name := []string{"a", "aAgain", "aOther", "g", "k1", "k2"}[min(i, 5)]
			if withBad {
				name = []string{"a", "aAgain", "bad", "aOther", "g", "k1", "k2"}[i]
			}
			answers[name] = append(answers[name], a)
		}
		check := func(name string, created bool, id string, deliveries int) {
			t.Helper()
			got := answers[name][0]
			if got.err != nil || got.res.Created != created || got.res.Event.ID != id || got.res.Deliveries != deliveries {
				t.Errorf("withBad=%v %s: %+v, %v; want created %v, event %s, %d deliveries", withBad, name, got.res, got.err, created, id, deliveries)
			}
		}
		check("a", true, a.ID, 2)
		check("aAgain", false, a.ID, 2)
		check("g", true, g.ID, 1)
		check("k1", true, k1.ID, 2)
		check("k2", false, k1.ID, 2)
		if err := answers["aOther"][0].err; !errors.Is(err, store.ErrConflict) {
			t.Errorf("withBad=%v aOther: %v, want ErrConflict", withBad, err)
		}
		if withBad {
			if err := answers["bad"][0].err; err == nil || errors.Is(err, store.ErrConflict) {
				t.Errorf("bad: %v, want the database's error", err)
			}
		}
		pg, err := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{})
		if err != nil || len(pg.Data) != 5 {
			t.Errorf("withBad=%v: %d deliveries (%v), want 5", withBad, len(pg.Data), err)
		}
	}
}

// TestGroupCommitConcurrent: many concurrent publishes, some of one
// idempotency key, form groups; each event is stored once with its
// deliveries, and a caller whose context ended before its group started is
// told so and stores nothing.
func TestGroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	createEndpoint(t, s, newEndpoint("acme"))
	const n = 400
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		keyed   = map[string]bool{}
	)
	for i := range n {
		wg.Go(func() {
			ev := newEvent("acme")
			if i%10 == 0 {
				ev.IdempotencyKey, ev.Fingerprint = "shared", "same"
			}
			res, err := s.PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }})
			if err != nil {
				t.Errorf("PublishEvent: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Created {
				created++
			}
			if ev.IdempotencyKey != "" {
				keyed[res.Event.ID] = true
			}
			if res.Deliveries != 1 {
				t.Errorf("PublishEvent = %d deliveries, want 1", res.Deliveries)
			}
		})
	}
	wg.Wait()
	if want := n - n/10 + 1; created != want || len(keyed) != 1 {
		t.Errorf("created %d, want %d; %d events for one key, want 1", created, want, len(keyed))
	}
	var deliveries int
	if err := s.Pool().QueryRow(t.Context(), "SELECT COUNT(*) FROM deliveries").Scan(&deliveries); err != nil || deliveries != created {
		t.Errorf("deliveries = %d (%v), want %d", deliveries, err, created)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ev := newEvent("acme")
	if _, err := s.PublishEvent(ctx, store.PublishParams{Event: ev, Now: base}); !errors.Is(err, context.Canceled) {
		t.Errorf("PublishEvent(canceled) = %v, want context.Canceled", err)
	}
	if _, err := s.GetEvent(t.Context(), ev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the event of a canceled publish: %v, want ErrNotFound", err)
	}
}
