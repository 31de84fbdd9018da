package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// inboundSecret is the GitHub webhook secret of the bench's source, and
// the PEER_SECRET given to a --peer command.
const inboundSecret = "bench-github-secret"

// The run the inbound targets are held to (docs/BENCHMARKS.md: herald
// bench inbound --duration 10s): the ack p99 at this open-loop rate, the
// throughput with this many providers over at least this long.
const (
	inboundTargetRate      = 2000
	inboundTargetProviders = 32
	inboundTargetDuration  = 10 * time.Second
)

// inbound measures the gateway (POST /in/{source}): throughput of
// concurrent providers sending GitHub-signed requests (each verified,
// deduped and durably stored before its 200), then ack latency at a fixed
// rate (open loop). The destination is a fast receiver process; forwards
// run during the whole measurement, as in production.
//
// With Options.Peer the same two phases, with the same load generator,
// bodies, signatures, concurrency, duration and rate, are then run against
// the peer (a receiver of the same GitHub webhooks, such as
// bench/peers/express-bullmq), after Herald's forwards of its phases have
// arrived; the result gives both and Herald's throughput over the peer's.
func (r *runner) inbound(ctx context.Context) (*Result, error) {
	o := r.o
	rcv, err := r.startReceiver(ctx, "receiver", ModeOK)
	if err != nil {
		return nil, err
	}
	if o.Peer != "" && !peerIsURL(o.Peer) {
		// A peer that cannot start (its packages not installed, say) fails
		// the run now, not after Herald's phases.
		_, p, err := r.startPeer(ctx, "peer-check", rcv.base+"/peer-check")
		if err != nil {
			return nil, err
		}
		p.stop(5 * time.Second)
	}
	h, err := r.startHerald(ctx)
	if err != nil {
		return nil, err
	}
	var src struct {
		IngestPath string `json:"ingest_path"`
	}
	body := fmt.Appendf(nil, `{"name":"bench","scheme":"github","secrets":[%q],"destination_url":%q}`, inboundSecret, rcv.base+"/inbound")
	if err := h.api.call(ctx, "POST", "/v1/sources", body, &src); err != nil {
		return nil, fmt.Errorf("create source: %w", err)
	}
	hr, err := r.ingest(ctx, "herald", h.api.base+src.IngestPath, r.runID+"-", h.pid(), rcv.pid(), r.settleForwards(rcv, "/inbound"))
	if err != nil {
		return nil, err
	}

	res := &Result{}
	res.add("providers", o.Concurrency, "concurrent clients (throughput phase)")
	res.add("duration_seconds", secs(hr.closed.Elapsed), "per phase")
	res.add("body_bytes", o.BodyBytes, "")
	res.add("acknowledged", hr.closed.OK, "200 answers of the throughput phase: verified, deduped, durably stored")
	res.add("errors", hr.closed.Errors, "")
	res.add("requests_per_second", hr.rps, "throughput phase")
	res.add("throughput_p50_ms", hr.tp.P50, "ack under full load")
	res.add("throughput_p99_ms", hr.tp.P99, "")
	res.add("rate", o.Rate, "requests/s, latency phase (open loop)")
	res.add("ack_p50_ms", hr.lp.P50, "latency phase")
	res.add("ack_p99_ms", hr.lp.P99, "")
	res.add("ack_max_ms", hr.lp.Max, "")
	res.add("late_sends", hr.open.Late, "sends more than 1 ms behind their slot (the load generator fell behind)")
	res.add("latency_errors", hr.open.Errors, "")
	res.add("herald_cpu_seconds", hr.cpu, "throughput phase")
	res.add("herald_cpu_us_per_request", perRequestUS(hr.cpu, hr.closed.OK), "throughput phase, forwards included")
	res.add("load_cpu_us_per_request", perRequestUS(hr.loadCPU, hr.closed.OK), "throughput phase: the bench process (the providers' clients and signing)")
	res.add("receiver_cpu_us_per_request", perRequestUS(hr.receiverCPU, hr.closed.OK), "throughput phase: the receiver of the forwards, per acknowledged request")
	// What a request may cost Herald at the target rate when the cores
	// are the limit: the machine's cores at 9,000 requests/s, less what
	// the load generator and the receiver took per request in this run.
	res.add("herald_cpu_budget_us_per_request", round(float64(runtime.NumCPU())*1e6/9000-perRequestUS(hr.loadCPU, hr.closed.OK)-perRequestUS(hr.receiverCPU, hr.closed.OK), 1),
		fmt.Sprintf("at 9,000 requests/s, the %d cores (runtime.NumCPU: a CPU quota is not seen) less the load generator's and the receiver's shares", runtime.NumCPU()))
	res.add("forwards_behind", hr.backlog, "acknowledged but not yet forwarded when the throughput phase ended")
	res.add("settle_seconds", secs(hr.settled), "the wait for them before the latency phase")
	res.add("herald_cpu_seconds_latency", hr.cpuOpen, "latency phase")
	res.add("herald_cpu_us_per_request_latency", perRequestUS(hr.cpuOpen, hr.open.OK), "latency phase, forwards included")
	tpNote := ""
	if o.Concurrency != inboundTargetProviders || o.Duration < inboundTargetDuration {
		tpNote = fmt.Sprintf("the target is for %d providers over at least %s; this run had %d over %s", inboundTargetProviders, inboundTargetDuration, o.Concurrency, o.Duration)
	}
	res.target("requests_per_second", ">=", 9000, hr.rps, tpNote)
	note := ""
	if o.Rate != inboundTargetRate {
		note = fmt.Sprintf("the target is at %d requests/s; this run offered %d/s", inboundTargetRate, o.Rate)
	}
	res.target("ack_p99_ms", "<=", 5, hr.lp.P99, note)
	if hr.closed.FirstErr != nil {
		res.Notes = append(res.Notes, "first error: "+hr.closed.FirstErr.Error())
	}
	if o.Peer == "" {
		return res, nil
	}

	// Herald's forwards of both phases arrive before the peer's phases
	// start, so that they do not share the cores with the peer's load.
	acked := int64(hr.warmed + hr.closed.OK + hr.open.OK)
	fwd, err := r.waitForwards(ctx, rcv, "/inbound", acked)
	if err != nil {
		return nil, err
	}
	res.add("herald_forwarded", fwd, fmt.Sprintf("of the %d acknowledged in all of Herald's phases (warm-up included), before the peer's", acked))

	peerURL, peer, err := r.startPeer(ctx, "peer", rcv.base+"/peer")
	if err != nil {
		return nil, err
	}
	peerPID := 0 // a peer given by URL: no process of the bench's
	if peer != nil {
		peerPID = peer.pid()
	}
	var peerSettle settleFunc
	if peerPID > 0 { // a peer given by URL forwards elsewhere
		peerSettle = r.settleForwards(rcv, "/peer")
	}
	pr, err := r.ingest(ctx, "peer", peerURL, r.runID+"-peer-", peerPID, 0, peerSettle)
	if err != nil {
		return nil, err
	}
	packed := int64(pr.warmed + pr.closed.OK + pr.open.OK)
	var pfwd int64
	if peerPID > 0 { // a peer given by URL forwards elsewhere
		if pfwd, err = r.waitForwards(ctx, rcv, "/peer", packed); err != nil {
			return nil, err
		}
	}
	res.add("peer", o.Peer, "")
	res.add("peer_acknowledged", pr.closed.OK, "200 answers")
	res.add("peer_errors", pr.closed.Errors+pr.open.Errors, "")
	res.add("peer_requests_per_second", pr.rps, "throughput phase")
	res.add("peer_throughput_p50_ms", pr.tp.P50, "")
	res.add("peer_throughput_p99_ms", pr.tp.P99, "")
	res.add("peer_ack_p50_ms", pr.lp.P50, "latency phase")
	res.add("peer_ack_p99_ms", pr.lp.P99, "")
	res.add("peer_ack_max_ms", pr.lp.Max, "")
	res.add("peer_late_sends", pr.open.Late, "")
	if peerPID > 0 {
		res.add("peer_cpu_seconds", pr.cpu, "throughput phase, the peer's process tree")
		res.add("peer_forwards_behind", pr.backlog, "acknowledged but not yet forwarded when the throughput phase ended")
		res.add("peer_forwarded", pfwd, fmt.Sprintf("of the %d acknowledged in all of the peer's phases", packed))
	}
	ratio := 0.0
	if pr.rps > 0 {
		ratio = round(hr.rps/pr.rps, 2)
	}
	res.add("peer_ratio", ratio, "Herald's requests/s over the peer's")
	res.target("peer_ratio", ">=", 3, ratio, "")
	if pr.closed.FirstErr != nil {
		res.Notes = append(res.Notes, "peer's first error: "+pr.closed.FirstErr.Error())
	}
	return res, nil
}

