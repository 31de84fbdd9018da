package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	msqlite "modernc.org/sqlite"

	"github.com/herald-webhooks/herald/internal/store"
)

// PartialBackupName is the temporary file Backup writes the copy to before
// it is complete: to with ".partial" appended, in the same directory. An
// interrupted backup (the process killed, the machine down) leaves it, and
// never a file at to; the next Backup to the same file removes it.
func PartialBackupName(to string) string { return to + ".partial" }

// Backup writes a consistent copy of the live database at path to the new
// file to, with SQLite's VACUUM INTO (https://sqlite.org/lang_vacuum.html#vacuuminto):
// one read transaction, so the copy is the database as of one instant (in
// WAL mode writers go on meanwhile: deliveries do not stop), compacted,
// and a database of its own (no -wal file), created with mode 0600. to
// must not exist. The copy is
// encrypted as the original (sealed columns stay sealed): keep the key
// (HERALD_ENCRYPTION_KEY or the .key file) with it, but not beside it.
//
// The copy is written to PartialBackupName(to) (owner-only from its
// creation, and locked with flock(2) while it is written), fsynced, and
// only then linked to to (a hard link, so a file created at to meanwhile
// is never replaced; a rename where the file system has no hard links),
// the temporary name removed and the directory fsynced: a backup killed at
// any point never leaves a file under the final name, only the partial
// one. A partial file that no running backup holds locked is what an
// interrupted backup to the same file left: Backup removes it and reports
// it (removedStale); one that another backup holds locked is refused.
func Backup(ctx context.Context, path, to string) (removedStale bool, err error) {
	// A file that is not a Herald database (a typo in --db) is refused
	// before anything is written, as restore and migrate status refuse it.
	if _, err := SchemaStatus(ctx, path); err != nil {
		return false, fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Lstat(to); err == nil {
		return false, fmt.Errorf("sqlite backup: %s exists; choose a new file", to)
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("sqlite backup: %w", err)
	}
	tmp := PartialBackupName(to)
	f, removedStale, err := openPartial(tmp)
	if err != nil {
		return false, fmt.Errorf("sqlite backup: %w", err)
	}
	// Closing f releases the lock: after the temporary name is gone (or
	// the link made), so another backup never takes over a file this one
	// is still writing.
	defer f.Close()
	published := false
	defer func() {
		if !published {
			os.Remove(tmp)
		}
	}()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return removedStale, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return removedStale, fmt.Errorf("sqlite backup of %s to %s: %w", path, to, err)
	}
	db.Close()
	// SQLite syncs the copy as the source's synchronous setting says
	// (NORMAL in WAL mode does not sync it): sync it before it gets its
	// final name, so a power loss never leaves a torn file there.
	if err := f.Sync(); err != nil {
		return removedStale, fmt.Errorf("sqlite backup: syncing %s: %w", tmp, err)
	}
	if err := linkNew(tmp, to); err != nil {
		if errors.Is(err, os.ErrExist) {
			return removedStale, fmt.Errorf("sqlite backup: %s was created during the backup; it was left as it is and the backup discarded", to)
		}
		return removedStale, fmt.Errorf("sqlite backup: %w", err)
	}
	published = true
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return removedStale, fmt.Errorf("sqlite backup: %s is complete, but removing its temporary name %s: %w", to, tmp, err)
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return removedStale, fmt.Errorf("sqlite backup: %s is complete, but syncing its directory: %w", to, err)
	}
	return removedStale, nil
}

