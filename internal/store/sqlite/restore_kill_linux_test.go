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
