// Package bench is `herald bench`: reproducible performance figures for
// Herald, measured against the performance targets (docs/BENCHMARKS.md; "Performance
// targets").
//
// Every scenario runs the real binary: Herald (`herald serve --dev`, as a
// subprocess on a fresh database in a temporary directory) and the
// receivers (`herald bench receiver`, hidden, also subprocesses) listen on
// loopback; the bench process drives the load through the HTTP API and
// reads what arrived from the receivers' control endpoint
// (/_bench/stats, /_bench/latencies). Publish→arrival latency is measured
// with the machine's wall clock: the publisher stamps the send time into
// the event's data ("sent_ns") and the receiver subtracts it from the
// arrival time.
//
// A scenario prints a table and, with JSON output, exactly one JSON object
// as the last line of stdout. Progress goes to stderr.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Scenarios lists the scenarios in the order of docs/BENCHMARKS.md.
var Scenarios = []string{"drain", "latency", "publish", "isolation", "backlog", "inbound", "fairness", "fanout"}

// Options configures one run. Zero fields take the defaults of the
// scenario (Defaults).
type Options struct {
	// Exe is the herald binary started as `serve` and `bench receiver`;
	// default os.Executable().
	Exe string
	// DB is "sqlite" (a fresh sqlite:<tmpdir>/…/bench.db per Herald start),
	// "sqlite:PATH", or a postgres:// URL passed to serve as is.
	DB string
	// JSON prints the result as one JSON object on the last line of stdout.
	JSON bool
	// Workers is herald serve --workers (and the reference's concurrency).
	Workers int
	// RetrySchedule is herald serve --retry-schedule; empty = Herald's
	// default (backlog: "1h").
	RetrySchedule string
	// ServeArgs are extra arguments for herald serve, e.g.
	// "--endpoint-concurrency=64".
	ServeArgs []string
	// Timeout bounds the whole run.
	Timeout time.Duration
	// BodyBytes is the size of the delivered body (the event envelope).
	BodyBytes int
	// Publishers is the number of concurrent API clients that publish the
	// events of a setup phase (drain, isolation, backlog).
	Publishers int
	// Keep keeps the temporary directory (databases, logs).
	Keep bool
	// TraceSink turns tracing on in herald serve, exporting OTLP/HTTP to a
	// loopback collector the bench runs (it decodes and counts the spans);
	// without it the bench clears every OTEL_* variable, so tracing is off.
	TraceSink bool

	// Events is the number of events published (drain; isolation's and
	// backlog's throughput phases).
	Events int
	// Endpoints is the number of endpoints each event fans out to
	// (isolation: all of them, 20 % black-holed).
	Endpoints int
	// Concurrency is the number of publishing clients (publish) or the
	// cap on publishes in flight (latency, isolation).
	Concurrency int
	// Rate is the publish rate in events per second (latency, isolation).
	Rate int
	// Duration of the load (latency, publish, isolation).
	Duration time.Duration
	// Size is the number of deliveries waiting for retry (backlog).
	Size int
	// BacklogEndpoints share the backlog (backlog).
	BacklogEndpoints int
	// Deliver keeps the endpoints enabled while publishing (publish): the
	// deliveries are made during the measurement instead of being held.
	Deliver bool
	// Peer is a receiver of the same GitHub webhooks measured after Herald
	// with the same load (inbound): its ingest URL, or a command run with
	// sh -c (startPeer). Empty: Herald only.
	Peer string
	// BlackholeFraction of the endpoints never answer (isolation); 0.2.
	BlackholeFraction float64
	// BlackholesFirst: the isolation scenario's drain resumes the
	// black-holed endpoints before the healthy ones, so their backlog is
	// the tenant's oldest due.
	BlackholesFirst bool
	// SeparateA: the fanout scenario runs tenant A on a Herald process of
	// its own (its own database, writer and workers) beside B's: B's ratio
	// is then what A's fan-out costs B through the machine alone (cores,
	// disk), the bound of perfect isolation, and the target does not apply.
	SeparateA bool

	// Stdout receives the table and the JSON line; Stderr the progress.
	Stdout, Stderr io.Writer
}

