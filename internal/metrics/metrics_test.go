package metrics_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestStoreGaugesReadAtMostOncePerMaxAge (issue 13 point 16): 30
// concurrent scrapes cost one store read; scrapes within StatsMaxAge reuse
// it; an older answer is read again; a failed read is not cached.
func TestStoreGaugesReadAtMostOncePerMaxAge(t *testing.T) {
	var reads atomic.Int64
	var fail atomic.Bool
	m := metrics.New(func(context.Context) (store.Stats, error) {
		reads.Add(1)
		if fail.Load() {
			return store.Stats{}, context.DeadlineExceeded
		}
		return store.Stats{DeliveriesByState: map[store.DeliveryState]int{store.DeliveryPending: 7}}, nil
	})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	m.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			if body := scrape(); !strings.Contains(body, `herald_queue_depth{state="pending"} 7`) {
				t.Errorf("scrape without the gauge:\n%s", body)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("30 concurrent scrapes read the store %d times; want 1", n)
	}
	advance(metrics.StatsMaxAge - time.Millisecond)
	scrape()
	if n := reads.Load(); n != 1 {
		t.Errorf("a scrape within StatsMaxAge read the store (%d reads); want the cached answer", n)
	}
	advance(time.Millisecond)
	fail.Store(true)
	if body := scrape(); !strings.Contains(body, "herald_store_scrape_error 1") {
		t.Errorf("failed read not reported:\n%s", body)
	}
	fail.Store(false)
	if body := scrape(); !strings.Contains(body, "herald_store_scrape_error 0") || reads.Load() != 3 {
		t.Errorf("after a failed read: %d reads; want the store read again (3)", reads.Load())
	}
}
