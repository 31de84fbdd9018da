package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/retry"
)

func newServeCmd() *cobra.Command {
	var (
		cfg      app.Config
		cidrs    []string
		schedule string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run Herald: the API and the delivery workers",
		Long: `Run Herald: the API and the delivery workers, on the embedded SQLite store by default.

Every flag has an environment twin: --attempt-timeout is HERALD_ATTEMPT_TIMEOUT.
The admin API key comes from HERALD_API_KEY; when it is unset, a key is generated
on the first start, stored hashed and printed once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			cfg.Stdout = cmd.OutOrStdout()
			cfg.APIKey = os.Getenv("HERALD_API_KEY")
			cfg.EncryptionKey = os.Getenv("HERALD_ENCRYPTION_KEY")
			for _, c := range cidrs {
				p, err := netip.ParsePrefix(c)
				if err != nil {
					return fmt.Errorf("--allow-cidr %q: not a CIDR prefix such as 10.0.0.0/8", c)
				}
				cfg.AllowCIDRs = append(cfg.AllowCIDRs, p.Masked())
			}
			var err error
			if cfg.RetrySchedule, err = retry.ParseSchedule(schedule); err != nil {
				return fmt.Errorf("--retry-schedule: %w", err)
			}
			if cfg.AttemptTimeout <= 0 {
				return fmt.Errorf("--attempt-timeout must be positive")
			}
			if cfg.Dev {
				cfg.Logger.Warn("dev mode: http and loopback endpoint URLs are allowed; never use --dev in production")
			}
			m, err := app.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return m.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", ":8080", "listen address of the API")
	f.StringVar(&cfg.DB, "db", "sqlite:herald.db", "store: sqlite:PATH (embedded)")
	f.BoolVar(&cfg.Dev, "dev", false, "local development: allow http:// and loopback endpoint URLs")
	f.BoolVar(&cfg.AllowHTTP, "allow-http", false, "allow plain http:// endpoint URLs")
	f.StringArrayVar(&cidrs, "allow-cidr", nil, "allow destinations in this CIDR despite the SSRF deny list (repeatable)")
	f.StringVar(&schedule, "retry-schedule", "30s,2m,8m,32m,2h8m,8h32m,24h", "upper bounds of the delays before attempts 2..N (comma-separated Go durations)")
	f.DurationVar(&cfg.AttemptTimeout, "attempt-timeout", 10*time.Second, "timeout of one attempt: connect, TLS, headers and body")
	f.IntVar(&cfg.Workers, "workers", 64, "attempts in flight at once")
	f.IntVar(&cfg.MaxPayloadBytes, "max-payload-bytes", 64<<10, "largest event body delivered, in bytes")
	f.DurationVar(&cfg.Lease, "lease", 0, "how long a claimed delivery is leased before another worker may rescue it (default 2 × attempt timeout + 5s)")
	f.DurationVar(&cfg.RescueInterval, "rescue-interval", 5*time.Second, "how often leases of crashed workers are checked for expiry")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
