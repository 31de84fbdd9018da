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
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
)

// changingStore answers GetSource with the configuration current when the
// call started; the first call, once it has read, waits for release before
// it returns (a read that was under way when the source changed).
type changingStore struct {
	store.Store
	mu      sync.Mutex
	config  []byte
	calls   int
	read    chan struct{} // closed once the first call has read
	release chan struct{}
}

func (s *changingStore) set(config []byte) {
	s.mu.Lock()
	s.config = config
	s.mu.Unlock()
}

func (s *changingStore) GetSource(_ context.Context, id string) (store.Source, error) {
	s.mu.Lock()
	cfg := s.config
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.read)
		<-s.release
	}
	return store.Source{ID: id, Config: cfg}, nil
}

func (s *changingStore) PublishEvent(_ context.Context, p store.PublishParams) (store.PublishResult, error) {
	return store.PublishResult{Event: p.Event, Created: true}, nil
}

// TestForgetDuringARead: a source changed (Forget) while a request was
// reading its old configuration is not cached with that old configuration:
// the change applies at once on the node that made it (docs/inbound.md), so
// the next request verifies with the new secret, not the one removed.
func TestForgetDuringARead(t *testing.T) {
	const oldSecret, newSecret = "old-github-secret-0123", "new-github-secret-0123"
	st := &changingStore{config: fmt.Appendf(nil, `{"scheme":"github","secrets":[%q]}`, oldSecret), read: make(chan struct{}), release: make(chan struct{})}
	g := inbound.New(inbound.Config{Store: st, CacheTTL: time.Hour, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serveGitHubWith(g, "/in/src_forget", oldSecret, "d-1") }()
	<-st.read
	// The old secret is removed (PATCH), and the API tells the gateway.
	st.set(fmt.Appendf(nil, `{"scheme":"github","secrets":[%q]}`, newSecret))
	g.Forget("src_forget")
	close(st.release)
	if w := <-done; w.Code != 200 {
		t.Fatalf("the request under way: %d %s", w.Code, w.Body)
	}
	if w := serveGitHubWith(g, "/in/src_forget", oldSecret, "d-2"); w.Code != 401 {
		t.Errorf("signed with the removed secret after the change: %d %s, want 401", w.Code, w.Body)
	}
	if w := serveGitHubWith(g, "/in/src_forget", newSecret, "d-3"); w.Code != 200 {
		t.Errorf("signed with the new secret after the change: %d %s, want 200", w.Code, w.Body)
	}
}

// serveGitHubWith serves g one GitHub webhook signed with secret.
func serveGitHubWith(g *inbound.Gateway, path, secret, delivery string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.Handle("/in/{source_id}", g)
	body := []byte(`{"action":"opened","delivery":"` + delivery + `"}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	return w
}
