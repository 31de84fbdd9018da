//go:build linux

package sqlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestKilledBetweenChunks: a process killed (SIGKILL: no deferred
// cleanup, no Close) between two chunks of a disable by a 410 (its
// background hold), of a pause and of a delete, each after its second
// chunk, leaves what the next process finishes once it has taken the
// claim lock: every pending delivery of the disabled and the paused
// endpoint held, the deleted endpoint's deliveries and mark gone, the
// other endpoint's deliveries untouched. Each child kills itself from the
// beforeChunk hook: the same instant every run, no timing involved.
func TestKilledBetweenChunks(t *testing.T) {
	if mode := os.Getenv("HERALD_TEST_KILLED_CHUNKS"); mode != "" {
		killedChunksChild(mode, os.Getenv("HERALD_TEST_KILLED_CHUNKS_DB"))
		return
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	n := 3*holdChunk + 3
	for _, id := range []string{"ep_a", "ep_b", "ep_c", "ep_d"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: id,
			URL: "https://example.com/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
		size := n
		if id == "ep_c" {
			size = 2
		}
		backlogOf(t, s, id, size, now)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"disable", "pause", "delete"} {
		child := exec.Command(os.Args[0], "-test.run=^TestKilledBetweenChunks$")
		child.Env = append(os.Environ(), "HERALD_TEST_KILLED_CHUNKS="+mode, "HERALD_TEST_KILLED_CHUNKS_DB="+path)
		out, err := child.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("child %s: %v; want it killed\n%s", mode, err, out)
		}
		if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child %s ended with %v; want SIGKILL\n%s", mode, exit, out)
		}
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// What the children left: each move stopped after two chunks.
	if got := countStates(t, s, "ep_d"); got["pending"] == 0 {
		t.Fatalf("the disable's child left nothing to hold: %v", got)
	}
	if got := countStates(t, s, "ep_b"); got["pending"] == 0 {
		t.Fatalf("the pause's child left nothing to hold: %v", got)
	}
	if got := countStates(t, s, "ep_a"); len(got) == 0 {
		t.Fatalf("the delete's child left nothing to delete")
	}
	if err := s.ClaimExclusively(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitBackground()
	if got := countStates(t, s, "ep_d"); got["paused"] != n-1 || got["dead"] != 1 || len(got) != 2 {
		t.Errorf("disabled endpoint after the next start: %v, want %d paused and 1 dead", got, n-1)
	}
	if got := countStates(t, s, "ep_b"); got["paused"] != n || len(got) != 1 {
		t.Errorf("paused endpoint after the next start: %v, want %d paused", got, n)
	}
	var marks int
	if err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM meta WHERE key GLOB 'deleting_endpoint:*'").Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if got := countStates(t, s, "ep_a"); len(got) != 0 || marks != 0 {
		t.Errorf("deleted endpoint after the next start: %v, %d marks; want none", got, marks)
	}
	if got := countStates(t, s, "ep_c"); got["pending"] != 2 || len(got) != 1 {
		t.Errorf("other endpoint after the next start: %v, want its 2 pending", got)
	}
	ep, err := s.GetEndpoint(ctx, "ep_d")
	if err != nil || ep.State != store.EndpointDisabled {
		t.Errorf("ep_d after the next start: %v, %v; want disabled", ep.State, err)
	}
}

// killedChunksChild runs one move of TestKilledBetweenChunks and kills
// its own process before the move's third chunk.
func killedChunksChild(mode, path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		panic(err)
	}
	now := time.Now().UTC()
	var chunks int
	s.beforeChunk = func() {
		if chunks++; chunks == 2 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	switch mode {
	case "disable":
		cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "n", Limit: 1, Lease: time.Minute, Now: now,
			SkipTenants: []string{"ep_a", "ep_b", "ep_c"}})
		if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != "ep_d" {
			panic("claim of ep_d")
		}
		if err := s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: cs[0].Delivery.ID, EndpointID: "ep_d", Owner: "n",
			LeaseUntil: cs[0].Delivery.LeaseUntil, State: store.DeliveryDead, DisableEndpoint: true, DisableReason: "410 Gone",
			Attempt: store.Attempt{Number: 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 410}, Now: now}}); err != nil {
			panic(err)
		}
		select {} // the background hold kills the process
	case "pause":
		s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_b", State: store.EndpointPaused, Now: now})
	case "delete":
		s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_a", Now: now})
	}
	panic("the move ended without being killed")
}
