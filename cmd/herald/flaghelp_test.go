package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// TestHelpShowsDefaultsFromTheEnvironment: a flag's help shows the default
// in force, and where it comes from, when its HERALD_* twin is set:
// --server's is HERALD_SERVER's value, not the built-in
// http://localhost:8080 that the command would not use. A twin that may
// hold a credential (HERALD_API_KEY, HERALD_DB) is named, its value never
// shown.
func TestHelpShowsDefaultsFromTheEnvironment(t *testing.T) {
	help := func(args ...string) string {
		t.Helper()
		out, _, err := execHerald(t, "", args...)
		if err != nil {
			t.Fatalf("herald %v: %v", args, err)
		}
		return out
	}
	const builtIn = `(default "http://localhost:8080")`
	if out := help("endpoints", "list", "--help"); !strings.Contains(out, builtIn) {
		t.Fatalf("without HERALD_SERVER, --server's help lacks %s:\n%s", builtIn, out)
	}
	t.Setenv("HERALD_SERVER", "https://herald.example:9443")
	t.Setenv("HERALD_API_KEY", "herald_key_do-not-show-0123456789abcdef")
	t.Setenv("HERALD_ADDR", ":9090")
	t.Setenv("HERALD_DB", "postgres://herald:do-not-show@db.internal/herald")
	const fromEnv = `(default "https://herald.example:9443" from HERALD_SERVER)`
	for _, args := range [][]string{
		{"endpoints", "list", "--help"},
		{"sources", "--help"},
		{"help", "keys", "create"},
		{"healthcheck", "--help"},
	} {
		out := help(args...)
		if !strings.Contains(out, fromEnv) || strings.Contains(out, builtIn) || strings.Contains(out, "(default $HERALD_SERVER)") {
			t.Errorf("herald %v: --server's help does not say %s:\n%s", args, fromEnv, out)
		}
		if strings.Contains(out, "do-not-show") {
			t.Errorf("herald %v: the help shows a credential's value:\n%s", args, out)
		}
		if args[0] != "healthcheck" && !strings.Contains(out, "(default from HERALD_API_KEY, its value not shown)") {
			t.Errorf("herald %v: --api-key's help does not say HERALD_API_KEY sets it:\n%s", args, out)
		}
	}
	// A usage that states its built-in default in its own words states
	// the one in force instead: one default a line.
	t.Setenv("HERALD_LIMIT", "5")
	t.Setenv("HERALD_EVENT_TYPE", "order.*")
	if out := help("endpoints", "list", "--help"); !strings.Contains(out, `page size, 1–1000 (default 5 from HERALD_LIMIT)`) || strings.Contains(out, "the server's, 50") {
		t.Errorf("--limit's help with HERALD_LIMIT=5:\n%s", out)
	}
	if out := help("endpoints", "create", "--help"); !strings.Contains(out, `(repeatable; default "order.*" from HERALD_EVENT_TYPE)`) {
		t.Errorf("--event-type's help with HERALD_EVENT_TYPE set:\n%s", out)
	}
	out := help("serve", "--help")
	for _, want := range []string{`(default ":9090" from HERALD_ADDR)`, "(default from HERALD_DB, its value not shown)"} {
		if !strings.Contains(out, want) {
			t.Errorf("herald serve --help lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "do-not-show") {
		t.Errorf("herald serve --help shows HERALD_DB's password:\n%s", out)
	}
	// healthcheck reads no twin but HERALD_SERVER's: its --url is not
	// said to come from HERALD_URL.
	t.Setenv("HERALD_URL", "http://elsewhere.example/readyz")
	if out := help("healthcheck", "--help"); strings.Contains(out, "HERALD_URL") {
		t.Errorf("herald healthcheck --help claims HERALD_URL sets --url:\n%s", out)
	}
}

// helpOf is herald's output for args (a --help or help command).
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := execHerald(t, "", args...)
	if err != nil {
		t.Fatalf("herald %v: %v", args, err)
	}
	return out
}

// TestHelpNeverShowsCredentialsFromTheEnvironment: HERALD_HEADER (custom
// header values such as Authorization=Bearer …) and HERALD_SERVE_ARG
// (herald serve's arguments, --db=postgres://u:pw@… among them) are named,
// never shown; a URL's password (HERALD_SERVER, HERALD_DESTINATION_URL,
// HERALD_PUBLIC_URL, …) is redacted, the rest of the URL shown.
func TestHelpNeverShowsCredentialsFromTheEnvironment(t *testing.T) {
	t.Setenv("HERALD_HEADER", "Authorization=Bearer do-not-show-header")
	t.Setenv("HERALD_SERVE_ARG", "--db=postgres://u:do-not-show-arg@db.internal/herald")
	t.Setenv("HERALD_SERVER", "https://ops:do-not-show-server@herald.example:9443")
	t.Setenv("HERALD_DESTINATION_URL", "https://hook:do-not-show-dest@receiver.example/in")
	t.Setenv("HERALD_PUBLIC_URL", "https://u:do-not-show-public@herald.example")
	t.Setenv("HERALD_URL", "https://u:do-not-show-url@herald.example/readyz")
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"endpoints", "create", "--help"}, []string{"(default from HERALD_HEADER, its value not shown)", `(default "https://xxxxx@herald.example:9443" from HERALD_SERVER)`}},
		{[]string{"endpoints", "update", "--help"}, []string{"(default from HERALD_HEADER, its value not shown)"}},
		{[]string{"sources", "create", "--help"}, []string{`(default "https://xxxxx@receiver.example/in" from HERALD_DESTINATION_URL)`}},
		{[]string{"serve", "--help"}, []string{`default "https://xxxxx@herald.example" from HERALD_PUBLIC_URL`}},
		{[]string{"bench", "drain", "--help"}, []string{"(default from HERALD_SERVE_ARG, its value not shown)"}},
		{[]string{"healthcheck", "--help"}, []string{`(default "https://xxxxx@herald.example:9443" from HERALD_SERVER)`}},
	} {
		out := helpOf(t, c.args...)
		if strings.Contains(out, "do-not-show") {
			t.Errorf("herald %v: the help shows a credential:\n%s", c.args, out)
		}
		for _, want := range c.wants {
			if !strings.Contains(out, want) {
				t.Errorf("herald %v: the help lacks %s:\n%s", c.args, want, out)
			}
		}
	}
}

