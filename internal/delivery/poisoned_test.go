package delivery

import (
	"database/sql"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/metrics"
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

// TestPoisonedEventCountedAndLoggedPerClaim: a damaged version_bodies
// dead-letters every delivery of the event. A review found one ERROR line
// per delivery, no metric, and the dead letters missing from the
// endpoints' stats. Now the claim that meets them logs one ERROR line
// naming how many, counts each in herald_deliveries_poisoned_total, and
// the store counts each in its endpoint's dead letters (the conformance
// suite's Poisoned checks the stats on both stores).
func TestPoisonedEventCountedAndLoggedPerClaim(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	sq, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	var eps []string
	for i := range 3 {
		ep := holdEndpoint(fmt.Sprintf("ep_%d", i))
		if _, err := sq.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep.ID)
	}
	good, bad := holdPublish(t, sq, "t", t0), holdPublish(t, sq, "t", t0)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "UPDATE events SET version_bodies = '{not json' WHERE id = ?", bad); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	snd := &countingSender{n: map[string]int{}}
	m := metrics.New(nil)
	e, err := New(Config{Store: sq, Sender: snd, Clock: clock.NewFake(t0), Workers: 8, EndpointConcurrency: 4, TenantConcurrency: 8, HostConcurrency: 8,
		PollInterval: time.Hour, RescueInterval: time.Hour, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cancel, ran := runInBackground(t, e)
	defer func() { cancel(); <-ran }()
	deadCount := func() (n int) {
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM deliveries WHERE event_id = ? AND state = 'dead'", bad).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); snd.total() < 3 || deadCount() < 3; time.Sleep(5 * time.Millisecond) { // a hang guard
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %d attempts, %d of the damaged event's deliveries dead; want 3 and 3\nlog:\n%s", snd.total(), deadCount(), logs.String())
		}
	}
	for _, ep := range eps {
		if n := snd.n[good+" https://example.com/hooks/"+ep]; n != 1 {
			t.Errorf("event %s to %s attempted %d times, want once", good, ep, n)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "\nherald_deliveries_poisoned_total 3\n") {
		t.Errorf("herald_deliveries_poisoned_total is not 3:\n%s", grepLines(rec.Body.String(), "herald_deliveries"))
	}
	var errLines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "deliveries=3") || !strings.Contains(errLines[0], "event="+bad) {
		t.Errorf("ERROR lines %q; want one for the claim, naming 3 deliveries and event %s", errLines, bad)
	}
	for _, ep := range eps {
		st, err := sq.EndpointStats(ctx, store.EndpointStatsParams{EndpointID: ep, Window: store.StatsWindowDay, Now: t0})
		if err != nil || st.DeadLetters() != 1 {
			t.Errorf("EndpointStats(%s) = %d dead letters, %v; want 1", ep, st.DeadLetters(), err)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
