// Package store defines Herald's storage contract: the domain records
// (endpoints, events, deliveries, attempts), the Store interface every
// database driver implements, and the errors drivers return.
//
// The deliveries table is the delivery queue. A delivery is claimed by a
// worker with a lease (LeaseOwner, LeaseUntil); completing it clears the lease
// and writes the attempt; a rescuer clears leases that expired because their
// owner crashed, so the delivery becomes claimable again. Where the lease
// is kept is the driver's: in the row (postgres, where nodes share the
// queue: it outlives the process until it expires and is rescued) or in
// the process's memory (sqlite, one process per database: it ends with the
// process, and the delivery is due at once after a restart). Either way
// nothing claimed and not completed is lost (storetest.Restart). Drivers
// live in sub-packages (sqlite, postgres) and all pass the conformance
// suite in storetest.
package store

import (
	"context"
	"strings"
	"time"
)

// EndpointState is the state of an endpoint.
type EndpointState string

// Endpoint states (the states docs/operations.md documents).
const (
	EndpointEnabled  EndpointState = "enabled"  // deliveries are attempted
	EndpointPaused   EndpointState = "paused"   // paused by its owner; new deliveries are held
	EndpointDisabled EndpointState = "disabled" // disabled by Herald (410 Gone, or failing for days); new deliveries are held
)

// DeliveryState is the state of a delivery.
type DeliveryState string

// Delivery states (the states docs/operations.md documents).
const (
	DeliveryPending   DeliveryState = "pending"   // waiting for its next attempt (or in flight, when leased)
	DeliverySucceeded DeliveryState = "succeeded" // a 2xx was received
	DeliveryDead      DeliveryState = "dead"      // in the dead-letter queue
	DeliveryPaused    DeliveryState = "paused"    // held because its endpoint is paused or disabled
)

// Valid reports whether s is one of the four delivery states.
func (s DeliveryState) Valid() bool {
	switch s {
	case DeliveryPending, DeliverySucceeded, DeliveryDead, DeliveryPaused:
		return true
	}
	return false
}

// Endpoint is a receiver URL owned by a tenant.
type Endpoint struct {
	ID                 string            // "ep_…"
	Tenant             string            // owner key chosen by the producer
	URL                string            // validated by the egress policy before it is stored
	Description        string            //
	EventTypes         []string          // filter patterns ("file.*", "invoice.paid"); empty = all
	Headers            map[string]string // custom headers sent with every attempt
	RateLimitPerSecond int               // 0 = unlimited
	State              EndpointState     //
	StateReason        string            // why the state last changed ("gone", "paused by owner", …)
	Secrets            []Secret          // newest first; Secrets[0] is the current secret
	FailingSince       time.Time         // start of the current streak of failed attempts; zero after a success
	Kind               string            // "" for a tenant's endpoint; "source" for an inbound source's forwarding endpoint (operator-set destination, exempt from the tenant URL policy)
	// Versions pins, per catalogued event type, the version of the event
	// the endpoint receives (event type name → version ≥ 1); a type not
	// named gets the version the event was published with (the newest).
	Versions  map[string]int
	CreatedAt time.Time //
	UpdatedAt time.Time //
	// Unreadable names the sealed values of the row that did not open
	// with the store's keys ("secrets", "headers.<Name>"; sorted), which
	// the endpoint is then without: set on the endpoints of ListEndpoints
	// and on UnreadableError.Endpoint only (every other read of such an
	// endpoint fails), nil otherwise. Nothing may sign with such an
	// endpoint.
	Unreadable []string
}