// openPartial opens (creating it owner-only) the temporary file tmp of a
// backup, locked, empty and mode 0600. A file already there is an earlier
// backup's: refused while that backup holds its lock (it is running),
// replaced by a new file otherwise (it was interrupted), and then stale
// reports it.
func openPartial(tmp string) (f *os.File, stale bool, err error) {
	info, err := os.Lstat(tmp)
	switch {
	case err == nil && !info.Mode().IsRegular():
		return nil, false, fmt.Errorf("%s, the backup's temporary name, exists and is not a regular file; move it away", tmp)
	case err == nil:
		stale = true
	case !errors.Is(err, os.ErrNotExist):
		return nil, false, err
	}
	f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, false, fmt.Errorf("another herald backup is writing the same file (its temporary file %s is locked); wait for it to finish or choose another file", tmp)
		}
		return nil, false, fmt.Errorf("locking %s: %w", tmp, err)
	}
	// The lock is on the file opened: if another backup removed the name
	// (finished) between the open and the lock, this file is not the one
	// at tmp any more.
	opened, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	if now, err := os.Lstat(tmp); err != nil || !os.SameFile(opened, now) {
		f.Close()
		return nil, false, fmt.Errorf("%s was replaced while the backup opened it (another herald backup to the same file?); run the backup again", tmp)
	}
	if stale || opened.Size() > 0 {
		stale = true
		// VACUUM INTO writes into an empty file only. A rollback journal
		// beside the partial file (none is expected: VACUUM INTO writes its
		// copy without one) would be applied to the new copy.
		if err := os.Remove(tmp + "-journal"); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.Close()
			return nil, false, err
		}
		// The stale file's name is dropped (under its lock) and a new file
		// made, never the stale file emptied: it may have another name, a
		// complete backup's (one killed between linking its copy to the
		// final name and removing the partial name, whose copy was moved
		// away since), which emptying it would destroy. The old file's lock
		// is held until the new one is locked, so a concurrent backup that
		// opened the old file gets no lock or fails the name check above.
		if err := os.Remove(tmp); err != nil {
			f.Close()
			return nil, false, err
		}
		nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			f.Close()
			if errors.Is(err, os.ErrExist) {
				return nil, false, fmt.Errorf("another herald backup created %s meanwhile; wait for it to finish or choose another file", tmp)
			}
			return nil, false, err
		}
		err = lockFile(nf)
		f.Close()
		if err != nil {
			nf.Close()
			if errors.Is(err, errLocked) {
				return nil, false, fmt.Errorf("another herald backup is writing the same file (its temporary file %s is locked); wait for it to finish or choose another file", tmp)
			}
			return nil, false, fmt.Errorf("locking %s: %w", tmp, err)
		}
		f = nf
	}
	// Owner-only whatever the umask or the mode of a file left there: the
	// copy holds everything the database does.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, stale, nil
}

// linkNew gives the complete file tmp the name to, failing with
// os.ErrExist if to exists: a hard link, which never replaces a file (a
// rename would), and a rename after one more check where the file system
// has no hard links. tmp keeps its name: the caller removes it.
func linkNew(tmp, to string) error {
	err := os.Link(tmp, to)
	if err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Lstat(to); errors.Is(serr, os.ErrNotExist) {
			err = os.Rename(tmp, to)
		} else {
			err = os.ErrExist
		}
	}
	if errors.Is(err, os.ErrExist) {
		return os.ErrExist
	}
	return err
}

// syncDir fsyncs the directory dir, so a name just made in it survives a
// crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrRestoreTargetLocked is returned (wrapped, with the lock file's
// name) by Restore while another process holds the lock of the target
// database: a herald serve that opened a database at that path holds it
// (the claim lock, takeClaimLock) until it stops, even when its database
// file was moved away since, and so does another restore to that path.
var ErrRestoreTargetLocked = errors.New("another process holds the lock of this database (a herald serve running on it, or another herald restore to it): one process per database file; stop it, then run restore again")

