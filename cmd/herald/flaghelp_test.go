package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestFlagHelpStatesOneDefault: no flag's help line says its default twice
// (its usage "…; default 1h" and pflag's "(default 0s)" disagreed for
// portal-sessions create --ttl and keys create --expires-in).
func TestFlagHelpStatesOneDefault(t *testing.T) {
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.LocalFlags().FlagUsages(), "\n") {
			checked++
			if i := strings.Index(line, "default"); i >= 0 && strings.Contains(line[i+1:], "(default ") {
				t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(line))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	if checked < 100 {
		t.Fatalf("checked only %d flag lines; the walk is broken", checked)
	}
}

func TestDaysValueZeroPrintsAsZero(t *testing.T) {
	var d = newDaysValue(new(time.Duration), 0)
	if got := d.String(); got != "0" {
		t.Errorf("zero days value prints %q, want 0", got)
	}
}

// TestDurationFlagErrorsEchoTheInput: a refused --ttl or --expires-in is
// named as the user wrote it (8d), not as a Go duration (192h0m0s).
func TestDurationFlagErrorsEchoTheInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"portal-sessions", "create", "--tenant", "acme", "--ttl", "8d"}, "--ttl 8d:"},
		{[]string{"keys", "create", "--name", "k", "--role", "viewer", "--tenant", "acme", "--expires-in", "30s"}, "--expires-in 30s:"},
	} {
		_, _, err := execHerald(t, "", append(c.args, "--server", "http://127.0.0.1:1", "--api-key", "k")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("herald %v: %v; want an error starting %q", c.args, err, c.want)
		}
	}
}

// TestDaysValueRefusesDaysPastADuration: a number of days past what a
// time.Duration holds (about 292 years) is refused naming the limit; it
// wrapped around before, so --expires-in 213504d created a key that expired
// in 25 minutes and --dead-letter-retention 213504d deleted dead letters
// after 25 minutes.
func TestDaysValueRefusesDaysPastADuration(t *testing.T) {
	var d time.Duration
	v := newDaysValue(&d, 0)
	if err := v.Set("106751d"); err != nil || d != 106751*24*time.Hour {
		t.Fatalf("106751d: %v, %v", d, err)
	}
	for _, s := range []string{"106752d", "213504d", "99999999999d"} {
		d = time.Hour
		if err := v.Set(s); err == nil || !strings.Contains(err.Error(), "at most 106751d") {
			t.Errorf("%s: %v (value %v); want a refusal naming the limit", s, err, d)
		}
		if d != time.Hour {
			t.Errorf("%s: a refused value changed the setting to %v", s, d)
		}
	}
	_, _, err := execHerald(t, "", "keys", "create", "--name", "k", "--role", "viewer", "--tenant", "acme", "--expires-in", "213504d", "--server", "http://127.0.0.1:1", "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "at most 106751d") {
		t.Fatalf("keys create --expires-in 213504d: %v; want a refusal naming the limit", err)
	}
}
