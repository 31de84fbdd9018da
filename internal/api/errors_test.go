package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// failingStore answers GetEndpoint with err while err is set.
type failingStore struct {
	store.Store
	mu  sync.Mutex
	err error
}

func (f *failingStore) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return store.Endpoint{}, err
	}
	return f.Store.GetEndpoint(ctx, id)
}

// TestStoreErrorCodes: each code of a store error answers its status in the
// one mapping (store.Code.HTTPStatus through Server.problem), with the
// store's message for the codes a client can act on (never the name of the
// operation that ran), a decoding bug answering 500 logged as a bug, and a
// database outage 503.
func TestStoreErrorCodes(t *testing.T) {
	fs := &failingStore{}
	logs := &testutil.SyncBuffer{}
	w := newWorld(t, func(c *api.Config) {
		fs.Store = c.Store
		c.Store = fs
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	var decode error = &json.SyntaxError{Offset: 1}
	cases := []struct {
		name   string
		err    error
		status int
		detail string // the problem's detail, exactly
		log    string // in the log ("" = nothing logged)
	}{
		{"not found", fmt.Errorf("get endpoint %s: %w", w.epA, store.ErrNotFound), 404, "endpoint " + w.epA + " not found", ""},
		{"conflict", fmt.Errorf("publish: %w", store.Errorf(store.CodeConflict, "event id inv-1 already exists with a different type or data")),
			409, "event id inv-1 already exists with a different type or data", ""},
		{"invalid", fmt.Errorf("list events: %w", store.BadCursor("x")),
			400, `cursor "x" was not issued by this store`, ""},
		{"limit", store.Errorf(store.CodeLimit, "tenant acme already has 2 endpoints"), 422, "tenant acme already has 2 endpoints", ""},
		{"outage", fmt.Errorf("get endpoint: %w: %w", store.ErrUnavailable, errors.New("dial tcp: connection refused")),
			503, "the store is unavailable; retry later (a publish: retry with the same id or Idempotency-Key, it will not be stored twice)", "connection refused"},
		{"unclassified database error", errors.New("driver: bad connection"), 503, "", "bad connection"},
		{"decoding bug", fmt.Errorf("get endpoint: %w", store.Internal(fmt.Errorf("endpoint x event_types: %w", decode))),
			500, "internal error (logged); please report it", "bug: internal store error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs.mu.Lock()
			fs.err = c.err
			fs.mu.Unlock()
			defer func() { fs.mu.Lock(); fs.err = nil; fs.mu.Unlock() }()
			logs.Take()
			status, body := w.call(adminKey, "GET", "/v1/endpoints/"+w.epA, "")
			var p struct {
				Status int
				Detail string
			}
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			if status != c.status || p.Status != c.status {
				t.Errorf("status %d (problem %d), want %d: %s", status, p.Status, c.status, body)
			}
			if c.detail != "" && p.Detail != c.detail {
				t.Errorf("detail %q, want %q", p.Detail, c.detail)
			}
			got := logs.Take()
			if c.log == "" && got != "" {
				t.Errorf("logged %q, want nothing", got)
			}
			if c.log != "" && !strings.Contains(got, c.log) {
				t.Errorf("log %q, want it to contain %q", got, c.log)
			}
		})
	}
}
