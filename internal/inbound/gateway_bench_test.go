package inbound_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// BenchmarkGateway measures POST /in/{source_id} on the handler itself
// (no network, no forwarding): 32 concurrent providers sending
// GitHub-signed 512-byte requests, each verified, deduped and durably
// stored (group commit, synchronous=FULL) before its 200. It reports
// requests/s and the handler's CPU is what -cpuprofile shows.
func BenchmarkGateway(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const secret = "bench-github-secret"
	now := time.Now().UTC()
	cfg := fmt.Appendf(nil, `{"scheme":"github","secrets":[%q]}`, secret)
	src, err := s.CreateSource(ctx, store.CreateSourceParams{
		Source: store.Source{ID: "src_bench", Name: "bench", Config: cfg, CreatedAt: now, UpdatedAt: now},
		Endpoint: store.Endpoint{ID: "ep_bench", URL: "http://127.0.0.1:1/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now},
	})
	if err != nil {
		b.Fatal(err)
	}
	g := inbound.New(inbound.Config{Store: s})
	mux := http.NewServeMux()
	mux.Handle("/in/{source_id}", g)
	pad := bytes.Repeat([]byte("x"), 472)
	const providers = 32
	var n, failed atomic.Int64
	per := b.N/providers + 1
	b.ResetTimer()
	var wg sync.WaitGroup
	for range providers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				i := n.Add(1)
				body := fmt.Appendf(nil, `{"action":"bench","n":%d,"pad":"%s"}`, i, pad)
				m := hmac.New(sha256.New, []byte(secret))
				m.Write(body)
				req := httptest.NewRequest("POST", "/in/"+src.ID, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "push")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("d-%d", i))
				req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					if failed.Add(1) == 1 {
						b.Errorf("status %d: %s", w.Code, w.Body)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "requests/s")
}