// ingestRun is what the two phases of one receiver measured.
type ingestRun struct {
	closed closedLoop
	open   openLoop
	warmed int // requests acknowledged during the warm-up
	rps    float64
	tp, lp pcts
	cpu    float64 // CPU seconds of the throughput phase
	// loadCPU and receiverCPU are the CPU seconds of the throughput phase
	// of the bench process (the load generator, the providers' signing
	// included) and of the receiver's process (0 without one).
	loadCPU, receiverCPU float64
	// cpuOpen is the CPU seconds of the latency phase (open loop): with
	// cpu, what a request costs when batches are small against full ones.
	cpuOpen float64
	// backlog is how many acknowledged requests had not been forwarded
	// when the throughput phase ended; settled how long the wait for them
	// took before the latency phase began.
	backlog int64
	settled time.Duration
}

// settleFunc is called between an ingest's two phases with the requests
// acknowledged so far; it returns how many of them had not been
// forwarded yet and returns once they have (or have stopped coming).
type settleFunc func(ctx context.Context, acked int64) (int64, error)

// settleForwards waits for the forwards under prefix at rcv: the latency
// phase then measures the acks at --rate in a steady state, not beside
// the throughput phase's forwarding backlog (a receiver acknowledges
// faster than it forwards at full load, and forwarding that backlog made
// the latency phase's CPU per request look 2–3× that at saturation).
func (r *runner) settleForwards(rcv *receiverProc, prefix string) settleFunc {
	return func(ctx context.Context, acked int64) (int64, error) {
		st, err := rcv.rc.stats(ctx, prefix)
		if err != nil {
			return 0, fmt.Errorf("receiver stats: %w", err)
		}
		if _, err := r.waitForwards(ctx, rcv, prefix, acked); err != nil {
			return 0, err
		}
		return max(0, acked-st.Requests), nil
	}
}

