// Package retry is Herald's retry policy: it decides, after every delivery
// attempt, whether the delivery succeeded, must be retried (and after how
// long) or is dead (moved to the dead-letter queue).
//
// It implements the "retries" and "what is retried" rows of the contract in
// The contract (docs/contract.md):
//
//   - Attempt 1 is sent at once. Before attempt k ≥ 2 Herald waits a random
//     time in [d/2, d] ("equal jitter", AWS Architecture Blog, "Exponential
//     Backoff and Jitter") where d is the (k-1)-th entry of the schedule;
//     the default schedule is 30s, 2m, 8m, 32m, 2h8m, 8h32m, 24h
//     (d = min(24h, 30s × 4^(k-2))), i.e. 8 attempts, about 35 h worst case,
//     then the delivery is dead-lettered.
//   - Network errors, timeouts, 5xx, 408 and 429 are retried. A Retry-After
//     on 429/503 (RFC 9110 §10.2.3) is honoured: the next attempt is never
//     earlier than it says, but it is capped (24 h by default).
//   - Other 4xx answers and 3xx answers (redirects are never followed, see
//     package egress) are retried at most twice, then dead-lettered.
//   - 410 Gone is not retried: the delivery is dead-lettered and the
//     endpoint disabled.
//
// The package is pure: it performs no I/O and keeps no state, so a Policy
// may be shared by any number of goroutines (provided its Rand is safe for
// concurrent use, which the default is).
package retry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// DefaultScheduleText is the default schedule as ParseSchedule reads it
// (the default of `herald serve --retry-schedule`): the upper bounds d of
// the delay before attempts 2..8 (the contract (docs/contract.md),
// "retries": d = min(24h, 30s × 4^(k-2)) for attempt k). With it a
// delivery gets 8 attempts spread over at most 35h22m30s.
const DefaultScheduleText = "30s,2m,8m,32m,2h8m,8h32m,24h"

// DefaultSchedule is DefaultScheduleText parsed.
//
// It must not be modified; [Policy] uses it when its Schedule is empty.
var DefaultSchedule = mustParseSchedule(DefaultScheduleText)

func mustParseSchedule(s string) []time.Duration {
	d, err := ParseSchedule(s)
	if err != nil {
		panic(err)
	}
	return d
}

const (
	// MaxScheduleEntries is the largest number of entries ParseSchedule
	// accepts (so at most 51 attempts per delivery).
	MaxScheduleEntries = 50
	// MaxScheduleEntry is the largest delay ParseSchedule accepts for one
	// entry (the contract's 24 h ceiling).
	MaxScheduleEntry = 24 * time.Hour
	// DefaultMaxRetryAfter is the cap applied to a Retry-After answer when
	// Policy.MaxRetryAfter is zero (docs/contract.md: "capped at 24 h").
	DefaultMaxRetryAfter = 24 * time.Hour
	// DefaultClientErrorRetries is the number of retries allowed after
	// "client error" answers (other 4xx and 3xx) when
	// Policy.ClientErrorRetries is zero (docs/contract.md: "at most 2 retries").
	DefaultClientErrorRetries = 2
)

// OrderRule is the rule of a schedule's order, which ParseSchedule,
// Policy.Validate and app's configuration check name when they refuse a
// delay shorter than the one before it.
const OrderRule = "each delay must be at least the one before it"

// ParseSchedule parses a retry schedule such as "30s,2m,8m": Go durations
// (time.ParseDuration syntax) separated by commas, spaces around entries
// ignored. Every entry must be > 0 and at most 24h, and at least the entry
// before it (OrderRule: equal entries are allowed, a decreasing one is
// taken for a mistake); there must be between 1 and 50 entries.
//
// Errors name the entry (1-based) and the rule that failed, e.g.
//
//	retry schedule entry 2 "x": not a duration
//	retry schedule entry 1 "0s": must be greater than 0
//	retry schedule entry 3 "25h": must be at most 24h
//	retry schedule entry 2 "": empty entry
//	retry schedule entry 2 "1s": each delay must be at least the one before it (1s after 2s)
//	retry schedule: empty
//	retry schedule: 51 entries, at most 50 allowed
func ParseSchedule(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("retry schedule: empty")
	}
	if n := strings.Count(s, ",") + 1; n > MaxScheduleEntries {
		return nil, fmt.Errorf("retry schedule: %d entries, at most %d allowed", n, MaxScheduleEntries)
	}
	parts := strings.Split(s, ",")
	out := make([]time.Duration, 0, len(parts))
	prev := ""
	for i, part := range parts {
		e := strings.TrimSpace(part)
		if e == "" {
			return nil, fmt.Errorf("retry schedule entry %d %q: empty entry", i+1, e)
		}
		d, err := time.ParseDuration(e)
		if err != nil {
			return nil, fmt.Errorf("retry schedule entry %d %q: not a duration", i+1, e)
		}
		if d <= 0 {
			return nil, fmt.Errorf("retry schedule entry %d %q: must be greater than 0", i+1, e)
		}
		if d > MaxScheduleEntry {
			return nil, fmt.Errorf("retry schedule entry %d %q: must be at most 24h", i+1, e)
		}
		if i > 0 && d < out[i-1] {
			return nil, fmt.Errorf("retry schedule entry %d %q: %s (%s after %s)", i+1, e, OrderRule, e, prev)
		}
		out = append(out, d)
		prev = e
	}
	return out, nil
}

