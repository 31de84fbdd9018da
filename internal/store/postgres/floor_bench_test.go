package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// backendCPU is the CPU time (user + system) used so far by the server
// processes connected to the current database of conn.
func backendCPU(b *testing.B, ctx context.Context, conn *pgx.Conn) time.Duration {
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// floorMode picks BenchmarkDrainFloor's drain.
var floorMode = flag.String("floor", "log", "BenchmarkDrainFloor: store, row or log")

// BenchmarkDrainFloor measures what a drain costs the server in two
// designs Herald does not have, on its own schema, against the store as it
// is: the publishes of BenchmarkDrainQueue (b.N deliveries, 4 endpoints),
// then, per -floor,
//
//   - store: the store's claims and completions, 128 at a time, the
//     previous batch in flight (as BenchmarkDrainQueue);
//   - row: the due order in memory (read once, before the timer): per
//     batch of 128, one read of the deliveries with their events' bodies,
//     then the attempts' INSERT and one UPDATE of the deliveries (no
//     claim, no lease written: a lower bound for any design that keeps a
//     row per delivery and its attempts);
//   - log: the same read, then one INSERT of 128 outcome rows into a
//     table without indexes (an outcome log; the delivery rows untouched).
//
// Completions commit with synchronous_commit=off, as the store's. It
// reports the CPU of the server processes connected to the benchmark's
// database (from /proc: run it on the server's machine) and the WAL
// written meanwhile (by the whole server: other databases' writes count
// too). Needs HERALD_TEST_POSTGRES_URL:
// go test -run '^$' -bench BenchmarkDrainFloor -benchtime 40960x ./internal/store/postgres -args -floor row
func BenchmarkDrainFloor(b *testing.B) {
	ctx := context.Background()
	dbURL := benchDatabase(b)
	s, err := postgres.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	closeStore := sync.OnceFunc(func() { s.Close() })
	defer closeStore()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	const batch = 128
	seedDrain(b, s, b.N)
	mode := *floorMode
	switch mode {
	case "store", "row", "log":
	default:
		b.Fatalf("-floor %q: want store, row or log", mode)
	}
	if mode != "store" {
		closeStore()
	}
	for _, q := range []string{"VACUUM ANALYZE",
		`CREATE TABLE outcomes (delivery text NOT NULL, attempt integer NOT NULL, state text NOT NULL, status integer, started_at timestamptz NOT NULL, duration_us bigint NOT NULL, error text, at timestamptz NOT NULL)`,
		"SET synchronous_commit = off"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT id FROM deliveries ORDER BY next_attempt_at, id`)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	var wal0 float64
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8`).Scan(&wal0); err != nil {
		b.Fatal(err)
	}
	cpu0 := backendCPU(b, ctx, conn)
	b.ResetTimer()
	done := 0
	var inFlight []store.Completion
	for done+batch <= b.N {
		if mode == "store" {
			t := time.Now().UTC()
			claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node_1", Limit: batch, Lease: time.Minute, Now: t})
			if err != nil {
				b.Fatal(err)
			}
			if inFlight != nil {
				if err := s.CompleteDeliveries(ctx, inFlight); err != nil {
					b.Fatal(err)
				}
				inFlight = nil
			}
			for _, c := range claims {
				inFlight = append(inFlight, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node_1", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded,
					Attempt: store.Attempt{Number: c.Delivery.Attempts + 1, StartedAt: t, Duration: time.Millisecond, StatusCode: 200}, Now: t})
			}
			done += len(claims)
			continue
		}
		chunk := ids[done : done+batch]
		rows, err := conn.Query(ctx, `SELECT d.id, d.endpoint_id, d.attempts, e.body FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = ANY($1)`, chunk)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var id, ep string
			var attempts int
			var body []byte
			if err := rows.Scan(&id, &ep, &attempts, &body); err != nil {
				b.Fatal(err)
			}
			n++
		}
		rows.Close()
		if n != batch {
			b.Fatalf("loaded %d of %d", n, batch)
		}
		t := time.Now().UTC()
		if mode == "row" {
			bt := &pgx.Batch{}
			bt.Queue(`INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code) SELECT u, 1, $2, 1000, 200 FROM unnest($1::text[]) AS u`, chunk, t)
			bt.Queue(`UPDATE deliveries SET state = 'succeeded', attempts = attempts + 1, last_status_code = 200, next_attempt_at = $2, updated_at = $2 WHERE id = ANY($1)`, chunk, t)
			if err := conn.SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
		} else {
			if _, err := conn.Exec(ctx, `INSERT INTO outcomes (delivery, attempt, state, status, started_at, duration_us, error, at) SELECT u, 1, 'succeeded', 200, $2, 1000, NULL, $2 FROM unnest($1::text[]) AS u`, chunk, t); err != nil {
				b.Fatal(err)
			}
		}
		done += batch
	}
	if inFlight != nil {
		if err := s.CompleteDeliveries(ctx, inFlight); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1 := backendCPU(b, ctx, conn)
	var wal1 float64
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8`).Scan(&wal1); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(done), "server-cpu-µs/delivery")
	b.ReportMetric((wal1-wal0)/float64(done), "WAL-bytes/delivery")
}
