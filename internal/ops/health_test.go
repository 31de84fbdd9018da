package ops_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/catalog"
	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/store"
)

// countEvents counts tenant's events of each type.
func countEvents(t *testing.T, s store.Store, tenant string) map[string]int {
	t.Helper()
	out := map[string]int{}
	cursor := ""
	for {
		pg, err := s.ListEvents(t.Context(), store.ListEventsParams{Tenant: tenant, ListParams: store.ListParams{Limit: 1000, Cursor: cursor}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range pg.Data {
			out[ev.Type]++
		}
		if cursor = pg.NextCursor; cursor == "" {
			return out
		}
	}
}

// TestBurstOfTransitionsIsBounded: a thousand endpoints of one tenant
// disabled at once (an outage) make at most EventBurst endpoint.disabled
// events for the owner and for the operator tenant, plus one
// endpoint.events_suppressed each counting the rest; the refill then lets
// EventsPerMinute through per minute, and a later summary counts only what
// was held back since the last one. Changes made through the API
// (endpoint.enabled) are not limited.
func TestBurstOfTransitionsIsBounded(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	newEndpoint(t, s, "ep_watch", "acme", "endpoint.*")
	newEndpoint(t, s, "ep_ops", "ops", "endpoint.*")
	const n = 1000
	for i := range n {
		ep := newEndpoint(t, s, fmt.Sprintf("ep_%04d", i), "acme")
		if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointDisabled, Reason: "gone",
			Notice: ops.TypeEndpointDisabled, Now: t0.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewFake(t0.Add(2 * time.Second))
	h := ops.New(ops.Config{Store: s, OperatorTenant: "ops", Clock: clk, SpikeThreshold: -1,
		Logger: slog.New(slog.DiscardHandler)})
	for range n/100 + 2 { // 100 notices per round
		if err := h.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ns, err := s.PendingNotices(ctx, 10); err != nil || len(ns) != 0 {
		t.Fatalf("outbox not drained: %d, %v", len(ns), err)
	}
	check := func(tenant string, disabled, summaries int) {
		t.Helper()
		got := countEvents(t, s, tenant)
		if got[ops.TypeEndpointDisabled] != disabled || got[ops.TypeEventsSuppressed] != summaries {
			t.Fatalf("%s: %v, want %d endpoint.disabled and %d endpoint.events_suppressed", tenant, got, disabled, summaries)
		}
	}
	check("acme", 20, 0)
	check("ops", 20, 0)
	// The summary comes a minute after the first event held back, and
	// counts the whole burst.
	clk.Advance(time.Minute)
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	check("acme", 20, 1)
	check("ops", 20, 1)
	var sum struct {
		Data struct {
			Suppressed int            `json:"suppressed"`
			ByType     map[string]int `json:"by_type"`
		}
	}
	pg, err := s.ListEvents(ctx, store.ListEventsParams{Tenant: "ops", Type: ops.TypeEventsSuppressed})
	if err != nil || len(pg.Data) != 1 {
		t.Fatalf("summary: %v %v", pg.Data, err)
	}
	if err := json.Unmarshal(pg.Data[0].Body, &sum); err != nil || sum.Data.Suppressed != n-20 || sum.Data.ByType[ops.TypeEndpointDisabled] != n-20 {
		t.Fatalf("summary body %s, want %d suppressed", pg.Data[0].Body, n-20)
	}
	// A minute after the burst the bucket holds 10 tokens again. 30 new
	// transitions: 10 go out, 20 are held back and summarised a minute
	// later.
	now := clk.Now()
	for i := range 30 {
		if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: fmt.Sprintf("ep_%04d", i), State: store.EndpointEnabled,
			Notice: ops.TypeEndpointEnabled, Now: now}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: fmt.Sprintf("ep_%04d", i), State: store.EndpointDisabled, Reason: "gone",
			Notice: ops.TypeEndpointDisabled, Now: now.Add(time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	check("acme", 30, 1)
	clk.Advance(time.Minute)
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	check("acme", 30, 2)
	check("ops", 30, 2)
	if got := countEvents(t, s, "acme")[ops.TypeEndpointEnabled]; got != 30 {
		t.Fatalf("endpoint.enabled: %d, want all 30 (not limited)", got)
	}
}

// TestOperationalPayloadsMatchTheirSchemas: the data of every operational
// event type, and its example, validate against its schema in the
// catalog, and every type Herald emits has one.
func TestOperationalPayloadsMatchTheirSchemas(t *testing.T) {
	ep := store.Endpoint{ID: "ep_a", Tenant: "acme", URL: "https://a.example/", State: store.EndpointDisabled, StateReason: "gone"}
	payloads := map[string]map[string]any{}
	for _, typ := range []string{ops.TypeEndpointDisabled, ops.TypeEndpointEnabled, ops.TypeEndpointCreated, ops.TypeEndpointUpdated,
		ops.TypeEndpointDeleted, ops.TypeEndpointFailing, ops.TypeEndpointRecovered} {
		payloads[typ] = ops.NoticeData(store.Notice{Endpoint: ep, Type: typ, LastStatusCode: 503})
	}
	payloads[ops.TypeDeadLettered] = ops.NoticeData(store.Notice{Endpoint: ep, Type: ops.TypeDeadLettered, DeliveryID: "dlv_1", EventID: "inv-1",
		EventType: "invoice.paid", Attempts: 8, LastError: "timeout"})
	payloads[ops.TypeDeadLetterSpike] = map[string]any{"version": 1, "endpoint_id": "ep_a", "endpoint_tenant": "acme", "url": "https://a.example/",
		"dead_letters": 10, "window_seconds": 900, "threshold": 10}
	payloads[ops.TypeEventsSuppressed] = map[string]any{"version": 1, "suppressed": 980, "by_type": map[string]int{"endpoint.disabled": 980},
		"since": t0, "until": t0.Add(time.Minute), "burst": 20, "per_minute": 10}
	if len(payloads) != len(catalog.OperationalSchemas) {
		t.Fatalf("%d types emitted, %d schemas", len(payloads), len(catalog.OperationalSchemas))
	}
	for typ, data := range payloads {
		sc, err := catalog.Compile([]byte(catalog.OperationalSchemas[typ]))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		raw, _ := json.Marshal(data)
		if vs, err := sc.Validate(raw, "/data"); err != nil || len(vs) != 0 {
			t.Errorf("%s: %s: %v %v", typ, raw, vs, err)
		}
		if vs, err := sc.Validate([]byte(catalog.OperationalExamples[typ]), "/data"); err != nil || len(vs) != 0 {
			t.Errorf("%s: example: %v %v", typ, vs, err)
		}
	}
}
