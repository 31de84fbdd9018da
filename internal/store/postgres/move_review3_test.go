package postgres

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Two resumes at the same time (one `now`, the release's name): R1 is
// between its chunks (cursor past the second chunk) when another node
// pauses (holding what R1 released) and resumes at R1's time. R2 releases
// its first chunk and stops (its node, or it is merely slower); R1, seeing
// release_due_at equal to its own, goes on from its cursor, finds fewer
// than moveChunk and clears the mark: the deliveries between R2's cursor
// and R1's stay held while the endpoint is enabled, with no mark for the
// rescue to finish.
func TestReleasesSharingOneDueTime(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	ep := heldEndpointOf(t, s, dbURL, "rev3-same-t", 4*moveChunk)
	ctx := t.Context()
	t1 := base.Add(time.Minute)
	calls := 0
	resuming := false
	s2.beforeChunk = func() {
		if resuming {
			panic(nodeStopped{})
		}
	}
	s.beforeChunk = func() {
		calls++
		if calls != 2 { // after R1's second chunk
			return
		}
		if _, _, err := s2.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(2 * time.Minute)}); err != nil {
			t.Error(err)
		}
		resuming = true
		stopped(t, func() {
			if _, _, err := s2.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: t1}); err != nil {
				t.Error(err)
			}
		})
	}
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: t1}); err != nil {
		t.Fatal(err)
	}
	s.beforeChunk, s2.beforeChunk = nil, nil
	// Any number of rescue rounds, with every mark aged.
	for range 3 {
		if _, err := s.pool.Exec(ctx, "UPDATE endpoints SET releasing_since = now() - interval '1 minute' WHERE id = $1 AND releasing_since IS NOT NULL", ep.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RescueExpiredLeases(ctx, base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	var mark *time.Time
	var state string
	if err := s.pool.QueryRow(ctx, "SELECT state, releasing_since FROM endpoints WHERE id = $1", ep.ID).Scan(&state, &mark); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 0 {
		t.Errorf("endpoint %s (mark %v): deliveries by state %v: held deliveries left with the release over (two releases at one time)", state, mark, got)
	}
}

// TestReleasesSharingOneDueTime without a node stopping: R2 (same due
// time as R1) is merely slower between its chunks; R1 ends the release
// (clears release_due_at) and R2's next chunk, finding the name gone,
// stops too.
func TestReleasesSharingOneDueTimeBothAlive(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	ep := heldEndpointOf(t, s, dbURL, "rev3-same2-t", 4*moveChunk)
	ctx := t.Context()
	t1 := base.Add(time.Minute)
	calls := 0
	var resuming atomic.Bool
	flipped, r1done, r2done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	s2.beforeChunk = func() {
		if resuming.Load() {
			once.Do(func() { close(flipped) })
			<-r1done
		}
	}
	s.beforeChunk = func() {
		calls++
		if calls != 2 {
			return
		}
		if _, _, err := s2.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(2 * time.Minute)}); err != nil {
			t.Error(err)
		}
		resuming.Store(true)
		go func() {
			defer close(r2done)
			if _, _, err := s2.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: t1}); err != nil {
				t.Error(err)
			}
		}()
		<-flipped
	}
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: t1}); err != nil {
		t.Fatal(err)
	}
	close(r1done)
	<-r2done
	var mark *time.Time
	if err := s.pool.QueryRow(ctx, "SELECT releasing_since FROM endpoints WHERE id = $1", ep.ID).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryPaused] != 0 {
		t.Errorf("both releases returned (mark %v): deliveries by state %v: held deliveries left on an enabled endpoint", mark, got)
	}
}
