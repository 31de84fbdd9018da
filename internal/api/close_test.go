package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// touchGate holds TouchAPIKeys (the background write of a key's last use)
// until release is closed.
type touchGate struct {
	store.Store
	entered, release chan struct{}
}

func (g *touchGate) TouchAPIKeys(ctx context.Context, used map[string]time.Time) error {
	close(g.entered)
	<-g.release
	return g.Store.TouchAPIKeys(ctx, used)
}

// TestCloseWaitsForLastUseWrites: an API key's last use is written in the
// background; Server.Close returns only once that write ended, so the
// store is never closed under it.
func TestCloseWaitsForLastUseWrites(t *testing.T) {
	st := openStore(t)
	key, err := api.NewSecretKey(api.APIKeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateAPIKey(t.Context(), store.APIKey{ID: store.NewID("key"), Kind: store.KeyKindAPIKey, Name: "k",
		Role: store.RoleAdmin, Hash: api.HashAPIKey(key), CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	gate := &touchGate{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	eg := newEgress(t)
	srv, err := api.New(api.Config{Store: gate, URLs: eg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/endpoints: %d %s", rec.Code, rec.Body)
	}
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the key's last use was never written")
	}
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while the last-use write was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate.release)
	<-closed
}
