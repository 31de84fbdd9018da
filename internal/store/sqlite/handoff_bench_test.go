package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// benchHandOff reserves every worker asked for and passes the claims it
// is given on.
type benchHandOff struct{ claims chan []store.Claim }

func (h benchHandOff) Reserve(_ string, n int) int      { return n }
func (h benchHandOff) Lease() (string, time.Time)       { return "node_1", time.Now().Add(time.Minute) }
func (h benchHandOff) Take(claims []store.Claim, n int) { h.claims <- claims }

// BenchmarkHandOff is the store's share of a light load below saturation,
// as in herald bench latency: each publish (one event, one endpoint, one
// publisher) hands its delivery off to the engine as it commits, and the
// completion of each is written in batches of 8:
// go test -run '^$' -bench BenchmarkHandOff -benchtime 4000x ./internal/store/sqlite
func BenchmarkHandOff(b *testing.B) {
	ctx := context.Background()
	s, now := benchStore(b, store.Endpoint{ID: "ep_0", Headers: map[string]string{"X-Env": "bench"}})
	if _, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node_1", Limit: 1, Lease: time.Minute, Now: now}); err != nil {
		b.Fatal(err) // the claim lock: hand-offs from here on
	}
	h := benchHandOff{claims: make(chan []store.Claim, 16)}
	s.SetHandOff(h)
	if *setupOnly {
		return
	}
	body := []byte(`{"id":"evt","type":"a.b","data":{"n":1,"text":"a webhook body of a few dozen bytes"}}`)
	b.ResetTimer()
	cpu0 := processCPU()
	var batch []store.Completion
	for i := range b.N {
		id := fmt.Sprintf("evt_%d", i)
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "t", Type: "a.b", OccurredAt: now, Body: body, Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			b.Fatal(err)
		}
		for _, c := range <-h.claims {
			batch = append(batch, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node_1", LeaseUntil: c.Delivery.LeaseUntil,
				State: store.DeliverySucceeded, Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 200}, Now: now})
		}
		if len(batch) >= 8 || i == b.N-1 {
			if err := s.CompleteDeliveries(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/delivery")
}
