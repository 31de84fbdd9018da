package app_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/app"
)

// TestHealthEventsOncePerTransition: an endpoint that fails three times
// and then succeeds raises endpoint.failing once and endpoint.recovered
// once; one whose delivery exhausts the schedule raises endpoint.failing
// and delivery.dead_lettered once (with the last status), never
// endpoint.recovered. The owner's endpoint.*/delivery.* subscriber and the
// operator tenant get each exactly once; a catch-all endpoint gets none.
// The endpoints' stats count the attempts.
func TestHealthEventsOncePerTransition(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h := startHerald(t, func(c *app.Config) {
		c.Clock = clk
		c.HousekeepingInterval = 50 * time.Millisecond
		c.OperatorTenant = "ops"
	})
	flaky := newReceiver(t, 503, 503, 503, 200)
	dead := newReceiver(t, 500)
	watch, operator, catchAll := newReceiver(t, 200), newReceiver(t, 200), newReceiver(t, 200)
	create := func(tenant, url string, types ...string) string {
		t.Helper()
		var ep struct{ ID string }
		body := map[string]any{"tenant": tenant, "url": url}
		if types != nil {
			body["event_types"] = types
		}
		if st, raw := h.call("POST", "/v1/endpoints", body, &ep); st != http.StatusCreated {
			t.Fatalf("create: %d %s", st, raw)
		}
		return ep.ID
	}
	flakyID := create("acme", flaky.URL, "flaky.test")
	deadID := create("acme", dead.URL, "dead.test")
	create("acme", watch.URL, "endpoint.*", "delivery.*")
	create("acme", catchAll.URL)
	create("ops", operator.URL, "endpoint.failing", "endpoint.recovered", "delivery.dead_lettered")
	h.publish("acme", "flaky.test", `{"n":1}`)
	deadEv := h.publish("acme", "dead.test", `{"n":2}`)

	type key struct{ typ, subject string }
	events := func(r *receiver) map[key]map[string]bool { // (type, endpoint) → event ids
		out := map[key]map[string]bool{}
		for _, q := range r.got() {
			var b struct {
				ID   string
				Type string
				Data struct {
					EndpointID     string `json:"endpoint_id"`
					EventID        string `json:"event_id"`
					LastStatusCode int    `json:"last_status_code"`
					Attempts       int    `json:"attempts"`
				}
			}
			if err := json.Unmarshal(q.Body, &b); err != nil {
				t.Fatal(err)
			}
			if b.Type == "delivery.dead_lettered" && (b.Data.EventID != deadEv.ID || b.Data.LastStatusCode != 500 || b.Data.Attempts != 4) {
				t.Errorf("delivery.dead_lettered %s, want event %s, 4 attempts, last status 500", q.Body, deadEv.ID)
			}
			k := key{b.Type, b.Data.EndpointID}
			if out[k] == nil {
				out[k] = map[string]bool{}
			}
			out[k][b.ID] = true
		}
		return out
	}
	want := map[key]int{
		{"endpoint.failing", flakyID}:      1,
		{"endpoint.recovered", flakyID}:    1,
		{"endpoint.failing", deadID}:       1,
		{"delivery.dead_lettered", deadID}: 1,
	}
	complete := func(r *receiver) bool {
		got := events(r)
		for k := range want {
			if len(got[k]) == 0 {
				return false
			}
		}
		return true
	}
	// Retries (20 ms apart) and housekeeping rounds (50 ms) come as the
	// clock moves on.
	h.advanceUntil(clk, 20*time.Millisecond, "every health event reaches the owner and the operator", func() bool {
		return complete(watch) && complete(operator)
	})
	// Let further rounds and retries run, ten minutes of them on the
	// clock: nothing more may come.
	clk.Advance(10 * time.Minute)
	time.Sleep(500 * time.Millisecond) // an event, if one were sent, would arrive here
	for name, r := range map[string]*receiver{"the owner's subscriber": watch, "the operator tenant": operator} {
		got := events(r)
		for k, n := range want {
			if len(got[k]) != n {
				t.Errorf("%s: %d %s about %s, want %d", name, len(got[k]), k.typ, k.subject, n)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok && k.typ != "endpoint.created" {
				t.Errorf("%s: unexpected %s about %s", name, k.typ, k.subject)
			}
		}
	}
	for _, q := range catchAll.got() {
		if typ := q.Header.Get("X-Event-Type"); typ != "flaky.test" && typ != "dead.test" {
			t.Errorf("the catch-all endpoint received %s", typ)
		}
	}
	var st api.EndpointStatsOut
	if code, raw := h.call("GET", "/v1/endpoints/"+flakyID+"/stats?window=1h", nil, &st); code != 200 ||
		st.Attempts != 4 || st.Successes != 1 || st.AttemptsByStatusFamily["5xx"] != 3 || st.LastSuccessAt == nil {
		t.Fatalf("flaky's stats: %d %s", code, raw)
	}
	if code, raw := h.call("GET", "/v1/endpoints/"+deadID+"/stats?window=1h", nil, &st); code != 200 || st.Attempts != 4 || st.DeadLetters != 1 || st.Successes != 0 {
		t.Fatalf("dead's stats: %d %s", code, raw)
	}
}
