package delivery

import (
	"context"
	"slices"
	"time"

	"golang.org/x/time/rate"
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
//     ceil(B/n), B being the endpoint's burst max(1, R/10) (rateShare). Over
//     any interval of T seconds the endpoint receives at most
//     R·T + B + n − 1 attempts from the whole cluster.
//
// A node that joins holds no share (it claims nothing) for two heartbeat
// intervals, by which time every other node has counted it and shrunk its
// own share; a node that leaves deletes its row, and a node that dies is
// forgotten after the TTL (until then the others under-use, never over-use).
// A node whose heartbeats fail for half the TTL, so that the others may
// soon forget it, holds no share until it has rejoined the same way.
//
// An endpoint that has proven fast (three answers under 250 ms in a row) is
// not held to the cap on any node (see gate): the cap exists to keep a slow
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
// attempts per second (whose burst is max(1, perSecond/10)): limit in
// attempts per second and burst in attempts. nodes == 0 gives (0, 0):
// nothing is admitted.
func rateShare(perSecond, nodes int) (rate.Limit, int) {
	if nodes <= 0 {
		return 0, 0
	}
	burst := max(1, perSecond/10)
	return rate.Limit(float64(perSecond) / float64(nodes)), (burst + nodes - 1) / nodes
}

// nodeView turns the heartbeats of one node into its share (rank, nodes);
// nodes == 0 while it holds none. Not safe for concurrent use: only the
// heartbeat loop calls it.
type nodeView struct {
	self     string
	interval time.Duration // between heartbeats
	ttl      time.Duration // a node not seen for this long is forgotten

	lastOK   time.Time // last successful heartbeat
	settleAt time.Time // the share applies from then (joined or rejoined)
	rank     int
	nodes    int
}

// observe records the outcome of the heartbeat that ended at now: live is
// the sorted list of live node ids, err the heartbeat's error.
func (v *nodeView) observe(live []string, err error, now time.Time) (rank, nodes int) {
	detached := v.lastOK.IsZero() || now.Sub(v.lastOK) > v.ttl/2
	if err != nil {
		if detached {
			return 0, 0 // the others may forget this node: take nothing
		}
		return v.current(now)
	}
	if detached {
		// Joining, or rejoining after the others may have forgotten us:
		// wait until every node has counted us (each heartbeats within an
		// interval) before taking a share.
		v.settleAt = now.Add(2 * v.interval)
	}
	v.lastOK = now
	i, found := slices.BinarySearch(live, v.self)
	if !found {
		live = slices.Insert(slices.Clone(live), i, v.self)
	}
	v.rank, v.nodes = i, len(live)
	return v.current(now)
}

func (v *nodeView) current(now time.Time) (rank, nodes int) {
	if now.Before(v.settleAt) {
		return 0, 0
	}
	return v.rank, v.nodes
}

// heartbeat keeps this node's membership and the gate's share current
// until ctx ends, then leaves. ready is closed once the node holds a share
// (the claimer waits for it).
func (e *Engine) heartbeat(ctx context.Context, ready chan<- struct{}) {
	m := e.cfg.Membership
	v := nodeView{self: e.cfg.Owner, interval: e.cfg.HeartbeatInterval, ttl: e.cfg.NodeTTL}
	t := time.NewTicker(e.cfg.HeartbeatInterval / 4) // fine enough to notice the end of the warm-up
	defer t.Stop()
	var last time.Time
	for {
		now := e.cfg.Clock.Now()
		var rank, nodes int
		if last.IsZero() || now.Sub(last) >= e.cfg.HeartbeatInterval {
			hctx, cancel := context.WithTimeout(ctx, e.cfg.HeartbeatInterval)
			live, err := m.Heartbeat(hctx, e.cfg.Owner, e.cfg.NodeTTL)
			cancel()
			if ctx.Err() != nil {
				break
			}
			if err != nil {
				e.cfg.Logger.Warn("heartbeat failed", "error", err)
			}
			last = now
			rank, nodes = v.observe(live, err, e.cfg.Clock.Now())
		} else {
			rank, nodes = v.current(now)
		}
		e.gate.setShare(rank, nodes)
		e.cfg.Metrics.ClusterNodes(nodes)
		if nodes > 0 && ready != nil {
			close(ready)
			ready = nil
		}
		select {
		case <-ctx.Done():
		case <-t.C:
			continue
		}
		break
	}
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Leave(lctx, e.cfg.Owner); err != nil {
		e.cfg.Logger.Warn("leaving the cluster failed; the other nodes forget this one after the node TTL", "error", err, "ttl", e.cfg.NodeTTL)
	}
}
