package retry

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestDefaultSchedule(t *testing.T) {
	// docs/contract.md: d = min(24h, 30s × 4^(k-2)) for k = 2..8.
	if got, want := len(DefaultSchedule), 7; got != want {
		t.Fatalf("len(DefaultSchedule) = %d, want %d", got, want)
	}
	for k := 2; k <= 8; k++ {
		want := time.Duration(float64(30*time.Second) * math.Pow(4, float64(k-2)))
		want = min(want, 24*time.Hour)
		if got := DefaultSchedule[k-2]; got != want {
			t.Errorf("DefaultSchedule[attempt %d] = %v, want %v", k, got, want)
		}
	}
	var total time.Duration
	for _, d := range DefaultSchedule {
		total += d
	}
	if want := 35*time.Hour + 22*time.Minute + 30*time.Second; total != want {
		t.Errorf("worst case total = %v, want %v", total, want)
	}
	if got := (Policy{}).MaxAttempts(); got != 8 {
		t.Errorf("default MaxAttempts = %d, want 8", got)
	}
	if got, want := FormatSchedule(DefaultSchedule), "30s,2m0s,8m0s,32m0s,2h8m0s,8h32m0s,24h0m0s"; got != want {
		t.Errorf("FormatSchedule = %q, want %q", got, want)
	}
	s, err := ParseSchedule(FormatSchedule(DefaultSchedule))
	if err != nil || FormatSchedule(s) != FormatSchedule(DefaultSchedule) {
		t.Errorf("round trip: %v, %v", s, err)
	}
}

