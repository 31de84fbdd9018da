// Package delivery is Herald's delivery engine: it claims due deliveries
// from the store's queue in batches with a lease, makes one signed HTTP
// attempt per claim on a pool of workers, decides the next step with the
// retry policy, and writes completions in batches. A rescuer returns the
// leases of crashed nodes to the queue.
//
// Flow: claimer → jobs → workers (sign, send, classify) → results →
// completer (batched CompleteDeliveries). The claimer only claims as many
// deliveries as there are idle workers, so nothing sits leased in memory
// waiting for a worker.
package delivery

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// Clock tells the time. Tests inject a fake; production uses SystemClock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock in UTC.
type SystemClock struct{}

// Now returns time.Now().UTC().
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// Sender makes one HTTP attempt; *egress.Client implements it.
type Sender interface {
	Do(ctx context.Context, r egress.Request) egress.Result
}

// Config configures an Engine. Zero fields take the documented defaults
// (WithDefaults).
type Config struct {
	// Store holds the queue. Required.
	Store store.Store
	// Sender sends attempts to tenants' endpoints (SSRF policy). Required.
	Sender Sender
	// TrustedSender sends attempts to inbound sources' destinations, which
	// operators set and which may be private addresses (redirects are still
	// never followed). Default: Sender.
	TrustedSender Sender
	// Policy decides retries. Zero value: retry.DefaultSchedule.
	Policy retry.Policy
	// Clock; default SystemClock.
	Clock Clock
	// Owner names this node in leases; default a random "node_…" id.
	Owner string
	// Workers is the number of attempts in flight at once; default 128.
	Workers int
	// ClaimBatch caps one claim query; default 256.
	ClaimBatch int
	// Claimers is the number of claim loops; default 1. Where a claim is a
	// network round trip (PostgreSQL), a second loop claims for the
	// workers freed while the first one's claim is in flight, instead of
	// leaving them idle until it returns.
	Claimers int
	// AttemptTimeout bounds one attempt (connect, TLS, headers, body read);
	// default 10 s.
	AttemptTimeout time.Duration
	// Lease is how long a claim is held before the rescuer may give it to
	// another worker; default 2 × AttemptTimeout + 5 s, so a lease outlives
	// any attempt.
	Lease time.Duration
	// PollInterval is the fallback wake-up when no notification arrives;
	// default 1 s.
	PollInterval time.Duration
	// RescueInterval is how often expired leases are rescued; default 5 s.
	RescueInterval time.Duration
	// CompleteBatch caps one completion transaction; default 512.
	CompleteBatch int
	// Completers is the number of completion writers; default 1. Where a
	// batch's write takes a round trip and per-row work on a server
	// (PostgreSQL), a second writer commits one batch while the other is
	// in flight.
	Completers int
	// UserAgent is sent with every attempt; default "Herald".
	UserAgent string
	// EndpointConcurrency caps the attempts in flight to one endpoint;
	// default Workers/8. With Membership set it is the cap of the whole
	// cluster, split between the live nodes (cluster.go). A slow or
	// black-holed endpoint holds at most this many workers; one that has
	// answered fast (under 250 ms) three times in a row may use every
	// worker of a node until it is slow or fails again.
	EndpointConcurrency int
	// TenantConcurrency caps the attempts in flight for one tenant to its
	// endpoints that have not proven fast (see EndpointConcurrency);
	// default Workers/4. With Membership it is the cap of the whole
	// cluster. A tenant's slow or black-holed endpoints together hold at
	// most this many workers, whatever their number.
	TenantConcurrency int
	// HostConcurrency caps the attempts in flight to one destination host
	// (host:port of the URL, all tenants) for endpoints that have not
	// proven fast; default Workers/2. With Membership it is the cap of the
	// whole cluster.
	HostConcurrency int
	// BreakerThreshold is the number of consecutive transport failures
	// (no answer, or 5xx) that opens an endpoint's circuit; default 5.
	BreakerThreshold int
	// BreakerCooldown is how long an open circuit stays open before one
	// probe is let through; default 30 s. While open, the endpoint's due
	// deliveries are postponed without consuming attempts.
	BreakerCooldown time.Duration
	// DeferDelay is the wait of a delivery turned away at a concurrency
	// cap before any attempt's duration is known; default 1 s. Once
	// attempts have ended the wait follows their moving average divided by
	// the cap (one claim back per expected free slot), between 5 ms and
	// AttemptTimeout.
	DeferDelay time.Duration
	// FanOutChunk is the most deliveries one ContinueFanOut transaction
	// creates for a publish larger than a chunk; default
	// store.DefaultFanOutChunk.
	FanOutChunk int
	// DisableAfter disables an endpoint whose every attempt has failed for
	// this long (docs/contract.md: 5 days); 0 = never.
	DisableAfter time.Duration
	// DisableMinFailures is the least number of failed attempts the streak
	// must count besides lasting DisableAfter; default 10 (docs/operations.md,
	// "Auto-disable"). A single failure after a quiet period never disables.
	DisableMinFailures int
	// Membership, when set (drivers whose database several nodes share),
	// makes endpoints' concurrency caps and rate limits hold across the
	// nodes: each node heartbeats and takes its share (cluster.go). Nil: a
	// single node with the whole of every limit.
	Membership store.Membership
	// HeartbeatInterval is the time between heartbeats with Membership;
	// default 1 s. A node that joins claims nothing for 3 intervals (plus
	// the longest attempt timeout of the other nodes, if there are any);
	// one that stops heartbeating is forgotten after 10.
	HeartbeatInterval time.Duration
	// Metrics, optional.
	Metrics *metrics.Metrics
	// Tracer, optional (nil: tracing off): a client span per attempt,
	// child of the event's stored traceparent (internal/tracing).
	Tracer *tracing.Tracer
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultDisableMinFailures is the default of Config.DisableMinFailures.
const DefaultDisableMinFailures = 10

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.TrustedSender == nil {
		c.TrustedSender = c.Sender
	}
	if c.Policy.Schedule == nil {
		c.Policy.Schedule = retry.DefaultSchedule
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Owner == "" {
		c.Owner = store.NewID("node")
	}
	if c.Workers <= 0 {
		c.Workers = 128
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = 256
	}
	if c.Claimers <= 0 {
		c.Claimers = 1
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.Lease <= 0 {
		c.Lease = 2*c.AttemptTimeout + 5*time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.RescueInterval <= 0 {
		c.RescueInterval = 5 * time.Second
	}
	if c.CompleteBatch <= 0 {
		c.CompleteBatch = 512
	}
	if c.Completers <= 0 {
		c.Completers = 1
	}
	if c.UserAgent == "" {
		c.UserAgent = "Herald"
	}
	if c.EndpointConcurrency <= 0 {
		// An eighth of the workers: even several black-holed endpoints
		// (each also parking a quarter of its cap) leave most workers to
		// the healthy ones.
		c.EndpointConcurrency = max(1, c.Workers/8)
	}
	if c.TenantConcurrency <= 0 {
		// A quarter of the workers: a tenant needs two slow endpoints at
		// their cap (workers/8) to reach it, and three tenants whose every
		// endpoint hangs still leave a quarter of the workers to the rest.
		c.TenantConcurrency = max(1, c.Workers/4)
	}
	if c.HostConcurrency <= 0 {
		// Half of the workers: one receiving service (many tenants'
		// endpoints on one host) that hangs leaves the other half free.
		c.HostConcurrency = max(1, c.Workers/2)
	}
	if c.BreakerThreshold <= 0 {
		c.BreakerThreshold = 5
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = 30 * time.Second
	}
	if c.DeferDelay <= 0 {
		c.DeferDelay = time.Second
	}
	if c.DisableMinFailures <= 0 {
		c.DisableMinFailures = DefaultDisableMinFailures
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.Store == nil {
		return errors.New("delivery: Config.Store is required")
	}
	if c.Sender == nil {
		return errors.New("delivery: Config.Sender is required")
	}
	if c.Lease <= c.AttemptTimeout {
		return errors.New("delivery: Config.Lease must be longer than AttemptTimeout")
	}
	return nil
}

// Engine delivers pending deliveries. Create with New, start with Run.
type Engine struct {
	cfg     Config
	wake    chan struct{} // a publish or a rescue made work claimable
	fanWake chan struct{} // a publish may have left a chunked fan-out
	slots   chan struct{} // the worker tokens not held by a claim (see token)
	jobs    chan job
	results chan store.Completion
	gate    *gate
	// congested is signalled when a claim had to be deferred because its
	// endpoint was at the cap with parking full: the claimer then waits
	// for an attempt to finish before claiming more.
	congested chan struct{}
	progress  chan struct{} // signalled when an attempt finishes
	// unwritten counts the completers holding results they could not
	// write: while it is positive the rescuer waits, or it would free this
	// node's own leases and have those deliveries attempted twice.
	unwritten atomic.Int32
	signers   signers // one webhook.Signer per endpoint and set of active secrets
	// wakeAt is when a sleeping claimer will next wake up (Unix ns): 0
	// while no claimer sleeps, math.MaxInt64 while one is finding its
	// next due time. A completion that makes a delivery due before it
	// wakes the claimer (see dueBefore), so a retry is claimed at its due
	// time whatever the poll interval.
	wakeAt atomic.Int64
	// background counts the goroutines an attempt's outcome started
	// (circuitOpened's postponement); Run waits for them before returning.
	background sync.WaitGroup
}

// New checks cfg and returns an engine.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		fanWake: make(chan struct{}, 1),
		slots:   make(chan struct{}, cfg.Workers),
		jobs:    make(chan job, cfg.Workers),
		results: make(chan store.Completion, cfg.Workers*2),
		gate: newGate(cfg.EndpointConcurrency, cfg.Workers, cfg.BreakerThreshold, cfg.BreakerCooldown, cfg.DeferDelay).
			withGroupCaps(cfg.TenantConcurrency, cfg.HostConcurrency, cfg.AttemptTimeout),
		congested: make(chan struct{}, 1),
		progress:  make(chan struct{}, 1),
	}
	for range cfg.Workers {
		e.slots <- struct{}{}
	}
	return e, nil
}

// InFlight counts the attempts in flight on this node (the in-flight
// gauges: metrics.Metrics.SetInFlight).
func (e *Engine) InFlight() metrics.InFlight { return e.gate.inFlight() }

// Owner returns the lease owner name of this engine.
func (e *Engine) Owner() string { return e.cfg.Owner }

// Notify tells the engine that deliveries may have become due (a publish
// committed). It never blocks.
func (e *Engine) Notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// NotifyFanOut tells the engine that a publish left deliveries for it to
// create (store.PublishResult.FanOut). It never blocks.
func (e *Engine) NotifyFanOut() {
	select {
	case e.fanWake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is cancelled, then lets attempts in flight finish
// (each is bounded by AttemptTimeout), writes their completions, and
// returns once every goroutine it started has ended (a postponement of an
// opened circuit's deliveries, bounded by 30 s, included). Claims not yet started when ctx ends (queued for a worker or
// parked behind their endpoint's attempt) are put back, due at once,
// without an attempt: a clean shutdown leaves no lease to rescue.
func (e *Engine) Run(ctx context.Context) error {
	var workers sync.WaitGroup
	for range e.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			e.work(ctx)
		}()
	}
	completerDone := make(chan struct{})
	go func() {
		defer close(completerDone)
		var completers sync.WaitGroup
		for range e.cfg.Completers {
			completers.Go(e.complete)
		}
		completers.Wait()
	}()
	fanOutDone := make(chan struct{})
	go func() {
		defer close(fanOutDone)
		e.fanOut(ctx)
	}()
	rescuerDone := make(chan struct{})
	go func() {
		defer close(rescuerDone)
		e.rescue(ctx)
	}()

	// With Membership, claim nothing until this node holds its share;
	// the heartbeat runs until the last attempt has ended, so the other
	// nodes keep counting this one while it has attempts in flight.
	heartbeatCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	heartbeatDone := make(chan struct{})
	ready := make(chan struct{})
	if e.cfg.Membership != nil {
		go func() {
			defer close(heartbeatDone)
			e.heartbeat(heartbeatCtx, ready)
		}()
	} else {
		close(heartbeatDone)
		close(ready)
		e.cfg.Metrics.ClusterNodes(1)
	}
	select {
	case <-ready:
		var claimers sync.WaitGroup
		for range e.cfg.Claimers {
			claimers.Go(func() { e.claim(ctx) })
		}
		claimers.Wait()
	case <-ctx.Done():
	}

	close(e.jobs)
	workers.Wait()
	e.background.Wait() // only workers start these: none starts after this
	stopHeartbeat()
	<-heartbeatDone
	close(e.results)
	<-completerDone
	<-rescuerDone
	<-fanOutDone
	return nil
}

// fanOut is the fan-out loop: it creates the deliveries of publishes
// larger than a chunk, one chunk per transaction (store.ContinueFanOut),
// taking the unfinished fan-outs in turn (one chunk each),
// waking the claimers after each chunk with pending deliveries; when none
// is left it waits for a publish's notification or the poll interval (a
// fan-out left by a crash, or published on another node).
func (e *Engine) fanOut(ctx context.Context) {
	backoff := 100 * time.Millisecond
	last := "" // the fan-out advanced last: the next call takes the one after it
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := e.cfg.Store.ContinueFanOut(fctx, store.FanOutParams{Chunk: e.cfg.FanOutChunk, Now: e.cfg.Clock.Now(), After: last})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.cfg.Logger.Warn("fan-out chunk failed", "error", err)
			e.sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if res.Pending > 0 {
			select { // the claimers, not this loop
			case e.wake <- struct{}{}:
			default:
			}
		}
		if res.Done {
			e.cfg.Logger.Debug("fan-out complete", "event", res.EventID)
		}
		if res.EventID != "" {
			last = res.EventID
			continue // this one or another may have more
		}
		if res.More {
			// Every remaining fan-out is held by another node.
			e.sleep(ctx, e.cfg.PollInterval)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-e.fanWake:
		case <-time.After(e.cfg.PollInterval):
		}
	}
}

// claim is the claimer loop: wait for idle workers, claim up to that many
// due deliveries, hand them out; when the queue has nothing due, sleep until
// the next due time, a notification, or the poll interval.
func (e *Engine) claim(ctx context.Context) {
	log := e.cfg.Logger
	backoff := 100 * time.Millisecond
	backlog := false // the last claim took all it asked for
	cursor := ""     // the tenant served last (round-robin; ClaimParams)
	for ctx.Err() == nil {
		// After a congested batch, wait for an attempt to finish (or a
		// short while) before claiming more.
		select {
		case <-e.congested:
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-e.progress:
			case <-t.C:
			}
			t.Stop()
		default:
		}
		// Take at least one idle worker, then every other idle one.
		select {
		case <-ctx.Done():
			return
		case <-e.slots:
		}
		free := e.gather(ctx, 1, backlog)
		// Not cancelled by shutdown: a claim cut short may still commit
		// (its leases would wait for a rescue); a finished one is handed to
		// the workers, which put its claims back at shutdown. The timeout
		// keeps a hung database from stalling the claimer forever.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		claims, err := e.cfg.Store.ClaimDeliveries(cctx, store.ClaimParams{
			Owner: e.cfg.Owner, Limit: free, Lease: e.cfg.Lease, Now: e.cfg.Clock.Now(), TenantCursor: cursor,
		})
		cancel()
		if err != nil {
			e.giveBack(free)
			if ctx.Err() != nil {
				return
			}
			log.Warn("claim deliveries failed; retrying", "error", err, "retry_in", backoff)
			e.sleep(ctx, backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		cursor = store.NextTenantCursor(cursor, claims)
		for _, c := range claims {
			e.jobs <- job{Claim: c, tok: e.takeToken()}
		}
		e.giveBack(free - len(claims))
		if backlog = len(claims) == free; backlog {
			if e.cfg.Claimers > 1 {
				e.Notify() // maybe more due: get the other claimers going
			}
			continue // maybe more due: claim again as soon as workers free up
		}
		e.waitForWork(ctx)
	}
}

