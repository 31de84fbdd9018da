package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

// The hand-off (store.HandOffer) on PostgreSQL: a publish's deliveries due
// now that this node's engine reserves idle workers for are inserted
// already leased to this node (lease_owner, lease_until: a claim's lease,
// in the row, so every node, pause, disable and rescue sees them in flight
// from the commit on), their claims are read on the publish's transaction
// in the same round trip as the insert, and the workers get them after the
// commit. Below saturation every publish otherwise cost a claim: its
// round-robin probes, its fill, its two loads and a non-HOT update of each
// delivery row with its index entries (measured at 1,000 publishes/s on
// two cores: the claims were 45 % of the server's statement time and a
// third of Herald's CPU; docs/BENCHMARKS.md). A node that dies with
// deliveries handed off leaves leases that expire and are rescued, as a
// claim's are. Other nodes are not notified of a delivery handed off (it
// is not theirs to claim).

// SetHandOff implements store.HandOffer.
func (s *Store) SetHandOff(h store.HandOff) { s.handOff.Set(h) }

// handOffBatch is the reservations of one publish transaction (one part
// per positive Reserve, store.ReserveShared), and their claims once read. Every
// reservation ends exactly once (end): with its claims after a commit,
// with none otherwise.
type handOffBatch struct {
	s     *Store
	h     store.HandOff
	owner string
	until time.Time // as stored (ts)
	parts []handOffPart
	ended atomic.Bool
}

type handOffPart struct {
	n      int           // workers reserved
	ids    []string      // the deliveries leased, len n
	claims []store.Claim // read on the transaction (finishOps)
}

// newHandOff returns the store's hand-off for one publish transaction, or
// nil when none is set.
func (s *Store) newHandOff() *handOffBatch {
	h := s.handOff.Get()
	if h == nil {
		return nil
	}
	return &handOffBatch{s: s, h: h}
}

// reserve asks the engine for workers for pending deliveries, given each
// one's tenant in creation order, and returns its reservations
// (store.ReserveShared; nil for a nil b), each recorded as a part.
func (b *handOffBatch) reserve(tenants []string) []store.Reservation {
	if b == nil {
		return nil
	}
	rs := store.ReserveShared(b.h, tenants)
	if len(rs) > 0 && len(b.parts) == 0 {
		owner, until := b.h.Lease()
		b.owner, b.until = owner, b.s.leaseEnd(until)
	}
	for _, r := range rs {
		b.parts = append(b.parts, handOffPart{n: len(r.Rows)})
	}
	return rs
}

// queueLeasedInsert queues the insert of the reserved deliveries (leased
// to the engine's owner) and the reads of their claims: the rows as
// inserted and their endpoints (the events are the publishes' answers:
// finish). d holds the reserved rows, part by part, in the order of the
// reservations reserve returned. An endpoint whose row cannot be read (secrets this
// node's key cannot open) gets no claim; finish gives its deliveries back.
func (b *handOffBatch) queueLeasedInsert(batch *pgx.Batch, d deliveryRows) {
	rows := map[string]store.Delivery{}
	endpoints := map[string]store.Endpoint{}
	off := 0
	for i := range b.parts {
		p := &b.parts[i]
		p.ids = d.ids[off : off+p.n]
		off += p.n
	}
	batch.Queue(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at, lease_owner, lease_until)
		SELECT u.id, u.event_id, u.endpoint_id, u.tenant, u.event_type, 'pending', u.at, u.at, u.at, $7, $8
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
		     AS u (id, event_id, endpoint_id, tenant, event_type, at)
		RETURNING `+deliveryColumns,
		d.ids, d.events, d.endpoints, d.tenants, d.types, d.times, b.owner, b.until).Query(func(r pgx.Rows) error {
		for r.Next() {
			dl, err := scanDelivery(r)
			if err != nil {
				return err
			}
			rows[dl.ID] = dl
		}
		return r.Err()
	})
	batch.Queue("SELECT "+endpointColumns+" FROM endpoints WHERE id = ANY($1)", d.endpoints).Query(func(r pgx.Rows) error {
		for r.Next() {
			e, err := b.s.scanEndpoint(r)
			if err != nil {
				if u := (*store.UnreadableError)(nil); !errors.As(err, &u) {
					return err // the row itself could not be read
				}
				// Its values do not open here (store.UnreadableError):
				// not the publish's failure; the endpoint's deliveries
				// are left to the claims, which report it.
				continue
			}
			endpoints[e.ID] = e
		}
		if err := r.Err(); err != nil {
			return err
		}
		// The statement's rows are read: the claims, events to come.
		for i := range b.parts {
			p := &b.parts[i]
			for _, id := range p.ids {
				dl, okD := rows[id]
				ep, okP := endpoints[dl.EndpointID]
				if okD && okP {
					p.claims = append(p.claims, store.Claim{Delivery: dl, Endpoint: ep})
				}
			}
		}
		return nil
	})
}

// finish gives the claims their events (the answers of ops: the event as
// stored, as GetEvent reads it) and the publishes their HandedOff count,
// and drops on tx the leases of reserved deliveries that got no claim, so
// that the claims take them (and report their endpoint); their workers
// are given back by end. It returns how many leases it dropped: claimable
// pending deliveries the other nodes are to be notified of (one whose key
// opens the endpoint can deliver them; this node's claims fail on them).
func (b *handOffBatch) finish(ctx context.Context, tx pgx.Tx, ops []*publishOp) (int, error) {
	events := make(map[string]*publishOp, len(ops))
	for _, op := range ops {
		if op.inserted && op.err == nil {
			events[op.res.Event.ID] = op
		}
	}
	var lost []string
	for i := range b.parts {
		p := &b.parts[i]
		kept := p.claims[:0]
		got := make(map[string]bool, len(p.claims))
		for _, c := range p.claims {
			if op := events[c.Delivery.EventID]; op != nil {
				c.Event = op.res.Event
				op.res.HandedOff++
				kept = append(kept, c)
				got[c.Delivery.ID] = true
			}
		}
		p.claims = kept
		for _, id := range p.ids {
			if !got[id] {
				lost = append(lost, id)
			}
		}
	}
	if len(lost) == 0 {
		return 0, nil
	}
	ct, err := tx.Exec(ctx, releaseClaimSQL, lost, b.owner, b.until)
	return int(ct.RowsAffected()), err
}

// fail ends every reservation of a transaction whose commit failed. When
// the commit's answer was lost the commit may have happened after all: the
// leases the rows were inserted with are given back first (as a failed
// claim gives back its own, ClaimDeliveries), or those deliveries would
// wait out the lease with no worker on them and be rescued as a crashed
// node's. If the commit reaches the server only after this release, they
// are left to the rescue. On a transaction that rolled back nothing
// matches.
func (b *handOffBatch) fail(ctx context.Context) {
	if b == nil || b.ended.Load() {
		return
	}
	var ids []string
	for _, p := range b.parts {
		ids = append(ids, p.ids...)
	}
	if len(ids) > 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		b.s.pool.Exec(rctx, releaseClaimSQL, ids, b.owner, b.until) //nolint:errcheck // a failure leaves them to the rescue
		cancel()
	}
	b.end(false)
}

// end ends every reservation once: committed, each gets its claims;
// otherwise none (the engine gives the workers back and wakes its
// claimer). Safe on a nil b and when called again.
func (b *handOffBatch) end(committed bool) {
	if b == nil || b.ended.Swap(true) {
		return
	}
	for _, p := range b.parts {
		if committed {
			b.h.Take(p.claims, p.n)
		} else {
			b.h.Take(nil, p.n)
		}
	}
}
