package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/herald-webhooks/herald/internal/store"
)

// upsertStatsSQL adds n rollup rows (store.StatsRollup) to
// endpoint_stats in one statement (multi-row VALUES, prepared once per
// row count in valuesChunks): the counters are summed, the last_* times
// keep the later one. A batch's rows are distinct (store.Rollups merges
// them), so no row of one statement conflicts with another of the same.
// One statement per row cost a third of a completion batch in a fan-out to
// many endpoints (two distinct rows per attempt, docs/BENCHMARKS.md).
func upsertStatsSQL(n int) string {
	cols := strings.Join(store.StatsCounters, ", ")
	sets := make([]string, 0, len(store.StatsCounters)+2)
	for _, c := range store.StatsCounters {
		sets = append(sets, c+" = "+c+" + excluded."+c)
	}
	sets = append(sets, "last_success_at = MAX(last_success_at, excluded.last_success_at)",
		"last_failure_at = MAX(last_failure_at, excluded.last_failure_at)")
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", len(store.StatsCounters)+5), ",") + ")"
	return "INSERT INTO endpoint_stats (endpoint_id, span, start, " + cols + ", last_success_at, last_failure_at) VALUES " +
		repeatJoin(row, n) + " ON CONFLICT (endpoint_id, span, start) DO UPDATE SET " + strings.Join(sets, ", ")
}

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
	return s.addRollups(ctx, tx, store.Rollups(cs))
}

// addRollups adds rollup rows to endpoint_stats on tx.
func (s *Store) addRollups(ctx context.Context, tx *sql.Tx, rows []store.StatsRollup) error {
	return execValues(ctx, s, tx, rows, upsertStatsValues, func(args []any, r store.StatsRollup) []any {
		args = append(args, r.EndpointID, r.Span, micro(r.Start))
		for _, c := range r.Counters {
			args = append(args, c)
		}
		return append(args, micro(r.LastSuccessAt), micro(r.LastFailureAt))
	})
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