// Restore checks that the backup file from is a complete database (see
// checkComplete: a file cut short is named as not a complete Herald
// backup), a Herald database sealed with box's key, and passes SQLite's
// integrity check, then copies it to the
// database path to (through a temporary file linked to to at the end, so a
// failed restore leaves nothing half-written, and a file created at to
// meanwhile is never replaced). It refuses a backup written with
// another key (store.ErrWrongKey) and an existing to (a running node's
// database is never overwritten: stop Herald and move the old file away
// first). A source with a non-empty -wal beside it (a live database: the
// copy would lack what the WAL holds) is refused. A -wal, -shm or
// -journal file left beside to is refused too:
// SQLite would apply it to the restored database at its first open,
// whichever database wrote it. Migrations to the binary's schema run at the
// next start.
//
// From the checks of the backup to its end, Restore holds the lock a
// herald serve on to holds (the claim lock file, to with "-claims.lock"
// appended: flock(2) where the system has it): while another process holds
// it, Restore returns ErrRestoreTargetLocked and writes nothing, and a
// herald serve started on to during the restore is refused before it
// creates anything (it takes the lock first: LockClaims). A lock
// file this call created is removed again when the restore fails.
//
// The copy's temporary file is RestoreTempPrefix(to) followed by digits
// (and the key file's, with RestoreKeyFile, the same and ".key"). A
// restore killed during the copy (kill -9, a reboot: no deferred removal
// runs) leaves it behind; once the backup passed its checks, Restore
// removes every such file beside to before it copies (reported to
// RestoreRemoved's function): under the lock, none of them can be a
// running restore's. Where the system has no flock(2) they are left
// alone.
func Restore(ctx context.Context, from, to string, box store.SecretBox, opts ...RestoreOption) (err error) {
	var o restoreOptions
	for _, opt := range opts {
		opt(&o)
	}
	if to == "" {
		return errors.New("sqlite restore: the target path is empty: name the database file to create; nothing was written")
	}
	if _, err := os.Stat(to); err == nil {
		return fmt.Errorf("sqlite restore: %s exists; stop Herald and move it (and its -wal and -shm files) away first", to)
	}
	for _, p := range []string{to + "-wal", to + "-shm", to + "-journal"} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("sqlite restore: %s exists beside the target: SQLite would apply it to the restored database when it opens it (it belongs to the database that was there); stop Herald and move it away with that database, then run restore again; nothing was written", p)
		}
	}
	release, err := lockTarget(to)
	if err != nil {
		return fmt.Errorf("sqlite restore: %w; nothing was written", err)
	}
	defer func() { release(err == nil) }()
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("sqlite restore: %s was created while restore took its lock (a herald serve started on it?); it was left as it is and nothing was written", to)
	}
	if err := checkComplete(from); err != nil {
		return fmt.Errorf("sqlite restore: %s is not a complete Herald backup: %w; nothing was written", from, err)
	}
	// A -wal beside the source holds writes not yet folded into the file
	// (a live database, or one copied while Herald ran): the checks below
	// would read them through SQLite, but the copy takes the file alone,
	// and the restored database would lack them (found by review: a live
	// database "restored" as an empty one). herald backup writes one
	// self-contained file.
	if fi, err := os.Lstat(from + "-wal"); err == nil && fi.Size() > 0 {
		return fmt.Errorf("sqlite restore: %s is not a complete Herald backup: %s beside it holds writes that are not in the file (a live database, or a copy taken while Herald ran); restore copies the file alone and would lose them: make a backup with herald backup (or stop Herald, which folds them in at its close) and restore that; nothing was written", from, from+"-wal")
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
		hint := ""
		if _, jerr := os.Lstat(from + "-journal"); jerr == nil {
			// SQLite would roll that journal back into the file before
			// reading it, which a read-only open cannot do.
			hint = fmt.Sprintf(" (%s beside it is the journal of a write that did not finish)", from+"-journal")
		}
		return fmt.Errorf("sqlite restore: %s is not a complete Herald backup: SQLite cannot read it: %w%s; nothing was written", from, err, hint)
	}
	if check != "ok" {
		return fmt.Errorf("sqlite restore: %s is not a complete Herald backup: it fails SQLite's integrity check: %s; nothing was written", from, check)
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
			if retiredIn(ctx, db, box) {
				return fmt.Errorf("sqlite restore: %w: the key given was retired by herald rekey on the backed-up database (its values were moved to a newer key before this backup): give the key the database had when the backup was taken, as HERALD_ENCRYPTION_KEY or --key-file (restore never uses HERALD_ENCRYPTION_KEY_PREVIOUS); nothing was written", err)
			}
			return fmt.Errorf("sqlite restore: %w: give the key the backup was written with, as HERALD_ENCRYPTION_KEY or --key-file (restore uses only those, never HERALD_ENCRYPTION_KEY_PREVIOUS); nothing was written", err)
		}
		return fmt.Errorf("sqlite restore: %w", err)
	}
	db.Close()
	if err := removeRestoreLeftovers(to, o.removed); err != nil {
		return fmt.Errorf("sqlite restore: removing the temporary files of an interrupted restore: %w; nothing was written", err)
	}
	// The key file before the database: a restore killed between the two
	// leaves a key file without its database, which herald serve refuses
	// by name and a second restore (same key) completes; the other order
	// left a database without its key, which herald serve started on with
	// a new key of its own.
	keyPath := to + ".key"
	wroteKey := false
	if o.keyFile != nil {
		if _, err := os.Lstat(keyPath); errors.Is(err, os.ErrNotExist) {
			if err := writeNewFile(keyPath, filepath.Base(RestoreTempPrefix(to))+"*"+restoreKeySuffix, o.keyFile); err != nil {
				return fmt.Errorf("sqlite restore: writing the key file %s: %w; nothing was written", keyPath, err)
			}
			wroteKey = true
		} else if err != nil {
			return fmt.Errorf("sqlite restore: the key file %s: %w; nothing was written", keyPath, err)
		}
	}
	// A key file that was there already (the caller checked that it holds
	// the key the backup opens with) is kept, but owner-only, as one
	// written here is: it opens every secret of the restored database.
	var madePrivate os.FileMode
	if !wroteKey {
		if info, err := os.Lstat(keyPath); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(keyPath, info.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("sqlite restore: making the key file %s owner-only: %w; nothing was written", keyPath, err)
			}
			madePrivate = info.Mode().Perm()
		}
	}
	if err := copyFile(from, to); err != nil {
		if wroteKey {
			os.Remove(keyPath) // the database was not restored: neither is its key
		}
		if madePrivate != 0 {
			os.Chmod(keyPath, madePrivate) // a failed restore changes nothing
		}
		return err
	}
	if madePrivate != 0 && o.madePrivate != nil {
		o.madePrivate(keyPath, madePrivate)
	}
	return nil
}

