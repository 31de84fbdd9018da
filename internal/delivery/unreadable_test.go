package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// moveStore records the postponements the engine asks for.
type moveStore struct {
	store.Store
	mu    sync.Mutex
	moves []string // "postpone <endpoint> <until>" or "move <endpoint> ..<dueTo> <at>"
}

func (s *moveStore) PostponeEndpointDeliveries(_ context.Context, id string, until time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moves = append(s.moves, "postpone "+id+" "+until.Sub(t0).String())
	return 1, nil
}

func (s *moveStore) MoveEndpointDeliveries(_ context.Context, p store.MoveParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moves = append(s.moves, "move "+p.EndpointID+" .."+p.DueTo.Sub(t0).String()+" "+p.At.Sub(t0).String())
	return 1, nil
}

func (s *moveStore) took() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.moves
	s.moves = nil
	return out
}

// TestUnreadableEndpointSkips: an endpoint whose stored values do not open
// is skipped by this node's claims for 1 s, then twice as long each time a
// claim after a skip meets it again, at most a minute; one WARN per skip
// (a claim of a second claimer within the skip logs nothing); the gauge
// counts it until a claim opens it again, or until nothing met it for a
// minute after its skip. A sole claimer (SQLite) postpones the endpoint's
// due deliveries to each skip's end; on a shared store (PostgreSQL) only
// those due when the last claim gave them back (nobody took them for a
// whole skip), so that a node holding the key gets the others at once.
func TestUnreadableEndpointSkips(t *testing.T) {
	for _, sole := range []bool{true, false} {
		name := "shared store"
		if sole {
			name = "sole claimer"
		}
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			logs := &testutil.SyncBuffer{}
			st := &moveStore{}
			e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, SoleClaimer: sole, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			errOpen := &store.UnreadableError{EndpointID: "ep_bad", Err: errors.New("cannot decrypt")}
			meet := func(at, due time.Duration) {
				t.Helper()
				e.unreadableMet(t.Context(), []store.UnreadableEndpoint{{ID: "ep_bad", Tenant: "acme", Deliveries: 1, OldestDue: t0.Add(due), Err: errOpen}}, t0.Add(at))
			}
			skipped := func(at time.Duration) ([]string, time.Duration) {
				t.Helper()
				ids, end := e.skipEndpoints(nil, t0.Add(at))
				if end.IsZero() {
					return ids, 0
				}
				return ids, end.Sub(t0)
			}
			warnings := func() int { return strings.Count(logs.String(), "level=WARN") }
			expectMoves := func(want ...string) {
				t.Helper()
				if got := st.took(); !slices.Equal(got, want) {
					t.Errorf("moves %q, want %q", got, want)
				}
			}

			meet(0, 0)
			if ids, end := skipped(500 * time.Millisecond); !slices.Equal(ids, []string{"ep_bad"}) || end != time.Second {
				t.Fatalf("skipped %v until %v, want ep_bad until 1s", ids, end)
			}
			if e.UnreadableEndpoints() != 1 || warnings() != 1 {
				t.Fatalf("gauge %d, %d WARN, want 1, 1", e.UnreadableEndpoints(), warnings())
			}
			if !strings.Contains(logs.String(), "endpoint=ep_bad") || !strings.Contains(logs.String(), "tenant=acme") || !strings.Contains(logs.String(), "cannot decrypt") {
				t.Errorf("the WARN does not name the endpoint, its tenant and the error:\n%s", logs.String())
			}
			if sole {
				expectMoves("postpone ep_bad 1s")
			} else {
				expectMoves() // a node holding the key may take them now
			}
			meet(700*time.Millisecond, 600*time.Millisecond) // a second claimer's claim, begun before the skip
			if warnings() != 1 {
				t.Errorf("a claim within the skip logged again")
			}
			if sole {
				expectMoves("postpone ep_bad 1s")
			} else {
				expectMoves()
			}
			if ids, _ := skipped(time.Second); len(ids) != 0 {
				t.Fatalf("still skipped at the skip's end: %v", ids)
			}
			// Met again after its skip: skipped twice as long, logged once
			// more. A delivery due before the last give-back is still
			// there: on a shared store, those are moved now.
			meet(time.Second, 0)
			if _, end := skipped(time.Second); end != 3*time.Second || warnings() != 2 {
				t.Fatalf("second skip until %v with %d WARN, want 3s, 2", end, warnings())
			}
			if sole {
				expectMoves("postpone ep_bad 3s")
			} else {
				expectMoves("move ep_bad ..700ms 3s")
			}
			// Met again with only deliveries due since: left due.
			meet(3*time.Second, 2*time.Second)
			if _, end := skipped(3 * time.Second); end != 7*time.Second {
				t.Fatalf("third skip until %v, want 7s", end)
			}
			if sole {
				expectMoves("postpone ep_bad 7s")
			} else {
				expectMoves()
			}
			// The skips double up to a minute.
			at := 7 * time.Second
			var periods []time.Duration
			for range 6 {
				meet(at, 0)
				_, end := skipped(at)
				periods = append(periods, end-at)
				at = end
			}
			if want := []time.Duration{8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}; !slices.Equal(periods, want) {
				t.Fatalf("skips %v, want %v", periods, want)
			}
			st.took()
			// A claim opens it again: forgotten, INFO.
			e.readableAgain([]store.Claim{{Endpoint: store.Endpoint{ID: "ep_bad", Tenant: "acme"}}})
			if ids, _ := skipped(at); len(ids) != 0 || e.UnreadableEndpoints() != 0 || !strings.Contains(logs.String(), "open again") {
				t.Fatalf("after it opened again: skipped %v, gauge %d", ids, e.UnreadableEndpoints())
			}
			// One not met again for a minute after its skip is forgotten.
			meet(at, 0)
			skipped(at + time.Second + time.Minute)
			if e.UnreadableEndpoints() != 1 {
				t.Fatalf("forgotten within a minute after its skip")
			}
			skipped(at + time.Second + time.Minute + time.Millisecond)
			if e.UnreadableEndpoints() != 0 {
				t.Fatalf("not forgotten a minute after its skip")
			}
		})
	}
}

