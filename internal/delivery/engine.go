// Package delivery is Herald's delivery engine: it claims due deliveries
// from the store's queue in batches with a lease, makes one signed HTTP
// attempt per claim on a pool of workers, decides the next step with the
// retry policy, and writes completions in batches. A rescuer returns the
// leases of crashed nodes to the queue.
//
// Flow: claimer → jobs → workers (ask the scheduler; then sign, send,
// classify, or defer, or leave parked) → results → completer (batched
// CompleteDeliveries). The scheduler (admission.go) decides what may run
// now — caps per endpoint, tenant and host, rate limits, circuit breakers,
// parking — and the workers carry out its decisions. The claimer claims
// as many deliveries as there are idle workers; during a backlog on a
// store that counts its endpoint changes (SQLite) it also claims ahead,
// into a short line the workers take from as their attempts end, each
// claim checked at its turn (ahead.go).
package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

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
	// Clock tells the time the engine stamps and compares with the store's
	// due times and leases, and makes the timers of its schedule: the
	// wait for the next due delivery, the poll interval, the rescuer and
	// the fan-out loop. The few-millisecond batching waits, the backoff
	// after a failed database call (they pace the machine, not the
	// schedule) and the cluster heartbeats (membership expires on the
	// database server's clock; cluster.go) stay on the wall clock. Default
	// clock.System(); tests inject a clock.Fake.
	Clock clock.Clock
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
	// SoleClaimer says this engine's process is the only one that claims
	// from Store (a driver with store.Capabilities.Exclusive: SQLite):
	// deliveries whose endpoint's stored values it cannot open, no other
	// node would open either, so it postpones them while it skips the
	// endpoint, instead of leaving them due (unreadable.go).
	SoleClaimer bool
	// KeyCheck, optional, reports whether this node holds the encryption
	// key the store's values are sealed under now (store.CheckKey; an
	// error when it does not: a node not restarted with the new key
	// before `herald rekey`). On a shared store, a node whose check fails
	// never postpones the deliveries of endpoints it cannot open: other
	// nodes hold the key and may only have had no room for them yet
	// (unreadable.go). Called at most once per claim that meets such an
	// endpoint, and only when a postponement is due.
	KeyCheck func(context.Context) error
	// EndpointChanges, when set, counts the store's changes to what an
	// attempt takes from an endpoint (store.Capabilities.EndpointChanges:
	// SQLite). It lets the engine claim ahead (ClaimAhead).
	EndpointChanges func() uint64
	// Renewer, when set, renews a claim's lease without a database write
	// (store.Capabilities.Renewer: SQLite). With EndpointChanges it lets
	// the engine claim ahead (ClaimAhead).
	Renewer store.LeaseRenewer
	// ClaimAhead is the most claims the claimer may hold, during a
	// backlog, beyond the idle workers: a line the workers take from as
	// their attempts end, as long as they take in about 50 ms at their
	// recent pace (ahead.go). Default Workers when EndpointChanges and
	// Renewer are set and Claimers is 1; otherwise, or when negative, none.
	// A positive value needs those (New refuses it otherwise).
	ClaimAhead int
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
		c.Clock = clock.System()
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
	if c.ClaimAhead == 0 && c.EndpointChanges != nil && c.Renewer != nil && c.Claimers == 1 {
		c.ClaimAhead = c.Workers
	}
	c.ClaimAhead = max(c.ClaimAhead, 0)
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
	if c.ClaimAhead > 0 {
		switch {
		case c.EndpointChanges == nil:
			return errors.New("delivery: Config.ClaimAhead needs EndpointChanges (a claim that waited must see its endpoint's changes)")
		case c.Renewer == nil:
			return errors.New("delivery: Config.ClaimAhead needs Renewer (a claim that waited gets a fresh lease)")
		case c.Claimers > 1:
			return errors.New("delivery: Config.ClaimAhead needs one claim loop (Claimers 1): with more, claims reach the line out of due order")
		}
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
	results chan result
	sched   *scheduler // admission: what may run now (admission.go)
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
	// The hand-off (handoff.go): open while the claimers run; backlog is
	// the claimer's (its last claim took all it asked for); handOffs
	// counts the reservations not yet taken (Run waits for them before it
	// closes jobs).
	handMu   sync.Mutex
	handOpen bool
	backlog  atomic.Bool
	handOffs sync.WaitGroup
	// unreadable is the endpoints whose stored values did not open at a
	// claim: skipped by this node's claims for a while (unreadable.go).
	unreadable unreadableSet
	// Claiming ahead (ahead.go): the line of claims without a worker
	// token; aheadN counts them, in the line or held by the dispatcher;
	// aheadLine is the line's current length; aheadRoom is signalled when
	// a claim leaves with half of the line or more free; aheadOff is when a
	// paused claiming ahead may resume (Unix ns, engine clock); freed
	// counts the worker tokens released (the pace of the line's length).
	line      chan ahead
	aheadN    atomic.Int64
	aheadLine atomic.Int64
	aheadRoom chan struct{}
	aheadOff  atomic.Int64
	freed     atomic.Int64
}

