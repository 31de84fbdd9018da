package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// The readers of finished and held deliveries (retention, the dead-letter
// counts, the lists filtered by state, the gauges' counts) find them
// through each state's partial index (migration 00092), in a custom plan
// and in the generic plan PostgreSQL turns to after five runs of a
// prepared statement, and never walk the table: no index holds every
// row's state any more, so such a walk would read every delivery.
func TestStateQueriesUsePartialIndexes(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("acme"))
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	// 30,000 deliveries: 27,000 succeeded, 300 dead, 200 paused, 1,000
	// leased, 1,500 due. A list by a rare state reads its index; by a
	// common one, the primary key backwards until its page is full.
	seedDeliveries(t, conn, ep.ID, 30000, seedShape{
		state:   "CASE WHEN i <= 27000 THEN 'succeeded' WHEN i <= 27300 THEN 'dead' WHEN i <= 27500 THEN 'paused' ELSE 'pending' END",
		due:     "$1",
		leased:  "i > 27500 AND i <= 28500",
		updated: "$1::timestamptz + i * interval '1 second'",
	})
	since := base.Add(27100 * time.Second)
	type query struct {
		name, sql string
		args      []any
		want      []string // an index each plan must use
		// common: the query reads most of the table's rows (the succeeded
		// ones), where a walk of the table is the cheaper plan; the index
		// must be usable all the same, which a plan without table walks
		// (enable_seqscan off) shows.
		common bool
	}
	queries := []query{
		{"retention of succeeded", purgeSucceededSQL, []any{since, 500}, []string{"deliveries_succeeded"}, true},
		{"retention of dead", purgeDeadSQL, []any{since, 500}, []string{"deliveries_dead"}, false},
		{"counts by state (store gauges)", deliveryStateCountsSQL, nil, []string{"deliveries_succeeded", "deliveries_dead", "deliveries_paused", "deliveries_due", "deliveries_leased"}, true},
	}
	for _, tenant := range []string{"", "acme"} {
		q, args := deadLetterCountsQuery(tenant, since)
		queries = append(queries, query{fmt.Sprintf("dead-letter counts, tenant %q", tenant), q, args, []string{"deliveries_dead"}, false})
	}
	for _, p := range []store.ListDeliveriesParams{
		{State: store.DeliveryDead},
		{State: store.DeliveryDead, Tenant: "acme", Since: since},
		{State: store.DeliveryPaused},
		{State: store.DeliveryPaused, Tenant: "acme"},
	} {
		q, args, _ := listDeliveriesQuery(p)
		want := "deliveries_dead"
		if p.State == store.DeliveryPaused {
			want = "deliveries_paused"
		}
		queries = append(queries, query{fmt.Sprintf("list by state %s, tenant %q, since %v", p.State, p.Tenant, !p.Since.IsZero()), q, args, []string{want}, false})
	}
	// Each query is prepared, as pgx prepares it, and its plan read by
	// EXPLAIN EXECUTE (an EXPLAIN given parameters plans with their
	// values, a custom plan whatever plan_cache_mode says).
	for i, q := range queries {
		if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE q%d AS %s", i, q.sql)); err != nil {
			t.Fatalf("PREPARE %s: %v", q.name, err)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for i, q := range queries {
			if _, err := conn.Exec(ctx, fmt.Sprintf("SET enable_seqscan = %v", !q.common)); err != nil {
				t.Fatal(err)
			}
			// EXPLAIN of a DELETE plans it without running it.
			plan := explainPlan(t, conn, "EXPLAIN ", executeStatement(t, fmt.Sprintf("q%d", i), q.args))
			for _, idx := range q.want {
				if !strings.Contains(plan, idx) {
					t.Errorf("%s, %s: the plan does not use %s:\n%s", q.name, mode, idx, plan)
				}
			}
			if strings.Contains(plan, "Seq Scan on deliveries") || strings.Contains(plan, "Index Scan Backward using deliveries_pkey") {
				t.Errorf("%s, %s: the plan walks every delivery:\n%s", q.name, mode, plan)
			}
		}
	}
	// And the counts are right: pending holds the leased and the due.
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[store.DeliveryState]int{store.DeliverySucceeded: 27000, store.DeliveryDead: 300, store.DeliveryPaused: 200, store.DeliveryPending: 2500}
	if fmt.Sprint(st.DeliveriesByState) != fmt.Sprint(want) {
		t.Errorf("Stats().DeliveriesByState = %v, want %v", st.DeliveriesByState, want)
	}
}

// executeStatement is "EXECUTE name (args…)", each argument written as an
// SQL literal.
func executeStatement(t *testing.T, name string, args []any) string {
	t.Helper()
	if len(args) == 0 {
		return "EXECUTE " + name
	}
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case time.Time:
			lits[i] = "'" + v.Format(time.RFC3339Nano) + "'"
		case int:
			lits[i] = fmt.Sprint(v)
		default:
			t.Fatalf("executeStatement: an argument of type %T", a)
		}
	}
	return "EXECUTE " + name + " (" + strings.Join(lits, ", ") + ")"
}
