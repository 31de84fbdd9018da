package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Group commit. One publish per transaction costs three round trips and a
// WAL flush each, and every one that creates pending deliveries sends a
// NOTIFY: PostgreSQL serialises the commits of notifying transactions (a
// database-wide lock held from before the commit record until the flush is
// done), so concurrent publishes fsync one after the other and a node
// saturates near 1 / fsync time. The committer instead takes every publish
// that is waiting, runs them in one transaction — one tenant lock and one
// endpoint read per tenant, one insert per event, one statement for all
// the deliveries, one NOTIFY — and commits once. Each caller gets its own
// answer only after that commit, so a 2xx still means "committed". Under
// light load a group is a single publish and nothing is added to its
// latency: the committer never waits for company.
//
// A publish writes nothing but its event row until its checks passed (a
// duplicate or a conflict is answered from reads), so one conflicting
// publish does not abort the group; if a statement fails (a database fault,
// or a deadlock between two groups inserting the same ids in opposite
// orders), the group is rolled back and its publishes are run one
// transaction each, so every caller gets its own answer as if it had
// published alone.

const (
	// maxGroup bounds the publishes of one transaction.
	maxGroup = 256
	// groupsInFlight is how many group transactions may run at once: while
	// one waits for its commit, the next one's statements run.
	groupsInFlight = 2
	// groupTimeout bounds one group transaction (a hung database answers
	// its callers with store.ErrUnavailable after this long).
	groupTimeout = 10 * time.Second
)

type publishRequest struct {
	ctx  context.Context
	p    store.PublishParams
	done chan publishAnswer
}

type publishAnswer struct {
	res store.PublishResult
	err error
}

type committer struct {
	s       *Store
	queue   chan *publishRequest
	slots   chan struct{} // one per group in flight
	stop    chan struct{}
	stopped chan struct{}
	groups  sync.WaitGroup
	once    sync.Once
}

func newCommitter(s *Store) *committer {
	c := &committer{
		s:       s,
		queue:   make(chan *publishRequest, 4*maxGroup),
		slots:   make(chan struct{}, groupsInFlight),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go c.run()
	return c
}

var errClosed = errors.New("postgres: store closed")

// publish hands a publish to the committer and waits for its group's
// commit.
func (c *committer) publish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	req := &publishRequest{ctx: ctx, p: p, done: make(chan publishAnswer, 1)}
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
	// not yet started is skipped.) The group is bounded by groupTimeout.
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
	return a.res, a.err
}

// close answers what is queued with store.ErrUnavailable and waits for the
// groups in flight.
func (c *committer) close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.stopped
		c.groups.Wait()
	})
}

func (c *committer) run() {
	defer close(c.stopped)
	for {
		var first *publishRequest
		select {
		case first = <-c.queue:
		case <-c.stop:
			c.refuseQueued()
			return
		}
		group := []*publishRequest{first}
		// Wait for a free slot, taking what arrives meanwhile: under load
		// the groups grow instead of queueing transactions.
	wait:
		for {
			if len(group) == maxGroup {
				select {
				case c.slots <- struct{}{}:
					break wait
				case <-c.stop:
					c.refuse(group)
					c.refuseQueued()
					return
				}
			}
			select {
			case c.slots <- struct{}{}:
				break wait
			case r := <-c.queue:
				group = append(group, r)
			case <-c.stop:
				c.refuse(group)
				c.refuseQueued()
				return
			}
		}
	more:
		for len(group) < maxGroup {
			select {
			case r := <-c.queue:
				group = append(group, r)
			default:
				break more
			}
		}
		c.groups.Add(1)
		go func() {
			defer c.groups.Done()
			c.commit(group)
			<-c.slots
		}()
	}
}

func (c *committer) refuse(group []*publishRequest) {
	for _, r := range group {
		r.done <- publishAnswer{err: fmt.Errorf("publish: %w: %v", store.ErrUnavailable, errClosed)}
	}
}

func (c *committer) refuseQueued() {
	for {
		select {
		case r := <-c.queue:
			c.refuse([]*publishRequest{r})
		default:
			return
		}
	}
}

