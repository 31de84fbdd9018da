package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/buildinfo"
	"github.com/herald-webhooks/herald/internal/store"
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
	// rekey overwrote the key file: the backup taken before opens only
	// with the old key, which the operator must keep.
	if !strings.Contains(out, "backups taken before this rekey open only with the old key") {
		t.Errorf("rekey does not say that earlier backups need the old key: %q", out)
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

// TestRestoreRefusesLeftoverFilesBesideTheTarget: SQLite applies a -wal
// (or rolls back a -journal) it finds beside a database when it opens it,
// whichever database wrote it, so a restore next to the old database's
// -wal would start as the old database (or a corrupt mix of both). The
// restore refuses, naming the file, and writes nothing.
func TestRestoreRefusesLeftoverFilesBesideTheTarget(t *testing.T) {
	backup, keyFile := newBackup(t)
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		t.Run(suffix, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "herald.db")
			leftover := []byte("the old database's " + suffix)
			if err := os.WriteFile(target+suffix, leftover, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target, "--key-file", keyFile)
			if err == nil || !strings.Contains(err.Error(), target+suffix) || !strings.Contains(err.Error(), "nothing was written") {
				t.Fatalf("restore beside a leftover %s: %v; want a refusal naming it", suffix, err)
			}
			for _, p := range []string{target, target + ".key"} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Fatalf("a refused restore wrote %s", p)
				}
			}
			if b, _ := os.ReadFile(target + suffix); !bytes.Equal(b, leftover) {
				t.Fatalf("a refused restore changed %s", target+suffix)
			}
		})
	}
}

