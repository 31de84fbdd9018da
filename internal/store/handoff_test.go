package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// idleWorkers is a HandOff with idle workers to give and tenants it
// refuses (at their cap); it records each Reserve.
type idleWorkers struct {
	idle    int
	refused map[string]bool
	calls   []string // "tenant:n=k"
}

func (h *idleWorkers) Reserve(tenant string, n int) int {
	k := 0
	if !h.refused[tenant] {
		k = min(n, h.idle)
	}
	h.idle -= k
	h.calls = append(h.calls, fmt.Sprintf("%s:%d=%d", tenant, n, k))
	return k
}

func (h *idleWorkers) Lease() (string, time.Time) { return "node", time.Time{} }
func (h *idleWorkers) Take([]store.Claim, int)    {}

// group is a publish group's due deliveries' tenants: "a3b2" is three of
// a then two of b.
func group(spec string) []string {
	var out []string
	for i := 0; i < len(spec); i += 2 {
		for range int(spec[i+1] - '0') {
			out = append(out, spec[i:i+1])
		}
	}
	return out
}

// shares sums the reservations per tenant and checks each reservation's
// rows are its tenant's, in creation order, none reserved twice.
func shares(t *testing.T, tenants []string, rs []store.Reservation) map[string]int {
	t.Helper()
	got := map[string]int{}
	last := map[string]int{}
	seen := map[int]bool{}
	for _, r := range rs {
		if len(r.Rows) == 0 {
			t.Fatalf("empty reservation %+v", r)
		}
		for _, i := range r.Rows {
			if tenants[i] != r.Tenant {
				t.Fatalf("row %d (tenant %s) in a reservation of %s", i, tenants[i], r.Tenant)
			}
			if seen[i] {
				t.Fatalf("row %d reserved twice", i)
			}
			seen[i] = true
			if l, ok := last[r.Tenant]; ok && i <= l {
				t.Fatalf("tenant %s's rows out of creation order: %d after %d", r.Tenant, i, l)
			}
			last[r.Tenant] = i
			got[r.Tenant]++
		}
	}
	// Each tenant's reserved rows are its first ones.
	for tn, n := range got {
		k := 0
		for i, x := range tenants {
			if x == tn && k < n {
				if !seen[i] {
					t.Fatalf("tenant %s: row %d skipped while a later one was reserved", tn, i)
				}
				k++
			}
		}
	}
	return got
}

func TestReserveSharedSharesIdleWorkersBetweenTenants(t *testing.T) {
	for _, tc := range []struct {
		group   string
		idle    int
		refused string
		want    map[string]int
	}{
		// The tenant met first no longer takes every idle worker.
		{group: "a9b9", idle: 4, want: map[string]int{"a": 2, "b": 2}},
		{group: "a9b9c9", idle: 7, want: map[string]int{"a": 3, "b": 2, "c": 2}},
		// What a tenant with fewer leaves goes to the others.
		{group: "a1b9", idle: 5, want: map[string]int{"a": 1, "b": 4}},
		// Interleaved in the group: each tenant's first deliveries.
		{group: "a1b1a1b1a1b1", idle: 4, want: map[string]int{"a": 2, "b": 2}},
		// Enough for all.
		{group: "a3b2", idle: 9, want: map[string]int{"a": 3, "b": 2}},
		// A tenant at its cap gets none; the others share its part.
		{group: "a5b5", idle: 4, refused: "a", want: map[string]int{"b": 4}},
		// No idle worker.
		{group: "a5b5", idle: 0, want: map[string]int{}},
		// Fewer idle workers than tenants: the first ones met.
		{group: "a1b1c1", idle: 2, want: map[string]int{"a": 1, "b": 1}},
		{group: "a7", idle: 5, want: map[string]int{"a": 5}},
	} {
		t.Run(fmt.Sprintf("%s_idle%d_refused%s", tc.group, tc.idle, tc.refused), func(t *testing.T) {
			tenants := group(tc.group)
			h := &idleWorkers{idle: tc.idle, refused: map[string]bool{tc.refused: true}}
			rs := store.ReserveShared(h, tenants)
			got := shares(t, tenants, rs)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("shares %v, want %v (calls %v)", got, tc.want, h.calls)
			}
			// Every positive Reserve is one reservation, and the engine
			// gave no worker that was not reserved.
			positive := 0
			for _, c := range h.calls {
				if c[len(c)-2:] != "=0" {
					positive++
				}
			}
			if positive != len(rs) {
				t.Fatalf("%d positive Reserve calls, %d reservations (calls %v)", positive, len(rs), h.calls)
			}
		})
	}
}

// A group of one tenant is one Reserve for all of its deliveries, as
// before the sharing (no per-delivery reservation on the hot path).
func TestReserveSharedOneTenantOneReserve(t *testing.T) {
	h := &idleWorkers{idle: 128}
	rs := store.ReserveShared(h, group("a9a9"))
	if !slices.Equal(h.calls, []string{"a:18=18"}) || len(rs) != 1 || len(rs[0].Rows) != 18 {
		t.Fatalf("calls %v, reservations %+v", h.calls, rs)
	}
	if store.ReserveShared(h, nil) != nil || store.ReserveShared(nil, group("a1")) != nil {
		t.Fatal("nothing to reserve should reserve nothing")
	}
}