// Secret is one signing secret of an endpoint. ExpiresAt is zero for the
// current secret and set for an old secret kept valid during a rotation
// overlap.
type Secret struct {
	Value     string // "whsec_" + base64 of 32 bytes
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ActiveSecrets returns the secrets that sign an attempt made at now: the
// current one and every old one whose overlap has not ended.
func (e *Endpoint) ActiveSecrets(now time.Time) []string {
	out := make([]string, 0, len(e.Secrets))
	for _, s := range e.Secrets {
		if s.ExpiresAt.IsZero() || now.Before(s.ExpiresAt) {
			out = append(out, s.Value)
		}
	}
	return out
}

// Event is one published fact. Body holds the exact bytes sent on every
// attempt: {"id","type","tenant","occurred_at","data"}.
type Event struct {
	ID             string            // "evt_…" or the producer's own id
	Tenant         string            //
	Type           string            // e.g. "file.extraction.completed"
	OccurredAt     time.Time         //
	Body           []byte            // JSON, at most the configured payload cap
	IdempotencyKey string            // the Idempotency-Key header, "" when none
	Fingerprint    string            // hash of (tenant, type, data): detects an id or key reused with other content
	Headers        map[string]string // headers forwarded with the body (inbound events: the provider's; catalogued events with a sequence: X-Event-Sequence)
	// VersionBodies are the bodies of the event's older versions (version →
	// exact bytes), for endpoints that pin one (Endpoint.Versions); nil for
	// an event published in one version only. Body is the newest version.
	VersionBodies map[int][]byte
	// Sequence is the event's number among the events of its type and
	// resource id (docs/contract.md, "Sequence numbers"); 0 when none.
	Sequence int64
	// TraceParent is the W3C Trace Context traceparent
	// (https://www.w3.org/TR/trace-context/#traceparent-header) the
	// publish carried, or the publish span's when tracing is on; "" when
	// none. Attempts' spans are its children, so they join the
	// publisher's trace on any node.
	TraceParent string
	CreatedAt   time.Time //
}

// FirstVersion is the first version of every catalogued event type (the
// catalog starts each type at 1 and versions only grow).
const FirstVersion = 1

// VersionOf is the version of catalogued event type typ that the endpoint
// receives (docs/contract.md, "Versions and pinning"): its pin, or, when
// it has none (a pattern or an empty filter that matched typ only after
// the endpoint was saved, or an endpoint older than the catalog),
// FirstVersion — what it would have been pinned to when typ first matched
// it, so a later incompatible version never reaches it unasked. Publish
// (which versions' data it requires) and delivery (which bytes it sends)
// both use this rule. For an uncatalogued type the answer is irrelevant:
// such events have no VersionBodies.
func (e Endpoint) VersionOf(typ string) int {
	if v := e.Versions[typ]; v > 0 {
		return v
	}
	return FirstVersion
}

// BodyFor returns the bytes to send to an endpoint that pins version v of
// the event's type (0: none pinned): the pinned version's body when the
// event has it, else Body.
func (e Event) BodyFor(v int) []byte {
	if b, ok := e.VersionBodies[v]; ok && v > 0 {
		return b
	}
	return e.Body
}

// Delivery is one event to one endpoint; its row is also its queue entry.
type Delivery struct {
	ID             string        // "dlv_…"
	EventID        string        //
	EndpointID     string        //
	Tenant         string        //
	EventType      string        //
	State          DeliveryState //
	Attempts       int           // attempts made so far
	ClientErrors   int           // attempts answered with a 3xx or a non-retryable 4xx
	NextAttemptAt  time.Time     // when the next attempt is due (pending only)
	LastStatusCode int           // 0 when no HTTP answer was received
	LastError      string        // error class of the last attempt, "" when it got an HTTP answer
	ReplayBase     int           // Attempts when the delivery was last replayed: the retry budget counts from here
	LeaseOwner     string        // worker holding the lease, "" when none
	LeaseUntil     time.Time     // zero when not leased
	CreatedAt      time.Time     //
	// UpdatedAt is the time of the delivery's last change the API shows
	// (publish, attempt, pause, resume, replay). A claim does not move it:
	// leases are bookkeeping, as deferrals and lease rescues already were
	// (a claim used to move it, which cost two index writes per delivery
	// in a SQLite drain).
	UpdatedAt time.Time
}

// Attempt is one HTTP try of a delivery.
type Attempt struct {
	DeliveryID      string        //
	Number          int           // 1-based
	StartedAt       time.Time     //
	Duration        time.Duration //
	StatusCode      int           // 0 when no HTTP answer was received
	Error           string        // error class: "", "timeout", "dns", "blocked", "redirect", …
	ErrorDetail     string        // short human explanation, never internal addresses
	Location        string        // Location header of a 3xx (never followed)
	ResponseExcerpt string        // at most 4 KiB of the response body
}

// Page is a cursor-paginated list. NextCursor is "" on the last page.
type Page[T any] struct {
	Data       []T
	NextCursor string
}

// ListParams pages a list, newest first. Cursor is the NextCursor of the
// previous page ("" for the first page): an opaque, driver-defined string
// (a driver answers ErrInvalid for one it did not issue). Limit is 1–1000.
type ListParams struct {
	Limit  int
	Cursor string
}

// PageSize is Limit within 1–1000; 0 or less means 50.
func (p ListParams) PageSize() int {
	if p.Limit <= 0 {
		return 50
	}
	return min(p.Limit, 1000)
}

// Paginate turns up to PageSize+1 rows (drivers read one more than a page)
// into a page: the rows of the page, and the cursor of its last row when
// there is a next page. cursor names a row's position in the order.
func Paginate[T any](items []T, size int, cursor func(T) string) Page[T] {
	pg := Page[T]{Data: items}
	if pg.Data == nil {
		pg.Data = []T{}
	}
	if len(items) > size {
		pg.Data = items[:size]
		pg.NextCursor = cursor(items[size-1])
	}
	return pg
}

// EventTypeLister is the catalog's list of a Store.
type EventTypeLister interface {
	ListEventTypes(ctx context.Context, p ListParams) (Page[EventType], error)
}

// AllEventTypes reads the whole catalog, by name, in pages of the largest
// size (1,000 types): for the readers that need every type (the contract,
// an endpoint's subscriptions). Types created or removed while it reads
// may be missed or seen; each page is read as of its own moment.
func AllEventTypes(ctx context.Context, l EventTypeLister) ([]EventType, error) {
	var out []EventType
	p := ListParams{Limit: 1000}
	for {
		pg, err := l.ListEventTypes(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, pg.Data...)
		if pg.NextCursor == "" {
			if out == nil {
				out = []EventType{}
			}
			return out, nil
		}
		p.Cursor = pg.NextCursor
	}
}

// CreateEndpointParams creates an endpoint. ID and the first secret are
// chosen by the caller.
type CreateEndpointParams struct {
	Endpoint Endpoint
	// MaxPerTenant, when positive, refuses the endpoint with ErrLimit if
	// its tenant already has this many (checked atomically with the
	// insert).
	MaxPerTenant int
	// Notice records endpoint.created (at Endpoint.CreatedAt) in the
	// notices outbox, in the same transaction.
	Notice bool
}

// DeleteEndpointParams deletes an endpoint. Notice records
// endpoint.deleted at Now in the notices outbox, in the same transaction,
// with a snapshot of the endpoint (the row is gone afterwards).
type DeleteEndpointParams struct {
	ID     string
	Notice bool
	Now    time.Time
}

// UpdateEndpointParams changes an endpoint; nil fields are left unchanged.
type UpdateEndpointParams struct {
	ID                 string
	URL                *string
	Description        *string
	EventTypes         *[]string
	Versions           *map[string]int
	Headers            *map[string]string
	RateLimitPerSecond *int
	Now                time.Time
	// Notice records endpoint.updated (at Now, with the endpoint as
	// updated) in the notices outbox, in the same transaction.
	Notice bool
	// ReplaceUnreadable: when the stored values that do not open are
	// custom header values only (OnlyHeadersUnreadable) and Headers is
	// set, Headers replace the stored headers whole (as any update naming
	// Headers does) instead of the update failing with the
	// *UnreadableError. The API sets it only on a node whose own key check
	// passes, as for RotateSecretParams.ReplaceUnreadable. Any other
	// update of an endpoint whose values do not open fails with that error
	// and changes nothing.
	ReplaceUnreadable bool
}

// ListEndpointsParams lists endpoints, optionally of one tenant. Sources'
// forwarding endpoints are listed only when IncludeSources is set.
type ListEndpointsParams struct {
	Tenant         string
	IncludeSources bool
	// OnlySources lists only inbound sources' forwarding endpoints (Kind
	// EndpointKindSource); it implies IncludeSources.
	OnlySources bool
	ListParams
}

// PublishParams stores an event and fans it out: one delivery per enabled
// endpoint of the tenant whose filter matches the type (state pending, due
// at Now) and one held delivery (state paused) per paused or disabled
// matching endpoint. NewDeliveryID makes delivery ids.
type PublishParams struct {
	Event         Event
	Now           time.Time
	NewDeliveryID func() string
	// ExcludeEndpointID gets no delivery even if it matches (the subject
	// of an operational event).
	ExcludeEndpointID string
	// IDFromClient: the producer chose Event.ID. An idempotency key already
	// used for an event with another id is then a conflict.
	IDFromClient bool
	// SequenceKey, when set, numbers the event: the driver increments the
	// counter of this key in the publish's transaction (only when the event
	// is new), so numbers of one key are 1, 2, 3… without gaps and strictly
	// increasing in commit order, and writes the number into Event.Body and
	// every VersionBodies entry (SetSequence) and the X-Event-Sequence
	// header. The key is (tenant, type, resource id): SequenceKeyOf.
	SequenceKey string
	// FanOutChunk is the most deliveries the publish's own transaction
	// creates; 0 means DefaultFanOutChunk. An event matching more endpoints
	// gets the first FanOutChunk (by endpoint id) in the publish and the
	// rest from the engine, chunk by chunk (ContinueFanOut).
	FanOutChunk int
	// CatalogRevision, when not nil, is the catalog entry the caller
	// checked the event against: the event type's Revision, or 0 when the
	// type was not catalogued. The driver compares it with the stored entry
	// in the publish's transaction, before the event is written, and
	// answers ErrStaleCatalog (nothing stored) when it differs: the caller
	// then checks the event again against a fresh GetEventType. Event types
	// are never deleted and every change increments Revision, so an equal
	// revision means the checks read what the catalog holds at commit. nil:
	// the publish is not checked against the catalog (Herald's own events).
	// A type that is not catalogued but differs only in case from one that
	// is (File.updated, file.updated) is never current: the caller refuses
	// it (docs/contract.md, "Event types and versions"), so a check that
	// found it uncatalogued is stale.
	CatalogRevision *int
}

// DefaultFanOutChunk is the default bound on the deliveries one transaction
// creates (PublishParams.FanOutChunk, FanOutParams.Chunk): a publish to at
// most this many endpoints is written in full by its own transaction, as
// before chunking; a larger one holds the writer for one chunk at a time.
const DefaultFanOutChunk = 500

// FanOutParams drive ContinueFanOut.
type FanOutParams struct {
	// Chunk is the most endpoints one call reads (and so deliveries it
	// creates); 0 means DefaultFanOutChunk.
	Chunk int
	// Now stamps the created deliveries (due at once); zero is time.Now.
	Now time.Time
	// NewDeliveryID makes the deliveries' ids; nil makes "dlv_" ids.
	NewDeliveryID func() string
	// After is the event id of the fan-out the caller advanced last (""
	// at first): the call takes the first fan-out after it in event id
	// order, wrapping around, so unfinished fan-outs (of any tenants)
	// advance in turn, one chunk each, and a small one is not queued
	// behind a giant one.
	After string
}

// FanOutResult tells what one ContinueFanOut call did.
type FanOutResult struct {
	// EventID is the event whose fan-out advanced ("" when none was
	// waiting).
	EventID string
	// Created counts the deliveries created; Pending those due now.
	Created, Pending int
	// Done: that event's fan-out is complete (its row removed).
	Done bool
	// More: fan-outs remain (this one or others) after this call.
	More bool
}

// PublishResult tells what PublishEvent did. Created is false when an event
// with the same id, or the same tenant and idempotency key, already existed:
// then Event is the original and no delivery was added.
type PublishResult struct {
	Event Event
	// Deliveries counts the endpoints the event matched when it was
	// published: one delivery each. When they exceed the fan-out chunk
	// (PublishParams.FanOutChunk) only the first chunk exists when
	// PublishEvent returns; the engine creates the others (ContinueFanOut).
	// For an existing event it counts the deliveries that exist now.
	Deliveries int
	// FanOut: the publish left deliveries for the engine to create
	// (ContinueFanOut); the caller should wake the engine.
	FanOut bool
	// Pending counts the new deliveries due now (the rest are held for
	// paused or disabled endpoints): only they need a worker woken.
	Pending int
	// HandedOff counts the pending deliveries leased to this process's
	// engine as the publish committed (HandOffer): they need no claim, so
	// the engine is to be woken only when Pending > HandedOff.
	HandedOff int
	Created   bool
}

// CountPending counts the pending states among a publish's targets.
func CountPending(states []DeliveryState) int {
	n := 0
	for _, s := range states {
		if s == DeliveryPending {
			n++
		}
	}
	return n
}

// ListEventsParams lists events, optionally filtered.
type ListEventsParams struct {
	Tenant string
	Type   string
	ListParams
}

// ListDeliveriesParams lists deliveries of an endpoint or of an event,
// optionally in one state.
type ListDeliveriesParams struct {
	EndpointID string
	EventID    string
	Tenant     string
	State      DeliveryState
	EventType  string    // only this event type
	Since      time.Time // only deliveries last changed at or after this time (e.g. dead-lettered since)
	ListParams
}

// ClaimParams claims up to Limit due deliveries (state pending, NextAttemptAt
// <= Now, not leased, endpoint enabled) for Owner until Now+Lease, fairly
// across tenants:
//
//  1. the tenants with due deliveries are served in turn, in tenant order
//     starting after TenantCursor and wrapping around (round-robin; at most
//     Limit tenants per claim, at most ClaimTenantProbes·Limit tenants
//     looked at);
//  2. each of the k tenants found gets up to ceil(Limit/k) of its own
//     oldest due deliveries;
//  3. what is left of Limit (tenants with fewer due) is filled with the
//     oldest due deliveries of any tenant, so one tenant alone still gets
//     full batches.
//
// With SkipTenants, none of those tenants' deliveries is taken, in the
// round or in the fill, and a claim's cost does not grow with their
// backlog: the round steps over a skipped tenant with one index probe
// (not counted against ClaimTenantProbes), and the fill takes, oldest due
// first, from the tenants the round served and from the other tenants
// found among the first ClaimTenantProbes rows per delivery still wanted
// of the oldest due (besides those leased: the round may have run out of
// probes or of Limit before reaching them; a driver that knows its round
// went all the way round leaves that walk out).
//
// A tenant's new delivery is therefore claimed in the next claim whatever
// the backlog of the others. The result is sorted oldest due first.
// Among deliveries due at the same time (released by an enable or a
// replay) a tenant's come in creation order (by id: ids are time-sortable).
type ClaimParams struct {
	Owner string
	Limit int
	Lease time.Duration
	Now   time.Time
	// TenantCursor is the last tenant served by the previous claim (""
	// = start at the first tenant); see NextTenantCursor.
	TenantCursor string
	// SkipTenants are tenants none of whose deliveries the claim may take:
	// the caller's tenants at their cap of attempts in flight with no
	// endpoint exempt from it (the delivery engine's scheduler reports
	// them), whose claims would all be turned away and written back. It
	// is read only during the call; nil or empty = none. Keep it short (a
	// few tenants): drivers compare each tenant met against every entry.
	SkipTenants []string
	// SkipEndpoints are endpoints none of whose deliveries the claim may
	// take, in the round or in the fill: the delivery engine's endpoints
	// whose stored values did not open at an earlier claim, which it
	// leaves alone for a while (their deliveries stay pending, for a node
	// holding the key or for after the key is fixed). It is read only
	// during the call; nil or empty = none, and the claim's statements are
	// then the same as without the field. Drivers test each row they step
	// over against the set (one lookup of the row's endpoint), so a
	// skipped endpoint's due backlog costs each claim a step per row while
	// it stays due: the engine postpones it when no other claimer could
	// open it.
	SkipEndpoints []string
	// Unreadable, when not nil, is called during the claim, once for each
	// endpoint whose row the claim read but whose stored values do not
	// open or decode (an UnreadableError: secrets or a header value sealed
	// under a key this store's box does not hold, or a corrupted value),
	// with the deliveries of it the claim had taken. Whether it is set or
	// not, the claim leaves those deliveries out of its result, pending and
	// unleased (their leases given back at once, so that a node holding
	// the key may claim them), and does not fail: one endpoint's values
	// never stop the deliveries of the others.
	Unreadable func(UnreadableEndpoint)
	// Poisoned, when not nil, is called after the claim committed, once
	// for each delivery the claim dead-lettered instead of returning it
	// because its own stored row or its event's does not decode (a
	// PoisonedError; poisoned.go gives the rule). Whether it is set or
	// not, those deliveries are dead-lettered and the claim returns the
	// others and does not fail.
	Poisoned func(PoisonedDelivery)
}

// ClaimTenantProbes bounds the tenants a claim looks at (tenants whose
// claimable deliveries are all due later cost one index probe each) to
// this many times its Limit.
const ClaimTenantProbes = 4

// NextDueTenantProbes bounds the tenants NextDueAt looks at when it is
// given tenants to skip (see Store.NextDueAt).
const NextDueTenantProbes = 256

// NextTenantCursor is the TenantCursor for the claim after one that took
// claims: the tenant served last in that claim's round (greatest Turn), or
// cursor when the claim served no tenant in turn. Tenant order is the
// database's (its collation), so only drivers compare tenants.
func NextTenantCursor(cursor string, claims []Claim) string {
	turn := 0
	for _, c := range claims {
		if c.Turn > turn {
			turn, cursor = c.Turn, c.Delivery.Tenant
		}
	}
	return cursor
}

// Claim is a leased delivery with everything one attempt needs.
type Claim struct {
	Delivery Delivery
	Event    Event
	Endpoint Endpoint
	// Turn is the place (from 1) of the delivery's tenant in the claim's
	// round-robin round; 0 when the tenant was not in it (the fill).
	Turn int
}

// Completion is the result of one attempt and the delivery's next state.
// Drivers apply it only while the lease it was made under is still the
// delivery's: leased to Owner until LeaseUntil. Otherwise (the lease was
// rescued, and maybe the delivery claimed again, by another owner or by
// the same one: a new lease) the attempt is recorded but the delivery is
// left to its new lease, and a deferral changes nothing.
type Completion struct {
	DeliveryID string
	EndpointID string // the delivery's endpoint (for its failure streak)
	Owner      string
	// LeaseUntil is the end of the lease the attempt was made under: the
	// claim's Delivery.LeaseUntil, as the store returned it or as a
	// renewal moved it (LeaseRenewer). The zero time matches no lease.
	LeaseUntil      time.Time
	Attempt         Attempt
	State           DeliveryState // pending (retry), succeeded or dead
	NextAttemptAt   time.Time     // when State is pending
	ClientError     bool          // this attempt counts toward the client-error budget
	DisableEndpoint bool          // 410 Gone: disable the endpoint and hold its pending deliveries
	DisableReason   string
	// DisableAfter, when positive, disables the endpoint (with notice
	// endpoint.disabled) once its current failure streak is at least this
	// long — every attempt since FailingSince failed — and counts at least
	// DisableMinFailures failed attempts (this one included), so a single
	// failure after a quiet period does not disable it. A success resets
	// the streak.
	DisableAfter       time.Duration
	DisableMinFailures int
	// Deferred: no attempt was made (the endpoint was at its concurrency
	// cap, rate limit or open circuit); the delivery is only moved to
	// NextAttemptAt and its lease cleared. Attempt is ignored.
	Deferred bool
	Now      time.Time
}

// ClientErrors is what the completion adds to the delivery's client-error
// count: 1 for an attempt that counts toward the budget, else 0.
func (c Completion) ClientErrors() int {
	if c.ClientError {
		return 1
	}
	return 0
}

// DueAt is the delivery's next_attempt_at after the completion: NextAttemptAt
// for a retry (state pending), Now for a final state.
func (c Completion) DueAt() time.Time {
	if c.State != DeliveryPending {
		return c.Now
	}
	return c.NextAttemptAt
}

// SetEndpointStateParams changes an endpoint's state. To paused or
// disabled: its pending, unleased deliveries are held (paused). To enabled:
// its held deliveries are released (pending, due Now) and the failure
// streak is reset. Notice, when set, records an operational event to emit
// (e.g. "endpoint.enabled").
type SetEndpointStateParams struct {
	ID     string
	State  EndpointState
	Reason string
	Notice string
	Now    time.Time
}

// ReplayParams moves dead letters (or, explicitly, succeeded deliveries)
// back to pending, due Now, keeping their event id and attempt history.
// Either DeliveryID or EndpointID is set. Only deliveries in one of States
// are touched, so replaying what is already pending does nothing.
// Deliveries of an endpoint that is not enabled are held (paused) instead.
type ReplayParams struct {
	DeliveryID string
	EndpointID string
	States     []DeliveryState // default: dead only
	Since      time.Time       // only those last changed at or after Since
	Until      time.Time       // zero, or only those last changed before Until
	EventType  string          // only this event type
	Now        time.Time
}

// MoveParams names the deliveries MoveEndpointDeliveries moves: the
// endpoint's pending, unleased deliveries due from DueFrom to DueTo (both
// included; a zero DueFrom has no lower bound), only those not attempted
// since they were created or replayed if Unattempted, and at most Limit of
// them, the earliest due first, if Limit > 0; At is when they are due
// instead (with Limit, the i-th earliest, from 0, at At + i·Spacing in
// whole microseconds, or where it was if that is earlier: a pull-in never
// makes a delivery later).
type MoveParams struct {
	EndpointID     string
	DueFrom, DueTo time.Time
	At             time.Time
	// Unattempted leaves retries where their backoff put them.
	Unattempted bool
	// Limit > 0 also reads the rows through the queue's due index (the
	// window's rows, of every endpoint) rather than the endpoint's (all of
	// its pending rows): give a bounded window with it.
	Limit int
	// Spacing, with Limit, spaces the moved deliveries apart.
	Spacing time.Duration
}

// EndpointKindSource marks the forwarding endpoint of an inbound source.
const EndpointKindSource = "source"

// Source is an inbound provider configuration (the gateway's side). Config
// is opaque to the store (JSON owned by internal/inbound) and sealed at
// rest, because it holds the provider's secrets.
type Source struct {
	ID         string // "src_…"
	Name       string
	EndpointID string // its forwarding endpoint
	Config     []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Unreadable names the sealed values of the row that do not open on
	// this node (SourceConfigValue), Config then nil: set only on a
	// source a list shows (ListedSource) or an *UnreadableSourceError
	// carries.
	Unreadable []string
}

// CreateSourceParams creates a source and its forwarding endpoint (Kind
// "source", Tenant = source id) in one transaction.
type CreateSourceParams struct {
	Source   Source
	Endpoint Endpoint
}

// UpdateSourceParams changes a source; nil fields are left unchanged.
// DestinationURL changes its endpoint's URL. Config replaces the
// configuration whole, also one whose sealed value does not open (an
// *UnreadableSourceError); an update without Config of such a source
// fails with that error and changes nothing.
type UpdateSourceParams struct {
	ID             string
	Name           *string
	Config         *[]byte
	DestinationURL *string
	Now            time.Time
}

// RevokeSecretParams revokes one of an endpoint's older secrets (one kept
// valid by a rotation overlap) before its expiry.
type RevokeSecretParams struct {
	ID       string // the endpoint
	SecretID string // store.SecretID of the secret
	Now      time.Time
}

// RotateSecretParams rotates an endpoint's signing secret.
type RotateSecretParams struct {
	ID                string
	Secret            string
	PreviousExpiresAt time.Time
	Now               time.Time
	// ReplaceUnreadable: when the stored secrets do not open and the rest
	// of the row does (OnlySecretsUnreadable), Secret replaces them alone
	// (nothing of them can sign any more, so no overlap is kept) instead
	// of the rotation failing with the *UnreadableError. The API sets it
	// only on a node whose own key check passes: a node lacking the
	// current key would otherwise drop secrets the other nodes open.
	ReplaceUnreadable bool
}

// Roles of an API key (docs/operations.md, "Keys, roles and tenants").
const (
	RoleAdmin     = "admin"     // every tenant, sources, API keys, portal sessions
	RoleManager   = "manager"   // its tenant's endpoints, secrets, deliveries, replays
	RolePublisher = "publisher" // publishes and reads its tenant's events
	RoleViewer    = "viewer"    // reads its tenant's endpoints, events, deliveries; never secrets
)

// Kinds of stored credentials.
const (
	KeyKindAPIKey = "key"    // an API key: listed, revoked through /v1/api-keys
	KeyKindPortal = "portal" // a portal session token: expires, never listed
)

// APIKey is a stored credential: an API key or a portal session. Only the
// SHA-256 of the secret is stored (Hash); the secret is shown once.
type APIKey struct {
	ID         string    // "key_…" or "ps_…"
	Kind       string    // KeyKindAPIKey or KeyKindPortal
	Name       string    // what the key is for, chosen by the admin
	Role       string    // RoleAdmin, RoleManager, RolePublisher or RoleViewer
	Tenant     string    // "" for admin; the tenant of a tenant role
	Hash       []byte    // SHA-256 of the secret
	CreatedAt  time.Time //
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: not revoked
	LastUsedAt time.Time // zero: never used (written at most once a minute)
	CreatedBy  string    // portal sessions: the id of the key that created it ("env" for HERALD_API_KEY; "" before migration 31)
}

// Usable reports whether the key authenticates at now: not revoked and not
// expired.
func (k APIKey) Usable(now time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// Types of the notices the store records.
const (
	NoticeEndpointCreated  = "endpoint.created"
	NoticeEndpointUpdated  = "endpoint.updated"
	NoticeEndpointDeleted  = "endpoint.deleted"
	NoticeEndpointDisabled = "endpoint.disabled"
	NoticeEndpointEnabled  = "endpoint.enabled"
	// NoticeEndpointFailing: the FailingAfter-th failed attempt in a row
	// (the first failures after a success or since the endpoint exists),
	// or the failure of a shorter streak that disables the endpoint
	// (StreakNotices: always before the streak's endpoint.disabled).
	NoticeEndpointFailing = "endpoint.failing"
	// NoticeEndpointRecovered: the first success after a streak that
	// raised endpoint.failing.
	NoticeEndpointRecovered = "endpoint.recovered"
	// NoticeDeliveryDeadLettered: a completion moved a delivery to the
	// dead-letter queue (schedule exhausted, client-error budget spent,
	// blocked or 410), or a claim did because its event's row does not
	// decode (poisoned.go), except a delivery of an operational event.
	NoticeDeliveryDeadLettered = "delivery.dead_lettered"
)

// FailingAfter is the failed attempts in a row (each attempt of the
// endpoint's deliveries that did not succeed, 4xx included; deferrals do
// not count) after which endpoint.failing is raised, once per streak. The
// default of --disable-min-failures (10) is larger; with 1 or 2, a streak
// that disables the endpoint sooner raises endpoint.failing with the
// disable (StreakNotices), so an endpoint is always reported failing
// before Herald disables it for failing.
const FailingAfter = 3

// IsOperational reports whether typ is one of Herald's operational event
// types: under OperationalPrefix ("endpoint.") or DeliveryPrefix
// ("delivery."; today delivery.dead_lettered).
// Only endpoints that name them (a pattern or the exact type) receive
// them, and no delivery.dead_lettered is raised for their own dead letters
// (no loop between two failing receivers of operational events).
func IsOperational(typ string) bool {
	return strings.HasPrefix(typ, OperationalPrefix) || strings.HasPrefix(typ, DeliveryPrefix)
}

// DeliveryPrefix starts the operational event types about deliveries
// (delivery.dead_lettered). Reserved like OperationalPrefix: a subscriber
// of delivery.* gets Herald's events only, never a producer's.
const DeliveryPrefix = "delivery."

// Notice is an operational event waiting in the outbox to be emitted about
// an endpoint: one per change, emitted in ID order, deleted once emitted.
type Notice struct {
	ID int64 // position in the outbox
	// Endpoint is a snapshot taken at the change (ID, Tenant, URL, Kind,
	// State, StateReason only): the endpoint may be gone or changed since.
	Endpoint Endpoint
	Type     string    // NoticeEndpoint…
	At       time.Time // when the state changed
	// LastStatusCode and LastError describe the endpoint's last attempt
	// (delivery.dead_lettered: the dead letter's last attempt).
	LastStatusCode int
	LastError      string
	// Delivery.dead_lettered only: the delivery, its event (the public id),
	// type and attempts.
	DeliveryID string
	EventID    string
	EventType  string
	Attempts   int
}

// DeadLetterCount is the number of dead letters of one endpoint.
type DeadLetterCount struct {
	EndpointID string
	Tenant     string
	Count      int
}

// Stats are the gauges exported as metrics.
type Stats struct {
	DeliveriesByState map[DeliveryState]int
	EndpointsByState  map[EndpointState]int
	// OldestDue is the next_attempt_at of the claimable delivery (pending,
	// not leased) due first; zero when there is none. A time in the past is
	// a delivery waiting for a worker (read from the partial index
	// deliveries_due: one index probe).
	OldestDue time.Time
}

// PurgeParams deletes old history in one small batch: succeeded
// deliveries (with their attempts) last changed before SucceededBefore,
// dead letters before DeadBefore, events older than EventsBefore that
// have no delivery left, and portal sessions that expired or were revoked
// before PortalSessionsBefore (API keys are never purged). At most Limit
// rows of each kind; a zero time purges none of its kind.
type PurgeParams struct {
	SucceededBefore      time.Time
	DeadBefore           time.Time
	EventsBefore         time.Time
	PortalSessionsBefore time.Time
	// MinuteStatsBefore and HourStatsBefore delete endpoint stats rollups
	// (minute and hour rows) that started before them (zero: none).
	MinuteStatsBefore time.Time
	HourStatsBefore   time.Time
	Limit             int
}

// Store is the storage contract every database driver implements (the
// sqlite and postgres sub-packages): one method per operation, each taking
// a params struct where it has more than an id, each returning errors of
// the store's error model (errors.go: an *Error with a Code, or a wrapped
// sentinel such as ErrNotFound). A driver's optional features are
// declared by Capabilities, never guessed from its type. Every method is
// safe for concurrent use. The conformance suite (storetest.Exercise) runs
// every method on every driver, and every method of each capability a
// driver declares.
type Store interface {
	// Ping checks the database answers (readiness).
	Ping(ctx context.Context) error
	// Close releases the database.
	Close() error
	// Capabilities declares the driver's optional features (a nil field:
	// the driver lacks it).
	Capabilities() Capabilities

	// EnsureMeta stores value under key unless a value is already there, and
	// returns the stored value (atomic: the first writer wins).
	EnsureMeta(ctx context.Context, key, value string) (string, error)

	// CreateAPIKey stores an API key or portal session (its hash only).
	// ErrConflict when the id or hash exists.
	CreateAPIKey(ctx context.Context, k APIKey) (APIKey, error)
	// LookupAPIKey returns the key whose Hash equals hash, revoked and
	// expired ones included (the caller decides); ErrNotFound when none.
	LookupAPIKey(ctx context.Context, hash []byte) (APIKey, error)
	// CountAPIKeys counts the stored API keys (kind "key") that are not
	// revoked.
	CountAPIKeys(ctx context.Context) (int, error)
	// ListAPIKeys lists stored credentials of kind (KeyKindAPIKey or
	// KeyKindPortal), revoked and expired ones included, newest first.
	ListAPIKeys(ctx context.Context, kind string, p ListParams) (Page[APIKey], error)
	// RevokeAPIKey marks the credential of kind revoked at now, and with it
	// every portal session it created (CreatedBy), in one transaction;
	// revoking it again changes nothing. ErrNotFound for an unknown id of
	// that kind.
	RevokeAPIKey(ctx context.Context, kind, id string, now time.Time) error
	// TouchAPIKeys records when each key (id → time) was last used; a
	// time older than the stored one is ignored.
	TouchAPIKeys(ctx context.Context, used map[string]time.Time) error

	CreateEndpoint(ctx context.Context, p CreateEndpointParams) (Endpoint, error)
	// GetEndpoint returns ErrNotFound for an unknown id.
	GetEndpoint(ctx context.Context, id string) (Endpoint, error)
	// ListEndpoints lists endpoints whose sealed values do not open too,
	// without those values, each named in Endpoint.Unreadable (a row
	// whose other columns do not decode still fails the list).
	ListEndpoints(ctx context.Context, p ListEndpointsParams) (Page[Endpoint], error)
	// UpdateEndpoint returns ErrNotFound for an unknown id.
	UpdateEndpoint(ctx context.Context, p UpdateEndpointParams) (Endpoint, error)
	// DeleteEndpoint removes the endpoint and its deliveries' queue entries
	// (events are kept). ErrNotFound for an unknown id.
	DeleteEndpoint(ctx context.Context, p DeleteEndpointParams) error

	// PublishEvent stores the event and its deliveries in one transaction.
	// Reusing an id or (tenant, idempotency key) with a different type or
	// body returns ErrConflict. An event matching more endpoints than
	// p.FanOutChunk gets only the first chunk of its deliveries (in endpoint
	// id order) and a fan-out row in that transaction; ContinueFanOut
	// creates the rest.
	PublishEvent(ctx context.Context, p PublishParams) (PublishResult, error)
	// PublishedEvent answers a publish the caller does not store (its
	// catalog check refused it) when it repeats an event published
	// earlier: the event of p.Event's tenant and idempotency key, else the
	// one of p.Event.ID, found as PublishEvent finds it. The same content
	// (Event.Fingerprint) answers the original and its delivery count
	// (Created false), as PublishEvent would; other content, or with
	// p.IDFromClient a key of another event, is ErrConflict
	// (PublishConflict); no such event is ErrNotFound. It writes nothing.
	PublishedEvent(ctx context.Context, p PublishParams) (PublishResult, error)
	// ContinueFanOut creates the next chunk of one unfinished fan-out in one
	// transaction: the deliveries for the next endpoints (by id) of the
	// event's tenant that match its type and existed when it was published
	// (created_at ≤ the event's), advancing the fan-out's position in the
	// same transaction — so each delivery is created exactly once whatever
	// crashes between chunks — and removing the row when done. Several
	// engines (nodes) may call it at once: each advances a different
	// fan-out, or waits for none. A zero result (EventID "") means nothing
	// is waiting.
	ContinueFanOut(ctx context.Context, p FanOutParams) (FanOutResult, error)
	GetEvent(ctx context.Context, id string) (Event, error)
	ListEvents(ctx context.Context, p ListEventsParams) (Page[Event], error)

	GetDelivery(ctx context.Context, id string) (Delivery, error)
	ListDeliveries(ctx context.Context, p ListDeliveriesParams) (Page[Delivery], error)
	// ListAttempts returns the attempts of a delivery, oldest first;
	// ErrNotFound for an unknown delivery.
	ListAttempts(ctx context.Context, deliveryID string) ([]Attempt, error)

	// ClaimDeliveries leases due deliveries; see ClaimParams.
	ClaimDeliveries(ctx context.Context, p ClaimParams) ([]Claim, error)
	// CompleteDeliveries records attempts and moves deliveries in one
	// transaction.
	CompleteDeliveries(ctx context.Context, cs []Completion) error
	// RescueExpiredLeases clears leases that ended before now and returns how
	// many deliveries became claimable again.
	RescueExpiredLeases(ctx context.Context, now time.Time) (int, error)
	// NextDueAt returns the earliest NextAttemptAt of a claimable delivery
	// of a tenant not in skipTenants (ClaimParams.SkipTenants: what the
	// next claim will skip), or the zero time when there is none. With
	// skipTenants, drivers find it tenant by tenant (one index probe each,
	// whatever a skipped tenant's backlog), looking at most at
	// NextDueTenantProbes tenants besides the skipped ones; past that the
	// earliest found is returned (possibly later than the true earliest:
	// the caller's poll interval bounds the wait).
	NextDueAt(ctx context.Context, skipTenants []string) (time.Time, error)

	// SetEndpointState pauses, resumes, disables or enables an endpoint; it
	// returns the endpoint and how many deliveries were held or released.
	// ErrNotFound for an unknown id.
	SetEndpointState(ctx context.Context, p SetEndpointStateParams) (Endpoint, int, error)
	// ReplayDeliveries replays dead letters; it returns how many deliveries
	// were moved. ErrNotFound for an unknown delivery or endpoint.
	ReplayDeliveries(ctx context.Context, p ReplayParams) (int, error)
	// PostponeEndpointDeliveries moves the endpoint's pending, unleased
	// deliveries due before until to until (an open circuit breaker); no
	// attempt is consumed. It returns how many moved.
	PostponeEndpointDeliveries(ctx context.Context, endpointID string, until time.Time) (int, error)
	// MoveEndpointDeliveries moves the deliveries p names (MoveParams) to
	// p.At; no attempt is consumed. It returns how many moved. The engine
	// holds a half-open circuit's backlog with it while the probe is in
	// flight (due by now → the probe's deadline), hands it back when the
	// probe ends (due exactly at the deadline → now), and pulls in an
	// endpoint's unattempted deliveries deferred at a slower pace than it
	// now answers at (due by then → now).
	MoveEndpointDeliveries(ctx context.Context, p MoveParams) (int, error)
	// PendingNotices returns up to limit operational events to emit, oldest
	// (lowest ID) first.
	PendingNotices(ctx context.Context, limit int) ([]Notice, error)
	// ClearNotices removes emitted notices from the outbox, all in one
	// transaction; an id not there (already cleared) is no error, nor is an
	// empty list.
	ClearNotices(ctx context.Context, ids []int64) error
	// DeadLetterCounts counts dead letters per endpoint (of one tenant when
	// tenant is not empty), changed at or after since (zero: all).
	DeadLetterCounts(ctx context.Context, tenant string, since time.Time) ([]DeadLetterCount, error)
	// ClaimSpikeAlert records that a dead-letter spike alert for the
	// endpoint is emitted at now, unless one was already emitted after
	// windowStart; it reports whether the caller should emit it.
	ClaimSpikeAlert(ctx context.Context, endpointID string, windowStart, now time.Time) (bool, error)
	// RotateSecret makes Secret the endpoint's current secret; the previous
	// current secret stays valid until PreviousExpiresAt (no later than Now:
	// dropped at once); secrets already expired at Now are dropped.
	// ErrNotFound for an unknown id; an *UnreadableError when the
	// endpoint's stored values do not open (unless ReplaceUnreadable
	// applies).
	RotateSecret(ctx context.Context, p RotateSecretParams) (Endpoint, error)
	// RevokeSecret drops one older secret (RevokedSecrets). ErrNotFound
	// for an unknown endpoint or secret; ErrCurrentSecret for the current
	// secret.
	RevokeSecret(ctx context.Context, p RevokeSecretParams) (Endpoint, error)
	// CreateSource stores a source and its forwarding endpoint.
	CreateSource(ctx context.Context, p CreateSourceParams) (Source, error)
	// GetSource returns ErrNotFound for an unknown id, an
	// *UnreadableSourceError for a source whose sealed configuration does
	// not open.
	GetSource(ctx context.Context, id string) (Source, error)
	// ListSources lists sources, newest first; one whose sealed
	// configuration does not open is listed without it (ListedSource).
	ListSources(ctx context.Context, p ListParams) (Page[Source], error)
	// UpdateSource returns ErrNotFound for an unknown id.
	UpdateSource(ctx context.Context, p UpdateSourceParams) (Source, error)
	// DeleteSource removes the source, its endpoint and its deliveries
	// (events are kept until retention). ErrNotFound for an unknown id.
	DeleteSource(ctx context.Context, id string) error

	// CreateEventType stores a catalogued event type (Revision 1).
	// ErrConflict when the name exists.
	CreateEventType(ctx context.Context, t EventType) (EventType, error)
	// GetEventType returns ErrNotFound for an unknown name.
	GetEventType(ctx context.Context, name string) (EventType, error)
	// ListEventTypes returns a page of the catalog in name order (byte
	// order, ascending; not newest first as the other lists). The cursor
	// is the last name of the previous page: a page starts after it
	// whether or not that type still exists. AllEventTypes reads the whole
	// catalog.
	ListEventTypes(ctx context.Context, p ListParams) (Page[EventType], error)
	// EventTypeCaseVariant returns the name of a catalogued event type
	// that differs from name only in case (ASCII: ValidEventType), the
	// first by name, or "" when there is none (name itself does not
	// count). It reads names only, through an index on the folded name,
	// so the API may ask it for every uncatalogued type a publish names.
	EventTypeCaseVariant(ctx context.Context, name string) (string, error)
	// UpdateEventType replaces the type's description, resource id and
	// versions if its stored Revision is still t.Revision, and stores
	// Revision+1 (optimistic concurrency). ErrNotFound for an unknown name,
	// ErrConflict when another change came first.
	UpdateEventType(ctx context.Context, t EventType) (EventType, error)

	// EndpointStats sums the endpoint's rollups over p.Window
	// (StatsRange); the rollups are written by CompleteDeliveries in its
	// transaction (Rollups). ErrInvalid for an unknown window. An unknown
	// endpoint has no rollups (all zero): callers check the endpoint.
	EndpointStats(ctx context.Context, p EndpointStatsParams) (EndpointStats, error)

	// Stats counts deliveries and endpoints by state.
	Stats(ctx context.Context) (Stats, error)
	// Purge deletes old history; it returns the number of rows deleted.
	Purge(ctx context.Context, p PurgeParams) (int, error)
}

// EndpointLimit is the error (CodeLimit) of an endpoint refused because
// its tenant already has have endpoints, at or above max
// (CreateEndpointParams.MaxPerTenant; have exceeds max when the limit was
// lowered after they were created).
func EndpointLimit(tenant string, have, max int) error {
	noun := "endpoints"
	if have == 1 {
		noun = "endpoint"
	}
	return Errorf(CodeLimit, "tenant %s has %d %s and the limit is %d (--max-endpoints-per-tenant): delete one before creating another", tenant, have, noun, max)
}
