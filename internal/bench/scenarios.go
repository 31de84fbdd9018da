package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
)

// stallAfter is how long a wait for arrivals may see no progress before
// the bench gives up with an error.
const stallAfter = 60 * time.Second

// endpoints creates n endpoints of tenant at base+prefix+"<name><i>".
func (r *runner) endpoints(ctx context.Context, h *heraldProc, tenant, base, prefix, name string, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		id, err := h.api.createEndpoint(ctx, tenant, base+prefix+name+itoa(i))
		if err != nil {
			return nil, fmt.Errorf("create endpoint: %w", err)
		}
		ids[i] = id
	}
	return ids, nil
}

func (r *runner) setStates(ctx context.Context, h *heraldProc, ids []string, action string) error {
	for _, id := range ids {
		if err := h.api.setState(ctx, id, action); err != nil {
			return fmt.Errorf("%s endpoint: %w", action, err)
		}
	}
	return nil
}

// drainRun is one drain measurement: n events published to m paused
// endpoints, then every endpoint resumed and the clock run until every
// delivery arrived.
type drainRun struct {
	Events, Endpoints int
	Deliveries        int64
	Publish           time.Duration // publishing the events (setup)
	PublishRetries    int           // setup publishes tried again (timeouts, 5xx)
	Resume            time.Duration // the resume calls (inside Drain)
	Drain             time.Duration // first resume call to the last arrival
	Duplicates        int64
	HeraldCPU         float64       // seconds of CPU Herald used during Drain
	ReceiverCPU       float64       // seconds of CPU the receiver used during Drain
	RefBefore         time.Duration // the reference just before the drain
	RefAfter          time.Duration // and just after
	// The CPU seconds of the reference run before the drain: the
	// receiver's, and the bench process's (the reference's clients, and
	// the bench's poll of the receiver's arrival count).
	RefReceiverCPU, RefClientCPU float64
}

func (d drainRun) perSecond() float64 { return perSecond(d.Deliveries, d.Drain) }

// referencePerSecond is the mean of the two reference runs.
func (d drainRun) referencePerSecond() float64 {
	return round((perSecond(d.Deliveries, d.RefBefore)+perSecond(d.Deliveries, d.RefAfter))/2, 1)
}

// measureDrain runs one drain under label (tenant and receiver paths); with
// withReference, the plain-HTTP reference runs on the same receiver before
// the endpoints are resumed (Herald is idle then).
func (r *runner) measureDrain(ctx context.Context, h *heraldProc, rcv *receiverProc, label string, n, m int, withReference bool) (drainRun, error) {
	d := drainRun{Events: n, Endpoints: m, Deliveries: int64(n) * int64(m)}
	tenant := label + "-" + r.runID
	prefix := "/" + label + "/"
	ids, err := r.endpoints(ctx, h, tenant, rcv.base, prefix, "e", m)
	if err != nil {
		return d, err
	}
	if err := r.setStates(ctx, h, ids, "pause"); err != nil {
		return d, err
	}
	maker := newEventMaker(tenant, "bench."+label, r.o.BodyBytes)
	r.logf("%s: publishing %d events to %d paused endpoints (%d publishers)", label, n, m, r.o.Publishers)
	t := time.Now()
	retries, err := publishAll(ctx, h.api, maker, n, r.o.Publishers, "bench-"+tenant+"-")
	if err != nil {
		return d, err
	}
	d.Publish, d.PublishRetries = time.Since(t), retries

	// The reference runs just before and just after the drain, and the
	// figure is their mean, so a change of the machine's load during the
	// run weighs on both sides alike.
	var bodies [][]byte
	runReference := func(path string) (time.Duration, error) {
		if bodies == nil {
			bodies = make([][]byte, min(n, 4096))
			for i := range bodies {
				bodies[i] = maker.envelope(i, 0)
			}
		}
		r.logf("%s: reference: %d plain HTTP posts of %d-byte bodies, concurrency %d", label, d.Deliveries, len(bodies[0]), r.o.Workers)
		t0 := time.Now()
		if err := reference(ctx, rcv.base+path, bodies, int(d.Deliveries), r.o.Workers); err != nil {
			return 0, err
		}
		st, err := r.waitArrivals(ctx, rcv, nil, path, d.Deliveries, stallAfter)
		if err != nil {
			return 0, err
		}
		return time.Duration(st.LastNS - t0.UnixNano()), nil
	}
	if withReference {
		rcv0, self0 := procCPU(rcv.pid()), procCPU(os.Getpid())
		if d.RefBefore, err = runReference("/ref/" + label + "/before"); err != nil {
			return d, err
		}
		d.RefReceiverCPU = round(procCPU(rcv.pid())-rcv0, 2)
		d.RefClientCPU = round(procCPU(os.Getpid())-self0, 2)
	}

	r.logf("%s: resuming %d endpoints; draining %d deliveries", label, m, d.Deliveries)
	cpu0, rcvCPU0 := procCPU(h.pid()), procCPU(rcv.pid())
	t0 := time.Now()
	if err := r.setStates(ctx, h, ids, "resume"); err != nil {
		return d, err
	}
	d.Resume = time.Since(t0)
	st, err := r.waitArrivals(ctx, rcv, h, prefix, d.Deliveries, stallAfter)
	if err != nil {
		return d, err
	}
	d.HeraldCPU = round(procCPU(h.pid())-cpu0, 2)
	d.ReceiverCPU = round(procCPU(rcv.pid())-rcvCPU0, 2)
	d.Drain = time.Duration(st.LastNS - t0.UnixNano())
	d.Duplicates = st.Duplicates
	if withReference {
		r.waitIdle(ctx, h, float64(d.Deliveries))
		if d.RefAfter, err = runReference("/ref/" + label + "/after"); err != nil {
			return d, err
		}
	}
	return d, nil
}

