package app_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// TestStartSealsClearHeaderValues: endpoint header values an earlier
// version stored in clear are sealed when a node starts, through the
// capability the store declares (store.Capabilities.HeaderSealer), and
// still read back as they were.
func TestStartSealsClearHeaderValues(t *testing.T) {
	sqliteOnly(t)
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	key := newKey(t)
	cfg := app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + dbPath, EncryptionKey: key, APIKey: testAPIKey, Dev: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ep, err := m.Store().CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: store.Endpoint{
		ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/hook", State: store.EndpointEnabled,
		Headers:   map[string]string{"Authorization": "Bearer sealed-at-create"},
		Secrets:   []store.Secret{{Value: "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", CreatedAt: now}},
		CreatedAt: now, UpdatedAt: now,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// What an earlier version wrote: the value in clear.
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const clear = `{"Authorization":"Bearer clear-credential-3c9e"}`
	if _, err := db.Exec("UPDATE endpoints SET headers = ? WHERE id = ?", clear, ep.ID); err != nil {
		t.Fatal(err)
	}

	logs := &testutil.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	m, err = app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if out := logs.String(); !strings.Contains(out, "sealed the custom header values") || !strings.Contains(out, "endpoints=1") {
		t.Errorf("start log %q: want the sealing of 1 endpoint", out)
	}
	var raw string
	if err := db.QueryRow("SELECT headers FROM endpoints WHERE id = ?", ep.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "clear-credential") {
		t.Errorf("stored headers after the start: %s, want the value sealed", raw)
	}
	got, err := m.Store().GetEndpoint(t.Context(), ep.ID)
	if err != nil || got.Headers["Authorization"] != "Bearer clear-credential-3c9e" {
		t.Errorf("GetEndpoint after the start: headers %v, %v; want the value as it was written", got.Headers, err)
	}
}
