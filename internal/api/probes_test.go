package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// storeAway is a store whose Ping and event catalog fail while down is
// set (the readiness check's and GET /contract's reads).
type storeAway struct {
	*pingToggle
}

func (s storeAway) ListEventTypes(ctx context.Context, p store.ListParams) (store.Page[store.EventType], error) {
	if s.down.Load() {
		return store.Page[store.EventType]{}, fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	return s.Store.ListEventTypes(ctx, p)
}

// TestProbeAnswersAreDeclared: GET /healthz, /readyz and /contract answer
// as /openapi.json declares them, checked by an OpenAPI 3.1 validator on
// the real answers, the refusals too (503 problems while the store is
// away); each answer is the same with a key of any kind as without one,
// since they are public.
func TestProbeAnswersAreDeclared(t *testing.T) {
	st := openStore(t)
	eg := newEgress(t)
	away := storeAway{&pingToggle{Store: st}}
	srv, err := api.New(api.Config{Store: away, URLs: eg, Metrics: metrics.New(nil), Logger: slog.New(slog.DiscardHandler),
		Contract: struct {
			Delivery string   `json:"delivery"`
			Order    string   `json:"order"`
			CIDRs    []string `json:"allowed_cidrs"`
		}{"at least once", "not guaranteed", []string{}}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, key string) (*http.Response, string) {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Result(), rec.Body.String()
	}
	_, raw := get("/openapi.json", "")
	d, err := libopenapi.NewDocument([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errors.Join(errs...))
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("/openapi.json is not valid OpenAPI 3.1: %s: %s", e.Message, e.Reason)
		}
	}
	check := func(path string, want int) {
		t.Helper()
		resp, body := get(path, "")
		if resp.StatusCode != want {
			t.Fatalf("GET %s = %d %s, want %d", path, resp.StatusCode, body, want)
		}
		resp.Body = io.NopCloser(strings.NewReader(body))
		if ok, verrs := v.ValidateHttpResponse(httptest.NewRequest("GET", path, nil), resp); !ok {
			for _, e := range verrs {
				t.Errorf("GET %s (%d): not as /openapi.json declares: %s: %s", path, want, e.Message, e.Reason)
			}
		}
		for _, key := range []string{"not-a-key", api.APIKeyPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
			if r, b := get(path, key); r.StatusCode != want || b != body {
				t.Errorf("GET %s with key %q: %d %s, want the same %d answer as without one", path, key, r.StatusCode, b, want)
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/contract"} {
		check(p, 200)
	}
	away.down.Store(true)
	check("/healthz", 200)
	check("/readyz", 503)
	check("/contract", 503)
}
