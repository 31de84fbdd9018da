package console

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

var (
	deliveryLink = regexp.MustCompile(`href="/ui/deliveries/(dlv_[^"]+)"`)
	olderLink    = regexp.MustCompile(`href="([^"]+)" data-testid="next"`)
)

// TestEndpointDeliveriesPagedToTheEnd: an endpoint's page lists its
// deliveries a page at a time and its "Older" link (a cursor) reaches the
// oldest, keeping the state filter; every delivery is listed once.
func TestEndpointDeliveriesPagedToTheEnd(t *testing.T) {
	f := newFixture(t)
	var ep api.EndpointOut
	if st := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://receiver.example/hook"}`, &ep); st != 201 {
		t.Fatalf("endpoint: %d", st)
	}
	const n = 120
	for i := range n {
		if st := f.apiCall(adminKey, "POST", "/v1/events", fmt.Sprintf(`{"tenant":"acme","type":"order.placed","id":"o-%d","data":{}}`, i), nil); st != 202 {
			t.Fatalf("publish %d: %d", i, st)
		}
	}
	var want []string
	for cursor := ""; ; {
		var dl api.DeliveryList
		f.apiCall(adminKey, "GET", "/v1/endpoints/"+ep.ID+"/deliveries?limit=1000&cursor="+url.QueryEscape(cursor), "", &dl)
		for _, d := range dl.Data {
			want = append(want, d.ID)
		}
		if cursor = dl.NextCursor; cursor == "" {
			break
		}
	}
	if len(want) != n {
		t.Fatalf("the API lists %d deliveries, want %d", len(want), n)
	}
	b, _ := adminBrowser(t, f)
	for _, state := range []string{"", "pending"} {
		var got []string
		pages := 0
		for next := "/ui/endpoints/" + ep.ID + "?state=" + state; next != ""; pages++ {
			if pages > n {
				t.Fatal("the pager does not end")
			}
			w := b.do("GET", next, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s: %d", next, w.Code)
			}
			body := w.Body.String()
			for _, m := range deliveryLink.FindAllStringSubmatch(body, -1) {
				got = append(got, m[1])
			}
			next = ""
			if m := olderLink.FindStringSubmatch(body); m != nil {
				next = html.UnescapeString(m[1])
				if !strings.Contains(next, "state="+state+"&") {
					t.Fatalf("the Older link %s drops the state filter %q", next, state)
				}
			}
		}
		if pages < 3 {
			t.Errorf("state %q: %d deliveries on %d page(s); want pages of at most 50", state, len(got), pages)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("state %q: the pages list %d deliveries (%v…), want the API's %d, newest first, each once", state, len(got), got[:min(3, len(got))], len(want))
		}
	}
	// Another state's filter lists none of them.
	if body := b.do("GET", "/ui/endpoints/"+ep.ID+"?state=dead", nil).Body.String(); deliveryLink.MatchString(body) || !strings.Contains(body, "No deliveries in state dead") {
		t.Fatal("state=dead lists pending deliveries")
	}
}

// TestEventsSearchByTypeTenantAndTime: the events page searches by type,
// tenant and the time the event occurred; a time range finds an event
// published before a page of older (backfilled) ones.
func TestEventsSearchByTypeTenantAndTime(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Minute)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	publish := func(tenant, typ, id, occurred string) {
		t.Helper()
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"`+tenant+`","type":"`+typ+`","id":"`+id+`","occurred_at":"`+occurred+`","data":{}}`, nil); st != 202 {
			t.Fatalf("publish %s: %d", id, st)
		}
	}
	publish("acme", "order.placed", "in-range", at(-time.Hour))
	publish("globex", "order.placed", "other-tenant", at(-time.Hour))
	publish("acme", "invoice.paid", "other-type", at(-time.Hour))
	// Then a backfill: more than a page of the API's list (200) of events
	// that occurred earlier, listed before the first ones (newest first
	// is by publication).
	for i := range 210 {
		publish("acme", "order.placed", fmt.Sprintf("old-%d", i), at(-3*time.Hour))
	}
	b, _ := adminBrowser(t, f)
	search := func(q url.Values) []string {
		t.Helper()
		w := b.do("GET", "/ui/events?"+q.Encode(), nil)
		if w.Code != http.StatusOK {
			t.Fatalf("search %v: %d\n%s", q, w.Code, w.Body)
		}
		var ids []string
		for _, m := range regexp.MustCompile(`<tr><td><a href="/ui/events/[^"]+">([^<]+)</a>`).FindAllStringSubmatch(w.Body.String(), -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	from, until := now.Add(-2*time.Hour).Format("2006-01-02T15:04"), now.Add(-30*time.Minute).Format("2006-01-02T15:04")
	if got := search(url.Values{"from": {from}, "until": {until}}); !slices.Equal(got, []string{"other-type", "other-tenant", "in-range"}) {
		t.Errorf("from %s until %s: %v; want the three events of an hour ago", from, until, got)
	}
	if got := search(url.Values{"from": {from}, "type": {"order.placed"}, "tenant": {"acme"}}); !slices.Equal(got, []string{"in-range"}) {
		t.Errorf("acme's order.placed from %s: %v; want in-range", from, got)
	}
	if got := search(url.Values{"type": {"invoice.paid"}}); !slices.Equal(got, []string{"other-type"}) {
		t.Errorf("type invoice.paid: %v", got)
	}
	if got := search(url.Values{"tenant": {"globex"}}); !slices.Equal(got, []string{"other-tenant"}) {
		t.Errorf("tenant globex: %v", got)
	}
	got := search(url.Values{"until": {now.Add(-2 * time.Hour).Format("2006-01-02T15:04")}, "tenant": {"acme"}})
	if len(got) < 50 || slices.ContainsFunc(got, func(id string) bool { return !strings.HasPrefix(id, "old-") }) {
		t.Errorf("acme until 2 h ago: %d events (%v…); want at least 50, all backfilled ones", len(got), got[:min(3, len(got))])
	}
}