func secs(d time.Duration) float64 { return round(d.Seconds(), 3) }

// heraldCounters adds Herald's own counters that explain a figure.
func (r *runner) heraldCounters(ctx context.Context, res *Result, h *heraldProc) {
	pv, err := h.api.metrics(ctx)
	if err != nil {
		res.Notes = append(res.Notes, "could not read herald /metrics: "+err.Error())
		return
	}
	res.add("herald_deferred", pv.byLabel("herald_deliveries_deferred_total"), "deliveries put back without an attempt, by reason")
	res.add("herald_attempts", pv.byLabel("herald_attempts_total"), "")
	res.add("herald_circuits_opened", pv.sum("herald_circuit_breaker_opened_total"), "")
}

// drainTarget is the drain ratio target (docs/BENCHMARKS.md) for the store.
// drainTarget is the drain ratio the run is held to: 0.6 of plain HTTP on
// SQLite (0.8 is the goal beyond it), 0.45 on PostgreSQL
// (docs/BENCHMARKS.md).
func (r *runner) drainTarget() float64 {
	if dbKind(r.o.DB) == "postgres" {
		return 0.45
	}
	return 0.6
}

func (r *runner) drain(ctx context.Context) (*Result, error) {
	o := r.o
	rcv, h, err := r.startTrackedPair(ctx)
	if err != nil {
		return nil, err
	}
	d, err := r.measureDrain(ctx, h, rcv, "drain", o.Events, o.Endpoints, true)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	res.add("events", o.Events, "")
	res.add("endpoints", o.Endpoints, "")
	res.add("deliveries", d.Deliveries, "")
	res.add("workers", o.Workers, "herald serve --workers")
	res.add("reference_concurrency", o.Workers, "plain net/http clients")
	res.add("body_bytes", o.BodyBytes, "delivered body")
	res.add("publish_seconds", secs(d.Publish), "setup: publishing the events, endpoints paused")
	res.add("publish_events_per_second", perSecond(int64(o.Events), d.Publish), fmt.Sprintf("setup, %d publishers", o.Publishers))
	res.add("publish_retries", d.PublishRetries, "setup publishes tried again (timeout, 5xx)")
	res.add("resume_seconds", secs(d.Resume), "included in drain_seconds")
	res.add("drain_seconds", secs(d.Drain), "first resume call → last arrival")
	res.add("deliveries_per_second", d.perSecond(), "")
	res.add("reference_before_per_second", perSecond(d.Deliveries, d.RefBefore), "plain HTTP, just before the drain")
	res.add("reference_after_per_second", perSecond(d.Deliveries, d.RefAfter), "plain HTTP, just after the drain")
	res.add("reference_per_second", d.referencePerSecond(), "mean of the two")
	ratioV := ratio(d.perSecond(), d.referencePerSecond())
	res.add("ratio", ratioV, "deliveries / reference")
	res.add("duplicates", d.Duplicates, "deliveries that arrived twice")
	res.add("herald_cpu_seconds", d.HeraldCPU, "during the drain")
	perDelivery := func(cpu float64) float64 { return round(cpu*1e6/float64(d.Deliveries), 1) }
	res.add("herald_cpu_us_per_delivery", perDelivery(d.HeraldCPU), "during the drain")
	res.add("receiver_cpu_us_per_delivery", perDelivery(d.ReceiverCPU), "the receiver's, during the drain")
	res.add("reference_receiver_cpu_us_per_request", perDelivery(d.RefReceiverCPU), "the receiver's, during the reference before the drain")
	res.add("reference_client_cpu_us_per_request", perDelivery(d.RefClientCPU), "the bench process's (the reference's clients and the arrival poll)")
	// The CPU a delivery may cost Herald at the target ratio when the
	// cores are the limit: at that rate, what the receiver leaves of the
	// machine's cores, per delivery. A Herald above it cannot reach the
	// target on this machine whatever its pipeline does.
	budget := 0.0
	if rate := r.drainTarget() * d.referencePerSecond(); rate > 0 {
		budget = round(float64(runtime.NumCPU())*1e6/rate-perDelivery(d.ReceiverCPU), 1)
	}
	res.add("herald_cpu_budget_us_per_delivery", budget, fmt.Sprintf("at ratio %.2g, the %d cores (runtime.NumCPU: a CPU quota is not seen) less the receiver's share, per delivery", r.drainTarget(), runtime.NumCPU()))
	r.heraldCounters(ctx, res, h)
	res.target("ratio", ">=", r.drainTarget(), ratioV, "")
	return res, nil
}

