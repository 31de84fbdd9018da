package store

import (
	"context"
	"sync/atomic"
	"time"
)

// Capabilities are the optional features of a driver, declared by the
// driver (Store.Capabilities) instead of guessed from its concrete type:
// a new driver does not compile until it says which it has. Each named
// interface below is asserted at compile time by the drivers that have it.
type Capabilities struct {
	// Wakeups, when not nil, tells this node at once when another node
	// published (PostgreSQL LISTEN/NOTIFY); without it the engine polls.
	Wakeups Notifier
	// Membership, when not nil, is the table of live nodes of a database
	// several nodes share (PostgreSQL): the engine splits each endpoint's
	// concurrency cap and rate limit between them.
	Membership Membership
	// Nodes, when not nil, lists the live nodes (herald rekey warns about
	// them).
	Nodes NodeLister
	// Claimers is how many claim loops and completion writers the engine
	// should run against the store: 1 (also for 0) when a claim is a local
	// call (SQLite), 2 where each is a network round trip, so one loop
	// keeps the workers fed while the other waits (PostgreSQL).
	Claimers int
	// Exclusive, when not nil, is a store one process claims from at a
	// time (SQLite: leases live in that process's memory). A node takes it
	// before it serves, so a second process on the same database stops at
	// start with a clear error instead of running without delivering.
	Exclusive ExclusiveClaimer
	// HeaderSealer, when not nil, seals the endpoint header values an
	// earlier version stored in clear; a node calls it at start, once its
	// encryption key is proven right (both drivers have it).
	HeaderSealer ClearHeaderSealer
	// Sealed, when not nil, reads and rewrites the values encrypted at rest
	// (SealedColumns) for herald rekey (Rekey); a store without it cannot
	// be rekeyed (both drivers have it).
	Sealed SealedStore
	// HandOff, when not nil, leases the deliveries a publish creates to
	// this process's engine as the publish commits, so that they need no
	// claim (SQLite: in the process's memory, on the publish group's
	// transaction; PostgreSQL: in the inserted rows, to this node).
	HandOff HandOffer
	// EndpointChanges, when not nil, counts this store's changes to what an
	// attempt takes from an endpoint (its URL, headers, secrets or state,
	// or its deletion), moving before each such change commits; only a
	// store whose every write goes through this process can have it
	// (SQLite). The engine then claims ahead during a backlog: a claim that
	// waited for a worker is attempted with its endpoint as claimed when the
	// count has not moved since the claim, and read again otherwise.
	EndpointChanges func() uint64
	// Renewer, when not nil, renews a claim's lease without a write to the
	// database (SQLite: leases live in the process's memory). With
	// EndpointChanges it lets the engine claim ahead: a claim that waited
	// in line gets a fresh lease at its turn.
	Renewer LeaseRenewer
	// AdminLock, when not nil, is a lock shared by every process on the
	// database (PostgreSQL: an advisory lock), which the API holds across
	// its check that a revocation leaves an admin key and the revocation
	// itself, so that two nodes revoking the last two admin keys at once
	// cannot both pass. A store one process owns (SQLite) needs none: the
	// API's own mutex serializes it.
	AdminLock AdminKeyLocker
}

// AdminKeyLocker is the cross-process admin-key lock
// (Capabilities.AdminLock).
type AdminKeyLocker interface {
	// LockAdminKeys waits for the lock (or ctx's end: ctx's error, nothing
	// held) and returns the function that releases it; the lock is also
	// released if this process loses its connection or dies.
	LockAdminKeys(ctx context.Context) (unlock func(), err error)
}

// ExclusiveClaimer is the one-claiming-process capability
// (Capabilities.Exclusive).
type ExclusiveClaimer interface {
	// ClaimExclusively takes the store's one-process claim lock (held until
	// Close, or until the process dies). It returns an error wrapping
	// ErrUnavailable, naming the rule, when another process holds it.
	ClaimExclusively(ctx context.Context) error
}

// Notifier is the wake-up capability (Capabilities.Wakeups).
type Notifier interface {
	// Listen calls onNotify whenever a publish on any node commits, until
	// ctx ends (it reconnects by itself meanwhile); it returns ctx's error.
	Listen(ctx context.Context, onNotify func()) error
}

// NodeLister is the capability of listing live nodes (Capabilities.Nodes).
type NodeLister interface {
	// LiveNodes returns the ids of the nodes whose heartbeat is current.
	LiveNodes(ctx context.Context) ([]string, error)
}

// ClearHeaderSealer is the capability of sealing endpoint header values an
// earlier version stored in clear (SealHeaders; Capabilities.HeaderSealer).
type ClearHeaderSealer interface {
	// SealClearHeaders seals every clear header value and returns how many
	// endpoints it changed.
	SealClearHeaders(ctx context.Context) (int, error)
}