// claimGather is how long the claimer waits, while a backlog is being
// drained, for idle workers to add up to a worthwhile batch (see gather).
// Each claim transaction has a fixed cost, mostly its commit writing every
// page it touched to the WAL: in BenchmarkDrainQueue a claim and a
// completion of 32 deliveries cost 46 µs per delivery, of 128 28 µs.
const claimGather = 5 * time.Millisecond

// gather takes more idle workers' tokens in addition to the free ones the
// claimer holds, and returns how many it holds, at most ClaimBatch. Without
// a backlog it takes only the idle ones at hand: a delivery published now
// is claimed at once. During a backlog (the last claim was full), workers
// free up one at a time as their attempts finish, and claiming each one
// alone costs a transaction per delivery (13 deliveries per claim on
// average in a 128-worker drain); gather then waits up to claimGather for
// half of the workers (at most ClaimBatch) to be idle. The wait costs no
// CPU; it only lowers the attempts in flight, by at most claimGather's
// worth of finished attempts.
func (e *Engine) gather(ctx context.Context, free int, backlog bool) int {
	for free < e.cfg.ClaimBatch {
		select {
		case <-e.slots:
			free++
			continue
		default:
		}
		break
	}
	want := min(e.cfg.ClaimBatch, max(1, e.cfg.Workers/2))
	if !backlog || free >= want {
		return free
	}
	t := time.NewTimer(claimGather)
	defer t.Stop()
	for free < want {
		select {
		case <-e.slots:
			free++
		case <-t.C:
			return free
		case <-ctx.Done():
			return free
		}
	}
	return free
}