// TestRestoreRunsTheFullIntegrityCheck: a backup whose index disagrees
// with its table (rows missing from it) passes SQLite's quick_check, which
// does not compare indexes with tables; restored, the node's queries through
// that index would miss those rows. The restore runs integrity_check, as
// docs/production.md says, and refuses it.
func TestRestoreRunsTheFullIntegrityCheck(t *testing.T) {
	backup, keyFile := newBackup(t)
	db, err := sql.Open("sqlite", "file:"+backup)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at) VALUES ('acme~e1', 'acme', 'a.b', 0, x'7b7d', 'f', 0)`,
		// The index's definition no longer matches what it holds.
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = 'CREATE INDEX events_tenant ON events (type, id)' WHERE name = 'events_tenant'`,
	} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	target := filepath.Join(t.TempDir(), "herald.db")
	_, _, err = execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target, "--key-file", keyFile)
	if err == nil || !strings.Contains(err.Error(), "integrity check") || !strings.Contains(err.Error(), "events_tenant") {
		t.Fatalf("restore of a backup whose index misses rows: %v; want a refusal naming the index", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore wrote %s", target)
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

// TestBackupRemovesItsInterruptedPartialFile: an interrupted backup leaves
// its copy under FILE.partial (never FILE); running the same backup again
// removes that file, says so, and completes.
func TestBackupRemovesItsInterruptedPartialFile(t *testing.T) {
	backup, _ := newBackup(t)
	db := filepath.Join(filepath.Dir(backup), "herald.db")
	to := filepath.Join(t.TempDir(), "again.db")
	if err := os.WriteFile(to+".partial", []byte("the first pages of an interrupted backup"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execHerald(t, "", "backup", "--db", "sqlite:"+db, "--to", to)
	if err != nil || !strings.Contains(errOut, "removed "+to+".partial, left by an interrupted backup") || !strings.Contains(out, "backed up") {
		t.Fatalf("backup beside an interrupted one's partial file: out %q, stderr %q, %v", out, errOut, err)
	}
	if _, err := os.Stat(to + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("%s.partial left: %v", to, err)
	}
	if info, err := os.Stat(to); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("backup %s: %v; want mode 0600", to, err)
	}
}

// TestRekeyWritesAPrivateKeyFile: rekey replaces the key file with the new
// key through a temporary file of its own, owner-only and synced before the
// rename: a file left at the former fixed temporary name (herald.db.key.new,
// mode 0644) gave the key file its mode, open to every user.
func TestRekeyWritesAPrivateKeyFile(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	db := filepath.Join(t.TempDir(), "herald.db")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := os.WriteFile(db+".key.new", []byte("left over\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nk := newTestKey()
	if out, _, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", nk); err != nil {
		t.Fatalf("rekey: %q, %v", out, err)
	}
	info, err := os.Stat(db + ".key")
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file after rekey: %v, %v; want mode 0600", info.Mode().Perm(), err)
	}
	if k, _ := os.ReadFile(db + ".key"); strings.TrimSpace(string(k)) != nk {
		t.Fatalf("the key file holds %q after rekey, want the new key", k)
	}
	if left, _ := filepath.Glob(db + ".key.new-*"); len(left) != 0 {
		t.Fatalf("temporary key files left behind: %v", left)
	}
}

// TestMigrateStatusChangesNothing: migrate status opens the database
// read-only: on a Herald database it reports without writing (the file's
// bytes are the same after), and on a SQLite file that is not Herald's, or a
// file that is not a database, it gives an error naming the file and
// creates no version table.
func TestMigrateStatusChangesNothing(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	dir := t.TempDir()
	db := filepath.Join(dir, "herald.db")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	before, _ := os.ReadFile(db)
	if out, _, err := execHerald(t, "", "migrate", "status", "--db", "sqlite:"+db); err != nil || !strings.Contains(out, "pending:           []") {
		t.Fatalf("migrate status: %q, %v", out, err)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Fatal("migrate status changed the Herald database file")
	}

	other := filepath.Join(dir, "other.db")
	writeNonHeraldSQLite(t, other)
	_, _, err = execHerald(t, "", "migrate", "status", "--db", "sqlite:"+other)
	if err == nil || !strings.Contains(err.Error(), "not a Herald one") || !strings.Contains(err.Error(), other) {
		t.Fatalf("migrate status of a non-Herald SQLite database: %v", err)
	}
	odb, _ := sql.Open("sqlite", "file:"+other+"?mode=ro")
	defer odb.Close()
	var n int
	if err := odb.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'goose_db_version'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("migrate status created goose's version table in a non-Herald database (%d, %v)", n, err)
	}

	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("these are not the tables you are looking for, not a database at all\n"), 0o600)
	_, _, err = execHerald(t, "", "migrate", "status", "--db", "sqlite:"+text)
	if err == nil || !strings.Contains(err.Error(), "not a readable SQLite database") {
		t.Fatalf("migrate status of a text file: %v", err)
	}
	if b, _ := os.ReadFile(text); !strings.HasPrefix(string(b), "these are") {
		t.Fatal("migrate status changed a text file")
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	if _, _, err = execHerald(t, "", "migrate", "status", "--db", "sqlite:"+empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("migrate status of an empty file: %v", err)
	}
}

// TestRekeyDetectsALiveSQLiteNode: with a key file, a running node read the
// old key from it at start, so rekey refuses while the database is open
// (nothing changes: the key file and the node keep working); once the node
// stopped it runs. With HERALD_ENCRYPTION_KEY it runs but warns.
func TestRekeyDetectsALiveSQLiteNode(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := filepath.Join(t.TempDir(), "herald.db")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	oldKey, _ := os.ReadFile(db + ".key")
	nk := newTestKey()
	_, _, err = execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", nk)
	if err == nil || !strings.Contains(err.Error(), "open by another process") {
		m.Close()
		t.Fatalf("rekey under a live node with a key file: %v; want a refusal", err)
	}
	if k, _ := os.ReadFile(db + ".key"); !bytes.Equal(k, oldKey) {
		t.Fatal("a refused rekey changed the key file")
	}
	m.Close()
	if out, _, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", nk); err != nil || !strings.Contains(out, "1 values re-encrypted") {
		t.Fatalf("rekey after the node stopped: %q, %v", out, err)
	}

	db2 := filepath.Join(t.TempDir(), "herald.db")
	k1 := newTestKey()
	m, err = app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db2, EncryptionKey: k1, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	t.Setenv("HERALD_ENCRYPTION_KEY", k1)
	out, errOut, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db2, "--new-key", newTestKey())
	if err != nil || !strings.Contains(errOut, "WARNING:") || !strings.Contains(errOut, "open by another process") {
		t.Fatalf("rekey under a live node with HERALD_ENCRYPTION_KEY: out %q, stderr %q, %v; want it to run with a warning", out, errOut, err)
	}
}

// TestRekeyWithPreviousKeyFromTheEnvironment: step 2 of the documented
// rotation on SQLite with keys in the environment (no key file): the old
// key comes from HERALD_ENCRYPTION_KEY_PREVIOUS alone, the database then
// opens with the new key, and no key file is written.
func TestRekeyWithPreviousKeyFromTheEnvironment(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := filepath.Join(t.TempDir(), "herald.db")
	oldKey, newKey := newTestKey(), newTestKey()
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, EncryptionKey: oldKey, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", oldKey)
	if out, errOut, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", newKey); err != nil || !strings.Contains(out, "re-encrypted") {
		t.Fatalf("rekey with HERALD_ENCRYPTION_KEY_PREVIOUS only: %q %q, %v", out, errOut, err)
	}
	if _, err := os.Stat(db + ".key"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rekey wrote a key file beside a database whose keys are in the environment (%v)", err)
	}
	m, err = app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, EncryptionKey: newKey, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatalf("the database does not open with the new key after rekey: %v", err)
	}
	m.Close()
}