// FormatSchedule renders a schedule in the form ParseSchedule accepts, e.g.
// "30s,2m0s,8m0s" (time.Duration.String for each entry). It is used to show
// the running configuration (GET /contract).
func FormatSchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// Policy is the retry policy of the the contract (docs/contract.md). The zero value is the
// default policy: DefaultSchedule, Retry-After capped at 24h, 2 client-error
// retries, math/rand/v2 randomness.
//
// A Policy is a value; it is safe for concurrent use when Rand is (the
// default is).
type Policy struct {
	// Schedule holds the upper bounds d of the delays before attempts
	// 2..len(Schedule)+1, so MaxAttempts = len(Schedule)+1. Empty means
	// DefaultSchedule. Entries should be > 0 and non-decreasing (see
	// Validate).
	Schedule []time.Duration
	// MaxRetryAfter caps how far a Retry-After answer may push the next
	// attempt. Zero or negative means DefaultMaxRetryAfter (24h).
	MaxRetryAfter time.Duration
	// ClientErrorRetries is how many retries are allowed after "client
	// error" answers (4xx other than 408, 410, 429; and every 3xx). Zero
	// means DefaultClientErrorRetries (2, so the 3rd such answer
	// dead-letters); a negative value means none (the 1st such answer
	// dead-letters).
	ClientErrorRetries int
	// Rand returns a uniformly distributed number in [0,1) used for the
	// jitter. Nil means math/rand/v2.Float64. Tests inject a seeded source;
	// results outside [0,1] are clamped. It must be safe for concurrent use
	// if the Policy is shared between goroutines.
	Rand func() float64
}

func (p Policy) schedule() []time.Duration {
	if len(p.Schedule) == 0 {
		return DefaultSchedule
	}
	return p.Schedule
}

func (p Policy) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter <= 0 {
		return DefaultMaxRetryAfter
	}
	return p.MaxRetryAfter
}

func (p Policy) clientErrorRetries() int {
	switch {
	case p.ClientErrorRetries == 0:
		return DefaultClientErrorRetries
	case p.ClientErrorRetries < 0:
		return 0
	}
	return p.ClientErrorRetries
}

// Validate reports whether every Schedule entry is > 0, at most 24h and
// at least the entry before it (OrderRule), and the schedule has at most
// 50 entries: the rules of ParseSchedule, for policies built in code.
func (p Policy) Validate() error {
	s := p.schedule()
	if len(s) > MaxScheduleEntries {
		return fmt.Errorf("retry schedule: %d entries, at most %d allowed", len(s), MaxScheduleEntries)
	}
	for i, d := range s {
		if d <= 0 {
			return fmt.Errorf("retry schedule entry %d %q: must be greater than 0", i+1, d.String())
		}
		if d > MaxScheduleEntry {
			return fmt.Errorf("retry schedule entry %d %q: must be at most 24h", i+1, d.String())
		}
		if i > 0 && d < s[i-1] {
			return fmt.Errorf("retry schedule entry %d %q: %s (%v after %v)", i+1, d.String(), OrderRule, d, s[i-1])
		}
	}
	return nil
}

// MaxAttempts is the number of attempts a delivery gets before it is
// dead-lettered: len(Schedule)+1 (8 with DefaultSchedule).
func (p Policy) MaxAttempts() int {
	return len(p.schedule()) + 1
}

// Delay returns the wait before attempt n (n ≥ 2): a uniformly random
// duration in [d/2, d] ("equal jitter", AWS Architecture Blog, "Exponential
// Backoff and Jitter"; the contract (docs/contract.md), "retries") with d = Schedule[n-2];
// for n beyond the schedule the last entry is used. d/2 is rounded down to
// the nanosecond.
//
// Attempt 1 is sent at once, so Delay returns 0 for n < 2. A non-positive
// schedule entry yields 0.
func (p Policy) Delay(n int) time.Duration {
	if n < 2 {
		return 0
	}
	s := p.schedule()
	i := n - 2
	if i >= len(s) {
		i = len(s) - 1
	}
	d := s[i]
	if d <= 0 {
		return 0
	}
	r := p.rand()
	half := d / 2
	span := d - half // ≥ half; == half+1 for odd d
	j := time.Duration(r * float64(span))
	if j > span { // float rounding on huge spans
		j = span
	}
	return half + j
}

