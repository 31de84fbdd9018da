package delivery

import (
	"sync/atomic"

	"github.com/herald-webhooks/herald/internal/store"
)

// token is one of the claimer's Workers worker tokens while a claim holds
// it: from the claim (for a claim ahead, from its turn in the line:
// ahead.go) until the claim is attempted or put back (deferred), including
// while it waits parked behind its endpoint, so the claims holding tokens
// never outrun what can be attempted. It travels with its claim (job) and goes
// back to the engine's slots exactly once, by release; a second release
// panics, as it would let the claimer hold more claims than workers.
type token struct {
	slots    chan<- struct{}
	freed    *atomic.Int64 // the engine's count of released tokens (ahead.go's pace)
	released atomic.Bool
}

// takeToken wraps one token the claimer took from e.slots.
func (e *Engine) takeToken() *token { return &token{slots: e.slots, freed: &e.freed} }

// release gives the token back. It never blocks: slots holds Workers.
func (t *token) release() {
	if t.released.Swap(true) {
		panic("delivery: a worker token released twice")
	}
	t.freed.Add(1)
	t.slots <- struct{}{}
}

// job is a claim with the worker token it holds.
type job struct {
	store.Claim
	tok *token
}
