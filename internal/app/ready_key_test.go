package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestReadinessFailsAfterRekeyToAKeyTheNodeLacks: `herald rekey` (store.Rekey,
// as the command runs it) moves the sealed values to a key a running node
// does not hold: that node can no longer open its endpoints' secrets, so it
// delivers nothing, and its /readyz must answer 503 instead of staying
// ready (the key check value is opened again by the probe). Publishes need
// no secret: the node still accepts them (202), for the nodes holding the
// key to deliver (docs/production.md). KeyCheckInterval of 1 ns makes every
// probe re-check; the caching itself is TestReadyzKeyCheckIsCached
// (internal/api).
func TestReadinessFailsAfterRekeyToAKeyTheNodeLacks(t *testing.T) {
	t.Parallel()
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) { c.KeyCheckInterval = time.Nanosecond })
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 200 {
		t.Fatalf("readyz before rekey: %d %s", st, raw)
	}
	h.createEndpoint("acme", newReceiver(t, 200).URL) // a publish fans out to it

	rekeyAway(t, h, oldKey)
	st, raw := h.call("GET", "/readyz", nil, nil)
	if st != 503 {
		t.Fatalf("readyz after a rekey to a key the node lacks: %d %s; want 503", st, raw)
	}
	if !strings.Contains(string(raw), "encryption key") {
		t.Errorf("readyz problem %s does not name the encryption key", raw)
	}
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"after.rekey","data":{}}`, nil); st != 202 {
		t.Errorf("publish to a node lacking the new key: %d %s; want 202 (a publish opens no secret)", st, raw)
	}
}

// startHeraldKeyed starts Herald with mod applied and returns it with its
// encryption key (base64): a new one on SQLite, the database's on
// PostgreSQL.
func startHeraldKeyed(t *testing.T, mod func(*app.Config)) (*herald, string) {
	t.Helper()
	key := newKey(t)
	h := startHerald(t, func(c *app.Config) {
		if c.EncryptionKey == "" {
			c.EncryptionKey = key
		} else {
			key = c.EncryptionKey // PostgreSQL: the database's key
		}
		mod(c)
	})
	return h, key
}

// rekeyAway rekeys h's store from oldKey (base64, the node's) to a new key
// the node lacks, as `herald rekey` run elsewhere would, and returns the
// rekey back.
func rekeyAway(t *testing.T, h *herald, oldKey string) (back func()) {
	t.Helper()
	ok, _ := secretbox.ParseKey(oldKey)
	oldBox, _ := secretbox.New(ok)
	nk, _ := secretbox.ParseKey(newKey(t))
	newBox, _ := secretbox.New(nk)
	sealed := h.m.Store().Capabilities().Sealed
	if sealed == nil {
		t.Fatalf("%T declares no Capabilities.Sealed", h.m.Store())
	}
	if _, err := store.Rekey(context.Background(), sealed, secretbox.NewKeyring(oldBox), newBox); err != nil {
		t.Fatalf("rekey: %v", err)
	}
	return func() {
		t.Helper()
		if _, err := store.Rekey(context.Background(), sealed, secretbox.NewKeyring(newBox), oldBox); err != nil {
			t.Fatalf("rekey back: %v", err)
		}
	}
}
