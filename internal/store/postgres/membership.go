package postgres

import (
	"context"
	"errors"
	"slices"
	"time"
)

// heartbeatQuery upserts the node's row at the database's time (so node
// clocks need not agree), deletes the rows not seen for $2 seconds, and
// returns the live nodes. The statement's snapshot does not show its own
// upsert, so Heartbeat adds the node itself.
const heartbeatQuery = `WITH up AS (
		INSERT INTO nodes (id, seen_at) VALUES ($1, now())
		ON CONFLICT (id) DO UPDATE SET seen_at = now()),
	gone AS (
		DELETE FROM nodes WHERE seen_at < now() - make_interval(secs => $2))
	SELECT id FROM nodes WHERE seen_at >= now() - make_interval(secs => $2) AND id <> $1`

// Heartbeat implements store.Membership.
func (s *Store) Heartbeat(ctx context.Context, node string, ttl time.Duration) ([]string, error) {
	if node == "" {
		return nil, errors.New("postgres: heartbeat: empty node id")
	}
	if ttl <= 0 {
		return nil, errors.New("postgres: heartbeat: ttl must be positive")
	}
	rows, err := s.pool.Query(ctx, heartbeatQuery, node, ttl.Seconds())
	if err != nil {
		return nil, wrap("heartbeat", err)
	}
	defer rows.Close()
	live := []string{node}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, wrap("heartbeat", err)
		}
		live = append(live, id)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("heartbeat", err)
	}
	slices.Sort(live)
	return live, nil
}

// Leave implements store.Membership.
func (s *Store) Leave(ctx context.Context, node string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM nodes WHERE id = $1", node); err != nil {
		return wrap("leave", err)
	}
	return nil
}