func (r *runner) latency(ctx context.Context) (*Result, error) {
	o := r.o
	rcv, h, err := r.startTrackedPair(ctx)
	if err != nil {
		return nil, err
	}
	tenant := "latency-" + r.runID
	if _, err := r.endpoints(ctx, h, tenant, rcv.base, "/lat/", "e", o.Endpoints); err != nil {
		return nil, err
	}
	maker := newEventMaker(tenant, "bench.latency", o.BodyBytes)
	r.logf("publishing %d events/s for %s to %d endpoint(s)", o.Rate, o.Duration, o.Endpoints)
	cpu0 := procCPU(h.pid())
	ol := publishOpenLoop(ctx, h.api, maker, o.Rate, o.Duration, o.Concurrency)
	cpu := procCPU(h.pid()) - cpu0
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if ol.OK == 0 {
		return nil, fmt.Errorf("no publish succeeded: %v", ol.FirstErr)
	}
	want := int64(ol.OK) * int64(o.Endpoints)
	st, err := r.waitArrivals(ctx, rcv, h, "/lat/", want, stallAfter)
	if err != nil {
		return nil, err
	}
	lats, err := rcv.rc.latencies(ctx, "/lat/")
	if err != nil {
		return nil, err
	}
	p := percentiles(lats)
	call := percentiles(ol.CallNS)
	res := &Result{}
	res.add("rate", o.Rate, "events/s offered (open loop)")
	res.add("duration_seconds", secs(o.Duration), "")
	res.add("endpoints", o.Endpoints, "")
	res.add("workers", o.Workers, "")
	res.add("body_bytes", o.BodyBytes, "")
	res.add("events_sent", ol.Sent, "")
	res.add("events_published", ol.OK, "2xx answers")
	res.add("publish_errors", ol.Errors, "")
	res.add("late_sends", ol.Late, fmt.Sprintf("sends > %s behind their slot", lateAfter))
	res.add("max_send_lag_ms", round(float64(ol.MaxLag)/1e6, 3), "")
	res.add("achieved_rate", perSecond(int64(ol.OK), ol.Elapsed), "events/s")
	res.add("deliveries", st.Unique, "")
	res.add("duplicates", st.Duplicates, "")
	res.add("p50_ms", p.P50, "publish → arrival")
	res.add("p95_ms", p.P95, "")
	res.add("p99_ms", p.P99, "")
	res.add("max_ms", p.Max, "")
	res.add("publish_p50_ms", call.P50, "the publish call")
	res.add("publish_p99_ms", call.P99, "")
	res.add("herald_cpu_us_per_event", round(cpu*1e6/float64(ol.OK), 1), "while publishing: the publishes and their deliveries")
	r.heraldCounters(ctx, res, h)
	note := ""
	if o.Rate != 1000 {
		note = fmt.Sprintf("the target is at 1000 events/s; this run offered %d/s", o.Rate)
	}
	// p99 ≤ 5 ms on SQLite, ≤ 10 ms on PostgreSQL (docs/BENCHMARKS.md).
	limit := 5.0
	if dbKind(o.DB) == "postgres" {
		limit = 10
	}
	res.target("p99_ms", "<=", limit, p.P99, note)
	if ol.FirstErr != nil {
		res.Notes = append(res.Notes, "first publish error: "+ol.FirstErr.Error())
	}
	return res, nil
}

