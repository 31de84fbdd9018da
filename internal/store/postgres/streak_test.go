package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestStreakRuleSQLMatchesGo: the SQL rendering of the disable rule that
// the completion runs (store.StreakDisableSQL, store.StreakReasonSQL)
// answers as store.ShouldDisable and store.DisableReason around each bound.
func TestStreakRuleSQLMatchesGo(t *testing.T) {
	conn := rawConn(t, baseURL(t))
	q := "SELECT " + store.StreakDisableSQL("$1::timestamptz", "$2::integer", "$3::timestamptz", "$4::integer") +
		", " + store.StreakReasonSQL("$1::timestamptz", "$5::text")
	now := time.Date(2026, 1, 2, 4, 4, 5, 250_000_000, time.UTC)
	const after = time.Hour
	n := 0
	for _, elapsed := range []time.Duration{after - time.Microsecond, after, after + time.Microsecond, 100 * after} {
		for failures := 1; failures <= 5; failures++ {
			for min := 0; min <= 4; min++ {
				for _, a := range []store.Attempt{{StatusCode: 503}, {Error: "connection_refused"}} {
					since := now.Add(-elapsed)
					var got bool
					var reason string
					if err := conn.QueryRow(t.Context(), q, since, failures, store.DisableCutoff(now, after), min, store.AttemptSummary(a)).Scan(&got, &reason); err != nil {
						t.Fatal(err)
					}
					if want := store.ShouldDisable(since, failures, now, after, min); got != want {
						t.Errorf("elapsed %v, %d failures, min %d: SQL %v, Go %v", elapsed, failures, min, got, want)
					}
					if want := store.DisableReason(since, a); reason != want {
						t.Errorf("reason: SQL %q, Go %q", reason, want)
					}
					n++
				}
			}
		}
	}
	if n != 200 {
		t.Fatalf("checked %d cases", n)
	}
}

// TestStreakNoticesSQLMatchesGo: the SQL rendering of the failing notice's
// test and of the count a disable keeps (store.StreakFailingSQL,
// store.StreakCountAtDisableSQL) answer as store.StreakNotices and
// store.StreakCountAtDisable, for streaks on each side of
// store.FailingAfter, disabling or not.
func TestStreakNoticesSQLMatchesGo(t *testing.T) {
	conn := rawConn(t, baseURL(t))
	q := "SELECT " + store.StreakFailingSQL("$1::integer", "$2::boolean") + ", " + store.StreakCountAtDisableSQL("$1::integer")
	n := 0
	for failures := 1; failures <= store.FailingAfter+2; failures++ {
		for _, disables := range []bool{false, true} {
			var failing bool
			var count int
			if err := conn.QueryRow(t.Context(), q, failures, disables).Scan(&failing, &count); err != nil {
				t.Fatal(err)
			}
			if want := slices.Contains(store.StreakNotices(failures, disables), store.NoticeEndpointFailing); failing != want {
				t.Errorf("%d failures, disables %v: SQL raises endpoint.failing %v, Go %v", failures, disables, failing, want)
			}
			if want := store.StreakCountAtDisable(failures); count != want {
				t.Errorf("%d failures: SQL keeps %d, Go %d", failures, count, want)
			}
			n++
		}
	}
	if n != 2*(store.FailingAfter+2) {
		t.Fatalf("checked %d cases", n)
	}
}
