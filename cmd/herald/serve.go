package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/clientip"
	"github.com/herald-webhooks/herald/internal/delivery"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/store"
)

func newServeCmd() *cobra.Command {
	var (
		cfg       app.Config
		cidrs     []string
		proxies   []string
		schedule  string
		logLevel  string
		debugAddr string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run Herald: the API and the delivery workers",
		Long: `Run Herald: the API and the delivery workers, on the embedded SQLite store by default.

Every flag has an environment twin: --attempt-timeout is HERALD_ATTEMPT_TIMEOUT.
An admin API key comes from HERALD_API_KEY (at least 32 characters); when it is
unset and no key is stored, one is generated on the first start, stored hashed and
printed once. More keys, with roles and tenants: herald keys create.`,
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
			var err error
			if cfg.PreviousEncryptionKeys, err = splitKeys(os.Getenv("HERALD_ENCRYPTION_KEY_PREVIOUS")); err != nil {
				return err
			}
			for _, c := range cidrs {
				p, err := netip.ParsePrefix(c)
				if err != nil {
					return fmt.Errorf("--allow-cidr %q: not a CIDR prefix such as 10.0.0.0/8", c)
				}
				cfg.AllowCIDRs = append(cfg.AllowCIDRs, p.Masked())
			}
			if cfg.TrustedProxies, err = clientip.ParseCIDRs(proxies); err != nil {
				return err
			}
			if cfg.RetrySchedule, err = retry.ParseSchedule(schedule); err != nil {
				return fmt.Errorf("--retry-schedule: %w", err)
			}
			// A zero in app.Config means the default (app.Config.WithDefaults)
			// for these settings; on the command line, where every flag
			// already shows its default, 0 is refused (and so is a negative
			// --dlq-spike-threshold, which app.Config takes for 0, off, while
			// the flag says 0 = off). Every other rule is
			// app.Config's (app.New validates), so embedders get the same
			// checks.
			for _, z := range []struct {
				zero bool
				msg  string
			}{
				{cfg.AttemptTimeout <= 0, "--attempt-timeout must be positive"},
				{cfg.DisableMinFailures < 1, fmt.Sprintf("--disable-min-failures %d: must be at least 1 (the failed attempts a streak needs, besides lasting --disable-after, to disable an endpoint)", cfg.DisableMinFailures)},
				{cfg.HeartbeatInterval == 0, "--heartbeat-interval 0s: use 10ms to 1m (a starting node waits 3 intervals before it delivers)"},
				{cfg.Workers < 1, "--workers must be at least 1"},
				{cfg.MaxPayloadBytes < 1, fmt.Sprintf("--max-payload-bytes %d: at least %d (1 KiB): an event's envelope alone (id, type, tenant, occurred_at) is about 100 bytes, so a smaller cap refuses (413) nearly every publish; it is taken for a mistake (bytes given where KiB were meant)", cfg.MaxPayloadBytes, app.MinPayloadBytes)},
				{cfg.FanOutChunk < 1, "--fanout-chunk must be at least 1"},
				{cfg.BreakerThreshold < 1, "--breaker-threshold must be at least 1"},
				{cfg.RescueInterval <= 0, "--rescue-interval must be positive"},
				{cfg.BreakerCooldown <= 0, "--breaker-cooldown must be positive"},
				{cfg.HousekeepingInterval <= 0, "--housekeeping-interval must be positive"},
				{cfg.SpikeWindow <= 0, "--dlq-spike-window must be positive"},
				{cfg.SpikeThreshold < 0, "--dlq-spike-threshold must be 0 (off) or more"},
			} {
				if z.zero {
					return errors.New(z.msg)
				}
			}
			if cfg.Dev {
				cfg.Logger.Warn("dev mode: http and loopback endpoint URLs are allowed; never use --dev in production")
			}
			if debugAddr != "" {
				// Listen before anything starts: an address in use is refused
				// like --addr's, not logged as listening and dropped.
				ln, err := net.Listen("tcp", debugAddr)
				if err != nil {
					return fmt.Errorf("--debug-addr %s: %w", debugAddr, err)
				}
				mux := http.NewServeMux()
				mux.HandleFunc("/debug/pprof/", pprof.Index)
				mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
				mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				debugDone := make(chan struct{})
				defer func() {
					_ = srv.Close()
					<-debugDone
				}()
				cfg.Logger.Info("pprof listening", "addr", ln.Addr().String())
				go func() {
					defer close(debugDone)
					_ = srv.Serve(ln)
				}()
			}
			m, err := app.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			// SIGHUP reads the TLS certificate files again (they are also
			// reloaded when they change on disk).
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			hupDone := make(chan struct{})
			hupStopped := make(chan struct{})
			defer func() {
				close(hupDone)
				<-hupStopped
			}()
			go func() {
				defer close(hupStopped)
				for {
					select {
					case <-hupDone:
						return
					case <-hup:
					}
					_ = m.ReloadTLS() // logs its result
				}
			}()
			return m.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", app.DefaultAddr, "listen address of the API")
	f.StringVar(&cfg.DB, "db", app.DefaultDB, "store: sqlite:PATH (embedded) or postgres://… (several nodes; needs HERALD_ENCRYPTION_KEY)")
	f.BoolVar(&cfg.Dev, "dev", false, "local development: allow http:// and loopback endpoint URLs")
	f.BoolVar(&cfg.AllowHTTP, "allow-http", false, "allow plain http:// endpoint URLs")
	f.StringArrayVar(&cidrs, "allow-cidr", nil, "allow destinations in this CIDR despite the SSRF deny list (repeatable); link-local and cloud-metadata addresses only through a range inside them")
	f.StringVar(&schedule, "retry-schedule", retry.DefaultScheduleText, "upper bounds of the delays before attempts 2..N (comma-separated Go durations, each at least the one before it)")
	f.DurationVar(&cfg.AttemptTimeout, "attempt-timeout", app.DefaultAttemptTimeout, "timeout of one attempt: connect, TLS, headers and body")
	f.IntVar(&cfg.Workers, "workers", app.DefaultWorkers, "attempts in flight at once (goroutines; an attempt mostly waits on the network)")
	f.IntVar(&cfg.MaxPayloadBytes, "max-payload-bytes", app.DefaultMaxPayloadBytes, "largest event body delivered, in bytes: 1024 (1 KiB) to 1032192")
	f.StringVar(&cfg.Catalog, "catalog", "permissive", "event catalog: permissive (uncatalogued event types are published as they are) or strict (refused with 422)")
	f.StringVar(&cfg.PersonalData, "personal-data", "auto", "personal-data guard (e-mail, phone, payment card, IBAN in event data): refuse, warn or off; auto refuses for catalogued types and warns for uncatalogued ones")
	f.DurationVar(&cfg.Lease, "lease", 0, "how long a claimed delivery is leased before another worker may rescue it (default 2 × attempt timeout + 5s)")
	f.DurationVar(&cfg.RescueInterval, "rescue-interval", 5*time.Second, "how often leases of crashed workers are checked for expiry")
	f.IntVar(&cfg.EndpointConcurrency, "endpoint-concurrency", 0, "attempts in flight to one endpoint until it has answered fast three times (isolation: a slow or black-holed endpoint never holds more workers); on PostgreSQL the cap of the whole cluster, split between the nodes; 0 = workers/8")
	f.IntVar(&cfg.TenantConcurrency, "tenant-concurrency", 0, "attempts in flight for one tenant to its endpoints that have not answered fast (fairness: one tenant's slow or black-holed endpoints together never hold more workers); on PostgreSQL the cap of the whole cluster; 0 = workers/4")
	f.IntVar(&cfg.HostConcurrency, "host-concurrency", 0, "attempts in flight to one destination host (all tenants) for endpoints that have not answered fast; on PostgreSQL the cap of the whole cluster; 0 = workers/2")
	f.IntVar(&cfg.MaxEndpointsPerTenant, "max-endpoints-per-tenant", 0, "refuse creating an endpoint past this many in its tenant (422); 0 = no limit")
	f.IntVar(&cfg.FanOutChunk, "fanout-chunk", store.DefaultFanOutChunk, "most deliveries one transaction creates: a publish to more endpoints writes this many and the engine the rest, one chunk per transaction (bounds how long a publish holds the writer)")
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", time.Second, "PostgreSQL: how often a node tells the others it is alive (endpoints' caps and rate limits are split between live nodes; a node is forgotten after 10 intervals; a node joining others waits 3 intervals plus their attempt timeout before it delivers)")
	f.IntVar(&cfg.BreakerThreshold, "breaker-threshold", 5, "consecutive transport failures (no answer, 5xx) that open an endpoint's circuit")
	f.DurationVar(&cfg.BreakerCooldown, "breaker-cooldown", 30*time.Second, "how long an open circuit waits before one probe attempt")
	f.Var(newDaysValue(&cfg.DisableAfter, app.DefaultDisableAfter), "disable-after", "disable an endpoint whose every attempt failed this long (e.g. 5d, 36h, 90s; 0 = never)")
	f.IntVar(&cfg.DisableMinFailures, "disable-min-failures", delivery.DefaultDisableMinFailures, "and only once that failure streak counts at least this many failed attempts")
	f.StringVar(&cfg.PublicURL, "public-url", "", "base URL clients reach Herald at (e.g. https://herald.example.com), for the links Herald hands out (portal sessions); default: the scheme and host of each request")
	f.StringVar(&cfg.OperatorTenant, "operator-tenant", "", "tenant that also receives every operational event (endpoint.disabled, …)")
	f.IntVar(&cfg.SpikeThreshold, "dlq-spike-threshold", ops.DefaultSpikeThreshold, "dead letters of one endpoint within --dlq-spike-window that emit endpoint.dead_letter_spike (0 = off)")
	f.DurationVar(&cfg.SpikeWindow, "dlq-spike-window", 15*time.Minute, "window of the dead-letter spike alert")
	f.Var(newDaysValue(&cfg.SucceededRetention, ops.DefaultSucceededRetention), "retention", "keep succeeded deliveries and their attempts this long (e.g. 7d; 0 = forever)")
	f.Var(newDaysValue(&cfg.DeadRetention, ops.DefaultDeadRetention), "dead-letter-retention", "keep dead letters this long (e.g. 30d; 0 = forever)")
	f.DurationVar(&cfg.HousekeepingInterval, "housekeeping-interval", 5*time.Second, "period of operational events, spike checks and retention")
	f.StringVar(&debugAddr, "debug-addr", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off by default")
	f.StringVar(&cfg.TLSCertFile, "tls-cert", "", "serve HTTPS (HTTP/2) with this PEM certificate chain; reloaded when the file changes or on SIGHUP (needs --tls-key)")
	f.StringVar(&cfg.TLSKeyFile, "tls-key", "", "PEM private key of --tls-cert")
	f.StringArrayVar(&proxies, "trusted-proxy", nil, "reverse proxy address or CIDR whose X-Forwarded-For gives the client address for throttling and logs (repeatable; default none: the TCP peer is the client)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