func (r *runner) publish(ctx context.Context) (*Result, error) {
	o := r.o
	rcv, h, err := r.startTrackedPair(ctx)
	if err != nil {
		return nil, err
	}
	tenant := "publish-" + r.runID
	ids, err := r.endpoints(ctx, h, tenant, rcv.base, "/pub/", "e", o.Endpoints)
	if err != nil {
		return nil, err
	}
	if !o.Deliver {
		if err := r.setStates(ctx, h, ids, "pause"); err != nil {
			return nil, err
		}
	}
	maker := newEventMaker(tenant, "bench.publish", o.BodyBytes)
	r.logf("%d clients publishing for %s (%d endpoint(s), deliveries %s)", o.Concurrency, o.Duration, o.Endpoints,
		map[bool]string{true: "made during the run", false: "held: endpoints paused"}[o.Deliver])
	cpu0 := procCPU(h.pid())
	cl := publishClosedLoop(ctx, h.api, maker, o.Concurrency, o.Duration)
	cpu := round(procCPU(h.pid())-cpu0, 2)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cl.OK == 0 {
		return nil, fmt.Errorf("no publish succeeded: %v", cl.FirstErr)
	}
	p := percentiles(cl.CallNS)
	eps := perSecond(int64(cl.OK), cl.Elapsed)
	res := &Result{}
	res.add("clients", o.Concurrency, "")
	res.add("duration_seconds", secs(cl.Elapsed), "")
	res.add("endpoints", o.Endpoints, "deliveries per event")
	res.add("deliveries_held", !o.Deliver, "endpoints paused: delivery rows written, not sent")
	res.add("body_bytes", o.BodyBytes, "")
	res.add("events", cl.OK, "2xx answers, each committed before the answer")
	res.add("errors", cl.Errors, "")
	res.add("events_per_second", eps, "")
	res.add("p50_ms", p.P50, "publish call")
	res.add("p99_ms", p.P99, "")
	res.add("max_ms", p.Max, "")
	res.add("herald_cpu_seconds", cpu, "")
	if dbKind(o.DB) == "sqlite" {
		res.target("events_per_second", ">=", 10000, eps, "")
	}
	if cl.FirstErr != nil {
		res.Notes = append(res.Notes, "first publish error: "+cl.FirstErr.Error())
	}
	return res, nil
}

// isoPhase is one half of the isolation scenario.
type isoPhase struct {
	lat            pcts
	latOK, late    int
	tput           drainRun
	bhRequests     int64
	publishRetries int
	deferred       map[string]float64
	circuits       float64
}