// ingest runs the throughput phase (closed loop, Concurrency providers for
// Duration, after an uncounted warm-up) and the latency phase (open loop
// at Rate for Duration) against
// url, a receiver of GitHub webhooks signed with inboundSecret. Request i
// has the delivery id idPrefix+i; its body depends on i only, so every
// receiver gets the same bodies. pid's process tree is charged the CPU of
// the throughput phase (none when pid is 0), and so is the receiver's
// process rcvPID (none when 0). settle (nil: none) is called between the
// two phases with the number acknowledged so far.
func (r *runner) ingest(ctx context.Context, name, url, idPrefix string, pid, rcvPID int, settle settleFunc) (ingestRun, error) {
	o := r.o
	payload := bytes.Repeat([]byte("x"), max(0, o.BodyBytes-40))
	client := loadClient(o.Concurrency)
	// post sends signed request i with delivery id idPrefix+id: each has
	// its own, so every one is a new event (the dedupe path is tested
	// elsewhere).
	post := func(ctx context.Context, i int, id string) error {
		b := fmt.Appendf(nil, `{"action":"bench","n":%d,"pad":"%s"}`, i, payload)
		m := hmac.New(sha256.New, []byte(inboundSecret))
		m.Write(b)
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", idPrefix+id)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ack %s", resp.Status)
		}
		return nil
	}

	send := func(ctx context.Context, i int, _ time.Time) error { return post(ctx, i, strconv.Itoa(i)) }

	// Warm-up, not counted: a fifth of the duration (at most 2 s) of the
	// closed loop, so that neither receiver is measured cold (connections,
	// caches, a JIT).
	warm := runClosedLoop(ctx, o.Concurrency, min(2*time.Second, o.Duration/5), func(ctx context.Context, i int, _ time.Time) error {
		// Bodies of their own: GitHub signs only the body, so the
		// gateway takes a repeated body for a replay and acknowledges it
		// without forwarding it again.
		return post(ctx, -1-i, "w"+strconv.Itoa(i))
	})
	if ctx.Err() != nil {
		return ingestRun{}, ctx.Err()
	}

	// Throughput: closed loop.
	r.logf("inbound, %s: %d providers sending for %s", name, o.Concurrency, o.Duration)
	cpu0, load0, rcv0 := treeCPU(pid), procCPU(os.Getpid()), treeCPU(rcvPID)
	cl := runClosedLoop(ctx, o.Concurrency, o.Duration, send)
	cpu := round(treeCPU(pid)-cpu0, 2)
	loadCPU, rcvCPU := round(procCPU(os.Getpid())-load0, 2), round(treeCPU(rcvPID)-rcv0, 2)
	if ctx.Err() != nil {
		return ingestRun{}, ctx.Err()
	}
	if cl.OK == 0 {
		return ingestRun{}, fmt.Errorf("%s: no request was acknowledged: %v", name, cl.FirstErr)
	}
	var backlog int64
	var settled time.Duration
	if settle != nil {
		t := time.Now()
		var err error
		if backlog, err = settle(ctx, int64(warm.OK+cl.OK)); err != nil {
			return ingestRun{}, err
		}
		settled = time.Since(t)
	}

	// Ack latency at a fixed rate: open loop. Ids continue after the
	// throughput phase's.
	r.logf("inbound, %s: %d requests/s for %s (open loop)", name, o.Rate, o.Duration)
	offset := cl.OK + cl.Errors + o.Concurrency
	cpuOpen0 := treeCPU(pid)
	ol := runOpenLoop(ctx, o.Rate, o.Duration, o.Concurrency, func(ctx context.Context, i int, t time.Time) error {
		return send(ctx, offset+i, t)
	})
	cpuOpen := round(treeCPU(pid)-cpuOpen0, 2)
	if ctx.Err() != nil {
		return ingestRun{}, ctx.Err()
	}
	return ingestRun{closed: cl, open: ol, warmed: warm.OK, rps: perSecond(int64(cl.OK), cl.Elapsed), tp: percentiles(cl.CallNS), lp: percentiles(ol.CallNS), cpu: cpu, loadCPU: loadCPU, receiverCPU: rcvCPU, cpuOpen: cpuOpen, backlog: backlog, settled: settled}, nil
}