// token is one of the claimer's Workers worker tokens while a claim holds
// it: from the claim until the claim is attempted or put back (deferred),
// including while it waits parked behind its endpoint, so claims never
// outrun what can be attempted. It travels with its claim (job) and goes
// back to the engine's slots exactly once, by release; a second release
// panics, as it would let the claimer hold more claims than workers.
type token struct {
	slots    chan<- struct{}
	released atomic.Bool
}

// takeToken wraps one token the claimer took from e.slots.
func (e *Engine) takeToken() *token { return &token{slots: e.slots} }

// release gives the token back. It never blocks: slots holds Workers.
func (t *token) release() {
	if t.released.Swap(true) {
		panic("delivery: a worker token released twice")
	}
	t.slots <- struct{}{}
}

// job is a claim with the worker token it holds.
type job struct {
	store.Claim
	tok *token
}

// giveBack returns n tokens the claimer took and no claim holds.
func (e *Engine) giveBack(n int) {
	for range n {
		e.slots <- struct{}{}
	}
}

// waitForWork sleeps until a notification, the next due time or the poll
// interval, whichever comes first.
func (e *Engine) waitForWork(ctx context.Context) {
	// Announce the sleep before reading the next due time: a completion
	// committed after the read sees a wake-up time and wakes the claimer
	// if it is due earlier; one committed before is found by the read.
	e.wakeAt.Store(math.MaxInt64)
	defer e.wakeAt.Store(0)
	wait := e.cfg.PollInterval
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	next, err := e.cfg.Store.NextDueAt(nctx)
	cancel()
	if err == nil && !next.IsZero() {
		if d := next.Sub(e.cfg.Clock.Now()); d < wait {
			wait = max(d, 0)
		}
	}
	if wait == 0 {
		return
	}
	e.wakeAt.Store(e.cfg.Clock.Now().Add(wait).UnixNano())
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-e.wake:
	case <-t.C:
	}
}

