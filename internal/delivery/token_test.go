package delivery

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

// tokenStore postpones nothing (an opened circuit calls it) and records
// nothing else.
type tokenStore struct {
	wakeStore
	postponed chan string
	// endpoint is what GetEndpoint answers (an operator's change while a
	// claim is parked); nil: the claimed endpoint, unchanged.
	endpoint *atomic.Pointer[store.Endpoint]
}

// GetEndpoint answers the endpoint the test set (ErrNotFound for one with
// an empty id), or testClaim's endpoint.
func (s tokenStore) GetEndpoint(_ context.Context, id string) (store.Endpoint, error) {
	if ep := s.endpoint.Load(); ep != nil {
		if ep.ID == "" {
			return store.Endpoint{}, store.ErrNotFound
		}
		return *ep, nil
	}
	ep := testClaim("", id, 0).Endpoint
	ep.State = store.EndpointEnabled
	return ep, nil
}

func (s tokenStore) PostponeEndpointDeliveries(_ context.Context, endpointID string, _ time.Time) (int, error) {
	s.postponed <- endpointID
	return 0, nil
}

// gatedSender holds each attempt until the test lets it go, answering
// status.
type gatedSender struct {
	started chan struct{}
	release chan int // the status to answer
}

func (s gatedSender) Do(ctx context.Context, _ egress.Request) egress.Result {
	s.started <- struct{}{}
	return egress.Result{StatusCode: <-s.release}
}

const tokenWorkers = 4

