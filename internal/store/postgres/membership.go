package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// heartbeatQuery upserts the node's row at the database's time (so node
// clocks need not agree), deletes the rows not seen for 10 of their own
// intervals ($4 = store.NodeTTLIntervals), and returns the other live
// nodes. The statement's snapshot does not show its own upsert, so
// Heartbeat adds the node itself.
const heartbeatQuery = `WITH up AS (
		INSERT INTO nodes (id, seen_at, interval_us, attempt_timeout_us) VALUES ($1, now(), $2, $3)
		ON CONFLICT (id) DO UPDATE SET seen_at = now(), interval_us = $2, attempt_timeout_us = $3),
	gone AS (
		DELETE FROM nodes WHERE seen_at < now() - make_interval(secs => $4 * interval_us / 1e6))
	SELECT id, interval_us, attempt_timeout_us FROM nodes
	WHERE seen_at >= now() - make_interval(secs => $4 * interval_us / 1e6) AND id <> $1`

// Heartbeat implements store.Membership.
func (s *Store) Heartbeat(ctx context.Context, self store.Node) ([]store.Node, error) {
	switch {
	case self.ID == "":
		return nil, store.Errorf(store.CodeInvalid, "heartbeat: empty node id")
	case self.HeartbeatInterval <= 0:
		return nil, store.Errorf(store.CodeInvalid, "heartbeat: interval %v is not positive", self.HeartbeatInterval)
	case self.AttemptTimeout <= 0:
		return nil, store.Errorf(store.CodeInvalid, "heartbeat: attempt timeout %v is not positive", self.AttemptTimeout)
	}
	rows, err := s.pool.Query(ctx, heartbeatQuery, self.ID, max(1, self.HeartbeatInterval.Microseconds()),
		max(1, self.AttemptTimeout.Microseconds()), store.NodeTTLIntervals)
	if err != nil {
		return nil, wrap("heartbeat", err)
	}
	defer rows.Close()
	live := []store.Node{self}
	for rows.Next() {
		var (
			n           store.Node
			interval    int64
			attemptTime int64
		)
		if err := rows.Scan(&n.ID, &interval, &attemptTime); err != nil {
			return nil, wrap("heartbeat", err)
		}
		n.HeartbeatInterval, n.AttemptTimeout = time.Duration(interval)*time.Microsecond, time.Duration(attemptTime)*time.Microsecond
		live = append(live, n)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("heartbeat", err)
	}
	slices.SortFunc(live, func(a, b store.Node) int { return strings.Compare(a.ID, b.ID) })
	s.alone.Store(len(live) == 1)
	return live, nil
}

// Leave implements store.Membership.
func (s *Store) Leave(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM nodes WHERE id = $1", id); err != nil {
		return wrap("leave", err)
	}
	return nil
}

// LiveNodes returns the ids of the nodes whose heartbeat (store.Membership)
// is younger than store.NodeTTLIntervals of their own intervals: the
// herald serve processes running on this database now (herald rekey warns
// about them). It writes nothing.
func (s *Store) LiveNodes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM nodes
		WHERE seen_at >= now() - make_interval(secs => $1 * interval_us / 1e6) ORDER BY id`, store.NodeTTLIntervals)
	if err != nil {
		return nil, wrap("live nodes", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, wrap("live nodes", err)
		}
		ids = append(ids, id)
	}
	return ids, wrap("live nodes", rows.Err())
}
