package sqlite_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// floorMode picks BenchmarkDrainFloor's completion.
var floorMode = flag.String("floor", "log", "BenchmarkDrainFloor: log, row, row-nodue or row-nodue-noep")

// BenchmarkDrainFloor measures what a drain would cost the store in two
// designs Herald does not have, on its own schema, to weigh them against
// BenchmarkDrainQueueInFlight (the store as it is): the same publishes,
// then a drain whose due order is in memory (taken once, before the
// timer, by rowid), so that no claim statement runs. Per batch of 128
// deliveries it reads the deliveries' rows with their events' bodies (what
// an attempt needs), then records the 128 outcomes in one transaction
// (synchronous=NORMAL, as the queue's commits) as -floor says:
//
//   - log: one INSERT of 128 rows into an append-only table without
//     indexes (an outcome log; the delivery rows untouched);
//   - row: the attempts' INSERT and one UPDATE of the deliveries, with
//     every index the schema has;
//   - row-nodue: the same without the due indexes (deliveries_due,
//     deliveries_due_tenant), which an order in memory would not need;
//   - row-nodue-noep: and without deliveries_endpoint.
//
// Neither floor does what the store's claim and completion also do
// (fairness, caps, leases, endpoint rows, rollups, failure streaks), so
// each is a lower bound. Count instructions as for
// BenchmarkDrainQueueInFlight (docs/BENCHMARKS.md, "Counting
// instructions"), with -test.bench 'BenchmarkDrainFloor$' -floor MODE.
func BenchmarkDrainFloor(b *testing.B) {
	ctx := context.Background()
	const endpoints, batch = 4, 128
	dir := b.TempDir()
	path := filepath.Join(dir, "bench.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	eps := make([]store.Endpoint, endpoints)
	for i := range eps {
		eps[i].ID = fmt.Sprintf("ep_%d", i)
	}
	publishBenchEvents(b, s, createBenchEndpoints(b, s, eps...), b.N/endpoints+1)
	s.Close()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE outcomes (delivery INTEGER NOT NULL, attempt INTEGER NOT NULL, state TEXT NOT NULL, status INTEGER, started_at INTEGER NOT NULL, duration_us INTEGER NOT NULL, error TEXT, at INTEGER NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	mode := *floorMode
	switch mode {
	case "log", "row", "row-nodue", "row-nodue-noep":
	default:
		b.Fatalf("-floor %q: want log, row, row-nodue or row-nodue-noep", mode)
	}
	for _, idx := range map[string][]string{"row-nodue": {"deliveries_due", "deliveries_due_tenant"},
		"row-nodue-noep": {"deliveries_due", "deliveries_due_tenant", "deliveries_endpoint"}}[mode] {
		if _, err := db.Exec("DROP INDEX " + idx); err != nil {
			b.Fatal(err)
		}
	}
	// The in-memory order: every delivery's rowid.
	var ids []int64
	rows, err := db.Query(`SELECT rowid FROM deliveries ORDER BY next_attempt_at, rowid`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	if *setupOnly {
		return
	}
	load, err := db.Prepare(`SELECT d.rowid, d.id, d.endpoint_id, d.attempts, e.body FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.rowid IN (SELECT value FROM json_each(?))`)
	if err != nil {
		b.Fatal(err)
	}
	ins, err := db.Prepare(`INSERT INTO outcomes (delivery, attempt, state, status, started_at, duration_us, error, at) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, 'succeeded', 200, ?, 1000, NULL, ?),", batch), ","))
	if err != nil {
		b.Fatal(err)
	}
	insAttempt, err := db.Prepare(`INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, 1, ?, 1000, 200),", batch), ","))
	if err != nil {
		b.Fatal(err)
	}
	upd, err := db.Prepare(`UPDATE deliveries SET state = 'succeeded', attempts = attempts + 1, last_status_code = 200, next_attempt_at = ?1, updated_at = ?1
		WHERE rowid IN (SELECT value FROM json_each(?2))`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	done := 0
	for done+batch <= b.N {
		chunk := ids[done : done+batch]
		var sb strings.Builder
		sb.WriteByte('[')
		for i, id := range chunk {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprint(&sb, id)
		}
		sb.WriteByte(']')
		rows, err := load.Query(sb.String())
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		dids := make([]string, 0, batch)
		for rows.Next() {
			var rid int64
			var id, ep string
			var attempts int
			var body []byte
			if err := rows.Scan(&rid, &id, &ep, &attempts, &body); err != nil {
				b.Fatal(err)
			}
			n++
			dids = append(dids, id)
		}
		rows.Close()
		if n != batch {
			b.Fatalf("loaded %d of %d", n, batch)
		}
		t := time.Now().UnixMicro()
		args := make([]any, 0, 4*batch)
		for _, id := range chunk {
			args = append(args, id, 1, t, t)
		}
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if mode == "log" {
			if _, err := tx.Stmt(ins).Exec(args...); err != nil {
				b.Fatal(err)
			}
		} else {
			aargs := make([]any, 0, 3*batch)
			for _, id := range dids {
				aargs = append(aargs, id, t)
			}
			if _, err := tx.Stmt(insAttempt).Exec(aargs...); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Stmt(upd).Exec(t, sb.String()); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		done += batch
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(max(done, 1)), "cpu-µs/delivery")
}
