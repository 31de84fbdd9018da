package delivery

import (
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// TestPoisonedEventStallsNoOneElse: on a real SQLite store, an event whose
// stored headers are not JSON (a damaged row) makes no claim fail: its
// delivery is dead-lettered without an attempt, with an ERROR naming the
// delivery and the event, and the other deliveries of the same claim are
// delivered. Before, the claim failed, the claimer retried it forever and
// nothing of the node was delivered.
func TestPoisonedEventStallsNoOneElse(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	sq, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	ep := holdEndpoint("ep_a")
	if _, err := sq.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	var events []string
	for i := range 3 {
		id := fmt.Sprintf("evt_%d", i)
		events = append(events, id)
		if _, err := sq.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: t0, Body: fmt.Appendf(nil, `{"id":%q}`, id), Fingerprint: id},
			Now:   t0, NewDeliveryID: func() string { return store.NewID("dlv") },
		}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "UPDATE events SET headers = '{not json' WHERE id = ?", events[1]); err != nil {
		t.Fatal(err)
	}
	var bad string
	if err := db.QueryRowContext(ctx, "SELECT id FROM deliveries WHERE event_id = ?", events[1]).Scan(&bad); err != nil {
		t.Fatal(err)
	}

	logs := &testutil.SyncBuffer{}
	snd := &countingSender{n: map[string]int{}}
	e, err := New(Config{Store: sq, Sender: snd, Clock: clock.NewFake(t0), Workers: 4, EndpointConcurrency: 4, TenantConcurrency: 4, HostConcurrency: 4,
		PollInterval: time.Hour, RescueInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cancel, ran := runInBackground(t, e)
	defer func() { cancel(); <-ran }()
	state := func() (st, lastError string) {
		if err := db.QueryRowContext(ctx, "SELECT state, last_error FROM deliveries WHERE id = ?", bad).Scan(&st, &lastError); err != nil {
			t.Fatal(err)
		}
		return st, lastError
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) { // a hang guard
		if st, _ := state(); snd.total() == 2 && st == string(store.DeliveryDead) {
			break
		}
		if time.Now().After(deadline) {
			st, _ := state()
			t.Fatalf("after 20 s: %d attempts, the damaged event's delivery %s; want the 2 others delivered and it dead\nlog:\n%s", snd.total(), st, logs.String())
		}
	}
	snd.expectEachOnce(t)
	for _, id := range []string{events[0], events[2]} {
		if n := snd.n[id+" "+ep.URL]; n != 1 {
			t.Errorf("event %s attempted %d times, want once", id, n)
		}
	}
	if _, lastError := state(); !strings.HasPrefix(lastError, "stored event "+events[1]+" could not be read: ") {
		t.Errorf("last_error %q, want it to name the stored event", lastError)
	}
	var errLine string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errLine = l
		}
	}
	if !strings.Contains(errLine, "delivery="+bad) || !strings.Contains(errLine, "event="+events[1]) || !strings.Contains(errLine, "endpoint=ep_a") {
		t.Errorf("ERROR line %q; want it to name delivery %s, event %s and endpoint ep_a", errLine, bad, events[1])
	}
}