func (r *runner) isolation(ctx context.Context) (*Result, error) {
	o := r.o
	nBH := max(1, int(math.Round(float64(o.Endpoints)*o.BlackholeFraction)))
	healthy := o.Endpoints - nBH
	if healthy < 1 {
		return nil, fmt.Errorf("--endpoints %d with %g black-holed leaves no healthy endpoint", o.Endpoints, o.BlackholeFraction)
	}
	base, err := r.isolationPhase(ctx, "baseline", healthy, 0)
	if err != nil {
		return nil, fmt.Errorf("baseline (no black holes): %w", err)
	}
	bh, err := r.isolationPhase(ctx, "blackholes", healthy, nBH)
	if err != nil {
		return nil, fmt.Errorf("with %d black holes: %w", nBH, err)
	}
	p99Ratio := ratio(bh.lat.P99, base.lat.P99)
	tputRatio := ratio(bh.tput.perSecond(), base.tput.perSecond())
	res := &Result{}
	res.add("endpoints", o.Endpoints, "")
	res.add("blackholed", nBH, "accept, read, never answer")
	res.add("healthy_endpoints", healthy, "")
	res.add("workers", o.Workers, "")
	res.add("rate", o.Rate, "events/s offered in the latency part")
	res.add("duration_seconds", secs(o.Duration), "latency part")
	res.add("events", o.Events, "throughput part (drain)")
	first := 0
	if o.BlackholesFirst {
		first = 1
	}
	res.add("blackholes_first", first, "1: the throughput part resumed the black holes' backlog first (the tenant's oldest due)")
	res.add("baseline_p50_ms", base.lat.P50, "healthy endpoints, publish → arrival")
	res.add("baseline_p99_ms", base.lat.P99, "")
	res.add("baseline_deliveries_per_second", base.tput.perSecond(), "healthy endpoints, drain")
	res.add("blackhole_p50_ms", bh.lat.P50, "")
	res.add("blackhole_p99_ms", bh.lat.P99, "")
	res.add("blackhole_deliveries_per_second", bh.tput.perSecond(), "")
	res.add("p99_ratio", p99Ratio, "with / without black holes")
	res.add("throughput_ratio", tputRatio, "with / without black holes")
	res.add("late_sends", base.late+bh.late, "")
	res.add("publish_retries", base.publishRetries+bh.publishRetries, "setup publishes tried again (timeout, 5xx)")
	res.add("blackhole_requests", bh.bhRequests, "attempts that reached a black hole")
	res.add("baseline_herald_deferred", base.deferred, "without black holes")
	res.add("herald_deferred", bh.deferred, "with black holes")
	res.add("herald_circuits_opened", bh.circuits, "with black holes")
	note := ""
	if o.BlackholeFraction != 0.2 {
		note = fmt.Sprintf("the target is for 20 %% black holes; this run had %d of %d", nBH, o.Endpoints)
	}
	res.target("p99_ratio", "<=", 1.5, p99Ratio, note)
	res.target("throughput_ratio", ">=", 0.9, tputRatio, note)
	if o.Duration < 12*time.Second {
		res.Notes = append(res.Notes, "the latency part is shorter than the attempt timeout (10 s): no black-holed attempt timed out, so the circuit breaker was not exercised")
	}
	return res, nil
}