// result is what a worker hands the completers: an attempt's completion or
// a deferral (c), or a move of an endpoint's due deliveries in the store
// (move: the hand-back of a half-open circuit's held backlog, or a
// pull-in of deliveries deferred at a slower pace than the endpoint now
// answers at). A completer carries out the moves it took after the
// completions it took with them, so with one completer (SQLite) a move
// follows every deferral queued before it; with several (PostgreSQL) one
// may be written after it: that delivery then waits for the hold's end (at
// most an attempt timeout), or, for a pull-in, for the time it was
// deferred to.
type result struct {
	c    store.Completion
	move *backlogMove
}

// backlogMove moves the endpoint's pending, unleased deliveries due from
// dueFrom to dueTo (zero dueFrom: no lower bound) to at
// (store.Store.MoveEndpointDeliveries); a pullIn moves only those not
// attempted since they were created or replayed, at most pullInMax, the
// earliest due first, spacing apart from at on.
type backlogMove struct {
	endpointID         string
	dueFrom, dueTo, at time.Time
	pullIn             bool
	spacing            time.Duration
	srcAvg             time.Duration // pullIn: the average the moved schedule was spaced by
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
		results: make(chan result, cfg.Workers*2),
		sched: newScheduler(cfg.EndpointConcurrency, cfg.Workers, cfg.BreakerThreshold, cfg.BreakerCooldown, cfg.DeferDelay).
			withGroupCaps(cfg.TenantConcurrency, cfg.HostConcurrency, cfg.AttemptTimeout),
		congested: make(chan struct{}, 1),
		progress:  make(chan struct{}, 1),
		line:      make(chan ahead, cfg.ClaimAhead),
		aheadRoom: make(chan struct{}, 1),
	}
	for range cfg.Workers {
		e.slots <- struct{}{}
	}
	cfg.Logger.Info("delivery caps", "workers", cfg.Workers, "endpoint_concurrency", cfg.EndpointConcurrency,
		"tenant_concurrency", cfg.TenantConcurrency, "host_concurrency", cfg.HostConcurrency, "cluster", cfg.Membership != nil)
	for _, w := range cfg.capWarnings() {
		cfg.Logger.Warn(w)
	}
	return e, nil
}

// capWarnings names the caps (after WithDefaults) that another cap or
// --workers makes ineffective, with the value that holds instead. The
// defaults (workers/8, /4, /2, at least 1) never contradict each other; an
// explicit value can. On a cluster (Membership) a cap is for every node
// together, so a cap above one node's workers is legitimate and only the
// caps are compared with each other.
func (c Config) capWarnings() []string {
	var out []string
	type capFlag struct {
		flag string
		v    int
	}
	endpoint := capFlag{"--endpoint-concurrency", c.EndpointConcurrency}
	tenant := capFlag{"--tenant-concurrency", c.TenantConcurrency}
	host := capFlag{"--host-concurrency", c.HostConcurrency}
	for _, p := range [][2]capFlag{{endpoint, tenant}, {endpoint, host}} {
		if p[0].v > p[1].v {
			out = append(out, fmt.Sprintf("%s %d is above %s %d: an endpoint that has not answered fast holds at most %d attempts (keep %s ≤ %s)",
				p[0].flag, p[0].v, p[1].flag, p[1].v, p[1].v, p[0].flag, p[1].flag))
		}
	}
	if c.Membership == nil {
		for _, f := range []capFlag{endpoint, tenant, host} {
			if f.v > c.Workers {
				out = append(out, fmt.Sprintf("%s %d is above --workers %d: it has no effect beyond the %d workers of this node", f.flag, f.v, c.Workers, c.Workers))
			}
		}
	}
	return out
}

// InFlight counts the attempts in flight on this node (the in-flight
// gauges: metrics.Metrics.SetInFlight).
func (e *Engine) InFlight() metrics.InFlight { return e.sched.inFlight() }

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
// opened circuit's deliveries, bounded by 30 s, included). Claims not yet started when ctx ends (queued for a worker,
// in the line of claims ahead or parked behind their endpoint's attempt) are put back, due at once,
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
	dispatchDone := make(chan struct{}) // the line's dispatcher (ahead.go), when claiming ahead
	if e.cfg.ClaimAhead > 0 {
		go func() {
			defer close(dispatchDone)
			e.dispatch(ctx)
		}()
	} else {
		close(dispatchDone)
	}
	select {
	case <-ready:
		var claimers sync.WaitGroup
		e.handMu.Lock()
		e.handOpen = true
		e.handMu.Unlock()
		for range e.cfg.Claimers {
			claimers.Go(func() { e.claim(ctx) })
		}
		claimers.Wait()
	case <-ctx.Done():
	}
	close(e.line) // the claimers have stopped: nothing more joins the line
	<-dispatchDone
	e.handMu.Lock()
	e.handOpen = false
	e.handMu.Unlock()
	e.handOffs.Wait()

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
