package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/herald-webhooks/herald/internal/store"
)

// Group commit. A durable publish costs one fsync of the WAL
// (synchronous=FULL); done one by one, concurrent publishes queue behind
// the single writer and each waits for its own fsync. The committer instead
// takes every publish that is waiting, runs them in one transaction (a new
// event costs one INSERT … ON CONFLICT DO NOTHING and its deliveries'
// inserts; see commit for a failing one) and commits once: one fsync for
// the whole group. Each caller gets its answer only after that commit, so a
// 2xx still means "on disk". Under light load a group is a single publish
// and nothing is added to its latency: the committer never waits for
// company.

// maxGroup bounds a group (and so the time the writer is held).
const maxGroup = 256

type publishRequest struct {
	ctx     context.Context
	p       store.PublishParams
	headers string // p.Event.Headers encoded (eventHeaders) by the caller, not the writer
	done    chan publishAnswer
}

type publishAnswer struct {
	res store.PublishResult
	err error
}

type committer struct {
	s       *Store
	queue   chan *publishRequest
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func newCommitter(s *Store) *committer {
	c := &committer{s: s, queue: make(chan *publishRequest, 4*maxGroup), stop: make(chan struct{}), stopped: make(chan struct{})}
	go c.run()
	return c
}

var errClosed = errors.New("sqlite: store closed")

// publish hands a publish to the committer and waits for the group's
// commit.
func (c *committer) publish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	headers, err := eventHeaders(p.Event.Headers)
	if err != nil {
		return store.PublishResult{}, err
	}
	req := &publishRequest{ctx: ctx, p: p, headers: headers, done: make(chan publishAnswer, 1)}
	// A closed committer refuses at once (select alone picks at random
	// between a free queue slot and the closed stop channel).
	select {
	case <-c.stop:
		return store.PublishResult{}, fmt.Errorf("publish: %w: %v", store.ErrUnavailable, errClosed)
	default:
	}
	select {
	case c.queue <- req:
	case <-c.stop:
		return store.PublishResult{}, fmt.Errorf("publish: %w: %v", store.ErrUnavailable, errClosed)
	case <-ctx.Done():
		return store.PublishResult{}, ctx.Err()
	}
	// Once queued, wait for the answer even if ctx ends: the publish may
	// already be in a committing group, and the caller must not be told
	// "failed" for an event that is stored. (A cancelled caller's request
	// not yet started is skipped by the committer.)
	var a publishAnswer
	select {
	case a = <-req.done:
	case <-c.stopped:
		// The committer drains the queue before it stops; a request queued
		// after that drain is never answered.
		select {
		case a = <-req.done:
		default:
			a.err = fmt.Errorf("publish: %w: %v", store.ErrUnavailable, errClosed)
		}
	}
	c.s.noteWrite(a.err)
	return a.res, a.err
}

func (c *committer) close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.stopped
	})
}

func (c *committer) run() {
	defer close(c.stopped)
	group := make([]*publishRequest, 0, maxGroup)
	for {
		var first *publishRequest
		select {
		case first = <-c.queue:
		case <-c.stop:
			// Answer what is still queued.
			for {
				select {
				case r := <-c.queue:
					r.done <- publishAnswer{err: fmt.Errorf("publish: %w: %v", store.ErrUnavailable, errClosed)}
				default:
					return
				}
			}
		}
		// Take the writer first (before the queue's transactions,
		// writeGate), then every publish that arrived meanwhile.
		c.s.gate.acquirePublish()
		group = append(group[:0], first)
	more:
		for len(group) < maxGroup {
			select {
			case r := <-c.queue:
				group = append(group, r)
			default:
				break more
			}
		}
		b := c.commit(group)
		c.s.gate.release()
		if b != nil {
			b.take()
		}
	}
}

// commit runs a group in one transaction. A publish writes nothing until
// its checks passed (a duplicate or a conflict is answered from reads), so
// no savepoint is needed per publish; if a write fails — a database fault,
// not the request's — the group is rolled back and its publishes are run
// one transaction each, so one bad request can never fail the others.
func (c *committer) commit(group []*publishRequest) *handOffBatch {
	if err := c.s.checkFile(); err != nil {
		// A commit into a deleted database file would be lost at the
		// next start: refuse the group (503) instead of answering 202.
		for _, r := range group {
			r.done <- publishAnswer{err: fmt.Errorf("publish: %w", err)}
		}
		return nil
	}
	answers := make([]publishAnswer, len(group))
	ctx := context.Background()
	tx, err := c.s.w.BeginTx(ctx, nil)
	if err != nil {
		c.oneByOne(group)
		return nil
	}
	defer tx.Rollback()
	g := newGroupTx() // endpoints and statements, read and bound once per group
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			answers[i].err = err // the caller gave up before its publish began
			continue
		}
		res, err := c.s.publishTx(ctx, tx, r.p, r.headers, g)
		if err != nil && !errors.Is(err, store.ErrConflict) {
			tx.Rollback()
			c.oneByOne(group)
			return nil
		}
		answers[i] = publishAnswer{res: res, err: err}
	}
	if err := g.flushDeliveries(ctx, c.s, tx); err != nil {
		tx.Rollback()
		c.oneByOne(group)
		return nil
	}
	// The engine's idle workers take the group's due deliveries (the
	// hand-off, handoff.go) as it reserves them, unless a claim waits for
	// the writer: a delivery that found no idle worker at its publish is
	// left to the claims, and a worker freed while that claim waits
	// behind publish groups must not go to a newer delivery first (older
	// due deliveries go first; TestHandOffWaitsForAWaitingClaim). Until
	// the hand-off built its claims from the group's memory, it read them
	// back on the writer, and a group also skipped it while publishes were
	// queued or a completion waited (one claim read many groups'
	// deliveries for less: herald bench inbound 4,058–4,429 requests/s
	// handing off every group against 4,811–5,124); without those reads,
	// handing off then too costs less CPU at 2,000 requests/s for the same
	// throughput (docs/BENCHMARKS.md, "Round 2, nineteenth session").
	var b *handOffBatch
	if c.s.claimsWaiting.Load() == 0 {
		if b = c.s.reserveHandOff(g.due); b != nil {
			b.loadAndLease(ctx, c.s, tx, handOffEvents(answers))
		}
	}
	if err := tx.Commit(); err != nil {
		if b != nil {
			b.unlease(c.s)
			b.giveBack()
		}
		c.oneByOne(group)
		return nil
	}
	if b != nil {
		b.count(answers)
	}
	for i, r := range group {
		r.done <- answers[i]
	}
	return b
}

// oneByOne runs each publish of a group in its own transaction.
func (c *committer) oneByOne(group []*publishRequest) {
	ctx := context.Background()
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- publishAnswer{err: err}
			continue
		}
		tx, err := c.s.w.BeginTx(ctx, nil)
		if err != nil {
			r.done <- publishAnswer{err: wrap("publish", err)}
			continue
		}
		res, err := c.s.publishTx(ctx, tx, r.p, r.headers, nil)
		if err == nil {
			err = tx.Commit()
		}
		tx.Rollback()
		if err != nil {
			r.done <- publishAnswer{err: wrap("publish", err)}
			continue
		}
		r.done <- publishAnswer{res: res}
	}
}
