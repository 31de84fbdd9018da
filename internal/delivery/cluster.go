package delivery

import (
	"context"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
)

// Limits across nodes. Several nodes delivering from one database split
// every endpoint's limits between them, so the limits hold for the cluster
// as a whole with no coordination per attempt: each node heartbeats into the
// database (store.Membership) and learns the sorted list of live nodes; the
// node of rank r among n takes
//
//   - of a concurrency cap C: C/n attempts in flight, plus one more for the
//     first C mod n ranks (capShare), so the shares add up to exactly C;
//   - of a rate limit R per second: R/n per second with a burst of
//     max(2, ceil(B/n)), B being the endpoint's burst max(2, R/10)
//     (rateShare). Over any interval of T seconds the endpoint receives at
//     most R·T + n·max(2, ceil(B/n)) attempts from the whole cluster.
//
// A node that joins holds no share (it claims nothing) until every other
// node has counted it and shrunk its own share, and the attempts the
// others started under their former shares have ended (see the timings
// below) — unless two heartbeats in a row, the second started after the
// first committed, find it alone: then no other node holds a share to give
// up, and of two nodes starting together at least one sees the other on
// its second heartbeat and waits. A node that stops finishes its attempts, puts back the claims it
// had not started, then deletes its row; a node that dies is forgotten
// after 10 of its heartbeat intervals (until then the others under-use,
// never over-use). A node whose heartbeats fail holds no share after 2.5
// intervals, since it cannot know of a node that joined meanwhile, and
// one cut off for 5 intervals or more rejoins as a new node would. Nodes
// may run with different heartbeat intervals and attempt timeouts: each
// is judged by its own, and a joining node waits for the slowest.
//
// An endpoint that has proven fast (three answers under 250 ms in a row) is
// not held to the cap on any node (see scheduler): the cap exists to keep a slow
// endpoint from taking the workers, and a fast one gives them back at once.
// Its rate limit, when it has one, still holds across nodes.

// capShare is the part of a cluster-wide concurrency cap that the node of
// rank (0-based) among nodes live nodes may use; nodes == 0 means the node
// holds no share.
func capShare(capacity, rank, nodes int) int {
	if nodes <= 0 {
		return 0
	}
	if nodes == 1 {
		return capacity
	}
	s := capacity / nodes
	if rank < capacity%nodes {
		s++
	}
	return s
}

// rateShare is the node's part of an endpoint's rate limit of perSecond
// attempts per second, whose burst is B = max(2, perSecond/10): limit in
// attempts per second and burst in attempts. nodes == 0 gives (0, 0):
// nothing is admitted.
//
// Each node's burst is two at least, whatever n: a claim turned away by
// the limit goes back to the queue due at one of the coming tokens (see
// admitLocked) and comes back a little late, or is claimed by another node
// whose tokens fall at other times (and turned away there again); a bucket
// of one loses the token that accrues meanwhile. With one, a backlog got 6.5
// attempts/s at a limit of 10 on one node and 5–6/s on two
// (TestGateRateLimitDeliversItsRateThroughTheQueue,
// TestClusterRateLimitDeliversItsRate). The price is a larger burst for a
// cluster with a low limit: after an idle spell the nodes may send
// n·max(2, ceil(B/n)) attempts at once (6 for three nodes at a limit of
// 10), against B (2) for one node.
func rateShare(perSecond, nodes int) (rate.Limit, int) {
	if nodes <= 0 {
		return 0, 0
	}
	burst := max(2, perSecond/10)
	return rate.Limit(float64(perSecond) / float64(nodes)), max(2, (burst+nodes-1)/nodes)
}

// Membership timings, in heartbeat intervals I of a node. A heartbeat
// times out after I/2 and a new one starts I after the last one started
// (the loop ticks every I/4). A node whose last successful heartbeat
// started more than 2.5 I ago holds no share (it may not know of a node
// that joined since), so at any moment a node's share comes from a
// heartbeat that started at most 2.5 I + I/2 = 3 I ago. Hence a node that
// joins waits 3 × the longest interval of the live nodes (by then each has
// counted it), plus the longest attempt timeout of the others (their
// attempts started under their former, larger shares have ended).
const (
	heartbeatTimeoutIntervals = 0.5
	staleAfterIntervals       = 2.5
	settleIntervals           = 3
)

// nodeView turns the heartbeats of one node into its share (rank, nodes);
// nodes == 0 while it holds none. Not safe for concurrent use: only the
// heartbeat loop calls it.
type nodeView struct {
	self store.Node

	lastOK       time.Time // start of the last successful heartbeat
	settleAt     time.Time // the share applies from then (joined or rejoined)
	confirmAlone bool      // joined alone: the next heartbeat confirms it
	rank         int
	nodes        int
}