// Defaults returns o with the zero fields of the scenario set.
func (o Options) Defaults(scenario string) Options {
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if o.DB == "" {
		o.DB = "sqlite"
	}
	setInt(&o.Workers, 128) // herald serve's default
	setInt(&o.BodyBytes, 512)
	setInt(&o.Publishers, 32)
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.BlackholeFraction == 0 {
		o.BlackholeFraction = 0.2
	}
	switch scenario {
	case "drain":
		setInt(&o.Events, 20000)
		setInt(&o.Endpoints, 4)
	case "latency":
		setInt(&o.Rate, 1000)
		setInt(&o.Endpoints, 1)
		setInt(&o.Concurrency, 256)
		if o.Duration == 0 {
			o.Duration = 10 * time.Second
		}
	case "publish":
		setInt(&o.Concurrency, 32)
		setInt(&o.Endpoints, 1)
		if o.Duration == 0 {
			o.Duration = 10 * time.Second
		}
	case "isolation":
		setInt(&o.Endpoints, 10)
		setInt(&o.Rate, 100)
		setInt(&o.Concurrency, 256)
		setInt(&o.Events, 2000)
		if o.Duration == 0 {
			o.Duration = 20 * time.Second
		}
	case "inbound":
		setInt(&o.Concurrency, 32)
		setInt(&o.Rate, 2000)
		if o.Duration == 0 {
			o.Duration = 10 * time.Second
		}
	case "fairness":
		setInt(&o.Endpoints, 200)
		setInt(&o.Rate, 100)
		setInt(&o.Concurrency, 64)
		if o.Duration == 0 {
			o.Duration = 20 * time.Second
		}
	case "fanout":
		setInt(&o.Endpoints, 10000)
		setInt(&o.Events, 3)
		setInt(&o.Rate, 500)
		setInt(&o.Concurrency, 64)
		if o.Duration == 0 {
			o.Duration = 10 * time.Second
		}
	case "backlog":
		setInt(&o.Size, 1000000)
		setInt(&o.BacklogEndpoints, 8)
		setInt(&o.Events, 10000)
		setInt(&o.Endpoints, 4)
		if o.RetrySchedule == "" {
			o.RetrySchedule = "1h"
		}
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	return o
}

func (o Options) validate(scenario string) error {
	positive := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("%s must be positive (got %d)", name, v)
		}
		return nil
	}
	if err := errors.Join(positive("--workers", o.Workers), positive("--body-bytes", o.BodyBytes),
		positive("--publishers", o.Publishers), positiveDur("--timeout", o.Timeout)); err != nil {
		return err
	}
	if o.BodyBytes < minBodyBytes || o.BodyBytes > 64<<10 {
		return fmt.Errorf("--body-bytes %d: must be %d–65536 (the envelope alone takes %d bytes; Herald's payload cap is 64 KiB)", o.BodyBytes, minBodyBytes, minBodyBytes)
	}
	switch {
	case o.DB == "sqlite", hasPrefixFold(o.DB, "sqlite:"), hasPrefixFold(o.DB, "postgres://"), hasPrefixFold(o.DB, "postgresql://"):
	default:
		// A URL is named by its scheme alone: it may carry a password.
		shown := strconv.Quote(o.DB)
		if scheme, _, ok := strings.Cut(o.DB, "://"); ok {
			shown = strconv.Quote(scheme + "://…")
		}
		return fmt.Errorf("--db %s: use sqlite (a fresh temporary database), sqlite:PATH or a postgres:// URL", shown)
	}
	switch scenario {
	case "latency", "isolation", "inbound", "fairness", "fanout":
		if o.Rate > 0 && o.Duration > 0 && float64(o.Rate)*o.Duration.Seconds() < 1 {
			return fmt.Errorf("--duration %s at --rate %d/s sends no event: give a duration of at least %s", o.Duration, o.Rate, time.Duration(float64(time.Second)/float64(o.Rate)))
		}
	}
	if o.Peer != "" && scenario != "inbound" {
		return fmt.Errorf("--peer is for the inbound scenario only (got %s)", scenario)
	}
	switch scenario {
	case "drain":
		return errors.Join(positive("--events", o.Events), positive("--endpoints", o.Endpoints))
	case "latency":
		return errors.Join(positive("--rate", o.Rate), positive("--endpoints", o.Endpoints), positive("--concurrency", o.Concurrency), positiveDur("--duration", o.Duration))
	case "publish":
		return errors.Join(positive("--concurrency", o.Concurrency), positiveDur("--duration", o.Duration))
	case "isolation":
		if o.Endpoints < 2 {
			return fmt.Errorf("--endpoints %d: isolation needs at least 2 endpoints (some healthy, some black-holed)", o.Endpoints)
		}
		if o.BlackholeFraction <= 0 || o.BlackholeFraction >= 1 {
			return fmt.Errorf("black-holed fraction %g: must be between 0 and 1", o.BlackholeFraction)
		}
		return errors.Join(positive("--rate", o.Rate), positive("--events", o.Events), positive("--concurrency", o.Concurrency), positiveDur("--duration", o.Duration))
	case "inbound":
		return errors.Join(positive("--rate", o.Rate), positive("--concurrency", o.Concurrency), positiveDur("--duration", o.Duration))
	case "fanout":
		return errors.Join(positive("--endpoints", o.Endpoints), positive("--events", o.Events), positive("--rate", o.Rate), positive("--concurrency", o.Concurrency), positiveDur("--duration", o.Duration))
	case "fairness":
		return errors.Join(positive("--endpoints", o.Endpoints), positive("--rate", o.Rate), positive("--concurrency", o.Concurrency), positiveDur("--duration", o.Duration))
	case "backlog":
		return errors.Join(positive("--size", o.Size), positive("--backlog-endpoints", o.BacklogEndpoints),
			positive("--events", o.Events), positive("--endpoints", o.Endpoints))
	}
	return nil
}

