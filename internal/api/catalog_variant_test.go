package api_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// listCountingStore counts the reads of the whole catalog.
type listCountingStore struct {
	store.Store
	lists atomic.Int64
}

func (s *listCountingStore) ListEventTypes(ctx context.Context, p store.ListParams) (store.Page[store.EventType], error) {
	s.lists.Add(1)
	return s.Store.ListEventTypes(ctx, p)
}

// TestUncataloguedPublishReadsNoCatalog: the check that an uncatalogued
// name is not a case variant of a catalogued one reads names by their
// folded form (Store.EventTypeCaseVariant), never the whole catalog with
// its schemas: publishing new uncatalogued names (permissive mode), or
// one name again and again in strict mode (each refusal re-reads
// afresh), reads the catalog no time, and a case variant is still
// refused naming the catalogued type.
func TestUncataloguedPublishReadsNoCatalog(t *testing.T) {
	sq := openStore(t)
	st := &listCountingStore{Store: sq}
	eg := newEgress(t)
	node := func(mode string) *api.Server {
		s, err := api.New(api.Config{Store: st, URLs: eg, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)}, CatalogMode: mode,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	permissive, strict := node(""), node(api.CatalogStrict)
	call := func(s *api.Server, method, path, body string, want int) string {
		t.Helper()
		return adminCall(t, s, method, path, body, want)
	}
	for i := range 5 {
		call(permissive, "POST", "/v1/event-types", `{"name":"cat`+strconv.Itoa(i)+`.changed","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	}
	before := st.lists.Load()
	for i := range 20 {
		call(permissive, "POST", "/v1/events", `{"tenant":"acme","type":"new`+strconv.Itoa(i)+`.other","data":{}}`, 202)
		call(strict, "POST", "/v1/events", `{"tenant":"acme","type":"same.other","data":{}}`, 422)
	}
	if out := call(permissive, "POST", "/v1/events", `{"tenant":"acme","type":"Cat3.CHANGED","data":{}}`, 422); !strings.Contains(out, "differs from catalogued cat3.changed only in case") {
		t.Errorf("a case variant: %s; want it refused naming cat3.changed", out)
	}
	if n := st.lists.Load() - before; n != 0 {
		t.Errorf("41 publishes of uncatalogued names read the whole catalog %d times; want none", n)
	}
}
