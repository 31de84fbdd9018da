package storetest

import (
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// streakRule pins the one rule of store.Completion.DisableAfter on every
// driver, on both sides of each bound: a failure disables the endpoint when
// Now - FailingSince >= DisableAfter (FailingSince: the start of the
// streak's first failed attempt) and the streak counts at least
// DisableMinFailures failed attempts, this one included; the reason is
// exactly "every attempt failed since <FailingSince, RFC 3339 in UTC, whole
// seconds> (last: status N | error CLASS)".
func (s suite) streakRule(t *testing.T) {
	const after = time.Hour
	since := at(500 * time.Millisecond) // the fraction is not shown in the reason
	for _, tc := range []struct {
		name     string
		failures int           // failed attempts in the streak, the last one included
		min      int           // DisableMinFailures
		elapsed  time.Duration // last completion's Now - since
		status   int
		errClass string
		reason   string // "" = stays enabled
	}{
		{"ExactlyDisableAfter", 3, 3, after, 503, "", "every attempt failed since 2026-01-02T03:04:05Z (last: status 503)"},
		{"JustUnderDisableAfter", 3, 3, after - time.Microsecond, 503, "", ""},
		{"WellPastDisableAfter", 3, 3, 100 * after, 0, "timeout", "every attempt failed since 2026-01-02T03:04:05Z (last: error timeout)"},
		{"ExactlyMinFailures", 4, 4, 2 * after, 0, "connection_refused", "every attempt failed since 2026-01-02T03:04:05Z (last: error connection_refused)"},
		{"OneUnderMinFailures", 3, 4, 2 * after, 503, "", ""},
		{"NoMinimumOneFailure", 1, 0, after, 500, "", "every attempt failed since 2026-01-02T03:04:05Z (last: status 500)"},
		{"NoMinimumOneFailureUnder", 1, 0, after - time.Microsecond, 500, "", ""},
	} {
		s.run(t, tc.name, func(t *testing.T, f *fixture) {
			e := f.endpoint("acme")
			for range tc.failures {
				f.publish("acme", "file.created", base)
			}
			for i := range tc.failures {
				started := since.Add(time.Duration(i) * time.Second)
				now := started.Add(time.Second)
				if i == tc.failures-1 {
					now = since.Add(tc.elapsed)
					if tc.failures > 1 {
						started = now.Add(-time.Second)
					}
				}
				c := f.claimFirst(started)
				cp := failure(c, started, now, at(1000*time.Hour), tc.status, tc.errClass)
				cp.DisableAfter, cp.DisableMinFailures = after, tc.min
				f.complete(cp)
			}
			ep := f.getEndpoint(e.ID)
			if !ep.FailingSince.Equal(since) {
				t.Errorf("FailingSince = %v, want %v", ep.FailingSince, since)
			}
			want := store.EndpointEnabled
			if tc.reason != "" {
				want = store.EndpointDisabled
			}
			if ep.State != want || ep.StateReason != tc.reason {
				t.Errorf("%d failures, min %d, Now - FailingSince = %v (DisableAfter %v): state %s, reason %q; want %s, %q",
					tc.failures, tc.min, tc.elapsed, after, ep.State, ep.StateReason, want, tc.reason)
			}
		})
	}
}
