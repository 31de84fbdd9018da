package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreCopyNeverReplacesATarget: Restore checks that its target does
// not exist before the copy, which takes a while for a large backup; a
// database created there meanwhile (a herald serve started on the path)
// must not be replaced by the copy's last step. The copy fails instead,
// leaves that file as it is and no temporary file behind.
func TestRestoreCopyNeverReplacesATarget(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "backup.db"), filepath.Join(dir, "herald.db")
	if err := os.WriteFile(from, []byte("the backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, []byte("a database created during the copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(from, to); err == nil || !strings.Contains(err.Error(), to) {
		t.Fatalf("copy onto an existing target: %v; want an error naming it", err)
	}
	if b, _ := os.ReadFile(to); string(b) != "a database created during the copy" {
		t.Fatalf("the copy replaced the target: it holds %q", b)
	}
	if left, _ := filepath.Glob(to + ".restore-*"); len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}

	// A free target gets the copy, owner-only.
	free := filepath.Join(dir, "free.db")
	if err := copyFile(from, free); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(free); string(b) != "the backup" {
		t.Fatalf("copied %q", b)
	}
	if info, err := os.Stat(free); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("copy's mode %v, %v; want 0600", info.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(free + ".restore-*"); len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}
