package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// stateCounts counts endpoint id's deliveries by state, and reads its
// deliveries_moving mark.
func stateCounts(t *testing.T, s *Store, id string) (pending, paused int, moving bool) {
	t.Helper()
	ctx := t.Context()
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FILTER (WHERE state = 'pending'), COUNT(*) FILTER (WHERE state = 'paused')
		FROM deliveries WHERE endpoint_id = $1`, id).Scan(&pending, &paused); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, "SELECT deliveries_moving FROM endpoints WHERE id = $1", id).Scan(&moving); err != nil {
		t.Fatal(err)
	}
	return pending, paused, moving
}

// TestEndpointStateMovesInChunks: a resume releases an endpoint's held
// deliveries, and a pause holds its pending ones, in chunks, the first
// with the state change and the rest one per transaction; between chunks
// the tenant's lock is free, so a publish of the tenant goes through
// (before, one transaction held the tenant's lock exclusively for the
// whole move: about 20 s per million deliveries, every publish and
// completion of the tenant waiting). The call answers every delivery it
// moved and leaves the endpoint unmarked.
func TestEndpointStateMovesInChunks(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	s.moveChunkForTest = 3
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint("acme"))
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		publish(t, s, newEvent("acme"), base)
	}
	chunks := 0
	s.beforeMoveChunk = func() error {
		chunks++
		if chunks == 1 {
			// A publish of the tenant between chunks: it would wait out
			// a lock held for the whole move.
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := s.PublishEvent(pctx, store.PublishParams{Event: newEvent("acme"), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
				t.Errorf("publish between the chunks of a resume: %v", err)
			}
		}
		return nil
	}
	_, moved, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(time.Second)})
	if err != nil || moved != 10 {
		t.Fatalf("resume = %d moved, %v; want 10", moved, err)
	}
	// 10 held: 3 with the state change, then 3, 3 and 1 (the last chunk
	// short, which ends the move).
	if chunks != 3 {
		t.Errorf("resume: %d chunks after the first, want 3", chunks)
	}
	if pending, paused, moving := stateCounts(t, s, ep.ID); pending != 11 || paused != 0 || moving {
		t.Errorf("after the resume: %d pending, %d held, marked %v; want 11, 0, false", pending, paused, moving)
	}

	chunks = 0
	_, moved, err = s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(2 * time.Second)})
	if err != nil || moved != 11 {
		t.Fatalf("pause = %d moved, %v; want 11", moved, err)
	}
	if chunks != 3 {
		t.Errorf("pause: %d chunks after the first, want 3", chunks)
	}
	if pending, paused, moving := stateCounts(t, s, ep.ID); pending != 0 || paused != 12 || moving {
		t.Errorf("after the pause: %d pending, %d held, marked %v; want 0, 12 (the publish between chunks held too), false", pending, paused, moving)
	}
}

// TestRescueFinishesAnInterruptedMove: a node that dies between the chunks
// of a resume leaves the endpoint enabled with deliveries still held and
// marked deliveries_moving; a rescue (any node's) finishes the move once
// the change is moveRescueAfter old, and not before.
func TestRescueFinishesAnInterruptedMove(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	s.moveChunkForTest = 3
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint("acme"))
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base}); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		publish(t, s, newEvent("acme"), base)
	}
	died := errors.New("the node died")
	s.beforeMoveChunk = func() error { return died }
	at := base.Add(time.Minute)
	if _, moved, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: at}); !errors.Is(err, died) || moved != 3 {
		t.Fatalf("resume = %d moved, %v; want 3 and the hook's error", moved, err)
	}
	if pending, paused, moving := stateCounts(t, s, ep.ID); pending != 3 || paused != 5 || !moving {
		t.Fatalf("after the interrupted resume: %d pending, %d held, marked %v; want 3, 5, true", pending, paused, moving)
	}
	s.beforeMoveChunk = nil
	if _, err := s.RescueExpiredLeases(ctx, at.Add(moveRescueAfter/2)); err != nil {
		t.Fatal(err)
	}
	if pending, paused, moving := stateCounts(t, s, ep.ID); pending != 3 || paused != 5 || !moving {
		t.Errorf("a rescue before moveRescueAfter moved: %d pending, %d held, marked %v; want 3, 5, true", pending, paused, moving)
	}
	if _, err := s.RescueExpiredLeases(ctx, at.Add(moveRescueAfter+time.Second)); err != nil {
		t.Fatal(err)
	}
	if pending, paused, moving := stateCounts(t, s, ep.ID); pending != 8 || paused != 0 || moving {
		t.Errorf("after the rescue: %d pending, %d held, marked %v; want 8, 0, false", pending, paused, moving)
	}
}
