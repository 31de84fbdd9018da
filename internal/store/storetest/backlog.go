package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// backlogSize is more than two chunks of the stores' moves
// (store.DefaultFanOutChunk), so a pause, a disable by a completion and a
// delete each need chunks after their first transaction.
const backlogSize = 2*store.DefaultFanOutChunk + 100

// backlog: an endpoint's backlog larger than a chunk of the stores'
// moves is held by a pause, held by a disable (a completion's 410 Gone)
// and deleted by a delete, whole, by the time the call returns (the
// stores move it in chunks so that other publishes go between them:
// DefaultFanOutChunk); a claim never hands out one of its deliveries for
// an attempt meanwhile or after; the other endpoint's deliveries are
// untouched.
func (s suite) backlog(t *testing.T) {
	// setup publishes backlogSize events of tenant "bk" to two endpoints
	// (concurrently: group commits) and answers them and the events.
	setup := func(t *testing.T, f *fixture) (doomed, keep store.Endpoint, events []store.Event) {
		doomed, keep = f.endpoint("bk"), f.endpoint("bk")
		events = make([]store.Event, backlogSize)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < backlogSize; i += 16 {
					ev := newEvent("bk", "file.created", fmt.Sprintf(`{"n":%d}`, i))
					if _, err := f.s.PublishEvent(f.ctx, publishParams(ev, at(time.Duration(i)*time.Millisecond))); err != nil {
						errs <- err
						return
					}
					events[i] = ev
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("PublishEvent: %v", err)
		}
		return doomed, keep, events
	}
	// count answers how many deliveries of endpoint ep are in state st.
	count := func(f *fixture, ep string, st store.DeliveryState) int {
		return len(f.listDeliveries(store.ListDeliveriesParams{EndpointID: ep, State: st}))
	}
	// claimAll claims everything due at now, as the engine would: a claim
	// whose endpoint is enabled is attempted (completed as a success),
	// another put back without an attempt. It answers how many were
	// attempted per endpoint.
	claimAll := func(f *fixture, now time.Time) map[string]int {
		attempted := map[string]int{}
		for {
			cs := f.claim("bk-worker", 500, time.Minute, now)
			if len(cs) == 0 {
				return attempted
			}
			var done []store.Completion
			for _, c := range cs {
				if c.Endpoint.ID == "" {
					f.t.Errorf("claim of delivery %s came without its endpoint", c.Delivery.ID)
				}
				if c.Endpoint.State != store.EndpointEnabled {
					// As the engine does (Engine.handle): put back without
					// an attempt, which holds it.
					done = append(done, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "bk-worker", LeaseUntil: c.Delivery.LeaseUntil,
						Deferred: true, NextAttemptAt: now, Now: now})
					continue
				}
				attempted[c.Delivery.EndpointID]++
				done = append(done, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "bk-worker", LeaseUntil: c.Delivery.LeaseUntil,
					State: store.DeliverySucceeded, Attempt: store.Attempt{Number: c.Delivery.Attempts + 1, StartedAt: now, StatusCode: 200}, Now: now})
			}
			if err := f.s.CompleteDeliveries(f.ctx, done); err != nil {
				f.t.Fatalf("CompleteDeliveries: %v", err)
			}
		}
	}
	later := at(time.Hour)

	s.run(t, "PauseHoldsAllOfABacklog", func(t *testing.T, f *fixture) {
		doomed, keep, _ := setup(t, f)
		if _, n := f.setState(store.SetEndpointStateParams{ID: doomed.ID, State: store.EndpointPaused, Now: at(time.Minute)}); n > backlogSize {
			t.Errorf("pause answered %d held, more than its %d deliveries", n, backlogSize)
		}
		if got := count(f, doomed.ID, store.DeliveryPaused); got != backlogSize {
			t.Errorf("held after the pause returned: %d, want %d", got, backlogSize)
		}
		if got := count(f, doomed.ID, store.DeliveryPending); got != 0 {
			t.Errorf("pending after the pause returned: %d, want 0", got)
		}
		attempted := claimAll(f, later)
		if attempted[doomed.ID] != 0 || attempted[keep.ID] != backlogSize {
			t.Errorf("claims for an attempt after the pause: paused endpoint %d, other %d; want 0 and %d", attempted[doomed.ID], attempted[keep.ID], backlogSize)
		}
	})
	s.run(t, "DisableByCompletionHoldsAllOfABacklog", func(t *testing.T, f *fixture) {
		doomed, keep, _ := setup(t, f)
		// A 410 on the doomed endpoint's first delivery disables it.
		var first store.Claim
		for _, c := range f.claim("bk-410", 10, time.Minute, at(time.Second)) {
			if c.Delivery.EndpointID == doomed.ID && first.Delivery.ID == "" {
				first = c
				continue
			}
			f.complete(store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "bk-410", LeaseUntil: c.Delivery.LeaseUntil,
				State: store.DeliveryPending, NextAttemptAt: at(time.Second), Deferred: true, Now: at(time.Second)})
		}
		if first.Delivery.ID == "" {
			t.Fatal("no claim of the endpoint to disable")
		}
		f.complete(store.Completion{DeliveryID: first.Delivery.ID, EndpointID: doomed.ID, Owner: "bk-410", LeaseUntil: first.Delivery.LeaseUntil,
			State: store.DeliveryDead, DisableEndpoint: true, DisableReason: "410 Gone",
			Attempt: store.Attempt{Number: 1, StartedAt: at(time.Second), StatusCode: 410}, Now: at(2 * time.Second)})
		if e := f.getEndpoint(doomed.ID); e.State != store.EndpointDisabled {
			t.Fatalf("endpoint after the 410: %s, want disabled", e.State)
		}
		// Whatever is not yet held, no claim hands it out for an attempt.
		attempted := claimAll(f, later)
		if attempted[doomed.ID] != 0 || attempted[keep.ID] != backlogSize {
			t.Errorf("claims for an attempt after the disable: disabled endpoint %d, other %d; want 0 and %d", attempted[doomed.ID], attempted[keep.ID], backlogSize)
		}
		if got := count(f, doomed.ID, store.DeliveryPending); got != 0 {
			t.Errorf("pending deliveries of the disabled endpoint after the claims: %d, want 0", got)
		}
		if got := count(f, doomed.ID, store.DeliveryPaused); got != backlogSize-1 {
			t.Errorf("held deliveries of the disabled endpoint: %d, want %d", got, backlogSize-1)
		}
	})
	s.run(t, "DeleteRemovesAllOfABacklog", func(t *testing.T, f *fixture) {
		doomed, keep, events := setup(t, f)
		last := f.listDeliveries(store.ListDeliveriesParams{EventID: events[backlogSize-1].ID})
		if len(last) != 2 {
			t.Fatalf("deliveries of the last event: %d, want 2", len(last))
		}
		if err := f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: doomed.ID, Now: at(time.Minute)}); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		for _, d := range last {
			_, err := f.s.GetDelivery(f.ctx, d.ID)
			if d.EndpointID == doomed.ID {
				wantErr(t, "GetDelivery of the deleted endpoint's last delivery", err, store.ErrNotFound)
			} else if err != nil {
				t.Errorf("GetDelivery of the other endpoint's: %v", err)
			}
		}
		got := f.listDeliveries(store.ListDeliveriesParams{Tenant: "bk"})
		for _, d := range got {
			if d.EndpointID != keep.ID {
				t.Fatalf("tenant's deliveries after the delete include %s of endpoint %s", d.ID, d.EndpointID)
			}
		}
		if len(got) != backlogSize {
			t.Errorf("tenant's deliveries after the delete: %d, want the other endpoint's %d", len(got), backlogSize)
		}
		attempted := claimAll(f, later)
		if attempted[doomed.ID] != 0 || attempted[keep.ID] != backlogSize {
			t.Errorf("claims after the delete: deleted endpoint %d, other %d; want 0 and %d", attempted[doomed.ID], attempted[keep.ID], backlogSize)
		}
	})
}