func (e *Engine) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// work is one worker: attempt each job and pass the completion on.
func (e *Engine) work(ctx context.Context) {
	for j := range e.jobs {
		if ctx.Err() != nil {
			// Shutting down: put the claim back, due now, for another node
			// (or this one's next start) without waiting for its lease.
			e.deferClaim(j, e.cfg.Clock.Now(), "shutdown", e.cfg.Clock.Now())
			continue
		}
		e.handle(ctx, j)
		select {
		case e.progress <- struct{}{}:
		default:
		}
	}
}

// handle passes a claim through its endpoint's gate. An admitted claim is
// attempted, and then this worker carries on with the endpoint's next
// parked claim, if any; a claim parked at the cap is left, with its token,
// for the worker that finishes the endpoint's current attempt; any other
// claim turned away is deferred without consuming an attempt.
//
// Each claim's token (see token) is released once: by deferClaim, or
// after its attempt's completion is queued; a parked claim keeps it.
func (e *Engine) handle(ctx context.Context, j job) {
	for {
		now := e.cfg.Clock.Now()
		ok, parked, retryAt, reason := e.gate.admitOrPark(j, now)
		if parked {
			return // the gate holds j and its token
		}
		if !ok {
			e.deferClaim(j, retryAt, reason, now)
			return
		}
		comp, transportFailure := e.attempt(ctx, j.Claim)
		e.results <- comp
		until, opened := e.gate.done(j.Endpoint.ID, transportFailure, comp.Attempt.Duration, e.cfg.Clock.Now())
		j.tok.release() // after done: a claim this token brings sees the attempt ended
		if opened {
			e.circuitOpened(j.Endpoint.ID, until)
			for _, p := range e.gate.unparkAll(j.Endpoint.ID) {
				e.deferClaim(p, until, "circuit_open", e.cfg.Clock.Now())
			}
			return
		}
		next, more := e.gate.next(j.Endpoint.ID)
		if !more {
			return
		}
		if ctx.Err() != nil {
			// Shutting down: put back next and every other claim parked
			// behind this endpoint.
			now := e.cfg.Clock.Now()
			e.deferClaim(next, now, "shutdown", now)
			for _, p := range e.gate.unparkAll(j.Endpoint.ID) {
				e.deferClaim(p, now, "shutdown", now)
			}
			return
		}
		j = next
	}
}