func positiveDur(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s must be positive (got %s)", name, d)
	}
	return nil
}

// Run runs one scenario and prints its result.
func Run(ctx context.Context, scenario string, o Options) error {
	switch scenario {
	case "drain", "latency", "publish", "isolation", "backlog", "inbound", "fairness", "fanout":
	default:
		return fmt.Errorf("unknown scenario %q: use one of %s", scenario, strings.Join(Scenarios, ", "))
	}
	o = o.Defaults(scenario)
	if err := o.validate(scenario); err != nil {
		return fmt.Errorf("bench %s: %w", scenario, err)
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: cannot find the herald binary: %w", err)
		}
		o.Exe = exe
	}
	r, err := newRunner(o, scenario)
	if err != nil {
		return err
	}
	defer r.close()

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	started := time.Now()
	machine := readMachine()
	var res *Result
	switch scenario {
	case "drain":
		res, err = r.drain(ctx)
	case "latency":
		res, err = r.latency(ctx)
	case "publish":
		res, err = r.publish(ctx)
	case "isolation":
		res, err = r.isolation(ctx)
	case "backlog":
		res, err = r.backlog(ctx)
	case "inbound":
		res, err = r.inbound(ctx)
	case "fairness":
		res, err = r.fairness(ctx)
	case "fanout":
		res, err = r.fanout(ctx)
	}
	if err != nil {
		r.showHeraldLogs()
		return fmt.Errorf("bench %s: %w", scenario, r.explain(ctx, err))
	}
	machine.LoadAvgEnd = loadAvg()
	if r.sink != nil {
		res.add("trace_spans_received", r.sink.spans.Load(), "spans")
		res.add("trace_exports", r.sink.requests.Load(), "requests")
		res.Notes = append(res.Notes, "tracing on: OTLP/HTTP (protobuf) to the bench's loopback collector, SDK defaults (batch of 512, 5 s schedule); spans still batched at the end are not counted")
	}
	res.Scenario = scenario
	res.Machine = machine
	res.DB = dbKind(o.DB)
	res.StartedAt = started.UTC()
	res.Elapsed = time.Since(started)
	res.ServeArgs = r.serveArgsShown
	return res.print(o.Stdout, o.JSON)
}

// explain turns a context error into one that says which limit was hit.
func (r *runner) explain(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("time limit --timeout %s reached: %w", r.o.Timeout, err)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return err
}

func dbKind(db string) string {
	if hasPrefixFold(db, "postgres") {
		return "postgres"
	}
	return "sqlite"
}

// hasPrefixFold reports whether s begins with prefix, ASCII case ignored
// (URL schemes are case-insensitive: RFC 3986 §3.1).
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// Field is one figure of a result.
type Field struct {
	Key   string
	Value any
	Unit  string // shown in the table only
}

// Target is a performance target (docs/BENCHMARKS.md) checked by a result.
type Target struct {
	Metric string  `json:"metric"`
	Op     string  `json:"op"` // ">=" or "<="
	Value  float64 `json:"value"`
	Actual float64 `json:"actual"`
	Met    bool    `json:"met"`
	// Applies is false when the run's size differs from the target's
	// (e.g. a backlog smaller than 1,000,000): the figure is indicative.
	Applies bool   `json:"applies"`
	Note    string `json:"note,omitempty"`
}

// Result is the outcome of one scenario.
type Result struct {
	Scenario  string
	DB        string
	Machine   Machine
	StartedAt time.Time
	Elapsed   time.Duration
	ServeArgs []string
	Fields    []Field
	Targets   []Target
	Notes     []string
}