// TestUnreadableNoPostponeWithoutTheKey: on a shared store, a node whose
// own key check fails (it lacks the current key: other nodes hold it)
// never postpones the deliveries of an endpoint it cannot open, even those
// still due a whole skip after it gave them back (the key-holding nodes may
// only have had no room); with the check passing (a value no node opens)
// it does, as TestUnreadableEndpointSkips shows; a sole claimer is not
// affected by the check.
func TestUnreadableNoPostponeWithoutTheKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sole      bool
		keyErr    error
		wantMoves []string
	}{
		{"shared store, key check fails", false, errors.New("the store's encrypted values do not open with this node's encryption key"), nil},
		{"shared store, key check passes", false, nil, []string{"move ep_bad ..0s 3s"}},
		{"sole claimer, key check fails", true, errors.New("stale key"), []string{"postpone ep_bad 3s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			st := &moveStore{}
			var checks atomic.Int32
			e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, SoleClaimer: tc.sole,
				Logger:   slog.New(slog.NewTextHandler(&testutil.SyncBuffer{}, nil)),
				KeyCheck: func(context.Context) error { checks.Add(1); return tc.keyErr }})
			if err != nil {
				t.Fatal(err)
			}
			meet := func(at time.Duration) {
				e.unreadableMet(t.Context(), []store.UnreadableEndpoint{{ID: "ep_bad", Tenant: "acme", Deliveries: 1, OldestDue: t0,
					Err: &store.UnreadableError{EndpointID: "ep_bad", Err: errors.New("cannot decrypt")}}}, t0.Add(at))
			}
			meet(0)
			st.took()
			meet(time.Second) // the delivery due at 0 is still there after the skip
			if got := st.took(); !slices.Equal(got, tc.wantMoves) {
				t.Errorf("moves %q, want %q", got, tc.wantMoves)
			}
			if !tc.sole && checks.Load() != 1 {
				t.Errorf("key checked %d times, want once (only when a postponement is due)", checks.Load())
			}
		})
	}
}

// spinStore reports, at every claim that does not skip it, an endpoint
// whose values do not open (its delivery left out), and says at every
// next-due read that a delivery is due now: that endpoint's, which the
// claims skip.
type spinStore struct {
	wakeStore
	claims chan []string // each claim's SkipEndpoints
}

func (s *spinStore) ClaimDeliveries(_ context.Context, p store.ClaimParams) ([]store.Claim, error) {
	s.claims <- slices.Clone(p.SkipEndpoints)
	if !slices.Contains(p.SkipEndpoints, "ep_bad") {
		p.Report([]store.UnreadableEndpoint{{ID: "ep_bad", Tenant: "acme", Deliveries: 1, OldestDue: t0,
			Err: &store.UnreadableError{EndpointID: "ep_bad", Err: errors.New("cannot decrypt")}}})
	}
	return nil, nil
}

func (*spinStore) NextDueAt(context.Context, []string) (time.Time, error) { return t0, nil }

func (*spinStore) ContinueFanOut(context.Context, store.FanOutParams) (store.FanOutResult, error) {
	return store.FanOutResult{}, nil
}

func (*spinStore) RescueExpiredLeases(context.Context, time.Time) (int, error) { return 0, nil }

func (*spinStore) MoveEndpointDeliveries(context.Context, store.MoveParams) (int, error) {
	return 0, nil
}

