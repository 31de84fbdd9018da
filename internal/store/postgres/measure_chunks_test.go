package postgres

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestMeasureDisableAndDeleteStall measures, with
// HERALD_MEASURE_BACKLOG pending deliveries of one endpoint (skipped when
// unset), the time of a completion that disables the endpoint (a 410) and
// of a DeleteEndpoint, and the slowest publish of the same tenant by one
// client publishing one event at a time meanwhile. It asserts nothing:
// docs/BENCHMARKS.md records its figures. With HERALD_MEASURE_QUIET set,
// nothing is published (the operations' own time).
func TestMeasureDisableAndDeleteStall(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HERALD_MEASURE_BACKLOG"))
	if n <= 0 {
		t.Skip("HERALD_MEASURE_BACKLOG (a count of deliveries) is not set")
	}
	const tenant = "measure-chunks"
	for _, op := range []string{"410 disable", "delete"} {
		dbURL := newSchema(t)
		s := openStore(t, dbURL)
		ep := createEndpoint(t, s, newEndpoint(tenant))
		seedDeliveries(t, rawConn(t, dbURL), ep.ID, n, seedShape{tenant: tenant, state: "'pending'", due: "$1", leased: "i = 1", updated: "$1"})
		var (
			stop      atomic.Bool
			wg        sync.WaitGroup
			slowest   time.Duration
			published int
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for os.Getenv("HERALD_MEASURE_QUIET") == "" && !stop.Load() {
				start := time.Now()
				if _, err := s.PublishEvent(t.Context(), store.PublishParams{Event: newEvent(tenant), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				slowest = max(slowest, time.Since(start))
				published++
			}
		}()
		time.Sleep(200 * time.Millisecond) // the publisher's first rounds (a measurement, not a test's wait)
		start := time.Now()
		switch op {
		case "410 disable":
			err := s.CompleteDeliveries(t.Context(), []store.Completion{{
				DeliveryID: "dlv_00000001", EndpointID: ep.ID, Owner: "w", LeaseUntil: base.Add(time.Minute),
				State: store.DeliveryDead, Attempt: store.Attempt{StartedAt: base, StatusCode: 410},
				DisableEndpoint: true, DisableReason: "gone", Now: base.Add(time.Second)}})
			if err != nil {
				t.Fatal(err)
			}
		case "delete":
			if err := s.DeleteEndpoint(t.Context(), store.DeleteEndpointParams{ID: ep.ID, Now: base}); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(start)
		var rest time.Duration
		if op == "410 disable" {
			// The rest of the hold: the lease rescue's rounds.
			start := time.Now()
			for round := 0; ; round++ {
				if _, err := s.RescueExpiredLeases(t.Context(), base.Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
				if got := countStates(t, s, ep.ID); got[store.DeliveryPending] == 0 || round > n/moveChunk {
					break
				}
			}
			rest = time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("%s of an endpoint with %d pending deliveries: %v (then the rescue's rounds: %v); the slowest of %d publishes of its tenant meanwhile: %v; load %s",
			op, n, took, rest, published, slowest, load)
	}
}
