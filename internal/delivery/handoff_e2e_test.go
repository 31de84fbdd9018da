package delivery

// The hand-off on a real SQLite store, wired as app.New wires it (claim
// lock first, then SetHandOff(engine)), and on PostgreSQL (a database of
// its own; skipped without HERALD_TEST_POSTGRES_URL): exactly once, no
// lost wake-up, a clean shutdown.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// handOffStore is a store with the hand-off capability.
type handOffStore interface {
	store.Store
	store.HandOffer
}

// handOffStores are the stores the hand-off tests run on, by name.
var handOffStores = []struct {
	name string
	open func(*testing.T) handOffStore
}{
	{"sqlite", func(t *testing.T) handOffStore { return claimingStore(t) }},
	{"postgres", func(t *testing.T) handOffStore { return postgresStore(t) }},
}

// postgresStore opens a store on a new database of the server at
// HERALD_TEST_POSTGRES_URL (dropped at cleanup), or skips the test.
func postgresStore(t *testing.T) *postgres.Store {
	t.Helper()
	admin := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if admin == "" {
		t.Skip("HERALD_TEST_POSTGRES_URL is not set; skipping the PostgreSQL case (CI sets it)")
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "herald_delivery_" + hex.EncodeToString(rnd[:])
	exec := func(q string) {
		ctx := context.WithoutCancel(t.Context())
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE DATABASE " + name)
	t.Cleanup(func() { exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	st, err := postgres.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type countingSender struct {
	mu sync.Mutex
	n  map[string]int // attempts by event id + URL
}

func (s *countingSender) Do(_ context.Context, r egress.Request) egress.Result {
	s.mu.Lock()
	s.n[r.Header.Get(HeaderEventID)+" "+r.URL]++
	s.mu.Unlock()
	return egress.Result{StatusCode: 204, Duration: time.Millisecond}
}

// expectEachOnce fails t for every delivery attempted more than once.
func (s *countingSender) expectEachOnce(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.n {
		if v != 1 {
			t.Errorf("%s attempted %d times", k, v)
		}
	}
}

func (s *countingSender) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := 0
	for _, v := range s.n {
		t += v
	}
	return t
}

// claimingStore opens a SQLite store that holds the claim lock, as app.New
// leaves it before the engine is set as its hand-off; closed by the test's
// cleanup.
func claimingStore(t *testing.T) *sqlite.Store {
	t.Helper()
	sq, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	if err := sq.ClaimExclusively(t.Context()); err != nil {
		t.Fatal(err)
	}
	return sq
}

// TestHandOffExactlyOnceNoLostWakeUp: concurrent publishes (groups of
// several tenants, more deliveries than workers) with the claimer's poll an
// hour away: every delivery is attempted exactly once, none waits for the
// poll (a lost wake-up would leave it pending until the guard).
func TestHandOffExactlyOnceNoLostWakeUp(t *testing.T) {
	for _, c := range []struct {
		name       string
		tenants    []string
		publishers int // per tenant
		pause      time.Duration
		handsOff   bool // every publish finds idle workers: some must be handed off
	}{
		{"busy", []string{"acme", "beta", "gamma"}, 2, 0, false},
		{"quiet", []string{"acme", "beta", "gamma"}, 1, 3 * time.Millisecond, false},
		{"alone", []string{"acme"}, 1, 3 * time.Millisecond, true},
	} {
		for _, st := range handOffStores {
			t.Run(st.name+"/"+c.name, func(t *testing.T) { handOffExactlyOnce(t, st.open(t), c.tenants, c.publishers, c.pause, c.handsOff) })
		}
	}
}

func handOffExactlyOnce(t *testing.T, sq handOffStore, tenants []string, publishers int, pause time.Duration, handsOff bool) {
	ctx := t.Context()
	for _, tn := range tenants {
		for i := range 2 {
			ep := holdEndpoint(fmt.Sprintf("ep_%s_%d", tn, i))
			ep.Tenant = tn
			if _, err := sq.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
				t.Fatal(err)
			}
		}
	}
	snd := &countingSender{n: map[string]int{}}
	e, err := New(Config{Store: sq, Sender: snd, Clock: clock.System(), Workers: 4, EndpointConcurrency: 4, TenantConcurrency: 4, HostConcurrency: 4, Owner: "node-a", Lease: time.Minute,
		EndpointChanges: sq.Capabilities().EndpointChanges, Renewer: sq.Capabilities().Renewer, // SQLite: claims ahead during a backlog, as app.New sets it
		PollInterval: time.Hour, RescueInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sq.SetHandOff(e)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	const perTenant = 40
	var handed sync.Map
	// publish publishes one event of tenant tn (its 2 deliveries) and
	// wakes the engine as the API does; false after an error.
	publish := func(tn string) bool {
		id := store.NewID("evt")
		now := time.Now().UTC()
		res, err := sq.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: tn, Type: "t", OccurredAt: now,
				Body: fmt.Appendf(nil, `{"id":%q}`, id), Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") },
		})
		if err != nil {
			t.Error(err)
			return false
		}
		handed.Store(id, res.HandedOff)
		if res.Pending > res.HandedOff { // as the API
			e.Notify()
		}
		return true
	}
	var wg sync.WaitGroup
	for _, tn := range tenants {
		for range publishers {
			wg.Go(func() {
				for range perTenant / publishers {
					if !publish(tn) {
						return
					}
					time.Sleep(pause)
				}
			})
		}
	}
	wg.Wait()
	want := len(tenants) * (perTenant / publishers) * publishers * 2
	handedOff := func() int {
		n := 0
		handed.Range(func(_, v any) bool { n += v.(int); return true })
		return n
	}
	delivered := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a hang guard: the poll is an hour
		for snd.total() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d deliveries attempted (%d handed off): a lost wake-up", snd.total(), want, handedOff())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	delivered(want)
	// A machine busy enough (CI under the race detector) can keep every
	// one of those publishes from finding an idle engine (a full claim
	// just before, a completion waiting for the writer): publish on,
	// one event at a time once the last is delivered and the engine has
	// settled, until one is handed off.
	for i := 0; handsOff && handedOff() == 0 && i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		if !publish(tenants[0]) {
			break
		}
		want += 2
		delivered(want)
	}
	nHanded := handedOff()
	time.Sleep(100 * time.Millisecond)
	snd.expectEachOnce(t)
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if len(snd.n) != want {
		t.Errorf("%d distinct deliveries attempted, want %d", len(snd.n), want)
	}
	t.Logf("%d deliveries, %d handed off", want, nHanded)
	if handsOff && nHanded == 0 {
		t.Error("one publisher with idle workers handed nothing off")
	}
}

// TestHandOffShutdownLeavesNothingLeased: Run stopped while publishes
// keep being handed off: when it returns no delivery is leased, none was
// attempted twice, and a second engine on the store delivers the rest.
func TestHandOffShutdownLeavesNothingLeased(t *testing.T) {
	for _, st := range handOffStores {
		t.Run(st.name, func(t *testing.T) { handOffShutdown(t, st.open(t)) })
	}
}

func handOffShutdown(t *testing.T, sq handOffStore) {
	ctx := t.Context()
	for i := range 2 {
		if _, err := sq.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: holdEndpoint(fmt.Sprintf("ep_%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	snd := &countingSender{n: map[string]int{}}
	newEngine := func() *Engine {
		e, err := New(Config{Store: sq, Sender: snd, Clock: clock.System(), Workers: 4, EndpointConcurrency: 4, TenantConcurrency: 4, HostConcurrency: 4,
			Owner: "node-a", Lease: time.Minute, PollInterval: time.Hour, RescueInterval: time.Hour, EndpointChanges: sq.Capabilities().EndpointChanges, Renewer: sq.Capabilities().Renewer})
		if err != nil {
			t.Fatal(err)
		}
		sq.SetHandOff(e)
		return e
	}
	e := newEngine()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(runCtx) }()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var published sync.Map
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := store.NewID("evt")
			now := time.Now().UTC()
			res, err := sq.PublishEvent(ctx, store.PublishParams{
				Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: fmt.Appendf(nil, `{"id":%q}`, id), Fingerprint: id},
				Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") },
			})
			if err != nil {
				t.Error(err)
				return
			}
			published.Store(id, true)
			if res.Pending > res.HandedOff {
				e.Notify()
			}
			time.Sleep(500 * time.Microsecond)
		}
	})
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	close(stop)
	wg.Wait()
	p, err := sq.ListDeliveries(ctx, store.ListDeliveriesParams{ListParams: store.ListParams{Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Data {
		if d.LeaseOwner != "" {
			t.Errorf("delivery %s still leased to %s after Run returned", d.ID, d.LeaseOwner)
		}
	}
	n := 0
	published.Range(func(_, _ any) bool { n++; return true })
	// A second engine delivers the rest.
	e2 := newEngine()
	runCtx2, cancel2 := context.WithCancel(ctx)
	done2 := make(chan struct{})
	go func() { defer close(done2); e2.Run(runCtx2) }()
	defer func() { cancel2(); <-done2 }()
	want := 2 * n
	for deadline := time.Now().Add(30 * time.Second); snd.total() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries attempted after the restart", snd.total(), want)
		}
	}
	time.Sleep(50 * time.Millisecond)
	snd.expectEachOnce(t)
	t.Logf("%d deliveries", want)
}