// restoreKeySuffix ends the name of the temporary file a restore writes
// the key file through: RestoreTempPrefix(to), digits, ".key".
const restoreKeySuffix = ".key"

// writeNewFile creates the file path holding data so that a crash at any
// point leaves either no file at path or the whole of data, owner-only: a
// temporary file named by pattern (os.CreateTemp) in path's directory,
// mode 0600, written and fsynced, then linked to path, its temporary name
// removed and the directory fsynced. A hard link, not a rename: it never
// replaces a file created at path meanwhile (os.ErrExist then, the file
// left as it is; a rename where the file system has no hard links, after
// one more check).
func writeNewFile(path, pattern string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed; after a link, the temporary name
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := linkNew(f.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s was created meanwhile; it was left as it is", path)
		}
		return err
	}
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// A RestoreOption changes what Restore does besides the copy.
type RestoreOption func(*restoreOptions)

type restoreOptions struct {
	removed     func(path string)
	madePrivate func(path string, was os.FileMode)
	keyFile     []byte
}

// RestoreMadePrivate has Restore call f when it took the group and other
// permissions off the key file that was already beside the target (was:
// its mode before), as it does once the backup passed its checks: the key
// file is kept owner-only, as one Restore writes (0600). A restore that
// fails after that gives the file its mode back.
func RestoreMadePrivate(f func(path string, was os.FileMode)) RestoreOption {
	return func(o *restoreOptions) { o.madePrivate = f }
}

// RestoreKeyFile has Restore write text as the key file beside the
// restored database (to with ".key" appended: where herald serve reads
// it) when no file is there, before it copies the database and under its
// lock: created 0600 through a temporary file (RestoreTempPrefix(to),
// digits, ".key") fsynced, linked to its name and the directory fsynced
// (writeNewFile), so a crash never leaves a torn key file. A key file that
// is there is left as it is (the caller checks that it holds the key the
// backup was checked with). When the copy of the database then fails, the
// key file written is removed.
func RestoreKeyFile(text []byte) RestoreOption {
	return func(o *restoreOptions) { o.keyFile = text }
}

// RestoreRemoved has Restore call f with the path of each temporary file
// of an interrupted restore it removes (herald restore prints them).
func RestoreRemoved(f func(path string)) RestoreOption {
	return func(o *restoreOptions) { o.removed = f }
}

// RestoreTempPrefix is the start of the name of a restore's temporary
// copy of the database to (in to's directory): to with ".restore-"
// appended; os.CreateTemp appends decimal digits.
func RestoreTempPrefix(to string) string { return to + ".restore-" }

