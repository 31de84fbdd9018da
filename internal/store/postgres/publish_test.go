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

// TestPublishTxChunkedFanOut: on a caller's transaction a publish past the
// fan-out chunk writes the first chunk and the fan-out row, both gone with
// a rollback; after the commit ContinueFanOut creates the rest, one
// delivery per endpoint.
func TestPublishTxChunkedFanOut(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	ctx := t.Context()
	for range 5 {
		createEndpoint(t, s, newEndpoint("acme"))
	}
	count := func(query, id string) int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, query, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, commit := range []bool{false, true} {
		ev := newEvent("acme")
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := PublishTx(ctx, tx, store.PublishParams{Event: ev, Now: base, IDFromClient: true, FanOutChunk: 2})
		if err != nil || !res.FanOut || res.Deliveries != 5 {
			t.Fatalf("PublishTx = %+v, %v; want a fan-out of 5", res, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool][2]int{false: {0, 0}, true: {2, 1}}[commit]
		if d, f := count("SELECT count(*) FROM deliveries WHERE event_id = $1", ev.ID), count("SELECT count(*) FROM fanouts WHERE event_id = $1", ev.ID); d != want[0] || f != want[1] {
			t.Fatalf("commit %v: %d deliveries and %d fan-out rows, want %v", commit, d, f, want)
		}
		if !commit {
			continue
		}
		for {
			r, err := s.ContinueFanOut(ctx, store.FanOutParams{Chunk: 2, Now: base})
			if err != nil {
				t.Fatal(err)
			}
			if r.EventID == "" {
				break
			}
		}
		if d := count("SELECT count(DISTINCT endpoint_id) FROM deliveries WHERE event_id = $1", ev.ID); d != 5 || count("SELECT count(*) FROM deliveries WHERE event_id = $1", ev.ID) != 5 {
			t.Fatalf("%d endpoints with a delivery after the fan-out, want 5, one each", d)
		}
	}
}
