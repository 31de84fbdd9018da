package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ClaimStatus is the outcome of [IdempotencyStore.Claim].
type ClaimStatus int

const (
	// ClaimAcquired: the caller now holds the key (for the lease given to
	// Claim) and must end the claim with Complete or Release.
	ClaimAcquired ClaimStatus = iota + 1
	// ClaimInProgress: another caller holds an unexpired claim on the key;
	// its outcome is not known yet.
	ClaimInProgress
	// ClaimCompleted: the key was completed and its record has not expired;
	// the message is a duplicate.
	ClaimCompleted
)

// String returns "acquired", "in progress" or "completed".
func (s ClaimStatus) String() string {
	switch s {
	case ClaimAcquired:
		return "acquired"
	case ClaimInProgress:
		return "in progress"
	case ClaimCompleted:
		return "completed"
	default:
		return fmt.Sprintf("ClaimStatus(%d)", int(s))
	}
}

// IdempotencyStore remembers which event ids a receiver has taken on, so
// that a redelivered event is processed at most once while its record lives
// (delivery is at least once; the event id is the idempotency key).
//
// A key goes through two states: in progress (claimed, for a short lease)
// and completed (kept for a long TTL). A key without an unexpired record is
// free. The lease protects against a crash between Claim and
// Complete/Release: the claim then lapses by itself and the sender's next
// retry can claim it again.
//
// Implementations must be safe for concurrent use, and Claim must be atomic:
// of any number of concurrent Claim calls on a free key, exactly one
// returns [ClaimAcquired] (across every process sharing the store). This
// package has [NewMemoryStore]; packages sqlstore (SQLite, PostgreSQL) and
// redisstore hold shared implementations, and package storetest has the
// conformance tests every implementation should pass.
//
// Keys are non-empty strings of at most a few hundred bytes; durations must
// be positive. Records are deleted by Release, or expire; an implementation
// may delete expired records lazily.
type IdempotencyStore interface {
	// Claim atomically takes key for lease if it is free (no record, or an
	// expired one) and returns ClaimAcquired; otherwise it changes nothing
	// and returns ClaimInProgress or ClaimCompleted. An error means the
	// outcome is unknown; the caller must not process the message.
	Claim(ctx context.Context, key string, lease time.Duration) (ClaimStatus, error)

	// Complete marks key completed and keeps its record for ttl from now,
	// whatever its previous state (a record that lapsed meanwhile is
	// recreated, since the work it guards did happen).
	Complete(ctx context.Context, key string, ttl time.Duration) error

	// Release deletes the record of key, whatever its state, so that the
	// next Claim acquires it. Releasing a free key is not an error.
	Release(ctx context.Context, key string) error
}

// Argument errors of MemoryStore.
var (
	errEmptyKey    = errors.New("webhook: idempotency key is empty")
	errBadDuration = errors.New("webhook: lease/ttl must be positive")
)

// checkClaimArgs returns an error when key is empty or d is not positive.
func checkClaimArgs(key string, d time.Duration) error {
	if key == "" {
		return errEmptyKey
	}
	if d <= 0 {
		return fmt.Errorf("%w: got %v", errBadDuration, d)
	}
	return nil
}

// MemoryStore is an [IdempotencyStore] in process memory: a map guarded by
// one mutex. It suits tests and a receiver running as a single process; its
// records do not survive a restart and are not shared between processes.
//
// Atomicity: Claim reads and writes the map under the mutex, so concurrent
// claims are serialized and exactly one finds a free key. Expired records
// count as free on access and are swept from the map at most once a minute
// (during a Claim), so memory is bounded by the records of the last TTL.
type MemoryStore struct {
	// Now returns the current time; nil means time.Now. Set it before first
	// use (tests use it to move time forward).
	Now func() time.Time

	mu        sync.Mutex
	records   map[string]memRecord
	nextSweep time.Time
}

type memRecord struct {
	completed bool
	expires   time.Time
}

// sweepInterval is how often MemoryStore drops expired records.
const sweepInterval = time.Minute

// NewMemoryStore returns an empty [MemoryStore].
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: make(map[string]memRecord)}
}

func (m *MemoryStore) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Claim implements [IdempotencyStore.Claim].
func (m *MemoryStore) Claim(ctx context.Context, key string, lease time.Duration) (ClaimStatus, error) {
	if err := checkClaimArgs(key, lease); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = make(map[string]memRecord)
	}
	if !now.Before(m.nextSweep) {
		for k, r := range m.records {
			if !now.Before(r.expires) {
				delete(m.records, k)
			}
		}
		m.nextSweep = now.Add(sweepInterval)
	}
	if r, ok := m.records[key]; ok && now.Before(r.expires) {
		if r.completed {
			return ClaimCompleted, nil
		}
		return ClaimInProgress, nil
	}
	m.records[key] = memRecord{expires: now.Add(lease)}
	return ClaimAcquired, nil
}

// Complete implements [IdempotencyStore.Complete].
func (m *MemoryStore) Complete(ctx context.Context, key string, ttl time.Duration) error {
	if err := checkClaimArgs(key, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = make(map[string]memRecord)
	}
	m.records[key] = memRecord{completed: true, expires: now.Add(ttl)}
	return nil
}

// Release implements [IdempotencyStore.Release].
func (m *MemoryStore) Release(ctx context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, key)
	return nil
}
