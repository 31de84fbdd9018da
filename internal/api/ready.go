package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// defaultKeyCheckEvery is how long /readyz keeps the result of
// Config.KeyCheck before running it again.
const defaultKeyCheckEvery = 10 * time.Second

// keyCheck runs Config.KeyCheck for /readyz at most once per
// Config.KeyCheckEvery and keeps the result in between, so a probe every
// second costs one key check (a meta row read and one AEAD open) per
// interval. Concurrent probes after expiry share one run.
type keyCheck struct {
	check func(context.Context) error
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	checked time.Time // zero: never
	err     error
}

// result returns the last result if it is younger than every, or runs the
// check again.
func (k *keyCheck) result(ctx context.Context) error {
	if k == nil || k.check == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if !k.checked.IsZero() && now.Sub(k.checked) < k.every && now.Sub(k.checked) >= 0 {
		return k.err
	}
	err := k.check(ctx)
	if ctx.Err() != nil || (err != nil && !errors.Is(err, store.ErrWrongKey)) {
		// A probe that gave up, or a store that failed while the key was
		// checked, is not a verdict on the key to keep for every.
		return err
	}
	k.checked, k.err = now, err
	return err
}

// StaleSealingKeyMessage is the 503 problem's detail of a write that would
// seal a value (an endpoint's signing secrets or custom header values, a
// source's configuration) on a node whose key is stale.
const StaleSealingKeyMessage = "this node's sealing key is older than the database's: the database's encrypted values no longer open with this node's encryption keys (herald rekey moved them to a newer key), so a value sealed here would not open on the nodes holding the current key; restart this node with the current key (HERALD_ENCRYPTION_KEY, or the database's key file); nothing was changed"

// NotReadyWrongKeyMessage is the detail of GET /readyz's 503 when the
// database's key check value opens with none of this node's keys
// (store.ErrWrongKey): herald rekey moved the values to a key it lacks.
const NotReadyWrongKeyMessage = "the store's encrypted values do not open with this node's encryption key (rekeyed?)"

// NotReadyRetiredKeyMessage is the detail of GET /readyz's 503 when this
// node's current key is one herald rekey retired while the database's key
// is among its previous ones (store.ErrRetiredKey: the key variables
// swapped).
const NotReadyRetiredKeyMessage = "this node's current encryption key (HERALD_ENCRYPTION_KEY) was retired by herald rekey, and the database's key is one it holds only as a previous one (HERALD_ENCRYPTION_KEY_PREVIOUS): the two key variables are swapped; restart this node with the database's current key as HERALD_ENCRYPTION_KEY"

// RetiredSealingKeyMessage is StaleSealingKeyMessage for a node whose
// current key herald rekey retired while the database's key is among its
// previous ones (store.ErrRetiredKey: the key variables swapped).
const RetiredSealingKeyMessage = "this node's sealing key is older than the database's: its current key (HERALD_ENCRYPTION_KEY) was retired by herald rekey and the database's encrypted values are under a key it holds only as a previous one (HERALD_ENCRYPTION_KEY_PREVIOUS: the two swapped?), so a value sealed here would not open on the nodes holding only the current key; restart this node with the database's current key as HERALD_ENCRYPTION_KEY; nothing was changed"

// refuseStaleKey is called by every operation that makes the store seal a
// value (create-endpoint, update-endpoint, rotate-endpoint-secret,
// revoke-endpoint-secret, create-source, update-source) before its write.
// It answers 503 with StaleSealingKeyMessage when the key check
// (Config.KeyCheck, the one /readyz runs, its result kept for
// KeyCheckEvery) finds that the database's key check value opens with
// none of this node's keys (store.ErrWrongKey): herald rekey moved the
// sealed values to a key this node lacks (rotation keys are newer than the
// ones they replace, docs/production.md), and what the node sealed now
// with its current key would open on no node holding only the new one.
// Nothing is written then. A check that could not run (the store failing,
// the request gone) is no verdict: the write goes on and meets the store
// itself. Reads are never refused. A node whose current key herald rekey
// retired while a previous key of it opens the key check value (the key
// variables swapped: store.ErrRetiredKey) is stale as well, and answered
// RetiredSealingKeyMessage.
func (s *Server) refuseStaleKey(ctx context.Context) error {
	switch err := s.keyCheck.result(ctx); {
	case errors.Is(err, store.ErrRetiredKey):
		return huma.NewError(http.StatusServiceUnavailable, RetiredSealingKeyMessage)
	case errors.Is(err, store.ErrWrongKey):
		return huma.NewError(http.StatusServiceUnavailable, StaleSealingKeyMessage)
	}
	return nil
}

