package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// pgSchema creates a throwaway schema on HERALD_TEST_POSTGRES_URL and
// returns a URL whose connections use it; the test is skipped when the
// variable is unset.
func pgSchema(t testing.TB) string {
	t.Helper()
	base := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("HERALD_TEST_POSTGRES_URL is not set; skipping the PostgreSQL test (CI sets it)")
	}
	var b [6]byte
	rand.Read(b[:])
	name := "herald_api_" + hex.EncodeToString(b[:])
	exec := func(sql string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	exec("CREATE SCHEMA " + name)
	t.Cleanup(func() { exec("DROP SCHEMA IF EXISTS " + name + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	return u.String()
}

// TestRevokedKeyRefusedOnSecondNode: two nodes (each its own API server,
// key cache and connection pool) share one PostgreSQL database. A key in
// use on node 2 is revoked through node 1; node 2 refuses it within one
// second (its cache keeps a key's record at most 500 ms).
func TestRevokedKeyRefusedOnSecondNode(t *testing.T) {
	dbURL := pgSchema(t)
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	node := func() *api.Server {
		st, err := postgres.Open(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := api.New(api.Config{Store: st, URLs: eg, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	n1, n2 := node(), node()
	call := func(s *api.Server, key, method, path, body string) (int, string) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	st, raw := call(n1, adminKey, "POST", "/v1/api-keys", `{"name":"ci","role":"viewer","tenant":"acme"}`)
	if st != 201 {
		t.Fatalf("create key: %d %s", st, raw)
	}
	key := raw[strings.Index(raw, `"key":"`)+7:]
	key = key[:strings.Index(key, `"`)]
	id := raw[strings.Index(raw, `"id":"`)+6:]
	id = id[:strings.Index(id, `"`)]
	if st, raw := call(n2, key, "GET", "/v1/endpoints", ""); st != 200 { // node 2 now holds the key in its cache
		t.Fatalf("node 2 before the revocation: %d %s", st, raw)
	}
	if st, raw := call(n1, adminKey, "DELETE", "/v1/api-keys/"+id, ""); st != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", st, raw)
	}
	revoked := time.Now()
	if st, _ := call(n1, key, "GET", "/v1/endpoints", ""); st != 401 {
		t.Fatalf("node 1 right after the revocation: %d, want 401", st)
	}
	for {
		st, raw := call(n2, key, "GET", "/v1/endpoints", "")
		if st == 401 {
			if !strings.Contains(raw, "revoked") {
				t.Fatalf("node 2 refuses with %s, want the key named revoked", raw)
			}
			t.Logf("node 2 refused the revoked key %v after the revocation", time.Since(revoked).Round(time.Millisecond))
			return
		}
		if st != 200 {
			t.Fatalf("node 2: %d %s", st, raw)
		}
		if time.Since(revoked) > time.Second {
			t.Fatalf("node 2 still accepts the key %v after its revocation", time.Since(revoked))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crossNodeHold is the shared state of two nodes' stores in
// TestConcurrentRevocationsKeepAnAdminAcrossNodes: the first read of the
// admin keys (keepAnAdmin's) returns its result only once the other
// node's revocation has either read the keys too or started waiting for
// the admin lock.
type crossNodeHold struct {
	mu       sync.Mutex
	reads    int
	lockers  int
	released chan struct{}
	once     sync.Once
}

func (h *crossNodeHold) release() { h.once.Do(func() { close(h.released) }) }

type crossNodeStore struct {
	store.Store
	h *crossNodeHold
}

func (c crossNodeStore) ListAPIKeys(ctx context.Context, kind string, p store.ListParams) (store.Page[store.APIKey], error) {
	pg, err := c.Store.ListAPIKeys(ctx, kind, p)
	c.h.mu.Lock()
	c.h.reads++
	first := c.h.reads == 1
	c.h.mu.Unlock()
	if first {
		<-c.h.released // the keys as read before the other node's check
	} else {
		c.h.release()
	}
	return pg, err
}

func (c crossNodeStore) Capabilities() store.Capabilities {
	caps := c.Store.Capabilities()
	if caps.AdminLock != nil {
		caps.AdminLock = crossNodeLocker{caps.AdminLock, c.h}
	}
	return caps
}

type crossNodeLocker struct {
	store.AdminKeyLocker
	h *crossNodeHold
}

func (l crossNodeLocker) LockAdminKeys(ctx context.Context) (func(), error) {
	l.h.mu.Lock()
	l.h.lockers++
	second := l.h.lockers == 2
	l.h.mu.Unlock()
	if second {
		l.h.release() // the other node holds the lock, or is about to take it
	}
	return l.AdminKeyLocker.LockAdminKeys(ctx)
}

// TestConcurrentRevocationsKeepAnAdminAcrossNodes: with no HERALD_API_KEY,
// two nodes sharing a PostgreSQL database revoke the last two lasting
// admin keys (each node the other's key) at the same instant. The first
// check's read is held until the other node has read the keys too or
// waits for the admin lock: without a lock across nodes both checks saw
// two admins and both revocations passed, leaving none. Now one answers
// 204, the other 409, and one admin key is left.
func TestConcurrentRevocationsKeepAnAdminAcrossNodes(t *testing.T) {
	dbURL := pgSchema(t)
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := &crossNodeHold{released: make(chan struct{})}
	var first *postgres.Store
	node := func() *api.Server {
		st, err := postgres.Open(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if first == nil {
			first = st
		}
		s, err := api.New(api.Config{Store: crossNodeStore{st, h}, URLs: eg, Tester: okTester{}, AuthFailureBurst: 1 << 20,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	nodes := [2]*api.Server{node(), node()}
	ids, secrets := twoAdminKeys(t, first)
	revokeEachOther(t, first, func(i int) int { // node i revokes the key of the other node's caller
		return revokeKey(t.Context(), nodes[i], secrets[i], ids[1-i])
	})
}

// TestRevokeWithAPoolOfOne: the admin lock does not take a connection of
// the store's pool, which the check and the revocation it covers need:
// with pool_max_conns=1 a revocation held the pool's only connection for
// the lock and waited for itself until its deadline (503 after 5 s; found
// by review).
func TestRevokeWithAPoolOfOne(t *testing.T) {
	dbURL := strings.Replace(pgSchema(t), "pool_max_conns=4", "pool_max_conns=1", 1)
	if !strings.Contains(dbURL, "pool_max_conns=1") {
		t.Fatalf("no pool of one in %s", dbURL)
	}
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := api.New(api.Config{Store: st, URLs: eg, Tester: okTester{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ids, secrets := twoAdminKeys(t, st)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	started := time.Now()
	if code := revokeKey(ctx, srv, secrets[0], ids[1]); code != http.StatusNoContent {
		t.Fatalf("revocation with a pool of one connection: %d after %v; want 204", code, time.Since(started).Round(time.Millisecond))
	}
}