// startNode runs a Herald node on a loopback port until the test ends and
// returns its base URL.
func startNode(t *testing.T) string {
	t.Helper()
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(t.TempDir(), "herald.db"), APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + m.Addr()
}

// TestHealthzCarriesTheVersionFields: /healthz answers every field of
// `herald version --json` with the same values, commit and build time
// included even when the build has none (empty, not missing).
func TestHealthzCarriesTheVersionFields(t *testing.T) {
	base := startNode(t)
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var health map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		t.Fatal(err)
	}
	out, _, err := execHerald(t, "", "version", "--json")
	var version map[string]any
	if err != nil || json.Unmarshal([]byte(out), &version) != nil {
		t.Fatalf("version --json: %q, %v", out, err)
	}
	for _, k := range []string{"version", "commit", "build_time", "modified", "go_version", "stores"} {
		if _, ok := version[k]; !ok {
			t.Errorf("version --json lacks %q: %s", k, out)
		}
	}
	for k, v := range version {
		if hv, ok := health[k]; !ok || fmt.Sprint(hv) != fmt.Sprint(v) {
			t.Errorf("/healthz %q = %v (present %v), version --json has %v", k, hv, ok, v)
		}
	}
}

// TestHealthcheckHonoursServer: herald healthcheck checks <--server>/readyz
// or <HERALD_SERVER>/readyz, like the other commands, before falling back to
// HERALD_ADDR's port on 127.0.0.1; a malformed --server is refused.
func TestHealthcheckHonoursServer(t *testing.T) {
	base := startNode(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()
	t.Setenv("HERALD_ADDR", deadAddr) // nothing listens there
	t.Setenv("HERALD_TLS_CERT", "")
	t.Setenv("HERALD_SERVER", "")
	if _, _, err := execHerald(t, "", "healthcheck"); err == nil {
		t.Fatalf("healthcheck of %s (nothing listening) passed", deadAddr)
	}
	if _, _, err := execHerald(t, "", "healthcheck", "--server", base); err != nil {
		t.Fatalf("healthcheck --server %s: %v", base, err)
	}
	t.Setenv("HERALD_SERVER", base+"/")
	if _, _, err := execHerald(t, "", "healthcheck"); err != nil {
		t.Fatalf("healthcheck with HERALD_SERVER=%s/: %v", base, err)
	}
	if _, _, err := execHerald(t, "", "healthcheck", "--server", "localhost:8080"); err == nil || !strings.Contains(err.Error(), "want a base URL") {
		t.Fatalf("healthcheck --server localhost:8080: %v; want a refusal", err)
	}
}

// TestRekeyWarnsAboutLivePostgresNodes: on PostgreSQL, rekey names the
// nodes heartbeating on the database in a warning on stderr (each must hold
// the new key already) and still runs.
func TestRekeyWarnsAboutLivePostgresNodes(t *testing.T) {
	admin := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if admin == "" {
		t.Skip("HERALD_TEST_POSTGRES_URL is not set")
	}
	conn, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // after the drop below (cleanups run last first; a defer would close it before)
	name := "herald_rekeywarn_" + strings.ToLower(strings.NewReplacer("+", "", "/", "", "=", "").Replace(newTestKey()[:10]))
	if _, err := conn.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop the test database %s: %v", name, err)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	db := u.String()
	k := newTestKey()
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: k, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Store().Capabilities().Membership.Heartbeat(t.Context(), store.Node{ID: "node_live1", HeartbeatInterval: time.Minute, AttemptTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERALD_ENCRYPTION_KEY", k)
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	out, errOut, err := execHerald(t, "", "rekey", "--db", db, "--new-key", newTestKey())
	if err != nil || !strings.Contains(out, "1 values re-encrypted") || !strings.Contains(errOut, "WARNING: 1 Herald node(s) are live") || !strings.Contains(errOut, "node_live1") {
		t.Fatalf("rekey with a live node: out %q, stderr %q, %v", out, errOut, err)
	}
}

// TestHealthcheckVerifiesRemoteCertificates: only a loopback address skips
// the certificate check (the node's certificate names its public host);
// any other host is verified.
func TestHealthcheckVerifiesRemoteCertificates(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "LocalHost": true, "127.9.9.9": true,
		"herald.example.com": false, "10.0.0.5": false, "localhost.example.com": false, "": false} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
	if _, _, err := execHerald(t, "", "healthcheck", "--url", "ftp://127.0.0.1/readyz"); err == nil || !strings.Contains(err.Error(), "--url") {
		t.Errorf("healthcheck --url ftp://…: %v; want an error naming --url", err)
	}
}

// TestRefusedStartsAndRestoresLeaveNothing: a start refused for its TLS
// pair or for a database directory every user may write to creates no
// database and no key file; restore refuses that directory before writing;
// backup refuses a SQLite file that is not Herald's.
func TestRefusedStartsAndRestoresLeaveNothing(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	_, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet,
		TLSCertFile: filepath.Join(dir, "missing.crt"), TLSKeyFile: filepath.Join(dir, "missing.key")})
	if err == nil {
		t.Fatal("a start with missing TLS files succeeded")
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	_, err = app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(open, "h.db"), APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Fatalf("a start in a world-writable directory: %v", err)
	}
	t.Setenv("HERALD_ENCRYPTION_KEY", newTestKey())
	if _, _, err := execHerald(t, "", "restore", "--from", filepath.Join(dir, "any.db"), "--db", "sqlite:"+filepath.Join(open, "r.db")); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Fatalf("restore into a world-writable directory: %v", err)
	}
	// An address that cannot be listened on (taken, or not an address).
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, addr := range []string{taken.Addr().String(), "nonsense"} {
		if _, err := app.New(t.Context(), app.Config{Addr: addr, DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet}); err == nil || !strings.Contains(err.Error(), "--addr "+addr) {
			t.Errorf("a start on %s: %v; want a refusal naming --addr", addr, err)
		}
	}
	for _, d := range []string{dir, open} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("refused starts and restores left files in %s: %v", d, entries)
		}
	}
	other := filepath.Join(t.TempDir(), "notes.db")
	writeNonHeraldSQLite(t, other)
	to := filepath.Join(t.TempDir(), "copy.db")
	if _, _, err := execHerald(t, "", "backup", "--db", "sqlite:"+other, "--to", to); err == nil || !strings.Contains(err.Error(), "not a Herald one") {
		t.Fatalf("backup of a non-Herald SQLite file: %v", err)
	}
	if _, err := os.Stat(to); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused backup left %s (%v)", to, err)
	}
}

