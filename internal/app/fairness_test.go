package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
)

// concurrency counts the requests in flight at a receiver and the most
// seen at once.
type concurrency struct {
	now, peak atomic.Int32
}

func (c *concurrency) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := c.now.Add(1)
		for {
			p := c.peak.Load()
			if n <= p || c.peak.CompareAndSwap(p, n) {
				break
			}
		}
		defer c.now.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// TestFairDelivery: tenant a's 10 endpoints and tenants c and d's six
// endpoints never answer (the receivers hold every request until the test
// ends; the attempt timeout is longer than the test). With 16 workers and
// an endpoint cap of 2, a's endpoints alone could take 20 workers and
// stall everyone for a full timeout; with --tenant-concurrency 4 and
// --host-concurrency 5 a holds 4, c and d's shared host 5, and tenant b's
// healthy endpoint is delivered while they hang. Receivers count the
// requests in flight: neither cap is ever exceeded.
func TestFairDelivery(t *testing.T) {
	t.Parallel()
	h := startHerald(t, func(c *app.Config) {
		c.Workers, c.EndpointConcurrency, c.TenantConcurrency, c.HostConcurrency = 16, 2, 4, 5
		c.AttemptTimeout = time.Minute
	})
	var hostA, hostCD concurrency
	holeA := newReceiverWith(t, hostA.wrap)
	holeCD := newReceiverWith(t, hostCD.wrap)
	for _, r := range []*receiver{holeA, holeCD} {
		r.mu.Lock()
		r.block = make(chan struct{})
		r.mu.Unlock()
	}
	healthy := newReceiver(t, 200)
	for i := range 10 {
		h.createEndpoint("a", fmt.Sprintf("%s/a%d", holeA.URL, i))
	}
	for i := range 3 {
		h.createEndpoint("c", fmt.Sprintf("%s/c%d", holeCD.URL, i))
		h.createEndpoint("d", fmt.Sprintf("%s/d%d", holeCD.URL, i))
	}
	h.createEndpoint("b", healthy.URL)
	var wg sync.WaitGroup
	for i := range 5 {
		for _, tenant := range []string{"a", "c", "d"} {
			wg.Go(func() { h.publish(tenant, "invoice.paid", fmt.Sprintf(`{"n":%d}`, i)) })
		}
	}
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && (hostA.now.Load() < 4 || hostCD.now.Load() < 5) {
		time.Sleep(5 * time.Millisecond)
	}
	if a, cd := hostA.now.Load(), hostCD.now.Load(); a != 4 || cd != 5 {
		t.Fatalf("hanging attempts: tenant a %d, host of c and d %d; want the caps 4 and 5 taken", a, cd)
	}
	// The hanging endpoints hold their share; b is delivered meanwhile.
	for i := range 3 {
		pub := h.publish("b", "invoice.paid", fmt.Sprintf(`{"b":%d}`, i))
		h.waitDelivery(pub.ID, "succeeded", 20*time.Second)
	}
	if n := len(healthy.got()); n != 3 {
		t.Fatalf("b's endpoint received %d requests, want 3", n)
	}
	if a, cd := hostA.now.Load(), hostCD.now.Load(); a != 4 || cd != 5 {
		t.Fatalf("b was delivered after the hanging attempts ended (in flight: a %d, c and d %d)", a, cd)
	}
	if a, cd := hostA.peak.Load(), hostCD.peak.Load(); a > 4 || cd > 5 {
		t.Fatalf("peak in flight: tenant a %d (cap 4), host of c and d %d (cap 5)", a, cd)
	}
}

// TestMaxEndpointsPerTenant: past --max-endpoints-per-tenant a creation
// answers 422 with the limit in the problem and creates nothing; other
// tenants are not affected.
func TestMaxEndpointsPerTenant(t *testing.T) {
	t.Parallel()
	h := startHerald(t, func(c *app.Config) { c.MaxEndpointsPerTenant = 2 })
	rcv := newReceiver(t, 200)
	h.createEndpoint("a", rcv.URL)
	h.createEndpoint("a", rcv.URL)
	st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "a", "url": rcv.URL}, nil)
	if st != 422 || !strings.Contains(string(raw), "has 2 endpoints and the limit is 2") || !strings.Contains(string(raw), "--max-endpoints-per-tenant") {
		t.Fatalf("third endpoint: %d %s; want 422 naming the limit of 2", st, raw)
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if st, raw := h.call("GET", "/v1/endpoints?tenant=a", nil, &list); st != 200 || len(list.Data) != 2 {
		t.Fatalf("list: %d %s; want the 2 endpoints", st, raw)
	}
	h.createEndpoint("b", rcv.URL)
}

// TestBlackHoleHeldNotChurned (SQLite, whose claims hold): an endpoint
// whose attempts hang at its cap is neither claimed nor turned away again
// and again — its later deliveries are held in the store while a healthy
// endpoint of the same tenant is delivered — and once its attempts end,
// long before the hold would (the attempt timeout), every held delivery
// is handed back and delivered. Without the hold each of the black hole's
// deliveries is claimed and deferred at its cap at least once
// (herald_deliveries_deferred_total{reason="concurrency_cap"}).
func TestBlackHoleHeldNotChurned(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	h := startHerald(t, func(c *app.Config) {
		c.Workers, c.EndpointConcurrency = 16, 2
		c.AttemptTimeout = time.Minute
	})
	var inFlight concurrency
	hole := newReceiverWith(t, inFlight.wrap)
	unblock := make(chan struct{})
	hole.mu.Lock()
	hole.block = unblock
	hole.mu.Unlock()
	healthy := newReceiver(t, 200)
	h.createEndpoint("acme", hole.URL)
	h.createEndpoint("acme", healthy.URL)
	deferredAtCap := func() int {
		_, body := h.call("GET", "/metrics", nil, nil)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, `herald_deliveries_deferred_total{reason="concurrency_cap"} `); ok {
				var n int
				fmt.Sscan(v, &n)
				return n
			}
		}
		return 0
	}
	const events = 60
	for i := range events {
		h.publish("acme", "invoice.paid", fmt.Sprintf(`{"n":%d}`, i))
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && len(healthy.got()) < events {
		time.Sleep(5 * time.Millisecond) // polling real I/O
	}
	if n := len(healthy.got()); n != events {
		t.Fatalf("the healthy endpoint received %d of %d while the black hole hangs", n, events)
	}
	if n := inFlight.peak.Load(); n > 2 {
		t.Fatalf("the black hole had %d attempts in flight, cap 2", n)
	}
	// The first claims fill its cap and parking (3) and may turn a few
	// away before its cap is full; every later delivery is held.
	if n := deferredAtCap(); n > 10 {
		t.Fatalf("%d claims of the black hole turned away at its cap while it hung; want its later deliveries held (at most 10 turned away)", n)
	}
	close(unblock)
	hole.mu.Lock()
	hole.block = nil
	hole.mu.Unlock()
	// Its attempts end (answered): the held deliveries are handed back and
	// delivered, without waiting out the hold (the attempt timeout, 1 min).
	deadline = time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && len(hole.got()) < events {
		time.Sleep(5 * time.Millisecond) // polling real I/O
	}
	if n := len(hole.got()); n != events {
		t.Fatalf("the black hole received %d of %d requests after it answered again", n, events)
	}
}
