package console

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestEndpointHealthFromStats: the endpoints list and the endpoint page
// show the last day's success rate, p95 bucket and last success from the
// endpoint's stats rollups — the same figures GET /v1/endpoints/{id}/stats
// answers — and an endpoint without attempts shows dashes.
func TestEndpointHealthFromStats(t *testing.T) {
	f := newFixture(t)
	var busy, idle api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://busy.example/hook"}`, &busy)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://idle.example/hook","event_types":["never.sent"]}`, &idle)
	for range 4 {
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, nil); st != 202 {
			t.Fatalf("publish: %d", st)
		}
	}
	now := time.Now().UTC()
	claims, err := f.st.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 4 {
		t.Fatalf("claim: %d %v", len(claims), err)
	}
	var cs []store.Completion
	for i, c := range claims {
		state, code := store.DeliverySucceeded, 200
		if i == 3 {
			state, code = store.DeliveryDead, 500
		}
		cs = append(cs, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "test", LeaseUntil: c.Delivery.LeaseUntil, State: state, Now: now,
			Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: now, StatusCode: code, Duration: time.Duration(40+i) * time.Millisecond}})
	}
	if err := f.st.CompleteDeliveries(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	var stats api.EndpointStatsOut
	if st := f.apiCall(adminKey, "GET", "/v1/endpoints/"+busy.ID+"/stats?window=24h", "", &stats); st != 200 || stats.Duration.P95Ms == nil {
		t.Fatalf("stats: %d %+v", st, stats)
	}
	p95 := regexp.QuoteMeta(fmt.Sprintf("≤ %.0f ms", *stats.Duration.P95Ms))
	b := f.browser()
	b.signIn(adminKey)
	list := b.do("GET", "/ui/endpoints", nil).Body.String()
	row := regexp.MustCompile(`(?s)<tr data-endpoint="` + busy.ID + `">.*?</tr>`).FindString(list)
	if !strings.Contains(row, `75% <span class="sub">of 4</span>`) || !regexp.MustCompile(p95).MatchString(row) || !strings.Contains(row, ">1</a>") {
		t.Fatalf("busy endpoint's row: want 75%% of 4, p95 %s, 1 dead letter:\n%s", p95, row)
	}
	idleRow := regexp.MustCompile(`(?s)<tr data-endpoint="` + idle.ID + `">.*?</tr>`).FindString(list)
	if strings.Count(idleRow, "—") < 2 {
		t.Fatalf("an endpoint without attempts shows figures:\n%s", idleRow)
	}
	page := b.do("GET", "/ui/endpoints/"+busy.ID, nil).Body.String()
	if !strings.Contains(page, "75%") || !strings.Contains(page, "4 attempts in the last 24h") || !regexp.MustCompile(p95).MatchString(page) {
		t.Fatalf("endpoint page without its health:\n%s", page)
	}
	// One attempt is one attempt.
	if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"never.sent","data":{}}`, nil); st != 202 {
		t.Fatalf("publish: %d", st)
	}
	now = time.Now().UTC()
	claims, err = f.st.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %d %v", len(claims), err)
	}
	cs = nil
	for _, c := range claims {
		cs = append(cs, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "test", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded, Now: now,
			Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: now, StatusCode: 200, Duration: time.Millisecond}})
	}
	if err := f.st.CompleteDeliveries(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	if page := b.do("GET", "/ui/endpoints/"+idle.ID, nil).Body.String(); !strings.Contains(page, ">1 attempt in the last 24h<") {
		t.Fatalf("an endpoint with one attempt: want \"1 attempt in the last 24h\":\n%s", page)
	}
}

// TestOverviewLastFailureOfDeadLetters: an endpoint whose failures are all
// dead letters already (none pending) is listed as failing with its last
// failure: the status and when, from the latest dead letter.
func TestOverviewLastFailureOfDeadLetters(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://down.example/hook"}`, &ep)
	if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, nil); st != 202 {
		t.Fatalf("publish: %d", st)
	}
	now := time.Now().UTC()
	f.attemptAll(1, now, func(int, store.Claim) (store.DeliveryState, int) { return store.DeliveryDead, 503 })
	b := f.browser()
	b.signIn(adminKey)
	page := b.do("GET", "/ui/", nil).Body.String()
	i := strings.Index(page, ep.ID)
	if i < 0 {
		t.Fatalf("the endpoint is not listed as failing:\n%s", page)
	}
	start, end := strings.LastIndex(page[:i], "<tr"), strings.Index(page[i:], "</tr>")
	if start < 0 || end < 0 {
		t.Fatalf("the endpoint is not in a table row:\n%s", page)
	}
	row := page[start : i+end]
	if !strings.Contains(row, "HTTP 503") || !strings.Contains(row, `<div class="sub">`) {
		t.Errorf("its last failure is not shown (want HTTP 503 and when):\n%s", row)
	}
}