func (p Policy) rand() float64 {
	var r float64
	if p.Rand != nil {
		r = p.Rand()
	} else {
		r = rand.Float64()
	}
	if !(r >= 0) { // also NaN
		return 0
	}
	if r > 1 {
		return 1
	}
	return r
}

// Outcome is what one attempt produced: either an HTTP response (StatusCode
// set, ErrorClass empty) or a failure before or while reading it
// (ErrorClass set; StatusCode may still hold the status of a response whose
// body could not be read within the attempt timeout).
type Outcome struct {
	// StatusCode is the HTTP status code, 0 when no response was received.
	StatusCode int
	// ErrorClass is "" when an HTTP response was received completely; else
	// the class of the failure, e.g. "timeout", "dns",
	// "connection_refused", "connection_reset", "tls", "blocked",
	// "network", "canceled" (see package egress). Any non-empty class is a
	// retryable failure; this includes "blocked" (the destination address
	// was refused by the egress policy), because an operator may fix the
	// allow-list, and the attempts count against MaxAttempts as usual.
	ErrorClass string
	// RetryAfter is the parsed Retry-After header (see ParseRetryAfter); it
	// is only honoured for 429 and 503. 0 means none.
	RetryAfter time.Duration
}

// Verdict is the result of Decide. The zero value is not a valid verdict.
type Verdict int

// The verdicts of Decide.
const (
	// Succeeded: the endpoint answered 2xx; the delivery is done.
	Succeeded Verdict = iota + 1
	// Retry: attempt again after Decision.Delay.
	Retry
	// Dead: no further attempt; the delivery goes to the dead-letter queue.
	Dead
)

