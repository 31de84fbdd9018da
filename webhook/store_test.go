package webhook_test

import (
	"testing"

	"github.com/herald-webhooks/herald/webhook"
	"github.com/herald-webhooks/herald/webhook/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.TestIdempotencyStore(t, func(t *testing.T) storetest.Harness {
		clock := storetest.NewClock()
		s := webhook.NewMemoryStore()
		s.Now = clock.Now
		return storetest.Harness{Store: s, Advance: clock.Advance}
	})
}

// The zero MemoryStore works too, on real time.
func TestMemoryStoreZeroValue(t *testing.T) {
	storetest.TestIdempotencyStore(t, func(t *testing.T) storetest.Harness {
		return storetest.Harness{Store: new(webhook.MemoryStore)}
	})
}

func TestMemoryVersionGate(t *testing.T) {
	storetest.TestVersionGate(t, func(t *testing.T) webhook.VersionGate {
		return webhook.NewMemoryVersionGate()
	})
}
