package api

import (
	"context"
	"sync"
	"time"
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
	if ctx.Err() != nil {
		return err // a probe that gave up is not a result to keep
	}
	k.checked, k.err = now, err
	return err
}