// waitForwards waits until the receiver has had want requests under prefix
// (or they stop coming for 10 s) and returns how many it had.
func (r *runner) waitForwards(ctx context.Context, rcv *receiverProc, prefix string, want int64) (int64, error) {
	var last int64 = -1
	lastChange := time.Now()
	for {
		st, err := rcv.rc.stats(ctx, prefix)
		if err != nil {
			return 0, fmt.Errorf("receiver stats: %w", err)
		}
		if st.Requests >= want {
			return st.Requests, nil
		}
		if st.Requests != last {
			last, lastChange = st.Requests, time.Now()
		} else if time.Since(lastChange) > 10*time.Second {
			r.logf("inbound: %d of %d forwards arrived at %s; not waiting longer", st.Requests, want, prefix)
			return st.Requests, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startPeer returns the ingest URL of the peer (Options.Peer) and its
// process (nil for a peer given by URL), logging to name.log. A URL is used
// as it is: the peer must verify with inboundSecret and forward wherever it
// likes. A command is run with sh -c in the current directory with
// PEER_PORT (a free loopback port), PEER_SECRET and PEER_FORWARD_URL
// (forward, on the bench's receiver) in its environment, and must answer
// GET /healthz on that port within 60 s; its ingest URL is
// http://127.0.0.1:PEER_PORT/in/github.
func (r *runner) startPeer(ctx context.Context, name, forward string) (string, *proc, error) {
	if peerIsURL(r.o.Peer) {
		return r.o.Peer, nil, nil
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", nil, err
	}
	env := childEnv("PEER_PORT="+strconv.Itoa(port), "PEER_SECRET="+inboundSecret, "PEER_FORWARD_URL="+forward)
	p, err := r.startExe("peer", name, "/bin/sh", []string{"-c", r.o.Peer}, env, wd, nil)
	if err != nil {
		return "", nil, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	hc := controlClient()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p.exited() {
			return "", nil, fmt.Errorf("peer did not start: %w%s", p.exitError(), peerHint(p))
		}
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		if err != nil {
			return "", nil, err
		}
		if resp, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				r.logf("inbound: peer up at %s (%s)", base, filepath.Base(p.logPath))
				return base + "/in/github", p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop(5 * time.Second)
			return "", nil, fmt.Errorf("peer did not answer GET %s/healthz within 60s%s", base, peerHint(p))
		}
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// peerIsURL reports whether --peer names a running receiver rather than a
// command to start.
func peerIsURL(peer string) bool {
	return strings.HasPrefix(peer, "http://") || strings.HasPrefix(peer, "https://")
}

// peerHint is what to do about a Node peer that could not load its
// packages, with the log line naming the missing module ("" otherwise).
func peerHint(p *proc) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "Cannot find module") && !strings.Contains(line, "Cannot find package") {
			continue
		}
		if m := regexp.MustCompile(`Cannot find (?:module|package) '([^']*)'`).FindStringSubmatch(line); m != nil && (strings.HasPrefix(m[1], "/") || strings.HasPrefix(m[1], ".")) {
			return "\n" + strings.TrimSpace(line) + "\nthe peer's script was not found: check the path in --peer"
		}
		return "\n" + strings.TrimSpace(line) + "\nthe peer's packages are not installed: run npm ci in its folder (for the peer in the repository: npm ci --prefix bench/peers/express-bullmq; docs/BENCHMARKS.md)"
	}
	return ""
}

// perRequestUS is seconds of CPU over n requests, in microseconds each (0
// when n is 0).
func perRequestUS(seconds float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return round(seconds*1e6/float64(n), 1)
}
