package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// A move with a limit (a pull-in) reads at most 16 × limit due rows of its
// window, of any endpoint: an endpoint's delivery behind more of other
// endpoints' rows keeps its time, one behind fewer is moved (found by
// review: 200,000 rows of another endpoint due within the window cost
// 167 ms of the writer to move none).
func TestMoveWithLimitReadsABoundedWindow(t *testing.T) {
	for _, tc := range []struct {
		others int
		moved  int
	}{{100, 1}, {20000, 0}} {
		path := filepath.Join(t.TempDir(), "herald.db")
		s := openStore(t, path)
		db := rawDB(t, path)
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at) VALUES ('ev', 'acme', 'x', 0, x'00', 'f', 0)`); err != nil {
			t.Fatal(err)
		}
		// Other endpoints' deliveries due in the window's first minutes,
		// then the endpoint's one.
		if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
			INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
			SELECT 'd' || i, 'ev', 'ep_other', 'acme', 'x', 'pending', ?1 + i * 1000, 0, 0 FROM n`, base.UnixMicro(), tc.others); err != nil {
			t.Fatal(err)
		}
		mine := base.Add(time.Hour)
		if _, err := db.ExecContext(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
			VALUES ('mine', 'ev', 'ep_a', 'acme', 'x', 'pending', ?1, 0, 0)`, mine.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		n, err := s.MoveEndpointDeliveries(ctx, store.MoveParams{EndpointID: "ep_a", DueFrom: base, DueTo: base.Add(2 * time.Hour), At: base,
			Unattempted: true, Limit: 1024, Spacing: time.Millisecond})
		if err != nil || n != tc.moved {
			t.Errorf("behind %d other rows: moved %d, %v; want %d", tc.others, n, err, tc.moved)
		}
		var due int64
		if err := db.QueryRowContext(ctx, `SELECT next_attempt_at FROM deliveries WHERE id = 'mine'`).Scan(&due); err != nil {
			t.Fatal(err)
		}
		want := mine
		if tc.moved == 1 {
			want = base
		}
		if due != want.UnixMicro() {
			t.Errorf("behind %d other rows: due %v, want %v", tc.others, time.UnixMicro(due).UTC(), want)
		}
		s.Close()
	}
}
