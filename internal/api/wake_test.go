package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// handedOffStore answers PublishEvent with a created event of pending due
// deliveries, handedOff of them handed off to the engine as it committed.
type handedOffStore struct {
	publishOnlyStore
	pending, handedOff int
}

func (s handedOffStore) PublishEvent(_ context.Context, p store.PublishParams) (store.PublishResult, error) {
	ev := p.Event
	ev.CreatedAt = p.Now
	return store.PublishResult{Event: ev, Created: true, Deliveries: s.pending, Pending: s.pending, HandedOff: s.handedOff}, nil
}

// TestPublishWakesTheEngineForUnclaimedDeliveries: a publish wakes the
// delivery engine only when its event left due deliveries that were not
// handed off to the engine as it committed (PublishResult.HandedOff).
func TestPublishWakesTheEngineForUnclaimedDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name               string
		pending, handedOff int
		wake               bool
	}{
		{"due, none handed off", 2, 0, true},
		{"due, some handed off", 2, 1, true},
		{"due, all handed off", 2, 2, false},
		{"nothing due", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var woken atomic.Int32
			s, err := New(Config{Store: handedOffStore{pending: tc.pending, handedOff: tc.handedOff}, URLs: anyURL{},
				AdminKeyHashes: [][]byte{HashAPIKey("k")}, Notify: func() { woken.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(`{"tenant":"acme","type":"order.placed","data":{"n":1}}`))
			r.Header.Set("Authorization", "Bearer k")
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusAccepted {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got := woken.Load() > 0; got != tc.wake {
				t.Fatalf("engine woken %d times, want woken: %v", woken.Load(), tc.wake)
			}
		})
	}
}
