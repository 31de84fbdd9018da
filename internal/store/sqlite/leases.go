package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Leases live in the driver's memory, not in the database (issue 18).
//
// One process owns a SQLite database (the claim lock below makes sure of
// it), so a lease need not survive the process: a claim reads the due
// deliveries and records their leases here, committing nothing; the
// completion writes the attempt and the delivery's next state in one
// transaction as before and then forgets the lease. After a crash the
// leases are gone and every delivery not completed is due again: at least
// once, as with leases in the row (PostgreSQL, where nodes share the queue,
// keeps them there). In a drain this removed a write transaction, a write
// of every claimed row and two index changes per delivery (the partial due
// indexes).
//
// The lease columns of deliveries stay NULL. Every statement that skips
// leased deliveries (the claim, pausing or disabling an endpoint, the
// circuit breaker's postponement, the next due time) skips the ids held
// here instead. The table changes only while the writer connection is
// held (claim, hand-off, completion, renewal, rescue), so a transaction on the writer sees
// the leases and the rows at the same point; readers on the read pool
// (GetDelivery, NextDueAt) may see a lease a moment before or after its
// row's change, which at most wakes the claimer for nothing.
type leaseTable struct {
	mu      sync.RWMutex
	m       map[string]lease // by delivery id
	tenants map[string]int   // leases per tenant
}

// lease is one claimed delivery's lease.
type lease struct {
	owner    string
	until    int64 // µs since the epoch
	endpoint string
	tenant   string
}

func newLeaseTable() *leaseTable {
	return &leaseTable{m: map[string]lease{}, tenants: map[string]int{}}
}

// get returns the lease of delivery id.
func (t *leaseTable) get(id string) (lease, bool) {
	t.mu.RLock()
	l, ok := t.m[id]
	t.mu.RUnlock()
	return l, ok
}

// held reports whether the lease of delivery id is the one owner took
// until until (µs): a lease that expired, was rescued and was taken again
// by the same owner is another lease (a later end).
func (t *leaseTable) held(id, owner string, until int64) bool {
	l, ok := t.get(id)
	return ok && l.owner == owner && l.until == until
}

// tenantLeases is how many deliveries of tenant are leased.
func (t *leaseTable) tenantLeases(tenant string) int {
	t.mu.RLock()
	n := t.tenants[tenant]
	t.mu.RUnlock()
	return n
}

// add records leases (caller holds the writer connection).
func (t *leaseTable) add(ids []string, ls []lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range ids {
		if old, ok := t.m[id]; ok {
			t.forget(id, old)
		}
		t.m[id] = ls[i]
		t.tenants[ls[i].tenant]++
	}
}

// renew moves the end of delivery id's lease from until to newUntil (µs)
// if it is still the lease owner took until until and has not ended at now
// (µs); false otherwise (the lease was completed, rescued and maybe taken
// again, or it ended: the rescue may free it at any moment). Caller holds
// the writer connection (Store.RenewLease).
func (t *leaseTable) renew(id, owner string, until, newUntil, now int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.m[id]
	if !ok || l.owner != owner || l.until != until || l.until < now {
		return false
	}
	l.until = newUntil
	t.m[id] = l
	return true
}

// drop forgets the leases of ids (caller holds the writer connection).
func (t *leaseTable) drop(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if l, ok := t.m[id]; ok {
			t.forget(id, l)
		}
	}
}

func (t *leaseTable) forget(id string, l lease) {
	delete(t.m, id)
	if t.tenants[l.tenant]--; t.tenants[l.tenant] <= 0 {
		delete(t.tenants, l.tenant)
	}
}

// expired returns the deliveries whose lease ended before now (µs).
func (t *leaseTable) expired(now int64) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []string
	for id, l := range t.m {
		if l.until < now {
			out = append(out, id)
		}
	}
	return out
}

// ofEndpoint returns the leased deliveries of endpointID, except those in
// released, as a JSON array (for json_each), "[]" for none.
func (t *leaseTable) ofEndpoint(endpointID string, released map[string]bool) string {
	t.mu.RLock()
	var ids []string
	for id, l := range t.m {
		if l.endpoint == endpointID && !released[id] {
			ids = append(ids, id)
		}
	}
	t.mu.RUnlock()
	return jsonIDs(ids)
}

// overlay fills d's LeaseOwner and LeaseUntil from its lease, if any.
func (t *leaseTable) overlay(d *store.Delivery) {
	if l, ok := t.get(d.ID); ok {
		d.LeaseOwner, d.LeaseUntil = l.owner, fromMicro(l.until)
	}
}

