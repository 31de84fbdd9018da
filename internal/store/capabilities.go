package store

import "context"

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

// ClearHeaderSealer is implemented by drivers that can seal endpoint
// header values an earlier version stored in clear (SealHeaders); both
// drivers do, and assert it.
type ClearHeaderSealer interface {
	// SealClearHeaders seals every clear header value and returns how many
	// endpoints it changed.
	SealClearHeaders(ctx context.Context) (int, error)
}
