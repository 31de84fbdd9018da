package delivery

import (
	"context"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// completeGather is how long the completer waits for more results when
// fewer than Workers have arrived (see claimGather for why).
const completeGather = 5 * time.Millisecond

// complete writes completions in batches: it takes what has arrived (up to
// CompleteBatch, waiting up to completeGather for Workers of them)
// and commits it in one transaction. A failed write is
// retried with backoff until it succeeds, so no attempt's result is lost
// while the database is briefly away. The backlog moves that arrived with
// the batch (result.move) are carried out after it, in order.
func (e *Engine) complete() {
	batch := make([]store.Completion, 0, e.cfg.CompleteBatch)
	var moves []backlogMove
	want := min(e.cfg.CompleteBatch, max(1, e.cfg.Workers))
	t := time.NewTimer(time.Hour)
	t.Stop()
	for first := range e.results {
		batch, moves = batch[:0], moves[:0]
		add := func(r result) {
			if r.move != nil {
				moves = append(moves, *r.move)
			} else {
				batch = append(batch, r.c)
			}
		}
		add(first)
		// Take what has arrived; if that is less than want, wait up to
		// completeGather for more: each transaction has a fixed cost (its
		// commit writes every page it touched to the WAL), so a drain
		// writes fewer, larger batches.
		waiting := false
	drain:
		for len(batch)+len(moves) < e.cfg.CompleteBatch {
			select {
			case c, ok := <-e.results:
				if !ok {
					break drain
				}
				add(c)
				continue
			default:
			}
			if len(batch)+len(moves) >= want {
				break
			}
			if !waiting {
				waiting = true
				t.Reset(completeGather)
			}
			select {
			case c, ok := <-e.results:
				if !ok {
					break drain
				}
				add(c)
			case <-t.C:
				waiting = false
				break drain
			}
		}
		t.Stop() // Go ≥ 1.23 timers: no stale tick survives Stop or Reset
		e.write(batch)
		// The moves go after the batch they arrived with: a deferral to a
		// hold's end decided before its hand-back is then handed back too.
		for _, m := range moves {
			e.moveBacklog(m)
		}
		if dueBefore(batch, e.wakeAt.Load()) || handsBack(moves, e.wakeAt.Load()) {
			e.Notify() // a retry is due before the claimer would wake
		}
	}
}

// write commits a batch of completions, retrying with backoff until it
// succeeds, so no attempt's result is lost while the database is briefly
// away.
func (e *Engine) write(batch []store.Completion) {
	if len(batch) == 0 {
		return
	}
	backoff := 50 * time.Millisecond
	failing := false
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := e.cfg.Store.CompleteDeliveries(ctx, batch)
		cancel()
		if err == nil {
			break
		}
		if !failing {
			failing = true
			e.unwritten.Add(1)
		}
		if try >= 100 {
			e.cfg.Logger.Error("giving up writing completions; their leases will be rescued and the attempts repeated", "error", err, "count", len(batch))
			break
		}
		e.cfg.Logger.Warn("write completions failed; retrying", "error", err, "count", len(batch), "retry_in", backoff)
		time.Sleep(backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
	if failing {
		e.unwritten.Add(-1)
	}
}

// moveBacklog carries out m. A failure is logged and not retried: a hold
// not written leaves the backlog due (its claims are deferred to the
// hold's end), a hand-back not written leaves it due at the hold's end (at
// most an attempt timeout away), a pull-in not written leaves the
// deliveries due as they were deferred.
func (e *Engine) moveBacklog(m backlogMove) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := store.MoveParams{EndpointID: m.endpointID, DueFrom: m.dueFrom, DueTo: m.dueTo, At: m.at}
	if m.pullIn {
		p.Unattempted, p.Limit, p.Spacing = true, pullInMax, m.spacing
	}
	n, err := e.cfg.Store.MoveEndpointDeliveries(ctx, p)
	switch {
	case err == nil:
		if m.pullIn {
			e.cfg.Metrics.PulledIn(n)
			e.sched.pulledIn(m, n)
		}
	case m.pullIn:
		e.cfg.Logger.Warn("pulling in an endpoint's deferred deliveries failed; they come due as deferred", "endpoint", m.endpointID, "error", err)
	default:
		e.cfg.Logger.Warn("moving a half-open circuit's deliveries failed; they wait for the probe's deadline", "endpoint", m.endpointID, "error", err)
	}
}

// handsBack reports whether moves make deliveries due before wakeAt (see
// dueBefore).
func handsBack(moves []backlogMove, wakeAt int64) bool {
	if wakeAt == 0 {
		return false
	}
	for _, m := range moves {
		if m.at.UnixNano() < wakeAt {
			return true
		}
	}
	return false
}

// dueBefore reports whether a batch of completions made a delivery due
// before wakeAt, the Unix ns time a sleeping claimer will wake up (0: no
// claimer sleeps). Only then does the claimer need waking: a claimer that
// is not asleep reads the next due time before it sleeps, and a retry due
// after the wake-up is found by that read. Without this, a retry scheduled
// earlier than the poll interval waited for the poll (issue: retries of a
// 200 ms schedule came 1 s apart). Waking the claimer for every batch would
// cost a claim that finds nothing — on PostgreSQL a database round trip for
// each completion batch.
func dueBefore(batch []store.Completion, wakeAt int64) bool {
	if wakeAt == 0 {
		return false
	}
	for _, c := range batch {
		if (c.Deferred || c.State == store.DeliveryPending) && c.NextAttemptAt.UnixNano() < wakeAt {
			return true
		}
	}
	return false
}
