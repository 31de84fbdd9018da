package sqlite

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The hand-off (store.HandOffer): the deliveries a publish group creates
// due now are offered to this process's engine before the group commits;
// what it reserves is leased after the commit while the group still holds
// the writer (before any claim can see the rows), and read on the writer,
// still held, once the group's publishes are answered; the workers get the
// claims after the writer is released. Below saturation every publish
// otherwise cost a claim on the writer (its tenant probes, its walk and
// three loads) and a next-due read after it, and the delivery waited for
// the writer a second time, behind the next publish group or completion
// batch.

// handOffSlot holds the engine's side (SetHandOff).
type handOffSlot struct{ h store.HandOff }

// SetHandOff implements store.HandOffer.
func (s *Store) SetHandOff(h store.HandOff) {
	if h == nil {
		s.handOff.Store(nil)
		return
	}
	s.handOff.Store(&handOffSlot{h: h})
}

// handOffBatch is one group's deliveries reserved by the engine, tenant
// by tenant (one reservation each), and their claims.
type handOffBatch struct {
	h     store.HandOff
	owner string
	until time.Time
	parts []handOffPart
}

type handOffPart struct {
	rows   []deliveryRow // the part's deliveries, in creation order
	n      int           // workers reserved (len(rows))
	claims []store.Claim // read after the commit (load)
}

// reserveHandOff offers rows (a group's due deliveries, in creation order)
// to the engine, tenant by tenant in order of first appearance. nil:
// nothing reserved. The caller holds the writer and, whatever happens
// next, ends every reservation: lease, load and take after a commit, or
// giveBack.
func (s *Store) reserveHandOff(rows []deliveryRow) *handOffBatch {
	slot := s.handOff.Load()
	if slot == nil || len(rows) == 0 || !s.claiming() {
		return nil
	}
	h := slot.h
	var order []string
	byTenant := map[string][]deliveryRow{}
	for _, r := range rows {
		if _, ok := byTenant[r.tenant]; !ok {
			order = append(order, r.tenant)
		}
		byTenant[r.tenant] = append(byTenant[r.tenant], r)
	}
	var b *handOffBatch
	for _, t := range order {
		rs := byTenant[t]
		k := h.Reserve(t, len(rs))
		if k <= 0 {
			continue
		}
		if b == nil {
			owner, until := h.Lease()
			// As the lease is recorded and reported (µs), as a claim's.
			b = &handOffBatch{h: h, owner: owner, until: fromMicro(micro(until))}
		}
		b.parts = append(b.parts, handOffPart{rows: rs[:k], n: k})
	}
	return b
}

// lease records the leases of b's deliveries after the group's commit,
// with the writer still held (before any claim can see them), and counts
// them in each publish's answer (HandedOff).
func (b *handOffBatch) lease(s *Store, answers []publishAnswer) {
	perEvent := map[string]int{}
	for _, p := range b.parts {
		ids := make([]string, len(p.rows))
		ls := make([]lease, len(p.rows))
		for i, r := range p.rows {
			ids[i] = r.id
			ls[i] = lease{owner: b.owner, until: micro(b.until), endpoint: r.endpointID, tenant: r.tenant}
			perEvent[r.eventID]++
		}
		s.leases.add(ids, ls)
	}
	for i := range answers {
		if a := &answers[i]; a.err == nil && a.res.Created {
			a.res.HandedOff = perEvent[a.res.Event.ID]
		}
	}
}

// load reads the claims of b's deliveries on the writer, still held, after
// the publishes were answered (their pages are in the writer's cache). A
// delivery it cannot read has its lease dropped: left to the claims (Take
// gives its worker back and wakes the claimer).
func (b *handOffBatch) load(ctx context.Context, s *Store) {
	var ids []string
	for _, p := range b.parts {
		for _, r := range p.rows {
			ids = append(ids, r.id)
		}
	}
	claims, err := s.loadClaims(ctx, nil, ids, b.owner, b.until)
	if err != nil {
		claims = nil
	}
	byID := make(map[string]store.Claim, len(claims))
	for _, c := range claims {
		byID[c.Delivery.ID] = c
	}
	var gone []string
	for i := range b.parts {
		p := &b.parts[i]
		for _, r := range p.rows {
			if c, ok := byID[r.id]; ok {
				p.claims = append(p.claims, c)
			} else {
				gone = append(gone, r.id)
			}
		}
	}
	if len(gone) > 0 {
		s.leases.drop(gone)
	}
}

// take gives every reservation its claims (after the writer is released).
func (b *handOffBatch) take() {
	for _, p := range b.parts {
		b.h.Take(p.claims, p.n)
	}
}

// giveBack ends every reservation of a group that did not commit.
func (b *handOffBatch) giveBack() {
	for _, p := range b.parts {
		b.h.Take(nil, p.n)
	}
}

// loadClaims reads the claims of deliveries ids on tx (nil: on the
// writer, held by the caller, outside a transaction), in the order of ids,
// as ClaimDeliveries reads its own.
func (s *Store) loadClaims(ctx context.Context, tx *sql.Tx, ids []string, owner string, until time.Time) ([]store.Claim, error) {
	claims := make([]store.Claim, 0, len(ids))
	if err := s.loadByIDs(ctx, tx, claimDeliveriesQuery, ids, func(sc scanner) error {
		d, err := scanDelivery(sc)
		d.LeaseOwner, d.LeaseUntil = owner, until
		claims = append(claims, store.Claim{Delivery: d})
		return err
	}); err != nil {
		return nil, err
	}
	events := map[string]store.Event{}
	endpoints := map[string]store.Endpoint{}
	for _, c := range claims {
		events[c.Delivery.EventID] = store.Event{}
		endpoints[c.Delivery.EndpointID] = store.Endpoint{}
	}
	if err := s.loadByIDs(ctx, tx, claimEventsQuery, keys(events), func(sc scanner) error {
		e, err := scanEvent(sc)
		events[e.ID] = e
		return err
	}); err != nil {
		return nil, err
	}
	if err := s.loadByIDs(ctx, tx, claimEndpointsQuery, keys(endpoints), func(sc scanner) error {
		e, err := s.scanEndpoint(sc)
		endpoints[e.ID] = e
		return err
	}); err != nil {
		return nil, err
	}
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	for i := range claims {
		claims[i].Event = events[claims[i].Delivery.EventID]
		claims[i].Endpoint = endpoints[claims[i].Delivery.EndpointID]
	}
	slices.SortFunc(claims, func(a, b store.Claim) int { return pos[a.Delivery.ID] - pos[b.Delivery.ID] })
	return claims, nil
}

// claiming reports whether this process holds the claim lock, taken by its
// first claim (takeClaimLock) or ClaimExclusively, and still on the lock
// file at its path: a hand-off is a claim, and only the process holding the
// lock may lease. It never takes the lock, nor claimMu: the caller holds
// the writer, which the first claim waits for holding claimMu.
func (s *Store) claiming() bool {
	if !s.claimHeld.Load() {
		return false
	}
	cur, err := os.Stat(claimLockPath(s.path))
	return err == nil && os.SameFile(cur, s.claimLockInfo)
}
