package delivery

import (
	"sync"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

// signers keeps one webhook.Signer per endpoint for as long as the
// endpoint's active secrets stay the same strings. A Signer derives its
// keys and keeps keyed HMAC states for reuse; building one per attempt
// (decoding the secrets, keying two HMACs per secret) was a tenth of the
// attempt's CPU in a drain. Every attempt is still signed afresh: only the
// keys are reused.
type signers struct {
	mu sync.Mutex
	m  map[string]cachedSigner // by endpoint id
}

type cachedSigner struct {
	secrets []string // the active secrets the signer was built from, in order
	signer  *webhook.Signer
}

// maxCachedSigners bounds the cache; past it the cache starts over.
const maxCachedSigners = 4096

// get returns a signer for the secrets of ep active at now (newest first),
// or the error of webhook.NewSigner (e.g. no active secret).
func (c *signers) get(ep *store.Endpoint, now time.Time) (*webhook.Signer, error) {
	c.mu.Lock()
	cs, ok := c.m[ep.ID]
	c.mu.Unlock()
	if ok && sameActive(ep, now, cs.secrets) {
		return cs.signer, nil
	}
	active := ep.ActiveSecrets(now)
	s, err := webhook.NewSigner(active...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSigners {
		c.m = make(map[string]cachedSigner)
	}
	c.m[ep.ID] = cachedSigner{secrets: active, signer: s}
	c.mu.Unlock()
	return s, nil
}

// sameActive reports whether the secrets of ep active at now are exactly
// want, in order, without allocating.
func sameActive(ep *store.Endpoint, now time.Time, want []string) bool {
	i := 0
	for _, s := range ep.Secrets {
		if !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt) {
			continue
		}
		if i >= len(want) || want[i] != s.Value {
			return false
		}
		i++
	}
	return i == len(want)
}
