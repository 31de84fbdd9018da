package app_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
)

// readyAdvance moves the fake clock past what a scrape may reuse of an
// earlier readiness check (5 s) and the key check's interval (10 s).
const readyAdvance = 10 * time.Second

// readiness returns the readiness lines of one scrape of /metrics: each
// herald_not_ready series and herald_ready, one per line, in the order
// /metrics serves them.
func (h *herald) readiness() string {
	h.t.Helper()
	st, body := h.call("GET", "/metrics", nil, nil)
	if st != 200 {
		h.t.Fatalf("GET /metrics: %d", st)
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "herald_ready ") || strings.HasPrefix(l, "herald_not_ready{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The families in the order /metrics serves them (by name).
const (
	metricsReady = `herald_not_ready{reason="encryption_key"} 0
herald_not_ready{reason="store"} 0
herald_ready 1`
	metricsStoreNotReady = `herald_not_ready{reason="encryption_key"} 0
herald_not_ready{reason="store"} 1
herald_ready 0`
	metricsKeyNotReady = `herald_not_ready{reason="encryption_key"} 1
herald_not_ready{reason="store"} 0
herald_ready 0`
)

// TestDeletedDatabaseShownInMetrics: a SQLite database file deleted while
// Herald runs turns /readyz 503 and refuses every publish
// (TestDeletedDatabaseDetected); /metrics shows it too, so an alert fires
// where nothing probes /readyz: herald_ready 0 with the reason "store",
// found by the scrape itself once the result it may reuse is older than
// 5 s, without any call of /readyz.
func TestDeletedDatabaseShownInMetrics(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "herald.db")
	clk := newFakeClock()
	m, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + path, APIKey: testAPIKey, Dev: true,
		Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	h := &herald{t: t, base: "http://" + m.Addr(), m: m}
	if got := h.readiness(); got != metricsReady {
		t.Fatalf("/metrics of a ready node:\n%s\nwant\n%s", got, metricsReady)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(f)
	}
	clk.Advance(readyAdvance)
	if got := h.readiness(); got != metricsStoreNotReady {
		t.Fatalf("/metrics after the database file was deleted:\n%s\nwant\n%s", got, metricsStoreNotReady)
	}
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 503 {
		t.Errorf("readyz after the database file was deleted: %d %s; want 503", st, raw)
	}
	// It does not recover by itself (a restart after restoring the file
	// does): still not ready at the next check.
	clk.Advance(readyAdvance)
	if got := h.readiness(); got != metricsStoreNotReady {
		t.Fatalf("/metrics later:\n%s\nwant\n%s", got, metricsStoreNotReady)
	}
}

// TestRekeyShownInMetrics: after herald rekey moved the store to a key the
// node lacks, /metrics shows the node not ready with the reason
// "encryption_key", and ready again once the store is rekeyed back to the
// node's key (/readyz recovers the same way). A /readyz probe's result is
// what the next scrape shows.
func TestRekeyShownInMetrics(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) { c.Clock = clk })
	if got := h.readiness(); got != metricsReady {
		t.Fatalf("/metrics of a ready node:\n%s\nwant\n%s", got, metricsReady)
	}
	rekeyBack := rekeyAway(t, h, oldKey)
	clk.Advance(readyAdvance)
	if got := h.readiness(); got != metricsKeyNotReady {
		t.Fatalf("/metrics after a rekey to a key the node lacks:\n%s\nwant\n%s", got, metricsKeyNotReady)
	}
	rekeyBack()
	clk.Advance(readyAdvance)
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 200 {
		t.Fatalf("readyz after the rekey back: %d %s; want 200", st, raw)
	}
	if got := h.readiness(); got != metricsReady {
		t.Fatalf("/metrics after the rekey back:\n%s\nwant\n%s", got, metricsReady)
	}
}
