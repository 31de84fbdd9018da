package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// BenchmarkPublishSerial measures one publish at a time on PostgreSQL (a
// group commit of one: the latency of a publish on a quiet node, which is
// its round trips and its commit's WAL flush), each event fanned out to 4
// endpoints. It needs HERALD_TEST_POSTGRES_URL and creates (and drops) a
// database of its own:
// go test -run '^$' -bench BenchmarkPublishSerial -benchtime 2000x ./internal/store/postgres
func BenchmarkPublishSerial(b *testing.B) {
	ctx := context.Background()
	dbURL := benchDatabase(b)
	s, err := postgres.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	for i := range 4 {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: fmt.Sprintf("ep_%d", i), Tenant: "t",
			URL: "https://example.com/", State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}},
			CreatedAt: now, UpdatedAt: now}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("evt_%d", i)
		body := []byte(`{"id":"` + id + `","type":"a.b","tenant":"t","occurred_at":"2026-01-01T00:00:00Z","data":{"n":1}}`)
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "t", Type: "a.b", OccurredAt: now, Body: body, Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			b.Fatal(err)
		}
	}
}