func jsonIDs(ids []string) string {
	if len(ids) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(ids) // strings always encode
	return string(b)
}

// firstUnleasedDue returns the earliest next_attempt_at of a pending
// delivery that is not leased (rows of query, which yields id and
// next_attempt_at oldest due first); ok is false when there is none. It
// reads past the leased ones (at most the deliveries in flight).
func (s *Store) firstUnleasedDue(rows *sql.Rows, err error) (due int64, ok bool, _ error) {
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	s.leases.mu.RLock()
	defer s.leases.mu.RUnlock()
	var id sql.RawBytes // looked up without a copy
	for rows.Next() {
		s.claimSteps.Add(1)
		if err := rows.Scan(&id, &due); err != nil {
			return 0, false, err
		}
		if _, leased := s.leases.m[string(id)]; !leased {
			return due, true, nil
		}
	}
	return 0, false, rows.Err()
}

// ErrClaimLocked is returned (wrapped, with store.ErrUnavailable) by
// ClaimDeliveries when another process claims from the same database file:
// leases live in one process's memory, so two processes claiming would
// deliver everything twice.
var ErrClaimLocked = errors.New("another process claims deliveries from this SQLite database (one process per database file; use PostgreSQL for several nodes)")

// claimLockPath is the file whose lock the claiming process holds: the
// database's real path (symbolic links resolved, as SQLite resolves them
// for its -wal and -shm files, so two spellings of one database share one
// lock) with "-claims.lock" appended.
func claimLockPath(dbPath string) string {
	if real, err := filepath.EvalSymlinks(dbPath); err == nil {
		dbPath = real
	}
	return dbPath + "-claims.lock"
}

// takeClaimLock takes the claim lock at the first claim and, with it,
// clears the lease columns an earlier version of Herald may have left in
// the database (its process is gone: those deliveries are due again) and
// holds the pending deliveries of paused and disabled endpoints (the ones
// a dead process had in flight when their endpoint changed, or left
// between the chunks of a pause: holdRest), releases the held deliveries
// of enabled endpoints (left between the chunks of a resume), and deletes
// the deliveries of endpoints whose delete a dead process left unfinished
// (deleteRest), these moves in the background once the lock is taken,
// beside the claims (startFixUps). It
// is taken at the first claim, not at Open, so commands that open the
// database beside a running server (backup, rekey) are not refused. The
// lock is released by Close, or by the kernel when the process dies.
func (s *Store) takeClaimLock(ctx context.Context) error {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if s.claimLocked {
		return s.checkClaimLock()
	}
	lockPath := claimLockPath(s.path)
	var (
		f    *os.File
		held os.FileInfo
	)
	if l := s.preLock; l != nil && l.f != nil && !l.taken {
		// Taken before Open (LockClaims): its owner releases it if
		// this fails, so f is not closed here.
		f, held = l.f, l.info
		if cur, err := os.Stat(lockPath); err != nil || !os.SameFile(cur, held) {
			return fmt.Errorf("%w: %w", store.ErrUnavailable, ErrClaimLockLost)
		}
	} else {
		var err error
		f, err = os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("%w: claim lock: %w", store.ErrUnavailable, err)
		}
		if err := lockFile(f); err != nil {
			f.Close()
			if errors.Is(err, errLocked) {
				return fmt.Errorf("%w: %w", store.ErrUnavailable, ErrClaimLocked)
			}
			return fmt.Errorf("%w: claim lock %s: %w", store.ErrUnavailable, lockPath, err)
		}
		held, err = f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("%w: claim lock %s: %w", store.ErrUnavailable, lockPath, err)
		}
		if cur, err := os.Stat(lockPath); err != nil || !os.SameFile(cur, held) {
			// Deleted or replaced between the open and the lock: the lock
			// held is on a file nobody else will open.
			f.Close()
			return fmt.Errorf("%w: %w", store.ErrUnavailable, ErrClaimLockLost)
		}
	}
	closeF := func() { f.Close() }
	if s.preLock != nil && f == s.preLock.f {
		closeF = func() {} // its owner releases it (ClaimLock.Release)
	}
	tx, done, err := s.queueTx(ctx)
	if err != nil {
		closeF()
		return err
	}
	defer done()
	if _, err := tx.ExecContext(ctx, "UPDATE deliveries SET lease_owner = NULL, lease_until = NULL WHERE lease_owner IS NOT NULL"); err != nil {
		closeF()
		return err
	}
	// What the process before this one left, moved below after this
	// transaction, one chunk per transaction behind waiting publishes (not
	// in this one: after a crash in the middle of a pause of 200,000
	// deliveries it held the writer, and every publish, for seconds):
	//   - it may have died with deliveries in flight whose endpoint was
	//     paused or disabled meanwhile (the pause skipped them: in
	//     flight), or between the chunks of a pause (holdRest): its leases
	//     are gone with it, so the pending deliveries of paused and
	//     disabled endpoints are held, as the rescue of an expired lease
	//     does on a live node;
	//   - between the chunks of a resume (releaseRest) it left deliveries
	//     held under an enabled endpoint: they are released;
	//   - between the chunks of an endpoint's delete (deleteRest) it left
	//     the endpoint's mark and deliveries: they are deleted.
	// They run in the background, beside the claims (startFixUps).
	hold, err := queryIDs(ctx, tx, `SELECT id FROM endpoints WHERE state <> 'enabled'
		AND EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = endpoints.id AND state = 'pending')`)
	if err != nil {
		closeF()
		return err
	}
	release, err := queryIDs(ctx, tx, `SELECT id FROM endpoints WHERE state = 'enabled'
		AND EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = endpoints.id AND state = 'paused')`)
	if err != nil {
		closeF()
		return err
	}
	deleting, err := queryIDs(ctx, tx, "SELECT substr(key, ?1) FROM meta WHERE key GLOB ?2", len(deletingMetaPrefix)+1, deletingMetaPrefix+"*")
	if err != nil {
		closeF()
		return err
	}
	if err := tx.Commit(); err != nil {
		closeF()
		return err
	}
	done()
	if s.preLock != nil && f == s.preLock.f {
		s.preLock.taken = true // the store holds it now, until Close
	}
	s.claimLock, s.claimLockInfo, s.claimLocked = f, held, true
	s.claimHeld.Store(true)
	if len(hold)+len(release)+len(deleting) > 0 {
		now := micro(time.Now())
		s.inBackground(func(ctx context.Context) { s.startFixUps(ctx, hold, release, deleting, now) })
	}
	return nil
}

