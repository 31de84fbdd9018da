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
