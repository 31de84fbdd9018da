package inbound_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

// typeStore is an errStore that records the type of the event published.
type typeStore struct {
	errStore
	typ *string
}

func (s typeStore) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	*s.typ = p.Event.Type
	return s.errStore.PublishEvent(ctx, p)
}

// TestHeraldSchemeTypeFromSignedBody: a herald source names the event
// after the signed envelope's top-level "type", never after X-Event-Type,
// which X-Signature does not cover: a validly signed delivery replayed
// with an edited X-Event-Type keeps its type (the header is ignored, not
// refused: the envelope is what was signed, and a Herald sender always
// sends the two alike).
func TestHeraldSchemeTypeFromSignedBody(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := fmt.Appendf(nil, `{"scheme":"herald","secrets":[%q]}`, secret)
	envelope := []byte(`{"id":"evt_1","type":"invoice.paid","tenant":"acme","occurred_at":"2026-01-02T03:04:05Z","data":{}}`)
	for _, tc := range []struct {
		name   string
		body   []byte
		header []string // X-Event-Type values sent
		want   string
	}{
		{"header agrees", envelope, []string{"invoice.paid"}, "herald.invoice.paid"},
		{"header edited", envelope, []string{"account.deleted"}, "herald.invoice.paid"},
		{"header sent twice", envelope, []string{"account.deleted", "invoice.paid"}, "herald.invoice.paid"},
		{"no header", envelope, nil, "herald.invoice.paid"},
		{"body names no type, header does", []byte(`{"id":"evt_2","data":{}}`), []string{"account.deleted"}, "herald.event"},
		{"body not JSON, header names a type", []byte(`payload=1`), []string{"account.deleted"}, "herald.event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var typ string
			g := inbound.New(inbound.Config{Store: typeStore{errStore{source: store.Source{Config: cfg}}, &typ},
				Now: func() time.Time { return now }})
			mux := http.NewServeMux()
			mux.Handle("/in/{source_id}", g)
			req := httptest.NewRequest("POST", "/in/src_types", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Signature", fmt.Sprintf("t=%d,v1=%s", now.Unix(), webhook.SignHerald(secret, now.Unix(), tc.body)))
			req.Header.Set("X-Event-Id", "evt_1")
			req.Header.Set("X-Delivery-Attempt", strconv.Itoa(1))
			for _, v := range tc.header {
				req.Header.Add("X-Event-Type", v)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if typ != tc.want {
				t.Errorf("published as %q, want %q (from the signed body)", typ, tc.want)
			}
		})
	}
}
