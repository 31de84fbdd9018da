package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

var _ store.Membership = (*Store)(nil)

// Two nodes see each other; a node not seen for the TTL is forgotten (and
// its row deleted); a node that leaves is gone at once; bad arguments are
// refused and change nothing.
func TestMembership(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	a := openStore(t, dbURL)
	b := openStore(t, dbURL)
	ctx := t.Context()
	const ttl = 10 * time.Second

	live, err := a.Heartbeat(ctx, "node_b0", ttl)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if want := []string{"node_b0"}; !slices.Equal(live, want) {
		t.Fatalf("first node alone: live = %v, want %v", live, want)
	}
	live, err = b.Heartbeat(ctx, "node_a1", ttl)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if want := []string{"node_a1", "node_b0"}; !slices.Equal(live, want) {
		t.Fatalf("second node: live = %v, want %v (sorted)", live, want)
	}
	if live, _ = a.Heartbeat(ctx, "node_b0", ttl); !slices.Equal(live, []string{"node_a1", "node_b0"}) {
		t.Fatalf("first node after the second joined: live = %v", live)
	}

	// A third node died 11 s ago: live nodes do not count it, and the next
	// heartbeat deletes its row.
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(ctx, "INSERT INTO nodes (id, seen_at) VALUES ('node_c2', now() - interval '11 seconds')"); err != nil {
		t.Fatal(err)
	}
	if live, _ = a.Heartbeat(ctx, "node_b0", ttl); !slices.Equal(live, []string{"node_a1", "node_b0"}) {
		t.Errorf("a node unseen for longer than the TTL is counted: live = %v", live)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM nodes WHERE id = 'node_c2'").Scan(&n); err != nil || n != 0 {
		t.Errorf("expired node row still there (count %d, err %v)", n, err)
	}
	// Seen 9 s ago: still live with a 10 s TTL.
	if _, err := conn.Exec(ctx, "UPDATE nodes SET seen_at = now() - interval '9 seconds' WHERE id = 'node_a1'"); err != nil {
		t.Fatal(err)
	}
	if live, _ = a.Heartbeat(ctx, "node_b0", ttl); !slices.Equal(live, []string{"node_a1", "node_b0"}) {
		t.Errorf("a node seen within the TTL is not counted: live = %v", live)
	}

	if err := b.Leave(ctx, "node_a1"); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if err := b.Leave(ctx, "node_a1"); err != nil {
		t.Errorf("leaving twice: %v", err)
	}
	if live, _ = a.Heartbeat(ctx, "node_b0", ttl); !slices.Equal(live, []string{"node_b0"}) {
		t.Errorf("after node_a1 left: live = %v, want [node_b0]", live)
	}

	for _, tc := range []struct {
		node string
		ttl  time.Duration
		want string
	}{
		{"", ttl, "postgres: heartbeat: empty node id"},
		{"node_x", 0, "postgres: heartbeat: ttl must be positive"},
		{"node_x", -time.Second, "postgres: heartbeat: ttl must be positive"},
	} {
		if _, err := a.Heartbeat(ctx, tc.node, tc.ttl); err == nil || err.Error() != tc.want {
			t.Errorf("Heartbeat(%q, %v) = %v, want %q", tc.node, tc.ttl, err, tc.want)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM nodes WHERE id = 'node_x' OR id = ''").Scan(&n); err != nil || n != 0 {
		t.Errorf("refused heartbeats stored rows (count %d, err %v)", n, err)
	}
}