// deferClaim puts a claim back without an attempt, due at retryAt, and
// releases its token.
func (e *Engine) deferClaim(c job, retryAt time.Time, reason string, now time.Time) {
	e.cfg.Metrics.Deferred(reason)
	e.results <- store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: e.cfg.Owner,
		Deferred: true, NextAttemptAt: retryAt, Now: now}
	c.tok.release()
	if reason == "concurrency_cap" || reason == "tenant_cap" || reason == "host_cap" {
		// Claims are outrunning what the endpoints can take: tell the
		// claimer to wait for progress instead of claiming more of them.
		select {
		case e.congested <- struct{}{}:
		default:
		}
	}
}

// circuitOpened postpones the endpoint's due deliveries in the store.
func (e *Engine) circuitOpened(endpointID string, until time.Time) {
	e.cfg.Metrics.CircuitOpened()
	e.cfg.Logger.Warn("circuit opened: the endpoint keeps failing; its deliveries wait without consuming attempts",
		"endpoint", endpointID, "until", until)
	e.background.Go(func() {
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.cfg.Store.PostponeEndpointDeliveries(pctx, endpointID, until); err != nil {
			e.cfg.Logger.Warn("postpone deliveries of an open circuit failed", "endpoint", endpointID, "error", err)
		}
	})
}

