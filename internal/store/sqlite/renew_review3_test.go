package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestReview3RenewAtTheLeasesEnd: at every instant around a lease's end,
// RenewLease renews it exactly when RescueExpiredLeases would not free it
// (both compare the end with now in µs, "ended before now"), so a lease is
// never both renewed and, at the same now, rescued. Checked, not a defect.
func TestReview3RenewAtTheLeasesEnd(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name  string
		after time.Duration // the renewal's Now after the lease's end
		renew bool
	}{
		{"a µs before its end", -time.Microsecond, true},
		{"at its end", 0, true},
		{"500 ns after its end (same µs)", 500 * time.Nanosecond, true},
		{"a µs after its end", time.Microsecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			s, err := Open(ctx, filepath.Join(t.TempDir(), "herald.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ep := store.Endpoint{ID: "ep_a", Tenant: "acme", URL: "https://example.com/hooks", EventTypes: []string{}, Headers: map[string]string{},
				State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}
			if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
				t.Fatal(err)
			}
			id := store.NewID("evt")
			if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte(`{}`), Fingerprint: id},
				Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
				t.Fatal(err)
			}
			claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node", Limit: 1, Lease: time.Minute, Now: now})
			if err != nil || len(claims) != 1 {
				t.Fatalf("claim: %d, %v", len(claims), err)
			}
			d := claims[0].Delivery
			at := d.LeaseUntil.Add(c.after)
			// What a rescue at that instant would do (without doing it).
			rescued := len(s.leases.expired(micro(at))) > 0
			ok, err := s.RenewLease(ctx, store.RenewLeaseParams{DeliveryID: d.ID, Owner: "node", Until: d.LeaseUntil, NewUntil: at.Add(time.Minute), Now: at})
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.renew || ok == rescued {
				t.Fatalf("renewal at %v after the end: %v (a rescue then would free it: %v); want %v", c.after, ok, rescued, c.renew)
			}
		})
	}
}
