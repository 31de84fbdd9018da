package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"time"
	"unicode/utf8"

	"github.com/herald-webhooks/herald/internal/store"
)

// The hand-off (store.HandOffer): the deliveries a publish group creates
// due now are offered to this process's engine before the group commits;
// the claims of what it reserves are built from the group's memory (only
// their endpoints read) and leased on the group's transaction, so that
// from its commit on every claim, pause, disable or postponement sees them
// in flight (nothing may come between the rows and the leases), and the
// workers get the claims after the writer is released. Below saturation
// every publish otherwise cost a claim on the writer (its tenant probes,
// its walk and three loads) and a next-due read after it, and the delivery
// waited for the writer a second time, behind the next publish group or
// completion batch.

// SetHandOff implements store.HandOffer.
func (s *Store) SetHandOff(h store.HandOff) { s.handOff.Set(h) }

// handOffBatch is one group's deliveries reserved by the engine, one part
// per reservation (store.ReserveShared), and their claims.
type handOffBatch struct {
	h     store.HandOff
	owner string
	until time.Time
	parts []handOffPart
}

type handOffPart struct {
	rows   []deliveryRow // the part's deliveries, in creation order
	n      int           // workers reserved (len(rows))
	claims []store.Claim // built and leased on the group's transaction (loadAndLease)
}

// reserveHandOff offers rows (a group's due deliveries, in creation order,
// written but not committed) to the engine, its workers shared between
// the group's tenants as a claim shares its batch (store.ReserveShared).
// nil: nothing reserved. The caller holds the writer and, whatever
// happens next, ends every reservation: take after a commit, unlease and
// giveBack otherwise.
func (s *Store) reserveHandOff(rows []deliveryRow) *handOffBatch {
	h := s.handOff.Get()
	if h == nil || len(rows) == 0 || !s.claiming() {
		return nil
	}
	tenants := make([]string, len(rows))
	for i, r := range rows {
		tenants[i] = r.tenant
	}
	rs := store.ReserveShared(h, tenants)
	if len(rs) == 0 {
		return nil
	}
	owner, until := h.Lease()
	// As the lease is recorded and reported (µs), as a claim's.
	b := &handOffBatch{h: h, owner: owner, until: fromMicro(micro(until)), parts: make([]handOffPart, len(rs))}
	for i, r := range rs {
		p := handOffPart{rows: make([]deliveryRow, len(r.Rows)), n: len(r.Rows)}
		for j, k := range r.Rows {
			p.rows[j] = rows[k]
		}
		b.parts[i] = p
	}
	return b
}

// loadAndLease builds the claims of b's deliveries and records their
// leases, on the group's transaction before its commit (one snapshot: no
// API write can come between the rows and the leases): from then on a
// claim, a pause, a disable or a breaker's postponement sees them in
// flight. The deliveries and their events are the ones the group just
// wrote, taken from its memory (events: the created publishes' events, by
// id), as loadClaims would read them back; only their endpoints are read
// (their secrets and headers are opened as a claim's). Reading the
// deliveries and events back cost 15–35 µs per handed-off delivery
// (docs/BENCHMARKS.md, "Round 2, nineteenth session"). A delivery that
// cannot be claimed (its endpoint's values do not open, or it was not
// read) stays unleased: Take gives its worker back and wakes the claimer.
// If the commit then fails, unlease.
func (b *handOffBatch) loadAndLease(ctx context.Context, s *Store, tx *sql.Tx, events map[string]store.Event) {
	endpoints := map[string]store.Endpoint{}
	for _, p := range b.parts {
		for _, r := range p.rows {
			endpoints[r.endpointID] = store.Endpoint{}
		}
	}
	if err := s.loadByIDs(ctx, tx, claimEndpointsQuery, keys(endpoints), func(sc scanner) error {
		e, err := s.scanEndpoint(sc)
		if err != nil {
			// Left out (the claims report it): no claim carries it.
			var u *store.UnreadableError
			if errors.As(err, &u) {
				return nil
			}
			return err
		}
		endpoints[e.ID] = e
		return nil
	}); err != nil {
		return
	}
	until := b.until
	for i := range b.parts {
		p := &b.parts[i]
		var leased []string
		var ls []lease
		for _, r := range p.rows {
			ev, ok := events[r.eventID]
			ep := endpoints[r.endpointID]
			if !ok || ep.ID == "" {
				continue
			}
			at := fromMicro(r.now)
			p.claims = append(p.claims, store.Claim{
				Delivery: store.Delivery{ID: r.id, EventID: r.eventID, EndpointID: r.endpointID, Tenant: r.tenant, EventType: r.eventType,
					State: r.state, NextAttemptAt: at, LeaseOwner: b.owner, LeaseUntil: until, CreatedAt: at, UpdatedAt: at},
				Event: ev, Endpoint: ep,
			})
			leased = append(leased, r.id)
			ls = append(ls, lease{owner: b.owner, until: micro(until), endpoint: r.endpointID, tenant: r.tenant})
		}
		s.leases.add(leased, ls)
	}
}

