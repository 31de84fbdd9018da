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
	"strconv"
	"time"
)

// inbound measures the gateway (POST /in/{source}): throughput of
// concurrent providers sending GitHub-signed requests (each verified,
// deduped and durably stored before its 200), then ack latency at a fixed
// rate (open loop). The destination is a fast receiver process; forwards
// run during the whole measurement, as in production.
func (r *runner) inbound(ctx context.Context) (*Result, error) {
	o := r.o
	rcv, err := r.startReceiver(ctx, "receiver", ModeOK)
	if err != nil {
		return nil, err
	}
	h, err := r.startHerald(ctx)
	if err != nil {
		return nil, err
	}
	const secret = "bench-github-secret"
	var src struct {
		IngestPath string `json:"ingest_path"`
	}
	body := fmt.Appendf(nil, `{"name":"bench","scheme":"github","secrets":[%q],"destination_url":%q}`, secret, rcv.base+"/inbound")
	if err := h.api.call(ctx, "POST", "/v1/sources", body, &src); err != nil {
		return nil, fmt.Errorf("create source: %w", err)
	}
	url := h.api.base + src.IngestPath
	payload := bytes.Repeat([]byte("x"), max(0, o.BodyBytes-40))
	client := loadClient(o.Concurrency)
	// send posts signed request i: each has its own delivery id, so every
	// one is a new event (the dedupe path is tested elsewhere).
	send := func(ctx context.Context, i int, _ time.Time) error {
		b := fmt.Appendf(nil, `{"action":"bench","n":%d,"pad":"%s"}`, i, payload)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(b)
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", r.runID+"-"+strconv.Itoa(i))
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

	// Throughput: closed loop.
	r.logf("inbound: %d providers sending for %s", o.Concurrency, o.Duration)
	cpu0 := procCPU(h.pid())
	cl := runClosedLoop(ctx, o.Concurrency, o.Duration, send)
	cpu := round(procCPU(h.pid())-cpu0, 2)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cl.OK == 0 {
		return nil, fmt.Errorf("no request was acknowledged: %v", cl.FirstErr)
	}
	rps := perSecond(int64(cl.OK), cl.Elapsed)
	tp := percentiles(cl.CallNS)

	// Ack latency at a fixed rate: open loop. Ids continue after the
	// throughput phase's.
	rate := o.Rate
	r.logf("inbound: %d requests/s for %s (open loop)", rate, o.Duration)
	offset := cl.OK + cl.Errors + o.Concurrency
	ol := runOpenLoop(ctx, rate, o.Duration, o.Concurrency, func(ctx context.Context, i int, t time.Time) error {
		return send(ctx, offset+i, t)
	})
	lp := percentiles(ol.CallNS)
	ok, bad, firstErr, elapsed, late, latErrs := cl.OK, cl.Errors, cl.FirstErr, cl.Elapsed, ol.Late, ol.Errors

	res := &Result{}
	res.add("providers", o.Concurrency, "concurrent clients (throughput phase)")
	res.add("duration_seconds", secs(elapsed), "per phase")
	res.add("body_bytes", o.BodyBytes, "")
	res.add("acknowledged", ok, "200 answers: verified, deduped, durably stored")
	res.add("errors", bad, "")
	res.add("requests_per_second", rps, "throughput phase")
	res.add("throughput_p50_ms", tp.P50, "ack under full load")
	res.add("throughput_p99_ms", tp.P99, "")
	res.add("rate", rate, "requests/s, latency phase (open loop)")
	res.add("ack_p50_ms", lp.P50, "latency phase")
	res.add("ack_p99_ms", lp.P99, "")
	res.add("ack_max_ms", lp.Max, "")
	res.add("late_sends", late, "sends more than 1 ms behind their slot (the load generator fell behind)")
	res.add("latency_errors", latErrs, "")
	res.add("herald_cpu_seconds", cpu, "throughput phase")
	res.target("requests_per_second", ">=", 9000, rps, "")
	res.target("ack_p99_ms", "<=", 5, lp.P99, fmt.Sprintf("at %d requests/s", rate))
	if firstErr != nil {
		res.Notes = append(res.Notes, "first error: "+firstErr.Error())
	}
	return res, nil
}