func (res *Result) add(key string, value any, unit string) {
	res.Fields = append(res.Fields, Field{Key: key, Value: value, Unit: unit})
}

// target records a performance target; a non-empty note says why it does not
// apply to this run's size.
func (res *Result) target(metric, op string, value, actual float64, note string) {
	met := actual >= value
	if op == "<=" {
		met = actual <= value
	}
	res.Targets = append(res.Targets, Target{Metric: metric, Op: op, Value: value, Actual: actual, Met: met, Applies: note == "", Note: note})
}

// targetsMet is true when every applicable target is met, nil when none
// applies.
func (res *Result) targetsMet() *bool {
	var met *bool
	for _, t := range res.Targets {
		if !t.Applies {
			continue
		}
		v := t.Met && (met == nil || *met)
		met = &v
	}
	return met
}

// JSON renders the result as one JSON object (no newline), the fields in
// order.
func (res *Result) JSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	marshal := func(v any) ([]byte, error) {
		var vb bytes.Buffer
		enc := json.NewEncoder(&vb)
		enc.SetEscapeHTML(false) // ">=" and "<tmpdir>" stay readable
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(vb.Bytes(), []byte("\n")), nil
	}
	put := func(k string, v any) error {
		enc, err := marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(enc)
		return nil
	}
	head := []Field{
		{Key: "scenario", Value: res.Scenario},
		{Key: "db", Value: res.DB},
		{Key: "started_at", Value: res.StartedAt.Format(time.RFC3339)},
		{Key: "elapsed_seconds", Value: round(res.Elapsed.Seconds(), 3)},
	}
	for _, f := range append(head, res.Fields...) {
		if err := put(f.Key, f.Value); err != nil {
			return nil, err
		}
	}
	targets := res.Targets
	if targets == nil {
		targets = []Target{}
	}
	serveArgs := res.ServeArgs
	if serveArgs == nil {
		serveArgs = []string{}
	}
	notes := res.Notes
	if notes == nil {
		notes = []string{}
	}
	for _, f := range []Field{{Key: "targets", Value: targets}, {Key: "targets_met", Value: res.targetsMet()},
		{Key: "machine", Value: res.Machine}, {Key: "serve_args", Value: serveArgs}, {Key: "notes", Value: notes}} {
		if err := put(f.Key, f.Value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (res *Result) print(w io.Writer, asJSON bool) error {
	m := res.Machine
	fmt.Fprintf(w, "herald bench %s — %s\n", res.Scenario, res.DB)
	fmt.Fprintf(w, "machine: %d cores (GOMAXPROCS %d), %s memory, %s %s/%s%s\n", m.Cores, m.GOMAXPROCS,
		humanBytes(m.MemTotalBytes), m.GoVersion, m.OS, m.Arch, cpuSuffix(m.CPUModel))
	fmt.Fprintf(w, "load average: %s at start, %s at end\n", fmtLoad(m.LoadAvgStart), fmtLoad(m.LoadAvgEnd))
	if len(res.ServeArgs) > 0 {
		fmt.Fprintf(w, "herald %s\n", strings.Join(res.ServeArgs, " "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range res.Fields {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Key, fmtValue(f.Value), f.Unit)
	}
	tw.Flush()
	if len(res.Targets) > 0 {
		fmt.Fprintln(w, "targets (docs/BENCHMARKS.md):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range res.Targets {
			verdict := "met"
			if !t.Met {
				verdict = "NOT MET"
			}
			if !t.Applies {
				// Indicative: the run's size is not the target's.
				verdict = "does not apply; would be " + strings.ToLower(verdict)
			}
			note := ""
			if t.Note != "" {
				note = "  (" + t.Note + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s %s\t%s%s\n", t.Metric, fmtValue(t.Actual), t.Op, fmtValue(t.Value), verdict, note)
		}
		tw.Flush()
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "elapsed: %s\n", res.Elapsed.Round(time.Millisecond))
	if asJSON {
		j, err := res.JSON()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", j)
		return err
	}
	return nil
}

func cpuSuffix(model string) string {
	if model == "" {
		return ""
	}
	return ", " + model
}

func fmtLoad(l [3]float64) string {
	return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case time.Duration:
		return x.String()
	case []string:
		return strings.Join(x, " ")
	case map[string]float64:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+fmtValue(x[k]))
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprint(v)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// round rounds x to d decimals.
func round(x float64, d int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func randomKey32() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}
