package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// logRecords is a slog handler that keeps every record, for tests.
type logRecords struct {
	mu  sync.Mutex
	got []string // "LEVEL msg k=v k=v"
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	h.got = append(h.got, b.String())
	h.mu.Unlock()
	return nil
}

func (h *logRecords) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.got
	h.got = nil
	return got
}

// TestReadinessLogsChangesOnly: a failing readiness check is logged when
// readiness changes — ready to not ready with the reason and the error, a
// change of reason, and back to ready with how long it lasted — not at
// every probe or scrape: a load balancer probing /readyz every second
// would otherwise flood the log. A probe whose client went away is no
// result, so it logs nothing either.
func TestReadinessLogsChangesOnly(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	logs := &logRecords{}
	var reason string
	var cause error
	r := &readiness{now: clock, log: slog.New(logs), check: func(ctx context.Context) (string, error) {
		return reason, cause
	}}
	probe := func(n int) {
		for range n {
			r.probe(context.Background())
			advance(time.Second)
		}
	}
	expect := func(step string, want ...string) {
		t.Helper()
		got := logs.take()
		if len(got) != len(want) {
			t.Fatalf("%s: logged %q, want %d records like %q", step, got, len(want), want)
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("%s: record %d is %q, want it to start %q", step, i, got[i], want[i])
			}
		}
	}
	probe(30)
	expect("ready throughout")

	reason, cause = metrics.NotReadyStore, fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connection refused", store.ErrUnavailable)
	probe(60)
	expect("the store away for a minute", "WARN not ready reason=store error=store unavailable: dial tcp 127.0.0.1:5432: connection refused")
	if n := r.current(); n != metrics.NotReadyStore {
		t.Fatalf("current = %q", n)
	}
	advance(readyMaxAge)
	r.current() // a scrape that checks again
	expect("scrapes while not ready")

	reason, cause = metrics.NotReadyEncryptionKey, fmt.Errorf("check: %w", store.ErrWrongKey)
	probe(5)
	expect("another reason", "WARN not ready: the store's sealed values do not open with this node's encryption key")

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	reason, cause = "", nil
	r.probe(gone)
	expect("a probe whose client went away")

	probe(10)
	expect("back", "INFO ready again after=encryption_key not_ready_for=1m10s")
	probe(10)
	expect("ready again, probed")

	reason, cause = metrics.NotReadyStore, errors.New("database file deleted")
	advance(readyMaxAge)
	r.current()
	expect("a scrape finding it not ready", "WARN not ready reason=store error=database file deleted")
}
