package store

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Endpoint health rollups (GET /v1/endpoints/{id}/stats).
//
// Every completion batch (CompleteDeliveries) also adds its attempts to
// per-endpoint counters, in the same transaction (SQLite) or round trip
// (PostgreSQL), in two granularities: one row per endpoint per minute and
// one per endpoint per hour (table endpoint_stats, span 'm' or 'h'). A
// window is then read from at most 1,440 minute rows (1h, 24h) or 168 hour
// rows (7d) of one endpoint, whatever the number of attempts: the cost of
// the stats does not grow with history. Attempts are counted in the bucket
// of their start time (Attempt.StartedAt).

// Stats windows (the window query parameter).
const (
	StatsWindowHour  = "1h"
	StatsWindowDay   = "24h"
	StatsWindowWeek  = "7d"
	statsSpanMinute  = "m"
	statsSpanHour    = "h"
	statsMinuteLimit = 24 * time.Hour
)

// StatsWindows lists the allowed windows, shortest first.
var StatsWindows = []string{StatsWindowHour, StatsWindowDay, StatsWindowWeek}

// StatsRange is the span and the buckets a window reads at now: the minute
// buckets of the last 60 (1h) or 1,440 (24h) minutes, the current one
// included, or the hour buckets of the last 168 hours (7d). So a window
// reaches back one full window from the start of the current bucket: its
// edge is exact to the minute (1h, 24h) or to the hour (7d). ErrInvalid for
// any other window.
func StatsRange(window string, now time.Time) (span string, from time.Time, err error) {
	switch window {
	case StatsWindowHour:
		return statsSpanMinute, now.UTC().Truncate(time.Minute).Add(-59 * time.Minute), nil
	case StatsWindowDay:
		return statsSpanMinute, now.UTC().Truncate(time.Minute).Add(-1439 * time.Minute), nil
	case StatsWindowWeek:
		return statsSpanHour, now.UTC().Truncate(time.Hour).Add(-167 * time.Hour), nil
	}
	return "", time.Time{}, Errorf(CodeInvalid, "window %q: allowed values are %s", window, strings.Join(StatsWindows, ", "))
}

// StatsHorizons are how long the rollups are kept (Purge, with
// PurgeParams.Now): minute rows 25 hours (the 24h window and an hour of
// slack), hour rows 8 days (the 7d window and a day of slack).
const (
	StatsMinuteHorizon = statsMinuteLimit + time.Hour
	StatsHourHorizon   = 8 * 24 * time.Hour
)

// FailureClasses are the classes failed attempts are counted by: the
// attempt error classes of docs/contract.md ("Attempt error classes"),
// "redirect" for a 3xx, "http_status" for any other non-2xx answer (its
// family is in the status families), and "other" for a class Herald does
// not know.
var FailureClasses = []string{"timeout", "dns", "connection_refused", "connection_reset", "tls", "blocked", "network", "canceled", "redirect", "http_status", "other"}

// StatusFamilies are the families attempts are counted by; "none" is an
// attempt without an HTTP answer.
var StatusFamilies = []string{"2xx", "3xx", "4xx", "5xx", "none"}

// DurationBounds are the upper bounds (inclusive) of the attempt duration
// histogram kept in every rollup; a last bucket counts the attempts longer
// than the last bound. A percentile is answered with the upper bound of the
// bucket holding it (the last bound for the overflow bucket), so it is never
// below the true value and at most one bucket above: within 3× (the
// 10 s → 30 s step; 2.5× elsewhere), and exact to the bucket's bound (5 ms, 10 ms, 25 ms, …).
var DurationBounds = []time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second, 60 * time.Second,
}

// StatsCounters are the counter columns of a rollup row, in a fixed order:
// attempts, successes, failures, dead_letters, duration_sum_us, then
// fail_<class> for each FailureClasses, status_<family> for each
// StatusFamilies (status_2xx…), and dur_<i> for each histogram bucket
// (len(DurationBounds)+1). Drivers build their SQL from this list, so the
// two schemas and the code cannot disagree.
var StatsCounters = func() []string {
	cols := []string{"attempts", "successes", "failures", "dead_letters", "duration_sum_us"}
	for _, c := range FailureClasses {
		cols = append(cols, "fail_"+c)
	}
	for _, f := range StatusFamilies {
		cols = append(cols, "status_"+f)
	}
	for i := range len(DurationBounds) + 1 {
		cols = append(cols, fmt.Sprintf("dur_%d", i))
	}
	return cols
}()

