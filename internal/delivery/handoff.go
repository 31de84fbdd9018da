package delivery

import (
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The hand-off (store.HandOff): a driver with the capability leases the
// deliveries a publish creates to this process's engine as the publish
// commits (SQLite: in the process's memory; PostgreSQL: in the rows, to
// this node), so that they need no claim. The engine takes them
// only when the claimer would have claimed them at once anyway: idle
// workers, no backlog being drained and no claim in the line of claims
// ahead (older due deliveries go first), the
// tenant below its cap on this node. Each is then decided on (caps,
// circuit, rate limit) and attempted like a claimed delivery.

// Reserve implements store.HandOff: up to n idle worker tokens, without
// waiting.
func (e *Engine) Reserve(tenant string, n int) int {
	e.handMu.Lock()
	defer e.handMu.Unlock()
	if !e.handOpen || e.backlog.Load() || e.aheadN.Load() > 0 || !e.sched.handOffOK(tenant) {
		return 0
	}
	k := 0
	for k < n {
		select {
		case <-e.slots:
			k++
			continue
		default:
		}
		break
	}
	if k > 0 {
		e.handOffs.Add(1)
	}
	return k
}

// Lease implements store.HandOff: the leases of a hand-off are a claim's.
func (e *Engine) Lease() (string, time.Time) {
	return e.cfg.Owner, e.cfg.Clock.Now().Add(e.cfg.Lease)
}

// Take implements store.HandOff: the claims of a reservation of n tokens
// go to the workers; the tokens of deliveries that could not be read go
// back, and the claimer is woken for them.
func (e *Engine) Take(claims []store.Claim, n int) {
	defer e.handOffs.Done()
	for _, c := range claims[:min(len(claims), n)] {
		e.jobs <- job{Claim: c, tok: e.takeToken()}
	}
	if rest := n - min(len(claims), n); rest > 0 {
		e.giveBack(rest)
		e.Notify()
	}
}

// handOffOK reports whether a delivery of tenant may be handed off now:
// this node holds a share of the caps, and the tenant is below its cap
// share (one at it is left to the claims, which skip or defer it).
func (s *scheduler) handOffOK(tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == 0 {
		return false
	}
	_, full := s.full[tenant]
	return !full
}

var _ store.HandOff = (*Engine)(nil)