// TestSymlinkedDatabaseUsesItsKeyFile: a --db naming a symbolic link to
// the database reads the key file beside the database (where the first
// start created it), not a new one beside the link.
func TestSymlinkedDatabaseUsesItsKeyFile(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	real := filepath.Join(t.TempDir(), "herald.db")
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + real, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	linkDir := t.TempDir()
	link := filepath.Join(linkDir, "h.db")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	m, err = app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + link, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatalf("start through a symbolic link to the database: %v", err)
	}
	m.Close()
	if _, err := os.Stat(link + ".key"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a key file was created beside the link (%v)", err)
	}
	// rekey through the link reads and rewrites the same key file.
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	if out, errOut, err := execHerald(t, "", "rekey", "--db", "sqlite:"+link, "--new-key", newTestKey()); err != nil || !strings.Contains(out, "re-encrypted") {
		t.Fatalf("rekey through the link: %q %q, %v", out, errOut, err)
	}
	if _, err := os.Stat(link + ".key"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rekey wrote a key file beside the link (%v)", err)
	}
	m, err = app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + real, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatalf("start after rekey through the link: %v", err)
	}
	m.Close()
}

// writeNonHeraldSQLite creates a SQLite database at path that is not
// Herald's (one table of its own).
func writeNonHeraldSQLite(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE notes (body TEXT)"); err != nil {
		t.Fatal(err)
	}
}

// TestKeywordValueDBRefused: a PostgreSQL keyword/value connection string
// ("host=… dbname=… password=…") given as --db is refused by herald serve
// and by every command that takes --db, with an error naming the rule and
// never the password, and nothing is created. It was taken for a SQLite
// path: serve created a database file named after it, password included,
// beside a generated admin key, logged the string, and ran on SQLite.
func TestKeywordValueDBRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HERALD_ENCRYPTION_KEY", newTestKey())
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	dsn := "host=127.0.0.1 port=5432 dbname=herald user=herald password=s3cret"
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "keyword/value") || !strings.Contains(err.Error(), "postgres://") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s with --db %q: %v; want a refusal naming the URL rule, without the password", what, dsn, err)
		}
	}
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: dsn, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		m.Close()
	}
	check("herald serve", err)
	_, _, err = execHerald(t, "", "migrate", "status", "--db", dsn)
	check("migrate status", err)
	_, _, err = execHerald(t, "", "backup", "--db", dsn, "--to", filepath.Join(dir, "copy.db"))
	check("backup", err)
	_, _, err = execHerald(t, "", "restore", "--db", dsn, "--from", filepath.Join(dir, "copy.db"))
	check("restore", err)
	_, _, err = execHerald(t, "", "rekey", "--db", dsn, "--new-key", newTestKey())
	check("rekey", err)
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("a refused --db left %d files behind, the first %q", len(entries), entries[0].Name())
	}
	// A SQLite file may still have such a name when it says so.
	if _, path, err := app.ParseDB("sqlite:" + dsn); err != nil || path != dsn {
		t.Errorf("ParseDB(sqlite:…) = %q, %v", path, err)
	}
}