// observe records the outcome of a heartbeat that started at start and
// ended at now: live is the live nodes sorted by id, err the heartbeat's
// error.
func (v *nodeView) observe(live []store.Node, err error, start, now time.Time) (rank, nodes int) {
	if err != nil {
		return v.current(now)
	}
	ttl := store.NodeTTLIntervals * v.self.HeartbeatInterval
	alone := len(live) == 0 || len(live) == 1 && live[0].ID == v.self.ID
	joinWait := func() time.Duration {
		interval, attempts := v.self.HeartbeatInterval, time.Duration(0)
		for _, n := range live {
			interval = max(interval, n.HeartbeatInterval)
			if n.ID != v.self.ID {
				attempts = max(attempts, n.AttemptTimeout)
			}
		}
		return settleIntervals*interval + attempts
	}
	switch {
	case v.lastOK.IsZero() || now.Sub(v.lastOK) > ttl/2:
		// Joining, or rejoining after the others may have forgotten us.
		v.settleAt = now.Add(joinWait())
		v.confirmAlone = alone
	case v.confirmAlone:
		// The heartbeat after a join that found no other node. It started
		// after the first one committed, so a node that started at the same
		// time and was missed by the first is seen now, unless that node's
		// own second heartbeat is the one to see this node (it will, and it
		// will wait). Alone twice: no other node has a share to give up;
		// otherwise wait as a joiner does, from now.
		v.confirmAlone = false
		if alone {
			v.settleAt = now
		} else {
			v.settleAt = now.Add(joinWait())
		}
	}
	v.lastOK = start
	i, found := slices.BinarySearchFunc(live, v.self.ID, func(n store.Node, id string) int { return strings.Compare(n.ID, id) })
	v.rank, v.nodes = i, len(live)
	if !found {
		v.nodes++
	}
	return v.current(now)
}

// current is the share at now: none while settling or when the last
// successful heartbeat is stale.
func (v *nodeView) current(now time.Time) (rank, nodes int) {
	stale := time.Duration(staleAfterIntervals * float64(v.self.HeartbeatInterval))
	if v.lastOK.IsZero() || now.Sub(v.lastOK) > stale || now.Before(v.settleAt) {
		return 0, 0
	}
	return v.rank, v.nodes
}

// heartbeat keeps this node's membership and the scheduler's share current
// until ctx ends, then leaves. ready is closed once the node holds a share
// (the claimer waits for it).
func (e *Engine) heartbeat(ctx context.Context, ready chan<- struct{}) {
	m := e.cfg.Membership
	interval := e.cfg.HeartbeatInterval
	// Membership lives in the database's time (a node's row expires on
	// the server's clock), so the loop and its view keep to the wall
	// clock whatever Config.Clock is: a test's fake clock moving hours at
	// once must not make this node stale and rejoin.
	wall := clock.System()
	v := nodeView{self: store.Node{ID: e.cfg.Owner, HeartbeatInterval: interval, AttemptTimeout: e.cfg.AttemptTimeout}}
	t := wall.NewTicker(interval / 4)
	defer t.Stop()
	var last time.Time // start of the last heartbeat
	for ctx.Err() == nil {
		now := wall.Now()
		var rank, nodes int
		if last.IsZero() || now.Sub(last) >= interval {
			last = now
			// Not cancelled by shutdown: a heartbeat cut short may still
			// commit after the Leave below and leave a row the next node
			// would count (and wait for) until it expires.
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(heartbeatTimeoutIntervals*float64(interval)))
			live, err := m.Heartbeat(hctx, v.self)
			cancel()
			if ctx.Err() != nil {
				break
			}
			if err != nil {
				e.cfg.Logger.Warn("heartbeat failed", "error", err)
			}
			rank, nodes = v.observe(live, err, now, wall.Now())
			if v.confirmAlone {
				last = time.Time{} // confirm at once, not an interval later
			}
		} else {
			rank, nodes = v.current(now)
		}
		if e.sched.setShare(rank, nodes) {
			e.Notify() // a tenant the claims skipped is below its new cap share
		}
		e.cfg.Metrics.ClusterNodes(nodes)
		if nodes > 0 && ready != nil {
			close(ready)
			ready = nil
		}
		select {
		case <-ctx.Done():
		case <-t.Chan():
		}
	}
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Leave(lctx, e.cfg.Owner); err != nil {
		e.cfg.Logger.Warn("leaving the cluster failed; the other nodes forget this one after 10 heartbeat intervals", "error", err)
	}
}
