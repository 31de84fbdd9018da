package ops_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/store"
)

// succeeded creates endpoints×events succeeded deliveries (with one
// attempt each), last changed at t0: a backlog for retention.
func succeeded(t *testing.T, s store.Store, endpoints, events int) {
	t.Helper()
	ctx := t.Context()
	for i := range endpoints {
		newEndpoint(t, s, fmt.Sprintf("ep_%03d", i), "acme", "order.placed")
	}
	for i := range events {
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		if _, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: store.NewID("evt"), Tenant: "acme", Type: "order.placed", OccurredAt: t0, Body: body, Fingerprint: store.Fingerprint("acme", "order.placed", body)},
			Now:   t0, NewDeliveryID: func() string { return store.NewID("dlv") },
		}); err != nil {
			t.Fatal(err)
		}
	}
	for done := 0; done < endpoints*events; {
		claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1000, Lease: time.Minute, Now: t0})
		if err != nil || len(claims) == 0 {
			t.Fatalf("claimed %d, %v after %d", len(claims), err, done)
		}
		cs := make([]store.Completion, 0, len(claims))
		for _, c := range claims {
			cs = append(cs, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded, Now: t0,
				Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: t0, StatusCode: 200}})
		}
		if err := s.CompleteDeliveries(ctx, cs); err != nil {
			t.Fatal(err)
		}
		done += len(claims)
	}
}

func succeededLeft(t *testing.T, s store.Store) int {
	t.Helper()
	st, err := s.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.DeliveriesByState[store.DeliverySucceeded]
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// A backlog of eligible history larger than a fixed number of batches is
// purged in one round: the round goes on while batches come back full
// (retention once deleted at most 20 batches a minute, 10,000 rows with
// the default batch of 500, ~167 a second, far below what Herald
// delivers, so the tables grew without bound). The clock does not move
// during the round, so the time budget never cuts it short. Scaled down:
// 3,000 rows in batches of 100 (30 batches, the old cap 2,000).
func TestRetentionRoundPurgesWholeBacklog(t *testing.T) {
	s := newStore(t)
	succeeded(t, s, 50, 60)
	if got := succeededLeft(t, s); got != 3000 {
		t.Fatalf("backlog: %d succeeded deliveries, want 3000", got)
	}
	m := metrics.New(nil)
	h := ops.New(ops.Config{Store: s, Clock: clock.NewFake(t0.Add(2 * time.Hour)), SpikeThreshold: -1, PurgeBatch: 100,
		SucceededRetention: time.Hour, Metrics: m})
	if err := h.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := succeededLeft(t, s); got != 0 {
		t.Errorf("after one round: %d succeeded deliveries left, want 0", got)
	}
	out := scrape(t, m)
	if !strings.Contains(out, "herald_retention_purged_rows_total 3000\n") {
		t.Errorf("metrics lack herald_retention_purged_rows_total 3000:\n%s", grepLines(out, "herald_retention"))
	}
	if !strings.Contains(out, "herald_retention_behind 0\n") {
		t.Errorf("metrics lack herald_retention_behind 0:\n%s", grepLines(out, "herald_retention"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// slowPurge makes each Purge take took on the fake clock.
type slowPurge struct {
	store.Store
	clk   *clock.Fake
	took  time.Duration
	calls int
}

func (s *slowPurge) Purge(ctx context.Context, p store.PurgeParams) (int, error) {
	s.calls++
	s.clk.Advance(s.took)
	return s.Store.Purge(ctx, p)
}

// A round stops at its time budget (Config.PurgeBudget) even with old rows
// left, so that the other housekeeping (notices) is not held up, and shows
// it (herald_retention_behind); the next round, an Interval later, goes on
// purging instead of waiting a minute, until the backlog is gone.
func TestRetentionRoundYieldsAtBudgetAndResumesSoon(t *testing.T) {
	base := newStore(t)
	succeeded(t, base, 50, 60)
	clk := clock.NewFake(t0.Add(2 * time.Hour))
	s := &slowPurge{Store: base, clk: clk, took: 100 * time.Millisecond}
	m := metrics.New(nil)
	h := ops.New(ops.Config{Store: s, Clock: clk, SpikeThreshold: -1, PurgeBatch: 100, PurgeBudget: 1050 * time.Millisecond,
		SucceededRetention: time.Hour, Interval: 5 * time.Second, Metrics: m})
	if err := h.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	// 1.05 s of budget at 100 ms a batch: 11 batches, 1,100 rows.
	if s.calls != 11 {
		t.Errorf("first round: %d batches, want 11 (a budget of 1.05 s at 100 ms each)", s.calls)
	}
	if got := succeededLeft(t, base); got != 1900 {
		t.Errorf("after the first round: %d left, want 1900", got)
	}
	if out := scrape(t, m); !strings.Contains(out, "herald_retention_behind 1\n") {
		t.Errorf("a round cut short by its budget: want herald_retention_behind 1:\n%s", grepLines(out, "herald_retention"))
	}
	rounds := 1
	for succeededLeft(t, base) > 0 {
		if rounds > 10 {
			t.Fatalf("%d left after %d rounds", succeededLeft(t, base), rounds)
		}
		clk.Advance(5 * time.Second) // the next round, well within a minute
		if err := h.Round(t.Context()); err != nil {
			t.Fatal(err)
		}
		rounds++
	}
	if rounds != 3 {
		t.Errorf("backlog gone after %d rounds, want 3 (1,100 rows a round)", rounds)
	}
	out := scrape(t, m)
	if !strings.Contains(out, "herald_retention_purged_rows_total 3000\n") || !strings.Contains(out, "herald_retention_behind 0\n") {
		t.Errorf("after the backlog: want 3000 purged and not behind:\n%s", grepLines(out, "herald_retention"))
	}
	// Caught up: the next purge waits for the minute again.
	calls := s.calls
	clk.Advance(5 * time.Second)
	if err := h.Round(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s.calls != calls {
		t.Errorf("a round 5 s after retention caught up purged again (%d batches); want it to wait for the minute", s.calls-calls)
	}
}
