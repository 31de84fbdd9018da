package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herald-webhooks/herald/internal/bench"
)

func init() { extraCommands = append(extraCommands, newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var o bench.Options
	cmd := &cobra.Command{
		Use:   "bench SCENARIO",
		Short: "Measure Herald against its performance targets (drain, latency, publish, isolation, backlog, inbound, fairness, fanout)",
		Long: `Measure Herald against the performance targets listed in docs/BENCHMARKS.md.

Each scenario starts "herald serve --dev" (this binary) on a fresh database in a
temporary directory and the receivers ("herald bench receiver") as separate
processes on loopback, drives the load through the HTTP API, and prints a table
with the machine (cores, GOMAXPROCS, memory, Go version, load average). With
--json the last line of stdout is one JSON object with the same figures.
Progress goes to stderr.

Scenarios:
  drain      N events published to M paused endpoints; resume; deliveries/s
             until every delivery arrived, against plain net/http posts of the
             same bodies to the same receiver at --workers concurrency (ratio)
  latency    publish at --rate for --duration (open loop); publish → arrival
             p50/p95/p99
  publish    --concurrency clients publishing for --duration; durable events/s
  isolation  20 % of --endpoints never answer; healthy endpoints' p99 and
             throughput against the same run without them
  backlog    --size deliveries waiting for retry (endpoints answering 429
             Retry-After: 3600); fresh-delivery throughput against an empty
             queue, and Herald's RSS
  inbound    --concurrency providers sending signed requests to POST /in/{source}
             for --duration (requests/s; after an uncounted warm-up), then
             --rate requests/s open loop (ack p50/p99); with --peer, the same
             two phases against another receiver of the same webhooks
             (bench/peers/), and the ratio
  fairness   tenant A's --endpoints never answer, A publishes 1 event/s to
             them; tenant B publishes --rate events/s to a healthy endpoint;
             B's publish → arrival p50/p99 against B alone (p99_ratio)
  fanout     tenant A publishes --events events to --endpoints endpoints each
             while tenant B publishes --rate events/s; B's publish p99 against
             B alone (publish_p99_ratio), A's deliveries/s, each once

Examples:
  herald bench drain --events 20000 --endpoints 4 --workers 128
  herald bench latency --rate 1000 --duration 10s --json
  herald bench backlog --size 100000

Every flag except --db has an environment twin: --body-bytes is
HERALD_BODY_BYTES (HERALD_DB names the server's own database and is ignored).`,
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{envNoTwinsAnnotation: "db"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return fmt.Errorf("unknown scenario %q: use one of %s", args[0], strings.Join(bench.Scenarios, ", "))
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.DB, "db", "sqlite", "store of herald serve: sqlite (a fresh temporary database per run), sqlite:PATH, or a postgres:// URL (passed as is)")
	pf.BoolVar(&o.JSON, "json", false, "print the result as one JSON object on the last line of stdout")
	pf.IntVar(&o.Workers, "workers", 128, "herald serve --workers; also the reference's concurrency (drain)")
	pf.StringVar(&o.RetrySchedule, "retry-schedule", "", "herald serve --retry-schedule (default: Herald's; backlog: 1h)")
	pf.StringArrayVar(&o.ServeArgs, "serve-arg", nil, "extra argument for herald serve, e.g. --serve-arg=--endpoint-concurrency=64 (repeatable)")
	pf.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "time limit of the whole run")
	pf.IntVar(&o.BodyBytes, "body-bytes", 512, "size of the delivered body (the event envelope), in bytes")
	pf.IntVar(&o.Publishers, "publishers", 32, "concurrent API clients publishing the events of a setup phase")
	pf.BoolVar(&o.Keep, "keep", false, "keep the temporary directory (databases, Herald's log)")
	pf.BoolVar(&o.TraceSink, "trace-sink", false, "turn tracing on in herald serve, exporting OTLP/HTTP to a loopback collector run by the bench (without it, OTEL_* variables are cleared: tracing off)")

	type flagSet uint
	const (
		fEvents flagSet = 1 << iota
		fEndpoints
		fConcurrency
		fRate
		fDuration
		fSize
		fDeliver
		fPeer
		fBlackholesFirst
		fSeparateA
	)
	scenario := func(name, short string, flags flagSet) *cobra.Command {
		// The sizes are per scenario (their defaults differ); the
		// persistent flags above are shared.
		var so bench.Options
		c := &cobra.Command{
			Use:   name,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				// HERALD_DB names the server's own database: never
				// benchmark into it by accident (bindEnv skips --db, see
				// envNoTwinsAnnotation on bench).
				if err := bindEnv(c); err != nil {
					return err
				}
				// Zero means "the scenario's default" to bench.Options, not on
				// the command line: a 0 given there is refused.
				var zero []string
				c.Flags().Visit(func(f *pflag.Flag) {
					switch f.Value.String() {
					case "0", "0s":
						zero = append(zero, "--"+f.Name)
					}
				})
				if len(zero) > 0 {
					return fmt.Errorf("bench %s: %s must be positive (got 0)", name, strings.Join(zero, ", "))
				}
				opts := o
				opts.Events, opts.Endpoints, opts.Concurrency, opts.Rate = so.Events, so.Endpoints, so.Concurrency, so.Rate
				opts.Duration, opts.Size, opts.BacklogEndpoints, opts.Deliver = so.Duration, so.Size, so.BacklogEndpoints, so.Deliver
				opts.Peer, opts.BlackholesFirst, opts.SeparateA = so.Peer, so.BlackholesFirst, so.SeparateA
				opts.Stdout, opts.Stderr = c.OutOrStdout(), c.ErrOrStderr()
				return bench.Run(c.Context(), name, opts)
			},
		}
		f := c.Flags()
		d := bench.Options{}.Defaults(name)
		if flags&fEvents != 0 {
			f.IntVar(&so.Events, "events", d.Events, "events published")
		}
		if flags&fEndpoints != 0 {
			f.IntVar(&so.Endpoints, "endpoints", d.Endpoints, "endpoints every event fans out to")
		}
		if flags&fConcurrency != 0 {
			usage := "publishes in flight at most (open loop)"
			switch name {
			case "publish":
				usage = "concurrent publishing clients"
			case "inbound":
				usage = "providers sending at once (throughput phase); requests in flight at most in the open-loop phase"
			}
			f.IntVar(&so.Concurrency, "concurrency", d.Concurrency, usage)
		}
		if flags&fRate != 0 {
			usage := "events published per second (open loop)"
			if name == "inbound" {
				usage = "requests per second of the latency phase (open loop)"
			}
			f.IntVar(&so.Rate, "rate", d.Rate, usage)
		}
		if flags&fDuration != 0 {
			f.DurationVar(&so.Duration, "duration", d.Duration, "how long the load runs")
		}
		if flags&fSize != 0 {
			f.IntVar(&so.Size, "size", d.Size, "deliveries waiting for retry")
			f.IntVar(&so.BacklogEndpoints, "backlog-endpoints", d.BacklogEndpoints, "endpoints sharing the backlog")
		}
		if flags&fDeliver != 0 {
			f.BoolVar(&so.Deliver, "deliver", false, "keep the endpoints enabled: deliveries are made during the run (default: held, endpoints paused)")
		}
		if flags&fBlackholesFirst != 0 {
			f.BoolVar(&so.BlackholesFirst, "blackholes-first", false, "resume the black-holed endpoints before the healthy ones in the throughput part: their backlog is then the tenant's oldest due (a dead endpoint's backlog beside its tenant's healthy endpoints)")
		}
		if flags&fSeparateA != 0 {
			f.BoolVar(&so.SeparateA, "separate-a", false, "run tenant A on a Herald process of its own (its own database): B's ratio is then what the machine alone costs B beside A's fan-out, the bound of perfect isolation (the target does not apply)")
		}
		if flags&fPeer != 0 {
			f.StringVar(&so.Peer, "peer", "", "also measure this receiver of the same GitHub webhooks, in the same run with the same load: "+
				"an ingest URL, or a command started with PEER_PORT, PEER_SECRET and PEER_FORWARD_URL set "+
				"(e.g. 'node bench/peers/express-bullmq/server.js'; docs/BENCHMARKS.md)")
		}
		return c
	}
	cmd.AddCommand(
		scenario("drain", "Delivery throughput of a published backlog against plain HTTP posts", fEvents|fEndpoints),
		scenario("latency", "Publish → arrival latency at a fixed rate", fEndpoints|fConcurrency|fRate|fDuration),
		scenario("publish", "Durable publish throughput of concurrent API clients", fEndpoints|fConcurrency|fDuration|fDeliver),
		scenario("isolation", "Healthy endpoints' latency and throughput with 20 % black holes", fEvents|fEndpoints|fConcurrency|fRate|fDuration|fBlackholesFirst),
		scenario("backlog", "Fresh-delivery throughput and RSS with deliveries waiting for retry", fEvents|fEndpoints|fSize),
		scenario("inbound", "Inbound gateway throughput and ack latency (GitHub-signed requests), optionally beside a --peer", fConcurrency|fRate|fDuration|fPeer),
		scenario("fairness", "Tenant B's latency beside tenant A's --endpoints hanging endpoints, against B alone", fEndpoints|fConcurrency|fRate|fDuration),
		scenario("fanout", "Tenant B's publish latency while tenant A fans out to --endpoints endpoints, against B alone", fEvents|fEndpoints|fConcurrency|fRate|fDuration|fSeparateA),
		newBenchReceiverCmd(),
	)
	return cmd
}

