package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
)

// TestEveryOperationalEventOncePerTransition: end to end, on a fake clock,
// every operational event type Herald raises about an endpoint reaches the
// owner tenant's endpoint.*/delivery.* subscriber and the operator tenant's
// exactly once per transition, and nothing else about those endpoints
// does:
//   - X is created, updated and deleted through the API: endpoint.created,
//     endpoint.updated, endpoint.deleted;
//   - G answers 410 Gone: endpoint.disabled and delivery.dead_lettered;
//     enabled through the API: endpoint.enabled;
//   - D fails every attempt of two deliveries (4 attempts each):
//     endpoint.failing once (the 3rd failure in a row), two
//     delivery.dead_lettered, one endpoint.dead_letter_spike (threshold 2);
//     then a success: endpoint.recovered.
//
// The rate-limited ones are 7 per tenant, under the burst of 20, so none
// is held back (TestBurstOfTransitionsIsBounded in internal/ops covers the
// limit).
func TestEveryOperationalEventOncePerTransition(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h := startHerald(t, func(c *app.Config) {
		c.Clock = clk
		c.HousekeepingInterval = 50 * time.Millisecond
		c.OperatorTenant = "ops"
		c.SpikeThreshold = 2
		// The lease (2 × AttemptTimeout + 5 s, on the clock) outlasts the
		// ten minutes the clock moves on at the end: a delivery whose
		// completion is not written yet when the clock jumps is not
		// rescued and sent again (at least once is not what this test
		// counts).
		c.AttemptTimeout = 5 * time.Minute
	})
	watch, operator := newReceiver(t, 200), newReceiver(t, 200)
	gone, dead, ok := newReceiver(t, 410), newReceiver(t, 500), newReceiver(t, 200)
	create := func(tenant, url string, types ...string) string {
		t.Helper()
		var ep struct{ ID string }
		if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": tenant, "url": url, "event_types": types}, &ep); st != http.StatusCreated {
			t.Fatalf("create: %d %s", st, raw)
		}
		return ep.ID
	}
	// The subscribers first: the events about the others all find them.
	create("acme", watch.URL, "endpoint.*", "delivery.*")
	create("ops", operator.URL, "endpoint.*", "delivery.*")
	g := create("acme", gone.URL, "gone.test")
	x := create("acme", ok.URL, "x.test")
	d := create("acme", dead.URL, "dead.test")

	if st, raw := h.call("PATCH", "/v1/endpoints/"+x, map[string]any{"description": "renamed"}, nil); st != http.StatusOK {
		t.Fatalf("update: %d %s", st, raw)
	}
	if st, raw := h.call("DELETE", "/v1/endpoints/"+x, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d %s", st, raw)
	}
	h.publish("acme", "gone.test", `{}`)
	d1, d2 := h.publish("acme", "dead.test", `{"n":1}`), h.publish("acme", "dead.test", `{"n":2}`)

	state := func(id string) string {
		var ep endpointResp
		if st, raw := h.call("GET", "/v1/endpoints/"+id, nil, &ep); st != http.StatusOK {
			t.Fatalf("get %s: %d %s", id, st, raw)
		}
		return ep.State
	}
	h.advanceUntil(clk, 20*time.Millisecond, "G disabled by its 410", func() bool { return state(g) == "disabled" })
	if st, raw := h.call("POST", "/v1/endpoints/"+g+"/enable", nil, nil); st != http.StatusOK {
		t.Fatalf("enable: %d %s", st, raw)
	}
	h.advanceUntil(clk, 20*time.Millisecond, "both deliveries to D dead-lettered", func() bool {
		return h.eventDeliveries(d1.ID)[0].State == "dead" && h.eventDeliveries(d2.ID)[0].State == "dead"
	})
	dead.mu.Lock()
	dead.script = []int{200}
	dead.mu.Unlock()
	h.publish("acme", "dead.test", `{"n":3}`)

	type key struct{ typ, subject string }
	want := map[key]int{
		{"endpoint.created", g}: 1, {"endpoint.created", x}: 1, {"endpoint.created", d}: 1,
		{"endpoint.updated", x}: 1, {"endpoint.deleted", x}: 1,
		{"endpoint.disabled", g}: 1, {"delivery.dead_lettered", g}: 1, {"endpoint.enabled", g}: 1,
		{"endpoint.failing", d}: 1, {"delivery.dead_lettered", d}: 2, {"endpoint.dead_letter_spike", d}: 1,
		{"endpoint.recovered", d}: 1,
	}
	subjects := map[string]bool{g: true, x: true, d: true}
	// received counts, per (type, endpoint the event is about), the
	// requests and the distinct event ids a receiver got, and the types it
	// got about no endpoint.
	received := func(r *receiver) (requests, ids map[key]int, other []string) {
		requests, ids = map[key]int{}, map[key]int{}
		seen := map[string]bool{}
		for _, q := range r.got() {
			var b struct {
				ID, Type string
				Data     struct {
					EndpointID string `json:"endpoint_id"`
				}
			}
			if err := json.Unmarshal(q.Body, &b); err != nil {
				t.Fatal(err)
			}
			if b.Data.EndpointID == "" {
				other = append(other, b.Type)
				continue
			}
			if !subjects[b.Data.EndpointID] {
				continue // the subscribers' own endpoint.created
			}
			k := key{b.Type, b.Data.EndpointID}
			requests[k]++
			if !seen[b.ID] {
				seen[b.ID] = true
				ids[k]++
			}
		}
		return requests, ids, other
	}
	complete := func(r *receiver) bool {
		_, ids, _ := received(r)
		for k, n := range want {
			if ids[k] < n {
				return false
			}
		}
		return true
	}
	h.advanceUntil(clk, 20*time.Millisecond, "every operational event reaches the owner and the operator", func() bool {
		return complete(watch) && complete(operator)
	})
	// Ten more minutes of retries and housekeeping rounds on the clock
	// (within the spike window of 15 minutes): nothing more may come.
	for range 20 {
		clk.Advance(30 * time.Second)
		time.Sleep(25 * time.Millisecond) // an event, if one were sent, would arrive here
	}
	for name, r := range map[string]*receiver{"the owner's endpoint.*/delivery.* subscriber": watch, "the operator tenant": operator} {
		requests, ids, other := received(r)
		for k, n := range want {
			if requests[k] != n || ids[k] != n {
				t.Errorf("%s: %s about %s: %d requests, %d events; want %d", name, k.typ, k.subject, requests[k], ids[k], n)
			}
		}
		for k := range requests {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: unexpected %s about %s", name, k.typ, k.subject)
			}
		}
		if len(other) != 0 {
			t.Errorf("%s: events about no endpoint %v (none was held back by the rate limit)", name, other)
		}
	}
}