// String returns "succeeded", "retry" or "dead" (the delivery state words of
// docs/contract.md where they apply), or "Verdict(n)" for an invalid value.
func (v Verdict) String() string {
	switch v {
	case Succeeded:
		return "succeeded"
	case Retry:
		return "retry"
	case Dead:
		return "dead"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// ErrorClassBlocked is the error class of an attempt the egress policy
// refused before connecting (egress.ClassBlocked).
const ErrorClassBlocked = "blocked"

// Reasons reported in Decision.Reason. They are stable machine-readable
// strings, suitable for metrics labels and logs.
const (
	ReasonSucceeded                   = "2xx"                            // Succeeded: 2xx answer
	ReasonGone                        = "gone"                           // Dead: 410 Gone; endpoint to be disabled
	ReasonAttemptsExhausted           = "attempts_exhausted"             // Dead: retryable failure on the last attempt
	ReasonClientErrorRetriesExhausted = "client_error_retries_exhausted" // Dead: too many other-4xx/3xx answers
	ReasonBlocked                     = "blocked"                        // Dead: the egress policy refused the destination (ErrorClassBlocked)
	ReasonRetryAfter                  = "retry_after"                    // Retry: the delay was set by Retry-After
	ReasonError                       = "error"                          // Retry: no (complete) HTTP response, see Outcome.ErrorClass
	ReasonServerError                 = "5xx"                            // Retry: 5xx answer
	ReasonRequestTimeout              = "408"                            // Retry: 408 Request Timeout
	ReasonTooManyRequests             = "429"                            // Retry: 429 Too Many Requests without a longer Retry-After
	ReasonClientError                 = "client_error"                   // Retry: 4xx other than 408/410/429
	ReasonRedirect                    = "redirect"                       // Retry: 3xx (never followed)
	ReasonUnexpectedStatus            = "unexpected_status"              // Retry: 1xx or a code outside 100..599
)

// Decision is what to do after an attempt.
type Decision struct {
	// Verdict is Succeeded, Retry or Dead.
	Verdict Verdict
	// Delay is the wait before the next attempt when Verdict == Retry
	// (0 otherwise).
	Delay time.Duration
	// DisableEndpoint is true for 410 Gone: the endpoint must be disabled
	// and its owner notified (docs/contract.md, "what is retried").
	DisableEndpoint bool
	// Reason is a short machine-readable reason, one of the Reason*
	// constants.
	Reason string
}

// Decide classifies the outcome o of attempt n (1-based) of a delivery,
// given clientErrors, the number of "client error" answers (4xx other than
// 408/410/429, and 3xx) the delivery has had so far including this one. It
// implements the "what is retried" row of the the contract (docs/contract.md):
//
//   - ErrorClass != "" (network error, timeout, blocked, …): retryable.
//   - 2xx: Succeeded.
//   - 5xx, 408, 429, and odd codes (1xx, outside 100..599): retryable.
//   - 410: Dead with DisableEndpoint, never retried.
//   - other 4xx and 3xx: Retry while clientErrors ≤ ClientErrorRetries and
//     attempts remain, else Dead ("client_error_retries_exhausted").
//
// A retryable outcome is retried after Delay(n+1) while n < MaxAttempts, and
// is Dead ("attempts_exhausted") otherwise. For 429 and 503 with a
// RetryAfter the delay is max(Delay(n+1), min(RetryAfter, MaxRetryAfter)):
// never earlier than the endpoint asked, at most MaxRetryAfter, and never
// shorter than the schedule.
//
// n < 1 is treated as 1 and clientErrors < 1 as 1 for a client-error answer.
func (p Policy) Decide(n int, clientErrors int, o Outcome) Decision {
	if n < 1 {
		n = 1
	}
	code := o.StatusCode
	var reason string
	switch {
	case o.ErrorClass == ErrorClassBlocked:
		// The destination resolves to an address the egress policy
		// refuses: retrying on the schedule cannot help until the DNS (or
		// the policy) changes, which a replay then picks up.
		return Decision{Verdict: Dead, Reason: ReasonBlocked}
	case o.ErrorClass != "":
		reason = ReasonError
	case code >= 200 && code <= 299:
		return Decision{Verdict: Succeeded, Reason: ReasonSucceeded}
	case code == 410:
		return Decision{Verdict: Dead, DisableEndpoint: true, Reason: ReasonGone}
	case code >= 500 && code <= 599:
		reason = ReasonServerError
	case code == 408:
		reason = ReasonRequestTimeout
	case code == 429:
		reason = ReasonTooManyRequests
	case IsClientError(code):
		if clientErrors < 1 {
			clientErrors = 1
		}
		if clientErrors > p.clientErrorRetries() {
			return Decision{Verdict: Dead, Reason: ReasonClientErrorRetriesExhausted}
		}
		if code < 400 {
			reason = ReasonRedirect
		} else {
			reason = ReasonClientError
		}
	default: // 1xx, 0 without an error class, < 100, ≥ 600
		reason = ReasonUnexpectedStatus
	}
	if n >= p.MaxAttempts() {
		return Decision{Verdict: Dead, Reason: ReasonAttemptsExhausted}
	}
	delay := p.Delay(n + 1)
	if o.ErrorClass == "" && (code == 429 || code == 503) && o.RetryAfter > 0 {
		ra := min(o.RetryAfter, p.maxRetryAfter())
		if ra > delay {
			delay, reason = ra, ReasonRetryAfter
		}
	}
	return Decision{Verdict: Retry, Delay: delay, Reason: reason}
}

// IsClientError reports whether an HTTP status counts toward the
// client-error budget (docs/contract.md, "what is retried"): 3xx (never followed)
// and 4xx other than 408 Request Timeout, 410 Gone and 429 Too Many
// Requests. The caller counts such answers and passes the count to Decide.
func IsClientError(status int) bool {
	switch status {
	case 408, 410, 429:
		return false
	}
	return status >= 300 && status <= 499
}

// maxRetryAfterSeconds saturates huge delay-seconds values (2^31 s, about
// 68 years, as RFC 9111 §1.2.2 does for delta-seconds); the policy caps the
// result far below anyway.
const maxRetryAfterSeconds = 1 << 31

// ParseRetryAfter parses a Retry-After header value as defined by RFC 9110
// §10.2.3: either delay-seconds (1*DIGIT, a non-negative decimal integer)
// or an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850
// and asctime forms), which is taken relative to now. Surrounding
// whitespace is ignored.
//
// It returns ok=false for anything else (empty, fractions, "+5", garbage).
// A date in the past yields 0, true; so does a negative integer, which is
// not valid RFC 9110 syntax but is sent by some servers. Values above 2^31
// seconds saturate at 2^31 seconds.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	digits, neg := v, false
	if digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	if digits != "" && allDigits(digits) {
		if neg {
			return 0, true
		}
		var secs int64
		for i := 0; i < len(digits); i++ {
			secs = secs*10 + int64(digits[i]-'0')
			if secs >= maxRetryAfterSeconds {
				secs = maxRetryAfterSeconds
				break
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	if neg {
		return 0, false
	}
	t, err := parseHTTPDate(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// HTTP-date formats of RFC 9110 §5.6.7; only GMT is allowed.
var httpDateLayouts = []string{
	"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate
	"Monday, 02-Jan-06 15:04:05 GMT", // obsolete RFC 850 format
	"Mon Jan _2 15:04:05 2006",       // ANSI C asctime() format
}

func parseHTTPDate(v string) (time.Time, error) {
	var err error
	for _, layout := range httpDateLayouts {
		var t time.Time
		t, err = time.Parse(layout, v)
		if err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}
