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