// isolationPhase runs one Herald with `healthy` endpoints on a fast
// receiver and nBH on a black hole: first the open-loop latency part, then
// a drain of --events for throughput.
func (r *runner) isolationPhase(ctx context.Context, label string, healthy, nBH int) (isoPhase, error) {
	o := r.o
	var ph isoPhase
	rcv, err := r.startReceiver(ctx, label+"-receiver", ModeOK, "--track")
	if err != nil {
		return ph, err
	}
	var bh *receiverProc
	if nBH > 0 {
		if bh, err = r.startReceiver(ctx, label+"-blackhole", ModeBlackhole); err != nil {
			return ph, err
		}
	}
	h, err := r.startHerald(ctx)
	if err != nil {
		return ph, err
	}
	defer func() {
		if bh != nil {
			bh.stop(2 * time.Second) // first: Herald's shutdown would wait for the hanging attempts
		}
		h.stop(15 * time.Second)
		rcv.stop(2 * time.Second)
	}()

	// Latency part.
	tenant := "isoL-" + label + "-" + r.runID
	if _, err := r.endpoints(ctx, h, tenant, rcv.base, "/isoL/", "h", healthy); err != nil {
		return ph, err
	}
	if bh != nil {
		if _, err := r.endpoints(ctx, h, tenant, bh.base, "/isoL/", "b", nBH); err != nil {
			return ph, err
		}
	}
	maker := newEventMaker(tenant, "bench.isolation", o.BodyBytes)
	r.logf("%s: publishing %d events/s for %s to %d healthy + %d black-holed endpoints", label, o.Rate, o.Duration, healthy, nBH)
	ol := publishOpenLoop(ctx, h.api, maker, o.Rate, o.Duration, o.Concurrency)
	if ctx.Err() != nil {
		return ph, ctx.Err()
	}
	if ol.OK == 0 {
		return ph, fmt.Errorf("no publish succeeded: %v", ol.FirstErr)
	}
	if _, err := r.waitArrivals(ctx, rcv, h, "/isoL/", int64(ol.OK)*int64(healthy), stallAfter); err != nil {
		return ph, err
	}
	lats, err := rcv.rc.latencies(ctx, "/isoL/")
	if err != nil {
		return ph, err
	}
	ph.lat, ph.latOK, ph.late = percentiles(lats), ol.OK, ol.Late

	// Throughput part: the healthy and black-holed endpoints of a second
	// tenant are paused, loaded and resumed together.
	tenantT := "isoT-" + label + "-" + r.runID
	ids, err := r.endpoints(ctx, h, tenantT, rcv.base, "/isoT/", "h", healthy)
	if err != nil {
		return ph, err
	}
	if bh != nil {
		more, err := r.endpoints(ctx, h, tenantT, bh.base, "/isoT/", "b", nBH)
		if err != nil {
			return ph, err
		}
		if o.BlackholesFirst { // resumed first: their backlog is the oldest due
			ids = append(more, ids...)
		} else {
			ids = append(ids, more...)
		}
	}
	if err := r.setStates(ctx, h, ids, "pause"); err != nil {
		return ph, err
	}
	makerT := newEventMaker(tenantT, "bench.isolation", o.BodyBytes)
	r.logf("%s: draining %d events to %d healthy + %d black-holed endpoints", label, o.Events, healthy, nBH)
	retries, err := publishAll(ctx, h.api, makerT, o.Events, o.Publishers, "bench-"+tenantT+"-")
	if err != nil {
		return ph, err
	}
	ph.publishRetries = retries
	t0 := time.Now()
	if err := r.setStates(ctx, h, ids, "resume"); err != nil {
		return ph, err
	}
	ph.tput = drainRun{Events: o.Events, Endpoints: healthy, Deliveries: int64(o.Events) * int64(healthy)}
	st, err := r.waitArrivals(ctx, rcv, h, "/isoT/", ph.tput.Deliveries, stallAfter)
	if err != nil {
		return ph, err
	}
	ph.tput.Drain = time.Duration(st.LastNS - t0.UnixNano())
	if bh != nil {
		if s, err := bh.rc.stats(ctx, "/"); err == nil {
			ph.bhRequests = s.Requests
		}
	}
	if pv, err := h.api.metrics(ctx); err == nil {
		ph.deferred = pv.byLabel("herald_deliveries_deferred_total")
		ph.circuits = pv.sum("herald_circuit_breaker_opened_total")
	}
	return ph, nil
}

