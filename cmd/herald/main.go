// Command herald is the Herald webhook platform: `herald serve` runs the
// server; the other commands talk to it or help receivers.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herald-webhooks/herald/internal/buildinfo"
	"github.com/herald-webhooks/herald/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", withEnvSources(cmd, err))
		os.Exit(1)
	}
}

// envAnnotation marks a flag whose value bindEnv took from its HERALD_*
// twin (the annotation's value is the variable's name).
const envAnnotation = "herald_env"

// withEnvSources adds to err, for each flag it names ("--name") whose
// value came from the environment, which variable set it: the checks name
// flags, the operator may have set only the variable. Values are not
// repeated (a --db URL may hold a password).
func withEnvSources(cmd *cobra.Command, err error) error {
	if cmd == nil {
		return err
	}
	msg := err.Error()
	var from []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if len(env) == 0 {
			return
		}
		named := regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `([^a-z0-9-]|$)`)
		if named.MatchString(msg) {
			from = append(from, fmt.Sprintf("--%s was set by %s", f.Name, env[0]))
		}
	})
	if len(from) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(from, "; "))
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "herald",
		Short:         "Herald: webhooks that keep their promises (authenticity, delivery, truth)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Version,
	}
	root.AddCommand(newServeCmd())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	// A flag value refused on the command line: pflag's error repeats the
	// value as given, which a --server URL's credentials must not be.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagValueError(err) })
	help := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		showEnvDefaults(cmd)
		help(cmd, args)
	})
	return root
}

// envTwinsAnnotation, on a command that does not bind every flag to its
// HERALD_* twin (bindEnv), lists the flags that have one (comma-separated;
// healthcheck reads HERALD_SERVER alone; "" for a command that reads none,
// such as version).
const envTwinsAnnotation = "herald_env_twins"

// envNoTwinsAnnotation, on a command, lists flags (comma-separated) that
// have no HERALD_* twin there nor in its subcommands: bindEnv leaves them
// alone and the help does not claim them (bench's --db: HERALD_DB names
// the server's own database).
const envNoTwinsAnnotation = "herald_env_no_twins"

// readsTwin reports whether cmd reads flag's HERALD_* twin, as its
// annotations say (envTwinsAnnotation, envNoTwinsAnnotation).
func readsTwin(cmd *cobra.Command, flag string) bool {
	if only, ok := cmd.Annotations[envTwinsAnnotation]; ok && !slices.Contains(strings.Split(only, ","), flag) {
		return false
	}
	for p := cmd; p != nil; p = p.Parent() {
		if no, ok := p.Annotations[envNoTwinsAnnotation]; ok && slices.Contains(strings.Split(no, ","), flag) {
			return false
		}
	}
	return true
}

// secretFlags are the flags whose value may be a credential: their help
// names the variable that sets them, never its value (a --db URL may hold
// a password, a --header an Authorization value, a bench --serve-arg a
// --db=postgres://u:pw@…). Other values are shown with a URL's credentials
// redacted (shownValue, redact.URL).
var secretFlags = map[string]bool{"api-key": true, "db": true, "header": true, "new-key": true, "secret": true, "serve-arg": true}

// envName is the HERALD_* twin of flag name: --attempt-timeout is
// HERALD_ATTEMPT_TIMEOUT.
func envName(flag string) string {
	return "HERALD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// showEnvDefaults makes cmd's help show, for each of its flags whose
// HERALD_* twin is set and read by cmd (readsTwin), the default in force
// and where it comes from (`(default "https://herald.example" from
// HERALD_SERVER)`, `(default 12 from HERALD_WORKERS)`) instead of the
// built-in default that the command would not use; or, when the value is
// one the flag refuses, that it is (`(HERALD_LIMIT="abc" is not a valid
// value: …)`), as running would. A credential's value is never shown
// (secretFlags, shownValue). It changes the flags' help only: it runs
// when the help is printed, and the command does not run then.
func showEnvDefaults(cmd *cobra.Command) {
	for p := cmd; p != nil; p = p.Parent() {
		if p.Name() == "completion" || p.Name() == "help" && p.Parent() != nil {
			return // cobra's own commands: no twins
		}
	}
	var probe *cobra.Command // the same command in a fresh tree, built once
	probed := false
	show := func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == "version" || !readsTwin(cmd, f.Name) {
			return
		}
		name := envName(f.Name)
		v := os.Getenv(name)
		if v == "" { // empty counts as unset, as in bindEnv
			return
		}
		if !probed {
			probe, probed = freshCommand(cmd), true
		}
		f.Usage = replaceDefault(f.Usage, envDefault(probe, f, name, v))
		f.DefValue = zeroDefault(f) // so that pflag adds no "(default …)" of its own
	}
	cmd.LocalFlags().VisitAll(show)
	cmd.InheritedFlags().VisitAll(show)
}

