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
	"syscall"
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

// newBackup makes a Herald SQLite database with a key file in a new
// directory and backs it up; it returns the backup path and the key file.
func newBackup(t *testing.T) (backup, keyFile string) {
	t.Helper()
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	dir := t.TempDir()
	db := filepath.Join(dir, "herald.db")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	backup = filepath.Join(dir, "backup.db")
	if _, _, err := execHerald(t, "", "backup", "--db", "sqlite:"+db, "--to", backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	return backup, db + ".key"
}

// TestRestoreRefusesADifferentKeyFileBesideTheTarget: a key file already
// beside the target that holds another key than the one checked would make
// the restored database refuse to start, so restore refuses and writes
// nothing; the key used is named when HERALD_ENCRYPTION_KEY and --key-file
// disagree.
func TestRestoreRefusesADifferentKeyFileBesideTheTarget(t *testing.T) {
	backup, keyFile := newBackup(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "herald.db")
	stale := newTestKey()
	if err := os.WriteFile(target+".key", []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target, "--key-file", keyFile)
	if err == nil || !strings.Contains(err.Error(), target+".key") || !strings.Contains(err.Error(), "does not hold the key checked") {
		t.Fatalf("restore beside a different key file: %q, %v; want a refusal naming the key file", out, err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore wrote %s", target)
	}
	if k, _ := os.ReadFile(target + ".key"); string(k) != stale {
		t.Fatalf("a refused restore changed the key file to %q", k)
	}

	// The same key beside the target (another encoding of it) is accepted.
	good, _ := os.ReadFile(keyFile)
	if err := os.WriteFile(target+".key", good, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target, "--key-file", keyFile); err != nil || !strings.Contains(out, "key checked: --key-file") {
		t.Fatalf("restore beside the same key file: %q, %v", out, err)
	}
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + target, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("start after restore: %v", err)
	}
	m.Close()

	// HERALD_ENCRYPTION_KEY and --key-file disagree: the environment is
	// used (as by herald serve) and the warning says so.
	t.Setenv("HERALD_ENCRYPTION_KEY", strings.TrimSpace(string(good)))
	other := filepath.Join(t.TempDir(), "other.key")
	os.WriteFile(other, []byte(newTestKey()), 0o600)
	target2 := filepath.Join(t.TempDir(), "herald.db")
	out, errOut, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target2, "--key-file", other)
	if err != nil || !strings.Contains(out, "key checked: HERALD_ENCRYPTION_KEY") || !strings.Contains(errOut, "hold different keys; checking with HERALD_ENCRYPTION_KEY") {
		t.Fatalf("restore with disagreeing keys: out %q, stderr %q, %v", out, errOut, err)
	}
}

// TestBackupFileIsOwnerOnly: the backup holds every event and the sealed
// secrets, so it is created 0600 even under the usual umask 022.
func TestBackupFileIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	backup, _ := newBackup(t)
	info, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Fatalf("backup file mode %v, want -rw------- (0600)", perm)
	}
}