// TestBuildChartBuckets: each time falls in its minute (or quarter hour)
// by outcome; times outside the window are not drawn.
func TestBuildChartBuckets(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 30, 0, time.UTC)
	series := [3][]time.Time{
		{now.Add(-10 * time.Second), now.Add(-20 * time.Second), now.Add(-90 * time.Second)}, // succeeded: 2 in 11:59, 1 in 11:58
		{now.Add(-30 * time.Minute)}, // retrying: 11:30
		{now.Add(-59*time.Minute - 59*time.Second), now.Add(-2 * time.Hour), now}, // dead: 11:00; the others are outside the hour
	}
	ch := buildChart("hour", now, time.Minute, 60, series)
	if ch.Totals != [3]int{3, 1, 1} {
		t.Fatalf("totals %v, want [3 1 1]", ch.Totals)
	}
	svg := string(ch.SVG)
	for _, want := range []string{"11:59: 2 succeeded", "11:58: 1 succeeded", "11:30: 1 retrying", "11:00: 1 dead"} {
		if !strings.Contains(svg, "<title>"+want+"</title>") {
			t.Errorf("the hour chart has no bar %q:\n%s", want, svg)
		}
	}
	if n := strings.Count(svg, "<rect "); n != 4 {
		t.Errorf("%d bars, want 4", n)
	}
	// The tallest stack (2) reaches the top; a count of 1 is half as tall.
	heights := map[string]string{}
	for _, m := range regexp.MustCompile(`height="([0-9.]+)" class="bar-\w+"><title>([^<]+)</title>`).FindAllStringSubmatch(svg, -1) {
		heights[m[2]] = m[1]
	}
	if heights["11:59: 2 succeeded"] != "130.00" || heights["11:58: 1 succeeded"] != "65.00" {
		t.Errorf("bar heights %v; want 130 for 2 and 65 for 1", heights)
	}
	day := buildChart("day", now, 15*time.Minute, 96, series)
	if day.Totals != [3]int{3, 1, 2} {
		t.Fatalf("day totals %v, want [3 1 2]", day.Totals)
	}
	daySVG := string(day.SVG)
	// The window starts at 12:00:30 the day before: its quarters start at
	// hh:00:30, hh:15:30…, the last at 11:45:30.
	for _, want := range []string{"11:45: 3 succeeded", "11:30: 1 retrying", "11:00: 1 dead", "10:00: 1 dead"} {
		if !strings.Contains(daySVG, "<title>"+want+"</title>") {
			t.Errorf("the day chart has no bar %q:\n%s", want, daySVG)
		}
	}
}

