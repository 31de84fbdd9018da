package postgres

import (
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestCompleteSuccessesInBulk: a batch of successes only (written with one
// statement per table) keeps the per-completion semantics: attempts numbered
// after the existing ones, a completion whose lease was lost records its
// attempt only, one of an unknown delivery changes nothing, and the
// endpoint's failure streak ends — with or without Completion.EndpointID.
func TestCompleteSuccessesInBulk(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint("acme"))
	for range 3 {
		publish(t, s, newEvent("acme"), base)
	}
	claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Now: base})
	if err != nil || len(claims) != 3 {
		t.Fatalf("ClaimDeliveries = %d, %v", len(claims), err)
	}
	if claims[0].Event.ID == "" || claims[0].Endpoint.ID != ep.ID {
		t.Fatalf("claim without its event or endpoint: %+v", claims[0])
	}
	d1, d2, d3 := claims[0].Delivery.ID, claims[1].Delivery.ID, claims[2].Delivery.ID
	// d1 had a failed attempt before (a retry, claimed again).
	now := base.Add(time.Second)
	if err := s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: d1, EndpointID: ep.ID, Owner: "w", LeaseUntil: claims[0].Delivery.LeaseUntil, State: store.DeliveryPending,
		NextAttemptAt: now, Attempt: store.Attempt{StartedAt: now, StatusCode: 503}, Now: now}}); err != nil {
		t.Fatal(err)
	}
	retry, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Now: now})
	if err != nil || len(retry) != 1 {
		t.Fatalf("claim the retry = %d, %v", len(retry), err)
	}
	if got, err := s.GetEndpoint(ctx, ep.ID); err != nil || got.FailingSince.IsZero() {
		t.Fatalf("failure streak not started: %+v, %v", got.FailingSince, err)
	}

	later := now.Add(time.Second)
	ok := func(id, owner, endpointID string, lease time.Time) store.Completion {
		return store.Completion{DeliveryID: id, EndpointID: endpointID, Owner: owner, LeaseUntil: lease, State: store.DeliverySucceeded,
			Attempt: store.Attempt{StartedAt: later, Duration: 3 * time.Millisecond, StatusCode: 200, ResponseExcerpt: "ok"}, Now: later}
	}
	batch := []store.Completion{ok(d1, "w", "", retry[0].Delivery.LeaseUntil), ok(d2, "someone-else", ep.ID, claims[1].Delivery.LeaseUntil),
		ok("dlv_unknown", "w", ep.ID, claims[0].Delivery.LeaseUntil), ok(d3, "w", ep.ID, claims[2].Delivery.LeaseUntil)}
	if !allSuccesses(batch) {
		t.Fatal("the batch does not take the bulk path")
	}
	if err := s.CompleteDeliveries(ctx, batch); err != nil {
		t.Fatal(err)
	}

	check := func(id string, state store.DeliveryState, attempts int, owner string) {
		t.Helper()
		d, err := s.GetDelivery(ctx, id)
		if err != nil || d.State != state || d.Attempts != attempts || d.LeaseOwner != owner {
			t.Errorf("%s = state %s, attempts %d, lease %q (%v); want %s, %d, %q", id, d.State, d.Attempts, d.LeaseOwner, err, state, attempts, owner)
		}
		as, err := s.ListAttempts(ctx, id)
		if err != nil || len(as) == 0 || as[len(as)-1].Number != len(as) || as[len(as)-1].StatusCode != 200 {
			t.Errorf("%s attempts = %+v, %v; want the last one numbered %d with status 200", id, as, err, len(as))
		}
	}
	check(d1, store.DeliverySucceeded, 2, "")
	check(d2, store.DeliveryPending, 0, "w") // lease lost: the attempt is recorded, the delivery stays the owner's
	check(d3, store.DeliverySucceeded, 1, "")
	if got, err := s.GetEndpoint(ctx, ep.ID); err != nil || !got.FailingSince.IsZero() {
		t.Errorf("failure streak not ended: %v, %v", got.FailingSince, err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT COUNT(*) FROM attempts WHERE delivery_id = 'dlv_unknown'").Scan(&n); err != nil || n != 0 {
		t.Errorf("attempts of an unknown delivery: %d, %v", n, err)
	}
	if allSuccesses([]store.Completion{ok(d1, "w", "", later), ok(d1, "w", "", later)}) {
		t.Error("a batch completing one delivery twice takes the bulk path")
	}
}