// TestHelpSaysWhenAnEnvironmentValueIsInvalid: a HERALD_* value that the
// flag would refuse is not presented as the default in force; a valid one
// of a type other than a string is shown unquoted, as pflag shows its
// built-in defaults.
func TestHelpSaysWhenAnEnvironmentValueIsInvalid(t *testing.T) {
	t.Setenv("HERALD_LIMIT", "abc")
	out := helpOf(t, "endpoints", "list", "--help")
	if strings.Contains(out, `default "abc"`) || !strings.Contains(out, `(HERALD_LIMIT="abc" is not a valid value: `) {
		t.Errorf("--limit with HERALD_LIMIT=abc:\n%s", out)
	}
	if _, _, err := execHerald(t, "", "endpoints", "list", "--server", "http://127.0.0.1:1", "--api-key", "k"); err == nil || !strings.Contains(err.Error(), `HERALD_LIMIT="abc"`) {
		t.Errorf("running with HERALD_LIMIT=abc: %v; want the refusal the help announces", err)
	}
	t.Setenv("HERALD_WORKERS", "12")
	t.Setenv("HERALD_ATTEMPT_TIMEOUT", "soon")
	t.Setenv("HERALD_ALLOW_HTTP", "true")
	out = helpOf(t, "serve", "--help")
	for _, want := range []string{"(default 12 from HERALD_WORKERS)", `(HERALD_ATTEMPT_TIMEOUT="soon" is not a valid value: `, "(default true from HERALD_ALLOW_HTTP)"} {
		if !strings.Contains(out, want) {
			t.Errorf("herald serve --help lacks %s:\n%s", want, out)
		}
	}
	t.Setenv("HERALD_EXPIRES_IN", "90d")
	if out := helpOf(t, "keys", "create", "--help"); !strings.Contains(out, "default 90d from HERALD_EXPIRES_IN") {
		t.Errorf("--expires-in with HERALD_EXPIRES_IN=90d:\n%s", out)
	}
}

// TestHelpClaimsOnlyTheTwinsACommandReads: herald bench ignores HERALD_DB
// (the server's own database), herald version and bench receiver read no
// variable: their help does not say those set their flags.
func TestHelpClaimsOnlyTheTwinsACommandReads(t *testing.T) {
	t.Setenv("HERALD_DB", "postgres://herald:do-not-show@db.internal/herald")
	t.Setenv("HERALD_JSON", "true")
	t.Setenv("HERALD_WORKERS", "12")
	t.Setenv("HERALD_ADDR", ":9090")
	for _, args := range [][]string{{"bench", "--help"}, {"bench", "drain", "--help"}} {
		out := helpOf(t, args...)
		if strings.Contains(out, "from HERALD_DB") || !strings.Contains(out, "(default 12 from HERALD_WORKERS)") {
			t.Errorf("herald %v: want HERALD_WORKERS's default and no HERALD_DB:\n%s", args, out)
		}
	}
	if out := helpOf(t, "version", "--help"); strings.Contains(out, "HERALD_JSON") {
		t.Errorf("herald version --help claims HERALD_JSON sets --json:\n%s", out)
	}
	if out := helpOf(t, "bench", "receiver", "--help"); strings.Contains(out, "HERALD_ADDR") {
		t.Errorf("herald bench receiver --help claims HERALD_ADDR sets --addr:\n%s", out)
	}
}

// TestDocsNameTheCommandsWithoutEveryTwin: docs/operations.md says every
// flag has a HERALD_* twin; the commands whose annotations say otherwise
// (healthcheck's --url, bench's --db, version's --json) are named there
// with the variables they ignore.
func TestDocsNameTheCommandsWithoutEveryTwin(t *testing.T) {
	doc := strings.Join(strings.Fields(repoFile(t, "docs/operations.md")), " ")
	var walk func(c *cobra.Command)
	found := 0
	walk = func(c *cobra.Command) {
		_, restricted := c.Annotations[envTwinsAnnotation]
		_, excluding := c.Annotations[envNoTwinsAnnotation]
		if (restricted || excluding) && !c.Hidden {
			found++
			if !strings.Contains(doc, "`"+c.CommandPath()+"`") {
				t.Errorf("docs/operations.md does not name %s among the commands without every twin", c.CommandPath())
			}
			c.InheritedFlags() // merges the persistent flags into c.Flags()
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" && !readsTwin(c, f.Name) && !strings.Contains(doc, "`"+envName(f.Name)+"`") {
					t.Errorf("docs/operations.md does not say %s ignores %s", c.CommandPath(), envName(f.Name))
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	if found < 3 {
		t.Fatalf("found %d annotated commands; want healthcheck, bench, version at least", found)
	}
}