// TestOverviewQueueAndFailing: the overview counts the pending deliveries
// (queue depth), links the one due first, lists the endpoint whose
// deliveries wait for a retry with its next attempt, and charts the hour.
func TestOverviewQueueAndFailing(t *testing.T) {
	f := newFixture(t)
	var bad, good api.EndpointOut
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://bad.example/hook","event_types":["order.*"]}`, &bad)
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://good.example/hook","event_types":["invoice.*"]}`, &good)
	for _, typ := range []string{"order.placed", "order.placed", "invoice.paid", "invoice.paid"} {
		if st := f.apiCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"`+typ+`","data":{}}`, nil); st != 202 {
			t.Fatalf("publish: %d", st)
		}
	}
	now := time.Now().UTC()
	claims, err := f.st.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 4 {
		t.Fatalf("claim: %d %v", len(claims), err)
	}
	var cs []store.Completion
	retries := []time.Duration{20 * time.Minute, 5 * time.Minute}
	var dueFirst string
	for _, c := range claims {
		cm := store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "test", LeaseUntil: c.Delivery.LeaseUntil, Now: now,
			Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: now, StatusCode: 200, Duration: time.Millisecond}}
		if c.Endpoint.ID == bad.ID {
			cm.State, cm.Attempt.StatusCode, cm.NextAttemptAt = store.DeliveryPending, 503, now.Add(retries[0])
			if retries[0] == 5*time.Minute {
				dueFirst = c.Delivery.ID
			}
			retries = retries[1:]
		} else {
			cm.State = store.DeliverySucceeded
		}
		cs = append(cs, cm)
	}
	if err := f.st.CompleteDeliveries(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Minute) // the page's clock after the completions
	b, _ := adminBrowser(t, f)
	page := b.do("GET", "/ui/", nil).Body.String()
	if !strings.Contains(page, `data-testid="queue-depth">2<`) {
		t.Errorf("queue depth is not 2:\n%s", page)
	}
	if !strings.Contains(page, `data-testid="oldest-due"><a href="/ui/deliveries/`+dueFirst+`"`) {
		t.Errorf("the oldest due delivery is not %s:\n%s", dueFirst, page)
	}
	row := regexp.MustCompile(`(?s)<tr><td><a href="/ui/endpoints/` + bad.ID + `">.*?</tr>`).FindString(page)
	if row == "" || !strings.Contains(row, "<td>2</td>") || !strings.Contains(row, "in 4 min") || !strings.Contains(row, "HTTP 503") {
		t.Errorf("the failing endpoint's row (want 2 retrying, next in 4 min, HTTP 503):\n%s", row)
	}
	if strings.Contains(page, `href="/ui/endpoints/`+good.ID+`"`) {
		t.Error("a healthy endpoint is listed as failing")
	}
	if !strings.Contains(page, "2 ok</span> · <span class=\"retrying\">2 retrying</span> · <span class=\"dead\">0 dead") {
		t.Errorf("the last hour's totals are not 2 ok, 2 retrying, 0 dead:\n%s", page)
	}
}

// TestCreateSourceRedirects: creating an inbound source answers a redirect
// (Post/Redirect/Get) to a page that names it, so a reload creates no
// second source.
func TestCreateSourceRedirects(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	w := b.do("POST", "/ui/sources", url.Values{"csrf": {token}, "name": {"gh"}, "scheme": {"github"},
		"secrets": {"source-secret-0123456789"}, "destination_url": {"http://10.0.0.9/in"}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("create source: %d, want 303", w.Code)
	}
	var sl struct{ Data []api.SourceOut }
	f.apiCall(adminKey, "GET", "/v1/sources", "", &sl)
	if len(sl.Data) != 1 {
		t.Fatalf("%d sources, want 1", len(sl.Data))
	}
	src := sl.Data[0]
	loc := w.Header().Get("Location")
	page := b.do("GET", loc, nil).Body.String()
	if !strings.Contains(page, src.ID) || !strings.Contains(page, src.IngestPath) || !strings.Contains(page, "created") {
		t.Fatalf("GET %s does not say the source was created and where providers post:\n%s", loc, page)
	}
	if again := b.do("GET", loc, nil); again.Code != http.StatusOK || strings.Contains(again.Body.String(), "created") {
		t.Fatalf("reloading %s: %d, says created again", loc, again.Code)
	}
	f.apiCall(adminKey, "GET", "/v1/sources", "", &sl)
	if len(sl.Data) != 1 {
		t.Fatalf("%d sources after the reloads, want 1", len(sl.Data))
	}
	// The list says when the source's forwarding endpoint holds new
	// forwards (paused here; disabled after a 410), and not otherwise.
	if list := b.do("GET", "/ui/sources", nil).Body.String(); strings.Contains(list, `data-testid="forwarding-state"`) {
		t.Fatalf("an enabled forwarding endpoint is shown as holding forwards:\n%s", list)
	}
	f.apiCall(adminKey, "POST", "/v1/endpoints/"+src.EndpointID+"/pause", "", nil)
	if list := b.do("GET", "/ui/sources", nil).Body.String(); !strings.Contains(list, `<span class="state-paused" data-testid="forwarding-state"`) {
		t.Fatalf("the sources list does not say the forwarding endpoint is paused:\n%s", list)
	}
	// A refused form is shown again with the reason and what was typed
	// (but the write-only secrets), and creates nothing.
	for _, form := range []url.Values{
		{"name": {"x<b>"}, "scheme": {"shopify"}, "secrets": {""}, "destination_url": {"http://10.0.0.9/in?x=1"}, "tolerance_seconds": {"120"}},
		{"name": {"x<b>"}, "scheme": {"shopify"}, "secrets": {"s3cr3t-typed"}, "destination_url": {"http://10.0.0.9/in?x=1"}, "tolerance_seconds": {"120"}},
		{"name": {"x<b>"}, "scheme": {"shopify"}, "secrets": {"source-secret-0123456789"}, "destination_url": {"http://10.0.0.9/in?x=1"}, "tolerance_seconds": {"soon"}},
	} {
		form.Set("csrf", token)
		w := b.do("POST", "/ui/sources", form)
		page := w.Body.String()
		if w.Code < 400 || !strings.Contains(page, `class="error"`) {
			t.Fatalf("refused source %v: %d, no error shown", form, w.Code)
		}
		for _, want := range []string{`name="name" value="x&lt;b&gt;"`, `<option selected>shopify</option>`, `value="http://10.0.0.9/in?x=1"`, `value="` + form.Get("tolerance_seconds") + `"`} {
			if !strings.Contains(page, want) {
				t.Errorf("refused source %v: the form lost what was typed (%s)", form, want)
			}
		}
		if s := form.Get("secrets"); s != "" && strings.Contains(page, s) {
			t.Errorf("refused source: the page shows the secret %q", s)
		}
	}
	f.apiCall(adminKey, "GET", "/v1/sources", "", &sl)
	if len(sl.Data) != 1 {
		t.Fatalf("%d sources after the refused forms, want 1", len(sl.Data))
	}
}

// The endpoints list's text and state filters find a match wherever it is
// in the list, not only among the first page of 100 the API answers
// (an old endpoint was "not found" behind 100 newer ones).
func TestEndpointsFilterReadsPastTheFirstPage(t *testing.T) {
	f := newFixture(t)
	var old struct {
		ID string `json:"id"`
	}
	if st := f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://needle.example/hook","description":"the needle"}`, &old); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	if st := f.apiCall(adminKey, "POST", "/v1/endpoints/"+old.ID+"/pause", "", nil); st != http.StatusOK {
		t.Fatalf("pause: %d", st)
	}
	for i := range 120 {
		if st := f.apiCall(adminKey, "POST", "/v1/endpoints", fmt.Sprintf(`{"tenant":"acme","url":"https://hay%d.example/hook"}`, i), nil); st != http.StatusCreated {
			t.Fatalf("create %d: %d", i, st)
		}
	}
	b, _ := adminBrowser(t, f)
	for _, q := range []string{"q=needle", "state=paused", "q=NEEDLE&state=paused"} {
		page := b.do("GET", "/ui/endpoints?"+q, nil).Body.String()
		if !strings.Contains(page, `data-endpoint="`+old.ID+`"`) {
			t.Errorf("%s: endpoint %s (behind 120 newer ones) not listed:\n%s", q, old.ID, page)
		}
		if strings.Contains(page, "hay1.example") {
			t.Errorf("%s: lists an endpoint that does not match", q)
		}
	}
	// Unfiltered, the list is still paged by 100.
	page := b.do("GET", "/ui/endpoints", nil).Body.String()
	if n := strings.Count(page, "data-endpoint="); n != 100 || !strings.Contains(page, "Next page") {
		t.Errorf("unfiltered first page: %d rows (want 100 and a next page)", n)
	}
}

