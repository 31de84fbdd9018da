package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// endpointStats: completions add their attempts to the endpoint's rollups
// in their own batch; each window sums exactly the attempts started in it
// (across minute and hour boundaries, edges included, older ones left
// out), with every figure; other endpoints and deferrals add nothing; an
// unknown window is ErrInvalid; Purge expires the rollups.
func (s suite) endpointStats(t *testing.T) {
	s.run(t, "Windows", func(t *testing.T, f *fixture) {
		// The injected clock: "now" for the stats, and each attempt's
		// start chosen around the windows' edges.
		now := time.Date(2026, 1, 9, 10, 30, 30, 0, time.UTC)
		day := func(d, h, m, sec int) time.Time { return time.Date(2026, 1, d, h, m, sec, 0, time.UTC) }
		a := f.endpoint("acme")
		b := f.endpoint("acme")
		t0 := now.Add(-10 * 24 * time.Hour)
		for range 10 {
			f.publish("acme", "file.created", t0)
		}
		claims := f.claim("w1", 100, time.Hour, t0)
		var ofA, ofB []store.Claim
		for _, c := range claims {
			if c.Delivery.EndpointID == a.ID {
				ofA = append(ofA, c)
			} else {
				ofB = append(ofB, c)
			}
		}
		if len(ofA) != 10 || len(ofB) != 10 {
			t.Fatalf("claims: %d of A, %d of B, want 10 each", len(ofA), len(ofB))
		}
		type att struct {
			state   store.DeliveryState
			status  int
			errc    string
			started time.Time
			dur     time.Duration
		}
		ms := time.Millisecond
		plan := []att{
			{store.DeliverySucceeded, 200, "", day(9, 10, 30, 20), 3 * ms},            // 0: 1h, bucket ≤5ms
			{store.DeliverySucceeded, 204, "", day(9, 10, 29, 29), 7 * ms},            // 1: 1h (previous minute), ≤10ms
			{store.DeliverySucceeded, 200, "", day(9, 10, 0, 10), 40 * ms},            // 2: 1h, ≤50ms
			{store.DeliverySucceeded, 200, "", day(9, 9, 31, 0), 100 * ms},            // 3: 1h's first minute exactly, ≤100ms (bound inclusive)
			{store.DeliveryPending, 503, "", day(9, 9, 30, 59), 800 * ms},             // 4: just before 1h, in 24h, ≤1s
			{store.DeliveryPending, 0, "timeout", day(8, 11, 0, 0), 10 * time.Second}, // 5: 24h, ≤10s
			{store.DeliveryDead, 0, "dns", day(8, 10, 30, 59), 2 * ms},                // 6: just before 24h, in 7d, ≤5ms
			{store.DeliveryDead, 410, "", day(3, 0, 0, 0), 70 * time.Second},          // 7: 7d, overflow bucket
			{store.DeliverySucceeded, 200, "", day(2, 10, 59, 59), ms},                // 8: before 7d's first hour: nowhere
			{store.DeliveryPending, 302, "redirect", day(9, 10, 30, 0), 20 * ms},      // 9: 1h, ≤25ms
		}
		comp := func(c store.Claim, p att) store.Completion {
			cp := store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Delivery.EndpointID, Owner: "w1", LeaseUntil: c.Delivery.LeaseUntil, State: p.state, Now: p.started.Add(p.dur),
				Attempt: store.Attempt{StartedAt: p.started, Duration: p.dur, StatusCode: p.status, Error: p.errc}}
			if p.state == store.DeliveryPending {
				cp.NextAttemptAt = now.Add(time.Hour)
			}
			return cp
		}
		// Batch 1: successes only (the drivers' fast path), one of B.
		var batch []store.Completion
		for i, p := range plan {
			if p.state == store.DeliverySucceeded {
				batch = append(batch, comp(ofA[i], p))
			}
		}
		batch = append(batch, comp(ofB[0], att{store.DeliverySucceeded, 200, "", now.Add(-5 * time.Second), 3 * ms}))
		f.complete(batch...)
		// Batch 2: the failures, and a deferral (no attempt: not counted).
		batch = batch[:0]
		for i, p := range plan {
			if p.state != store.DeliverySucceeded {
				batch = append(batch, comp(ofA[i], p))
			}
		}
		batch = append(batch, store.Completion{DeliveryID: ofA[0].Delivery.ID, EndpointID: a.ID, Owner: "w1", LeaseUntil: ofA[0].Delivery.LeaseUntil, Deferred: true,
			NextAttemptAt: now, Now: now})
		f.complete(batch...)

		type want struct {
			attempts, successes, failures, dead int64
			classes                             map[string]int64
			families                            map[string]int64
			hist                                map[int]int64
			p50, p95, p99                       time.Duration
			from                                time.Time
		}
		check := func(id, window string, w want) {
			t.Helper()
			st, err := f.s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: id, Window: window, Now: now})
			if err != nil {
				t.Fatalf("EndpointStats(%s): %v", window, err)
			}
			if !st.From.Equal(w.from) || !st.To.Equal(now) {
				t.Errorf("%s: window [%s, %s), want [%s, %s)", window, st.From, st.To, w.from, now)
			}
			if st.Attempts() != w.attempts || st.Successes() != w.successes || st.Failures() != w.failures || st.DeadLetters() != w.dead {
				t.Errorf("%s: attempts %d successes %d failures %d dead %d, want %d %d %d %d", window,
					st.Attempts(), st.Successes(), st.Failures(), st.DeadLetters(), w.attempts, w.successes, w.failures, w.dead)
			}
			if rate, ok := st.SuccessRate(); !ok || rate != float64(w.successes)/float64(w.attempts) {
				t.Errorf("%s: success rate %v %v", window, rate, ok)
			}
			for _, c := range store.FailureClasses {
				if got := st.FailuresByClass()[c]; got != w.classes[c] {
					t.Errorf("%s: failures %s = %d, want %d", window, c, got, w.classes[c])
				}
			}
			for _, fam := range store.StatusFamilies {
				if got := st.AttemptsByStatusFamily()[fam]; got != w.families[fam] {
					t.Errorf("%s: status %s = %d, want %d", window, fam, got, w.families[fam])
				}
			}
			for i, got := range st.Histogram() {
				if got != w.hist[i] {
					t.Errorf("%s: histogram bucket %d = %d, want %d", window, i, got, w.hist[i])
				}
			}
			for _, q := range []struct {
				q    float64
				want time.Duration
			}{{0.5, w.p50}, {0.95, w.p95}, {0.99, w.p99}} {
				if got, ok := st.Percentile(q.q); !ok || got != q.want {
					t.Errorf("%s: p%v = %v, want %v", window, q.q*100, got, q.want)
				}
			}
			checkTime(t, window+" last success", st.LastSuccessAt, day(9, 10, 30, 20))
			checkTime(t, window+" last failure", st.LastFailureAt, day(9, 10, 30, 0))
		}
		check(a.ID, store.StatsWindowHour, want{attempts: 5, successes: 4, failures: 1,
			classes: map[string]int64{"redirect": 1}, families: map[string]int64{"2xx": 4, "3xx": 1},
			hist: map[int]int64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}, p50: 25 * ms, p95: 100 * ms, p99: 100 * ms, from: day(9, 9, 31, 0)})
		check(a.ID, store.StatsWindowDay, want{attempts: 7, successes: 4, failures: 3,
			classes: map[string]int64{"redirect": 1, "http_status": 1, "timeout": 1}, families: map[string]int64{"2xx": 4, "3xx": 1, "5xx": 1, "none": 1},
			hist: map[int]int64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 7: 1, 10: 1}, p50: 50 * ms, p95: 10 * time.Second, p99: 10 * time.Second, from: day(8, 10, 31, 0)})
		week := want{attempts: 9, successes: 4, failures: 5, dead: 2,
			classes:  map[string]int64{"redirect": 1, "http_status": 2, "timeout": 1, "dns": 1},
			families: map[string]int64{"2xx": 4, "3xx": 1, "4xx": 1, "5xx": 1, "none": 2},
			hist:     map[int]int64{0: 2, 1: 1, 2: 1, 3: 1, 4: 1, 7: 1, 10: 1, 13: 1}, p50: 50 * ms, p95: 60 * time.Second, p99: 60 * time.Second, from: day(2, 11, 0, 0)}
		check(a.ID, store.StatsWindowWeek, week)

		// B's attempt is B's only.
		if st, err := f.s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: b.ID, Window: store.StatsWindowHour, Now: now}); err != nil || st.Attempts() != 1 || st.Successes() != 1 {
			t.Fatalf("B: %+v %v", st, err)
		}
		// An endpoint without rollups: zeros, no rate, no percentile.
		if st, err := f.s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: "ep_none", Window: store.StatsWindowWeek, Now: now}); err != nil || st.Attempts() != 0 {
			t.Fatalf("unknown endpoint: %+v %v", st, err)
		} else if _, ok := st.Percentile(0.5); ok {
			t.Fatal("percentile without attempts")
		}
		if _, err := f.s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: a.ID, Window: "2h", Now: now}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("window 2h: %v, want ErrInvalid", err)
		}

		// Retention at the horizons keeps every window whole…
		purge := func(p store.PurgeParams) {
			t.Helper()
			for {
				n, err := f.s.Purge(f.ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					return
				}
			}
		}
		purge(store.PurgeParams{MinuteStatsBefore: now.Add(-store.StatsMinuteHorizon), HourStatsBefore: now.Add(-store.StatsHourHorizon), Limit: 2})
		check(a.ID, store.StatsWindowWeek, week)
		// …and expires rows past them.
		purge(store.PurgeParams{MinuteStatsBefore: now.Add(time.Minute), HourStatsBefore: day(9, 0, 0, 0), Limit: 2})
		if st, err := f.s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: a.ID, Window: store.StatsWindowDay, Now: now}); err != nil || st.Attempts() != 0 {
			t.Fatalf("24h after purge: %d attempts, %v", st.Attempts(), err)
		}
		if st, err := f.s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: a.ID, Window: store.StatsWindowWeek, Now: now}); err != nil || st.Attempts() != 6 {
			t.Fatalf("7d after purge: %d attempts (want the 6 of today's hours), %v", st.Attempts(), err)
		}
	})
}
