package sqlite_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// newBackupSource makes a Herald database sealed with testBox's key and
// about 1.2 MB of rows (a table of random blobs beside Herald's), so its
// copy is written in many pages.
func newBackupSource(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "herald.db")
	box := testBox(t)
	s, err := sqlite.Open(t.Context(), src, sqlite.WithSecretBox(box))
	if err != nil {
		t.Fatal(err)
	}
	err = store.CheckKey(t.Context(), s, box)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", src)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE ballast (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	for range 24 {
		if _, err := db.Exec(`INSERT INTO ballast VALUES (randomblob(50000))`); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// TestRestoreSaysABackupIsIncomplete: a file cut short (a copy
// interrupted, or a backup killed by an earlier herald, which wrote under
// the final name) made restore answer "database disk image is malformed",
// "no such table: meta" or, with a journal beside it, "attempt to write a
// readonly database". It says the file is not a complete Herald backup,
// naming it, and writes nothing.
func TestRestoreSaysABackupIsIncomplete(t *testing.T) {
	src := newBackupSource(t)
	dir := t.TempDir()
	full := filepath.Join(dir, "full.db")
	if _, err := sqlite.Backup(t.Context(), src, full); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		size    int
		journal bool
		want    string
	}{
		{"empty", 0, false, "empty"},
		{"no header", 50, false, "header"},
		{"half", len(whole) / 2, false, "cut short"},
		{"one page short", len(whole) - 4096, false, "cut short"},
		{"with a journal", len(whole), true, "-journal beside it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".db")
			if err := os.WriteFile(from, whole[:tc.size], 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.journal {
				// A hot journal: a header and one page record.
				j := append([]byte{0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7, 0, 0, 0, 1}, make([]byte, 8192)...)
				if err := os.WriteFile(from+"-journal", j, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			target := filepath.Join(t.TempDir(), "herald.db")
			err := sqlite.Restore(t.Context(), from, target, testBox(t))
			if err == nil || !strings.Contains(err.Error(), from+" is not a complete Herald backup") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore of %s: %v; want %q naming the file and %q", tc.name, err, "is not a complete Herald backup", tc.want)
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Fatalf("a refused restore wrote %s", target)
			}
		})
	}
}

// TestRestoreRefusesALiveDatabase: a database a node has open keeps its
// recent writes in the -wal beside it; restore copied the file alone and
// "restored" an empty database (found by a new user's review). It refuses
// such a source, naming the -wal, and writes nothing.
func TestRestoreRefusesALiveDatabase(t *testing.T) {
	from := filepath.Join(t.TempDir(), "herald.db")
	box := testBox(t)
	s, err := sqlite.Open(t.Context(), from, sqlite.WithSecretBox(box))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := store.CheckKey(t.Context(), s, box); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(from + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("the open database's -wal: %v (want writes in it)", err)
	}
	target := filepath.Join(t.TempDir(), "herald.db")
	err = sqlite.Restore(t.Context(), from, target, box)
	if err == nil || !strings.Contains(err.Error(), from+"-wal beside it holds writes") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("restore of a live database: %v; want a refusal naming its -wal", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore wrote %s", target)
	}
}

// TestBackupRefusesAPartialFileInUse: the temporary file of a backup that
// is running (it holds the file's lock) is not another backup's to take:
// a second backup to the same file is refused and leaves it as it is.
func TestBackupRefusesAPartialFileInUse(t *testing.T) {
	src := newBackupSource(t)
	to := filepath.Join(t.TempDir(), "backup.db")
	partial := sqlite.PartialBackupName(to)
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("being written"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	stale, err := sqlite.Backup(t.Context(), src, to)
	if err == nil || stale || !strings.Contains(err.Error(), "another herald backup") || !strings.Contains(err.Error(), partial) {
		t.Fatalf("backup beside a locked partial file: %v (removed stale %v); want a refusal naming it", err, stale)
	}
	if b, _ := os.ReadFile(partial); string(b) != "being written" {
		t.Fatalf("the refused backup changed the other backup's file to %q", b)
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Fatalf("the refused backup wrote %s", to)
	}
}

// TestBackupLeavesAnotherNameOfAStalePartialAlone: a backup killed after
// it linked the complete copy to its final name and before it removed the
// partial name leaves two names of one file. If the operator then moves
// the backup away (a rotation) and backs up to the same file again, the
// stale partial name is still a name of the moved backup: the new backup
// must drop that name, not truncate and overwrite the file through it.
func TestBackupLeavesAnotherNameOfAStalePartialAlone(t *testing.T) {
	src := newBackupSource(t)
	dir := t.TempDir()
	to := filepath.Join(dir, "backup.db")
	if _, err := sqlite.Backup(t.Context(), src, to); err != nil {
		t.Fatal(err)
	}
	// The state of a backup killed between its link and its removal of
	// the partial name, then the backup moved away by a rotation.
	if err := os.Link(to, sqlite.PartialBackupName(to)); err != nil {
		t.Fatal(err)
	}
	archived := filepath.Join(dir, "backup-yesterday.db")
	if err := os.Rename(to, archived); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(archived)
	if err != nil {
		t.Fatal(err)
	}
	// The database changes before the next backup.
	db, err := sql.Open("sqlite", src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO ballast VALUES (randomblob(50000))`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	stale, err := sqlite.Backup(t.Context(), src, to)
	if err != nil || !stale {
		t.Fatalf("backup beside the stale partial name: removed stale %v, %v; want it removed and the backup complete", stale, err)
	}
	got, err := os.ReadFile(archived)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the new backup overwrote the archived one through the stale partial name (%d bytes, were %d)", len(got), len(want))
	}
	a, errA := os.Stat(archived)
	b, errB := os.Stat(to)
	if errA != nil || errB != nil || os.SameFile(a, b) {
		t.Fatalf("the archived and the new backup: %v, %v, same file %v; want two files", errA, errB, errA == nil && errB == nil && os.SameFile(a, b))
	}
	if _, err := os.Stat(sqlite.PartialBackupName(to)); !os.IsNotExist(err) {
		t.Fatalf("partial name left after a complete backup: %v", err)
	}
}