// The overview counts and lists inbound sources' forwarding endpoints as
// well: a disabled one holds what its source accepts, so it is failing
// now, named as its source's, and /metrics counts it too.
func TestOverviewShowsForwardingEndpoints(t *testing.T) {
	f := newFixture(t)
	var src api.SourceOut
	if code := f.apiCall(adminKey, "POST", "/v1/sources", `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`, &src); code != http.StatusCreated {
		t.Fatalf("create source: %d", code)
	}
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://good.example/hook"}`, nil)
	if _, _, err := f.st.SetEndpointState(t.Context(), store.SetEndpointStateParams{ID: src.EndpointID, State: store.EndpointDisabled,
		Reason: "the endpoint answered 410 Gone", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b, _ := adminBrowser(t, f)
	page := html.UnescapeString(b.do("GET", "/ui/", nil).Body.String())
	row := regexp.MustCompile(`(?s)<tr><td><a href="/ui/endpoints/` + src.EndpointID + `">.*?</tr>`).FindString(page)
	if row == "" || !strings.Contains(row, `forwards inbound source <a href="/ui/sources/`+src.ID+`">`) {
		t.Errorf("the disabled forwarding endpoint is not failing now, named as its source's:\n%s", page)
	}
	if !regexp.MustCompile(`<div class="k">Endpoints</div><div class="v">2</div>`).MatchString(page) {
		t.Errorf("the endpoints card does not count the forwarding endpoint:\n%s", page)
	}
}