// TestHealthcheckUsesTheHostOfHERALD_ADDR: a node listening on one address
// (HERALD_ADDR=127.0.0.2:PORT, or a private 10.0.0.5:8080 behind a proxy)
// is checked there, not on 127.0.0.1 where nothing listens (the healthcheck
// failed for a healthy node); an empty or unspecified host still means
// 127.0.0.1, and a HERALD_ADDR that is not HOST:PORT is refused naming it
// (it fell back to port 8080 without a word).
func TestHealthcheckUsesTheHostOfHERALD_ADDR(t *testing.T) {
	t.Setenv("HERALD_TLS_CERT", "")
	t.Setenv("HERALD_SERVER", "")
	ready := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.Write([]byte(`{"status":"ready"}`))
			return
		}
		http.NotFound(w, r)
	})
	serve := func(addr string) string {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr, err)
		}
		srv := &http.Server{Handler: ready}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	own := serve("127.0.0.2:0")
	t.Setenv("HERALD_ADDR", own)
	if _, _, err := execHerald(t, "", "healthcheck"); err != nil {
		t.Errorf("healthcheck with HERALD_ADDR=%s (a healthy node there): %v", own, err)
	}
	_, port, _ := net.SplitHostPort(serve("127.0.0.1:0"))
	for _, a := range []string{":" + port, "0.0.0.0:" + port, "[::]:" + port} {
		t.Setenv("HERALD_ADDR", a)
		if _, _, err := execHerald(t, "", "healthcheck"); err != nil {
			t.Errorf("healthcheck with HERALD_ADDR=%s (127.0.0.1:%s healthy): %v", a, port, err)
		}
	}
	t.Setenv("HERALD_ADDR", "bogus")
	if _, _, err := execHerald(t, "", "healthcheck"); err == nil || !strings.Contains(err.Error(), `HERALD_ADDR "bogus"`) {
		t.Errorf("healthcheck with HERALD_ADDR=bogus: %v; want a refusal naming it", err)
	}
}

// TestRestoreRefusesAnEmptyDatabasePath: --db sqlite: (or sqlite://)
// names no file. The restore refuses it before any work, naming the rule,
// and writes nothing (before, it checked and copied the backup into the
// working directory and failed only at the end).
func TestRestoreRefusesAnEmptyDatabasePath(t *testing.T) {
	backup, keyFile := newBackup(t)
	t.Chdir(t.TempDir())
	for _, db := range []string{"sqlite:", "sqlite://"} {
		_, _, err := execHerald(t, "", "restore", "--from", backup, "--db", db, "--key-file", keyFile)
		if err == nil || !strings.Contains(err.Error(), "names no database file") {
			t.Errorf("restore --db %s: %v; want a refusal naming the rule", db, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("a refused restore left files in the working directory: %v", entries)
	}
}

// TestRestoreMakesAnExistingKeyFilePrivate: a key file already beside the
// target that holds the right key is kept, but owner-only, as restore
// writes a new one (0600): it opens every secret of the restored
// database. A refused restore leaves its mode alone.
func TestRestoreMakesAnExistingKeyFilePrivate(t *testing.T) {
	backup, keyFile := newBackup(t)
	target := filepath.Join(t.TempDir(), "herald.db")
	good, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target+".key", good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target+".key", 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	// Refused (a -wal beside the target): nothing changes, the mode neither.
	if err := os.WriteFile(target+"-wal", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target, "--key-file", keyFile); err == nil {
		t.Fatal("a restore beside a -wal succeeded")
	}
	if info, err := os.Stat(target + ".key"); err != nil || info.Mode().Perm() != 0o644 {
		t.Fatalf("a refused restore changed the key file: %v, %v", info.Mode(), err)
	}
	os.Remove(target + "-wal")
	_, errOut, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target, "--key-file", keyFile)
	if err != nil {
		t.Fatalf("restore beside the same key file: %v", err)
	}
	info, err := os.Stat(target + ".key")
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the key file beside the restored database is %04o; want 0600", uint32(info.Mode().Perm()))
	}
	if !strings.Contains(errOut, target+".key") || !strings.Contains(errOut, "owner only") {
		t.Errorf("restore did not say it made the key file private: %q", errOut)
	}
	if k, _ := os.ReadFile(target + ".key"); !bytes.Equal(k, good) {
		t.Errorf("restore changed the key file's content")
	}
}

