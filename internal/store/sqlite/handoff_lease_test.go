package sqlite_test

import (
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestHandOffLeaseUntilAsStored: a handed-off claim carries the
// lease end the engine's clock gave (nanoseconds), while the store records
// it in microseconds (lease.until) and reports that, as a claim's own
// Delivery.LeaseUntil does (fromMicro(until)). HandOffer promises a
// delivery "leased exactly as a claim leases it"; the existing test passes
// only because its lease end is a whole microsecond in UTC.
func TestHandOffLeaseUntilAsStored(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _, _ := handOffStore(t)
	until := base.Add(time.Minute + 1500*time.Nanosecond) // as clock.System's Now()+Lease: nanoseconds
	h := &fakeHandOff{limit: -1, until: until}
	s.SetHandOff(h)
	if _, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: base}); err != nil {
		t.Fatal(err)
	}
	if res := publishAcme(t, s); res.HandedOff != 2 {
		t.Fatalf("handed off %d, want 2", res.HandedOff)
	}
	_, taken, _ := h.state(t)
	c := taken[0][0]
	d, err := s.GetDelivery(ctx, c.Delivery.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Delivery.LeaseUntil.Equal(d.LeaseUntil) {
		t.Fatalf("handed-off claim's LeaseUntil %v, the store's lease %v: not the lease recorded", c.Delivery.LeaseUntil, d.LeaseUntil)
	}
}
