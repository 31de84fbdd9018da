// Command herald is the Herald webhook platform: `herald serve` runs the
// server; the other commands talk to it or help receivers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herald-webhooks/herald/internal/buildinfo"
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
	return root
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

// bindEnv gives every flag of cmd a HERALD_* environment twin: --attempt-timeout
// reads HERALD_ATTEMPT_TIMEOUT when the flag is not given. Repeatable flags
// take a comma-separated value. A variable set to the empty string counts
// as unset (the flag's default): container files pass optional settings as
// `VAR: ${VAR:-}`, which sets them empty when the host has none.
func bindEnv(cmd *cobra.Command) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		name := "HERALD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v := os.Getenv(name)
		if v == "" {
			return
		}
		if err := cmd.Flags().Set(f.Name, v); err != nil {
			firstErr = fmt.Errorf("%s=%q: %w", name, v, err)
			return
		}
		if err := cmd.Flags().SetAnnotation(f.Name, envAnnotation, []string{name}); err != nil {
			firstErr = err
		}
	})
	return firstErr
}
