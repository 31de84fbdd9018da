package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/herald-webhooks/herald/internal/store"
)

// upsertStatsSQL adds one rollup row (store.StatsRollup) to endpoint_stats:
// the counters are summed, the last_* times keep the later one.
var upsertStatsSQL = func() string {
	cols := strings.Join(store.StatsCounters, ", ")
	sets := make([]string, 0, len(store.StatsCounters)+2)
	for _, c := range store.StatsCounters {
		sets = append(sets, c+" = "+c+" + excluded."+c)
	}
	sets = append(sets, "last_success_at = MAX(last_success_at, excluded.last_success_at)",
		"last_failure_at = MAX(last_failure_at, excluded.last_failure_at)")
	return "INSERT INTO endpoint_stats (endpoint_id, span, start, " + cols + ", last_success_at, last_failure_at) VALUES (" +
		strings.TrimSuffix(strings.Repeat("?,", len(store.StatsCounters)+5), ",") + ")" +
		" ON CONFLICT (endpoint_id, span, start) DO UPDATE SET " + strings.Join(sets, ", ")
}()

// sumStatsSQL sums an endpoint's rollups of one span from a start on.
var sumStatsSQL = func() string {
	sums := make([]string, len(store.StatsCounters))
	for i, c := range store.StatsCounters {
		sums[i] = "COALESCE(SUM(" + c + "), 0)"
	}
	return "SELECT " + strings.Join(sums, ", ") + " FROM endpoint_stats WHERE endpoint_id = ? AND span = ? AND start >= ?"
}()

// writeRollups adds a completion batch's attempts to the rollups, in the
// batch's transaction.
func (s *Store) writeRollups(ctx context.Context, tx *sql.Tx, cs []store.Completion) error {
	rows := store.Rollups(cs)
	if len(rows) == 0 {
		return nil
	}
	st, err := s.stmt(ctx, tx, upsertStatsSQL)
	if err != nil {
		return err
	}
	args := make([]any, 0, len(store.StatsCounters)+5)
	for _, r := range rows {
		args = append(args[:0], r.EndpointID, r.Span, micro(r.Start))
		for _, c := range r.Counters {
			args = append(args, c)
		}
		args = append(args, micro(r.LastSuccessAt), micro(r.LastFailureAt))
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// EndpointStats implements store.Store.
func (s *Store) EndpointStats(ctx context.Context, p store.EndpointStatsParams) (store.EndpointStats, error) {
	span, from, err := store.StatsRange(p.Window, p.Now)
	if err != nil {
		return store.EndpointStats{}, err
	}
	out := store.EndpointStats{EndpointID: p.EndpointID, Window: p.Window, From: from, To: p.Now,
		Counters: make([]int64, len(store.StatsCounters))}
	dest := make([]any, len(out.Counters))
	for i := range out.Counters {
		dest[i] = &out.Counters[i]
	}
	if err := s.r.QueryRowContext(ctx, sumStatsSQL, p.EndpointID, span, micro(from)).Scan(dest...); err != nil {
		return store.EndpointStats{}, wrap("endpoint stats", err)
	}
	var success, failure int64
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(last_success_at), 0), COALESCE(MAX(last_failure_at), 0)
		FROM endpoint_stats WHERE endpoint_id = ? AND span = 'h'`, p.EndpointID).Scan(&success, &failure); err != nil {
		return store.EndpointStats{}, wrap("endpoint stats", err)
	}
	out.LastSuccessAt, out.LastFailureAt = fromMicro(success), fromMicro(failure)
	return out, nil
}
