package postgres

import (
	"github.com/jackc/pgx/v5"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// stopped runs f, recovering the nodeStopped panic a beforeChunk hook
// raises (a node stopping between a move's chunks).
func stopped(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(nodeStopped); !ok {
				panic(r)
			}
		}
	}()
	f()
}

// A pause and a resume (another node) both between two chunks of an
// earlier resume: the earlier release's next chunk re-reads the state,
// finds it enabled, and goes on with its own due time, releasing what the
// second pause held (published while paused, after deliveries that were
// pending then) due at the FIRST resume's time: a delivery published
// while the endpoint was paused comes due before one published earlier.
func TestOlderReleaseGoesOnAfterPauseAndResume(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	s2 := openStore(t, dbURL) // another node
	ep := heldEndpointOf(t, s, dbURL, "rev2-pr-t", 2*moveChunk+200)
	ctx := t.Context()
	t1 := base.Add(time.Minute)
	var a, e store.PublishResult
	calls := 0
	s2.beforeChunk = func() { panic(nodeStopped{}) }
	s.beforeChunk = func() {
		calls++
		if calls != 1 {
			return
		}
		// Between R1's first and second chunk: A published (pending),
		// the endpoint paused, E published (held), resumed.
		a = publish(t, s, newEvent("rev2-pr-t"), base.Add(2*time.Minute))
		stopped(t, func() {
			if _, _, err := s2.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointPaused, Now: base.Add(3 * time.Minute)}); err != nil {
				t.Error(err)
			}
		})
		e = publish(t, s, newEvent("rev2-pr-t"), base.Add(4*time.Minute))
		stopped(t, func() {
			if _, _, err := s2.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(5 * time.Minute)}); err != nil {
				t.Error(err)
			}
		})
	}
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: t1}); err != nil {
		t.Fatal(err)
	}
	due := func(ev string) time.Time {
		var at time.Time
		if err := s.pool.QueryRow(ctx, "SELECT next_attempt_at FROM deliveries WHERE event_id = $1", ev).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at.UTC()
	}
	da, de := due(a.Event.ID), due(e.Event.ID)
	t.Logf("A (published pending at +2m) due %v; E (published held at +4m) due %v; states %v", da, de, countStates(t, s, ep.ID))
	if de.Before(da) {
		t.Errorf("E, published while paused after A, is due at %v (the first resume's time), before A (%v): the first release went on after the pause and the second resume", de, da)
	}
}

// A stopped release finished by the rescue's sweep, round after round:
// each round starts at the endpoint's first id (after ""), so with an old
// snapshot open (a pg_dump, a report, a replica's feedback) its first
// chunk walks past the stale deliveries_endpoint entries ('paused') of
// every row the rounds before released, a heap fetch each: the cost the
// cursor removed within one move, back across the sweep's rounds (round k
// walks k × 10,000 entries; a million-row release, 100 rounds).
func TestSweepRoundsRestartAtTheFirstID(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ctx := t.Context()
	n := 2*sweepChunks*moveChunk + 10*moveChunk
	ep := heldEndpointOf(t, s, dbURL, "rev2-sq-t", n)
	s.beforeChunk = func() { panic(nodeStopped{}) }
	stopped(t, func() {
		if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Now: base.Add(time.Minute)}); err != nil {
			t.Error(err)
		}
	})
	s.beforeChunk = nil
	old := rawConn(t, dbURL)
	tx, err := old.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var x int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM endpoints").Scan(&x); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		if _, err := s.pool.Exec(ctx, "UPDATE endpoints SET releasing_since = now() - interval '1 minute' WHERE id = $1", ep.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RescueExpiredLeases(ctx, base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	var cursor string
	if err := s.pool.QueryRow(ctx, "SELECT max(id) FROM deliveries WHERE endpoint_id = $1 AND state = 'pending'", ep.ID).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	got := countStates(t, s, ep.ID)
	t.Logf("after two sweep rounds: %v, last released %s", got, cursor)
	if got[store.DeliveryPending] != moveChunk+2*sweepChunks*moveChunk {
		t.Errorf("after the first chunk and two sweep rounds: %v, want %d released", got, moveChunk+2*sweepChunks*moveChunk)
	}
	// Each round starts where the one before stopped: the cursor is kept
	// on the endpoint, not the endpoint's first id (whose walk past the
	// stale entries of everything released grows with each round).
	var after string
	if err := s.pool.QueryRow(ctx, "SELECT COALESCE(release_after, '') FROM endpoints WHERE id = $1", ep.ID).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != cursor {
		t.Errorf("the release's cursor after two sweep rounds: %q, want the last id released, %q", after, cursor)
	}
}

// The sweep reads the 8 oldest stale marks only; a release it skips (its
// tenant's lock held, or waited for, exclusively) keeps its old mark and
// stays among them: 8 stopped releases of one locked tenant keep every
// other tenant's stopped release waiting, round after round, for as long
// as that lock is held or queued for.
func TestSweepSkippedReleasesStarveTheOthers(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	var stuck []string
	for range 8 {
		stuck = append(stuck, createEndpoint(t, s, newEndpoint("rev2-lk-t")).ID)
	}
	other := createEndpoint(t, s, newEndpoint("rev2-ok-t"))
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || i, 'rev2-ok-t', 't', $1, '{}', 'f', $1 FROM generate_series(1, 10) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT 'dlv_' || i, 'evt_' || i, $2, 'rev2-ok-t', 't', 'paused', $1, $1, $1 FROM generate_series(1, 10) AS i`, base, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE endpoints SET releasing_since = now() - interval '5 minutes', release_due_at = $2 WHERE id = ANY ($1)`, stuck, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE endpoints SET releasing_since = now() - interval '1 minute', release_due_at = $2 WHERE id = $1`, other.ID, base); err != nil {
		t.Fatal(err)
	}
	locker := rawConn(t, dbURL)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::integer, hashtext('rev2-lk-t'))", tenantLockClass); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		if _, err := s.RescueExpiredLeases(ctx, base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if got := countStates(t, s, other.ID); got[store.DeliveryPaused] != 0 {
		t.Errorf("another tenant's stopped release after three rescue rounds: %v, want it finished (8 stopped releases of a locked tenant come first in every round)", got)
	}
}
