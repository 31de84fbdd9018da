// Command herald is the Herald webhook platform: `herald serve` runs the
// server; the other commands talk to it or help receivers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
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
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
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
// take a comma-separated value.
func bindEnv(cmd *cobra.Command) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		name := "HERALD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if err := cmd.Flags().Set(f.Name, v); err != nil {
			firstErr = fmt.Errorf("%s=%q: %w", name, v, err)
		}
	})
	return firstErr
}
