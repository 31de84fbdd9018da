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
