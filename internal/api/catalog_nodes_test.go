package api_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// TestCatalogChangeEnforcedOnSecondNode: two nodes (each its own API
// server, catalog cache and connection pool) share one PostgreSQL
// database. Node 2 has cached an event type's entry (first "not
// catalogued", then version 1); each change made through node 1 is
// enforced by node 2's very next publish, and a publish node 2's cached
// entry would refuse is accepted once node 1 changed the catalog.
func TestCatalogChangeEnforcedOnSecondNode(t *testing.T) {
	dbURL := pgSchema(t)
	open := func() store.Store {
		st, err := postgres.Open(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	catalogAcrossNodes(t, open(), open())
}

// TestCatalogChangeEnforcedOnSecondServer: the same on SQLite, two API
// servers (two catalog caches) on one store.
func TestCatalogChangeEnforcedOnSecondServer(t *testing.T) {
	st := openStore(t)
	catalogAcrossNodes(t, st, st)
}

func catalogAcrossNodes(t *testing.T, st1, st2 store.Store) {
	eg := newEgress(t)
	node := func(st store.Store, mode string) *api.Server {
		s, err := api.New(api.Config{Store: st, URLs: eg, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)}, CatalogMode: mode,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	n1, n2, strict2 := node(st1, ""), node(st2, ""), node(st2, api.CatalogStrict)
	call := func(s *api.Server, method, path, body string, want int) string {
		t.Helper()
		return adminCall(t, s, method, path, body, want)
	}
	publish := func(s *api.Server, typ, data string, want int) string {
		t.Helper()
		return call(s, "POST", "/v1/events", `{"tenant":"acme","type":"`+typ+`","data":`+data+`}`, want)
	}

	// Node 2 caches file.updated as not catalogued.
	publish(n2, "file.updated", `{"x":1}`, 202)
	publish(n2, "file.updated", `{"x":2}`, 202)
	// Catalogued through node 1: node 2's next publish is checked
	// against version 1's schema.
	call(n1, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,
		"schema":{"type":"object","required":["file_id"],"properties":{"file_id":{"type":"string"}}}}]}`, 201)
	if out := publish(n2, "file.updated", `{"x":3}`, 422); !strings.Contains(out, "file_id") {
		t.Fatalf("node 2 refuses with %s, want the missing file_id named", out)
	}
	if out := publish(n2, "file.updated", `{"file_id":"f_1"}`, 202); !strings.Contains(out, `"version":1`) {
		t.Fatalf("node 2 publishes %s, want version 1", out)
	}
	// Version 2 added through node 1: node 2 (which cached version 1)
	// checks against it at once.
	call(n1, "POST", "/v1/event-types/file.updated/versions", `{"version":2,
		"schema":{"type":"object","required":["file_id","name"],"properties":{"file_id":{"type":"string"},"name":{"type":"string"}}}}`, 201)
	publish(n2, "file.updated", `{"file_id":"f_1"}`, 422)
	if out := publish(n2, "file.updated", `{"file_id":"f_1","name":"a"}`, 202); !strings.Contains(out, `"version":2`) {
		t.Fatalf("node 2 publishes %s, want version 2", out)
	}

	// The other way round: node 2 in strict mode refuses an uncatalogued
	// type (and caches that); once node 1 catalogued it, node 2 accepts it.
	publish(strict2, "invoice.paid", `{"invoice_id":"i_1"}`, 422)
	call(n1, "POST", "/v1/event-types", `{"name":"invoice.paid","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	publish(strict2, "invoice.paid", `{"invoice_id":"i_1"}`, 202)
	// And a schema loosened through node 1 accepts what node 2's cached
	// version refused.
	publish(strict2, "file.updated", `{"file_id":"f_1"}`, 422)
	call(n1, "POST", "/v1/event-types/file.updated/versions", `{"version":3,"schema":{"type":"object"}}`, 201)
	publish(strict2, "file.updated", `{"file_id":"f_1"}`, 202)
}

// adminCall serves one request with the admin key on s and returns the
// answer's body; the test fails unless the status is want.
func adminCall(t *testing.T, s *api.Server, method, path, body string, want int) string {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+adminKey)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != want {
		t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, w.Code, w.Body.String(), want)
	}
	return w.Body.String()
}
