package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// shareHandOff is an engine side with a number of idle workers; it
// records the tenant of each positive Reserve and each Take.
type shareHandOff struct {
	mu       sync.Mutex
	workers  int
	reserved []string // tenant of each positive Reserve, in order
	takes    [][]store.Claim
	ns       []int
}

func (h *shareHandOff) Reserve(t string, n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := min(n, h.workers)
	h.workers -= k
	if k > 0 {
		h.reserved = append(h.reserved, t)
	}
	return k
}
func (h *shareHandOff) Lease() (string, time.Time) { return "w1", base.Add(time.Hour) }
func (h *shareHandOff) Take(c []store.Claim, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.takes = append(h.takes, c)
	h.ns = append(h.ns, n)
}

// TestHandOffSharesAGroupsWorkersBetweenTenants: one group of four
// publishes of three tenants (acme twice, with a paused endpoint whose
// deliveries are held, not handed off): the idle workers are shared one
// delivery of each tenant in turn (store.ReserveShared), and each Take gets
// the claims of its own reservation's tenant, leased, in the part of the
// leased insert that matches it.
func TestHandOffSharesAGroupsWorkersBetweenTenants(t *testing.T) {
	for _, tc := range []struct {
		workers int
		want    []int // HandedOff of each publish
	}{
		{5, []int{2, 2, 0, 1}}, // acme 2, globex 2, initech 1
		{20, []int{3, 3, 3, 1}},
	} {
		t.Run(fmt.Sprint(tc.workers), func(t *testing.T) { handOffShares(t, tc.workers, tc.want) })
	}
}

func handOffShares(t *testing.T, workers int, want []int) {
	s := openStore(t, newSchema(t))
	p := newEndpoint("acme")
	p.State = store.EndpointPaused
	createEndpoint(t, s, p)
	for range 3 {
		createEndpoint(t, s, newEndpoint("acme"))
		createEndpoint(t, s, newEndpoint("globex"))
	}
	createEndpoint(t, s, newEndpoint("initech"))
	h := &shareHandOff{workers: workers}
	s.SetHandOff(h)
	var group []*publishRequest
	for _, tn := range []string{"acme", "globex", "acme", "initech"} {
		group = append(group, &publishRequest{ctx: t.Context(), done: make(chan publishAnswer, 1),
			p: store.PublishParams{Event: newEvent(tn), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}})
	}
	s.committer.commit(group)
	var handed []int
	for _, r := range group {
		a := <-r.done
		if a.err != nil {
			t.Fatal(a.err)
		}
		handed = append(handed, a.res.HandedOff)
	}
	if len(h.takes) != len(h.reserved) {
		t.Fatalf("%d takes, %d reservations", len(h.takes), len(h.reserved))
	}
	leased := map[string]bool{}
	pg, err := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{ListParams: store.ListParams{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pg.Data {
		if d.LeaseOwner != "" {
			leased[d.ID] = true
			if d.State != store.DeliveryPending {
				t.Fatalf("leased non-pending %+v", d)
			}
		}
	}
	n := 0
	for i, cs := range h.takes {
		if len(cs) != h.ns[i] {
			t.Fatalf("take %d: %d claims, n %d", i, len(cs), h.ns[i])
		}
		for _, c := range cs {
			if c.Delivery.Tenant != h.reserved[i] || c.Endpoint.Tenant != h.reserved[i] || c.Event.Tenant != h.reserved[i] {
				t.Fatalf("take %d reserved for %s got claim of %s", i, h.reserved[i], c.Delivery.Tenant)
			}
			if !leased[c.Delivery.ID] {
				t.Fatalf("claim %s not leased", c.Delivery.ID)
			}
			n++
		}
	}
	if n != len(leased) {
		t.Fatalf("%d claims, %d leased", n, len(leased))
	}
	for i := range want {
		if handed[i] != want[i] {
			t.Fatalf("handed %v want %v", handed, want)
		}
	}
}
