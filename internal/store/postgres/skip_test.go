package postgres

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

// planNode is the part of EXPLAIN (ANALYZE, FORMAT JSON) these tests read.
type planNode struct {
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	Node          string     `json:"Node Type"`
	Rows          float64    `json:"Actual Rows"`
	Loops         float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	Plans         []planNode `json:"Plans"`
}

// examined sums the rows the plan's scans of deliveries read (returned or
// filtered out), and lists the scans.
func (n planNode) examined(scans *[]string) float64 {
	var sum float64
	if n.Relation == "deliveries" {
		sum += (n.Rows + n.RemovedFilter) * n.Loops
		*scans = append(*scans, n.Node+" "+n.Index)
	}
	for _, c := range n.Plans {
		sum += c.examined(scans)
	}
	return sum
}

// The queries of a claim and of a next-due read that skip a tenant
// (ClaimParams.SkipTenants) stay on the due indexes and read as many rows
// whether the skipped tenant's backlog, the oldest due, is 3,000 or 30,000
// deliveries; the claim takes only the other tenant's.
func TestSkipTenantsCostFlat(t *testing.T) {
	t.Parallel()
	measure := func(backlog int) (fill, next float64) {
		dbURL := newSchema(t)
		s := openStore(t, dbURL)
		a := createEndpoint(t, s, newEndpoint("a"))
		b := createEndpoint(t, s, newEndpoint("b"))
		conn := rawConn(t, dbURL)
		ctx := t.Context()
		// a: backlog deliveries due from base on; b: 3 due an hour later.
		if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
			SELECT 'evt_' || lpad(i::text, 8, '0'), CASE WHEN i <= $2 THEN 'a' ELSE 'b' END, 't', $1, '{}', 'f', $1
			FROM generate_series(1, $2 + 3) AS i`, base, backlog); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
			SELECT 'dlv_' || lpad(i::text, 8, '0'), 'evt_' || lpad(i::text, 8, '0'),
			       CASE WHEN i <= $2 THEN $3 ELSE $4 END, CASE WHEN i <= $2 THEN 'a' ELSE 'b' END, 't', 'pending',
			       CASE WHEN i <= $2 THEN $1::timestamptz + i * interval '1 millisecond' ELSE $1::timestamptz + interval '1 hour' END,
			       $1, $1
			FROM generate_series(1, $2 + 3) AS i`, base, backlog, a.ID, b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		now, until := base.Add(2*time.Hour), base.Add(3*time.Hour)
		skip := []string{"a"}
		explain := func(tx pgx.Tx, q string, args ...any) (float64, []string) {
			t.Helper()
			var out []struct{ Plan planNode }
			var raw string
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Scan(&raw); err != nil {
				t.Fatalf("EXPLAIN ANALYZE: %v", err)
			}
			if err := json.Unmarshal([]byte(raw), &out); err != nil || len(out) != 1 {
				t.Fatalf("EXPLAIN output %q: %v", raw, err)
			}
			var scans []string
			return out[0].Plan.examined(&scans), scans
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // the claim is only measured
		// The round of a claim of 8 (b gets its 3), then its fill: room for
		// 5, none of a's.
		if _, err := tx.Exec(ctx, claimFairQuery, "w", until, now, 8, "", store.ClaimTenantProbes*8+len(skip), skip); err != nil {
			t.Fatal(err)
		}
		fill, scans := explain(tx, claimFillSkipQuery, "w", until, now, 8, skip, store.ClaimTenantProbes)
		t.Logf("backlog %d: the fill reads %v rows: %s", backlog, fill, strings.Join(scans, ", "))
		for _, sc := range scans {
			if strings.HasPrefix(sc, "Seq Scan") {
				t.Errorf("the fill scans the deliveries table: %s", strings.Join(scans, ", "))
			}
		}
		var taken int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE lease_owner = 'w' AND tenant = 'a'").Scan(&taken); err != nil || taken != 0 {
			t.Fatalf("the claim skipping a leased %d of a's (%v), want none", taken, err)
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE lease_owner = 'w'").Scan(&taken); err != nil || taken != 3 {
			t.Fatalf("the claim skipping a leased %d (%v), want b's 3", taken, err)
		}
		next, scans = explain(tx, nextDueSkipQuery, skip, store.NextDueTenantProbes+len(skip))
		t.Logf("backlog %d: the next-due read reads %v rows: %s", backlog, next, strings.Join(scans, ", "))
		for _, sc := range scans {
			if !strings.Contains(sc, "deliveries_due_tenant") {
				t.Errorf("the next-due read is not on deliveries_due_tenant: %s", strings.Join(scans, ", "))
			}
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		// Through the driver: b's 3, then b's next due time only.
		cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 8, Lease: time.Hour, Now: now, SkipTenants: skip})
		if err != nil || len(cs) != 3 {
			t.Fatalf("ClaimDeliveries(skip a) = %d claims, %v; want b's 3", len(cs), err)
		}
		for _, c := range cs {
			if c.Delivery.Tenant != "b" {
				t.Fatalf("ClaimDeliveries(skip a) took %s of %s", c.Delivery.ID, c.Delivery.Tenant)
			}
		}
		if due, err := s.NextDueAt(ctx, skip); err != nil || !due.IsZero() {
			t.Fatalf("NextDueAt(skip a) with b's in flight = %v, %v; want none", due, err)
		}
		return fill, next
	}
	smallFill, smallNext := measure(3000)
	bigFill, bigNext := measure(30000)
	if bigFill != smallFill || bigNext != smallNext {
		t.Fatalf("rows read grow with the skipped backlog: fill %v → %v, next due %v → %v", smallFill, bigFill, smallNext, bigNext)
	}
}
