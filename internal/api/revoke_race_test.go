package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// heldListStore holds the first ListAPIKeys after armed (keepAnAdmin's
// read of the admin keys) until release is called; the next one calls it.
type heldListStore struct {
	store.Store
	armed    chan struct{} // closed: hold the next read
	released chan struct{}
	first    sync.Once
	once     sync.Once
}

func (h *heldListStore) release() { h.once.Do(func() { close(h.released) }) }

func (h *heldListStore) ListAPIKeys(ctx context.Context, kind string, p store.ListParams) (store.Page[store.APIKey], error) {
	select {
	case <-h.armed:
		held := false
		h.first.Do(func() { held = true })
		if held {
			<-h.released
		} else {
			h.release() // a second check ran while the first was held
		}
	default:
	}
	return h.Store.ListAPIKeys(ctx, kind, p)
}

// TestConcurrentRevocationsKeepAnAdmin: with no HERALD_API_KEY, the two
// last lasting admin keys revoke each other at the same instant. The first
// revocation's check is held until the second has reached its own check
// (or waits for the first to finish); one revocation answers 204, the
// other 409, and one admin key is left.
func TestConcurrentRevocationsKeepAnAdmin(t *testing.T) {
	sq := openStore(t)
	st := &heldListStore{Store: sq, armed: make(chan struct{}), released: make(chan struct{})}
	eg := newEgress(t)
	srv, err := api.New(api.Config{Store: st, URLs: eg, Tester: okTester{}, AuthFailureBurst: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	arrived := 0
	srv.SetAtRevokeLock(func() { // the second revocation waits at the lock: let the first go on
		mu.Lock()
		defer mu.Unlock()
		if arrived++; arrived == 2 {
			st.release()
		}
	})
	ids, secrets := twoAdminKeys(t, sq)
	close(st.armed)
	revokeEachOther(t, sq, func(i int) int { return revokeKey(t.Context(), srv, secrets[i], ids[1-i]) })
}

// twoAdminKeys stores two lasting admin keys in st and returns their ids
// and secrets.
func twoAdminKeys(t *testing.T, st store.Store) (ids, secrets [2]string) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	secrets = [2]string{"admin-secret-one-0123456789abcdef", "admin-secret-two-0123456789abcdef"}
	for i := range ids {
		k, err := st.CreateAPIKey(t.Context(), store.APIKey{ID: store.NewID("key"), Kind: store.KeyKindAPIKey, Name: "admin", Role: store.RoleAdmin,
			Hash: api.HashAPIKey(secrets[i]), CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = k.ID
	}
	return ids, secrets
}

// revokeKey revokes API key id through srv with the key secret, and
// returns the HTTP status.
func revokeKey(ctx context.Context, srv *api.Server, secret, id string) int {
	r := httptest.NewRequestWithContext(ctx, "DELETE", "/v1/api-keys/"+id, nil)
	r.RemoteAddr = "192.0.2.1:40000"
	r.Header.Set("Authorization", "Bearer "+secret)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, r)
	return rec.Code
}

// revokeEachOther runs revoke(0) and revoke(1) at once (each the HTTP
// status of one admin revoking the other's key) and checks that one
// answered 204, the other 409, and that st has one usable admin key left.
func revokeEachOther(t *testing.T, st store.Store, revoke func(i int) int) {
	t.Helper()
	var wg sync.WaitGroup
	var codes [2]int
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = revoke(i)
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusNoContent:
			ok++
		case http.StatusConflict:
			refused++
		}
	}
	admins, err := api.UsableAdminKeys(t.Context(), st, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || refused != 1 || len(admins) != 1 {
		t.Errorf("revocations answered %v, %d usable admin keys left; want one 204, one 409 and one admin key", codes, len(admins))
	}
}
