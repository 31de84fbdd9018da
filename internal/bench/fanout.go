package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// fanout: tenant A has --endpoints endpoints (healthy) and publishes
// --events events, each fanning out to all of them, spread over the run;
// tenant B publishes --rate events/s to one endpoint. B's publish call p99
// is compared with B alone on a fresh Herald in the same run
// (publish_p99_ratio; target ≤ 2, docs/BENCHMARKS.md); A's deliveries/s run
// from its first publish to its last arrival, and every one of A's
// deliveries must arrive exactly once. Each phase starts once Herald has
// emitted the endpoint.created events of the endpoints it created. With
// SeparateA, A has a Herald process and database of its own in the shared
// phase: the ratio then measures the machine (two cores, one disk shared
// by two processes that share nothing else), not Herald's isolation, and
// the target does not apply.
func (r *runner) fanout(ctx context.Context) (*Result, error) {
	o := r.o
	alone, err := r.fanoutPhase(ctx, "alone", 0)
	if err != nil {
		return nil, fmt.Errorf("tenant B alone: %w", err)
	}
	with, err := r.fanoutPhase(ctx, "shared", o.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("tenant B beside A's fan-out to %d endpoints: %w", o.Endpoints, err)
	}
	p99Ratio := ratio(with.call.P99, alone.call.P99)
	res := &Result{}
	res.add("a_endpoints", o.Endpoints, "tenant A's endpoints, every event to all of them")
	res.add("a_events", o.Events, "A's events, spread over the run")
	res.add("a_deliveries", with.aDeliveries, "arrived once each")
	res.add("a_duplicates", with.aDuplicates, "A's deliveries that arrived twice")
	res.add("a_deliveries_per_second", perSecond(with.aDeliveries, with.aDrain), "A's first publish → its last arrival")
	res.add("a_publish_max_ms", with.aPublishMax, "A's slowest publish call")
	res.add("b_rate", o.Rate, "B's events/s (open loop), one endpoint")
	res.add("duration_seconds", secs(o.Duration), "")
	res.add("alone_publish_p50_ms", alone.call.P50, "B alone: the publish call")
	res.add("alone_publish_p99_ms", alone.call.P99, "")
	res.add("publish_p50_ms", with.call.P50, "B beside A")
	res.add("publish_p99_ms", with.call.P99, "")
	res.add("publish_p99_ratio", p99Ratio, "beside A / alone")
	res.add("late_sends", alone.late+with.late, "")
	aProcess := "shared"
	if o.SeparateA {
		aProcess = "separate"
	}
	res.add("a_process", aProcess, "A on B's Herald process, or on one of its own (--separate-a)")
	note := ""
	if o.SeparateA {
		note = "A ran on a Herald process of its own (--separate-a): the ratio is the bound of perfect isolation on this machine, not Herald's"
	} else if o.Endpoints < fanoutTargetEndpoints || o.Rate < fanoutTargetRate {
		note = fmt.Sprintf("the target is for A's fan-out to %d endpoints beside B at %d events/s; this run had %d endpoints and %d events/s",
			fanoutTargetEndpoints, fanoutTargetRate, o.Endpoints, o.Rate)
	}
	res.target("publish_p99_ratio", "<=", 2, p99Ratio, note)
	return res, nil
}

// The size of the fan-out and B's rate the fanout target is held to
// (docs/BENCHMARKS.md).
const (
	fanoutTargetEndpoints = 10000
	fanoutTargetRate      = 500
)

type fanoutPhase struct {
	call        pcts
	late        int
	aDeliveries int64
	aDuplicates int64
	aDrain      time.Duration
	aPublishMax float64
}

func (r *runner) fanoutPhase(ctx context.Context, label string, nA int) (fanoutPhase, error) {
	o := r.o
	var ph fanoutPhase
	rcv, err := r.startReceiver(ctx, label+"-receiver", ModeOK, "--track")
	if err != nil {
		return ph, err
	}
	h, err := r.startHerald(ctx)
	if err != nil {
		return ph, err
	}
	defer func() {
		h.stop(15 * time.Second)
		rcv.stop(2 * time.Second)
	}()
	tenantB := "fanB-" + label + "-" + r.runID
	if _, err := r.endpoints(ctx, h, tenantB, rcv.base, "/fanB/", "h", 1); err != nil {
		return ph, err
	}
	tenantA := "fanA-" + label + "-" + r.runID
	hA := h
	if nA > 0 && o.SeparateA {
		if hA, err = r.startHerald(ctx); err != nil {
			return ph, err
		}
		defer hA.stop(15 * time.Second)
		r.logf("%s: A on a Herald process of its own", label)
	}
	if nA > 0 {
		r.logf("%s: creating %d endpoints of A", label, nA)
		if _, err := r.endpoints(ctx, hA, tenantA, rcv.base, "/fanA/", "e", nA); err != nil {
			return ph, err
		}
	}
	if hA != h {
		if err := r.waitImported(ctx, hA, nA); err != nil {
			return ph, err
		}
		if err := r.waitImported(ctx, h, 1); err != nil {
			return ph, err
		}
	} else if err := r.waitImported(ctx, h, nA+1); err != nil {
		return ph, err
	}
	var (
		wg     sync.WaitGroup
		aStart time.Time
		aErr   error
		aMax   time.Duration
	)
	if nA > 0 {
		makerA := newEventMaker(tenantA, "bench.fanout", o.BodyBytes)
		wg.Go(func() {
			// A's events at 1/(events+1), 2/(events+1), … of the run.
			step := o.Duration / time.Duration(o.Events+1)
			for i := range o.Events {
				if err := sleepCtx(ctx, step); err != nil {
					aErr = err
					return
				}
				t := time.Now()
				if i == 0 {
					aStart = t
				}
				if _, err := hA.api.publish(ctx, makerA.publishBody(i, t.UnixNano())); err != nil {
					aErr = fmt.Errorf("tenant A's publish %d: %w", i, err)
					return
				}
				aMax = max(aMax, time.Since(t))
			}
		})
	}
	makerB := newEventMaker(tenantB, "bench.fanout", o.BodyBytes)
	r.logf("%s: B publishes %d events/s for %s", label, o.Rate, o.Duration)
	ol := publishOpenLoop(ctx, h.api, makerB, o.Rate, o.Duration, o.Concurrency)
	wg.Wait()
	if ctx.Err() != nil {
		return ph, ctx.Err()
	}
	if aErr != nil {
		return ph, aErr
	}
	if ol.OK == 0 {
		return ph, fmt.Errorf("no publish of B succeeded (%d sent): %v", ol.Sent, ol.FirstErr)
	}
	ph.call, ph.late = percentiles(ol.CallNS), ol.Late
	if nA > 0 {
		want := int64(o.Events) * int64(nA)
		st, err := r.waitArrivals(ctx, rcv, hA, "/fanA/", want, stallAfter)
		if err != nil {
			return ph, err
		}
		ph.aDeliveries, ph.aDuplicates = st.Unique, st.Duplicates
		ph.aDrain = time.Duration(st.LastNS - aStart.UnixNano())
		ph.aPublishMax = round(float64(aMax)/1e6, 3)
	}
	return ph, nil
}
