package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// flakyMeta is a store whose key check fails for a reason other than the
// key: the read of the key's check value fails (metaErr), or blocks until
// the readiness deadline after a slow Ping (pingDelay).
type flakyMeta struct {
	store.Store
	pingDelay time.Duration
	metaErr   error // nil: block until ctx ends
}

func (f *flakyMeta) Ping(ctx context.Context) error {
	time.Sleep(f.pingDelay)
	return f.Store.Ping(ctx)
}

func (f *flakyMeta) EnsureMeta(ctx context.Context, k, v string) (string, error) {
	if f.metaErr != nil {
		return "", f.metaErr
	}
	<-ctx.Done()
	return "", ctx.Err()
}

// A store that fails or is too slow while the encryption key is checked
// makes the node not ready for reason "store", not "encryption_key",
// whose alert tells the operator to restart with another key (found by
// review).
func TestStoreErrorInKeyCheckIsNotAnEncryptionKeyReason(t *testing.T) {
	for _, fm := range []*flakyMeta{
		{metaErr: fmt.Errorf("%w: connection reset by peer", store.ErrUnavailable)},
		{pingDelay: 1500 * time.Millisecond},
	} {
		st := openStore(t)
		box, err := secretbox.New(make([]byte, secretbox.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		fm.Store = st
		eg := newEgress(t)
		srv, err := api.New(api.Config{Store: fm, URLs: eg, Metrics: metrics.New(nil), Logger: slog.New(slog.DiscardHandler),
			KeyCheck: func(ctx context.Context) error { return store.CheckKey(ctx, fm, box) }})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		if strings.Contains(body, `herald_not_ready{reason="encryption_key"} 1`) || !strings.Contains(body, `herald_not_ready{reason="store"} 1`) {
			t.Errorf("metaErr %v, ping delay %v: want not ready for reason store; got\n%s", fm.metaErr, fm.pingDelay, grepLines(body, "herald_not_ready"))
		}
		rec = httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != 503 || strings.Contains(rec.Body.String(), "encryption key") {
			t.Errorf("/readyz = %d %s; want 503 naming the store", rec.Code, rec.Body.String())
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

// pingToggle is a store whose Ping fails while down is set.
type pingToggle struct {
	store.Store
	down atomic.Bool
}

func (p *pingToggle) Ping(ctx context.Context) error {
	if p.down.Load() {
		return fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	return p.Store.Ping(ctx)
}

// TestReadyzProbesDoNotFloodTheLog: a load balancer probing /readyz every
// second while the store is away gets 503 each time, and the log gets one
// warning naming the reason, then one line when the node is ready again,
// not one per probe.
func TestReadyzProbesDoNotFloodTheLog(t *testing.T) {
	st := openStore(t)
	eg := newEgress(t)
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	logs := &testutil.SyncBuffer{}
	ps := &pingToggle{Store: st}
	srv, err := api.New(api.Config{Store: ps, URLs: eg, Metrics: metrics.New(nil), Now: clock,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	probe := func(n, want int) {
		t.Helper()
		for range n {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			if rec.Code != want {
				t.Fatalf("/readyz = %d %s, want %d", rec.Code, rec.Body, want)
			}
			mu.Lock()
			now = now.Add(time.Second)
			mu.Unlock()
		}
	}
	probe(5, 200)
	ps.down.Store(true)
	probe(120, 503)
	ps.down.Store(false)
	probe(5, 200)
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "ready") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `level=WARN msg="not ready" reason=store`) || !strings.Contains(lines[0], "connection refused") ||
		!strings.Contains(lines[1], `level=INFO msg="ready again" after=store not_ready_for=2m0s`) {
		t.Errorf("log after 120 failing probes and recovery (%d lines):\n%s\nwant one warning naming the reason, then one \"ready again\"", len(lines), strings.Join(lines, "\n"))
	}
}
