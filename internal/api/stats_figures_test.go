package api_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestEndpointStatsEveryFigureEachWindow: on the injected clock
// (api.Config.Now), attempts of known start, duration, status and error
// class are fed through the store's completions; GET
// /v1/endpoints/{id}/stats then answers every figure of each window 1h,
// 24h and 7d as computed here by hand: attempts, successes, failures,
// success rate, failures by class, attempts by status family, the
// histogram, p50/p95/p99 and the mean, dead letters, the last success and
// failure (within the rollups kept, whatever the window), the window's
// edges, and the breaker state of this endpoint as the engine reports it.
func TestEndpointStatsEveryFigureEachWindow(t *testing.T) {
	now := time.Date(2026, 1, 9, 10, 30, 30, 0, time.UTC)
	circuitOf := map[string]api.CircuitOut{}
	w := newWorld(t, func(c *api.Config) {
		c.Circuit = func(id string) api.CircuitOut { return circuitOf[id] }
	})
	w.mu.Lock()
	w.now = now
	w.mu.Unlock()
	var ep struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-stats.example/hook","event_types":["stats.test"]}`, 201, &ep)
	circuitOf[ep.ID] = api.CircuitOut{State: "half_open", ConsecutiveFailures: 3, Threshold: 5, OpenUntil: &now, Probing: true}
	circuitOf[w.epA] = api.CircuitOut{State: "closed", Threshold: 5}

	ms := time.Millisecond
	plan := []struct {
		state   store.DeliveryState
		status  int
		errc    string
		started time.Time
		dur     time.Duration
	}{
		{store.DeliverySucceeded, 200, "", now.Add(-10 * time.Second), 30 * ms},                // 0: every window; bucket ≤50ms
		{store.DeliverySucceeded, 204, "", now.Add(-50 * time.Minute), 4 * ms},                 // 1: every window; ≤5ms
		{store.DeliveryPending, 503, "", now.Add(-2 * time.Hour), 700 * ms},                    // 2: 24h, 7d; ≤1s; the last failure
		{store.DeliveryDead, 0, "timeout", now.Add(-20 * time.Hour), 10 * time.Second},         // 3: 24h, 7d; ≤10s (bound inclusive)
		{store.DeliveryDead, 404, "", now.Add(-3 * 24 * time.Hour), 200 * ms},                  // 4: 7d; ≤250ms
		{store.DeliverySucceeded, 200, "", now.Add(-6 * 24 * time.Hour), 2 * time.Second},      // 5: 7d; ≤2.5s
		{store.DeliveryPending, 0, "connection_refused", now.Add(-5 * 24 * time.Hour), 1 * ms}, // 6: 7d; ≤5ms
	}
	for range plan {
		w.mustCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"stats.test","data":{}}`, 202, nil)
	}
	var mine []store.Claim
	for len(mine) < len(plan) {
		claims, err := w.st.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "test", Limit: 100, Lease: time.Minute, Now: now})
		if err != nil || len(claims) == 0 {
			t.Fatalf("claim: %d, %v (have %d of %d)", len(claims), err, len(mine), len(plan))
		}
		for _, c := range claims {
			if c.Endpoint.ID == ep.ID {
				mine = append(mine, c)
			}
		}
	}
	var cs []store.Completion
	for i, p := range plan {
		c := store.Completion{DeliveryID: mine[i].Delivery.ID, EndpointID: ep.ID, Owner: "test", LeaseUntil: mine[i].Delivery.LeaseUntil, State: p.state, Now: p.started.Add(p.dur),
			Attempt: store.Attempt{DeliveryID: mine[i].Delivery.ID, Number: 1, StartedAt: p.started, Duration: p.dur, StatusCode: p.status, Error: p.errc}}
		if p.state == store.DeliveryPending {
			c.NextAttemptAt = now.Add(time.Hour)
		}
		cs = append(cs, c)
	}
	if err := w.st.CompleteDeliveries(t.Context(), cs); err != nil {
		t.Fatal(err)
	}

	type want struct {
		from                                time.Time
		attempts, successes, failures, dead int64
		classes, families                   map[string]int64
		hist                                map[int]int64
		p50, p95, p99                       time.Duration
		sumOfDurations                      time.Duration
	}
	lastSuccess, lastFailure := plan[0].started, plan[2].started
	for window, wt := range map[string]want{
		"1h": {from: time.Date(2026, 1, 9, 9, 31, 0, 0, time.UTC), attempts: 2, successes: 2,
			classes: map[string]int64{}, families: map[string]int64{"2xx": 2},
			hist: map[int]int64{0: 1, 3: 1}, p50: 5 * ms, p95: 50 * ms, p99: 50 * ms, sumOfDurations: 34 * ms},
		"24h": {from: time.Date(2026, 1, 8, 10, 31, 0, 0, time.UTC), attempts: 4, successes: 2, failures: 2, dead: 1,
			classes: map[string]int64{"http_status": 1, "timeout": 1}, families: map[string]int64{"2xx": 2, "5xx": 1, "none": 1},
			hist: map[int]int64{0: 1, 3: 1, 7: 1, 10: 1}, p50: 50 * ms, p95: 10 * time.Second, p99: 10 * time.Second,
			sumOfDurations: 10734 * ms},
		"7d": {from: time.Date(2026, 1, 2, 11, 0, 0, 0, time.UTC), attempts: 7, successes: 3, failures: 4, dead: 2,
			classes:  map[string]int64{"http_status": 2, "timeout": 1, "connection_refused": 1},
			families: map[string]int64{"2xx": 3, "4xx": 1, "5xx": 1, "none": 2},
			hist:     map[int]int64{0: 2, 3: 1, 5: 1, 7: 1, 8: 1, 10: 1}, p50: 250 * ms, p95: 10 * time.Second, p99: 10 * time.Second,
			sumOfDurations: 12935 * ms},
	} {
		var out api.EndpointStatsOut
		w.mustCall(adminKey, "GET", "/v1/endpoints/"+ep.ID+"/stats?window="+window, "", 200, &out)
		if out.EndpointID != ep.ID || out.Window != window || !out.From.Equal(wt.from) || !out.To.Equal(now) {
			t.Errorf("%s: endpoint %s window %s [%s, %s), want %s %s [%s, %s)", window, out.EndpointID, out.Window, out.From, out.To, ep.ID, window, wt.from, now)
		}
		if out.Attempts != wt.attempts || out.Successes != wt.successes || out.Failures != wt.failures || out.DeadLetters != wt.dead {
			t.Errorf("%s: attempts %d successes %d failures %d dead letters %d, want %d %d %d %d", window,
				out.Attempts, out.Successes, out.Failures, out.DeadLetters, wt.attempts, wt.successes, wt.failures, wt.dead)
		}
		if rate := float64(wt.successes) / float64(wt.attempts); out.SuccessRate == nil || *out.SuccessRate != rate {
			t.Errorf("%s: success rate %v, want %v", window, out.SuccessRate, rate)
		}
		if len(out.FailuresByClass) != len(store.FailureClasses) {
			t.Errorf("%s: failures_by_class has %d classes, want every one of %v", window, len(out.FailuresByClass), store.FailureClasses)
		}
		for _, c := range store.FailureClasses {
			if got, ok := out.FailuresByClass[c]; !ok || got != wt.classes[c] {
				t.Errorf("%s: failures_by_class[%s] = %d (present %v), want %d", window, c, got, ok, wt.classes[c])
			}
		}
		if len(out.AttemptsByStatusFamily) != len(store.StatusFamilies) {
			t.Errorf("%s: attempts_by_status_family has %d families, want %v", window, len(out.AttemptsByStatusFamily), store.StatusFamilies)
		}
		for _, f := range store.StatusFamilies {
			if got, ok := out.AttemptsByStatusFamily[f]; !ok || got != wt.families[f] {
				t.Errorf("%s: attempts_by_status_family[%s] = %d (present %v), want %d", window, f, got, ok, wt.families[f])
			}
		}
		d := out.Duration
		var bounds []float64
		for _, b := range store.DurationBounds {
			bounds = append(bounds, float64(b)/float64(ms))
		}
		if !slices.Equal(d.BucketsMs, bounds) || len(d.Counts) != len(bounds)+1 {
			t.Errorf("%s: buckets %v (%d counts), want %v and %d counts", window, d.BucketsMs, len(d.Counts), bounds, len(bounds)+1)
		}
		for i, got := range d.Counts {
			if got != wt.hist[i] {
				t.Errorf("%s: histogram bucket %d = %d, want %d", window, i, got, wt.hist[i])
			}
		}
		for _, q := range []struct {
			name string
			got  *float64
			want time.Duration
		}{{"p50", d.P50Ms, wt.p50}, {"p95", d.P95Ms, wt.p95}, {"p99", d.P99Ms, wt.p99}} {
			if q.got == nil || *q.got != float64(q.want)/float64(ms) {
				t.Errorf("%s: %s_ms = %v, want %v", window, q.name, q.got, float64(q.want)/float64(ms))
			}
		}
		// The mean is exact to the microsecond (the rollups keep the sum).
		mean := float64((wt.sumOfDurations / time.Duration(wt.attempts)).Truncate(time.Microsecond)) / float64(ms)
		if d.MeanMs == nil || math.Abs(*d.MeanMs-mean) > 1e-9 {
			t.Errorf("%s: mean_ms = %v, want %v", window, d.MeanMs, mean)
		}
		if out.LastSuccessAt == nil || !out.LastSuccessAt.Equal(lastSuccess) {
			t.Errorf("%s: last_success_at = %v, want %s", window, out.LastSuccessAt, lastSuccess)
		}
		if out.LastFailureAt == nil || !out.LastFailureAt.Equal(lastFailure) {
			t.Errorf("%s: last_failure_at = %v, want %s (the latest failure, whatever the window)", window, out.LastFailureAt, lastFailure)
		}
		if c := out.Circuit; c == nil || c.State != "half_open" || c.ConsecutiveFailures != 3 || c.Threshold != 5 || !c.Probing ||
			c.OpenUntil == nil || !c.OpenUntil.Equal(now) {
			t.Errorf("%s: circuit = %+v, want this endpoint's half_open breaker", window, out.Circuit)
		}
	}
}
