package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/buildinfo"
)

// TestProductionCommands drives version, migrate status, backup, restore
// and rekey as an operator would, on a SQLite database with a key file.
func TestProductionCommands(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	dir := t.TempDir()
	db := filepath.Join(dir, "herald.db")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	out, _, err := execHerald(t, "", "version", "--json")
	var info buildinfo.Info
	if err != nil || json.Unmarshal([]byte(out), &info) != nil || info.Version != buildinfo.Version || info.GoVersion == "" {
		t.Fatalf("version --json: %q, %v", out, err)
	}
	out, _, err = execHerald(t, "", "migrate", "status", "--db", "sqlite:"+db)
	if err != nil || !strings.Contains(out, "pending:           []") {
		t.Fatalf("migrate status: %q, %v", out, err)
	}

	backup := filepath.Join(dir, "backup.db")
	if _, _, err := execHerald(t, "", "backup", "--db", "sqlite:"+db, "--to", backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	if _, _, err := execHerald(t, "", "backup", "--db", "sqlite:"+db, "--to", backup); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("backup over an existing file: %v", err)
	}
	if _, _, err := execHerald(t, "", "backup", "--db", "postgres://x@127.0.0.1/db", "--to", backup+"2"); err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("backup of PostgreSQL: %v, want a pointer to pg_dump", err)
	}

	restored := filepath.Join(dir, "restored.db")
	t.Setenv("HERALD_ENCRYPTION_KEY", newTestKey())
	if _, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+restored); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("restore with another key: %v, want refusal", err)
	}
	if _, err := os.Stat(restored); !os.IsNotExist(err) {
		t.Fatalf("a refused restore wrote %s", restored)
	}
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	if _, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+restored, "--key-file", db+".key"); err != nil {
		t.Fatalf("restore: %v", err)
	}

	nk := newTestKey()
	out, _, err = execHerald(t, "", "rekey", "--db", "sqlite:"+restored, "--new-key", nk)
	if err != nil || !strings.Contains(out, "1 values re-encrypted") {
		t.Fatalf("rekey: %q, %v", out, err)
	}
	if k, _ := os.ReadFile(restored + ".key"); strings.TrimSpace(string(k)) != nk {
		t.Fatalf("the key file holds %q after rekey, want the new key", k)
	}
	// The restored, rekeyed database starts with the new key alone.
	m, err = app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + restored, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("start after rekey: %v", err)
	}
	m.Close()
}

func newTestKey() string {
	k := make([]byte, 32)
	rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}
