package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// EndpointStatsOut is the body of GET /v1/endpoints/{id}/stats.
type EndpointStatsOut struct {
	EndpointID string    `json:"endpoint_id"`
	Window     string    `json:"window" doc:"1h, 24h or 7d"`
	From       time.Time `json:"from" doc:"start of the window: the first minute bucket (1h, 24h) or hour bucket (7d) counted"`
	To         time.Time `json:"to" doc:"the time of the request"`
	Attempts   int64     `json:"attempts" doc:"attempts started in the window"`
	Successes  int64     `json:"successes" doc:"attempts answered 2xx"`
	Failures   int64     `json:"failures" doc:"every other attempt"`
	// SuccessRate is null without attempts.
	SuccessRate            *float64         `json:"success_rate" doc:"successes / attempts, 0–1; null without attempts"`
	FailuresByClass        map[string]int64 `json:"failures_by_class" doc:"failures per class: the attempt error classes, redirect (3xx), http_status (other non-2xx answers), other"`
	AttemptsByStatusFamily map[string]int64 `json:"attempts_by_status_family" doc:"attempts per 2xx, 3xx, 4xx, 5xx, none (no HTTP answer)"`
	Duration               DurationStatsOut `json:"duration"`
	LastSuccessAt          *time.Time       `json:"last_success_at" doc:"start of the latest successful attempt within the last 8 days (null: none)"`
	LastFailureAt          *time.Time       `json:"last_failure_at" doc:"start of the latest failed attempt within the last 8 days (null: none)"`
	DeadLetters            int64            `json:"dead_letters" doc:"deliveries dead-lettered by an attempt in the window, and those dead-lettered in it without an attempt because their stored rows could not be read"`
	Circuit                *CircuitOut      `json:"circuit,omitempty" doc:"the circuit breaker as the answering node sees it (as in GET /v1/endpoints/{id})"`
}

// DurationStatsOut are the attempt duration percentiles and histogram.
type DurationStatsOut struct {
	P50Ms *float64 `json:"p50_ms" doc:"upper bound of the histogram bucket holding the median; null without attempts"`
	P95Ms *float64 `json:"p95_ms"`
	P99Ms *float64 `json:"p99_ms"`
	// BucketsMs are the buckets' upper bounds (inclusive); Counts has one
	// more entry, the attempts longer than the last bound.
	BucketsMs []float64 `json:"buckets_ms" doc:"upper bounds (inclusive) of the histogram buckets, ms"`
	Counts    []int64   `json:"counts" doc:"attempts per bucket; the last entry counts those above the last bound"`
	MeanMs    *float64  `json:"mean_ms" doc:"exact mean duration; null without attempts"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (s *Server) registerStats() {
	sec := []map[string][]string{{"bearer": {}}}
	huma.Register(s.api, huma.Operation{
		OperationID: "get-endpoint-stats", Method: http.MethodGet, Path: "/v1/endpoints/{id}/stats", Tags: []string{"endpoints"},
		Summary: "An endpoint's health over the last hour, day or week (kept as per-minute and per-hour rollups)", Security: sec,
	}, s.getEndpointStats)
}

type getEndpointStatsInput struct {
	EndpointIDPath
	Window string `query:"window" enum:"1h,24h,7d" default:"24h" doc:"1h and 24h count per minute, 7d per hour"`
}

func (s *Server) getEndpointStats(ctx context.Context, in *getEndpointStatsInput) (*struct{ Body EndpointStatsOut }, error) {
	if err := s.endpointExists(ctx, in.ID); err != nil {
		return nil, err
	}
	st, err := s.db(ctx).EndpointStats(ctx, store.EndpointStatsParams{EndpointID: in.ID, Window: in.Window, Now: s.cfg.Now()})
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID)+" stats")
	}
	out := EndpointStatsOut{EndpointID: in.ID, Window: st.Window, From: st.From, To: st.To,
		Attempts: st.Attempts(), Successes: st.Successes(), Failures: st.Failures(), DeadLetters: st.DeadLetters(),
		FailuresByClass: st.FailuresByClass(), AttemptsByStatusFamily: st.AttemptsByStatusFamily()}
	if rate, ok := st.SuccessRate(); ok {
		out.SuccessRate = &rate
	}
	for _, b := range store.DurationBounds {
		out.Duration.BucketsMs = append(out.Duration.BucketsMs, ms(b))
	}
	out.Duration.Counts = st.Histogram()
	for _, p := range []struct {
		q   float64
		dst **float64
	}{{0.5, &out.Duration.P50Ms}, {0.95, &out.Duration.P95Ms}, {0.99, &out.Duration.P99Ms}} {
		if d, ok := st.Percentile(p.q); ok {
			v := ms(d)
			*p.dst = &v
		}
	}
	if mean, ok := st.MeanDuration(); ok {
		v := ms(mean)
		out.Duration.MeanMs = &v
	}
	if !st.LastSuccessAt.IsZero() {
		out.LastSuccessAt = &st.LastSuccessAt
	}
	if !st.LastFailureAt.IsZero() {
		out.LastFailureAt = &st.LastFailureAt
	}
	if s.cfg.Circuit != nil {
		c := s.cfg.Circuit(in.ID)
		out.Circuit = &c
	}
	return &struct{ Body EndpointStatsOut }{Body: out}, nil
}