// TestRekeyRecordsTheRetiredKey: herald rekey records the key it moves
// the database away from, so a node started afterwards with the two key
// variables swapped (the retired key as HERALD_ENCRYPTION_KEY, the
// database's as HERALD_ENCRYPTION_KEY_PREVIOUS) is refused naming the
// rule instead of sealing under the retired key, and a rekey back to the
// retired key is refused (nodes holding it as current would be stale).
func TestRekeyRecordsTheRetiredKey(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := filepath.Join(t.TempDir(), "herald.db")
	oldKey, newKey := newTestKey(), newTestKey()
	cfg := app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, EncryptionKey: oldKey, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet}
	m, err := app.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", oldKey)
	if out, errOut, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", newKey); err != nil {
		t.Fatalf("rekey: %q %q, %v", out, errOut, err)
	}
	cfg.PreviousEncryptionKeys = []string{newKey}
	if m, err := app.New(t.Context(), cfg); err == nil {
		m.Close()
		t.Error("a start with the key variables swapped after rekey succeeded")
	} else if !strings.Contains(err.Error(), "retired by herald rekey") {
		t.Errorf("a start with the key variables swapped: %v; want a refusal naming the rule", err)
	}
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", newKey)
	if _, _, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", oldKey); err == nil || !strings.Contains(err.Error(), "--new-key was retired") {
		t.Errorf("rekey back to the retired key: %v; want a refusal naming the rule", err)
	}
	cfg.EncryptionKey, cfg.PreviousEncryptionKeys = newKey, nil
	m, err = app.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("the database does not open with the new key after the refusals: %v", err)
	}
	m.Close()
}

// TestDBPathRulesRefusedByEveryCommand: a SQLite path holding '?' or '#'
// (sqlite:h.db?mode=ro: Herald builds SQLite's URI itself and takes no
// parameters from --db), a whitespace-only path (sqlite:"   ") and a path
// with leading or trailing whitespace are refused by the one parser every
// command uses (app.ParseDB), naming the rule, before anything is created.
// Before, only serve refused '?' and '#' (in the store, after restore had
// "succeeded" creating a file named "h.db?mode=ro"), and a whitespace-only
// path was taken by restore and serve as a file named by spaces.
func TestDBPathRulesRefusedByEveryCommand(t *testing.T) {
	backup, keyFile := newBackup(t)
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	for _, tc := range []struct{ db, rule string }{
		{"sqlite:h.db?mode=ro", "must not contain '?' or '#'"},
		{"sqlite://h.db#frag", "must not contain '?' or '#'"},
		{"h.db?mode=ro", "must not contain '?' or '#'"},
		{"sqlite:   ", "names no database file"},
		{"sqlite: h.db", "leading or trailing whitespace"},
		{"sqlite:h.db ", "leading or trailing whitespace"},
		{" h.db", "leading or trailing whitespace"},
	} {
		check := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("%s --db %q: %v; want a refusal naming the rule (%s)", what, tc.db, err, tc.rule)
			}
		}
		_, _, err := app.ParseDB(tc.db)
		check("ParseDB", err)
		m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: tc.db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			m.Close()
		}
		check("herald serve", err)
		_, _, err = execHerald(t, "", "migrate", "status", "--db", tc.db)
		check("migrate status", err)
		_, _, err = execHerald(t, "", "backup", "--db", tc.db, "--to", filepath.Join(dir, "copy.db"))
		check("backup", err)
		_, _, err = execHerald(t, "", "restore", "--db", tc.db, "--from", backup, "--key-file", keyFile)
		check("restore", err)
		_, _, err = execHerald(t, "", "rekey", "--db", tc.db, "--new-key", newTestKey())
		check("rekey", err)
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
			t.Errorf("a refused --db %q left files behind: %q", tc.db, names)
		}
	}
}

// TestBackupFileNameRules: herald backup's --to and restore's --from are
// file paths: one with leading or trailing whitespace (or only that), or
// written as a --db value (sqlite:…), is refused naming the rule before
// any file is written, where backup wrote files named "  " or
// "sqlite:s.db?mode=ro".
func TestBackupFileNameRules(t *testing.T) {
	backup, keyFile := newBackup(t)
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	db := filepath.Join(t.TempDir(), "live.db")
	if _, _, err := execHerald(t, "", "restore", "--db", db, "--from", backup, "--key-file", keyFile); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, rule string }{
		{"  ", "leading or trailing whitespace"},
		{" s.db", "leading or trailing whitespace"},
		{"s.db ", "leading or trailing whitespace"},
		{"sqlite:s.db?mode=ro", "a file path, not a --db value"},
		{"sqlite:s.db", "a file path, not a --db value"},
		{"SQLite:s.db", "a file path, not a --db value: write the path without the SQLite: prefix"}, // any case, as --db reads it
	} {
		_, _, err := execHerald(t, "", "backup", "--db", db, "--to", tc.file)
		if err == nil || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("backup --to %q: %v; want a refusal naming the rule (%s)", tc.file, err, tc.rule)
		}
		_, _, err = execHerald(t, "", "restore", "--db", filepath.Join(t.TempDir(), "r.db"), "--from", tc.file, "--key-file", keyFile)
		if err == nil || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("restore --from %q: %v; want a refusal naming the rule (%s)", tc.file, err, tc.rule)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("a refused --to %q left files behind: %v", tc.file, entries)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// TestRestoreKeyErrorsNameTheKeysUsed: herald restore checks the backup