// Membership is the capability of a database several Herald nodes share
// (Capabilities.Membership; the PostgreSQL driver). The delivery engine
// uses it to split each endpoint's concurrency cap and rate limit between
// the live nodes, so that the limits hold for the cluster as a whole
// (ARCHITECTURE.md, "Limits across nodes").
type Membership interface {
	// Heartbeat records that the node is alive at the database's current
	// time, with its heartbeat interval and attempt timeout; forgets every
	// node not seen for NodeTTLIntervals of its own intervals; and returns
	// the live nodes (the caller included), sorted by id. ErrInvalid for an
	// empty id or an interval or timeout that is not positive.
	Heartbeat(ctx context.Context, self Node) ([]Node, error)
	// Leave removes the node from the live nodes at once (a clean
	// shutdown); leaving twice, or without a heartbeat, is not an error.
	Leave(ctx context.Context, id string) error
}

// Node is one Herald node of a shared database, as its heartbeat describes
// it. Nodes may run with different intervals and timeouts: each is judged
// by its own.
type Node struct {
	ID                string        // the engine's lease owner ("node_…")
	HeartbeatInterval time.Duration // time between its heartbeats
	AttemptTimeout    time.Duration // the longest its attempts run
}

// NodeTTLIntervals is how many of its own heartbeat intervals a node stays
// live without a heartbeat.
const NodeTTLIntervals = 10

// HandOffer is the hand-off capability (Capabilities.HandOff): the
// driver leases the deliveries a publish creates due now to this process's
// engine as the publish commits, so that they need no claim. A delivery
// handed off is leased exactly as a claim leases it
// (owner, lease duration, at-least-once after a crash); the engine still
// decides on it (caps, circuit, rate limit) before its attempt.
type HandOffer interface {
	// SetHandOff installs h (nil: none). A driver with the
	// ExclusiveClaimer capability hands nothing off until this process
	// holds the claim lock (its first claim, or
	// ExclusiveClaimer.ClaimExclusively, which a node takes before it
	// serves). Publishes on a caller's transaction are never handed off.
	SetHandOff(h HandOff)
}

// HandOff is the engine's side of a hand-off.
type HandOff interface {
	// Reserve asks for up to n idle workers for deliveries of tenant due
	// now and returns how many it took, without waiting (0: leave them to
	// the claims: the engine is draining a backlog, the tenant is at its
	// cap, or no worker is idle). It is called with the single writer
	// held, so it must not block or call the store. Every positive
	// reservation is followed by exactly one Take.
	Reserve(tenant string, n int) int
	// Lease is the owner of the leases a hand-off records and when they
	// end, as a claim's (ClaimParams Owner, Now + Lease, on the engine's
	// clock).
	Lease() (owner string, until time.Time)
	// Take receives the claims of one reservation of n workers:
	// len(claims) <= n; the others (their read failed: their leases are
	// dropped, the deliveries left to the claims) are given back.
	Take(claims []Claim, n int)
}

// HandOffSlot holds a driver's HandOff (HandOffer.SetHandOff), safe for
// concurrent use; the zero value holds none.
type HandOffSlot struct{ p atomic.Pointer[handOffBox] }

type handOffBox struct{ h HandOff }

// Set installs h (nil: none).
func (s *HandOffSlot) Set(h HandOff) {
	if h == nil {
		s.p.Store(nil)
		return
	}
	s.p.Store(&handOffBox{h: h})
}

// Get returns the HandOff installed, or nil.
func (s *HandOffSlot) Get() HandOff {
	if b := s.p.Load(); b != nil {
		return b.h
	}
	return nil
}

// LeaseRenewer renews claims' leases (Capabilities.Renewer).
type LeaseRenewer interface {
	// RenewLease moves the end of a delivery's lease from p.Until to
	// p.NewUntil, if it is still the lease p.Owner took until p.Until and
	// has not ended at p.Now (true), and answers false otherwise: the
	// delivery was completed, its lease was rescued (and maybe taken
	// again), or it ended (a rescue may free it at any moment). The
	// completion of an attempt made under the renewed lease names
	// p.NewUntil.
	RenewLease(ctx context.Context, p RenewLeaseParams) (bool, error)
}

// RenewLeaseParams names a lease and its new end (LeaseRenewer).
type RenewLeaseParams struct {
	DeliveryID string
	Owner      string
	Until      time.Time // the lease's end as the claim returned it
	NewUntil   time.Time
	Now        time.Time // a lease that ended before Now is not renewed
}
