package store

import (
	"fmt"
	"strings"
)

// A poisoned delivery is one a claim cannot hand to a worker because a row
// it needs does not decode: its own delivery row, or its event's row (the
// forwarded headers or the version bodies are not the JSON Herald wrote —
// a damaged database or a hand edit). No attempt can ever be made of it,
// and failing the claim for it would stop every other delivery of the
// node (the claim would fail again at each retry). A claim therefore
// dead-letters it, in the claim's own transaction, and returns the others
// (ClaimParams.Poisoned), as Stripe and Svix never let one poisoned
// message block a queue:
//
//   - state dead, next_attempt_at and updated_at the claim's Now, the lease
//     cleared, last_error the PoisonedError's message ("stored event evt_…
//     could not be read: …");
//   - no attempt is recorded, and neither the endpoint's failure streak nor
//     its state changes: it is not the endpoint's fault;
//   - delivery.dead_lettered is recorded as for any dead letter (notices),
//     unless its own row is the one that does not decode (the notice
//     copies from it) or it is a delivery of an operational event.
//
// Drivers note each row that does not decode (PoisonedRows) while they
// read a claim and take its deliveries out with PoisonedRows.Drop; the
// rule, the message and the report are written once here.

// PoisonedError is the error of a stored row a claim read but could not
// decode: Row is "event" or "delivery", ID the row's id, Err the decoding
// error. Its message is what the delivery's last_error says.
type PoisonedError struct {
	Row string
	ID  string
	Err error
}

func (e *PoisonedError) Error() string {
	return fmt.Sprintf("stored %s %s could not be read: %v", e.Row, e.ID, e.Err)
}

func (e *PoisonedError) Unwrap() error { return e.Err }

// PoisonedDelivery is a delivery a claim dead-lettered instead of
// returning it (ClaimParams.Poisoned).
type PoisonedDelivery struct {
	// ID, EventID, EndpointID and Tenant are the delivery's, as far as
	// its row decoded (a delivery row that does not decode may leave the
	// fields after the failing column empty).
	ID, EventID, EndpointID, Tenant string
	// Err is the *PoisonedError, joined with the failure to write the
	// dead letter if that failed (on PostgreSQL the delivery then waits
	// for the rescue of its lease and is met again by a later claim).
	Err error
	// OwnRow reports that the delivery's own row is the one that does not
	// decode (no delivery.dead_lettered notice is written for it).
	OwnRow bool
	// Unwritten reports that writing the dead letter failed (PostgreSQL:
	// Err says why; the delivery is met again by a later claim): it is
	// not dead and is not counted as a dead letter.
	Unwritten bool
}

// PoisonedRows collects the rows of one claim that do not decode. The
// zero value is empty; nothing is allocated until a row is noted, so a
// claim that meets none pays for a length check.
type PoisonedRows struct {
	deliveries map[string]*PoisonedError // by delivery id
	events     map[string]*PoisonedError // by event id
}

// Delivery notes that the row of delivery id did not decode (err).
func (p *PoisonedRows) Delivery(id string, err error) {
	if p.deliveries == nil {
		p.deliveries = map[string]*PoisonedError{}
	}
	p.deliveries[id] = &PoisonedError{Row: "delivery", ID: id, Err: err}
}

// Event notes that the row of event id did not decode (err).
func (p *PoisonedRows) Event(id string, err error) {
	if p.events == nil {
		p.events = map[string]*PoisonedError{}
	}
	p.events[id] = &PoisonedError{Row: "event", ID: id, Err: err}
}

// Any reports whether a row was noted.
func (p *PoisonedRows) Any() bool { return len(p.deliveries) > 0 || len(p.events) > 0 }

// Drop takes out of claims (in place, in order) the claims whose delivery
// row or event row was noted, and returns the claims kept and one
// PoisonedDelivery per claim taken out, in the order they came. The
// drivers then dead-letter those (see the top of this file) and report
// them (ClaimParams.ReportPoisoned).
func (p *PoisonedRows) Drop(claims []Claim) (kept []Claim, poisoned []PoisonedDelivery) {
	kept = claims[:0]
	for _, c := range claims {
		d := c.Delivery
		err, own := p.deliveries[d.ID]
		if !own {
			err = p.events[d.EventID]
		}
		if err == nil {
			kept = append(kept, c)
			continue
		}
		poisoned = append(poisoned, PoisonedDelivery{ID: d.ID, EventID: d.EventID, EndpointID: d.EndpointID, Tenant: d.Tenant, Err: err, OwnRow: own})
	}
	clear(claims[len(kept):]) // no stale copies behind the kept ones
	return kept, poisoned
}

// LastError is the last_error a dead letter of pd is written with: its
// PoisonedError's message, valid UTF-8 (a damaged row may hold any
// bytes), at most 1,024 bytes (cut on a rune boundary).
func (pd PoisonedDelivery) LastError() string {
	msg := strings.ToValidUTF8(pd.Err.Error(), "\uFFFD")
	if len(msg) <= 1024 {
		return msg
	}
	i := 1024
	for i > 0 && msg[i]&0xC0 == 0x80 {
		i--
	}
	return msg[:i]
}

// ReportPoisoned calls p.Poisoned, when set, with each delivery of ps.
func (p ClaimParams) ReportPoisoned(ps []PoisonedDelivery) {
	if p.Poisoned == nil {
		return
	}
	for _, pd := range ps {
		p.Poisoned(pd)
	}
}