// The claimer does not spin on the due deliveries of an endpoint it skips:
// the next due time counts them, but a claim that skipped them took all
// else that was due, so it sleeps until the skip ends (the poll interval
// is an hour, the clock stands still), then claims without the skip.
func TestClaimerDoesNotSpinOnSkippedEndpoint(t *testing.T) {
	st := &spinStore{claims: make(chan []string, 64)}
	clk := clock.NewFake(t0)
	e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, Workers: 4, PollInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cancel, ran := runInBackground(t, e)
	defer func() {
		cancel()
		for {
			select {
			case <-ran:
				return
			case <-st.claims:
			}
		}
	}()
	next := func(what string) []string {
		t.Helper()
		select {
		case got := <-st.claims:
			return got
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("no %s", what)
			return nil
		}
	}
	if got := next("first claim"); len(got) != 0 {
		t.Fatalf("first claim skips %q", got)
	}
	// The endpoint met, the next claim skips it (what is due is its).
	if got := next("claim after the endpoint was met"); !slices.Equal(got, []string{"ep_bad"}) {
		t.Fatalf("claim after the endpoint was met skips %q, want [ep_bad]", got)
	}
	// Then the claimer sleeps on the clock until the skip ends.
	bctx, bcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer bcancel()
	if err := clk.BlockUntilContext(bctx, 3); err != nil { // the claimer's, the rescuer's and the fan-out loop's timers
		t.Fatalf("the claimer never slept on the clock (it spins on the skipped endpoint's due delivery): %v", err)
	}
	select {
	case got := <-st.claims:
		t.Fatalf("the claimer claimed again (skipping %q) with the clock standing still: it spins on the skipped endpoint's due delivery", got)
	case <-time.After(200 * time.Millisecond):
	}
	clk.Advance(time.Second)
	if got := next("claim at the skip's end"); len(got) != 0 {
		t.Fatalf("claim at the skip's end skips %q, want none", got)
	}
}

// cutShortStore: the first claim meets ep_a; the second, skipping ep_a,
// takes four deliveries of which only `readable` open (ep_ok's) and leaves
// the rest, ep_b's, out; later claims take nothing. The next due time is
// always past (others' deliveries due behind the cut-short claim).
type cutShortStore struct {
	wakeStore
	readable int
	calls    chan []string
	n        atomic.Int32
}

func (s *cutShortStore) ClaimDeliveries(_ context.Context, p store.ClaimParams) ([]store.Claim, error) {
	s.calls <- slices.Clone(p.SkipEndpoints)
	bad := func(id string, n int) {
		p.Report([]store.UnreadableEndpoint{{ID: id, Tenant: "acme", Deliveries: n, OldestDue: t0,
			Err: &store.UnreadableError{EndpointID: id, Err: errors.New("cannot decrypt")}}})
	}
	switch s.n.Add(1) {
	case 1:
		bad("ep_a", 1)
	case 2:
		var cs []store.Claim
		for i := range s.readable {
			cs = append(cs, store.Claim{Delivery: store.Delivery{ID: fmt.Sprintf("dlv_%d", i), Tenant: "acme", EndpointID: "ep_ok", NextAttemptAt: t0},
				Endpoint: holdEndpoint("ep_ok")})
		}
		bad("ep_b", p.Limit-s.readable)
		return cs, nil
	}
	return nil, nil
}

func (*cutShortStore) NextDueAt(context.Context, []string) (time.Time, error) { return t0, nil }

func (*cutShortStore) ContinueFanOut(context.Context, store.FanOutParams) (store.FanOutResult, error) {
	return store.FanOutResult{}, nil
}

func (*cutShortStore) RescueExpiredLeases(context.Context, time.Time) (int, error) { return 0, nil }

func (*cutShortStore) PostponeEndpointDeliveries(context.Context, string, time.Time) (int, error) {
	return 0, nil
}

func (*cutShortStore) MoveEndpointDeliveries(context.Context, store.MoveParams) (int, error) {
	return 0, nil
}

// A claim cut short by an endpoint whose values do not open (it left that
// endpoint's deliveries out of the workers it had, so it took fewer than it
// asked for) did not take all else that was due: the claimer claims again
// at once, as after a full claim, rather than sleeping until another
// skipped endpoint's skip ends (up to a minute) or the poll interval with
// other endpoints' deliveries due. Only a claim that took nothing on a
// shared store waits (a node lacking the key for every endpoint would
// otherwise lease and give back the whole queue without a pause); a sole
// claimer postponed what it left out, so its next claim steps over none.
func TestClaimerClaimsAgainAfterAClaimCutShortByUnreadable(t *testing.T) {
	for _, c := range []struct {
		name     string
		sole     bool
		readable int
	}{
		{"shared store, some readable", false, 1},
		{"sole claimer, none readable", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &cutShortStore{readable: c.readable, calls: make(chan []string, 64)}
			clk := clock.NewFake(t0)
			e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, Workers: 4, ClaimBatch: 4, PollInterval: time.Hour,
				SoleClaimer: c.sole, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			cancel, ran := runInBackground(t, e)
			defer func() {
				cancel()
				<-ran
			}()
			// Wait until the claimer sleeps on the clock (its wake-up
			// announced), which it does once a claim skipping both
			// endpoints took nothing.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // a hang guard
				if w := e.wakeAt.Load(); w != 0 && w != math.MaxInt64 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the claimer never slept")
				}
			}
			var calls [][]string
			for len(st.calls) > 0 {
				calls = append(calls, <-st.calls)
			}
			if len(calls) < 3 || !slices.Equal(calls[2], []string{"ep_a", "ep_b"}) && !slices.Equal(calls[2], []string{"ep_b", "ep_a"}) {
				t.Fatalf("claims before the claimer slept skipped %q; want a third claim, skipping ep_a and ep_b, right after the one cut short", calls)
			}
		})
	}
}