// with HERALD_ENCRYPTION_KEY or --key-file only, never
// HERALD_ENCRYPTION_KEY_PREVIOUS, and its "the encryption key does not
// match" error says so; given a key herald rekey retired on the backed-up
// database, it says that key was retired. Before, the error named neither,
// so an operator with the right key in HERALD_ENCRYPTION_KEY_PREVIOUS
// could not tell why restore refused it.
func TestRestoreKeyErrorsNameTheKeysUsed(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	db := filepath.Join(dir, "herald.db")
	oldKey, newKey := newTestKey(), newTestKey()
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, EncryptionKey: oldKey, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", oldKey)
	if out, errOut, err := execHerald(t, "", "rekey", "--db", "sqlite:"+db, "--new-key", newKey); err != nil {
		t.Fatalf("rekey: %q %q, %v", out, errOut, err)
	}
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	backup := filepath.Join(dir, "backup.db")
	if _, _, err := execHerald(t, "", "backup", "--db", "sqlite:"+db, "--to", backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	target := filepath.Join(t.TempDir(), "restored.db")

	// Another key, the backup's in HERALD_ENCRYPTION_KEY_PREVIOUS.
	t.Setenv("HERALD_ENCRYPTION_KEY", newTestKey())
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", newKey)
	_, _, err = execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target)
	if err == nil || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), "never HERALD_ENCRYPTION_KEY_PREVIOUS") || strings.Contains(err.Error(), "retired") {
		t.Errorf("restore with another key: %v; want the mismatch, saying HERALD_ENCRYPTION_KEY_PREVIOUS is not used", err)
	}
	// The retired key.
	t.Setenv("HERALD_ENCRYPTION_KEY", oldKey)
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	_, _, err = execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target)
	if err == nil || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), "was retired by herald rekey") {
		t.Errorf("restore with the retired key: %v; want the mismatch, naming the key as retired", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused restore wrote %s: %v", target, err)
	}
	// The right key restores.
	t.Setenv("HERALD_ENCRYPTION_KEY", newKey)
	if _, _, err := execHerald(t, "", "restore", "--from", backup, "--db", "sqlite:"+target); err != nil {
		t.Errorf("restore with the backup's key: %v", err)
	}
}

