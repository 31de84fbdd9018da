package store

import (
	"strconv"
	"time"
)

// The failure-streak disable rule (Completion.DisableAfter and
// DisableMinFailures; docs/operations.md, "Auto-disable and operational
// events") is defined here once. A driver that decides in Go after reading
// the streak its completion updated (SQLite) calls ShouldDisable and
// DisableReason; a driver that decides inside the completion's statement,
// so that the decision stays in its one round trip (PostgreSQL), renders
// the same comparisons and the same reason with StreakDisableSQL and
// StreakReasonSQL, fed with DisableCutoff and the minimum. The conformance
// suite (storetest, "FailureStreakRule") pins both drivers on each side of
// each bound, and the PostgreSQL driver's TestStreakRuleSQLMatchesGo
// compares the SQL renderings with ShouldDisable and DisableReason.
//
// The notices of a failed attempt are defined here too (StreakNotices,
// rendered by StreakFailingSQL and StreakCountAtDisableSQL): a streak that
// disables its endpoint raises endpoint.failing before endpoint.disabled,
// also when --disable-min-failures is below FailingAfter.

// DisableCutoff is the latest streak start that disables an endpoint at
// now when the rule's duration is after: now - after.
func DisableCutoff(now time.Time, after time.Duration) time.Time { return now.Add(-after) }

// ShouldDisable reports whether a failure completed at now disables its
// endpoint: the rule is on (after > 0), the streak began at or before
// DisableCutoff(now, after) (every attempt since streakStart failed for at
// least after), and it counts at least minFailures failed attempts, this
// one included (so one failure after a quiet period does not disable).
// streakStart is the start of the streak's first failed attempt.
func ShouldDisable(streakStart time.Time, failures int, now time.Time, after time.Duration, minFailures int) bool {
	return after > 0 && !streakStart.After(DisableCutoff(now, after)) && failures >= minFailures
}

// StreakNotices returns the notice types a failed attempt raises, in
// outbox order, given failures, the streak's failed attempts with this one,
// and disables, whether this attempt disables its endpoint (ShouldDisable
// holds and the endpoint was enabled): NoticeEndpointFailing at the
// FailingAfter-th failure, or with a disable of a streak shorter than that
// (DisableMinFailures 1 or 2: no endpoint.failing was raised for it yet),
// then NoticeEndpointDisabled when it disables. So every disable by the
// rule follows exactly one endpoint.failing of its streak. nil when it
// raises none.
func StreakNotices(failures int, disables bool) []string {
	var out []string
	if failures == FailingAfter || disables && failures < FailingAfter {
		out = append(out, NoticeEndpointFailing)
	}
	if disables {
		out = append(out, NoticeEndpointDisabled)
	}
	return out
}

// StreakCountAtDisable is the failure count a disabling streak of failures
// keeps: at least FailingAfter, so that the streak counts as one that
// raised endpoint.failing (StreakNotices raised it with the disable) — the
// failures of attempts still in flight never reach FailingAfter again (no
// second endpoint.failing), and an enable followed by a success raises
// endpoint.recovered.
func StreakCountAtDisable(failures int) int { return max(failures, FailingAfter) }

// StreakFailingSQL renders StreakNotices' test for NoticeEndpointFailing in
// PostgreSQL over the integer expression count (the streak's failures,
// this one included) and the boolean condition disables, e.g.
// StreakFailingSQL("failure_count", "state = 'enabled' AND "+StreakDisableSQL(…)).
func StreakFailingSQL(count, disables string) string {
	fa := strconv.Itoa(FailingAfter)
	return "(" + count + " = " + fa + " OR (" + count + " < " + fa + " AND " + disables + "))"
}

// StreakCountAtDisableSQL renders StreakCountAtDisable in PostgreSQL over
// the integer expression count.
func StreakCountAtDisableSQL(count string) string {
	return "GREATEST(" + count + ", " + strconv.Itoa(FailingAfter) + ")"
}

// StreakDisableSQL renders ShouldDisable's two comparisons (the rule being
// on is the caller's test) as a SQL condition over the column (or
// expression) since, holding the streak start, and count, holding its
// failures, against the parameters cutoff (DisableCutoff) and min
// (minFailures), e.g. StreakDisableSQL("failing_since", "failure_count",
// "$5", "$6::integer").
func StreakDisableSQL(since, count, cutoff, min string) string {
	return since + " <= " + cutoff + " AND " + count + " >= " + min
}

// AttemptSummary describes an attempt in a disable reason: "status 503"
// when the receiver answered, else "error <class>" (Attempt.Error).
func AttemptSummary(a Attempt) string {
	if a.StatusCode != 0 {
		return "status " + strconv.Itoa(a.StatusCode)
	}
	return "error " + a.Error
}

// disableReasonPrefix and disableReasonInfix frame the streak start and the
// last attempt in the reason of a disable.
const (
	disableReasonPrefix = "every attempt failed since "
	disableReasonInfix  = " (last: "
)

// DisableReason is the state_reason of an endpoint the rule disabled:
// "every attempt failed since <streakStart, RFC 3339 in UTC, whole
// seconds> (last: <AttemptSummary>)".
func DisableReason(streakStart time.Time, last Attempt) string {
	return disableReasonPrefix + streakStart.UTC().Format(time.RFC3339) + disableReasonInfix + AttemptSummary(last) + ")"
}

// StreakReasonSQL renders DisableReason in PostgreSQL over the timestamptz
// expression since and the text parameter summary (AttemptSummary).
func StreakReasonSQL(since, summary string) string {
	return `'` + disableReasonPrefix + `' || to_char(` + since + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '` +
		disableReasonInfix + `' || ` + summary + ` || ')'`
}
