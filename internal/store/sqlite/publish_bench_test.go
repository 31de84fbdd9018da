package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// BenchmarkPublishConcurrent measures durable publishes through the group
// commit with 256 concurrent callers (one endpoint, so one delivery each).
func BenchmarkPublishConcurrent(b *testing.B) {
	ctx := context.Background()
	s, now := benchStore(b, store.Endpoint{ID: "ep_1"})
	var n atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/256 + 1
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				i := n.Add(1)
				id := fmt.Sprintf("evt_%d", i)
				body := []byte(`{"id":"` + id + `","type":"a.b","tenant":"t","occurred_at":"2026-01-01T00:00:00Z","data":{"n":1}}`)
				if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "t", Type: "a.b", OccurredAt: now, Body: body, Fingerprint: id},
					Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkGetEventTypeMissing measures the catalog check every publish of
// an uncatalogued type makes (GetEventType answering not found).
func BenchmarkGetEventTypeMissing(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetEventType(ctx, "order.placed"); !errors.Is(err, store.ErrNotFound) {
			b.Fatal(err)
		}
	}
}