// removeRestoreLeftovers removes the regular files of to's directory named
// RestoreTempPrefix(to) and digits, or digits and restoreKeySuffix: the
// temporary copies and key files of restores to to that were killed. The caller holds to's lock (lockTarget), which
// every restore holds while its temporary file exists, so none is a
// running restore's; without flock(2) (haveFlock) nothing is removed.
// Removing a name never touches another name of the same file (a restore
// killed between linking its copy to to and removing the temporary name
// left a second name of a complete database, which this removes only if
// to does not exist: Restore refuses an existing to first). removed, if
// not nil, is told each path removed.
func removeRestoreLeftovers(to string, removed func(string)) error {
	if !haveFlock {
		return nil
	}
	dir, prefix := filepath.Dir(to), filepath.Base(RestoreTempPrefix(to))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), prefix)
		digits = strings.TrimSuffix(digits, restoreKeySuffix)
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if removed != nil {
			removed(p)
		}
	}
	return nil
}

// lockTarget takes the lock of the database at path that a herald serve
// on it holds (claimLockPath, takeClaimLock), creating its file when
// there is none: ErrRestoreTargetLocked, with the file's name, while
// another process (or another open file of this one) holds it. release
// unlocks it; with done false (the restore failed) it first removes the
// lock file if this call created it, so a refused restore leaves nothing.
func lockTarget(path string) (release func(done bool), err error) {
	lockPath := claimLockPath(path)
	f, _, created, err := lockNamedFile(lockPath)
	switch {
	case errors.Is(err, errLocked):
		return nil, fmt.Errorf("%w (%s is locked)", ErrRestoreTargetLocked, lockPath)
	case errors.Is(err, errLockReplaced):
		// The lock is on the file opened: a file that replaced it at its
		// name meanwhile is another lock, perhaps a running node's.
		return nil, fmt.Errorf("locking %s: %s was replaced while restore locked it (a herald serve starting on the same database?)", lockPath, lockPath)
	case err != nil:
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	return func(done bool) {
		if created && !done {
			os.Remove(lockPath) // under the lock: nobody else holds it
		}
		f.Close()
	}, nil
}

// checkComplete reads the header of the SQLite database file path
// (https://sqlite.org/fileformat.html#the_database_header) and reports a
// file that cannot be a whole database: empty, not starting with SQLite's
// header, or shorter than the size its header declares (a copy cut short,
// or a backup interrupted by an older herald that wrote under the final
// name). A file that passes is still checked by SQLite.
func checkComplete(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return errors.New("it is not a regular file")
	}
	size := info.Size()
	if size == 0 {
		return errors.New("it is empty (a copy or backup that never started writing?)")
	}
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:16]) != "SQLite format 3\x00" {
		return fmt.Errorf("it does not start with a SQLite database header (%d bytes; a copy or backup cut short, or not a database)", size)
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	// The size in the header is valid when the version-valid-for number
	// matches the change counter (SQLite 3.7.0 and later write both).
	if pages > 0 && binary.BigEndian.Uint32(h[92:96]) == binary.BigEndian.Uint32(h[24:28]) && size < pages*pageSize {
		return fmt.Errorf("it is %d bytes long, but its header declares %d pages of %d bytes (%d bytes): it was cut short", size, pages, pageSize, pages*pageSize)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(to), filepath.Base(RestoreTempPrefix(to))+"*")
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
	// drops the temporary name.
	if err := linkNew(tmp.Name(), to); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("sqlite restore: %s was created during the restore (a herald serve started on it?); it was left as it is and nothing was written", to)
		}
		return err
	}
	return syncDir(filepath.Dir(to))
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

// retiredIn reports whether box opens one of the key check values herald
// rekey recorded in db for the keys it retired (store.RetiredKeyChecks):
// the key given to restore is one the backed-up database was moved away
// from. Errors count as no.
func retiredIn(ctx context.Context, db *sql.DB, box store.SecretBox) bool {
	rows, err := db.QueryContext(ctx, "SELECT value FROM meta WHERE key LIKE ?", store.RetiredKeyMetaPrefix+"%")
	if err != nil {
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var v string
		if rows.Scan(&v) != nil {
			return false
		}
		if raw, err := base64.StdEncoding.DecodeString(v); err == nil {
			if _, err := box.Open(raw, []byte(store.KeyCheckMeta)); err == nil {
				return true
			}
		}
	}
	return false
}
