package sqlite_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// BenchmarkDrainQueue measures the store's share of a drain: b.N
// deliveries (b.N/4 events × 4 endpoints) claimed 128 at a time and
// completed as successes in batches of 128, as the engine does, with no
// HTTP. Run it with a fixed count, e.g.
// go test -run '^$' -bench BenchmarkDrainQueue -benchtime 40000x -benchmem ./internal/store/sqlite
func BenchmarkDrainQueue(b *testing.B) { benchmarkDrain(b, false, 4, 128) }

// BenchmarkDrainQueueInFlight is BenchmarkDrainQueue with the previous
// batch still leased during each claim (completed after it), as in a
// drain, where the workers' attempts are in flight while the claimer
// takes the next batch:
// go test -run '^$' -bench BenchmarkDrainQueueInFlight -benchtime 40000x ./internal/store/sqlite
func BenchmarkDrainQueueInFlight(b *testing.B) { benchmarkDrain(b, true, 4, 128) }

// BenchmarkDrainQueueFanOut is the store's share of a fan-out to many
// endpoints at a tenant's cap: every event to 400 endpoints, claims and
// completion batches of 32 (the default --tenant-concurrency), so each
// completion touches rows of 32 different endpoints (herald bench fanout):
// go test -run '^$' -bench BenchmarkDrainQueueFanOut -benchtime 40000x ./internal/store/sqlite
func BenchmarkDrainQueueFanOut(b *testing.B) { benchmarkDrain(b, true, 400, 32) }

// setupOnly makes the drain benchmarks (and BenchmarkTrickle) stop after
// publishing, so that an instruction count of the drain alone is the
// difference of two runs, with and without it (docs/BENCHMARKS.md,
// "Counting instructions"): callgrind counts are the same from run to run
// whatever else the machine does, where times on a shared two-core machine
// vary by a third.
var setupOnly = flag.Bool("setup-only", false, "drain and trickle benchmarks: publish, then stop before the drain")

// benchStore opens a store in b's temporary directory, closed when b
// ends, with the enabled endpoints eps of tenant "t" (a URL, one secret and
// the times filled in), and returns the time they were created at.
func benchStore(b *testing.B, eps ...store.Endpoint) (*sqlite.Store, time.Time) {
	b.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, createBenchEndpoints(b, s, eps...)
}

// createBenchEndpoints creates the enabled endpoints eps of tenant "t" in
// s (a URL, one secret and the times filled in) and returns the time they
// were created at.
func createBenchEndpoints(b *testing.B, s *sqlite.Store, eps ...store.Endpoint) time.Time {
	b.Helper()
	now := time.Now().UTC()
	for _, ep := range eps {
		ep.Tenant, ep.URL, ep.State = "t", "https://example.com/", store.EndpointEnabled
		ep.Secrets = []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}}
		ep.CreatedAt, ep.UpdatedAt = now, now
		if _, err := s.CreateEndpoint(context.Background(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
			b.Fatal(err)
		}
	}
	return now
}

// publishBenchEvents publishes events events of tenant "t" (type a.b) at
// now from 64 publishers (group commits), for a drain benchmark.
func publishBenchEvents(b *testing.B, s *sqlite.Store, now time.Time, events int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < events; i += 64 {
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
}

func benchmarkDrain(b *testing.B, inFlight bool, endpoints, batch int) {
	ctx := context.Background()
	eps := make([]store.Endpoint, endpoints)
	for i := range eps {
		eps[i].ID = fmt.Sprintf("ep_%d", i)
	}
	s, now := benchStore(b, eps...)
	publishBenchEvents(b, s, now, b.N/endpoints+1)
	if *setupOnly {
		return
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	done := 0
	var prev []store.Completion // the batch in flight (inFlight)
	complete := func(cs []store.Completion) {
		if err := s.CompleteDeliveries(ctx, cs); err != nil {
			b.Fatal(err)
		}
		done += len(cs)
	}
	for done < b.N {
		t := time.Now().UTC()
		claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node_1", Limit: batch, Lease: time.Minute, Now: t})
		if err != nil {
			b.Fatal(err)
		}
		if len(claims) == 0 && len(prev) == 0 {
			b.Fatalf("queue empty after %d deliveries", done)
		}
		cs := make([]store.Completion, len(claims))
		for i, c := range claims {
			cs[i] = store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node_1", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded,
				Attempt: store.Attempt{Number: c.Delivery.Attempts + 1, StartedAt: t, Duration: time.Millisecond, StatusCode: 200}, Now: t}
		}
		if !inFlight {
			complete(cs)
			continue
		}
		if len(prev) > 0 {
			complete(prev)
		}
		prev = cs
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "deliveries/s")
	// CPU per delivery holds better than wall time on a shared machine.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(done), "cpu-µs/delivery")
}

// processCPU is the user and system CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTrickle is the store's share of a light load, as in
// herald bench latency: claims of 2 deliveries with 16 in flight (the
// oldest batch is completed after each claim), one endpoint:
// go test -run '^$' -bench BenchmarkTrickle -benchtime 20000x ./internal/store/sqlite
func BenchmarkTrickle(b *testing.B) {
	ctx := context.Background()
	s, now := benchStore(b, store.Endpoint{ID: "ep_0"})
	for i := range b.N + 32 {
		id := fmt.Sprintf("evt_%d", i)
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "t", Type: "a.b", OccurredAt: now, Body: []byte(`{}`), Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			b.Fatal(err)
		}
	}
	if *setupOnly {
		return
	}
	b.ResetTimer()
	cpu0 := processCPU()
	var inFlight [][]store.Completion
	done := 0
	for done < b.N {
		t := time.Now().UTC()
		claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node_1", Limit: 2, Lease: time.Minute, Now: t})
		if err != nil {
			b.Fatal(err)
		}
		cs := make([]store.Completion, len(claims))
		for i, c := range claims {
			cs[i] = store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node_1", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded,
				Attempt: store.Attempt{Number: 1, StartedAt: t, Duration: time.Millisecond, StatusCode: 200}, Now: t}
		}
		inFlight = append(inFlight, cs)
		if len(inFlight) > 8 || len(claims) == 0 {
			if err := s.CompleteDeliveries(ctx, inFlight[0]); err != nil {
				b.Fatal(err)
			}
			done += len(inFlight[0])
			inFlight = inFlight[1:]
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(done), "cpu-µs/delivery")
}

// BenchmarkNextDueAt: the engine's next-due read, run after every claim,
// over 1,000 pending deliveries of one tenant (without and with a tenant
// to skip):
// go test -run '^$' -bench BenchmarkNextDueAt -benchtime 20000x ./internal/store/sqlite
func BenchmarkNextDueAt(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: "ep_0", Tenant: "t",
		URL: "https://example.com/", State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}},
		CreatedAt: now, UpdatedAt: now}}); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		id := fmt.Sprintf("evt_%d", i)
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "t", Type: "a.b", OccurredAt: now, Body: []byte(`{}`), Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		skip []string
	}{{"all", nil}, {"skipping", []string{"other"}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.NextDueAt(ctx, c.skip); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
