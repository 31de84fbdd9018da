package postgres

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestPublishTx: PublishTx on a caller's transaction writes what
// PublishEvent writes, visible to nobody (not even a claimer) until the
// commit, and nothing after a rollback.
func TestPublishTx(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	ctx := t.Context()
	enabled := createEndpoint(t, s, newEndpoint("acme"))
	paused := newEndpoint("acme")
	paused.State = store.EndpointPaused
	createEndpoint(t, s, paused)
	filtered := newEndpoint("acme")
	filtered.EventTypes = []string{"invoice.*"}
	createEndpoint(t, s, filtered)

	publishIn := func(tx pgx.Tx, ev store.Event) (store.PublishResult, error) {
		return PublishTx(ctx, tx, store.PublishParams{Event: ev, Now: base, IDFromClient: true})
	}
	claimable := func() int {
		t.Helper()
		cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "peek", Limit: 100, Lease: time.Minute, Now: base.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) > 0 { // give them back
			if _, err := s.RescueExpiredLeases(ctx, base.Add(2*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		return len(cs)
	}

	// Rolled back: nothing.
	ev := newEvent("acme")
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := publishIn(tx, ev)
	if err != nil || !res.Created || res.Deliveries != 2 {
		t.Fatalf("PublishTx = %+v, %v; want created with 2 deliveries (one held)", res, err)
	}
	var inside int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE event_id = $1", ev.ID).Scan(&inside); err != nil || inside != 2 {
		t.Fatalf("deliveries inside the transaction: %d, %v", inside, err)
	}
	if _, err := s.GetEvent(ctx, ev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an uncommitted event is visible: %v", err)
	}
	if n := claimable(); n != 0 {
		t.Fatalf("%d deliveries of an uncommitted event were claimed", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEvent(ctx, ev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a rolled-back event exists: %v", err)
	}
	if pg, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{EventID: ev.ID}); err != nil || len(pg.Data) != 0 {
		t.Fatalf("deliveries of a rolled-back event: %d, %v", len(pg.Data), err)
	}

	// Committed: the event as GetEvent reads it, its deliveries claimable.
	tx, err = s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err = publishIn(tx, ev)
	if err != nil || !res.Created || res.Deliveries != 2 {
		t.Fatalf("PublishTx = %+v, %v", res, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetEvent(ctx, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, res.Event) {
		t.Errorf("PublishTx answered %+v, GetEvent reads %+v", res.Event, got)
	}
	if n := claimable(); n != 1 {
		t.Errorf("%d claimable deliveries, want 1 (the paused endpoint's is held)", n)
	}
	pg, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{EventID: ev.ID})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]store.DeliveryState{}
	for _, d := range pg.Data {
		states[d.EndpointID] = d.State
	}
	if !reflect.DeepEqual(states, map[string]store.DeliveryState{enabled.ID: store.DeliveryPending, paused.ID: store.DeliveryPaused}) {
		t.Errorf("deliveries %v", states)
	}

	// PublishEvent (the API) recognises it, and PublishTx the API's.
	if again := publish(t, s, ev, base); again.Created || again.Deliveries != 2 || again.Event.ID != ev.ID {
		t.Errorf("PublishEvent of the same event: %+v", again)
	}
	apiEv := newEvent("acme")
	publish(t, s, apiEv, base)
	tx2, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	if dup, err := publishIn(tx2, apiEv); err != nil || dup.Created || dup.Deliveries != 2 {
		t.Errorf("PublishTx of the API's event: %+v, %v", dup, err)
	}
	// A conflict leaves the transaction usable.
	other := ev
	other.Fingerprint = "other content"
	if _, err := publishIn(tx2, other); !errors.Is(err, store.ErrConflict) {
		t.Errorf("PublishTx with another fingerprint: %v, want ErrConflict", err)
	}
	var one int
	if err := tx2.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the transaction is unusable after a conflict: %v", err)
	}
	// Defaults: Now and NewDeliveryID.
	fresh := newEvent("acme")
	if res, err := PublishTx(ctx, tx2, store.PublishParams{Event: fresh}); err != nil || !res.Created || res.Event.CreatedAt.IsZero() {
		t.Errorf("PublishTx with default Now and ids: %+v, %v", res, err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEvent(ctx, fresh.ID); err != nil {
		t.Errorf("GetEvent: %v", err)
	}

	// Only READ COMMITTED: refused before anything is written.
	rr, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Rollback(ctx)
	if _, err := publishIn(rr, newEvent("acme")); !errors.Is(err, ErrIsolation) {
		t.Errorf("PublishTx at REPEATABLE READ: %v, want ErrIsolation", err)
	}
	if err := rr.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the transaction is unusable after ErrIsolation: %v", err)
	}
}