// TestFailingBeforeDisableWithFewMinFailures: end to end, on a fake clock,
// with --disable-min-failures 1 and 2 (below the 3 failures in a row that
// raise endpoint.failing), an endpoint the failure streak disables raises
// endpoint.failing and then endpoint.disabled, each exactly once, at the
// owner's endpoint.* subscriber and the operator tenant. Each attempt of
// the failing receiver lasts two minutes on the clock (the receiver moves
// it), past --disable-after (1 minute): with 1 the first failure disables,
// with 2 the second.
func TestFailingBeforeDisableWithFewMinFailures(t *testing.T) {
	t.Parallel()
	for _, minFailures := range []int{1, 2} {
		t.Run(fmt.Sprintf("min_%d", minFailures), func(t *testing.T) {
			t.Parallel()
			clk := newFakeClock()
			h := startHerald(t, func(c *app.Config) {
				c.Clock = clk
				c.DisableAfter = time.Minute
				c.DisableMinFailures = minFailures
				// The lease (on the clock) outlasts the two minutes of an
				// attempt.
				c.AttemptTimeout = 5 * time.Minute
				c.HousekeepingInterval = 50 * time.Millisecond
				c.OperatorTenant = "ops"
			})
			watch, operator := newReceiver(t, 200), newReceiver(t, 200)
			slow := newReceiverWith(t, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					clk.Advance(2 * time.Minute)
					next.ServeHTTP(w, r)
				})
			}, 503)
			create := func(tenant, url string, types ...string) string {
				t.Helper()
				var ep struct{ ID string }
				if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": tenant, "url": url, "event_types": types}, &ep); st != http.StatusCreated {
					t.Fatalf("create: %d %s", st, raw)
				}
				return ep.ID
			}
			create("acme", watch.URL, "endpoint.*", "delivery.*")
			create("ops", operator.URL, "endpoint.*", "delivery.*")
			d := create("acme", slow.URL, "slow.test")
			ev := h.publish("acme", "slow.test", `{}`)
			h.advanceUntil(clk, 20*time.Millisecond, "the endpoint disabled by its failure streak", func() bool {
				var ep endpointResp
				h.call("GET", "/v1/endpoints/"+d, nil, &ep)
				return ep.State == "disabled"
			})
			if got := h.eventDeliveries(ev.ID)[0]; got.Attempts != minFailures {
				t.Fatalf("disabled after %d failures, want %d", got.Attempts, minFailures)
			}
			// about returns the types of the events a receiver got about
			// the disabled endpoint, endpoint.created left out, in the order
			// they came.
			about := func(r *receiver) []string {
				var out []string
				for _, q := range r.got() {
					var b struct {
						Type string
						Data struct {
							EndpointID string `json:"endpoint_id"`
						}
					}
					if err := json.Unmarshal(q.Body, &b); err != nil {
						t.Fatal(err)
					}
					if b.Data.EndpointID == d && b.Type != "endpoint.created" {
						out = append(out, b.Type)
					}
				}
				return out
			}
			h.advanceUntil(clk, 20*time.Millisecond, "both events at the owner and the operator", func() bool {
				return len(about(watch)) >= 2 && len(about(operator)) >= 2
			})
			// Ten more minutes of housekeeping rounds on the clock: nothing
			// more may come.
			for range 20 {
				clk.Advance(30 * time.Second)
				time.Sleep(25 * time.Millisecond) // an event, if one were sent, would arrive here
			}
			want := []string{"endpoint.failing", "endpoint.disabled"}
			for _, c := range []struct {
				name, tenant string
				r            *receiver
			}{{"the owner's subscriber", "acme", watch}, {"the operator tenant", "ops", operator}} {
				got := about(c.r)
				slices.Sort(got)
				if !slices.Equal(got, []string{"endpoint.disabled", "endpoint.failing"}) {
					t.Errorf("%s received %v about the endpoint, want each of %v once", c.name, about(c.r), want)
				}
				// The order of publication: the tenant's events, newest first.
				var list struct {
					Data []struct{ Type string }
				}
				if st, raw := h.call("GET", "/v1/events?tenant="+c.tenant, nil, &list); st != http.StatusOK {
					t.Fatalf("list events: %d %s", st, raw)
				}
				var published []string
				for i := len(list.Data) - 1; i >= 0; i-- {
					if typ := list.Data[i].Type; typ == "endpoint.failing" || typ == "endpoint.disabled" {
						published = append(published, typ)
					}
				}
				if !slices.Equal(published, want) {
					t.Errorf("%s's events were published as %v, want %v", c.tenant, published, want)
				}
			}
		})
	}
}
