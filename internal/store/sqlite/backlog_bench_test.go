package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// BenchmarkBacklogMove measures what a pause, a disable by a completion
// (a 410 Gone) and a delete cost an endpoint with a large pending backlog
// (backlogSize deliveries, one event) and how long the publishes of
// another tenant, made one after another meanwhile, wait for the writer:
// op-ms is the call's duration, publish-max-ms and publish-p99-ms the
// slowest publishes made while it ran. Run it once per case:
//
//	go test -run '^$' -bench BacklogMove -benchtime 1x ./internal/store/sqlite/
func BenchmarkBacklogMove(b *testing.B) {
	const backlogSize = 200_000
	for _, op := range []string{"pause", "disable", "delete"} {
		b.Run(op, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s, now := benchBacklog(b, backlogSize)
				run := func(ctx context.Context) error {
					switch op {
					case "pause":
						_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_big", State: store.EndpointPaused, Now: now})
						return err
					case "disable":
						cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 1, Lease: time.Minute, Now: now, SkipTenants: []string{"other"}})
						if err != nil || len(cs) != 1 {
							b.Fatalf("claim: %d, %v", len(cs), err)
						}
						err = s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: cs[0].Delivery.ID, EndpointID: "ep_big", Owner: "n",
							LeaseUntil: cs[0].Delivery.LeaseUntil, State: store.DeliveryDead, DisableEndpoint: true, DisableReason: "410",
							Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 410}, Now: now}})
						s.waitBackground() // the hold's rest, beside the completer: timed too
						return err
					default:
						return s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_big", Now: now})
					}
				}
				opMs, waits := measureBesidePublishes(b, s, now, run)
				s.Close()
				b.ReportMetric(opMs, "op-ms")
				b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "publish-max-ms")
				b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "publish-p99-ms")
				b.ReportMetric(float64(len(waits)), "publishes")
			}
		})
	}
}

// benchBacklog opens a store with endpoint ep_big (tenant big) and n
// pending deliveries of it, and endpoint ep_other (tenant other).
func benchBacklog(b *testing.B, n int) (*Store, time.Time) {
	b.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "h.db"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for _, ep := range []store.Endpoint{{ID: "ep_big", Tenant: "big"}, {ID: "ep_other", Tenant: "other"}} {
		ep.URL, ep.State = "http://127.0.0.1:9/", store.EndpointEnabled
		ep.Secrets = []store.Secret{{Value: "whsec_x", CreatedAt: now}}
		ep.CreatedAt, ep.UpdatedAt = now, now
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.PublishEvent(ctx, store.PublishParams{
		Event: store.Event{ID: "evt_big", Tenant: "big", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: "evt_big"},
		Now:   now, NewDeliveryID: func() string { return "dlv_0" }}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?1)
		INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT printf('dlv_%08d', n), 'evt_big', 'ep_big', 'big', 't', 'pending', ?2, ?2, ?2 FROM i`, n-1, micro(now)); err != nil {
		b.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	return s, now
}

// measureBesidePublishes runs op while one goroutine publishes events of
// tenant other one after another, and returns op's duration in ms and the
// publishes' durations, sorted.
func measureBesidePublishes(b *testing.B, s *Store, now time.Time, op func(context.Context) error) (float64, []time.Duration) {
	ctx := context.Background()
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		waits []time.Duration
	)
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			select {
			case <-started:
			default:
				close(started)
			}
		}()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := store.NewID("evt")
			start := time.Now()
			if _, err := s.PublishEvent(ctx, store.PublishParams{
				Event: store.Event{ID: id, Tenant: "other", Type: "t", OccurredAt: now, Body: []byte("{}"), Fingerprint: id},
				Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
				b.Error(err)
				return
			}
			waits = append(waits, time.Since(start))
			if i == 0 {
				close(started)
			}
		}
	}()
	<-started // the publisher under way: its first publish committed
	b.StartTimer()
	start := time.Now()
	err := op(ctx)
	took := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if len(waits) == 0 {
		waits = append(waits, 0)
	}
	slices.Sort(waits)
	return float64(took.Microseconds()) / 1000, waits
}
