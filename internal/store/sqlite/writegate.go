package sqlite

import (
	"context"
	"sync"
)

// Publishes first on the single writer. The one writer connection is
// wanted by the publish groups (the API is waiting for their commit) and
// by the engine's own bookkeeping: claims, completion batches and the
// chunks of a large fan-out. database/sql hands a freed connection to any
// of its waiters, so a publish could wait behind every claim and
// completion queued before it (the tail of `herald bench fanout` and of
// the inbound acks, docs/BENCHMARKS.md). writeGate orders them instead:
// when the writer is freed, a waiting publish group goes next; queue work
// goes in arrival order once no publish waits. A publish therefore waits
// for at most the queue transaction already running.
//
// So that a steady stream of publish groups cannot stop delivery, queue
// work that waited through maxPublishesInARow groups in a row goes before
// the next one.
//
// The gate covers every write: the committer's publish groups (first),
// and in arrival order the queue's transactions (queueTx, claimTx) and
// every other write — the API's changes, the housekeeping's, a readiness
// probe — through acquireWriter, which also refuses them once the
// database file was deleted (checkFile). Nothing takes the writer
// connection outside the gate: such writes used to, so a publish group
// that had the gate could wait for the connection behind them, the gate's
// count of waiting work (the fan-out chunks' yield) missed them,
// and the engine's and housekeeping's writes were not checked against a
// deleted file.
type writeGate struct {
	mu     sync.Mutex
	held   bool
	high   []chan struct{} // publish groups waiting, in arrival order
	low    []*gateWaiter   // queue transactions waiting, in arrival order
	inARow int             // publish groups served while queue work waited
}

// maxPublishesInARow bounds how many publish groups go before waiting
// queue work.
const maxPublishesInARow = 8

type gateWaiter struct {
	ch      chan struct{}
	granted bool // set under mu when the gate is handed to this waiter
}

// acquirePublish waits for the writer with a publish's priority.
func (g *writeGate) acquirePublish() {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	g.high = append(g.high, ch)
	g.mu.Unlock()
	<-ch
}

// acquireQueue waits for the writer behind every waiting publish group.
// It returns ctx's error, not holding the gate, if ctx ends first.
func (g *writeGate) acquireQueue(ctx context.Context) error {
	g.mu.Lock()
	if !g.held && len(g.high) == 0 {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{ch: make(chan struct{})}
	g.low = append(g.low, w)
	g.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if w.granted {
			g.mu.Unlock()
			g.release()
			return ctx.Err()
		}
		for i, o := range g.low {
			if o == w {
				g.low = append(g.low[:i], g.low[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}

// release hands the writer to the next waiter: a publish group unless
// queue work has waited through maxPublishesInARow of them.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.high) > 0 && (len(g.low) == 0 || g.inARow < maxPublishesInARow) {
		if len(g.low) > 0 {
			g.inARow++
		}
		ch := g.high[0]
		g.high = g.high[1:]
		close(ch)
		return
	}
	g.inARow = 0
	if len(g.low) > 0 {
		w := g.low[0]
		g.low = g.low[1:]
		w.granted = true
		close(w.ch)
		return
	}
	g.held = false
}

// waiting reports the publish groups and queue transactions waiting.
func (g *writeGate) waiting() (publishes, queue int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.high), len(g.low)
}