// Headers set on every attempt besides the signature headers (docs/contract.md,
// "Every outbound request").
const (
	HeaderEventID         = "X-Event-Id"
	HeaderEventType       = "X-Event-Type"
	HeaderDeliveryAttempt = "X-Delivery-Attempt"
	// HeaderTraceParent is the W3C Trace Context header of each attempt
	// (https://www.w3.org/TR/trace-context/): not signed, like the other
	// headers (docs/contract.md, "What is signed").
	HeaderTraceParent = "Traceparent"
)

// attempt makes one HTTP try of a claimed delivery and returns its
// completion, and whether it failed at the transport level (no answer, or
// 5xx) for the circuit breaker.
func (e *Engine) attempt(ctx context.Context, c store.Claim) (store.Completion, bool) {
	d, ev, ep := c.Delivery, c.Event, c.Endpoint
	number := d.Attempts + 1
	start := e.cfg.Clock.Now()
	if d.Attempts == 0 && !ev.CreatedAt.IsZero() {
		e.cfg.Metrics.FirstAttempt(start.Sub(ev.CreatedAt))
	}
	// The receiver joins the publisher's trace: with tracing on, through
	// this attempt's span; off, through the traceparent the publish
	// carried (docs/contract.md, "Tracing").
	traceparent := ev.TraceParent
	var span trace.Span
	if e.cfg.Tracer.On() {
		ctx, span = e.startAttemptSpan(ctx, c, number)
		traceparent = tracing.FormatTraceParent(span.SpanContext())
	}
	// The bytes of the version the endpoint receives (its pin, else the
	// type's first version: store.Endpoint.VersionOf; docs/contract.md,
	// "Versions and pinning"), the same event id across versions.
	res := e.send(ctx, ep, store.PublicEventID(ev.ID), ev.Type, ev.BodyFor(ep.VersionOf(ev.Type)), ev.Headers, number, start, traceparent)
	now := e.cfg.Clock.Now()

	// When the status line arrived, the status is the endpoint's answer; a
	// failure while reading the body afterwards only shortens the excerpt
	// (a 2xx whose body was cut is still a success: the receiver has it).
	out := retry.Outcome{StatusCode: res.StatusCode, ErrorClass: res.ErrorClass}
	if res.StatusCode != 0 {
		out.ErrorClass = ""
	}
	if res.RetryAfter != "" && (res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable) {
		if ra, ok := retry.ParseRetryAfter(res.RetryAfter, now); ok {
			out.RetryAfter = ra
		}
	}
	clientErr := retry.IsClientError(res.StatusCode)
	clientErrors := d.ClientErrors
	if clientErr {
		clientErrors++
	}
	// The retry budget counts from the last replay; the attempt number sent
	// in X-Delivery-Attempt counts every attempt of the delivery.
	dec := e.cfg.Policy.Decide(number-d.ReplayBase, clientErrors, out)

	a := attemptRecord(d.ID, number, start, res)
	comp := store.Completion{
		DeliveryID:         d.ID,
		EndpointID:         ep.ID,
		Owner:              e.cfg.Owner,
		Attempt:            a,
		ClientError:        clientErr,
		DisableAfter:       e.cfg.DisableAfter,
		DisableMinFailures: e.cfg.DisableMinFailures,
		Now:                now,
	}
	switch dec.Verdict {
	case retry.Succeeded:
		comp.State = store.DeliverySucceeded
	case retry.Retry:
		comp.State = store.DeliveryPending
		comp.NextAttemptAt = now.Add(dec.Delay)
	default:
		comp.State = store.DeliveryDead
		if dec.DisableEndpoint {
			comp.DisableEndpoint = true
			comp.DisableReason = "the endpoint answered 410 Gone"
		}
	}
	if span != nil {
		endAttemptSpan(span, res, a, comp.State == store.DeliverySucceeded)
	}
	e.cfg.Logger.DebugContext(ctx, "attempt", "delivery", d.ID, "event", ev.ID, "endpoint", ep.ID, "attempt", number,
		"status", res.StatusCode, "error", a.Error, "verdict", dec.Verdict.String(), "reason", dec.Reason)
	outcome := "retry"
	switch comp.State {
	case store.DeliverySucceeded:
		outcome = "succeeded"
	case store.DeliveryDead:
		outcome = "dead"
	}
	e.cfg.Metrics.Attempt(comp.State == store.DeliverySucceeded, res.Duration, outcome)
	transportFailure := res.StatusCode == 0 || res.StatusCode >= 500
	return comp, transportFailure
}

