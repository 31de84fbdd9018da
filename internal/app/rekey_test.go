package app_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/webhook"
)

// pgDatabase creates a fresh database on HERALD_TEST_POSTGRES_URL's server
// (skipping without it) and drops it at cleanup.
func pgDatabase(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if admin == "" {
		t.Skip("HERALD_TEST_POSTGRES_URL is not set")
	}
	conn, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "herald_rekey_" + hex.EncodeToString(rnd[:])
	if _, err := conn.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := sql.Open("pgx", admin); err == nil {
			c.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			c.Close()
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	q := u.Query()
	q.Set("pool_max_conns", "6")
	u.RawQuery = q.Encode()
	return u.String()
}

func newKey(t *testing.T) string {
	var k [32]byte
	rand.Read(k[:])
	return base64.StdEncoding.EncodeToString(k[:])
}

// TestRekeyWhileTwoPostgresNodesDeliver: a database written under key OLD;
// two nodes run with HERALD_ENCRYPTION_KEY=NEW and
// HERALD_ENCRYPTION_KEY_PREVIOUS=OLD and deliver while publishers publish
// and `herald rekey` (store.Rekey, as the command runs it) moves every
// sealed value to NEW. Every delivery arrives signed with its endpoint's
// secret at its first attempt (no delivery fails to sign). Afterwards both
// nodes restart with NEW alone and deliver; a node with OLD alone is
// refused.
func TestRekeyWhileTwoPostgresNodesDeliver(t *testing.T) {
	t.Parallel()
	db := pgDatabase(t)
	oldKey, nk := newKey(t), newKey(t)

	var (
		mu       sync.Mutex
		secrets  = map[string]string{} // path → endpoint secret
		verified atomic.Int64
		bad      atomic.Int64
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		secret := secrets[r.URL.Path]
		mu.Unlock()
		v := webhook.Verifier{Secrets: []string{secret}}
		// The endpoint's custom header (sealed at rest, rekeyed too)
		// arrives intact.
		if got := r.Header.Get("X-Receiver-Token"); got != "token"+r.URL.Path {
			bad.Add(1)
			t.Errorf("delivery to %s: X-Receiver-Token %q", r.URL.Path, got)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := v.Verify(r.Header, body); err != nil || r.Header.Get("X-Delivery-Attempt") != "1" {
			bad.Add(1)
			t.Errorf("delivery to %s: %v (attempt %s)", r.URL.Path, err, r.Header.Get("X-Delivery-Attempt"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		verified.Add(1)
	}))
	defer recv.Close()

	node := func(key string, previous ...string) *herald {
		return startHerald(t, func(c *app.Config) {
			c.DB, c.EncryptionKey, c.PreviousEncryptionKeys = db, key, previous
			c.RetrySchedule = []time.Duration{time.Hour} // a failed attempt would show as a second attempt
		})
	}
	const endpoints = 8
	first := node(oldKey)
	for i := 0; i < endpoints; i++ {
		path := "/ep" + string(rune('a'+i))
		var ep endpointResp
		if st, raw := first.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": recv.URL + path,
			"headers": map[string]string{"X-Receiver-Token": "token" + path}}, &ep); st != http.StatusCreated {
			t.Fatalf("create endpoint: %d %s", st, raw)
		}
		mu.Lock()
		secrets[path] = ep.Secret
		mu.Unlock()
	}
	first.stop()

	a, b := node(nk, oldKey), node(nk, oldKey)
	var published atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range []*herald{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"rekey.tick","data":{}}`, nil); st == http.StatusAccepted {
					published.Add(1)
				} else {
					t.Errorf("publish: %d %s", st, raw)
					return
				}
			}
		}()
	}
	for published.Load() < 50 {
		time.Sleep(5 * time.Millisecond)
	}
	// herald rekey, as the command runs it, while the nodes deliver.
	old, _ := secretbox.ParseKey(oldKey)
	nkb, _ := secretbox.ParseKey(nk)
	oldBox, _ := secretbox.New(old)
	newBox, _ := secretbox.New(nkb)
	st, err := postgres.Open(t.Context(), db, postgres.WithSecretBox(secretbox.NewKeyring(newBox, oldBox)))
	if err != nil {
		t.Fatal(err)
	}
	stats, err := store.Rekey(t.Context(), st, oldBox, newBox)
	if err != nil {
		t.Fatalf("rekey: %v", err)
	}
	if stats.Rewritten != 2*endpoints+1 { // the endpoints' secrets and header values, and the key check
		t.Errorf("rekey rewrote %d values, want %d", stats.Rewritten, 2*endpoints+1)
	}
	again, err := store.Rekey(t.Context(), st, oldBox, newBox)
	if err != nil || again.Rewritten != 0 || again.Current != 2*endpoints+1 {
		t.Errorf("second rekey (resume): %+v, %v; want everything already current", again, err)
	}
	st.Close()
	for target := published.Load() + 50; published.Load() < target; {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	want := published.Load() * endpoints
	deadline := time.Now().Add(60 * time.Second)
	for verified.Load() < want && bad.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if verified.Load() != want || bad.Load() != 0 {
		t.Fatalf("verified %d of %d deliveries, %d bad", verified.Load(), want, bad.Load())
	}
	a.stop()
	b.stop()

	// The old key is gone: a node holding only it is refused ...
	if _, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: oldKey, APIKey: testAPIKey}); !errors.Is(err, store.ErrWrongKey) {
		t.Fatalf("node with the old key only: %v, want ErrWrongKey", err)
	}
	// ... and both nodes restart with the new key alone and deliver.
	a, b = node(nk), node(nk)
	a.publish("acme", "after.rekey", `{}`)
	b.publish("acme", "after.rekey", `{}`)
	want += 2 * endpoints
	for verified.Load() < want && bad.Load() == 0 && time.Now().Before(deadline.Add(30*time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	if verified.Load() != want || bad.Load() != 0 {
		t.Fatalf("after restarting with the new key only: verified %d of %d, %d bad", verified.Load(), want, bad.Load())
	}
}

// TestWrongEncryptionKeyOnPostgres: a PostgreSQL database written with one
// key refuses a node with another, and the refusal names the rule without
// sending the operator to a key file (PostgreSQL has none: the key is
// HERALD_ENCRYPTION_KEY, the same on every node).
func TestWrongEncryptionKeyOnPostgres(t *testing.T) {
	db := pgDatabase(t)
	start := func(key string) (*app.Main, error) {
		return app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: key, APIKey: testAPIKey})
	}
	m, err := start(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	_, err = start(newKey(t))
	if !errors.Is(err, store.ErrWrongKey) {
		t.Fatalf("node with another key: %v, want ErrWrongKey", err)
	}
	if msg := err.Error(); strings.Contains(msg, "restore the key file") || !strings.Contains(msg, "HERALD_ENCRYPTION_KEY") || !strings.Contains(msg, "every node") {
		t.Fatalf("refusal %q: want it to name HERALD_ENCRYPTION_KEY and every node, not to restore a key file", msg)
	}
}
