package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// daysValue is a pflag.Value for long durations: Go durations ("36h",
// "90s") or whole days ("5d").
type daysValue struct {
	d     *time.Duration
	given string // as the user wrote it, for errors ("0s", "8d")
}

// maxDays is the most whole days a time.Duration holds.
const maxDays = int(math.MaxInt64 / int64(24*time.Hour))

func newDaysValue(d *time.Duration, def time.Duration) *daysValue {
	*d = def
	return &daysValue{d: d}
}

func (v *daysValue) Set(s string) error {
	v.given = s
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 {
			return fmt.Errorf("%q: days must be a non-negative whole number, e.g. 7d", s)
		}
		if days > maxDays {
			// Past it days × 24h wraps around (213504d is 25 minutes).
			return fmt.Errorf("%q: at most %dd (the longest duration Go holds, about 292 years)", s, maxDays)
		}
		*v.d = time.Duration(days) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q: use days (7d) or a Go duration (36h, 90s)", s)
	}
	if d < 0 {
		return fmt.Errorf("%q: must not be negative", s)
	}
	*v.d = d
	return nil
}

func (v *daysValue) String() string {
	if v.d == nil {
		return ""
	}
	if v.given != "" {
		return v.given
	}
	if *v.d == 0 {
		// "0", not "0s": pflag prints a custom Value's default unless it
		// is "0", so "0s" added "(default 0s)" to --ttl and --expires-in,
		// whose help says what zero means (1h, never).
		return "0"
	}
	if *v.d > 0 && *v.d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(*v.d/(24*time.Hour))) + "d"
	}
	return v.d.String()
}

func (v *daysValue) Type() string { return "duration" }
