package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	msqlite "modernc.org/sqlite"

	"github.com/herald-webhooks/herald/internal/store"
)

// Backup writes a consistent copy of the live database at path to the new
// file to, with SQLite's VACUUM INTO (https://sqlite.org/lang_vacuum.html#vacuuminto):
// one read transaction, so the copy is the database as of one instant (in
// WAL mode writers go on meanwhile: deliveries do not stop), compacted,
// and a database of its own (no -wal file), created with mode 0600. to
// must not exist. The copy is
// encrypted as the original (sealed columns stay sealed): keep the key
// (HERALD_ENCRYPTION_KEY or the .key file) with it, but not beside it.
func Backup(ctx context.Context, path, to string) error {
	// A file that is not a Herald database (a typo in --db) is refused
	// before anything is written, as restore and migrate status refuse it.
	if _, err := SchemaStatus(ctx, path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The copy holds everything the database does: create it 0600 (owner
	// only) whatever the umask, before SQLite writes into it (VACUUM INTO
	// accepts an existing empty file).
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("sqlite backup: %s exists; choose a new file", to)
	}
	if err != nil {
		return fmt.Errorf("sqlite backup: %w", err)
	}
	chmodErr := f.Chmod(0o600)
	f.Close()
	if chmodErr != nil {
		os.Remove(to)
		return fmt.Errorf("sqlite backup: %w", chmodErr)
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		os.Remove(to)
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", to); err != nil {
		os.Remove(to)
		return fmt.Errorf("sqlite backup of %s to %s: %w", path, to, err)
	}
	return nil
}

// Restore checks that the backup file from is a Herald database sealed with
// box's key and passes SQLite's integrity check, then copies it to the
// database path to (through a temporary file linked to to at the end, so a
// failed restore leaves nothing half-written, and a file created at to
// meanwhile is never replaced). It refuses a backup written with
// another key (store.ErrWrongKey) and an existing to (a running node's
// database is never overwritten: stop Herald and move the old file away
// first). A -wal, -shm or -journal file left beside to is refused too:
// SQLite would apply it to the restored database at its first open,
// whichever database wrote it. Migrations to the binary's schema run at the
// next start.
func Restore(ctx context.Context, from, to string, box store.SecretBox) error {
	if _, err := os.Stat(to); err == nil {
		return fmt.Errorf("sqlite restore: %s exists; stop Herald and move it (and its -wal and -shm files) away first", to)
	}
	for _, p := range []string{to + "-wal", to + "-shm", to + "-journal"} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("sqlite restore: %s exists beside the target: SQLite would apply it to the restored database when it opens it (it belongs to the database that was there); stop Herald and move it away with that database, then run restore again; nothing was written", p)
		}
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: from}).EscapedPath()+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	// integrity_check, not quick_check: it also compares every index with
	// its table (an index missing rows passes quick_check, and the node's
	// queries through it would miss them). The first problem is reported.
	var check string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check(1)").Scan(&check); err != nil {
		return fmt.Errorf("sqlite restore: %s is not a readable SQLite database: %w", from, err)
	}
	if check != "ok" {
		return fmt.Errorf("sqlite restore: %s fails SQLite's integrity check: %s", from, check)
	}
	var stored string
	err = db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", store.KeyCheckMeta).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite restore: %s has no encryption key check; it is not a Herald backup", from)
	}
	if err != nil {
		return fmt.Errorf("sqlite restore: %s is not a Herald database: %w", from, err)
	}
	if err := store.CheckKeyValue(box, stored); err != nil {
		if errors.Is(err, store.ErrWrongKey) {
			return fmt.Errorf("sqlite restore: %w: give the key the backup was written with (HERALD_ENCRYPTION_KEY or --key-file); nothing was written", err)
		}
		return fmt.Errorf("sqlite restore: %w", err)
	}
	db.Close()
	return copyFile(from, to)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(to), filepath.Base(to)+".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	// A hard link, not a rename: it fails if to was created since Restore
	// checked it (a herald serve started on the path during the copy),
	// where a rename would replace that database. The deferred Remove
	// drops the temporary name. A file system without hard links gets the
	// rename, after one more check.
	err = os.Link(tmp.Name(), to)
	if err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Lstat(to); errors.Is(serr, os.ErrNotExist) {
			err = os.Rename(tmp.Name(), to)
		} else {
			err = os.ErrExist
		}
	}
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("sqlite restore: %s was created during the restore (a herald serve started on it?); it was left as it is and nothing was written", to)
	}
	return err
}

// InUse reports whether another connection has the database at path open
// (a running herald serve, in this process or another): it opens its own
// connection in SQLite's exclusive locking mode
// (https://sqlite.org/pragma.html#pragma_locking_mode) without waiting and
// tries to take the exclusive lock, which fails (SQLITE_BUSY) while any
// other connection holds the database open in WAL mode. The lock is
// released at once; nothing is written. path must exist.
func InUse(ctx context.Context, path string) (bool, error) {
	if _, err := os.Stat(path); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(0)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		return false, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, "BEGIN EXCLUSIVE; ROLLBACK")
	if err == nil {
		return false, nil
	}
	if se := (*msqlite.Error)(nil); errors.As(err, &se) && se.Code()&0xff == 5 { // SQLITE_BUSY
		return true, nil
	}
	return false, fmt.Errorf("sqlite: checking whether %s is in use: %w", path, err)
}
