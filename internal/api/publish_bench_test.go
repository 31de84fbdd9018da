package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// publishOnlyStore answers PublishEvent as a store that fanned the event
// out to one endpoint; every other method is unused here.
type publishOnlyStore struct{ store.Store }

func (publishOnlyStore) PublishEvent(_ context.Context, p store.PublishParams) (store.PublishResult, error) {
	ev := p.Event
	ev.CreatedAt = p.Now
	return store.PublishResult{Event: ev, Created: true, Deliveries: 1, Pending: 1}, nil
}

// GetEventType answers that the type is not catalogued (the default
// catalog mode accepts it).
func (publishOnlyStore) GetEventType(context.Context, string) (store.EventType, error) {
	return store.EventType{}, store.ErrNotFound
}

// EventTypeCaseVariant answers that no case variant of the type is
// catalogued.
func (publishOnlyStore) EventTypeCaseVariant(context.Context, string) (string, error) {
	return "", nil
}

type anyURL struct{}

func (anyURL) CheckURL(raw string) (*url.URL, error) { return url.Parse(raw) }

// BenchmarkPublishAPI measures the API layer of POST /v1/events alone
// (authentication, JSON checks, schema validation, envelope, answer) with
// a store that does nothing, on a 512-byte body like `herald bench
// publish`'s.
func BenchmarkPublishAPI(b *testing.B) {
	s, err := New(Config{Store: publishOnlyStore{}, URLs: anyURL{}, AdminKeyHashes: [][]byte{HashAPIKey("k")}})
	if err != nil {
		b.Fatal(err)
	}
	data := `{"order_id":"ord_` + strings.Repeat("x", 400) + `","amount":1299,"currency":"eur","links":{"self":"https://example.com/o/1"}}`
	body := `{"tenant":"acme","type":"order.placed","data":` + data + `}`
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer k")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusAccepted {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
