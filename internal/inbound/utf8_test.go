package inbound_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// publishRecorder is a store that keeps what PublishEvent answered.
type publishRecorder struct {
	*sqlite.Store
	answered []store.PublishResult
}

func (s *publishRecorder) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	res, err := s.Store.PublishEvent(ctx, p)
	if err == nil {
		s.answered = append(s.answered, res)
	}
	return res, err
}

// TestHeaderBytesNotUTF8AgreeEverywhere: a provider header value with
// bytes that are not UTF-8 (net/http accepts any byte from 0x80 in a
// value) is normalised by the gateway, each such byte to U+FFFD, before
// the event is built: the publish's answer, the stored event and the
// claimed delivery an attempt sends all carry the same UTF-8 value, the
// one the store's JSON would have turned it into. A UTF-8 value is kept
// as it is.
func TestHeaderBytesNotUTF8AgreeEverywhere(t *testing.T) {
	ctx := t.Context()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &publishRecorder{Store: sq}
	const secret = "utf8-test-github-secret"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src, err := st.CreateSource(ctx, store.CreateSourceParams{
		Source: store.Source{ID: "src_utf8", Name: "utf8", Config: fmt.Appendf(nil, `{"scheme":"github","secrets":[%q]}`, secret), CreatedAt: now, UpdatedAt: now},
		Endpoint: store.Endpoint{ID: "ep_utf8", URL: "http://127.0.0.1:1/", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/in/{source_id}", inbound.New(inbound.Config{Store: st, Now: func() time.Time { return now }}))
	body := []byte(`{"action":"opened"}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	req := httptest.NewRequest("POST", "/in/"+src.ID, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "d-1")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	req.Header.Set("X-Latin1", "caf\xe9 \xff\xfe")      // ISO 8859-1 and stray bytes
	req.Header.Set("X-Surrogate", "a\xed\xa0\x80b")     // a UTF-16 surrogate encoded in UTF-8: not UTF-8
	req.Header.Set("X-Utf8", "caf\u00e9 \u2603 \ufffd") // UTF-8, U+FFFD itself included
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if w.Code != http.StatusOK || len(st.answered) != 1 {
		t.Fatalf("POST: %d %s, %d publishes; want 200 and one", w.Code, w.Body, len(st.answered))
	}
	want := map[string]string{
		"X-Latin1":    "caf\ufffd \ufffd\ufffd",
		"X-Surrogate": "a\ufffd\ufffd\ufffdb",
		"X-Utf8":      "caf\u00e9 \u2603 \ufffd",
	}
	// What the store's JSON makes of the raw values: the same.
	raw, _ := json.Marshal(map[string]string{"X-Latin1": "caf\xe9 \xff\xfe", "X-Surrogate": "a\xed\xa0\x80b"})
	var viaJSON map[string]string
	if err := json.Unmarshal(raw, &viaJSON); err != nil || viaJSON["X-Latin1"] != want["X-Latin1"] || viaJSON["X-Surrogate"] != want["X-Surrogate"] {
		t.Fatalf("encoding/json gives %q (%v); the test's expectation %q is not the store's", viaJSON, err, want)
	}
	answered := st.answered[0].Event
	stored, err := st.GetEvent(ctx, answered.ID)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := st.ClaimDeliveries(ctx, store.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d, %v; want the forward", len(claims), err)
	}
	for view, h := range map[string]map[string]string{"the publish's answer": answered.Headers, "the stored event": stored.Headers, "the claimed attempt": claims[0].Event.Headers} {
		for k, v := range want {
			if h[k] != v {
				t.Errorf("%s: %s = %q; want %q", view, k, h[k], v)
			}
		}
		for k, v := range h {
			if !utf8.ValidString(v) {
				t.Errorf("%s: %s = %q is not UTF-8", view, k, v)
			}
		}
	}
	if !maps.Equal(answered.Headers, stored.Headers) || !maps.Equal(stored.Headers, claims[0].Event.Headers) {
		t.Errorf("headers differ:\nanswered %q\nstored   %q\nclaimed  %q", answered.Headers, stored.Headers, claims[0].Event.Headers)
	}
}