// TestEmptyPreviousKeyItemRefused: an empty item in
// HERALD_ENCRYPTION_KEY_PREVIOUS ("K1,", "K1,,K2", ",") is refused by
// serve and rekey naming the rule, as --trusted-proxy refuses one: it most
// likely lost a key. It was dropped silently. Unset or empty, the variable
// holds no key.
func TestEmptyPreviousKeyItemRefused(t *testing.T) {
	k1, k2 := newTestKey(), newTestKey()
	for _, v := range []string{k1 + ",", k1 + ",," + k2, ",", " , "} {
		t.Setenv("HERALD_ENCRYPTION_KEY", k2)
		t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", v)
		dir := t.TempDir()
		// --allow-cidr bogus is checked after the variable: a serve that
		// took the variable stops there rather than running.
		if _, _, err := execHerald(t, "", "serve", "--db", "sqlite:"+filepath.Join(dir, "h.db"), "--addr", "127.0.0.1:0", "--allow-cidr", "bogus"); err == nil || !strings.Contains(err.Error(), "HERALD_ENCRYPTION_KEY_PREVIOUS") || !strings.Contains(err.Error(), "empty item") {
			t.Errorf("serve with HERALD_ENCRYPTION_KEY_PREVIOUS=%q: %v; want a refusal naming the rule", v, err)
		}
		if _, _, err := execHerald(t, "", "rekey", "--db", "sqlite:"+filepath.Join(dir, "h.db"), "--new-key", newTestKey()); err == nil || !strings.Contains(err.Error(), "HERALD_ENCRYPTION_KEY_PREVIOUS") || !strings.Contains(err.Error(), "empty item") {
			t.Errorf("rekey with HERALD_ENCRYPTION_KEY_PREVIOUS=%q: %v; want a refusal naming the rule", v, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("a refused HERALD_ENCRYPTION_KEY_PREVIOUS=%q left files: %v", v, entries)
		}
	}
	// Well-formed values: the key check, not the variable, is what fails
	// on a database written with another key.
	for _, v := range []string{"", k1, k1 + "," + k2, k1 + ", " + k2} {
		t.Setenv("HERALD_ENCRYPTION_KEY", k2)
		t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", v)
		if _, _, err := execHerald(t, "", "serve", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"), "--addr", "127.0.0.1:0", "--allow-cidr", "bogus"); err == nil || strings.Contains(err.Error(), "HERALD_ENCRYPTION_KEY_PREVIOUS") {
			t.Errorf("serve with HERALD_ENCRYPTION_KEY_PREVIOUS=%q: %v; want only --allow-cidr refused", v, err)
		}
	}
}

// newTestPostgresDB creates a fresh database on HERALD_TEST_POSTGRES_URL's
// server, dropped at the end, and returns its URL; it skips without the
// variable.
func newTestPostgresDB(t *testing.T, prefix string) string {
	t.Helper()
	admin := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if admin == "" {
		t.Skip("HERALD_TEST_POSTGRES_URL is not set")
	}
	conn, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	name := prefix + strings.ToLower(strings.NewReplacer("+", "", "/", "", "=", "").Replace(newTestKey()[:10]))
	if _, err := conn.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop the test database %s: %v", name, err)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	return u.String()
}

// TestMigrateStatusJSONRefusesNewerSchema: on a database whose schema is
// newer than the binary (a version row beyond its last migration),
// migrate status --json exits non-zero like the text form, and its JSON
// (still on stdout) says "newer": true with the text form's error; on an
// up-to-date database "newer" is false and there is no error. It exited 0
// with {"database_version":…,"binary_version":…,"pending":[]}, so a script
// checking before an upgrade was told all was well. On both stores.
func TestMigrateStatusJSONRefusesNewerSchema(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	check := func(t *testing.T, db string, addRow func()) {
		out, _, err := execHerald(t, "", "migrate", "status", "--db", db, "--json")
		var st map[string]any
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || st["newer"] != false || st["error"] != nil {
			t.Fatalf("migrate status --json of an up-to-date database: %q, %v; want newer false, no error, exit 0", out, err)
		}
		addRow()
		out, _, err = execHerald(t, "", "migrate", "status", "--db", db, "--json")
		if err == nil || !errors.Is(err, store.ErrSchemaTooNew) {
			t.Errorf("migrate status --json of a newer database: %v; want a non-zero exit naming a newer schema", err)
		}
		st = nil
		if jerr := json.Unmarshal([]byte(out), &st); jerr != nil {
			t.Fatalf("migrate status --json of a newer database printed no JSON: %q (%v)", out, jerr)
		}
		if st["database_version"] != float64(9999) || st["newer"] != true {
			t.Errorf("migrate status --json of a newer database: %q; want database_version 9999 and newer true", out)
		}
		if msg, _ := st["error"].(string); !strings.Contains(msg, "newer than this binary") {
			t.Errorf("migrate status --json of a newer database: error %q, want the text form's message", msg)
		}
		if _, _, err := execHerald(t, "", "migrate", "status", "--db", db); err == nil || !errors.Is(err, store.ErrSchemaTooNew) {
			t.Errorf("migrate status (text) of a newer database: %v; want the refusal", err)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "herald.db")
		m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + path, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		check(t, "sqlite:"+path, func() {
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)"); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dbURL := newTestPostgresDB(t, "herald_migjson_")
		m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: dbURL, EncryptionKey: newTestKey(), APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		check(t, dbURL, func() {
			db, err := sql.Open("pgx", dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)"); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// TestWrongKeyAfterRekeyNamesTheLastKey: after herald rekey --new-key NEW,
// a node started with only the OLD key is refused with advice that fits a
// rekeyed database: the key it was last sealed with (the first key, or the
// --new-key of the last rekey). It said "set it to the key the first node
// started with" (PostgreSQL) and "to the original key" (SQLite): after a
// rekey, the retired key, exactly the wrong one. On both stores.
func TestWrongKeyAfterRekeyNamesTheLastKey(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	check := func(t *testing.T, db string) {
		oldKey, nk := newTestKey(), newTestKey()
		start := func(key string) error {
			m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: key, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err == nil {
				m.Close()
			}
			return err
		}
		if err := start(oldKey); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HERALD_ENCRYPTION_KEY", oldKey)
		if out, _, err := execHerald(t, "", "rekey", "--db", db, "--new-key", nk); err != nil {
			t.Fatalf("rekey: %q, %v", out, err)
		}
		if err := start(nk); err != nil {
			t.Fatalf("start with the new key: %v", err)
		}
		err := start(oldKey)
		if !errors.Is(err, store.ErrWrongKey) {
			t.Fatalf("start with the retired key only: %v, want ErrWrongKey", err)
		}
		msg := err.Error()
		if strings.Contains(msg, "first node started with") || strings.Contains(msg, "original key") || !strings.Contains(msg, "--new-key of the last herald rekey") {
			t.Errorf("refusal %q: after a rekey the right key is the last rekey's --new-key, not the first one", msg)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		check(t, "sqlite:"+filepath.Join(t.TempDir(), "herald.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		check(t, newTestPostgresDB(t, "herald_rekeymsg_"))
	})
}
