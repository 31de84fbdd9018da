package app_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestSwappedEncryptionKeysAreStale: a node given the two key variables
// swapped (HERALD_ENCRYPTION_KEY the key herald rekey moved the database
// away from, HERALD_ENCRYPTION_KEY_PREVIOUS the database's current key)
// opened the key check value with its previous key, passed the stale-key
// check, started, and sealed new values under the retired key, which the
// nodes holding only the current key cannot open. Herald rekey records
// the key it retires; a node whose current key is one of those while the
// database's key is one it holds only as previous is stale: its sealing
// writes answer 503 naming the rule (as a node lacking the key), /readyz
// 503, and a start with the keys swapped is refused naming the rule. The
// right order (current = the database's key, previous = the retired one)
// starts, as in step 2 of the rotation.
func TestSwappedEncryptionKeysAreStale(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	newK := newKey(t)
	var db string
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) {
		c.Clock = clk
		c.PreviousEncryptionKeys = []string{newK} // swapped: the new key given as the previous one
		db = c.DB
	})
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 200 {
		t.Fatalf("readyz before the rekey: %d %s", st, raw)
	}
	// herald rekey --new-key <new> run elsewhere (step 3 of the rotation).
	ok, _ := secretbox.ParseKey(oldKey)
	oldBox, _ := secretbox.New(ok)
	nk, _ := secretbox.ParseKey(newK)
	newBox, _ := secretbox.New(nk)
	if _, err := store.Rekey(context.Background(), h.m.Store().Capabilities().Sealed, secretbox.NewKeyring(oldBox), newBox); err != nil {
		t.Fatalf("rekey: %v", err)
	}
	clk.Advance(11 * time.Second) // the key check runs again
	before := sealedSnapshot(t, h)
	st, raw := h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"`+newReceiver(t, 200).URL+`"}`, nil)
	if st != 503 || !strings.Contains(string(raw), "sealing key is older than the database") || !strings.Contains(string(raw), "HERALD_ENCRYPTION_KEY_PREVIOUS") {
		t.Errorf("create endpoint on a node with the keys swapped: %d %s; want 503 naming the rule", st, raw)
	}
	if after := sealedSnapshot(t, h); strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("a refused write changed sealed values")
	}
	// /readyz says the case precisely (it said "… do not open with this
	// node's encryption key (rekeyed?)", as for a node lacking the key),
	// and so does herald_not_ready's help.
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 503 || !strings.Contains(string(raw), "retired by herald rekey") ||
		!strings.Contains(string(raw), "HERALD_ENCRYPTION_KEY_PREVIOUS") || strings.Contains(string(raw), "rekeyed?") {
		t.Errorf("readyz on a node with the keys swapped: %d %s; want 503 naming the retired current key and the swapped variables", st, raw)
	}
	if _, raw := h.call("GET", "/metrics", nil, nil); !strings.Contains(helpLine(string(raw), "herald_not_ready"), "retired") {
		t.Errorf("herald_not_ready's help does not name the retired (swapped) key case: %q", helpLine(string(raw), "herald_not_ready"))
	}
	h.stop()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := app.Config{Addr: "127.0.0.1:0", DB: db, APIKey: testAPIKey, Logger: quiet, EncryptionKey: oldKey, PreviousEncryptionKeys: []string{newK}}
	if m, err := app.New(context.Background(), cfg); err == nil {
		m.Close()
		t.Error("a start with the keys swapped succeeded")
	} else if !strings.Contains(err.Error(), "retired") || !strings.Contains(err.Error(), "HERALD_ENCRYPTION_KEY_PREVIOUS") {
		t.Errorf("a start with the keys swapped: %v; want a refusal naming the rule", err)
	}
	cfg.EncryptionKey, cfg.PreviousEncryptionKeys = newK, []string{oldKey}
	m, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a start with the keys in order: %v", err)
	}
	m.Close()
}

// helpLine is the # HELP line of the metric name in exposition.
func helpLine(exposition, name string) string {
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, "# HELP "+name+" ") {
			return l
		}
	}
	return ""
}
