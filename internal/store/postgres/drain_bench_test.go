package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// BenchmarkDrainQueue measures the store's share of a drain on
// PostgreSQL: b.N deliveries (b.N/4 events × 4 endpoints) claimed 128 at
// a time and completed as successes in batches of 128, with the previous
// batch still leased while the next is claimed (as the engine keeps its
// workers busy), with no HTTP. Besides the time it reports what each
// delivery cost the server, which the load of a shared machine does not
// change: row updates of deliveries and how many of them were HOT, and
// the WAL written meanwhile (by the whole server: other databases' writes
// count too, so read it on a server of its own). It needs HERALD_TEST_POSTGRES_URL and creates (and drops) a
// database of its own. Run it with a fixed count, e.g.
// go test -run '^$' -bench BenchmarkDrainQueue -benchtime 40000x ./internal/store/postgres
func BenchmarkDrainQueue(b *testing.B) {
	ctx := context.Background()
	dbURL := benchDatabase(b)
	s, err := postgres.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	closeStore := sync.OnceFunc(func() { s.Close() })
	defer closeStore()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)

	seedDrain(b, s, b.N)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	// serverCost reads the WAL position and the updates of deliveries.
	// The store's backends send their counters lazily (an idle one after
	// up to 10 s), so the final reading is taken after the store is closed
	// (a backend flushes them when it exits) and once they stop moving.
	serverCost := func() (wal, upd, hot float64) {
		read := func() {
			if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
				b.Fatal(err)
			}
			if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, n_tup_upd::float8, n_tup_hot_upd::float8
				FROM pg_stat_user_tables WHERE relname = 'deliveries'`).Scan(&wal, &upd, &hot); err != nil {
				b.Fatal(err)
			}
		}
		read()
		for range 10 {
			last := upd
			time.Sleep(300 * time.Millisecond)
			read()
			if upd == last {
				break
			}
		}
		return wal, upd, hot
	}
	wal0, upd0, hot0 := serverCost()

	b.ResetTimer()
	done := 0
	var inFlight []store.Completion
	complete := func() {
		if err := s.CompleteDeliveries(ctx, inFlight); err != nil {
			b.Fatal(err)
		}
		done += len(inFlight)
		inFlight = nil
	}
	var claimT, completeT time.Duration
	for done+len(inFlight) < b.N {
		t := time.Now().UTC()
		claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node_1", Limit: 128, Lease: time.Minute, Now: t})
		if err != nil {
			b.Fatal(err)
		}
		if len(claims) == 0 {
			b.Fatalf("queue empty after %d deliveries", done)
		}
		tc := time.Now()
		claimT += tc.Sub(t)
		if inFlight != nil {
			complete()
		}
		completeT += time.Since(tc)
		for _, c := range claims {
			inFlight = append(inFlight, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node_1", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded,
				Attempt: store.Attempt{Number: c.Delivery.Attempts + 1, StartedAt: t, Duration: time.Millisecond, StatusCode: 200}, Now: t})
		}
	}
	complete()
	b.StopTimer()
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "deliveries/s")
	closeStore()
	wal1, upd1, hot1 := serverCost()
	n := float64(done)
	b.ReportMetric((wal1-wal0)/n, "WAL-bytes/delivery")
	b.ReportMetric((upd1-upd0)/n, "updates/delivery")
	b.ReportMetric((hot1-hot0)/n, "hot-updates/delivery")
	b.ReportMetric(float64(claimT.Microseconds())/n, "claim-µs/delivery")
	b.ReportMetric(float64(completeT.Microseconds())/n, "complete-µs/delivery")
}

// benchDatabase creates a database of its own on the server of
// HERALD_TEST_POSTGRES_URL (skipping the benchmark when it is unset) and
// returns its URL; the database is dropped when the benchmark ends.
func benchDatabase(b *testing.B) string {
	b.Helper()
	base := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if base == "" {
		b.Skip("HERALD_TEST_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "herald_bench_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		b.Fatal(err)
	}
	b.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// seedDrain creates 4 enabled endpoints of tenant "t" in s and publishes
// deliveries/4 + 1 events to them (64 publishers: group commits), for a
// drain benchmark to claim and complete.
func seedDrain(b *testing.B, s *postgres.Store, deliveries int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	const endpoints = 4
	for i := range endpoints {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: fmt.Sprintf("ep_%d", i), Tenant: "t",
			URL: "https://example.com/", State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}},
			CreatedAt: now, UpdatedAt: now}}); err != nil {
			b.Fatal(err)
		}
	}
	events := deliveries/endpoints + 1
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
