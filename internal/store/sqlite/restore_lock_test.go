//go:build unix

package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestRestoreRefusedWhileANodeHoldsTheDatabaseLock: a node serving a
// database holds its lock file (the claim lock) until it stops, also after
// its database file was moved away under it. Restore checked only that no
// file was at the target, so it restored beside the running node, which
// would go on writing to the moved file while the restored one got a
// second process at the next start. Restore takes the same lock for its
// whole run: while a node holds it, restore is refused with
// ErrRestoreTargetLocked, naming the lock file, and the directory is left
// as it was; once the node stopped, the same restore succeeds.
func TestRestoreRefusedWhileANodeHoldsTheDatabaseLock(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := sqlite.Backup(t.Context(), newBackupSource(t), backup); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.db")
	node, err := sqlite.Open(t.Context(), path, sqlite.WithSecretBox(testBox(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if err := node.ClaimExclusively(t.Context()); err != nil { // as herald serve does at start
		t.Fatal(err)
	}
	// The operator moves the database away without stopping the node.
	moved := t.TempDir()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+suffix, filepath.Join(moved, "herald.db"+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	before := dirNames(t, dir)

	err = sqlite.Restore(t.Context(), backup, path, testBox(t))
	if !errors.Is(err, sqlite.ErrRestoreTargetLocked) || !strings.Contains(err.Error(), path+"-claims.lock") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("restore while a node holds the database's lock: %v; want ErrRestoreTargetLocked naming the lock file and that nothing was written", err)
	}
	if after := dirNames(t, dir); !slices.Equal(before, after) {
		t.Fatalf("a refused restore changed the directory: %v, was %v", after, before)
	}

	node.Close() // the node stops: its lock is released
	if err := sqlite.Restore(t.Context(), backup, path, testBox(t)); err != nil {
		t.Fatalf("restore once the node stopped: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("restored database: %v", err)
	}
}

// TestRefusedRestoreLeavesNoLockFile: restore creates the lock file when
// none is there; a restore refused after that (a backup written with
// another key) removes it again, so the target's directory is left as it
// was.
func TestRefusedRestoreLeavesNoLockFile(t *testing.T) {
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := sqlite.Backup(t.Context(), newBackupSource(t), backup); err != nil {
		t.Fatal(err)
	}
	other, err := secretbox.New([]byte("another key, 32 bytes long......"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := sqlite.Restore(t.Context(), backup, filepath.Join(dir, "herald.db"), other); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("restore with another key: %v; want a refusal", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("a refused restore left %v", names)
	}
}