// startFixUps finishes, in the store's background (inBackground), what
// the process before this one left (takeClaimLock): it holds the pending
// deliveries of the endpoints hold, releases the held ones of release and
// deletes those of the deleted endpoints deleting, one chunk per
// transaction. It runs beside the claims, not before them: finishing the
// delete of a million deliveries first took 13 s on an idle machine, the
// node delivering nothing meanwhile (and the claimer's claim timing out
// past 30 s). Meanwhile a claim that meets a delivery of a paused or
// disabled endpoint holds it (loadClaims), one that meets a delivery of a deleted
// endpoint deletes it, and held deliveries of an enabled endpoint wait
// for their release. A failed move does not stop the others, and is
// retried (retry: from s.retryWait, doubling up to a minute) until it
// succeeds: no claim meets a held delivery, so a failed release left the
// deliveries of an enabled endpoint held, undelivered, until the next
// start. Close stops them all; the next start does the rest (the
// endpoints' states and the marks are still there).
func (s *Store) startFixUps(ctx context.Context, hold, release, deleting []string, now int64) {
	var moves []func(context.Context) error
	for _, id := range hold {
		moves = append(moves, func(ctx context.Context) error { _, err := s.holdRest(ctx, id, now); return err })
	}
	for _, id := range release {
		moves = append(moves, func(ctx context.Context) error { _, err := s.releaseRest(ctx, id, now); return err })
	}
	for _, id := range deleting {
		moves = append(moves, func(ctx context.Context) error { _, err := s.deleteRest(ctx, id); return err })
	}
	// Each move on its own: a failure does not stop the others.
	run := func(ctx context.Context) error {
		failed := moves[:0]
		var errs []error
		for _, m := range moves {
			if err := m(ctx); err != nil {
				failed = append(failed, m)
				errs = append(errs, err)
			}
		}
		moves = failed
		if len(moves) > 0 {
			return fmt.Errorf("%w: %w", errFixUpsLeft, errors.Join(errs...))
		}
		return nil
	}
	if err := run(ctx); err != nil {
		s.retry(ctx, "start-up fix-ups: finish the holds, releases and deletes a stop interrupted", err, run)
	}
}

// errFixUpsLeft reports start-up fix-ups (startFixUps) to retry.
var errFixUpsLeft = errors.New("start-up fix-ups left to retry")

// queryIDs answers the first column of query's rows on tx.
func queryIDs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// A ClaimLock is the claim lock of a database taken before the database
// is opened (LockClaims), so that a process refused by it has created
// nothing: herald serve takes it before it creates the key file or the
// database, and hands it to the store with WithClaimLock, whose first
// claim (ClaimExclusively) keeps it until Close.
type ClaimLock struct {
	f       *os.File
	info    os.FileInfo
	path    string
	created bool // the lock file did not exist before LockClaims
	taken   bool // by a store's takeClaimLock: it releases it at Close
}