// send signs and sends one attempt of a body to an endpoint with the
// contract's headers (docs/contract.md, "headers").
//
// traceparent, when not empty, is sent as the W3C traceparent header
// (after the forwarded and custom headers, so neither overrides it).
func (e *Engine) send(ctx context.Context, ep store.Endpoint, eventID, eventType string, body []byte, forwarded map[string]string, number int, start time.Time, traceparent string) egress.Result {
	h := make(http.Header, 12+len(ep.Headers)+len(forwarded))
	// Forwarded headers (an inbound provider's) first, then the endpoint's
	// custom headers, then Herald's own, which nothing overrides.
	for k, v := range forwarded {
		h.Set(k, v)
	}
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	// Herald's own values share one backing array (one allocation instead
	// of one per header); the keys are in canonical form, and assigning
	// replaces any value set above, as Set would.
	own := [...]string{"application/json", e.cfg.UserAgent, eventID, eventType, strconv.Itoa(number)}
	vals := own[:]
	if h.Get("Content-Type") == "" {
		h["Content-Type"] = vals[0:1:1]
	}
	h["User-Agent"] = vals[1:2:2]
	h[HeaderEventID] = vals[2:3:3]
	h[HeaderEventType] = vals[3:4:4]
	h[HeaderDeliveryAttempt] = vals[4:5:5]
	if traceparent != "" {
		h[HeaderTraceParent] = []string{traceparent} // replaces a forwarded or custom one
	}
	signer, err := e.signers.get(&ep, start)
	if err != nil {
		// An endpoint without a usable secret is a storage fault; never
		// send an unsigned request.
		return egress.Result{ErrorClass: "signing", ErrorDetail: "the endpoint has no usable signing secret"}
	}
	signer.Sign(h, eventID, start, body)
	// The attempt outlives a shutdown of ctx: its result must be recorded,
	// and it is bounded by the timeout anyway.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.AttemptTimeout)
	defer cancel()
	sender := e.cfg.Sender
	if ep.Kind == store.EndpointKindSource {
		sender = e.cfg.TrustedSender
	}
	return sender.Do(actx, egress.Request{URL: ep.URL, Header: h, Body: body})
}

// TestEventType is the type of the events sent by SendTest.
const TestEventType = "herald.test"

// SendTest sends a signed test event to the endpoint now, through the same
// egress policy, signing and headers as every delivery, and returns the
// attempt without storing anything (POST /v1/endpoints/{id}/test).
func (e *Engine) SendTest(ctx context.Context, ep store.Endpoint) (store.Attempt, string, error) {
	start := e.cfg.Clock.Now()
	id := store.NewID("evt_test")
	body, err := store.EncodeBody(id, TestEventType, ep.Tenant, start, []byte(`{"message":"test event from Herald"}`))
	if err != nil {
		return store.Attempt{}, "", err
	}
	res := e.send(ctx, ep, id, TestEventType, body, nil, 1, start, "")
	return attemptRecord("", 1, start, res), id, nil
}