func (r *runner) backlog(ctx context.Context) (*Result, error) {
	o := r.o
	rcv, err := r.startReceiver(ctx, "receiver", ModeOK, "--track")
	if err != nil {
		return nil, err
	}
	// The backlog's endpoints answer 429 with Retry-After: 3600: retried
	// (not a client error), no circuit breaker (not a transport failure),
	// and due in an hour.
	thr, err := r.startReceiver(ctx, "throttled", ModeOK, "--status", "429", "--retry-after", "3600")
	if err != nil {
		return nil, err
	}
	h, err := r.startHerald(ctx)
	if err != nil {
		return nil, err
	}

	r.logf("fresh traffic, empty queue")
	empty, err := r.measureDrain(ctx, h, rcv, "fresh1", o.Events, o.Endpoints, false)
	if err != nil {
		return nil, fmt.Errorf("empty queue: %w", err)
	}
	memEmpty := readProcMem(h.pid())

	// The backlog: events fanned out to BacklogEndpoints throttled
	// endpoints, each attempted once and scheduled an hour out.
	tenant := "backlog-" + r.runID
	if _, err := r.endpoints(ctx, h, tenant, thr.base, "/backlog/", "e", o.BacklogEndpoints); err != nil {
		return nil, err
	}
	nEvents := (o.Size + o.BacklogEndpoints - 1) / o.BacklogEndpoints
	total := int64(nEvents) * int64(o.BacklogEndpoints)
	maker := newEventMaker(tenant, "bench.backlog", o.BodyBytes)
	r.logf("building the backlog: %d events × %d endpoints answering 429 Retry-After 3600 = %d deliveries", nEvents, o.BacklogEndpoints, total)
	t := time.Now()
	progress := startProgress(ctx, r, thr, "/backlog/", total)
	setupRetries, err := publishAll(ctx, h.api, maker, nEvents-1, o.Publishers, "bench-"+tenant+"-")
	if err == nil {
		// The last event is published alone, so its id is known: once its
		// deliveries are scheduled, the completions before it are written.
		var last struct {
			ID string `json:"id"`
		}
		if err = h.api.call(ctx, "POST", "/v1/events", maker.publishBody(nEvents-1, time.Now().UnixNano()), &last); err == nil {
			publishDur := time.Since(t)
			r.logf("published %d events in %s; waiting for the first attempts", nEvents, publishDur.Round(time.Millisecond))
			if _, err = r.waitArrivals(ctx, thr, h, "/backlog/", total, 2*stallAfter); err == nil {
				err = r.waitScheduled(ctx, h, last.ID, o.BacklogEndpoints)
			}
		}
	}
	progress()
	if err != nil {
		return nil, fmt.Errorf("building the backlog: %w", err)
	}
	setup := time.Since(t)
	// The queue-depth gauge is read from the store at most once every few
	// seconds (metrics.StatsMaxAge): scrape until it shows the backlog.
	var pending int64
	for deadline := time.Now().Add(metrics.StatsMaxAge + 5*time.Second); ; {
		pv, err := h.api.metrics(ctx)
		if err != nil {
			return nil, err
		}
		pending = int64(pv.byLabel("herald_queue_depth")["pending"])
		if pending >= int64(total) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	r.logf("backlog ready in %s: %d deliveries pending", setup.Round(time.Millisecond), pending)
	memBacklog := readProcMem(h.pid())

	r.logf("fresh traffic, %d deliveries waiting for retry", pending)
	full, err := r.measureDrain(ctx, h, rcv, "fresh2", o.Events, o.Endpoints, false)
	if err != nil {
		return nil, fmt.Errorf("with the backlog: %w", err)
	}
	mem := readProcMem(h.pid())
	counters, err := h.api.metrics(ctx)
	if err != nil {
		return nil, err
	}

	// The machine's load drifts over a long setup: the empty-queue figure
	// is measured again on a fresh Herald right after, and the mean of the
	// two is the reference.
	h.stop(15 * time.Second)
	h2, err := r.startHerald(ctx)
	if err != nil {
		return nil, err
	}
	r.logf("fresh traffic, empty queue again (a fresh Herald)")
	empty2, err := r.measureDrain(ctx, h2, rcv, "fresh3", o.Events, o.Endpoints, false)
	if err != nil {
		return nil, fmt.Errorf("empty queue, after: %w", err)
	}
	emptyPS := round((empty.perSecond()+empty2.perSecond())/2, 1)
	tr := ratio(full.perSecond(), emptyPS)

	res := &Result{}
	res.add("size", o.Size, "requested")
	res.add("backlog_deliveries", total, "deliveries waiting for retry")
	res.add("backlog_endpoints", o.BacklogEndpoints, "answer 429, Retry-After: 3600")
	res.add("pending_deliveries", pending, "herald_queue_depth{state=pending}")
	res.add("setup_seconds", secs(setup), "publishing + first attempts")
	res.add("setup_events", nEvents, "")
	res.add("setup_publish_retries", setupRetries+empty.PublishRetries+full.PublishRetries+empty2.PublishRetries, "setup publishes tried again (timeout, 5xx)")
	res.add("workers", o.Workers, "")
	res.add("fresh_events", o.Events, "per measurement")
	res.add("fresh_endpoints", o.Endpoints, "")
	res.add("empty_before_per_second", empty.perSecond(), "fresh deliveries/s, empty queue, before the backlog")
	res.add("empty_after_per_second", empty2.perSecond(), "the same on a fresh Herald, after")
	res.add("empty_per_second", emptyPS, "mean of the two")
	res.add("backlog_per_second", full.perSecond(), "fresh deliveries/s, with the backlog")
	res.add("throughput_ratio", tr, "")
	res.add("empty_resume_seconds", secs(empty.Resume), "")
	res.add("backlog_resume_seconds", secs(full.Resume), "")
	res.add("rss_bytes", mem.RSS, "herald VmRSS after the fresh traffic")
	res.add("rss_peak_bytes", mem.Peak, "herald VmHWM")
	res.add("rss_empty_bytes", memEmpty.RSS, "VmRSS after the empty-queue run")
	res.add("rss_backlog_ready_bytes", memBacklog.RSS, "VmRSS when the backlog was ready")
	if n := dbBytes(h.db); n > 0 {
		res.add("db_bytes", n, "database file + WAL")
	}
	res.add("herald_deferred", counters.byLabel("herald_deliveries_deferred_total"), "deliveries put back without an attempt, by reason")
	res.add("herald_attempts", counters.byLabel("herald_attempts_total"), "")
	note := ""
	if total < 1000000 {
		note = fmt.Sprintf("the target is for 1,000,000 deliveries; this backlog has %d", total)
	}
	res.target("throughput_ratio", ">=", 0.8, tr, note)
	res.target("rss_bytes", "<=", 200e6, float64(mem.RSS), note)
	return res, nil
}

// waitIdle waits (at most 10 s) until Herald counted at least `attempts`
// attempts, so its last completions are written before a measurement
// that should see it idle.
func (r *runner) waitIdle(ctx context.Context, h *heraldProc, attempts float64) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pv, err := h.api.metrics(ctx)
		if err != nil || pv.sum("herald_attempts_total") >= attempts {
			break
		}
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			return
		}
	}
	_ = sleepCtx(ctx, 200*time.Millisecond) // the completer's last batch
}