// LockClaims takes the claim lock of the SQLite database at dbPath (the
// lock file claimLockPath(dbPath), created 0600 when missing) without
// waiting, and before anything else of the database is touched. While
// another process holds it — a herald serve on the database, or a herald
// restore to it (which holds it while no database is there yet) — it
// returns ErrClaimLocked (wrapped with store.ErrUnavailable and the lock
// file's name) and has created and changed nothing.
func LockClaims(dbPath string) (*ClaimLock, error) {
	lockPath := claimLockPath(dbPath)
	f, held, created, err := lockNamedFile(lockPath)
	switch {
	case errors.Is(err, errLocked):
		return nil, fmt.Errorf("%w: %w (%s is locked: a herald serve on this database, or a herald restore to it, holds it); nothing was created or changed", store.ErrUnavailable, ErrClaimLocked, lockPath)
	case errors.Is(err, errLockReplaced):
		return nil, fmt.Errorf("%w: claim lock %s: %w", store.ErrUnavailable, lockPath, ErrClaimLockLost)
	case err != nil:
		return nil, fmt.Errorf("%w: claim lock %s: %w", store.ErrUnavailable, lockPath, err)
	}
	return &ClaimLock{f: f, info: held, path: lockPath, created: created}, nil
}

// errLockReplaced: the lock file was replaced at its name while
// lockNamedFile locked it (the lock taken is on the old file).
var errLockReplaced = errors.New("the lock file was replaced while it was being locked")

// lockNamedFile opens the lock file lockPath, creating it 0600 when there
// is none (created), and takes its lock without waiting. It returns the
// file, locked, and its FileInfo; errLocked while another open file holds
// the lock (a file this call created is then left: it is that holder's
// lock now), errLockReplaced when another file took lockPath meanwhile (a
// lock on the old file would guard nothing), else the open's or the
// lock's error; on an error nothing is left open.
func lockNamedFile(lockPath string) (f *os.File, held os.FileInfo, created bool, err error) {
	created = true
	f, err = os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		created = false
		f, err = os.OpenFile(lockPath, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, nil, false, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, nil, false, err
	}
	held, err = f.Stat()
	if err == nil {
		var cur os.FileInfo
		if cur, err = os.Stat(lockPath); err == nil && !os.SameFile(cur, held) {
			err = errLockReplaced
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, false, err
	}
	return f, held, created, nil
}

// Release unlocks l unless a store took it (then the store's Close
// does). With failed true (the start was refused) a lock file LockClaims
// created is removed first, under the lock, so a refused start leaves
// nothing. Release is idempotent; nil is a no-op.
func (l *ClaimLock) Release(failed bool) {
	if l == nil || l.f == nil || l.taken {
		return
	}
	if failed && l.created {
		os.Remove(l.path) // under the lock: nobody else holds it
	}
	l.f.Close()
	l.f = nil
}

// WithClaimLock hands the store the claim lock its caller took before
// Open (LockClaims) for the path it opens: the store's first claim
// (ClaimExclusively) keeps it instead of taking one of its own, and Close
// releases it from then on.
func WithClaimLock(l *ClaimLock) Option {
	return func(s *Store) { s.preLock = l }
}

// ErrClaimLockLost is returned (wrapped, with store.ErrUnavailable) by
// ClaimDeliveries and Ping once the claim lock's file was deleted or
// replaced under the running process: another process could then take a
// lock of its own on a new file and claim the same deliveries, so this one
// stops claiming (its attempts in flight still complete) until it is
// restarted.
var ErrClaimLockLost = errors.New("the claim lock file was deleted or replaced while Herald runs, so another process could claim the same deliveries: this process stopped claiming (restart Herald; one process per database file)")

// checkClaimLock fails with ErrClaimLockLost when the claim lock this
// process holds is no longer the file at its path (one stat, before every
// claim and in Ping). Callers hold claimMu.
func (s *Store) checkClaimLock() error {
	if s.claimLock == nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, ErrClaimLockLost)
	}
	if cur, err := os.Stat(claimLockPath(s.path)); err != nil || !os.SameFile(cur, s.claimLockInfo) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, ErrClaimLockLost)
	}
	return nil
}

// releaseClaimLock closes the claim lock's file (releasing the lock).
func (s *Store) releaseClaimLock() error {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if s.claimLock == nil {
		return nil
	}
	s.claimHeld.Store(false)
	err := s.claimLock.Close()
	s.claimLock = nil
	return err
}