// newBenchReceiverCmd is the receiver process the bench starts: it answers
// fast (or never, --mode blackhole) and serves what arrived on
// /_bench/stats and /_bench/latencies.
func newBenchReceiverCmd() *cobra.Command {
	var (
		cfg       bench.ReceiverConfig
		stdinExit bool
	)
	cmd := &cobra.Command{
		Use:         "receiver",
		Short:       "A loopback receiver for herald bench (internal)",
		Hidden:      true,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{envTwinsAnnotation: ""}, // no bindEnv: the bench passes every setting as a flag
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if stdinExit {
				var cancel func()
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				go func() {
					buf := make([]byte, 64)
					for {
						if _, err := os.Stdin.Read(buf); err != nil {
							cancel()
							return
						}
					}
				}()
			}
			return bench.RunReceiver(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:0", "listen address (port 0 picks a free one, printed at start)")
	f.StringVar(&cfg.Mode, "mode", bench.ModeOK, "ok (answer --status at once) or blackhole (read the request, never answer)")
	f.IntVar(&cfg.Status, "status", 204, "status answered in ok mode")
	f.StringVar(&cfg.RetryAfter, "retry-after", "", "Retry-After header sent with every answer")
	f.BoolVar(&cfg.Track, "track", false, "record every (path, X-Event-Id) once: duplicates and latencies")
	f.BoolVar(&stdinExit, "exit-on-stdin-eof", false, "exit when stdin closes (the bench process is gone)")
	return cmd
}