// envDefault is what the help says of flag f set by variable name to v:
// the default in force, quoted for a string (as pflag quotes a built-in
// default) and unquoted otherwise, or that v is not a valid value for the
// flag (tried on probe's copy of f, as bindEnv would set it), or that the
// variable sets it, when its value may be a credential.
func envDefault(probe *cobra.Command, f *pflag.Flag, name, v string) string {
	if secretFlags[f.Name] {
		return fmt.Sprintf("default from %s, its value not shown", name)
	}
	shown, ok := shownValue(v)
	if probe != nil {
		if pf := probe.Flags().Lookup(f.Name); pf != nil {
			if err := probe.Flags().Set(f.Name, v); err != nil {
				if own := flagValueError(err); own != err { // names the flag, the value redacted
					return fmt.Sprintf("%s is not a valid value: %v", name, own)
				}
				if !ok || shown != v { // the error may repeat the value
					return fmt.Sprintf("%s is not a valid value, its value not shown", name)
				}
				return fmt.Sprintf("%s=%q is not a valid value: %v", name, v, err)
			}
		}
	}
	switch {
	case !ok:
		return fmt.Sprintf("default from %s, its value not shown", name)
	case strings.HasPrefix(f.Value.Type(), "string"): // string, stringSlice, stringArray
		return fmt.Sprintf("default %q from %s", shown, name)
	}
	return fmt.Sprintf("default %s from %s", shown, name)
}

// shownValue is v as the help may show it: a URL redacted as errors show
// it (redact.URL: its whole user information, and the values of query
// parameters named like credentials); ok is false when v may hold a
// credential that cannot be redacted reliably (an @ or "password" outside
// those parts of a URL, or in a value that is not a URL).
func shownValue(v string) (shown string, ok bool) {
	hasPassword := func(s string) bool { return strings.Contains(strings.ToLower(s), "password") }
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		red := redact.URL(v)
		rest := strings.ReplaceAll(strings.ToLower(strings.Replace(red, "xxxxx@", "", 1)), "password=xxxxx", "")
		if strings.Contains(rest, "@") || hasPassword(rest) {
			return "", false
		}
		return red, true
	}
	if !strings.Contains(v, "@") && !hasPassword(v) {
		return v, true
	}
	return "", false
}

// freshCommand is cmd in a newly built command tree, whose flags hold
// their built-in defaults: the help tries a variable's value on it
// without changing cmd's flags. It is nil when cmd is not in herald's
// tree.
func freshCommand(cmd *cobra.Command) *cobra.Command {
	var path []string
	for p := cmd; p.HasParent(); p = p.Parent() {
		path = append([]string{p.Name()}, path...)
	}
	c, _, err := newRoot().Find(path)
	if err != nil || c.CommandPath() != cmd.CommandPath() {
		return nil
	}
	c.InheritedFlags() // merges the persistent flags of its parents into c.Flags()
	return c
}

// replaceDefault puts the default in force (shown: `default "x" from
// HERALD_X`) where a flag's usage states its built-in one, so that the
// help states one default: "(default $HERALD_SERVER)", "(default: the
// server's, 50)", "(default 200)", "…; default 1h)"; else it is added in
// parentheses at the end. "(default)" after a choice names that choice
// and stays.
func replaceDefault(usage, shown string) string {
	if i := strings.Index(usage, "(default"); i >= 0 && i+8 < len(usage) && (usage[i+8] == ' ' || usage[i+8] == ':' || usage[i+8] == '$') {
		if j := strings.Index(usage[i:], ")"); j >= 0 {
			return usage[:i] + "(" + shown + ")" + usage[i+j+1:]
		}
	}
	if i := strings.Index(usage, "; default"); i >= 0 {
		end := len(usage)
		if j := strings.Index(usage[i:], ")"); j >= 0 {
			end = i + j
		}
		return usage[:i] + "; " + shown + usage[end:]
	}
	return usage + " (" + shown + ")"
}

// zeroDefault is a DefValue for which pflag prints no "(default …)" for
// f's type ("", "0", "0s", "false", "[]"…; pflag's test is unexported).
func zeroDefault(f *pflag.Flag) string {
	for _, z := range []string{"", "0", "0s", "false", "[]", "<nil>"} {
		probe := *f
		probe.Usage, probe.DefValue = "x", z
		fs := pflag.NewFlagSet("probe", pflag.ContinueOnError)
		fs.AddFlag(&probe)
		if !strings.Contains(fs.FlagUsages(), "(default ") {
			return z
		}
	}
	return f.DefValue
}

// unknownSubcommand is the RunE of a command group: without arguments it
// prints the group's help; with one it is an unknown subcommand, an error
// (exit status 1) with cobra's suggestions ("Did you mean this?").
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return fmt.Errorf("%s\nRun '%s --help' for usage", msg, cmd.CommandPath())
}

// extraCommands are registered by other files of this package.
var extraCommands []func() *cobra.Command

// bindEnv gives every flag of cmd a HERALD_* environment twin (but those
// its annotations exclude, readsTwin): --attempt-timeout
// reads HERALD_ATTEMPT_TIMEOUT when the flag is not given. Repeatable flags
// take a comma-separated value. A variable set to the empty string counts
// as unset (the flag's default): container files pass optional settings as
// `VAR: ${VAR:-}`, which sets them empty when the host has none.
func bindEnv(cmd *cobra.Command) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil || !readsTwin(cmd, f.Name) {
			return
		}
		name := envName(f.Name)
		v := os.Getenv(name)
		if v == "" {
			return
		}
		if err := cmd.Flags().Set(f.Name, v); err != nil {
			if own := flagValueError(err); own != err { // names the flag, the value redacted
				firstErr = fmt.Errorf("%s: %w", name, own)
				return
			}
			firstErr = fmt.Errorf("%s=%q: %w", name, v, err)
			return
		}
		if err := cmd.Flags().SetAnnotation(f.Name, envAnnotation, []string{name}); err != nil {
			firstErr = err
		}
	})
	return firstErr
}
