package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// VersionGate drops out-of-order thin events. Herald does not guarantee
// order (the Herald contract, docs/contract.md, "order"): an event of a
// catalogued type that declares a resource_id carries "sequence" (read it
// with [Sequence]), which grows with each event of its resource; Herald
// adds no version to other events, so when order matters their producer
// puts its own in data (e.g. data.version). A receiver asks the gate
// before acting on an event and ignores stale ones, then fetches the
// resource's current state rather than trusting the payload.
//
// Check records version for resourceID if it is newer than every version
// recorded before for that id and reports fresh = true; an older or equal
// version changes nothing and reports fresh = false (equal: a redelivery of
// an event already let through). The first version seen for an id is
// always fresh. Implementations must be safe for concurrent use and make
// the compare-and-set atomic: of concurrent checks of one id with the same
// version at most one is fresh, and the recorded version never decreases.
// An error means nothing is known; treat the event as not processed.
//
// Caution: the gate advances when Check returns. If the work that follows
// fails and the sender retries the same event, the retry is reported stale.
// Either make the work after a fresh verdict unable to fail for good (fetch
// the current state and store it idempotently, retrying internally), or
// advance the gate in the same database transaction as the work
// (sqlstore.VersionGate.CheckTx), so a rollback undoes both.
//
// This package has [NewMemoryVersionGate]; package sqlstore has a
// SQLite/PostgreSQL one; package storetest has conformance tests.
type VersionGate interface {
	Check(ctx context.Context, resourceID string, version int64) (fresh bool, err error)
}

// errEmptyResource is returned by MemoryVersionGate for an empty id.
var errEmptyResource = errors.New("webhook: version gate resource id is empty")

// MemoryVersionGate is a [VersionGate] in process memory: a map from
// resource id to the newest version, guarded by a mutex (which makes each
// Check atomic). It never forgets an id, so memory grows with the number of
// distinct resources; it suits tests and single-process receivers with a
// bounded set of resources.
type MemoryVersionGate struct {
	mu       sync.Mutex
	versions map[string]int64
}

// NewMemoryVersionGate returns an empty [MemoryVersionGate].
func NewMemoryVersionGate() *MemoryVersionGate {
	return &MemoryVersionGate{versions: make(map[string]int64)}
}

// Check implements [VersionGate.Check]. The error is non-nil only for an
// empty resourceID or a done ctx.
func (g *MemoryVersionGate) Check(ctx context.Context, resourceID string, version int64) (bool, error) {
	if resourceID == "" {
		return false, errEmptyResource
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.versions == nil {
		g.versions = make(map[string]int64)
	}
	if cur, ok := g.versions[resourceID]; ok && version <= cur {
		return false, nil
	}
	g.versions[resourceID] = version
	return true, nil
}

// Sequence reads the "sequence" of a Herald event body: the number Herald
// gives each event of a catalogued type that declares a resource_id, per
// (tenant, type, resource id), strictly increasing in commit order with no
// gaps (docs/contract.md, "Sequence numbers"; also sent as the unsigned
// header X-Event-Sequence — read it from the signed body). It is a version
// for [VersionGate]: gate.Check(ctx, resourceID, seq) lets each event
// through once and in order, without the producer keeping versions.
// ok is false when the body has no sequence.
func Sequence(body []byte) (seq int64, ok bool) {
	var env struct {
		Sequence *int64 `json:"sequence"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Sequence == nil || *env.Sequence < 1 {
		return 0, false
	}
	return *env.Sequence, true
}
