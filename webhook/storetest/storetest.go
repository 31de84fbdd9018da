// Package storetest holds conformance tests for implementations of
// [webhook.IdempotencyStore] and [webhook.VersionGate]. The memory, SQL and
// Redis implementations of this module run them; so can a third-party one:
//
//	func TestMyStore(t *testing.T) {
//		storetest.TestIdempotencyStore(t, func(t *testing.T) storetest.Harness {
//			clock := storetest.NewClock()
//			s := mystore.New(..., clock.Now)
//			return storetest.Harness{Store: s, Advance: clock.Advance}
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// Harness is one fresh store under test.
type Harness struct {
	// Store is empty: the tests use keys no other test uses, but assume
	// nothing else writes them.
	Store webhook.IdempotencyStore

	// Advance moves the store's clock forward by d. Nil means the store
	// uses real time; the expiry tests then sleep (a few hundred ms).
	Advance func(d time.Duration)
}

// Clock is a manual clock for stores that take a "now" function. The zero
// value is not usable; call NewClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at a fixed instant (2025-01-01 00:00:00 UTC).
func NewClock() *Clock {
	return &Clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Durations of the tests: long never lapses during a test; short lapses
// after an Advance (or sleep) of short+margin.
const (
	long   = time.Hour
	short  = 300 * time.Millisecond
	margin = 200 * time.Millisecond
)

// Concurrency is the number of goroutines racing in the concurrency tests.
const Concurrency = 50

// TestIdempotencyStore runs the conformance tests of
// [webhook.IdempotencyStore] against stores made by newStore, one per
// subtest.
func TestIdempotencyStore(t *testing.T, newStore func(t *testing.T) Harness) {
	ctx := context.Background()

	wait := func(h Harness, d time.Duration) {
		if h.Advance != nil {
			h.Advance(d)
		} else {
			time.Sleep(d)
		}
	}
	claim := func(t *testing.T, s webhook.IdempotencyStore, key string, lease time.Duration, want webhook.ClaimStatus) {
		t.Helper()
		got, err := s.Claim(ctx, key, lease)
		if err != nil {
			t.Fatalf("Claim(%q, %v): %v", key, lease, err)
		}
		if got != want {
			t.Fatalf("Claim(%q, %v) = %v, want %v", key, lease, got, want)
		}
	}
	must := func(t *testing.T, what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	t.Run("ClaimThenInProgress", func(t *testing.T) {
		s := newStore(t).Store
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
		claim(t, s, "evt_a", long, webhook.ClaimInProgress)
		claim(t, s, "evt_b", long, webhook.ClaimAcquired) // keys are independent
	})

	t.Run("CompleteThenDuplicate", func(t *testing.T) {
		s := newStore(t).Store
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
		must(t, "Complete", s.Complete(ctx, "evt_a", long))
		claim(t, s, "evt_a", long, webhook.ClaimCompleted)
		claim(t, s, "evt_a", long, webhook.ClaimCompleted)
	})

	t.Run("ReleaseThenClaimAgain", func(t *testing.T) {
		s := newStore(t).Store
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
		must(t, "Release", s.Release(ctx, "evt_a"))
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
		claim(t, s, "evt_a", long, webhook.ClaimInProgress)
		must(t, "Release of a free key", s.Release(ctx, "evt_never_claimed"))
	})

	t.Run("ReleaseCompleted", func(t *testing.T) {
		s := newStore(t).Store
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
		must(t, "Complete", s.Complete(ctx, "evt_a", long))
		must(t, "Release", s.Release(ctx, "evt_a"))
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
	})

	t.Run("CompleteWithoutClaim", func(t *testing.T) {
		s := newStore(t).Store
		must(t, "Complete", s.Complete(ctx, "evt_a", long))
		claim(t, s, "evt_a", long, webhook.ClaimCompleted)
	})

	t.Run("LeaseExpires", func(t *testing.T) {
		h := newStore(t)
		claim(t, h.Store, "evt_a", short, webhook.ClaimAcquired)
		claim(t, h.Store, "evt_a", short, webhook.ClaimInProgress)
		wait(h, short+margin)
		claim(t, h.Store, "evt_a", long, webhook.ClaimAcquired)
		claim(t, h.Store, "evt_a", long, webhook.ClaimInProgress)
	})

	t.Run("CompleteOutlivesLease", func(t *testing.T) {
		h := newStore(t)
		claim(t, h.Store, "evt_a", short, webhook.ClaimAcquired)
		must(t, "Complete", h.Store.Complete(ctx, "evt_a", long))
		wait(h, short+margin)
		claim(t, h.Store, "evt_a", short, webhook.ClaimCompleted)
	})

	t.Run("CompletedExpires", func(t *testing.T) {
		h := newStore(t)
		claim(t, h.Store, "evt_a", long, webhook.ClaimAcquired)
		must(t, "Complete", h.Store.Complete(ctx, "evt_a", short))
		claim(t, h.Store, "evt_a", long, webhook.ClaimCompleted)
		wait(h, short+margin)
		claim(t, h.Store, "evt_a", long, webhook.ClaimAcquired)
	})

	t.Run("ConcurrentClaimsOneWinner", func(t *testing.T) {
		s := newStore(t).Store
		got := race(t, func() (webhook.ClaimStatus, error) { return s.Claim(ctx, "evt_race", long) })
		if got[webhook.ClaimAcquired] != 1 || got[webhook.ClaimInProgress] != Concurrency-1 {
			t.Fatalf("%d concurrent claims of a free key: %v, want exactly 1 acquired and %d in progress", Concurrency, got, Concurrency-1)
		}
	})

	t.Run("ConcurrentClaimsOfExpiredKeyOneWinner", func(t *testing.T) {
		h := newStore(t)
		claim(t, h.Store, "evt_race", short, webhook.ClaimAcquired)
		wait(h, short+margin)
		got := race(t, func() (webhook.ClaimStatus, error) { return h.Store.Claim(ctx, "evt_race", long) })
		if got[webhook.ClaimAcquired] != 1 || got[webhook.ClaimInProgress] != Concurrency-1 {
			t.Fatalf("%d concurrent claims of an expired key: %v, want exactly 1 acquired and %d in progress", Concurrency, got, Concurrency-1)
		}
	})

	t.Run("ConcurrentClaimsOfCompletedKey", func(t *testing.T) {
		s := newStore(t).Store
		claim(t, s, "evt_race", long, webhook.ClaimAcquired)
		must(t, "Complete", s.Complete(ctx, "evt_race", long))
		got := race(t, func() (webhook.ClaimStatus, error) { return s.Claim(ctx, "evt_race", long) })
		if got[webhook.ClaimCompleted] != Concurrency {
			t.Fatalf("%d concurrent claims of a completed key: %v, want all completed", Concurrency, got)
		}
	})

	t.Run("ManyKeysConcurrently", func(t *testing.T) {
		s := newStore(t).Store
		var wg sync.WaitGroup
		errs := make(chan error, Concurrency)
		for i := range Concurrency {
			wg.Go(func() {
				key := fmt.Sprintf("evt_%d", i)
				st, err := s.Claim(ctx, key, long)
				if err == nil && st != webhook.ClaimAcquired {
					err = fmt.Errorf("Claim(%q) = %v, want acquired", key, st)
				}
				if err == nil {
					err = s.Complete(ctx, key, long)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("LongAndOddKeys", func(t *testing.T) {
		s := newStore(t).Store
		for _, key := range []string{
			"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
			"key with spaces, commas; 'quotes' and \"dq\" and %_ wildcards",
			"ünïcödé-🔑",
			string(bytesOf('k', 200)),
		} {
			claim(t, s, key, long, webhook.ClaimAcquired)
			claim(t, s, key, long, webhook.ClaimInProgress)
		}
		// A LIKE-style wildcard must not match another key.
		claim(t, s, "evt_%", long, webhook.ClaimAcquired)
		claim(t, s, "evt__", long, webhook.ClaimAcquired)
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		s := newStore(t).Store
		if _, err := s.Claim(ctx, "", long); err == nil {
			t.Error("Claim with an empty key: no error")
		}
		if _, err := s.Claim(ctx, "evt_a", 0); err == nil {
			t.Error("Claim with a zero lease: no error")
		}
		if _, err := s.Claim(ctx, "evt_a", -time.Second); err == nil {
			t.Error("Claim with a negative lease: no error")
		}
		if err := s.Complete(ctx, "evt_a", 0); err == nil {
			t.Error("Complete with a zero ttl: no error")
		}
		if err := s.Complete(ctx, "", long); err == nil {
			t.Error("Complete with an empty key: no error")
		}
		if err := s.Release(ctx, ""); err == nil {
			t.Error("Release with an empty key: no error")
		}
		// The rejected calls must not have left a record.
		claim(t, s, "evt_a", long, webhook.ClaimAcquired)
	})

	t.Run("CanceledContext", func(t *testing.T) {
		s := newStore(t).Store
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Claim(cctx, "evt_a", long); err == nil {
			t.Error("Claim with a canceled context: no error")
		}
	})
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// race runs f in Concurrency goroutines released at once and counts the
// results; any error fails the test.
func race(t *testing.T, f func() (webhook.ClaimStatus, error)) map[webhook.ClaimStatus]int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
		got   = map[webhook.ClaimStatus]int{}
		errs  []error
	)
	for range Concurrency {
		wg.Go(func() {
			<-start
			st, err := f()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got[st]++
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent Claim: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return got
}

// TestVersionGate runs the conformance tests of [webhook.VersionGate]
// against gates made by newGate, one per subtest.
func TestVersionGate(t *testing.T, newGate func(t *testing.T) webhook.VersionGate) {
	ctx := context.Background()

	type step struct {
		resource string
		version  int64
		fresh    bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{"file_1", 1, true}, {"file_1", 2, true}, {"file_1", 3, true}}},
		{"redelivery of the same version is stale", []step{{"file_1", 5, true}, {"file_1", 5, false}, {"file_1", 5, false}}},
		{"out of order", []step{
			{"file_1", 3, true},
			{"file_1", 1, false}, // older: arrived late
			{"file_1", 2, false},
			{"file_1", 3, false},
			{"file_1", 5, true}, // a gap is fine
			{"file_1", 4, false},
			{"file_1", 6, true},
		}},
		{"first seen is fresh whatever its version", []step{{"file_1", 42, true}, {"file_2", 1, true}, {"file_3", 0, true}, {"file_4", -7, true}, {"file_4", -8, false}, {"file_4", -6, true}}},
		{"resources are independent", []step{
			{"file_1", 10, true},
			{"file_2", 1, true},
			{"file_1", 9, false},
			{"file_2", 2, true},
			{"file_10", 1, true}, // no prefix matching
			{"File_1", 1, true},  // case sensitive
		}},
		{"extremes", []step{
			{"file_1", -1 << 63, true},
			{"file_1", 1<<63 - 1, true},
			{"file_1", 1<<63 - 1, false},
			{"file_1", 0, false},
		}},
		{"odd ids", []step{
			{"id with spaces, 'quotes'; and %_", 1, true},
			{"id with spaces, 'quotes'; and %_", 1, false},
			{"ünïcödé", 1, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(t)
			for i, s := range tc.steps {
				fresh, err := g.Check(ctx, s.resource, s.version)
				if err != nil {
					t.Fatalf("step %d: Check(%q, %d): %v", i+1, s.resource, s.version, err)
				}
				if fresh != s.fresh {
					t.Fatalf("step %d: Check(%q, %d) = %v, want %v", i+1, s.resource, s.version, fresh, s.fresh)
				}
			}
		})
	}

	t.Run("empty resource id", func(t *testing.T) {
		if _, err := newGate(t).Check(ctx, "", 1); err == nil {
			t.Fatal("Check with an empty resource id: no error")
		}
	})

	t.Run("concurrent same version: one fresh", func(t *testing.T) {
		g := newGate(t)
		fresh := countFresh(t, Concurrency, func(int) (bool, error) { return g.Check(ctx, "file_race", 7) })
		if fresh != 1 {
			t.Fatalf("%d concurrent checks of one version: %d fresh, want 1", Concurrency, fresh)
		}
	})

	t.Run("concurrent shuffled versions: newest wins", func(t *testing.T) {
		g := newGate(t)
		versions := rand.Perm(Concurrency) // 0..Concurrency-1, shuffled
		fresh := countFresh(t, Concurrency, func(i int) (bool, error) { return g.Check(ctx, "file_race", int64(versions[i])) })
		if fresh < 1 {
			t.Fatalf("%d concurrent checks: none fresh", Concurrency)
		}
		newest := int64(Concurrency - 1)
		if ok, err := g.Check(ctx, "file_race", newest); err != nil || ok {
			t.Fatalf("after the race, Check(newest=%d) = %v, %v; want stale (the gate must hold the newest)", newest, ok, err)
		}
		if ok, err := g.Check(ctx, "file_race", newest+1); err != nil || !ok {
			t.Fatalf("after the race, Check(%d) = %v, %v; want fresh", newest+1, ok, err)
		}
	})

	t.Run("concurrent in-order streams: each version fresh at most once", func(t *testing.T) {
		g := newGate(t)
		// Every goroutine checks versions 1..rounds in order, as if each
		// received the whole stream; whatever the interleaving, each
		// version may be let through once at most, and the gate ends at
		// the newest.
		const rounds = 20
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			counts = make(map[int64]int)
		)
		for range Concurrency {
			wg.Go(func() {
				for v := int64(1); v <= rounds; v++ {
					ok, err := g.Check(ctx, "file_stream", v)
					if err != nil {
						t.Errorf("Check: %v", err)
						return
					}
					if ok {
						mu.Lock()
						counts[v]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		for v, n := range counts {
			if n > 1 {
				t.Errorf("version %d let through %d times", v, n)
			}
		}
		if counts[1] != 1 || counts[rounds] != 1 {
			t.Errorf("versions 1 and %d must each be fresh exactly once: %v", rounds, counts)
		}
		if ok, err := g.Check(ctx, "file_stream", rounds); err != nil || ok {
			t.Fatalf("after the race, Check(%d) = %v, %v; want stale", rounds, ok, err)
		}
	})
}

func countFresh(t *testing.T, n int, f func(i int) (bool, error)) int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
		fresh int
		errs  []error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			ok, err := f(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				fresh++
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent Check: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return fresh
}