func TestParseSchedule(t *testing.T) {
	good := []struct {
		in   string
		want []time.Duration
	}{
		{"30s,2m,8m", []time.Duration{30 * time.Second, 2 * time.Minute, 8 * time.Minute}},
		{"30s,2m,8m,32m,2h8m,8h32m,24h", DefaultSchedule},
		{"1s", []time.Duration{time.Second}},
		{" 500ms , 1s ", []time.Duration{500 * time.Millisecond, time.Second}},
		{"1s,1s,2s,2s", []time.Duration{time.Second, time.Second, 2 * time.Second, 2 * time.Second}}, // equal delays: allowed
		{"1h30m", []time.Duration{90 * time.Minute}},
		{"24h", []time.Duration{24 * time.Hour}},
		{strings.Repeat("1s,", 49) + "1s", nil}, // 50 entries
	}
	for _, tc := range good {
		got, err := ParseSchedule(tc.in)
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", tc.in, err)
			continue
		}
		if tc.want == nil {
			if len(got) != 50 {
				t.Errorf("ParseSchedule(%q): %d entries, want 50", tc.in, len(got))
			}
			continue
		}
		if FormatSchedule(got) != FormatSchedule(tc.want) {
			t.Errorf("ParseSchedule(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}

	bad := []struct{ in, want string }{
		{"", `retry schedule: empty`},
		{"   ", `retry schedule: empty`},
		{"30s,x", `retry schedule entry 2 "x": not a duration`},
		{"30", `retry schedule entry 1 "30": not a duration`},
		{"30s,2m,1d", `retry schedule entry 3 "1d": not a duration`},
		{"0s", `retry schedule entry 1 "0s": must be greater than 0`},
		{"1s,-5s", `retry schedule entry 2 "-5s": must be greater than 0`},
		{"25h", `retry schedule entry 1 "25h": must be at most 24h`},
		{"1s,24h0m0.000000001s", `retry schedule entry 2 "24h0m0.000000001s": must be at most 24h`},
		{"1s,,2s", `retry schedule entry 2 "": empty entry`},
		{"1s,", `retry schedule entry 2 "": empty entry`},
		{"9999999999999h", `retry schedule entry 1 "9999999999999h": not a duration`},
		{"2s,1s", `retry schedule entry 2 "1s": each delay must be at least the one before it (1s after 2s)`},
		{" 1s , 500ms ", `retry schedule entry 2 "500ms": each delay must be at least the one before it (500ms after 1s)`},
		{"30s,2m,1m30s,8m", `retry schedule entry 3 "1m30s": each delay must be at least the one before it (1m30s after 2m)`},
		{strings.Repeat("1s,", 50) + "1s", `retry schedule: 51 entries, at most 50 allowed`},
		{strings.Repeat(",", 1000), `retry schedule: 1001 entries, at most 50 allowed`},
	}
	for _, tc := range bad {
		got, err := ParseSchedule(tc.in)
		if err == nil {
			t.Errorf("ParseSchedule(%q) = %v, want error %q", tc.in, got, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("ParseSchedule(%q) error = %q, want %q", tc.in, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Policy{}).Validate(); err != nil {
		t.Errorf("default policy: %v", err)
	}
	if err := (Policy{Schedule: []time.Duration{time.Second, 0}}).Validate(); err == nil || err.Error() != `retry schedule entry 2 "0s": must be greater than 0` {
		t.Errorf("zero entry: %v", err)
	}
	if err := (Policy{Schedule: []time.Duration{25 * time.Hour}}).Validate(); err == nil || err.Error() != `retry schedule entry 1 "25h0m0s": must be at most 24h` {
		t.Errorf("25h entry: %v", err)
	}
	if err := (Policy{Schedule: []time.Duration{2 * time.Second, time.Second}}).Validate(); err == nil || err.Error() != `retry schedule entry 2 "1s": each delay must be at least the one before it (1s after 2s)` {
		t.Errorf("decreasing entries: %v", err)
	}
	if err := (Policy{Schedule: []time.Duration{time.Second, time.Second}}).Validate(); err != nil {
		t.Errorf("equal entries: %v", err)
	}
	if err := (Policy{Schedule: make([]time.Duration, 51)}).Validate(); err == nil || err.Error() != `retry schedule: 51 entries, at most 50 allowed` {
		t.Errorf("51 entries: %v", err)
	}
}

// fixed returns a Rand that always yields r.
func fixed(r float64) func() float64 { return func() float64 { return r } }

func TestDelayBounds(t *testing.T) {
	p := Policy{Rand: fixed(0)}
	if got := p.Delay(2); got != 15*time.Second {
		t.Errorf("Delay(2) with r=0 = %v, want 15s", got)
	}
	p.Rand = fixed(math.Nextafter(1, 0))
	if got := p.Delay(2); got < 30*time.Second-time.Microsecond || got > 30*time.Second {
		t.Errorf("Delay(2) with r→1 = %v, want ≈30s", got)
	}
	p.Rand = fixed(0.5)
	if got := p.Delay(3); got != 90*time.Second {
		t.Errorf("Delay(3) with r=0.5 = %v, want 1m30s", got)
	}
	// beyond the schedule: the last entry
	p.Rand = fixed(0)
	for _, n := range []int{8, 9, 100, math.MaxInt} {
		if got := p.Delay(n); got != 12*time.Hour {
			t.Errorf("Delay(%d) with r=0 = %v, want 12h", n, got)
		}
	}
	// attempt 1 (and nonsense) is immediate
	for _, n := range []int{1, 0, -1, math.MinInt} {
		if got := p.Delay(n); got != 0 {
			t.Errorf("Delay(%d) = %v, want 0", n, got)
		}
	}
	// misbehaving Rand is clamped
	for _, r := range []float64{-1, 2, math.NaN(), math.Inf(1), math.Inf(-1)} {
		p.Rand = fixed(r)
		if got := p.Delay(2); got < 15*time.Second || got > 30*time.Second {
			t.Errorf("Delay(2) with r=%v = %v, outside [15s,30s]", r, got)
		}
	}
	// odd and tiny entries
	p = Policy{Schedule: []time.Duration{1, 3}, Rand: fixed(math.Nextafter(1, 0))}
	if got := p.Delay(2); got < 0 || got > 1 {
		t.Errorf("Delay with d=1ns = %v", got)
	}
	if got := p.Delay(3); got < 1 || got > 3 {
		t.Errorf("Delay with d=3ns = %v", got)
	}
	p = Policy{Schedule: []time.Duration{-time.Second}}
	if got := p.Delay(2); got != 0 {
		t.Errorf("Delay with negative entry = %v, want 0", got)
	}
}

// TestDelayProperty: for every attempt number 2..MaxAttempts (and beyond)
// and many random draws every delay lies in [d/2, d], and the delays are
// spread over the whole range.
func TestDelayProperty(t *testing.T) {
	schedules := [][]time.Duration{
		DefaultSchedule,
		{time.Second, time.Second, 3 * time.Second},
		{24 * time.Hour, time.Minute}, // decreasing is allowed
		{999 * time.Millisecond},
	}
	for si, sched := range schedules {
		rng := rand.New(rand.NewPCG(uint64(si), 0x4e52414c44)) // seeded: reproducible
		p := Policy{Schedule: sched, Rand: rng.Float64}
		for n := 2; n <= p.MaxAttempts()+3; n++ {
			d := sched[min(n-2, len(sched)-1)]
			lo, hi := d/2, d
			q1, q3 := lo+(hi-lo)/4, hi-(hi-lo)/4
			const draws = 1000
			seen := make(map[time.Duration]bool, draws)
			var lowQ, highQ int
			for range draws {
				got := p.Delay(n)
				if got < lo || got > hi {
					t.Fatalf("schedule %d attempt %d: delay %v outside [%v, %v]", si, n, got, lo, hi)
				}
				seen[got] = true
				if got < q1 {
					lowQ++
				}
				if got > q3 {
					highQ++
				}
			}
			if len(seen) < 500 {
				t.Errorf("schedule %d attempt %d: only %d distinct delays in %d draws", si, n, len(seen), draws)
			}
			// Uniform: each quarter expects 250 hits; 150 is > 7 standard deviations away.
			if lowQ < 150 || highQ < 150 {
				t.Errorf("schedule %d attempt %d: lower quarter hit %d times, upper quarter %d times (of %d)", si, n, lowQ, highQ, draws)
			}
		}
	}
}

func TestDelayDefaultRand(t *testing.T) {
	p := Policy{}
	seen := map[time.Duration]bool{}
	for range 100 {
		d := p.Delay(2)
		if d < 15*time.Second || d > 30*time.Second {
			t.Fatalf("Delay(2) = %v outside [15s,30s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("default Rand: only %d distinct delays in 100 draws", len(seen))
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Succeeded: "succeeded", Retry: "retry", Dead: "dead", 0: "Verdict(0)", 9: "Verdict(9)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
}

func TestDecide(t *testing.T) {
	p := Policy{Rand: fixed(0)} // delays are the lower bound d/2
	half := func(n int) time.Duration { return DefaultSchedule[min(n-2, len(DefaultSchedule)-1)] / 2 }
	retry := func(n int, reason string) Decision {
		return Decision{Verdict: Retry, Delay: half(n + 1), Reason: reason}
	}
	dead := func(reason string) Decision { return Decision{Verdict: Dead, Reason: reason} }
	ok := Decision{Verdict: Succeeded, Reason: ReasonSucceeded}
	gone := Decision{Verdict: Dead, DisableEndpoint: true, Reason: ReasonGone}

	tests := []struct {
		name      string
		n, client int
		o         Outcome
		want      Decision
	}{
		// 2xx
		{"200", 1, 0, Outcome{StatusCode: 200}, ok},
		{"201", 3, 0, Outcome{StatusCode: 201}, ok},
		{"204 on last attempt", 8, 0, Outcome{StatusCode: 204}, ok},
		{"299", 1, 0, Outcome{StatusCode: 299}, ok},
		{"2xx after client errors", 4, 2, Outcome{StatusCode: 200}, ok},
		// network errors and timeouts; blocked is dead at once (issue 13, point 3)
		{"timeout", 1, 0, Outcome{ErrorClass: "timeout"}, retry(1, ReasonError)},
		{"dns", 2, 0, Outcome{ErrorClass: "dns"}, retry(2, ReasonError)},
		{"connection_refused", 3, 0, Outcome{ErrorClass: "connection_refused"}, retry(3, ReasonError)},
		{"connection_reset", 4, 0, Outcome{ErrorClass: "connection_reset"}, retry(4, ReasonError)},
		{"tls", 5, 0, Outcome{ErrorClass: "tls"}, retry(5, ReasonError)},
		{"blocked is dead at once", 1, 0, Outcome{ErrorClass: "blocked"}, dead(ReasonBlocked)},
		{"blocked after retries", 6, 0, Outcome{ErrorClass: "blocked"}, dead(ReasonBlocked)},
		{"network", 7, 0, Outcome{ErrorClass: "network"}, retry(7, ReasonError)},
		{"network on last attempt", 8, 0, Outcome{ErrorClass: "network"}, dead(ReasonAttemptsExhausted)},
		{"network beyond last attempt", 9, 0, Outcome{ErrorClass: "network"}, dead(ReasonAttemptsExhausted)},
		{"body timeout after 200 headers", 1, 0, Outcome{StatusCode: 200, ErrorClass: "timeout"}, retry(1, ReasonError)},
		{"body error after 410 headers", 1, 0, Outcome{StatusCode: 410, ErrorClass: "connection_reset"}, retry(1, ReasonError)},
		// 5xx
		{"500", 1, 0, Outcome{StatusCode: 500}, retry(1, ReasonServerError)},
		{"502", 2, 0, Outcome{StatusCode: 502}, retry(2, ReasonServerError)},
		{"503", 3, 0, Outcome{StatusCode: 503}, retry(3, ReasonServerError)},
		{"599", 7, 0, Outcome{StatusCode: 599}, retry(7, ReasonServerError)},
		{"500 on last attempt", 8, 0, Outcome{StatusCode: 500}, dead(ReasonAttemptsExhausted)},
		// 408 and 429
		{"408", 1, 0, Outcome{StatusCode: 408}, retry(1, ReasonRequestTimeout)},
		{"408 on last attempt", 8, 0, Outcome{StatusCode: 408}, dead(ReasonAttemptsExhausted)},
		{"429", 1, 0, Outcome{StatusCode: 429}, retry(1, ReasonTooManyRequests)},
		{"429 on last attempt", 8, 0, Outcome{StatusCode: 429, RetryAfter: time.Second}, dead(ReasonAttemptsExhausted)},
		{"408/429 do not count as client errors", 2, 5, Outcome{StatusCode: 429}, retry(2, ReasonTooManyRequests)},
		// Retry-After
		{"429 Retry-After longer than jitter", 1, 0, Outcome{StatusCode: 429, RetryAfter: time.Hour}, Decision{Verdict: Retry, Delay: time.Hour, Reason: ReasonRetryAfter}},
		{"503 Retry-After longer than jitter", 2, 0, Outcome{StatusCode: 503, RetryAfter: 5 * time.Minute}, Decision{Verdict: Retry, Delay: 5 * time.Minute, Reason: ReasonRetryAfter}},
		{"429 Retry-After shorter than jitter", 1, 0, Outcome{StatusCode: 429, RetryAfter: time.Second}, retry(1, ReasonTooManyRequests)},
		{"503 Retry-After shorter than jitter", 6, 0, Outcome{StatusCode: 503, RetryAfter: time.Hour}, retry(6, ReasonServerError)},
		{"429 Retry-After capped", 1, 0, Outcome{StatusCode: 429, RetryAfter: 100 * time.Hour}, Decision{Verdict: Retry, Delay: 24 * time.Hour, Reason: ReasonRetryAfter}},
		{"500 Retry-After ignored", 1, 0, Outcome{StatusCode: 500, RetryAfter: time.Hour}, retry(1, ReasonServerError)},
		{"502 Retry-After ignored", 1, 0, Outcome{StatusCode: 502, RetryAfter: time.Hour}, retry(1, ReasonServerError)},
		{"error with Retry-After ignored", 1, 0, Outcome{StatusCode: 429, ErrorClass: "timeout", RetryAfter: time.Hour}, retry(1, ReasonError)},
		// 410
		{"410", 1, 0, Outcome{StatusCode: 410}, gone},
		{"410 on last attempt", 8, 0, Outcome{StatusCode: 410}, gone},
		{"410 after client errors", 3, 2, Outcome{StatusCode: 410}, gone},
		// other 4xx
		{"400 first", 1, 1, Outcome{StatusCode: 400}, retry(1, ReasonClientError)},
		{"401 second", 2, 2, Outcome{StatusCode: 401}, retry(2, ReasonClientError)},
		{"404 third dead-letters", 3, 3, Outcome{StatusCode: 404}, dead(ReasonClientErrorRetriesExhausted)},
		{"403 third after 5xx in between", 6, 3, Outcome{StatusCode: 403}, dead(ReasonClientErrorRetriesExhausted)},
		{"413", 1, 1, Outcome{StatusCode: 413}, retry(1, ReasonClientError)},
		{"422", 1, 1, Outcome{StatusCode: 422}, retry(1, ReasonClientError)},
		{"499", 1, 1, Outcome{StatusCode: 499}, retry(1, ReasonClientError)},
		{"4xx on last attempt", 8, 1, Outcome{StatusCode: 400}, dead(ReasonAttemptsExhausted)},
		{"4xx clientErrors 0 treated as 1", 1, 0, Outcome{StatusCode: 400}, retry(1, ReasonClientError)},
		{"4xx Retry-After ignored", 1, 1, Outcome{StatusCode: 400, RetryAfter: time.Hour}, retry(1, ReasonClientError)},
		// 3xx: never followed, a client error
		{"301", 1, 1, Outcome{StatusCode: 301}, retry(1, ReasonRedirect)},
		{"302", 2, 2, Outcome{StatusCode: 302}, retry(2, ReasonRedirect)},
		{"307 third dead-letters", 3, 3, Outcome{StatusCode: 307}, dead(ReasonClientErrorRetriesExhausted)},
		{"304", 1, 1, Outcome{StatusCode: 304}, retry(1, ReasonRedirect)},
		{"300", 1, 1, Outcome{StatusCode: 300}, retry(1, ReasonRedirect)},
		// odd codes: like 5xx
		{"100", 1, 0, Outcome{StatusCode: 100}, retry(1, ReasonUnexpectedStatus)},
		{"101", 1, 0, Outcome{StatusCode: 101}, retry(1, ReasonUnexpectedStatus)},
		{"199", 2, 0, Outcome{StatusCode: 199}, retry(2, ReasonUnexpectedStatus)},
		{"600", 1, 0, Outcome{StatusCode: 600}, retry(1, ReasonUnexpectedStatus)},
		{"999", 1, 0, Outcome{StatusCode: 999}, retry(1, ReasonUnexpectedStatus)},
		{"99", 1, 0, Outcome{StatusCode: 99}, retry(1, ReasonUnexpectedStatus)},
		{"0 without error class", 1, 0, Outcome{}, retry(1, ReasonUnexpectedStatus)},
		{"negative status", 1, 0, Outcome{StatusCode: -1}, retry(1, ReasonUnexpectedStatus)},
		{"odd code on last attempt", 8, 0, Outcome{StatusCode: 600}, dead(ReasonAttemptsExhausted)},
		// attempt numbers below 1
		{"n=0 treated as 1", 0, 0, Outcome{StatusCode: 500}, retry(1, ReasonServerError)},
		{"n=-5 treated as 1", -5, 0, Outcome{ErrorClass: "dns"}, retry(1, ReasonError)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Decide(tc.n, tc.client, tc.o)
			if got != tc.want {
				t.Errorf("Decide(%d, %d, %+v) = %+v, want %+v", tc.n, tc.client, tc.o, got, tc.want)
			}
		})
	}
}

func TestDecideConfigured(t *testing.T) {
	p := Policy{Schedule: []time.Duration{time.Second, time.Minute}, Rand: fixed(0), ClientErrorRetries: 5, MaxRetryAfter: time.Hour}
	if got := p.MaxAttempts(); got != 3 {
		t.Fatalf("MaxAttempts = %d, want 3", got)
	}
	if got := p.Decide(2, 0, Outcome{StatusCode: 500}); got != (Decision{Verdict: Retry, Delay: 30 * time.Second, Reason: ReasonServerError}) {
		t.Errorf("attempt 2 of 3: %+v", got)
	}
	if got := p.Decide(3, 0, Outcome{StatusCode: 500}); got.Verdict != Dead || got.Reason != ReasonAttemptsExhausted {
		t.Errorf("attempt 3 of 3: %+v", got)
	}
	// ClientErrorRetries: 5 → the 6th client error dead-letters (if attempts remain)
	q := Policy{Schedule: make([]time.Duration, 20), ClientErrorRetries: 5}
	for i := range q.Schedule {
		q.Schedule[i] = time.Second
	}
	for c := 1; c <= 5; c++ {
		if got := q.Decide(c, c, Outcome{StatusCode: 400}); got.Verdict != Retry {
			t.Errorf("client error %d of 5 allowed: %+v", c, got)
		}
	}
	if got := q.Decide(6, 6, Outcome{StatusCode: 400}); got.Verdict != Dead || got.Reason != ReasonClientErrorRetriesExhausted {
		t.Errorf("6th client error: %+v", got)
	}
	// negative: no client-error retries at all
	none := Policy{ClientErrorRetries: -1}
	if got := none.Decide(1, 1, Outcome{StatusCode: 404}); got != (Decision{Verdict: Dead, Reason: ReasonClientErrorRetriesExhausted}) {
		t.Errorf("ClientErrorRetries -1: %+v", got)
	}
	// MaxRetryAfter: 1h cap, but never shorter than the schedule's own delay
	if got := p.Decide(1, 0, Outcome{StatusCode: 429, RetryAfter: 10 * time.Hour}); got.Delay != time.Hour || got.Reason != ReasonRetryAfter {
		t.Errorf("cap 1h: %+v", got)
	}
	long := Policy{Schedule: []time.Duration{10 * time.Hour}, MaxRetryAfter: time.Hour, Rand: fixed(0)}
	if got := long.Decide(1, 0, Outcome{StatusCode: 429, RetryAfter: 10 * time.Hour}); got.Delay != 5*time.Hour || got.Reason != ReasonTooManyRequests {
		t.Errorf("cap below schedule: %+v", got)
	}
}

// TestRetryAfterProperty: Retry-After is never shortened (up to the cap)
// and never pushes beyond the cap, whatever the draw and attempt.
func TestRetryAfterProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, maxRA := range []time.Duration{0, time.Minute, time.Hour, 48 * time.Hour} {
		p := Policy{Rand: rng.Float64, MaxRetryAfter: maxRA}
		limit := p.maxRetryAfter()
		for range 5000 {
			n := 1 + rng.IntN(p.MaxAttempts()-1) // attempts that can be retried
			code := []int{429, 503}[rng.IntN(2)]
			ra := time.Duration(rng.Int64N(int64(72 * time.Hour)))
			dec := p.Decide(n, 0, Outcome{StatusCode: code, RetryAfter: ra})
			if dec.Verdict != Retry {
				t.Fatalf("Decide(%d, %d, RA %v) = %+v, want Retry", n, code, ra, dec)
			}
			d := DefaultSchedule[n-1] // upper bound of Delay(n+1)
			if dec.Delay < min(ra, limit) {
				t.Fatalf("attempt %d, Retry-After %v, cap %v: delay %v is earlier than asked", n, ra, limit, dec.Delay)
			}
			if dec.Delay > max(limit, d) {
				t.Fatalf("attempt %d, Retry-After %v, cap %v: delay %v beyond cap and schedule", n, ra, limit, dec.Delay)
			}
			if dec.Delay < d/2 {
				t.Fatalf("attempt %d: delay %v shorter than the schedule's lower bound %v", n, dec.Delay, d/2)
			}
			switch dec.Reason {
			case ReasonRetryAfter:
				if dec.Delay != min(ra, limit) {
					t.Fatalf("attempt %d, Retry-After %v: reason %q with delay %v", n, ra, dec.Reason, dec.Delay)
				}
			default:
				if dec.Delay > d {
					t.Fatalf("attempt %d, Retry-After %v: reason %q with delay %v beyond the schedule", n, ra, dec.Reason, dec.Delay)
				}
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"  120\t", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{"86400", 24 * time.Hour, true},
		{"2147483647", 2147483647 * time.Second, true},
		{"99999999999999999999999999999", maxRetryAfterSeconds * time.Second, true}, // saturates
		{"-5", 0, true}, // invalid per RFC 9110 but seen in the wild: no wait
		{"-0", 0, true}, //
		{"Sat, 01 Mar 2025 12:01:00 GMT", time.Minute, true}, // IMF-fixdate
		{"Saturday, 01-Mar-25 12:00:30 GMT", 30 * time.Second, true},
		{"Sat Mar  1 13:00:00 2025", time.Hour, true}, // asctime
		{"Sat, 01 Mar 2025 11:00:00 GMT", 0, true},    // past
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0, true},    // long past
		{"Sat, 01 Mar 2025 12:00:00 GMT", 0, true},    // now
		{"", 0, false},
		{" ", 0, false},
		{"-", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"12 34", 0, false},
		{"١٢", 0, false}, // Arabic-Indic digits
		{"-abc", 0, false},
		{"--5", 0, false},
		{"Sat, 01 Mar 2025 12:01:00 PST", 0, false}, // HTTP-date is GMT only
		{"2025-03-01T12:01:00Z", 0, false},          // RFC 3339 is not an HTTP-date
		{"Sat, 01 Mar 2025 12:01:00", 0, false},
		{"tomorrow", 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-5", "", "Sat, 01 Mar 2025 12:01:00 GMT", "Saturday, 01-Mar-25 12:00:30 GMT", "Sat Mar  1 13:00:00 2025", "99999999999999999999", "1.5"} {
		f.Add(s, int64(1740830400))
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		now := time.Unix(unix, 0)
		d, ok := ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v < 0", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: want 0 when not ok", v, d)
		}
		// whatever it parsed, the policy honours it within the cap
		dec := Policy{}.Decide(1, 0, Outcome{StatusCode: 429, RetryAfter: d})
		if dec.Verdict != Retry || dec.Delay < min(d, DefaultMaxRetryAfter) || dec.Delay > DefaultMaxRetryAfter {
			t.Fatalf("Retry-After %v: %+v", d, dec)
		}
	})
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"30s,2m,8m", "", "x", "0s", "25h", "1s,,2s", "30s,2m,8m,32m,2h8m,8h32m,24h", "-1s", "1h30m", strings.Repeat("1s,", 60)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sched, err := ParseSchedule(s)
		if err != nil {
			if sched != nil {
				t.Fatalf("ParseSchedule(%q): non-nil schedule with error %v", s, err)
			}
			if !strings.HasPrefix(err.Error(), "retry schedule") {
				t.Fatalf("ParseSchedule(%q): error %q does not start with \"retry schedule\"", s, err)
			}
			return
		}
		if len(sched) < 1 || len(sched) > MaxScheduleEntries {
			t.Fatalf("ParseSchedule(%q): %d entries", s, len(sched))
		}
		p := Policy{Schedule: sched}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParseSchedule(%q) accepted what Validate refuses: %v", s, err)
		}
		for n := 2; n <= p.MaxAttempts()+1; n++ {
			d := sched[min(n-2, len(sched)-1)]
			if got := p.Delay(n); got < d/2 || got > d {
				t.Fatalf("ParseSchedule(%q): Delay(%d) = %v outside [%v,%v]", s, n, got, d/2, d)
			}
		}
		again, err := ParseSchedule(FormatSchedule(sched))
		if err != nil || FormatSchedule(again) != FormatSchedule(sched) {
			t.Fatalf("ParseSchedule(%q): round trip %v, %v", s, again, err)
		}
	})
}

func TestIsClientError(t *testing.T) {
	for status, want := range map[int]bool{0: false, 200: false, 204: false, 301: true, 302: true, 399: true,
		400: true, 401: true, 404: true, 408: false, 410: false, 422: true, 429: false, 499: true, 500: false, 503: false} {
		if got := IsClientError(status); got != want {
			t.Errorf("IsClientError(%d) = %v, want %v", status, got, want)
		}
	}
}
