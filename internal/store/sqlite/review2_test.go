package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestStartReleaseRetriedAfterFailedChunk: a start-up fix-up that fails
// (here: the database file is away for its first chunk, checkFile) must
// be retried by the store, as a delete's rest is (retryDeleteRest). A
// failed release left the deliveries a crash in the middle of a resume
// held under an enabled endpoint until the next start: no claim meets a
// held delivery, nothing logged it, and the node delivered none of them.
func TestStartReleaseRetriedAfterFailedChunk(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, now := openAtWithEndpoints(t, path, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
	total := releaseChunk + 3
	backlogOf(t, s, "ep_a", total, now)
	// As a crash between two chunks of a resume leaves them: held under
	// an enabled endpoint.
	if _, err := s.w.ExecContext(ctx, "UPDATE deliveries SET state = 'paused' WHERE endpoint_id = 'ep_a'"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.retryWait = 0
	calls := failFirstChunk(t, s)
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground()
	if *calls == 1 { // no retry: put the file back to read what was left
		if err := os.Rename(s.path+".away", s.path); err != nil {
			t.Fatal(err)
		}
	}
	if got := countStates(t, s, "ep_a"); got["paused"] != 0 || got["pending"] != total {
		t.Errorf("after the start-up release whose first chunk failed: %v, want %d pending (released)", got, total)
	}
}

// TestCloseStopsStartFixUpRetry: Close during the wait of a failed
// start-up fix-up's retry (a minute here) cancels it and returns: the
// retry does not outlive the store (the package's goleak check) nor
// keep Close waiting.
func TestCloseStopsStartFixUpRetry(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, now := openAtWithEndpoints(t, path, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
	backlogOf(t, s, "ep_a", 3, now)
	if _, err := s.w.ExecContext(ctx, "UPDATE deliveries SET state = 'paused' WHERE endpoint_id = 'ep_a'"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.retryWait = time.Minute
	failed := make(chan struct{})
	calls := 0
	s.beforeChunk = func() {
		if calls++; calls == 1 {
			if err := os.Rename(s.path, s.path+".away"); err != nil {
				t.Error(err)
			}
			close(failed)
		}
	}
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	<-failed
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second): // a deadlock detector, not a timing assertion
		t.Fatal("Close waited for a start-up fix-up's retry")
	}
	if err := os.Rename(s.path+".away", s.path); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("%d chunks ran; want 1 (none after Close)", calls)
	}
}

// TestResumeReleaseRetriedAfterFailedChunk: a resume whose later chunk
// fails answers an error although the endpoint is enabled (in force from
// its commit); no claim meets a held delivery, so the rest of the release
// must be retried by the store, not left held under an enabled endpoint
// until the operator resumes again or the next start.
func TestResumeReleaseRetriedAfterFailedChunk(t *testing.T) {
	ctx := context.Background()
	s, now := openWithEndpoints(t, store.Endpoint{ID: "ep_a", Tenant: "ep_a"})
	s.retryWait = 0
	total := 2*releaseChunk + 3
	backlogOf(t, s, "ep_a", total, now)
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointPaused, Now: now}); err != nil {
		t.Fatal(err)
	}
	calls := failFirstChunk(t, s)
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointEnabled, Now: now}); err == nil {
		t.Fatal("the resume whose second chunk failed answered no error")
	}
	s.waitBackground()
	if *calls == 1 { // no retry: put the file back to read what was left
		if err := os.Rename(s.path+".away", s.path); err != nil {
			t.Fatal(err)
		}
	}
	if got := countStates(t, s, "ep_a"); got["paused"] != 0 || got["pending"] != total {
		t.Errorf("after the resume whose second chunk failed: %v, want %d pending (released)", got, total)
	}
}

// failFirstChunk makes s's next chunk fail (its database file is away,
// checkFile) and puts the file back for the chunk after it (a retry); it
// answers the count of chunks begun.
func failFirstChunk(t *testing.T, s *Store) *int {
	t.Helper()
	calls := new(int)
	s.beforeChunk = func() {
		switch *calls++; *calls {
		case 1: // this chunk fails: the file is away
			if err := os.Rename(s.path, s.path+".away"); err != nil {
				t.Error(err)
			}
		case 2: // a retry: the file is back for it
			if err := os.Rename(s.path+".away", s.path); err != nil {
				t.Error(err)
			}
		}
	}
	return calls
}
