package postgres

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

func nodeIDs(ns []store.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

// Two nodes see each other, with their intervals and timeouts; a node not
// seen for 10 of its own intervals is forgotten (and its row deleted),
// whatever the interval of the node that looks; a node that leaves is gone
// at once; bad arguments are refused and change nothing.
func TestMembership(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	a := openStore(t, dbURL)
	b := openStore(t, dbURL)
	ctx := t.Context()
	nb := store.Node{ID: "node_b0", HeartbeatInterval: time.Second, AttemptTimeout: 10 * time.Second}
	na := store.Node{ID: "node_a1", HeartbeatInterval: 50 * time.Millisecond, AttemptTimeout: 2 * time.Second}

	live, err := a.Heartbeat(ctx, nb)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if !slices.Equal(live, []store.Node{nb}) {
		t.Fatalf("first node alone: live = %+v", live)
	}
	live, err = b.Heartbeat(ctx, na)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if want := []store.Node{na, nb}; !slices.Equal(live, want) {
		t.Fatalf("second node: live = %+v, want %+v (sorted, with intervals and timeouts)", live, want)
	}
	if live, _ = a.Heartbeat(ctx, nb); !slices.Equal(nodeIDs(live), []string{"node_a1", "node_b0"}) {
		t.Fatalf("first node after the second joined: live = %v", nodeIDs(live))
	}

	conn := rawConn(t, dbURL)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// node_a1 (50 ms interval) was seen 0.3 s ago: live for node_b0 (1 s
	// interval) too; 0.7 s ago: gone for everyone, its row deleted. (The
	// margins either side of 10 intervals, 0.5 s, leave room for a loaded
	// machine between the UPDATE and the heartbeat.)
	exec("UPDATE nodes SET seen_at = now() - interval '300 milliseconds' WHERE id = 'node_a1'")
	if live, _ = a.Heartbeat(ctx, nb); !slices.Equal(nodeIDs(live), []string{"node_a1", "node_b0"}) {
		t.Errorf("a node seen within 10 of its intervals is not counted: live = %v", nodeIDs(live))
	}
	exec("UPDATE nodes SET seen_at = now() - interval '700 milliseconds' WHERE id = 'node_a1'")
	if live, _ = a.Heartbeat(ctx, nb); !slices.Equal(nodeIDs(live), []string{"node_b0"}) {
		t.Errorf("a node unseen for 10 of its intervals is counted: live = %v", nodeIDs(live))
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM nodes WHERE id = 'node_a1'").Scan(&n); err != nil || n != 0 {
		t.Errorf("expired node row still there (count %d, err %v)", n, err)
	}
	// node_b0 (1 s interval) seen 9 s ago is live for node_a1 (50 ms).
	b.Heartbeat(ctx, na)
	exec("UPDATE nodes SET seen_at = now() - interval '9 seconds' WHERE id = 'node_b0'")
	if live, _ = b.Heartbeat(ctx, na); !slices.Equal(nodeIDs(live), []string{"node_a1", "node_b0"}) {
		t.Errorf("a node with a longer interval is forgotten by its own TTL: live = %v", nodeIDs(live))
	}

	if err := b.Leave(ctx, "node_a1"); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if err := b.Leave(ctx, "node_a1"); err != nil {
		t.Errorf("leaving twice: %v", err)
	}
	if live, _ = a.Heartbeat(ctx, nb); !slices.Equal(nodeIDs(live), []string{"node_b0"}) {
		t.Errorf("after node_a1 left: live = %v, want [node_b0]", nodeIDs(live))
	}

	for _, tc := range []struct {
		node store.Node
		want string
	}{
		{store.Node{HeartbeatInterval: time.Second, AttemptTimeout: time.Second}, "heartbeat: empty node id: invalid input"},
		{store.Node{ID: "node_x", AttemptTimeout: time.Second}, "heartbeat: interval 0s is not positive: invalid input"},
		{store.Node{ID: "node_x", HeartbeatInterval: -time.Second, AttemptTimeout: time.Second}, "heartbeat: interval -1s is not positive: invalid input"},
		{store.Node{ID: "node_x", HeartbeatInterval: time.Second}, "heartbeat: attempt timeout 0s is not positive: invalid input"},
	} {
		if _, err := a.Heartbeat(ctx, tc.node); err == nil || err.Error() != tc.want || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Heartbeat(%+v) = %v, want %q (ErrInvalid)", tc.node, err, tc.want)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM nodes WHERE id IN ('node_x', '')").Scan(&n); err != nil || n != 0 {
		t.Errorf("refused heartbeats stored rows (count %d, err %v)", n, err)
	}
}

// TestLiveNodes: herald rekey's view of the nodes on a database: the ids
// of nodes whose heartbeat is recent (by their own interval), none on a
// fresh database, and not a node whose heartbeat is older than 10 of its
// intervals.
func TestLiveNodes(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	a := openStore(t, dbURL)
	ctx := t.Context()
	if ids, err := a.LiveNodes(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("live nodes of a fresh database: %v, %v", ids, err)
	}
	for _, id := range []string{"node_b", "node_a"} {
		if _, err := a.Heartbeat(ctx, store.Node{ID: id, HeartbeatInterval: time.Second, AttemptTimeout: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := a.LiveNodes(ctx); err != nil || !slices.Equal(ids, []string{"node_a", "node_b"}) {
		t.Fatalf("live nodes: %v, %v; want [node_a node_b]", ids, err)
	}
	if _, err := rawConn(t, dbURL).Exec(ctx, "UPDATE nodes SET seen_at = now() - interval '11 seconds' WHERE id = 'node_b'"); err != nil {
		t.Fatal(err)
	}
	if ids, err := a.LiveNodes(ctx); err != nil || !slices.Equal(ids, []string{"node_a"}) {
		t.Fatalf("live nodes after node_b's heartbeat stopped 11 intervals ago: %v, %v", ids, err)
	}
}