// waitScheduled waits until the event's n deliveries were attempted and are
// pending for later (their completions written).
func (r *runner) waitScheduled(ctx context.Context, h *heraldProc, eventID string, n int) error {
	deadline := time.Now().Add(stallAfter)
	for {
		ds, err := h.api.eventDeliveries(ctx, eventID)
		if err != nil {
			return err
		}
		done := 0
		for _, d := range ds {
			if d.State == "pending" && d.Attempts >= 1 && d.NextAttemptAt != nil && time.Until(*d.NextAttemptAt) > 10*time.Minute {
				done++
			}
		}
		if done >= n {
			// Completions are written in batches in the order the attempts
			// ended; give the last batch a moment.
			return sleepCtx(ctx, 500*time.Millisecond)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the deliveries of the last backlog event %s were not scheduled for later within %s: %+v", eventID, stallAfter, ds)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// startProgress logs the arrivals under prefix every 10 s until the
// returned stop is called.
func startProgress(ctx context.Context, r *runner, rcv *receiverProc, prefix string, want int64) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if st, err := rcv.rc.stats(ctx, prefix); err == nil {
					r.logf("  %s: %d of %d attempted (%.0f/s)", time.Since(start).Round(time.Second), st.Requests, want,
						float64(st.Requests)/time.Since(start).Seconds())
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// dbBytes is the size of a sqlite:PATH database with its WAL (0 otherwise).
func dbBytes(db string) int64 {
	path, ok := strings.CutPrefix(db, "sqlite:")
	if !ok {
		return 0
	}
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// startTrackedPair starts the scenario's receiver (answering 2xx, tracking
// arrivals) and then Herald.
func (r *runner) startTrackedPair(ctx context.Context) (*receiverProc, *heraldProc, error) {
	rcv, err := r.startReceiver(ctx, "receiver", ModeOK, "--track")
	if err != nil {
		return nil, nil, err
	}
	h, err := r.startHerald(ctx)
	if err != nil {
		return nil, nil, err
	}
	return rcv, h, nil
}

// waitImported waits until Herald has emitted the endpoint.created events
// of n created endpoints (herald_operational_events_total), so that a
// scenario measures its own load, not the operational events of the
// endpoints it just created (a bulk import of its own).
func (r *runner) waitImported(ctx context.Context, h *heraldProc, n int) error {
	const series = `herald_operational_events_total{type="endpoint.created"}`
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := h.api.metrics(ctx)
		if err != nil {
			return err
		}
		if m[series] >= float64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d endpoint.created events emitted after 2 minutes", int(m[series]), n)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}
