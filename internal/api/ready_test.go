package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestReadyzKeyCheckIsCached: /readyz's key check runs at most once per
// interval (a probe every second costs one check per 10 s), its result —
// ready or not — is kept in between, and it runs again once the interval
// has passed, so a node turns not ready within one interval of a rekey.
func TestReadyzKeyCheckIsCached(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	runs := 0
	var result error
	k := &keyCheck{every: 10 * time.Second, now: func() time.Time { return now },
		check: func(context.Context) error { runs++; return result }}
	ctx := context.Background()
	if err := k.result(ctx); err != nil || runs != 1 {
		t.Fatalf("first probe: %v after %d runs", err, runs)
	}
	wrong := fmt.Errorf("check: %w", store.ErrWrongKey)
	result = wrong
	now = now.Add(9 * time.Second)
	if err := k.result(ctx); err != nil || runs != 1 {
		t.Fatalf("probe within the interval: %v after %d runs; want the kept result", err, runs)
	}
	now = now.Add(time.Second)
	if err := k.result(ctx); !errors.Is(err, wrong) || runs != 2 {
		t.Fatalf("probe after the interval: %v after %d runs; want the new result", err, runs)
	}
	now = now.Add(time.Second)
	if err := k.result(ctx); !errors.Is(err, wrong) || runs != 2 {
		t.Fatalf("failing result not kept: %v after %d runs", err, runs)
	}
	// A store that fails while the key is checked is no verdict on the
	// key: not kept (found by review: a connection reset was shown as a
	// wrong key for 10 s).
	result = errors.New("connection reset by peer")
	now = now.Add(10 * time.Second)
	if err := k.result(ctx); err == nil || errors.Is(err, store.ErrWrongKey) || runs != 3 {
		t.Fatalf("store failure: %v after %d runs", err, runs)
	}
	result = nil
	if err := k.result(ctx); err != nil || runs != 4 {
		t.Fatalf("after a store failure: %v after %d runs; want a new check, passing", err, runs)
	}
	var none *keyCheck
	if err := none.result(ctx); err != nil {
		t.Fatalf("no key check configured: %v", err)
	}
}

// TestReadinessForScrapesIsShared: what herald_ready shows at a scrape
// (readiness.current) is the last result of /readyz or of a scrape while
// it is younger than readyMaxAge, so scrapes add no store round trip while
// a load balancer probes /readyz; 30 concurrent scrapes after that share
// one check; a /readyz probe whose client went away leaves the last result
// in place, one that ran out of time replaces it (the store is too slow).
func TestReadinessForScrapesIsShared(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var runs atomic.Int64
	var reason atomic.Value
	reason.Store("")
	r := &readiness{now: clock, log: slog.New(slog.DiscardHandler), check: func(ctx context.Context) (string, error) {
		runs.Add(1)
		if ctx.Err() != nil {
			return metrics.NotReadyStore, ctx.Err()
		}
		return reason.Load().(string), nil
	}}
	if got := r.current(); got != "" || runs.Load() != 1 {
		t.Fatalf("first scrape: %q after %d checks; want ready after 1", got, runs.Load())
	}
	// /readyz finds the store gone: the next scrape shows it without a check.
	reason.Store(metrics.NotReadyStore)
	advance(time.Second)
	if got, _ := r.probe(context.Background()); got != metrics.NotReadyStore {
		t.Fatalf("probe: %q", got)
	}
	reason.Store("")
	advance(readyMaxAge - time.Millisecond)
	if got := r.current(); got != metrics.NotReadyStore || runs.Load() != 2 {
		t.Fatalf("scrape within readyMaxAge of the probe: %q after %d checks; want the probe's result after 2", got, runs.Load())
	}
	advance(time.Millisecond)
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			if got := r.current(); got != "" {
				t.Errorf("concurrent scrape: %q; want ready", got)
			}
		})
	}
	wg.Wait()
	if n := runs.Load(); n != 3 {
		t.Errorf("30 concurrent scrapes ran %d checks in all; want 3 (one for them)", n)
	}
	// A probe whose client went away is not a result; one that ran out of
	// time is.
	advance(readyMaxAge)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	r.probe(gone)
	if got := r.current(); got != "" || runs.Load() != 5 {
		t.Errorf("scrape after a canceled probe: %q after %d checks; want a new check (ready) after 5", got, runs.Load())
	}
	late, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	r.probe(late)
	if got := r.current(); got != metrics.NotReadyStore || runs.Load() != 6 {
		t.Errorf("scrape after a probe that ran out of time: %q after %d checks; want its result (store) after 6", got, runs.Load())
	}
}
