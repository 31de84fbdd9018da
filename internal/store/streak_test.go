package store

import (
	"slices"
	"testing"
	"time"
)

// TestShouldDisable: each side of each bound of the disable rule, and the
// rule off.
func TestShouldDisable(t *testing.T) {
	now := time.Date(2026, 1, 2, 4, 4, 5, 0, time.UTC)
	const after = time.Hour
	for _, c := range []struct {
		name     string
		elapsed  time.Duration // now - streak start
		failures int
		min      int
		after    time.Duration
		want     bool
	}{
		{"exactly after", after, 3, 3, after, true},
		{"just under after", after - time.Microsecond, 3, 3, after, false},
		{"well past after", 100 * after, 3, 3, after, true},
		{"one under the minimum", 2 * after, 2, 3, after, false},
		{"no minimum, one failure", after, 1, 0, after, true},
		{"rule off", 100 * after, 100, 0, 0, false},
		{"rule negative", 100 * after, 100, 0, -time.Second, false},
	} {
		if got := ShouldDisable(now.Add(-c.elapsed), c.failures, now, c.after, c.min); got != c.want {
			t.Errorf("%s: ShouldDisable = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDisableReason(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		a    Attempt
		want string
	}{
		{Attempt{StatusCode: 503}, "every attempt failed since 2026-01-02T02:04:05Z (last: status 503)"},
		{Attempt{Error: "timeout"}, "every attempt failed since 2026-01-02T02:04:05Z (last: error timeout)"},
	} {
		if got := DisableReason(since, c.a); got != c.want {
			t.Errorf("DisableReason = %q, want %q", got, c.want)
		}
	}
}

// TestStreakNotices: a failure raises endpoint.failing at the
// FailingAfter-th failure, or with a disable of a shorter streak (none was
// raised for it yet), and endpoint.disabled after it when it disables; a
// disable leaves the count at FailingAfter at least.
func TestStreakNotices(t *testing.T) {
	failing, disabled := NoticeEndpointFailing, NoticeEndpointDisabled
	for _, c := range []struct {
		failures int
		disables bool
		want     []string
		count    int // StreakCountAtDisable
	}{
		{1, false, nil, FailingAfter},
		{1, true, []string{failing, disabled}, FailingAfter},
		{FailingAfter - 1, false, nil, FailingAfter},
		{FailingAfter - 1, true, []string{failing, disabled}, FailingAfter},
		{FailingAfter, false, []string{failing}, FailingAfter},
		{FailingAfter, true, []string{failing, disabled}, FailingAfter},
		{FailingAfter + 1, false, nil, FailingAfter + 1},
		{FailingAfter + 1, true, []string{disabled}, FailingAfter + 1}, // endpoint.failing came at FailingAfter
	} {
		if got := StreakNotices(c.failures, c.disables); !slices.Equal(got, c.want) {
			t.Errorf("StreakNotices(%d, %v) = %v, want %v", c.failures, c.disables, got, c.want)
		}
		if got := StreakCountAtDisable(c.failures); got != c.count {
			t.Errorf("StreakCountAtDisable(%d) = %d, want %d", c.failures, got, c.count)
		}
	}
}