// commit runs a group in one transaction and answers its callers.
func (c *committer) commit(group []*publishRequest) {
	var (
		ops  = make([]*publishOp, 0, len(group))
		reqs = make([]*publishRequest, 0, len(group))
	)
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- publishAnswer{err: err} // the caller gave up before its publish began
			continue
		}
		op, err := newPublishOp(r.p)
		if err != nil {
			r.done <- publishAnswer{err: fmt.Errorf("publish: %w", err)}
			continue
		}
		ops, reqs = append(ops, op), append(reqs, r)
	}
	if len(ops) == 0 {
		return
	}
	if len(ops) == 1 {
		c.alone(reqs[0])
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()

	// First round trip: BEGIN, the tenant locks (shared, in key order, as
	// every other path takes them), each tenant's endpoints, the catalog
	// check, the inserts.
	tenantNames := make([]string, 0, 4)
	for _, op := range ops {
		tenantNames = append(tenantNames, op.p.Event.Tenant)
	}
	slices.Sort(tenantNames)
	tenantNames = slices.Compact(tenantNames)
	b := newTxBatch()
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1::integer, h) FROM (SELECT DISTINCT hashtext(t) AS h FROM unnest($2::text[]) AS t ORDER BY 1) AS s`,
		tenantLockClass, tenantNames)
	// Each tenant's endpoints that may match each event type of the group.
	tenants := make(map[endpointsKey]*tenantEndpoints, len(tenantNames))
	for _, op := range ops {
		if k := (endpointsKey{op.p.Event.Tenant, op.p.Event.Type}); tenants[k] == nil {
			queueEndpoints(b, tenants, k)
		}
	}
	revs := queueCatalogCheck(b, ops)
	for _, op := range ops {
		op.queueInsert(b)
	}
	br := c.s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit; releases the connection
	if err := br.Close(); err != nil {
		tx.Rollback(ctx) //nolint:errcheck
		c.oneByOne(reqs)
		return
	}
	// A publish checked against an older catalog entry is answered
	// ErrStaleCatalog; its insert is undone with the group's, which runs
	// again without it (rare: only after a catalog change).
	var rest []*publishRequest
	for i, op := range ops {
		if revs.stale(op) {
			reqs[i].done <- publishAnswer{err: fmt.Errorf("publish: %w", store.ErrStaleCatalog)}
		} else {
			rest = append(rest, reqs[i])
		}
	}
	if len(rest) < len(reqs) {
		tx.Rollback(ctx) //nolint:errcheck
		if len(rest) > 0 {
			c.commit(rest)
		}
		return
	}
	for _, op := range ops {
		op.target(tenants[endpointsKey{op.p.Event.Tenant, op.p.Event.Type}])
	}
	ho := c.s.newHandOff()
	if err := finishOps(ctx, tx, ops, c.s.tag, !c.s.alone.Load(), ho); err != nil {
		tx.Rollback(ctx) //nolint:errcheck
		ho.end(false)
		c.oneByOne(reqs)
		return
	}
	err := tx.Commit(ctx)
	if err != nil {
		ho.fail(ctx) // the commit may have happened: its leases are given back
	} else {
		ho.end(true) // the workers start before the callers are answered
	}
	if err != nil {
		// The commit may or may not have happened: running the publishes
		// again would answer "duplicate" for events this group stored, so
		// every caller gets the error (never a success it cannot trust).
		err = groupError(err)
		for _, r := range reqs {
			r.done <- publishAnswer{err: err}
		}
		return
	}
	for i, r := range reqs {
		if ops[i].err != nil {
			r.done <- publishAnswer{err: fmt.Errorf("publish: %w", ops[i].err)}
			continue
		}
		r.done <- publishAnswer{res: ops[i].res}
	}
}

// groupError is the answer of a group whose commit failed: the group's own
// deadline is the database's fault (store.ErrUnavailable), not the caller's.
func groupError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("publish: %w: %w", store.ErrUnavailable, err)
	}
	return wrap("publish", err)
}

// alone runs a group of one: the caller's own transaction, bounded by the
// group timeout.
func (c *committer) alone(r *publishRequest) {
	ctx, cancel := context.WithTimeout(r.ctx, groupTimeout)
	defer cancel()
	res, err := c.s.publishOne(ctx, r.p)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	r.done <- publishAnswer{res: res, err: err}
}

// oneByOne runs each publish of a failed group in its own transaction.
func (c *committer) oneByOne(reqs []*publishRequest) {
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.done <- publishAnswer{err: err}
			continue
		}
		c.alone(r)
	}
}