// attemptRecord is the record of one attempt's result. A 3xx is recorded
// with the error class "redirect" and its Location (redirects are never
// followed).
func attemptRecord(deliveryID string, number int, start time.Time, res egress.Result) store.Attempt {
	a := store.Attempt{
		DeliveryID:      deliveryID,
		Number:          number,
		StartedAt:       start,
		Duration:        res.Duration,
		StatusCode:      res.StatusCode,
		Error:           res.ErrorClass,
		ErrorDetail:     res.ErrorDetail,
		Location:        res.Location,
		ResponseExcerpt: res.Excerpt,
	}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		a.Error = "redirect"
		a.ErrorDetail = "redirects are not followed; the endpoint answered " + strconv.Itoa(res.StatusCode) + " with Location: " + res.Location
	}
	return a
}

// completeGather is how long the completer waits for more results when
// fewer than Workers have arrived (see claimGather for why).
const completeGather = 5 * time.Millisecond

// complete writes completions in batches: it takes what has arrived (up to
// CompleteBatch, waiting up to completeGather for Workers of them)
// and commits it in one transaction. A failed write is
// retried with backoff until it succeeds, so no attempt's result is lost
// while the database is briefly away.
func (e *Engine) complete() {
	batch := make([]store.Completion, 0, e.cfg.CompleteBatch)
	want := min(e.cfg.CompleteBatch, max(1, e.cfg.Workers))
	t := time.NewTimer(time.Hour)
	t.Stop()
	for first := range e.results {
		batch = append(batch[:0], first)
		// Take what has arrived; if that is less than want, wait up to
		// completeGather for more: each transaction has a fixed cost (its
		// commit writes every page it touched to the WAL), so a drain
		// writes fewer, larger batches.
		waiting := false
	drain:
		for len(batch) < e.cfg.CompleteBatch {
			select {
			case c, ok := <-e.results:
				if !ok {
					break drain
				}
				batch = append(batch, c)
				continue
			default:
			}
			if len(batch) >= want {
				break
			}
			if !waiting {
				waiting = true
				t.Reset(completeGather)
			}
			select {
			case c, ok := <-e.results:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			case <-t.C:
				waiting = false
				break drain
			}
		}
		t.Stop() // Go ≥ 1.23 timers: no stale tick survives Stop or Reset
		backoff := 50 * time.Millisecond
		failing := false
		for try := 0; ; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := e.cfg.Store.CompleteDeliveries(ctx, batch)
			cancel()
			if err == nil {
				break
			}
			if !failing {
				failing = true
				e.unwritten.Add(1)
			}
			if try >= 100 {
				e.cfg.Logger.Error("giving up writing completions; their leases will be rescued and the attempts repeated", "error", err, "count", len(batch))
				break
			}
			e.cfg.Logger.Warn("write completions failed; retrying", "error", err, "count", len(batch), "retry_in", backoff)
			time.Sleep(backoff)
			backoff = min(backoff*2, 5*time.Second)
		}
		if failing {
			e.unwritten.Add(-1)
		}
		if dueBefore(batch, e.wakeAt.Load()) {
			e.Notify() // a retry is due before the claimer would wake
		}
	}
}

// dueBefore reports whether a batch of completions made a delivery due
// before wakeAt, the Unix ns time a sleeping claimer will wake up (0: no
// claimer sleeps). Only then does the claimer need waking: a claimer that
// is not asleep reads the next due time before it sleeps, and a retry due
// after the wake-up is found by that read. Without this, a retry scheduled
// earlier than the poll interval waited for the poll (issue: retries of a
// 200 ms schedule came 1 s apart). Waking the claimer for every batch would
// cost a claim that finds nothing — on PostgreSQL a database round trip for
// each completion batch.
func dueBefore(batch []store.Completion, wakeAt int64) bool {
	if wakeAt == 0 {
		return false
	}
	for _, c := range batch {
		if (c.Deferred || c.State == store.DeliveryPending) && c.NextAttemptAt.UnixNano() < wakeAt {
			return true
		}
	}
	return false
}

// rescue periodically returns expired leases to the queue.
func (e *Engine) rescue(ctx context.Context) {
	t := time.NewTicker(e.cfg.RescueInterval)
	defer t.Stop()
	for {
		if e.unwritten.Load() > 0 {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := e.cfg.Store.RescueExpiredLeases(rctx, e.cfg.Clock.Now())
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			e.cfg.Logger.Warn("rescue expired leases failed", "error", err)
		case n > 0:
			e.cfg.Metrics.LeasesRescued(n)
			e.cfg.Logger.Info("rescued deliveries whose lease expired", "count", n)
			e.Notify()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