// nodeKeyStale reports whether this node's key check (the one /readyz
// runs, its result kept for KeyCheckEvery) finds the database's key
// beyond this node's keys (store.ErrWrongKey, store.ErrRetiredKey). For
// the advice of an error answer: a check that cannot run within
// readyTimeout is no verdict (false).
func (s *Server) nodeKeyStale() bool {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return errors.Is(s.keyCheck.result(ctx), store.ErrWrongKey)
}

// readyTimeout is how long a readiness check (GET /readyz's, or a scrape's
// for herald_ready) waits for the store.
const readyTimeout = 2 * time.Second

// readyMaxAge is how old a readiness result a scrape of /metrics may show
// (herald_ready, herald_not_ready): a scrape reuses the last result of
// /readyz or of another scrape when it is younger, and checks again
// otherwise, so scrapes add no store round trip while a load balancer
// probes /readyz, and at most one per 5 s however many scrapers there are.
const readyMaxAge = 5 * time.Second

// readiness is the node's readiness check, GET /readyz's (the store's
// Ping, then the key check), and its last result.
type readiness struct {
	check func(context.Context) (reason string, err error)
	now   func() time.Time
	log   *slog.Logger // changes of readiness (logChange); nil: slog.Default()

	run sync.Mutex // held by a scrape while it checks: concurrent scrapes share one check

	mu     sync.Mutex
	at     time.Time // of the last result; zero: none
	reason string    // of the last result: "" (ready) or a metrics.NotReady* reason
	// logged is the readiness last logged ("": ready, as a node starts),
	// and since when the node has not been ready (zero while it is).
	logged string
	since  time.Time
}

// probe runs the check and keeps its result, unless the probe gave up
// (its client went away): a check that ran out of time is a result (the
// store is too slow), a canceled one is not. A result that changes the
// node's readiness is logged (logChange).
func (r *readiness) probe(ctx context.Context) (string, error) {
	reason, err := r.check(ctx)
	if !errors.Is(ctx.Err(), context.Canceled) {
		r.mu.Lock()
		r.at, r.reason = r.now(), reason
		r.logChange(reason, err)
		r.mu.Unlock()
	}
	return reason, err
}

// logChange logs a result that changes the node's readiness, and only
// such a result: under a load balancer probing /readyz every second, a
// line per failing probe would flood the log while saying nothing new
// (herald_not_ready shows the state at every scrape). Ready to not ready,
// or from one reason to another, is a warning with the reason and the
// error; not ready to ready is one line saying after what and how long.
// A change of error under the same reason is not logged. r.mu is held.
func (r *readiness) logChange(reason string, err error) {
	if reason == r.logged {
		return
	}
	log := r.log
	if log == nil {
		log = slog.Default()
	}
	now := r.now()
	switch {
	case reason == "":
		log.Info("ready again", "after", r.logged, "not_ready_for", now.Sub(r.since).Round(time.Millisecond))
		r.since = time.Time{}
	case reason == metrics.NotReadyEncryptionKey:
		log.Warn("not ready: the store's sealed values do not open with this node's encryption key (was herald rekey run? restart the node with the new key in HERALD_ENCRYPTION_KEY)",
			"reason", reason, "error", err)
	default:
		log.Warn("not ready", "reason", reason, "error", err)
	}
	if r.logged == "" && reason != "" {
		r.since = now
	}
	r.logged = reason
}

// current returns the last result if it is younger than readyMaxAge, else
// checks again (with readyTimeout) and returns that; concurrent callers
// share one check. It is what /metrics reads at each scrape.
func (r *readiness) current() string {
	r.run.Lock()
	defer r.run.Unlock()
	r.mu.Lock()
	at, reason := r.at, r.reason
	r.mu.Unlock()
	if age := r.now().Sub(at); !at.IsZero() && age < readyMaxAge && age >= 0 {
		return reason
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	reason, _ = r.probe(ctx)
	return reason
}