// Positions of the fixed counters in StatsCounters.
const (
	statsAttempts = iota
	statsSuccesses
	statsFailures
	statsDeadLetters
	statsDurationSum
	statsFirstClass
)

func statsFirstFamily() int { return statsFirstClass + len(FailureClasses) }
func statsFirstDuration() int {
	return statsFirstFamily() + len(StatusFamilies)
}

// StatsRollup is what one completion batch adds to one bucket of one
// endpoint: Counters in StatsCounters order; LastSuccessAt and
// LastFailureAt are the latest attempt starts of each kind (zero: none).
type StatsRollup struct {
	EndpointID    string
	Span          string // "m" (minute) or "h" (hour)
	Start         time.Time
	Counters      []int64
	LastSuccessAt time.Time
	LastFailureAt time.Time
}

// Rollups sums a completion batch into rollup rows: for every attempted
// completion with an EndpointID (deferrals made no attempt), one minute
// row and one hour row per endpoint and bucket. A completion to state
// succeeded is a success, any other a failure; one to state dead is also
// a dead letter. Rows come sorted by endpoint, span and start (the lock
// order of the upserts).
func Rollups(cs []Completion) []StatsRollup {
	type key struct {
		ep, span string
		start    int64
	}
	rows := map[key]*StatsRollup{}
	for _, c := range cs {
		if c.Deferred || c.EndpointID == "" {
			continue
		}
		at := c.Attempt.StartedAt.UTC()
		for _, sp := range []struct {
			span string
			d    time.Duration
		}{{statsSpanMinute, time.Minute}, {statsSpanHour, time.Hour}} {
			start := at.Truncate(sp.d)
			k := key{c.EndpointID, sp.span, start.UnixMicro()}
			r := rows[k]
			if r == nil {
				r = &StatsRollup{EndpointID: c.EndpointID, Span: sp.span, Start: start, Counters: make([]int64, len(StatsCounters))}
				rows[k] = r
			}
			r.add(c, at)
		}
	}
	out := make([]StatsRollup, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b StatsRollup) int {
		if c := strings.Compare(a.EndpointID, b.EndpointID); c != 0 {
			return c
		}
		if c := strings.Compare(a.Span, b.Span); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
	return out
}

// PoisonedRollups are the rollup rows of the deliveries a claim at now
// dead-lettered without an attempt (ps: store.PoisonedRows; those not
// written and those whose endpoint is not known left out): each counts as
// a dead letter of its endpoint in the buckets of now, as a dead letter
// after an attempt does in the attempt's, with no attempt and no failure.
// Sorted as Rollups.
func PoisonedRollups(ps []PoisonedDelivery, now time.Time) []StatsRollup {
	var out []StatsRollup
	for _, pd := range ps {
		if pd.Unwritten || pd.EndpointID == "" {
			continue
		}
		i := slices.IndexFunc(out, func(r StatsRollup) bool { return r.EndpointID == pd.EndpointID })
		if i < 0 {
			for _, sp := range []struct {
				span string
				d    time.Duration
			}{{statsSpanHour, time.Hour}, {statsSpanMinute, time.Minute}} {
				out = append(out, StatsRollup{EndpointID: pd.EndpointID, Span: sp.span, Start: now.UTC().Truncate(sp.d), Counters: make([]int64, len(StatsCounters))})
			}
			i = len(out) - 2
		}
		out[i].Counters[statsDeadLetters]++
		out[i+1].Counters[statsDeadLetters]++
	}
	slices.SortFunc(out, func(a, b StatsRollup) int {
		if c := strings.Compare(a.EndpointID, b.EndpointID); c != 0 {
			return c
		}
		return strings.Compare(a.Span, b.Span)
	})
	return out
}

func (r *StatsRollup) add(c Completion, at time.Time) {
	a := c.Attempt
	r.Counters[statsAttempts]++
	r.Counters[statsDurationSum] += a.Duration.Microseconds()
	if c.State == DeliverySucceeded {
		r.Counters[statsSuccesses]++
		if at.After(r.LastSuccessAt) {
			r.LastSuccessAt = at
		}
	} else {
		r.Counters[statsFailures]++
		r.Counters[statsFirstClass+slices.Index(FailureClasses, FailureClass(a))]++
		if at.After(r.LastFailureAt) {
			r.LastFailureAt = at
		}
	}
	if c.State == DeliveryDead {
		r.Counters[statsDeadLetters]++
	}
	r.Counters[statsFirstFamily()+slices.Index(StatusFamilies, StatusFamily(a.StatusCode))]++
	r.Counters[statsFirstDuration()+DurationBucket(a.Duration)]++
}

// FailureClass is the class a failed attempt is counted under
// (FailureClasses).
func FailureClass(a Attempt) string {
	switch {
	case a.Error != "" && slices.Contains(FailureClasses, a.Error) && a.Error != "http_status" && a.Error != "other":
		return a.Error
	case a.Error == "" && a.StatusCode != 0:
		return "http_status"
	}
	return "other"
}

// StatusFamily is "2xx" … "5xx" for an HTTP status, "none" for 0 (no
// answer) or a code outside 200–599.
func StatusFamily(code int) string {
	if code >= 200 && code <= 599 {
		return StatusFamilies[code/100-2]
	}
	return "none"
}

// DurationBucket is the index of the histogram bucket of d: the first bound
// d does not exceed, or len(DurationBounds) for the overflow bucket.
func DurationBucket(d time.Duration) int {
	i, _ := slices.BinarySearch(DurationBounds, d)
	return i
}

// EndpointStats are an endpoint's figures over one window, summed from its
// rollups (StatsRange).
type EndpointStats struct {
	EndpointID string
	Window     string
	From, To   time.Time // the window: [From, To)
	// Counters in StatsCounters order.
	Counters []int64
	// LastSuccessAt and LastFailureAt are the latest attempt start of each
	// kind within the rollups kept (up to StatsHourHorizon back), whatever
	// the window; zero when none.
	LastSuccessAt, LastFailureAt time.Time
}

// Attempts, Successes, Failures and DeadLetters are the window's counts.
func (s EndpointStats) Attempts() int64    { return s.counter(statsAttempts) }
func (s EndpointStats) Successes() int64   { return s.counter(statsSuccesses) }
func (s EndpointStats) Failures() int64    { return s.counter(statsFailures) }
func (s EndpointStats) DeadLetters() int64 { return s.counter(statsDeadLetters) }

func (s EndpointStats) counter(i int) int64 {
	if i < len(s.Counters) {
		return s.Counters[i]
	}
	return 0
}

// SuccessRate is Successes/Attempts in [0, 1]; ok is false without
// attempts.
func (s EndpointStats) SuccessRate() (rate float64, ok bool) {
	if s.Attempts() == 0 {
		return 0, false
	}
	return float64(s.Successes()) / float64(s.Attempts()), true
}

// FailuresByClass counts failures per FailureClasses entry (every class
// present, 0 included).
func (s EndpointStats) FailuresByClass() map[string]int64 {
	out := make(map[string]int64, len(FailureClasses))
	for i, c := range FailureClasses {
		out[c] = s.counter(statsFirstClass + i)
	}
	return out
}

// AttemptsByStatusFamily counts attempts per StatusFamilies entry.
func (s EndpointStats) AttemptsByStatusFamily() map[string]int64 {
	out := make(map[string]int64, len(StatusFamilies))
	for i, f := range StatusFamilies {
		out[f] = s.counter(statsFirstFamily() + i)
	}
	return out
}

// Histogram is the attempt duration histogram: counts per bucket
// (DurationBounds, then the overflow bucket).
func (s EndpointStats) Histogram() []int64 {
	out := make([]int64, len(DurationBounds)+1)
	for i := range out {
		out[i] = s.counter(statsFirstDuration() + i)
	}
	return out
}

// Percentile is the q-quantile (0 < q ≤ 1) of the attempt durations: the
// upper bound of the histogram bucket holding the ceil(q·n)-th shortest
// attempt (DurationBounds explains the precision); ok is false without
// attempts.
func (s EndpointStats) Percentile(q float64) (d time.Duration, ok bool) {
	h := s.Histogram()
	var n int64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0, false
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for i, c := range h {
		seen += c
		if seen >= rank {
			return DurationBounds[min(i, len(DurationBounds)-1)], true
		}
	}
	return DurationBounds[len(DurationBounds)-1], true
}

// EndpointStatsParams reads one endpoint's stats over Window at Now.
type EndpointStatsParams struct {
	EndpointID string
	Window     string // StatsWindows
	Now        time.Time
}

// MeanDuration is the exact mean attempt duration (from the rollups' sum of
// durations); ok is false without attempts.
func (s EndpointStats) MeanDuration() (time.Duration, bool) {
	if s.Attempts() == 0 {
		return 0, false
	}
	return time.Duration(s.counter(statsDurationSum)/s.Attempts()) * time.Microsecond, true
}
