//go:build linux && (amd64 || arm64)

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// runKilledRestore restores from to to in a child process that the kernel
// kills at the write that makes a file longer than limit bytes
// (dieAtFileSize), with the options the child's env asks for, and fails
// the test unless the child was killed so.
func runKilledRestore(t *testing.T, test string, limit uint64, from, to string, env ...string) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	child.Env = append(os.Environ(), append(env, "HERALD_TEST_KILLED_RESTORE_FROM="+from, "HERALD_TEST_KILLED_RESTORE_TO="+to,
		fmt.Sprintf("HERALD_TEST_KILLED_RESTORE_LIMIT=%d", limit))...)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child restore: %v; want it killed by SIGXFSZ\n%s", err, out)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGXFSZ {
		t.Fatalf("child restore ended with %v; want it killed by SIGXFSZ\n%s", exit, out)
	}
}

// killedRestoreChild is the child of runKilledRestore: it reports true
// when this process is one (and then never returns).
func killedRestoreChild(t *testing.T, opts ...sqlite.RestoreOption) bool {
	from := os.Getenv("HERALD_TEST_KILLED_RESTORE_FROM")
	if from == "" {
		return false
	}
	var limit uint64
	fmt.Sscan(os.Getenv("HERALD_TEST_KILLED_RESTORE_LIMIT"), &limit)
	dieAtFileSize(limit)
	err := sqlite.Restore(context.Background(), from, os.Getenv("HERALD_TEST_KILLED_RESTORE_TO"), testBox(t), opts...)
	fmt.Println("the restore returned instead of being killed:", err)
	os.Exit(3)
	return true
}

// TestRestoreKilledMidCopyLeavesNothingForLong: a restore killed while it
// copies (kill -9, a reboot) left its temporary copy,
// herald.db.restore-<digits>, beside the target for good, a whole or
// partial copy of every secret-sealed row. The next restore to the same
// path removes it (and reports it) before it copies, and leaves only the
// restored database and its lock file; a file whose name only starts
// the same way is left alone. The copy is killed by its file size limit
// in a child process, the same instant every run.
func TestRestoreKilledMidCopyLeavesNothingForLong(t *testing.T) {
	if killedRestoreChild(t) {
		return
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := sqlite.Backup(t.Context(), newBackupSource(t), backup); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "herald.db")
	runKilledRestore(t, "TestRestoreKilledMidCopyLeavesNothingForLong", killedBackupLimit, backup, target)
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("the killed restore left %s", target)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "herald.db.restore-*"))
	if len(left) != 1 {
		t.Fatalf("the killed restore's temporary files: %v; want the one copy it was writing", left)
	}
	notes := filepath.Join(dir, "herald.db.restore-notes")
	if err := os.WriteFile(notes, []byte("the operator's"), 0o600); err != nil {
		t.Fatal(err)
	}

	var removed []string
	if err := sqlite.Restore(t.Context(), backup, target, testBox(t), sqlite.RestoreRemoved(func(p string) { removed = append(removed, p) })); err != nil {
		t.Fatalf("restore after the killed one: %v", err)
	}
	if !slices.Equal(removed, left) {
		t.Errorf("reported removed %v, want %v", removed, left)
	}
	want := []string{"herald.db", "herald.db-claims.lock", "herald.db.restore-notes"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after the restore the directory holds %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(notes); !strings.Contains(string(b), "operator") {
		t.Errorf("a file not named as a restore's temporary copy was changed: %q", b)
	}
}

// restoreKeyText is the key file text the key-file tests restore with (a
// base64 key and a newline, as herald writes key files).
const restoreKeyText = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"

// TestRestoreKilledWritingTheKeyFileLeavesNoTornKeyFile: restore wrote
// the key file beside the restored database in place (os.WriteFile), so a
// crash in the middle left a torn key file under the final name: the
// database beside it would never open. The key file is written through a
// temporary file linked to its name once complete: a restore killed while
// it writes the key (its file size limit is below the key's length)
// leaves no key file and no database, only the temporary file, which the
// next restore removes; that restore writes the whole key, mode 0600.
func TestRestoreKilledWritingTheKeyFileLeavesNoTornKeyFile(t *testing.T) {
	if killedRestoreChild(t, sqlite.RestoreKeyFile([]byte(restoreKeyText))) {
		return
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := sqlite.Backup(t.Context(), newBackupSource(t), backup); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "herald.db")
	runKilledRestore(t, "TestRestoreKilledWritingTheKeyFileLeavesNoTornKeyFile", 16, backup, target)
	if b, err := os.ReadFile(target + ".key"); err == nil {
		t.Fatalf("the killed restore left a key file %q under the final name", b)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("the killed restore left %s", target)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "herald.db.restore-*.key"))
	if len(left) != 1 {
		t.Fatalf("the killed restore's temporary key files: %v; want the one it was writing", left)
	}

	if err := sqlite.Restore(t.Context(), backup, target, testBox(t), sqlite.RestoreKeyFile([]byte(restoreKeyText))); err != nil {
		t.Fatalf("restore after the killed one: %v", err)
	}
	checkRestoredKey(t, target)
}

// TestRestoreKilledAfterTheKeyFileCompletesOnTheNextRun: the key file is
// written before the database, so a restore killed while it copies the
// database leaves the whole key file and no database (herald serve
// refuses that pair by name), and the next restore, with the same key,
// completes: the key file is kept, the database restored.
func TestRestoreKilledAfterTheKeyFileCompletesOnTheNextRun(t *testing.T) {
	if killedRestoreChild(t, sqlite.RestoreKeyFile([]byte(restoreKeyText))) {
		return
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := sqlite.Backup(t.Context(), newBackupSource(t), backup); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "herald.db")
	runKilledRestore(t, "TestRestoreKilledAfterTheKeyFileCompletesOnTheNextRun", killedBackupLimit, backup, target)
	if b, err := os.ReadFile(target + ".key"); err != nil || string(b) != restoreKeyText {
		t.Fatalf("key file after a restore killed in its copy: %q, %v; want the whole key", b, err)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("the killed restore left %s", target)
	}
	if err := sqlite.Restore(t.Context(), backup, target, testBox(t), sqlite.RestoreKeyFile([]byte(restoreKeyText))); err != nil {
		t.Fatalf("restore after the killed one: %v", err)
	}
	checkRestoredKey(t, target)
}

// checkRestoredKey checks a completed restore to target: the database, its
// whole key file (0600) and its lock file, nothing else.
func checkRestoredKey(t *testing.T, target string) {
	t.Helper()
	if b, err := os.ReadFile(target + ".key"); err != nil || string(b) != restoreKeyText {
		t.Fatalf("key file after the restore: %q, %v; want %q", b, err, restoreKeyText)
	}
	if info, err := os.Stat(target + ".key"); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v, %v; want 0600", info.Mode().Perm(), err)
	}
	want := []string{"herald.db", "herald.db-claims.lock", "herald.db.key"}
	if got := dirNames(t, filepath.Dir(target)); !slices.Equal(got, want) {
		t.Fatalf("after the restore the directory holds %v, want %v", got, want)
	}
}
