package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Restart runs the subtests about a restart: the process that claimed
// deliveries is gone and a new store is opened on the same database.
// newStore returns a fresh, empty, migrated store and reopen, which opens
// another store on the same database (registering its Close with
// t.Cleanup); the subtest closes the first store itself.
//
// What the drivers share, and what the subtests check: nothing claimed and
// not completed is lost. A lease kept in the row (PostgreSQL) keeps the
// delivery until the lease ends and a rescue clears it; a lease kept in
// the process's memory (SQLite) is gone with the process, so the delivery
// is due at once. Either way, once the lease has ended and a rescue has
// run, every such delivery is claimable again, and a completion by the
// owner that is gone records its attempt without moving the delivery.
func Restart(t *testing.T, newStore func(t *testing.T) (s store.Store, reopen func(t *testing.T) store.Store)) {
	t.Helper()
	t.Run("ClaimedNotCompletedIsDueAgain", func(t *testing.T) {
		t.Parallel()
		s1, reopen := newStore(t)
		f := &fixture{t: t, ctx: t.Context(), s: s1}
		ids := f.seed(1, 3, base)
		claimed := f.claim("gone", 2, time.Minute, base)
		if len(claimed) != 2 {
			t.Fatalf("claimed %d, want 2", len(claimed))
		}
		done := f.claimOne("gone", time.Minute, base)
		f.complete(completion(done, store.DeliverySucceeded, at(time.Second)))
		if err := s1.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		f = &fixture{t: t, ctx: t.Context(), s: reopen(t)}
		for id := range ids {
			if d := f.getDelivery(id); id != done.Delivery.ID && d.State != store.DeliveryPending {
				t.Errorf("after the restart, claimed delivery %s is %s, want pending", id, d.State)
			}
		}
		// Once the lease has ended and a rescue ran, both are claimable
		// (the SQLite driver has no lease left to rescue: 0; PostgreSQL 2).
		if n := f.rescue(at(2 * time.Minute)); n != 0 && n != 2 {
			t.Errorf("rescue after the restart: %d, want 0 (leases were in memory) or 2 (leases in the rows)", n)
		}
		again := f.claim("new", 10, time.Minute, at(2*time.Minute))
		diff(t, "claimable after the restart", sortedIDs(claimed), sortedIDs(again))
		f.expectNextDueAt(time.Time{})
		// The owner that is gone completes late: its attempt is recorded,
		// the delivery stays the new owner's.
		late := completion(claimed[0], store.DeliverySucceeded, at(2*time.Minute))
		f.complete(late)
		if d := f.getDelivery(claimed[0].Delivery.ID); d.State != store.DeliveryPending || d.LeaseOwner != "new" || d.Attempts != 0 {
			t.Errorf("after the late completion: state %s, lease %q, attempts %d; want pending, new, 0", d.State, d.LeaseOwner, d.Attempts)
		}
		if as := f.attempts(claimed[0].Delivery.ID); len(as) != 1 {
			t.Errorf("attempts of the late completion: %d, want 1", len(as))
		}
		for _, c := range again {
			f.complete(completion(c, store.DeliverySucceeded, at(3*time.Minute)))
		}
		for id := range ids {
			if d := f.getDelivery(id); d.State != store.DeliverySucceeded {
				t.Errorf("delivery %s: %s, want succeeded", id, d.State)
			}
		}
		f.expectNoClaim(at(time.Hour))
	})
	// An endpoint paused while its deliveries were in flight, and a
	// process that died before completing them: after the restart they are
	// held with the rest (never attempted while the endpoint is paused),
	// and its resume releases them.
	t.Run("PausedWhileInFlightStaysHeld", func(t *testing.T) {
		t.Parallel()
		s1, reopen := newStore(t)
		f := &fixture{t: t, ctx: t.Context(), s: s1}
		ids := f.seed(1, 2, base)
		claimed := f.claim("gone", 2, time.Minute, base)
		if len(claimed) != 2 {
			t.Fatalf("claimed %d, want 2", len(claimed))
		}
		ep := claimed[0].Endpoint.ID
		if _, held := f.setState(store.SetEndpointStateParams{ID: ep, State: store.EndpointPaused, Now: at(time.Second)}); held != 0 {
			t.Fatalf("pause held %d in-flight deliveries, want 0 (in flight)", held)
		}
		if err := s1.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		f = &fixture{t: t, ctx: t.Context(), s: reopen(t)}
		f.rescue(at(2 * time.Minute))
		f.expectNoClaim(at(2 * time.Minute))
		for id := range ids {
			if d := f.getDelivery(id); d.State != store.DeliveryPaused {
				t.Errorf("after the restart, delivery %s of the paused endpoint is %s, want paused (held)", id, d.State)
			}
		}
		f.setState(store.SetEndpointStateParams{ID: ep, State: store.EndpointEnabled, Now: at(3 * time.Minute)})
		diff(t, "claimable after the resume", sortedIDs(claimed), sortedIDs(f.claim("new", 10, time.Minute, at(3*time.Minute))))
	})
}

func sortedIDs(cs []store.Claim) []string {
	ids := claimIDs(cs)
	slices.Sort(ids)
	return ids
}
