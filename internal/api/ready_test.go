package api

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReadyzKeyCheckIsCached: /readyz's key check runs at most once per
// interval (a probe every second costs one check per 10 s), its result —
// ready or not — is kept in between, and it runs again once the interval
// has passed, so a node turns not ready within one interval of a rekey.
func TestReadyzKeyCheckIsCached(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	runs := 0
	var result error
	k := &keyCheck{every: 10 * time.Second, now: func() time.Time { return now },
		check: func(context.Context) error { runs++; return result }}
	ctx := context.Background()
	if err := k.result(ctx); err != nil || runs != 1 {
		t.Fatalf("first probe: %v after %d runs", err, runs)
	}
	wrong := errors.New("wrong encryption key")
	result = wrong
	now = now.Add(9 * time.Second)
	if err := k.result(ctx); err != nil || runs != 1 {
		t.Fatalf("probe within the interval: %v after %d runs; want the kept result", err, runs)
	}
	now = now.Add(time.Second)
	if err := k.result(ctx); !errors.Is(err, wrong) || runs != 2 {
		t.Fatalf("probe after the interval: %v after %d runs; want the new result", err, runs)
	}
	now = now.Add(time.Second)
	if err := k.result(ctx); !errors.Is(err, wrong) || runs != 2 {
		t.Fatalf("failing result not kept: %v after %d runs", err, runs)
	}
	var none *keyCheck
	if err := none.result(ctx); err != nil {
		t.Fatalf("no key check configured: %v", err)
	}
}
