package store

// Reservation is one positive HandOff.Reserve of a hand-off: Rows are
// the indexes (into the tenants passed to ReserveShared) of the
// deliveries it reserved workers for, len(Rows) of them, in creation
// order. Every Reservation is ended by exactly one HandOff.Take with
// n = len(Rows).
type Reservation struct {
	Tenant string
	Rows   []int
}

// ReserveShared asks h for workers for a group's due deliveries, given
// each one's tenant in creation order (tenants[i] is delivery i's), and
// shares the workers h gives between the tenants, as a claim splits its
// batch between the tenants with due work (docs/operations.md, "Fair
// claiming"): in turns, one delivery of each tenant per turn (tenants in
// order of first appearance in the group, each tenant's deliveries in
// creation order), a tenant dropped at its first refusal (no idle worker
// left, or the tenant at its cap); once a single tenant is left it is
// asked for all of its remaining deliveries at once. So an engine with k
// idle workers hands a group of two tenants k/2 each when both have that
// many, instead of all k to the tenant met first. Unlike the claim's turn,
// which goes on after the tenant served last, each group starts with the
// tenant it met first: with fewer idle workers than tenants in a group,
// the first ones get them (groups form in arrival order). Cost: one
// Reserve and one reservation per delivery while two or more tenants have
// some left (a group of one tenant is one Reserve).
// nil: nothing reserved. The caller ends each Reservation (Take) whatever
// happens to the group.
func ReserveShared(h HandOff, tenants []string) []Reservation {
	if h == nil || len(tenants) == 0 {
		return nil
	}
	var order []string
	byTenant := map[string][]int{}
	for i, t := range tenants {
		if _, ok := byTenant[t]; !ok {
			order = append(order, t)
		}
		byTenant[t] = append(byTenant[t], i)
	}
	var out []Reservation
	next := make([]int, len(order)) // each tenant's first delivery not yet reserved
	for len(order) > 0 {
		if len(order) == 1 {
			t := order[0]
			rest := byTenant[t][next[0]:]
			if k := min(h.Reserve(t, len(rest)), len(rest)); k > 0 {
				out = append(out, Reservation{Tenant: t, Rows: rest[:k]})
			}
			break
		}
		kept, keptNext := order[:0], next[:0]
		for i, t := range order {
			rows := byTenant[t]
			if h.Reserve(t, 1) <= 0 {
				continue // refused: no idle worker, or t at its cap
			}
			out = append(out, Reservation{Tenant: t, Rows: rows[next[i] : next[i]+1]})
			if next[i]+1 < len(rows) {
				kept, keptNext = append(kept, t), append(keptNext, next[i]+1)
			}
		}
		order, next = kept, keptNext
	}
	return out
}
