package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// lifecycle covers the store's own methods: Capabilities, EnsureMeta and
// Close.
func (s suite) lifecycle(t *testing.T) {
	s.run(t, "Capabilities", func(t *testing.T, f *fixture) {
		c := f.s.Capabilities()
		// Claimers: 1 (also for 0) for a local store, 2 for a networked one
		// (store.Capabilities).
		if c.Claimers < 0 || c.Claimers > 2 {
			t.Errorf("Claimers = %d, want 0, 1 or 2", c.Claimers)
		}
		if again := f.s.Capabilities(); again.Claimers != c.Claimers ||
			(again.Wakeups == nil) != (c.Wakeups == nil) ||
			(again.Membership == nil) != (c.Membership == nil) ||
			(again.Nodes == nil) != (c.Nodes == nil) ||
			(again.Exclusive == nil) != (c.Exclusive == nil) ||
			(again.HeaderSealer == nil) != (c.HeaderSealer == nil) {
			t.Errorf("Capabilities changed between calls: %+v then %+v", c, again)
		}
		if c.Nodes != nil {
			if _, err := c.Nodes.LiveNodes(f.ctx); err != nil {
				t.Errorf("LiveNodes: %v", err)
			}
		}
		if c.Wakeups == nil {
			return
		}
		// A declared wake-up fires on a committed publish, and Listen
		// returns ctx's error once ctx ends.
		ctx, cancel := context.WithCancel(f.ctx)
		notified := make(chan struct{}, 1)
		done := make(chan error, 1)
		go func() {
			done <- c.Wakeups.Listen(ctx, func() {
				select {
				case notified <- struct{}{}:
				default:
				}
			})
		}()
		// Listen subscribes asynchronously: publish until one is heard.
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-notified:
				break wait
			case <-tick.C:
				f.publish("t1", "order.created", base)
			case <-deadline:
				t.Error("Wakeups: no notification within 10s of publishing")
				break wait
			}
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Listen after cancel = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Listen did not return within 10s of its ctx ending")
		}
	})

	s.run(t, "EnsureMeta/FirstWriterWins", func(t *testing.T, f *fixture) {
		got, err := f.s.EnsureMeta(f.ctx, "suite.key", "first")
		if err != nil || got != "first" {
			t.Fatalf("EnsureMeta(new key) = %q, %v; want %q, nil", got, err, "first")
		}
		got, err = f.s.EnsureMeta(f.ctx, "suite.key", "second")
		if err != nil || got != "first" {
			t.Errorf("EnsureMeta(existing key, other value) = %q, %v; want the stored %q", got, err, "first")
		}
		got, err = f.s.EnsureMeta(f.ctx, "suite.other", "second")
		if err != nil || got != "second" {
			t.Errorf("EnsureMeta(another key) = %q, %v; want %q (keys are independent)", got, err, "second")
		}
		got, err = f.s.EnsureMeta(f.ctx, "suite.key", "")
		if err != nil || got != "first" {
			t.Errorf("EnsureMeta(existing key, empty value) = %q, %v; want %q", got, err, "first")
		}
	})

	s.run(t, "EnsureMeta/Concurrent", func(t *testing.T, f *fixture) {
		// Atomic: of racing writers exactly one value is stored, and every
		// caller is answered with it.
		const n = 8
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = f.s.EnsureMeta(f.ctx, "suite.race", fmt.Sprint("v", i)) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("EnsureMeta #%d: %v", i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("racing EnsureMeta answered %q and %q; want one stored value", got[0], got[i])
			}
		}
		if again, err := f.s.EnsureMeta(f.ctx, "suite.race", "late"); err != nil || again != got[0] {
			t.Errorf("EnsureMeta after the race = %q, %v; want %q", again, err, got[0])
		}
	})

	s.run(t, "Close", func(t *testing.T, f *fixture) {
		ep := f.endpoint("t1")
		if err := f.s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// The driver's own cleanup closes it again: Close is idempotent.
		if err := f.s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
		defer cancel()
		if err := f.s.Ping(ctx); err == nil {
			t.Error("Ping after Close = nil, want an error")
		}
		_, err := f.s.GetEndpoint(ctx, ep.ID)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetEndpoint after Close = %v; want an error other than not found", err)
		} else if code := store.CodeOf(err); code != store.CodeUnavailable {
			t.Errorf("GetEndpoint after Close: code %v (%v), want %v", code, err, store.CodeUnavailable)
		}
		if _, err := f.s.PublishEvent(ctx, publishParams(newEvent("t1", "order.created", `{}`), base)); err == nil {
			t.Error("PublishEvent after Close = nil, want an error (nothing stored)")
		} else if code := store.CodeOf(err); code != store.CodeUnavailable {
			t.Errorf("PublishEvent after Close: code %v (%v), want %v", code, err, store.CodeUnavailable)
		}
	})
}