// tokenEngine is an engine whose endpoints take one attempt at a time,
// whose circuit opens at the first transport failure, and whose
// completions are collected by the returned function once handle is done.
func tokenEngine(t *testing.T, sender Sender) (*Engine, tokenStore, func() []store.Completion) {
	t.Helper()
	st := tokenStore{postponed: make(chan string, 10), endpoint: new(atomic.Pointer[store.Endpoint])}
	e, err := New(Config{Store: st, Sender: sender, Clock: clock.NewFake(t0), Workers: tokenWorkers,
		EndpointConcurrency: 1, BreakerThreshold: 1, BreakerCooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var got []store.Completion
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range e.results {
			if r.move == nil {
				got = append(got, r.c)
			}
		}
	}()
	return e, st, func() []store.Completion {
		close(e.results)
		<-done
		return got
	}
}

// claimJob takes a worker token for a claim of delivery id to endpoint ep,
// as the claimer does.
func claimJob(t *testing.T, e *Engine, id, ep string, rate int) job {
	t.Helper()
	select {
	case <-e.slots:
	default:
		t.Fatal("no worker token left to claim with")
	}
	return job{Claim: testClaim(id, ep, rate), tok: e.takeToken()}
}

func testClaim(id, ep string, rate int) store.Claim {
	return store.Claim{
		Delivery: store.Delivery{ID: id, EndpointID: ep},
		Event:    store.Event{ID: "evt_" + id, Type: "invoice.paid", Body: []byte(`{}`)},
		Endpoint: store.Endpoint{ID: ep, URL: "https://" + ep + ".example/", RateLimitPerSecond: rate,
			Secrets: []store.Secret{{Value: "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", CreatedAt: t0}}},
	}
}

func assertAllTokens(t *testing.T, e *Engine) {
	t.Helper()
	if n := len(e.slots); n != tokenWorkers {
		t.Fatalf("the engine holds %d worker tokens after the claims ended, want exactly Workers = %d", n, tokenWorkers)
	}
}

// outcomes lists the delivery ids attempted and those deferred.
func outcomes(comps []store.Completion) (attempted, deferred []string) {
	for _, c := range comps {
		if c.Deferred {
			deferred = append(deferred, c.DeliveryID)
		} else {
			attempted = append(attempted, c.DeliveryID)
		}
	}
	return attempted, deferred
}

// Every path a claim takes through handle and work gives its worker token
// back exactly once: the engine holds exactly Workers tokens afterwards.
func TestWorkerTokensEveryPath(t *testing.T) {
	t.Run("admit", func(t *testing.T) {
		e, _, wait := tokenEngine(t, okSender{})
		e.handle(t.Context(), claimJob(t, e, "d1", "ep", 0))
		if a, d := outcomes(wait()); len(a) != 1 || len(d) != 0 {
			t.Fatalf("attempted %v, deferred %v; want d1 attempted", a, d)
		}
		assertAllTokens(t, e)
	})
	t.Run("defer", func(t *testing.T) {
		// A rate of 1/s (a burst of 2): the third claim is turned away
		// and deferred.
		e, _, wait := tokenEngine(t, okSender{})
		e.handle(t.Context(), claimJob(t, e, "d1", "ep", 1))
		e.handle(t.Context(), claimJob(t, e, "d2", "ep", 1))
		e.handle(t.Context(), claimJob(t, e, "d3", "ep", 1))
		if a, d := outcomes(wait()); len(a) != 2 || len(d) != 1 || d[0] != "d3" {
			t.Fatalf("attempted %v, deferred %v; want d1, d2 attempted, d3 deferred", a, d)
		}
		assertAllTokens(t, e)
	})

	// parkBehind starts d1's attempt, parks d2 behind it, and returns
	// when both are in place; finish lets d1's attempt answer status and
	// waits for its worker.
	parkBehind := func(t *testing.T, ctx context.Context, e *Engine, s gatedSender) (finish func(status int)) {
		// An attempt of ep has ended on this node before: past its slow
		// start, it parks.
		e.sched.mu.Lock()
		e.sched.ended["ep"] = struct{}{}
		e.sched.mu.Unlock()
		var wg sync.WaitGroup
		wg.Go(func() { e.handle(ctx, claimJob(t, e, "d1", "ep", 0)) })
		<-s.started
		e.handle(ctx, claimJob(t, e, "d2", "ep", 0)) // parks: returns at once
		if n := len(e.slots); n != tokenWorkers-2 {
			t.Fatalf("%d tokens free with one claim attempting and one parked, want %d", n, tokenWorkers-2)
		}
		return func(status int) {
			s.release <- status
			wg.Wait()
		}
	}
	t.Run("park then unpark", func(t *testing.T) {
		s := gatedSender{started: make(chan struct{}), release: make(chan int)}
		e, _, wait := tokenEngine(t, s)
		finish := parkBehind(t, t.Context(), e, s)
		go func() { <-s.started; s.release <- 200 }() // d2, taken by d1's worker
		finish(200)
		if a, d := outcomes(wait()); len(a) != 2 || len(d) != 0 {
			t.Fatalf("attempted %v, deferred %v; want d1 and d2 attempted", a, d)
		}
		assertAllTokens(t, e)
	})
	// A claim parked while its endpoint is paused, disabled or deleted is
	// put back without an attempt (the store holds it); one parked across
	// a change of URL or a rotation without overlap is attempted with the
	// endpoint as it is now, never with the copy it was claimed with.
	for _, tc := range []struct {
		name string
		ep   store.Endpoint
	}{
		{"paused while parked", store.Endpoint{ID: "ep", State: store.EndpointPaused}},
		{"disabled while parked", store.Endpoint{ID: "ep", State: store.EndpointDisabled}},
		{"deleted while parked", store.Endpoint{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := gatedSender{started: make(chan struct{}), release: make(chan int)}
			e, st, wait := tokenEngine(t, s)
			finish := parkBehind(t, t.Context(), e, s)
			st.endpoint.Store(&tc.ep)
			// Were d2 attempted after all, answer it (the test then fails
			// on the outcomes instead of hanging).
			stop := make(chan struct{})
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				select {
				case <-s.started:
					s.release <- 200
				case <-stop:
				}
			}()
			finish(200)
			close(stop)
			<-answered
			if a, d := outcomes(wait()); len(a) != 1 || len(d) != 1 || d[0] != "d2" {
				t.Fatalf("attempted %v, deferred %v; want d1 attempted, d2 put back unattempted", a, d)
			}
			if ok, _, reason := e.sched.admitLocked(admitKey{endpoint: "ep"}, t0); !ok {
				t.Fatalf("the cancelled claim kept the endpoint's only slot: %s", reason)
			}
			assertAllTokens(t, e)
		})
	}
	t.Run("rotated while parked", func(t *testing.T) {
		sent := make(chan egress.Request, 2)
		s := recordingSender{gatedSender{started: make(chan struct{}), release: make(chan int)}, sent}
		e, st, wait := tokenEngine(t, s)
		finish := parkBehind(t, t.Context(), e, s.gatedSender)
		rotated := testClaim("", "ep", 0).Endpoint
		rotated.State, rotated.URL = store.EndpointEnabled, "https://moved.example/"
		rotated.Secrets = []store.Secret{{Value: "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQtMDE=", CreatedAt: t0.Add(time.Second)}}
		st.endpoint.Store(&rotated)
		go func() { <-s.started; s.release <- 200 }()
		finish(200)
		if a, _ := outcomes(wait()); len(a) != 2 {
			t.Fatalf("attempted %v, want d1 and d2", a)
		}
		<-sent // d1, claimed before the change
		r2 := <-sent
		if r2.URL != rotated.URL {
			t.Fatalf("the parked claim went to %q, want the endpoint's new URL %q", r2.URL, rotated.URL)
		}
		if !verifiesWith(t, r2, rotated.Secrets[0].Value) || verifiesWith(t, r2, testClaim("", "ep", 0).Endpoint.Secrets[0].Value) {
			t.Fatal("the parked claim's attempt is not signed with the rotated secret alone")
		}
		assertAllTokens(t, e)
	})
	t.Run("circuit open with parked claims", func(t *testing.T) {
		s := gatedSender{started: make(chan struct{}), release: make(chan int)}
		e, st, wait := tokenEngine(t, s)
		finish := parkBehind(t, t.Context(), e, s)
		finish(500) // opens the circuit: d2 is put back
		if a, d := outcomes(wait()); len(a) != 1 || len(d) != 1 || d[0] != "d2" {
			t.Fatalf("attempted %v, deferred %v; want d1 attempted, d2 deferred", a, d)
		}
		e.background.Wait() // as Run does
		if ep := <-st.postponed; ep != "ep" {
			t.Fatalf("postponed %q, want ep", ep)
		}
		assertAllTokens(t, e)
	})
	t.Run("shutdown with parked claims", func(t *testing.T) {
		s := gatedSender{started: make(chan struct{}), release: make(chan int)}
		e, _, wait := tokenEngine(t, s)
		ctx, cancel := context.WithCancel(t.Context())
		finish := parkBehind(t, ctx, e, s)
		cancel()
		finish(200) // d2 is put back, not attempted
		if a, d := outcomes(wait()); len(a) != 1 || len(d) != 1 || d[0] != "d2" {
			t.Fatalf("attempted %v, deferred %v; want d1 attempted, d2 deferred", a, d)
		}
		assertAllTokens(t, e)
	})
	t.Run("shutdown with queued claims", func(t *testing.T) {
		e, _, wait := tokenEngine(t, okSender{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e.jobs <- claimJob(t, e, "d1", "ep", 0)
		e.jobs <- claimJob(t, e, "d2", "ep", 0)
		close(e.jobs)
		e.work(ctx)
		if a, d := outcomes(wait()); len(a) != 0 || len(d) != 2 {
			t.Fatalf("attempted %v, deferred %v; want both deferred", a, d)
		}
		assertAllTokens(t, e)
	})
}

// A token released twice would let the claimer hold more claims than
// workers: it panics instead.
func TestWorkerTokenReleasedTwicePanics(t *testing.T) {
	e, _, wait := tokenEngine(t, okSender{})
	j := claimJob(t, e, "d1", "ep", 0)
	j.tok.release()
	defer func() {
		wait()
		if recover() == nil {
			t.Fatal("a second release did not panic")
		}
		assertAllTokens(t, e)
	}()
	j.tok.release()
}

// runStore hands out one claim, then nothing; its postponement of an
// opened circuit's deliveries waits for the test.
type runStore struct {
	wakeStore
	claimed           atomic.Bool
	claim             store.Claim
	postponing, allow chan struct{}
	postponed         atomic.Bool
}

func (s *runStore) ClaimDeliveries(context.Context, store.ClaimParams) ([]store.Claim, error) {
	if s.claimed.Swap(true) {
		return nil, nil
	}
	return []store.Claim{s.claim}, nil
}

func (*runStore) ContinueFanOut(context.Context, store.FanOutParams) (store.FanOutResult, error) {
	return store.FanOutResult{}, nil
}

func (*runStore) RescueExpiredLeases(context.Context, time.Time) (int, error) { return 0, nil }

func (s *runStore) PostponeEndpointDeliveries(context.Context, string, time.Time) (int, error) {
	close(s.postponing)
	<-s.allow
	s.postponed.Store(true)
	return 0, nil
}

type failSender struct{}

func (failSender) Do(context.Context, egress.Request) egress.Result {
	return egress.Result{StatusCode: 503}
}

// Run returns only when every goroutine it started has ended, the
// postponement of an opened circuit's deliveries included.
func TestRunWaitsForCircuitPostponement(t *testing.T) {
	st := &runStore{postponing: make(chan struct{}), allow: make(chan struct{}), claim: testClaim("d1", "ep", 0)}
	e, err := New(Config{Store: st, Sender: failSender{}, Clock: clock.NewFake(t0), Workers: tokenWorkers,
		BreakerThreshold: 1, BreakerCooldown: time.Minute, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, ran := runInBackground(t, e)
	<-st.postponing
	cancel()
	select {
	case <-ran:
		t.Fatal("Run returned while the postponement it started was still running")
	case <-time.After(100 * time.Millisecond): // a Run that does not wait returns before: this can miss the bug, never invent it
	}
	close(st.allow)
	<-ran
	if !st.postponed.Load() {
		t.Fatal("Run returned before the postponement ended")
	}
}

// recordingSender is a gatedSender that also hands each request to sent.
type recordingSender struct {
	gatedSender
	sent chan egress.Request
}

func (s recordingSender) Do(ctx context.Context, r egress.Request) egress.Result {
	s.sent <- r
	return s.gatedSender.Do(ctx, r)
}

// verifiesWith reports whether the attempt's signatures verify with secret
// (package webhook, as a receiver checks them).
func verifiesWith(t *testing.T, r egress.Request, secret string) bool {
	t.Helper()
	v := webhook.Verifier{Secrets: []string{secret}, Tolerance: time.Hour, Now: func() time.Time { return t0 }}
	return v.Verify(r.Header, r.Body) == nil
}

// Every completion the engine writes carries the lease its claim was made
// under (the store applies it only while that lease is the delivery's):
// an attempt's and a deferral's alike.
func TestCompletionsCarryTheClaimsLease(t *testing.T) {
	e, _, wait := tokenEngine(t, okSender{})
	leases := map[string]time.Time{}
	for i, id := range []string{"d1", "d2", "d3"} {
		j := claimJob(t, e, id, "ep", 1) // a rate of 1/s: d3 is deferred
		j.Delivery.LeaseOwner, j.Delivery.LeaseUntil = e.Owner(), t0.Add(time.Duration(25+i)*time.Second)
		leases[id] = j.Delivery.LeaseUntil
		e.handle(t.Context(), j)
	}
	comps := wait()
	if a, d := outcomes(comps); len(a) != 2 || len(d) != 1 {
		t.Fatalf("attempted %v, deferred %v; want two attempted, one deferred", a, d)
	}
	for _, c := range comps {
		if c.Owner != e.Owner() || !c.LeaseUntil.Equal(leases[c.DeliveryID]) {
			t.Errorf("completion of %s (deferred %v): lease %s until %v, want %s until %v", c.DeliveryID, c.Deferred, c.Owner, c.LeaseUntil, e.Owner(), leases[c.DeliveryID])
		}
	}
}
