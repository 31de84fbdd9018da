package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

// upsertStatsQuery adds a batch's rollup rows (store.Rollups, a JSON array
// of objects named as the columns) to endpoint_stats in one statement: the
// counters are summed, the last_* times keep the later one. Rows are
// inserted in key order, so concurrent batches lock shared rows in the
// same order.
var upsertStatsQuery = func() string {
	defs := make([]string, 0, len(store.StatsCounters)+5)
	defs = append(defs, "endpoint_id text", "span text", "start timestamptz")
	sets := make([]string, 0, len(store.StatsCounters)+2)
	for _, c := range store.StatsCounters {
		defs = append(defs, c+" bigint")
		sets = append(sets, c+" = endpoint_stats."+c+" + excluded."+c)
	}
	defs = append(defs, "last_success_at timestamptz", "last_failure_at timestamptz")
	sets = append(sets, "last_success_at = GREATEST(endpoint_stats.last_success_at, excluded.last_success_at)",
		"last_failure_at = GREATEST(endpoint_stats.last_failure_at, excluded.last_failure_at)")
	cols := "endpoint_id, span, start, " + strings.Join(store.StatsCounters, ", ") + ", last_success_at, last_failure_at"
	return "INSERT INTO endpoint_stats (" + cols + ") SELECT " + cols +
		" FROM jsonb_to_recordset($1::jsonb) AS r (" + strings.Join(defs, ", ") + ") ORDER BY endpoint_id, span, start" +
		" ON CONFLICT (endpoint_id, span, start) DO UPDATE SET " + strings.Join(sets, ", ")
}()

// sumStatsQuery sums an endpoint's rollups of one span from a start on,
// and reads the latest success and failure of its hour rows.
var sumStatsQuery = func() string {
	sums := make([]string, len(store.StatsCounters))
	for i, c := range store.StatsCounters {
		sums[i] = "COALESCE(SUM(" + c + ") FILTER (WHERE span = $2 AND start >= $3), 0)::bigint"
	}
	return "SELECT " + strings.Join(sums, ", ") +
		", MAX(last_success_at) FILTER (WHERE span = 'h'), MAX(last_failure_at) FILTER (WHERE span = 'h')" +
		" FROM endpoint_stats WHERE endpoint_id = $1"
}()

// queueRollups queues the upsert of a completion batch's rollups (nothing
// when the batch made no attempt).
func queueRollups(b *pgx.Batch, cs []store.Completion) error {
	rows := store.Rollups(cs)
	if len(rows) == 0 {
		return nil
	}
	arr := make([]map[string]any, len(rows))
	for i, r := range rows {
		m := make(map[string]any, len(store.StatsCounters)+5)
		m["endpoint_id"], m["span"], m["start"] = r.EndpointID, r.Span, ts(r.Start)
		for j, c := range store.StatsCounters {
			m[c] = r.Counters[j]
		}
		m["last_success_at"], m["last_failure_at"] = nullTS(r.LastSuccessAt), nullTS(r.LastFailureAt)
		arr[i] = m
	}
	raw, err := json.Marshal(arr)
	if err != nil {
		return err
	}
	b.Queue(upsertStatsQuery, string(raw))
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
	dest := make([]any, 0, len(out.Counters)+2)
	for i := range out.Counters {
		dest = append(dest, &out.Counters[i])
	}
	var success, failure *time.Time
	dest = append(dest, &success, &failure)
	if err := s.pool.QueryRow(ctx, sumStatsQuery, p.EndpointID, span, ts(from)).Scan(dest...); err != nil {
		return store.EndpointStats{}, wrap("endpoint stats", err)
	}
	out.LastSuccessAt, out.LastFailureAt = fromNullTS(success), fromNullTS(failure)
	return out, nil
}
