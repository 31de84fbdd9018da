package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// BenchmarkPublishAPIPostgres measures POST /v1/events through the API on
// a PostgreSQL store (HERALD_TEST_POSTGRES_URL; skipped without it), an
// uncatalogued type and one endpoint, no engine: the catalog check, the
// group commit and the answer. Serial: one publish at a time (ns/op is a
// publish's latency). Concurrent: 16 publishers (ns/op is the inverse of
// the throughput); p50_ms and p99_ms are the publishes' latencies.
func BenchmarkPublishAPIPostgres(b *testing.B) {
	dbURL := pgSchema(b)
	st, err := postgres.Open(b.Context(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	s, err := api.New(api.Config{Store: st, URLs: anyURLs{}, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	call := func(path, body string, want int) {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+adminKey)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != want {
			b.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
		}
	}
	call("/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook"}`, http.StatusCreated)
	body := `{"tenant":"acme","type":"order.placed","data":{"order_id":"ord_` + strings.Repeat("x", 400) + `","amount":1299}}`
	report := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99_ms")
		}
	}
	b.Run("Serial", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			call("/v1/events", body, http.StatusAccepted)
			lat = append(lat, time.Since(t0))
		}
		report(b, lat)
	})
	b.Run("Concurrent", func(b *testing.B) {
		var (
			mu  sync.Mutex
			lat = make([]time.Duration, 0, b.N)
		)
		b.SetParallelism(8) // 16 publishers on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			for pb.Next() {
				t0 := time.Now()
				call("/v1/events", body, http.StatusAccepted)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
		report(b, lat)
	})
}

// anyURLs accepts every endpoint URL (nothing is delivered here).
type anyURLs struct{}

func (anyURLs) CheckURL(raw string) (*url.URL, error) { return url.Parse(raw) }