// handOffEvents is the events of a group's created publishes by id, each
// as a claim reads it back (scanEvent), in memory of its own (the caller's
// request keeps its body and maps): an empty body nil (a zero-length BLOB
// scans as nil); the headers and the version bodies as their stored
// encodings give them back — the JSON encoding turns bytes that are not
// UTF-8 in a header (which net/http accepts in a provider's header
// value) into U+FFFD, and compacts a version body. Headers that are all
// UTF-8 are copied as they are (the encoding gives them back unchanged);
// version bodies go through their encoding and back.
func handOffEvents(answers []publishAnswer) map[string]store.Event {
	m := make(map[string]store.Event, len(answers))
	for _, a := range answers {
		if a.err != nil || !a.res.Created {
			continue
		}
		ev := a.res.Event
		ev.Body = bytes.Clone(ev.Body)
		if len(ev.Body) == 0 {
			ev.Body = nil
		}
		headers, ok := storedHeaders(ev.Headers)
		if !ok {
			continue // left to the claims, which read it back
		}
		ev.Headers = headers
		if len(ev.VersionBodies) == 0 {
			ev.VersionBodies = nil
		} else {
			enc, err := store.EncodeVersionBodies(ev.VersionBodies)
			if err != nil {
				continue
			}
			if ev.VersionBodies, err = store.DecodeVersionBodies([]byte(enc)); err != nil {
				continue
			}
		}
		m[ev.ID] = ev
	}
	return m
}

// storedHeaders is h as scanEvent reads it back from its stored encoding
// (eventHeaders): nil when empty; a copy when every key and value is UTF-8
// (encoding and decoding give those back unchanged); otherwise the
// encoding decoded. ok is false when that fails.
func storedHeaders(h map[string]string) (_ map[string]string, ok bool) {
	if len(h) == 0 {
		return nil, true
	}
	for k, v := range h {
		if utf8.ValidString(k) && utf8.ValidString(v) {
			continue
		}
		enc, err := eventHeaders(h)
		if err != nil {
			return nil, false
		}
		var out map[string]string
		if err := json.Unmarshal([]byte(enc), &out); err != nil {
			return nil, false
		}
		return out, true
	}
	return maps.Clone(h), true
}

// unlease drops the leases of a group that did not commit.
func (b *handOffBatch) unlease(s *Store) {
	for _, p := range b.parts {
		ids := make([]string, len(p.claims))
		for i, c := range p.claims {
			ids[i] = c.Delivery.ID
		}
		s.leases.drop(ids)
	}
}

// count counts b's leased deliveries in each committed publish's answer
// (HandedOff).
func (b *handOffBatch) count(answers []publishAnswer) {
	perEvent := map[string]int{}
	for _, p := range b.parts {
		for _, c := range p.claims {
			perEvent[c.Delivery.EventID]++
		}
	}
	for i := range answers {
		if a := &answers[i]; a.err == nil && a.res.Created {
			a.res.HandedOff = perEvent[a.res.Event.ID]
		}
	}
}

// take gives every reservation its claims (after the writer is released).
func (b *handOffBatch) take() {
	for _, p := range b.parts {
		b.h.Take(p.claims, p.n)
	}
}

// giveBack ends every reservation of a group that did not commit (after
// unlease).
func (b *handOffBatch) giveBack() {
	for _, p := range b.parts {
		b.h.Take(nil, p.n)
	}
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
