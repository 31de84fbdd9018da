package postgres

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The chunks an API call runs after its commit (a delete's, a pause's or
// a resume's) ignore the caller's cancellation (they are the change's own
// work), so each waits a bounded time for a row's lock, as the rescue's
// do: a row a stuck session holds fails the chunk, and the call answers
// (success: the change is in force; a WARN logged) instead of waiting for
// that session; the rest is left marked for the lease rescue. Before, the call waited
// as long as the session held the row, whatever its context, and Close,
// which waits for the pool's connections, with it (a node's stop hung).
func TestAPIChunksDoNotWaitForeverForARowLock(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		chunkMeetsAStuckRow(t, "pgc3-stuck-del", "FOR UPDATE", func(ctx context.Context, s *Store, epID string) error {
			return s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: epID, Now: base})
		}, func(t *testing.T, s *Store, epID string) {
			if n, d := countDeliveries(t, s, epID); n != 0 || d != 0 {
				t.Errorf("after the rescue: %d deliveries, %d deletions in progress; want none", n, d)
			}
		})
	})
	t.Run("pause", func(t *testing.T) {
		chunkMeetsAStuckRow(t, "pgc3-stuck-pause", "FOR NO KEY UPDATE", func(ctx context.Context, s *Store, epID string) error {
			_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: epID, State: store.EndpointPaused, Now: base})
			return err
		}, func(t *testing.T, s *Store, epID string) {
			// dlv_00000001 is leased: its completion holds it.
			if got := countStates(t, s, epID); got[store.DeliveryPending] != 1 {
				t.Errorf("after the rescue: %v; want every delivery held but the leased one", got)
			}
		})
	})
}

// chunkMeetsAStuckRow runs run (an API call whose later chunks meet
// dlv_00000600, which another session holds with lock) on an endpoint of
// tenant with 2×moveChunk+200 pending deliveries, and checks that the call
// returns while the row is still held — with no error, its change being
// committed, and a WARN saying the rescue finishes the rest; once the row
// is free the rescue (its mark made stale) finishes the rest, which check
// checks.
func chunkMeetsAStuckRow(t *testing.T, tenant, lock string, run func(ctx context.Context, s *Store, epID string) error, check func(t *testing.T, s *Store, epID string)) {
	t.Parallel()
	dbURL := newSchema(t)
	var logged syncBuffer
	s := openStore(t, dbURL, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	s.sweepLockTimeout = "200ms"
	ep := pendingEndpointOf(t, s, dbURL, tenant, 2*moveChunk+200)
	ctx := t.Context()
	stuck, err := rawConn(t, dbURL).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Rollback(ctx) //nolint:errcheck
	// A row of the second chunk (the first goes with the change).
	if _, err := stuck.Exec(ctx, "SELECT 1 FROM deliveries WHERE id = 'dlv_00000600' "+lock); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(callCtx, s, ep.ID) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call met a row another session holds after its change committed: %v; want success, the rest left to the rescue", err)
		}
		if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "lease rescue finishes the rest") {
			t.Errorf("log %q; want a WARN saying the rescue finishes the rest", logged.String())
		}
	case <-time.After(30 * time.Second):
		// The caller gives up: it does not end the wait either.
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("after 30 s and its caller's cancellation the call still waits for the row a stuck session holds")
		}
		stuck.Rollback(ctx) //nolint:errcheck
		<-done
		return
	}
	cancel()
	if err := stuck.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The rest is the rescue's, once its mark is stale.
	for _, q := range []string{
		"UPDATE endpoint_deletions SET deleting_since = now() - interval '31 seconds'",
		"UPDATE endpoints SET releasing_since = now() - interval '31 seconds' WHERE releasing_since IS NOT NULL",
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RescueExpiredLeases(ctx, base); err != nil {
		t.Fatal(err)
	}
	check(t, s, ep.ID)
}

// A replay of an endpoint's dead letters that waited for the tenant's
// lock while the endpoint's delete committed answers not found and
// replays none of the deliveries the delete's chunks have not reached
// yet, as a replay of one delivery does and as SQLite answers: before,
// the endpoint read before the wait counted as found, and the replay
// moved the delete's leftovers (dead to held) and answered their number.
func TestEndpointReplayWaitingForADeleteAnswersNotFound(t *testing.T) {
	t.Parallel()
	const tenant = "pgc3-replay-del"
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint(tenant))
	n := 2*moveChunk + 200
	seedDeliveries(t, rawConn(t, dbURL), ep.ID, n, seedShape{tenant: tenant, state: "'dead'", due: "$1", leased: "false", updated: "$1"})
	ctx := t.Context()
	conn := rawConn(t, dbURL)
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// The delete's first transaction (DeleteEndpoint: the tenant's lock,
	// the endpoint's row, its first chunk), committed while the replay
	// waits for the lock.
	del, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer del.Rollback(ctx) //nolint:errcheck
	if _, err := del.Exec(ctx, "SELECT pg_advisory_xact_lock($1::integer, hashtext($2))", tenantLockClass, tenant); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var replayed int
	go func() {
		var err error
		replayed, err = s.ReplayDeliveries(ctx, store.ReplayParams{EndpointID: ep.ID, Now: base.Add(time.Hour)})
		done <- err
	}()
	waitBlockedBy(t, s, pid, "the replay never waited for the delete's lock")
	if _, err := del.Exec(ctx, "DELETE FROM endpoints WHERE id = $1", ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := startDeletion(ctx, del, ep.ID); err != nil {
		t.Fatal(err)
	}
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the replay answered %d replayed, %v; want not found", replayed, err)
	}
	if got := countStates(t, s, ep.ID); got[store.DeliveryDead] != n-moveChunk {
		t.Errorf("the delete's leftovers after the replay: %v; want %d dead, untouched", got, n-moveChunk)
	}
}

// syncBuffer is a bytes.Buffer safe for the store's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
