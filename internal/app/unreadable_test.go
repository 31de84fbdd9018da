package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
	"github.com/herald-webhooks/herald/webhook"
)

// sealUnderLostKey re-seals the signing secrets of endpoint id, stored
// under nodeKey (base64), under lostKey, a key the nodes do not hold, as a
// node that missed the new key would have left them after `herald rekey`
// and the removal of the old key (docs/production.md, "Encryption key
// rotation"). It returns the fix: `herald rekey` with the lost key in
// HERALD_ENCRYPTION_KEY_PREVIOUS (store.Rekey, as the command runs it).
func sealUnderLostKey(t *testing.T, st store.Store, nodeKey, lostKey, id string) (rekey func()) {
	t.Helper()
	return sealColumnUnderLostKey(t, st, "endpoints", "secrets", nodeKey, lostKey, id)
}

// sealColumnUnderLostKey is sealUnderLostKey for the sealed column
// table.column (store.SealedColumns) of row id, e.g. sources.config.
func sealColumnUnderLostKey(t *testing.T, st store.Store, table, column, nodeKey, lostKey, id string) (rekey func()) {
	t.Helper()
	box := func(k string) *secretbox.Box {
		raw, err := secretbox.ParseKey(k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := secretbox.New(raw)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	nodeBox, lostBox := box(nodeKey), box(lostKey)
	sealed := st.Capabilities().Sealed
	var secrets store.SealedColumn
	for _, c := range store.SealedColumns {
		if c.Table == table && c.Column == column {
			secrets = c
		}
	}
	v, ok, err := sealed.SealedValue(t.Context(), secrets, id)
	if err != nil || !ok {
		t.Fatalf("read the secrets of %s: %v, %v", id, ok, err)
	}
	plain, err := store.OpenBytes(nodeBox, id, v)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := store.SealBytes(lostBox, id, plain)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sealed.ReplaceSealed(t.Context(), secrets, id, v, lost); err != nil || !ok {
		t.Fatalf("seal the secrets of %s under another key: %v, %v", id, ok, err)
	}
	return func() {
		t.Helper()
		stats, err := store.Rekey(context.Background(), sealed, secretbox.NewKeyring(lostBox), nodeBox)
		if err != nil || stats.Rewritten != 1 {
			t.Fatalf("rekey with the lost key as the previous one: %+v, %v; want the one value moved", stats, err)
		}
	}
}

// unreadableGauge reads herald_endpoints_unreadable from /metrics.
func (h *herald) unreadableGauge() string {
	h.t.Helper()
	_, raw := h.call("GET", "/metrics", nil, nil)
	m := regexp.MustCompile(`(?m)^herald_endpoints_unreadable (\S+)$`).FindSubmatch(raw)
	if m == nil {
		h.t.Fatalf("/metrics has no herald_endpoints_unreadable")
	}
	return string(m[1])
}

// TestEndpointWhoseSecretsDoNotOpenStallsNoOneElse: an endpoint whose
// signing secrets are sealed under a key no node holds (docs/production.md,
// "Encryption key rotation") once made every claim that met one of its
// deliveries fail as a whole, on every node, so that no tenant's delivery
// was made while /readyz stayed 200. Now the claims leave that endpoint's
// deliveries pending (no attempt: the key is the operator's problem, not
// the receiver's) and deliver the other tenants' and the same tenant's
// other endpoint's; the node logs one WARN naming the endpoint per skip
// (not one per claim) and herald_endpoints_unreadable counts it. Once
// `herald rekey` moves the value to the node's key, the endpoint's
// deliveries arrive, each at its first attempt and signed with its secret,
// without a restart. The schedule runs on a fake clock.
func TestEndpointWhoseSecretsDoNotOpenStallsNoOneElse(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	logs := &testutil.SyncBuffer{}
	h, key := startHeraldKeyed(t, func(c *app.Config) {
		c.Clock = clk
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.RetrySchedule = []time.Duration{time.Hour} // a failed attempt would show as a second one
	})
	bad, mate, other := newReceiver(t, 200), newReceiver(t, 200), newReceiver(t, 200)
	epBad := h.createEndpoint("acme", bad.URL)
	h.createEndpoint("acme", mate.URL)
	h.createEndpoint("globex", other.URL)
	rekey := sealUnderLostKey(t, h.m.Store(), key, newKey(t), epBad.ID)

	var acme []string // the events every acme endpoint gets
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 15 s (clock %v)", what, clk.Now())
			}
		}
	}
	warnings := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "do not open") && strings.Contains(l, "endpoint="+epBad.ID) {
				n++
			}
		}
		return n
	}
	// One event at a time, each waited for, so that no two attempts to
	// one endpoint overlap: a third one would be deferred by the
	// endpoint's slow start, on the clock that stands still here.
	publish := func(n int) {
		for range n {
			acme = append(acme, h.publish("acme", "invoice.paid", `{"n":1}`).ID)
			h.publish("globex", "invoice.paid", `{"n":1}`)
			want := len(acme)
			waitFor("the other endpoints' deliveries", func() bool { return len(mate.got()) == want && len(other.got()) == want })
		}
	}
	publish(3)
	waitFor("the WARN naming the endpoint", func() bool { return warnings() == 1 })
	if got := h.unreadableGauge(); got != "1" {
		t.Errorf("herald_endpoints_unreadable = %s, want 1", got)
	}
	// More publishes within the skip: the others get theirs; the endpoint
	// is not met again, so not logged again.
	publish(3)
	if n := warnings(); n != 1 {
		t.Errorf("%d WARN lines name the endpoint within one skip, want 1:\n%s", n, logs.String())
	}
	// The skip ends (1 s on the clock): the next claim meets the endpoint
	// again, logs it once more and skips it twice as long.
	h.advanceTo(clk, clk.Now().Add(time.Second))
	waitFor("the second skip's WARN", func() bool { return warnings() == 2 })
	for _, id := range acme {
		for _, d := range h.eventDeliveries(id) {
			if d.EndpointID == epBad.ID && (d.State != "pending" || d.Attempts != 0) {
				t.Errorf("delivery %s of the endpoint whose secrets do not open: %s after %d attempts; want pending, not attempted", d.ID, d.State, d.Attempts)
			}
		}
	}
	if len(bad.got()) != 0 {
		t.Fatalf("the endpoint whose secrets do not open received %d requests", len(bad.got()))
	}
	if strings.Contains(logs.String(), "claim deliveries failed") {
		t.Errorf("a claim failed:\n%s", logs.String())
	}

	// herald rekey with the lost key as the previous one: the endpoint's
	// deliveries arrive once its skip ends, each at its first attempt.
	rekey()
	h.advanceUntil(clk, time.Second, "the endpoint's deliveries after the rekey", func() bool { return len(bad.got()) == 6 })
	v := webhook.Verifier{Secrets: []string{epBad.Secret}, Now: clk.Now}
	for _, r := range bad.got() {
		if err := v.Verify(r.Header, r.Body); err != nil || r.Header.Get("X-Delivery-Attempt") != "1" {
			t.Errorf("delivery after the rekey: %v (attempt %s)", err, r.Header.Get("X-Delivery-Attempt"))
		}
	}
	waitFor("the gauge back at 0", func() bool { return h.unreadableGauge() == "0" })
	if !strings.Contains(logs.String(), "open again") {
		t.Errorf("no log line says the endpoint's values open again:\n%s", logs.String())
	}
	if len(mate.got()) != 6 || len(other.got()) != 6 {
		t.Errorf("the other endpoints got %d and %d deliveries, want 6 each", len(mate.got()), len(other.got()))
	}
}

// TestNodeWithoutAKeyLeavesDeliveriesToANodeWithIt: on PostgreSQL, a node
// that cannot open an endpoint's secrets (they are sealed under a key only
// another node holds, as HERALD_ENCRYPTION_KEY_PREVIOUS) gives that
// endpoint's deliveries back at every claim that meets them, wakes the
// other nodes, skips the endpoint for a while and goes on delivering the
// others; the node holding the key delivers them, each at its first
// attempt, signed with the endpoint's secret. Alone, the first node keeps
// them pending; once the second joins, they arrive.
func TestNodeWithoutAKeyLeavesDeliveriesToANodeWithIt(t *testing.T) {
	t.Parallel()
	db := pgDatabase(t)
	key, lostKey := newKey(t), newKey(t)
	node := func(logs *testutil.SyncBuffer, previous ...string) *herald {
		return startHerald(t, func(c *app.Config) {
			c.DB, c.EncryptionKey, c.PreviousEncryptionKeys = db, key, previous
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			c.RetrySchedule = []time.Duration{time.Hour} // a failed attempt would show as a second attempt
			c.AttemptTimeout = 2 * time.Second           // a joining node waits for the others' longest attempt
		})
	}
	var logsA, logsB testutil.SyncBuffer
	a := node(&logsA) // lacks lostKey
	sealedRcv, plainRcv := newReceiver(t, 200), newReceiver(t, 200)
	epSealed := a.createEndpoint("acme", sealedRcv.URL)
	a.createEndpoint("globex", plainRcv.URL)
	sealUnderLostKey(t, a.m.Store(), key, lostKey, epSealed.ID)

	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %v\nnode a:\n%s\nnode b:\n%s", what, within, logsA.String(), logsB.String())
			}
		}
	}
	const n = 5
	for range n {
		a.publish("acme", "invoice.paid", `{"n":1}`)
		a.publish("globex", "invoice.paid", `{"n":1}`)
	}
	waitFor("the other tenant's deliveries", 15*time.Second, func() bool { return len(plainRcv.got()) == n })
	waitFor("node a's WARN", 15*time.Second, func() bool {
		return strings.Contains(logsA.String(), "do not open") && strings.Contains(logsA.String(), "endpoint="+epSealed.ID)
	})
	if got := len(sealedRcv.got()); got != 0 {
		t.Fatalf("node a alone delivered %d deliveries of an endpoint it cannot open", got)
	}

	b := node(&logsB, lostKey) // holds the key
	waitFor("node b delivering what node a cannot open", 30*time.Second, func() bool { return len(sealedRcv.got()) == n })
	// Both running: the endpoint's new deliveries go to node b.
	for range n {
		a.publish("acme", "invoice.paid", `{"n":2}`)
		b.publish("acme", "invoice.paid", `{"n":2}`)
	}
	waitFor("the later deliveries", 30*time.Second, func() bool { return len(sealedRcv.got()) == 3*n })
	v := webhook.Verifier{Secrets: []string{epSealed.Secret}}
	for _, r := range sealedRcv.got() {
		if err := v.Verify(r.Header, r.Body); err != nil || r.Header.Get("X-Delivery-Attempt") != "1" {
			t.Errorf("delivery to the endpoint: %v (attempt %s)", err, r.Header.Get("X-Delivery-Attempt"))
		}
	}
	for name, logs := range map[string]string{"a": logsA.String(), "b": logsB.String()} {
		if strings.Contains(logs, "claim deliveries failed") {
			t.Errorf("a claim of node %s failed:\n%s", name, logs)
		}
	}
	if strings.Contains(logsB.String(), "do not open") {
		t.Errorf("node b, which holds the key, could not open the endpoint:\n%s", logsB.String())
	}
}

// TestEndpointWhoseSecretsDoNotOpenThroughTheAPI: an endpoint whose signing
// secrets are sealed under a key no node holds once answered 503 ("the
// store is unavailable; retry later") on every route, so it could be
// neither read, nor deleted, nor given a new secret through the API. Now
// GET answers it with the values that do not open named (not their
// contents), DELETE works, and a rotation replaces the secrets by the new
// one alone (nothing of the old ones can sign); other reads and changes
// answer 409 naming the rule and change nothing. The tenant wall holds
// for such an endpoint as for any (another tenant's key: 404).
func TestEndpointWhoseSecretsDoNotOpenThroughTheAPI(t *testing.T) {
	t.Parallel()
	h, key := startHeraldKeyed(t, func(*app.Config) {})
	key2 := func(role, tenant string) string {
		t.Helper()
		var k struct{ Key string }
		if st, raw := h.call("POST", "/v1/api-keys", map[string]any{"name": role, "role": role, "tenant": tenant}, &k); st != 201 {
			t.Fatalf("create key: %d %s", st, raw)
		}
		return k.Key
	}
	acme, globex := key2("manager", "acme"), key2("manager", "globex")
	ep := h.createEndpoint("acme", newReceiver(t, 200).URL)
	gone := h.createEndpoint("acme", newReceiver(t, 200).URL)
	h.mustCall("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"billing"}`, 200)
	sealUnderLostKey(t, h.m.Store(), key, newKey(t), ep.ID)
	sealUnderLostKey(t, h.m.Store(), key, newKey(t), gone.ID)

	type out struct {
		ID, Tenant, URL, Description string
		Unreadable                   []string
	}
	for _, k := range []string{testAPIKey, acme} {
		var got out
		if st, raw := h.callWithKey(k, "GET", "/v1/endpoints/"+ep.ID, nil, &got); st != 200 {
			t.Fatalf("GET the endpoint whose secrets do not open = %d %s, want 200", st, raw)
		}
		if got.ID != ep.ID || got.Tenant != "acme" || got.URL != ep.URL || got.Description != "billing" || strings.Join(got.Unreadable, ",") != "secrets" {
			t.Errorf("GET = %+v; want the endpoint with unreadable [secrets]", got)
		}
	}
	// Another tenant's key: 404 on every route, as for an unknown id.
	for _, r := range [][2]string{{"GET", ""}, {"GET", "/secret"}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/rotate-secret"}} {
		var body any
		if r[0] == "PATCH" {
			body = `{"description":"x"}`
		}
		if st, raw := h.callWithKey(globex, r[0], "/v1/endpoints/"+ep.ID+r[1], body, nil); st != 404 {
			t.Errorf("%s …%s with another tenant's key = %d %s, want 404", r[0], r[1], st, raw)
		}
	}
	// What needs the secrets, or would write them back: 409 naming the
	// rule, nothing changed.
	for _, r := range [][3]string{{"GET", "/secret", ""}, {"GET", "/secrets", ""}, {"PATCH", "", `{"description":"changed"}`}} {
		var body any
		if r[2] != "" {
			body = r[2]
		}
		st, raw := h.callWithKey(acme, r[0], "/v1/endpoints/"+ep.ID+r[1], body, nil)
		if st != 409 || !strings.Contains(string(raw), "do not open (secrets;") || !strings.Contains(string(raw), "rotate-secret") {
			t.Errorf("%s …%s = %d %s; want 409 naming the values and the rotation", r[0], r[1], st, raw)
		}
	}
	// Reads that need none of the values answer as for any endpoint: its
	// health and its deliveries (the dead-letter queue an operator looks
	// at while the key is being fixed); another tenant's key still 404.
	for _, r := range []string{"/stats", "/deliveries", "/deliveries?state=dead"} {
		if st, raw := h.callWithKey(acme, "GET", "/v1/endpoints/"+ep.ID+r, nil, nil); st != 200 {
			t.Errorf("GET …%s of the endpoint whose secrets do not open = %d %s; want 200 (it needs none of them)", r, st, raw)
		}
		if st, raw := h.callWithKey(globex, "GET", "/v1/endpoints/"+ep.ID+r, nil, nil); st != 404 {
			t.Errorf("GET …%s with another tenant's key = %d %s, want 404", r, st, raw)
		}
	}
	// A list shows them as GET does (TestListsShowEndpointsWhoseValuesDoNotOpen).
	var list struct{ Data []out }
	if st, raw := h.callWithKey(acme, "GET", "/v1/endpoints", nil, &list); st != 200 || len(list.Data) != 2 ||
		strings.Join(list.Data[0].Unreadable, ",") != "secrets" || strings.Join(list.Data[1].Unreadable, ",") != "secrets" {
		t.Errorf("GET /v1/endpoints = %d %s; want 200 and both endpoints, each with unreadable [secrets]", st, raw)
	}
	var got out
	h.callWithKey(acme, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
	if got.Description != "billing" {
		t.Errorf("after a refused PATCH the description is %q, want billing", got.Description)
	}

	// A rotation replaces them: the new secret alone.
	var rot struct {
		Secret            string
		PreviousExpiresAt *time.Time `json:"previous_expires_at"`
	}
	if st, raw := h.callWithKey(acme, "POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"overlap_seconds":3600}`, &rot); st != 200 || rot.Secret == "" || rot.PreviousExpiresAt != nil {
		t.Fatalf("rotate the secrets that do not open = %d %s; want 200, a new secret, no previous one", st, raw)
	}
	got = out{}
	h.callWithKey(acme, "GET", "/v1/endpoints/"+ep.ID, nil, &got)
	var sec struct{ Secret string }
	if st, raw := h.callWithKey(acme, "GET", "/v1/endpoints/"+ep.ID+"/secret", nil, &sec); st != 200 || sec.Secret != rot.Secret || len(got.Unreadable) != 0 {
		t.Errorf("after the rotation: secret %d %s, unreadable %q; want the new secret, nothing unreadable", st, raw, got.Unreadable)
	}
	// A readable endpoint's rotation keeps the overlap as before.
	if st, raw := h.callWithKey(acme, "POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"overlap_seconds":3600}`, &rot); st != 200 || rot.PreviousExpiresAt == nil {
		t.Errorf("rotate again = %d %s; want the previous secret kept for the overlap", st, raw)
	}

	// DELETE needs none of the values.
	if st, raw := h.callWithKey(acme, "DELETE", "/v1/endpoints/"+gone.ID, nil, nil); st != 204 {
		t.Fatalf("DELETE the endpoint whose secrets do not open = %d %s, want 204", st, raw)
	}
	if st, _ := h.call("GET", "/v1/endpoints/"+gone.ID, nil, nil); st != 404 {
		t.Errorf("GET after the DELETE = %d, want 404", st)
	}
}

// An endpoint one of whose custom header values does not open: GET shows
// it with that value as [unreadable] (the others as they are) and names
// it; a rotation cannot help (409, naming DELETE as the way out), and
// DELETE works.
func TestEndpointWhoseHeaderValueDoesNotOpenThroughTheAPI(t *testing.T) {
	t.Parallel()
	h, _ := startHeraldKeyed(t, func(*app.Config) {})
	var ep endpointResp
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": newReceiver(t, 200).URL,
		"headers": map[string]string{"X-Team": "storage", "X-Env": "prod"}}, &ep); st != 201 {
		t.Fatalf("create endpoint: %d %s", st, raw)
	}
	// X-Team's value damaged in place (as a bad disk or hand edit would).
	st := h.m.Store()
	var headers store.SealedColumn
	for _, c := range store.SealedColumns {
		if c.Table == "endpoints" && c.Column == "headers" {
			headers = c
		}
	}
	v, ok, err := st.Capabilities().Sealed.SealedValue(t.Context(), headers, ep.ID)
	if err != nil || !ok {
		t.Fatalf("read the headers of %s: %v, %v", ep.ID, ok, err)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		t.Fatal(err)
	}
	m["X-Team"] = "enc:v1:" + base64.StdEncoding.EncodeToString([]byte("a value no key of this node made"))
	damaged, _ := json.Marshal(m)
	if ok, err := st.Capabilities().Sealed.ReplaceSealed(t.Context(), headers, ep.ID, v, string(damaged)); err != nil || !ok {
		t.Fatalf("damage a header value: %v, %v", ok, err)
	}

	var got struct {
		Headers    map[string]string
		Unreadable []string
	}
	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID, nil, &got); st != 200 || got.Headers["X-Team"] != "[unreadable]" || got.Headers["X-Env"] != "prod" ||
		strings.Join(got.Unreadable, ",") != "headers.X-Team" {
		t.Errorf("GET = %d %s; want 200, X-Team [unreadable], X-Env prod, unreadable [headers.X-Team]", st, raw)
	}
	if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", nil, nil); st != 409 || !strings.Contains(string(raw), "headers.X-Team") || !strings.Contains(string(raw), "delete the endpoint") {
		t.Errorf("rotate = %d %s; want 409 naming the header and DELETE", st, raw)
	}
	if st, raw := h.call("DELETE", "/v1/endpoints/"+ep.ID, nil, nil); st != 204 {
		t.Errorf("DELETE = %d %s, want 204", st, raw)
	}
}

// damageHeaderValue replaces the stored value of custom header name of
// endpoint id by one no key of the node made (as a bad disk or a hand edit
// would).
func damageHeaderValue(t *testing.T, st store.Store, id, name string) {
	t.Helper()
	var headers store.SealedColumn
	for _, c := range store.SealedColumns {
		if c.Table == "endpoints" && c.Column == "headers" {
			headers = c
		}
	}
	v, ok, err := st.Capabilities().Sealed.SealedValue(t.Context(), headers, id)
	if err != nil || !ok {
		t.Fatalf("read the headers of %s: %v, %v", id, ok, err)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		t.Fatal(err)
	}
	m[name] = "enc:v1:" + base64.StdEncoding.EncodeToString([]byte("a value no key of this node made"))
	damaged, _ := json.Marshal(m)
	if ok, err := st.Capabilities().Sealed.ReplaceSealed(t.Context(), headers, id, v, string(damaged)); err != nil || !ok {
		t.Fatalf("damage a header value: %v, %v", ok, err)
	}
}

// TestListsShowEndpointsWhoseValuesDoNotOpen: a list of endpoints that
// included one whose stored values do not open failed as a whole with 409
// (a review found it: one lost key hid every endpoint of the tenant, in
// the console too). Every list shows every endpoint now, such an endpoint
// as GET /v1/endpoints/{id} shows it (unreadable naming the values, a
// header value that does not open as [unreadable], a viewer's others
// [redacted]), with a 200, and its pages follow their cursors as before.
func TestListsShowEndpointsWhoseValuesDoNotOpen(t *testing.T) {
	t.Parallel()
	h, key := startHeraldKeyed(t, func(*app.Config) {})
	viewer := func() string {
		var k struct{ Key string }
		if st, raw := h.call("POST", "/v1/api-keys", map[string]any{"name": "v", "role": "viewer", "tenant": "acme"}, &k); st != 201 {
			t.Fatalf("create key: %d %s", st, raw)
		}
		return k.Key
	}()
	mk := func(tenant string, headers map[string]string) string {
		var ep endpointResp
		if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": tenant, "url": newReceiver(t, 200).URL, "headers": headers}, &ep); st != 201 {
			t.Fatalf("create endpoint: %d %s", st, raw)
		}
		return ep.ID
	}
	first := mk("acme", nil)
	sec := mk("acme", map[string]string{"X-Env": "prod"})
	hdr := mk("acme", map[string]string{"X-Team": "storage", "X-Env": "prod"})
	last := mk("acme", nil)
	other := mk("globex", nil)
	sealUnderLostKey(t, h.m.Store(), key, newKey(t), sec)
	sealUnderLostKey(t, h.m.Store(), key, newKey(t), other)
	damageHeaderValue(t, h.m.Store(), hdr, "X-Team")

	type out struct {
		ID         string
		Headers    map[string]string
		Unreadable []string
	}
	type page struct {
		Data       []out
		NextCursor string `json:"next_cursor"`
	}
	want := map[string]out{
		last:  {ID: last, Headers: map[string]string{}},
		hdr:   {ID: hdr, Headers: map[string]string{"X-Team": "[unreadable]", "X-Env": "prod"}, Unreadable: []string{"headers.X-Team"}},
		sec:   {ID: sec, Headers: map[string]string{"X-Env": "prod"}, Unreadable: []string{"secrets"}},
		first: {ID: first, Headers: map[string]string{}},
		other: {ID: other, Headers: map[string]string{}, Unreadable: []string{"secrets"}},
	}
	check := func(what string, got []out, ids ...string) {
		t.Helper()
		if len(got) != len(ids) {
			t.Fatalf("%s: %d endpoints %+v, want %d", what, len(got), got, len(ids))
		}
		for i, id := range ids {
			w, g := want[id], got[i]
			if g.ID != w.ID || strings.Join(g.Unreadable, ",") != strings.Join(w.Unreadable, ",") || len(g.Headers) != len(w.Headers) {
				t.Errorf("%s [%d] = %+v, want %+v", what, i, g, w)
				continue
			}
			for k, v := range w.Headers {
				if g.Headers[k] != v {
					t.Errorf("%s [%d] %s: header %s = %q, want %q", what, i, id, k, g.Headers[k], v)
				}
			}
			// As GET shows it.
			var one out
			if st, raw := h.call("GET", "/v1/endpoints/"+id, nil, &one); st != 200 || strings.Join(one.Unreadable, ",") != strings.Join(g.Unreadable, ",") || one.Headers["X-Team"] != g.Headers["X-Team"] {
				t.Errorf("GET %s = %d %s; the list shows %+v", id, st, raw, g)
			}
		}
	}
	acme := []string{last, hdr, sec, first}
	for _, path := range []string{"/v1/endpoints?tenant=acme", "/v1/endpoints?tenant=acme&kind=all"} {
		var pg page
		if st, raw := h.call("GET", path, nil, &pg); st != 200 {
			t.Fatalf("GET %s = %d %s, want 200 and every endpoint", path, st, raw)
		}
		check(path, pg.Data, acme...)
	}
	var all page
	if st, raw := h.call("GET", "/v1/endpoints", nil, &all); st != 200 {
		t.Fatalf("GET /v1/endpoints = %d %s, want 200", st, raw)
	}
	check("every tenant", all.Data, append([]string{other}, acme...)...)
	// Page by page, through the cursors.
	var paged []out
	path := "/v1/endpoints?tenant=acme&limit=1"
	for range 10 {
		var pg page
		if st, raw := h.call("GET", path, nil, &pg); st != 200 {
			t.Fatalf("GET %s = %d %s, want 200", path, st, raw)
		}
		paged = append(paged, pg.Data...)
		if pg.NextCursor == "" {
			break
		}
		path = "/v1/endpoints?tenant=acme&limit=1&cursor=" + pg.NextCursor
	}
	check("page by page", paged, acme...)
	// A viewer: the values that open [redacted], those that do not named.
	var pg page
	if st, raw := h.callWithKey(viewer, "GET", "/v1/endpoints", nil, &pg); st != 200 || len(pg.Data) != 4 || pg.Data[1].ID != hdr ||
		pg.Data[1].Headers["X-Env"] != "[redacted]" || pg.Data[1].Headers["X-Team"] != "[unreadable]" {
		t.Errorf("a viewer's GET /v1/endpoints = %d %s; want 200, 4 endpoints, %s with X-Env [redacted] and X-Team [unreadable]", st, raw, hdr)
	}
}

// TestPatchReplacesHeaderValuesThatDoNotOpen: a custom header value that
// does not open could only go with its endpoint (delete it and create it
// again: a new id, a new secret for the receiver). A PATCH that replaces
// the headers whole replaces it now, as a rotation replaces secrets that do
// not open; a PATCH that leaves the headers alone is still refused with a
// 409 that names this way out, and so is one that would write the value
// the endpoint was shown with ([unreadable]) back.
func TestPatchReplacesHeaderValuesThatDoNotOpen(t *testing.T) {
	t.Parallel()
	h, key := startHeraldKeyed(t, func(*app.Config) {})
	var ep endpointResp
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": newReceiver(t, 200).URL,
		"headers": map[string]string{"X-Team": "storage", "X-Env": "prod"}}, &ep); st != 201 {
		t.Fatalf("create endpoint: %d %s", st, raw)
	}
	damageHeaderValue(t, h.m.Store(), ep.ID, "X-Team")
	both := h.createEndpoint("acme", newReceiver(t, 200).URL)
	h.mustCall("PATCH", "/v1/endpoints/"+both.ID, `{"headers":{"X-Team":"search"}}`, 200)
	damageHeaderValue(t, h.m.Store(), both.ID, "X-Team")
	sealUnderLostKey(t, h.m.Store(), key, newKey(t), both.ID)

	for _, body := range []string{`{"description":"changed"}`, `{"url":"` + ep.URL + `/x"}`} {
		st, raw := h.call("PATCH", "/v1/endpoints/"+ep.ID, body, nil)
		if st != 409 || !strings.Contains(string(raw), "headers.X-Team") || !strings.Contains(string(raw), `PATCH /v1/endpoints/{id} with \"headers\"`) {
			t.Errorf("PATCH %s = %d %s; want 409 naming the header and the PATCH of the headers", body, st, raw)
		}
	}
	if st, raw := h.call("PATCH", "/v1/endpoints/"+ep.ID, `{"headers":{"X-Team":"[unreadable]","X-Env":"prod"}}`, nil); st != 422 || !strings.Contains(string(raw), "[unreadable]") {
		t.Errorf("PATCH writing [unreadable] back = %d %s; want 422", st, raw)
	}
	if st, raw := h.call("PATCH", "/v1/endpoints/"+both.ID, `{"headers":{"X-Team":"search"}}`, nil); st != 409 || !strings.Contains(string(raw), "headers.X-Team, secrets") ||
		!strings.Contains(string(raw), "delete the endpoint") {
		t.Errorf("PATCH of the headers when the secrets do not open either = %d %s; want 409 naming both and DELETE", st, raw)
	}
	var got struct {
		Description string
		Headers     map[string]string
		Unreadable  []string
	}
	if st, raw := h.call("PATCH", "/v1/endpoints/"+ep.ID, `{"headers":{"X-Team":"billing","X-Env":"prod"},"description":"fixed"}`, &got); st != 200 ||
		got.Headers["X-Team"] != "billing" || got.Headers["X-Env"] != "prod" || got.Description != "fixed" || got.Unreadable != nil {
		t.Fatalf("PATCH replacing the headers = %d %s; want 200 with the new headers", st, raw)
	}
	got.Headers = nil
	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID, nil, &got); st != 200 || got.Headers["X-Team"] != "billing" || got.Unreadable != nil {
		t.Errorf("GET after the PATCH = %d %s; want the new headers, nothing unreadable", st, raw)
	}
	if st, raw := h.call("PATCH", "/v1/endpoints/"+ep.ID, `{"description":"again"}`, nil); st != 200 {
		t.Errorf("PATCH of the repaired endpoint = %d %s, want 200", st, raw)
	}
}

// TestSourceWhoseForwardingEndpointDoesNotOpenShowsItsDestination: an
// inbound source whose forwarding endpoint's secrets this node cannot open
// still shows where it forwards to (and the endpoint's state), in its GET
// and in the list, where the destination was left out silently.
func TestSourceWhoseForwardingEndpointDoesNotOpenShowsItsDestination(t *testing.T) {
	t.Parallel()
	h, key := startHeraldKeyed(t, func(*app.Config) {})
	dest := newReceiver(t, 200).URL
	var src struct{ ID, EndpointID string }
	var created map[string]any
	if st, raw := h.call("POST", "/v1/sources", map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"sixteen-bytes-ok"}, "destination_url": dest}, &created); st != 201 {
		t.Fatalf("create source: %d %s", st, raw)
	}
	src.ID, _ = created["id"].(string)
	src.EndpointID, _ = created["endpoint_id"].(string)
	sealUnderLostKey(t, h.m.Store(), key, newKey(t), src.EndpointID)
	var got struct {
		DestinationURL string `json:"destination_url"`
		EndpointState  string `json:"endpoint_state"`
	}
	if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, &got); st != 200 || got.DestinationURL != dest || got.EndpointState != "enabled" {
		t.Errorf("GET the source = %d %s; want 200 with destination_url %s and endpoint_state enabled", st, raw, dest)
	}
	var list struct {
		Data []struct {
			DestinationURL string `json:"destination_url"`
		}
	}
	if st, raw := h.call("GET", "/v1/sources", nil, &list); st != 200 || len(list.Data) != 1 || list.Data[0].DestinationURL != dest {
		t.Errorf("GET /v1/sources = %d %s; want the source with its destination_url", st, raw)
	}
}

// TestStaleNodeRefusesToReplaceValuesThatDoNotOpen: on a node whose own key
// check fails (the store was rekeyed to a key it lacks), every endpoint's
// values fail to open, and they are probably fine: the replacing rotation
// and a headers PATCH are refused with the stale node's 503 (restart it
// with the current key), never the advice to recreate the endpoint, and
// nothing is written (once the key is back, the endpoint is as it was).
func TestStaleNodeRefusesToReplaceValuesThatDoNotOpen(t *testing.T) {
	t.Parallel()
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) { c.KeyCheckInterval = time.Nanosecond })
	ep := h.createEndpoint("acme", newReceiver(t, 200).URL)
	h.mustCall("PATCH", "/v1/endpoints/"+ep.ID, `{"headers":{"X-Team":"storage"}}`, 200)
	back := rekeyAway(t, h, oldKey)
	for _, r := range [][3]string{
		{"POST", "/rotate-secret", `{}`},
		{"PATCH", "", `{"headers":{"X-Team":"billing"}}`},
	} {
		st, raw := h.call(r[0], "/v1/endpoints/"+ep.ID+r[1], r[2], nil)
		if st != 503 || !strings.Contains(string(raw), "restart this node with the current key") || strings.Contains(string(raw), "create it again") {
			t.Errorf("%s …%s on a node lacking the current key = %d %s; want 503 saying to restart it with the current key", r[0], r[1], st, raw)
		}
	}
	// The other changes and reads it refuses (409) give the same advice,
	// not the delete-and-recreate of a value no key opens; a pause, which
	// needs none of the values, works.
	for _, r := range [][3]string{{"GET", "/secrets", ""}, {"GET", "/secret", ""}, {"POST", "/test", ""}} {
		st, raw := h.call(r[0], "/v1/endpoints/"+ep.ID+r[1], r[2], nil)
		if st != 409 || !strings.Contains(string(raw), "restart this node with the current key") || strings.Contains(string(raw), "create it again") {
			t.Errorf("%s …%s on a node lacking the current key = %d %s; want 409 saying to restart it with the current key", r[0], r[1], st, raw)
		}
	}
	for _, op := range []string{"/pause", "/resume"} {
		if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+op, nil, nil); st != 200 {
			t.Errorf("POST …%s on a node lacking the current key = %d %s; want 200 (it needs none of the values)", op, st, raw)
		}
	}
	back()
	var got struct {
		Headers    map[string]string
		Unreadable []string
	}
	h.call("GET", "/v1/endpoints/"+ep.ID, nil, &got)
	var secret struct{ Secret string }
	h.call("GET", "/v1/endpoints/"+ep.ID+"/secret", nil, &secret)
	if got.Headers["X-Team"] != "storage" || len(got.Unreadable) != 0 || secret.Secret != ep.Secret {
		t.Errorf("after the key came back: headers %v, unreadable %v, secret changed %v; want the endpoint as it was", got.Headers, got.Unreadable, secret.Secret != ep.Secret)
	}
}

// TestSourceWhoseConfigDoesNotOpen: an inbound source whose sealed
// configuration (its provider signing secrets) is sealed under a key no
// node holds once made GET /v1/sources answer 409 as a whole, with advice
// to restart a node that held the current key, and its ingest answer 503
// counted as result="error", with nothing said about why. Now the list
// and GET show it marked (unreadable [config], none of its content), a
// PATCH that does not give the configuration anew answers 409 naming the
// source and the ways out (bad input 422, nothing changed), one that gives
// scheme and secrets replaces it, DELETE works, and its ingest answers 503
// with Retry-After, counted as result="unreadable", with one WARN naming
// the source per minute (on the injected clock).
func TestSourceWhoseConfigDoesNotOpen(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	logs := &testutil.SyncBuffer{}
	h, key := startHeraldKeyed(t, func(c *app.Config) {
		c.Clock = clk
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	dest := newReceiver(t, 200).URL
	const secret = "provider-secret-0123456789"
	create := func(name string) string {
		t.Helper()
		var out struct{ ID string }
		if st, raw := h.call("POST", "/v1/sources", map[string]any{"name": name, "scheme": "github", "secrets": []string{secret}, "destination_url": dest}, &out); st != 201 {
			t.Fatalf("create source %s: %d %s", name, st, raw)
		}
		return out.ID
	}
	bad, fine, gone := create("bad"), create("fine"), create("gone")
	sealColumnUnderLostKey(t, h.m.Store(), "sources", "config", key, newKey(t), bad)
	sealColumnUnderLostKey(t, h.m.Store(), "sources", "config", key, newKey(t), gone)

	type out struct {
		ID, Name, Scheme string
		Secrets          int
		DestinationURL   string `json:"destination_url"`
		Unreadable       []string
	}
	var list struct{ Data []out }
	st, raw := h.call("GET", "/v1/sources", nil, &list)
	if st != 200 || len(list.Data) != 3 {
		t.Errorf("GET /v1/sources with a source whose config does not open = %d %s; want 200 and all three", st, raw)
	}
	for _, o := range list.Data {
		wantMarked := o.ID == bad || o.ID == gone
		if wantMarked != (strings.Join(o.Unreadable, ",") == "config") || wantMarked && (o.Scheme != "" || o.Secrets != 0) ||
			!wantMarked && o.Scheme != "github" || o.DestinationURL != dest {
			t.Errorf("listed %+v; want unreadable [config] (and no scheme) only on %s and %s, every destination shown", o, bad, gone)
		}
	}
	if strings.Contains(string(raw), secret) {
		t.Errorf("the list shows a provider secret: %s", raw)
	}
	var got out
	if st, raw := h.call("GET", "/v1/sources/"+bad, nil, &got); st != 200 || got.ID != bad || got.Name != "bad" || strings.Join(got.Unreadable, ",") != "config" || got.DestinationURL != dest {
		t.Errorf("GET the source = %d %s; want 200 with unreadable [config] and its destination", st, raw)
	}

	// Its ingest: 503 with Retry-After, counted apart, one WARN a minute.
	ingest := func(id string) (int, http.Header, string) {
		t.Helper()
		body := []byte(`{"action":"opened"}`)
		req, _ := http.NewRequest("POST", h.base+"/in/"+id, bytes.NewReader(body))
		req.Header = providerRequest(t, "github", secret, clk.Now(), body, "d-"+id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	counter := func(result string) string {
		t.Helper()
		_, raw := h.call("GET", "/metrics", nil, nil)
		m := regexp.MustCompile(`(?m)^herald_inbound_requests_total\{result="` + result + `"\} (\S+)$`).FindSubmatch(raw)
		if m == nil {
			return "0"
		}
		return string(m[1])
	}
	warnings := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "does not open") && strings.Contains(l, "source="+bad) {
				n++
			}
		}
		return n
	}
	for i := range 2 {
		st, hdr, body := ingest(bad)
		if st != 503 || hdr.Get("Retry-After") != "60" || !strings.Contains(body, "cannot verify") {
			t.Errorf("ingest %d to the source whose config does not open = %d (Retry-After %q) %s; want 503, Retry-After 60", i, st, hdr.Get("Retry-After"), body)
		}
	}
	if u, e := counter("unreadable"), counter("error"); u != "2" || e != "0" {
		t.Errorf("herald_inbound_requests_total unreadable %s, error %s; want 2 and 0", u, e)
	}
	if n := warnings(); n != 1 {
		t.Errorf("%d WARNs naming source %s after two requests within a minute; want 1:\n%s", n, bad, logs.String())
	}
	clk.Advance(time.Minute)
	ingest(bad)
	if n := warnings(); n != 2 {
		t.Errorf("%d WARNs naming source %s after a minute more; want 2", n, bad)
	}

	// Changes that need the configuration: 409 naming the source and the
	// ways out, never a restart of this node (it holds the current key);
	// logged as the ingest is, one WARN a minute per source.
	patchWarnings := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "does not open") && strings.Contains(l, "source="+bad) && strings.Contains(l, "op=") {
				n++
			}
		}
		return n
	}
	for _, body := range []string{`{"name":"renamed"}`, `{"secrets":["` + secret + `"]}`, `{"scheme":"github"}`} {
		st, raw := h.call("PATCH", "/v1/sources/"+bad, body, nil)
		if st != 409 || !strings.Contains(string(raw), "source "+bad) || !strings.Contains(string(raw), `giving \"scheme\" and \"secrets\"`) ||
			!strings.Contains(string(raw), "DELETE /v1/sources/{id}") || strings.Contains(string(raw), "restart") {
			t.Errorf("PATCH %s of the source whose config does not open = %d %s; want 409 naming it, the replacement and the delete", body, st, raw)
		}
	}
	if n := patchWarnings(); n != 1 {
		t.Errorf("%d WARNs naming source %s after three refused PATCHes within a minute; want 1:\n%s", n, bad, logs.String())
	}
	clk.Advance(time.Minute)
	if st, raw := h.call("PATCH", "/v1/sources/"+bad, `{"name":"renamed"}`, nil); st != 409 {
		t.Errorf("PATCH a minute later = %d %s; want 409", st, raw)
	}
	if n := patchWarnings(); n != 2 {
		t.Errorf("%d WARNs naming source %s after a refused PATCH a minute later; want 2", n, bad)
	}
	// Bad input: the rule named, nothing changed.
	if st, raw := h.call("PATCH", "/v1/sources/"+bad, `{"scheme":"github","secrets":["short"]}`, nil); st != 422 {
		t.Errorf("PATCH with a too-short secret = %d %s; want 422", st, raw)
	}
	if st, raw := h.call("PATCH", "/v1/sources/"+bad, `{"scheme":"bogus","secrets":["`+secret+`"]}`, nil); st != 422 || !strings.Contains(string(raw), "scheme") {
		t.Errorf("PATCH with an unknown scheme = %d %s; want 422 naming the scheme", st, raw)
	}
	if st, raw := h.call("PATCH", "/v1/sources/"+bad, `{"scheme":"github","secrets":["`+secret+`"],"tolerance_seconds":60}`, nil); st != 422 || !strings.Contains(string(raw), "tolerance_seconds") {
		t.Errorf("PATCH with a tolerance github does not sign = %d %s; want 422 naming tolerance_seconds", st, raw)
	}
	got = out{}
	h.call("GET", "/v1/sources/"+bad, nil, &got)
	if got.Name != "bad" || strings.Join(got.Unreadable, ",") != "config" {
		t.Errorf("after the refused PATCHes: %+v; want it unchanged", got)
	}

	// Giving scheme and secrets anew replaces it; the provider's next
	// retry is accepted.
	got = out{}
	if st, raw := h.call("PATCH", "/v1/sources/"+bad, `{"name":"repaired","scheme":"github","secrets":["`+secret+`"]}`, &got); st != 200 ||
		got.Name != "repaired" || got.Scheme != "github" || got.Secrets != 1 || len(got.Unreadable) != 0 {
		t.Fatalf("PATCH with scheme and secrets = %d %s; want 200, the source readable again", st, raw)
	}
	if st, _, body := ingest(bad); st != 200 || !strings.Contains(body, `"received":true`) {
		t.Errorf("ingest after the replacement = %d %s; want 200 received", st, body)
	}
	// This node (the one that served the PATCH) says so, as a node that
	// learns it from a later read does.
	if !regexp.MustCompile(`(?m)level=INFO .*opens again.* source=` + regexp.QuoteMeta(bad) + `( |$)`).MatchString(logs.String()) {
		t.Errorf("no INFO saying source %s's configuration opens again after its replacement:\n%s", bad, logs.String())
	}
	if st, raw := h.call("PATCH", "/v1/sources/"+bad, `{"name":"again"}`, nil); st != 200 {
		t.Errorf("PATCH of the repaired source = %d %s, want 200", st, raw)
	}
	// DELETE needs none of it.
	if st, raw := h.call("DELETE", "/v1/sources/"+gone, nil, nil); st != 204 {
		t.Errorf("DELETE the source whose config does not open = %d %s, want 204", st, raw)
	}
	if st, _ := h.call("GET", "/v1/sources/"+gone, nil, nil); st != 404 {
		t.Errorf("GET after the DELETE = %d, want 404", st)
	}
	if st, _, _ := ingest(fine); st != 200 {
		t.Errorf("ingest to the other source = %d, want 200", st)
	}
}

// TestStaleNodeSourceAdviceIsItsKey: on a node whose own key check fails
// (the store was rekeyed to a key it lacks) every source fails to open and
// is probably fine: the list still answers (marked), a PATCH is refused
// with the stale node's 503 (restart it with the current key), never the
// advice to replace or recreate the source, and the ingest answers 503
// with a short Retry-After (nodes holding the key verify the retry);
// nothing is written, so once the key is back the source is as it was.
func TestStaleNodeSourceAdviceIsItsKey(t *testing.T) {
	t.Parallel()
	h, oldKey := startHeraldKeyed(t, func(c *app.Config) { c.KeyCheckInterval = time.Nanosecond })
	const secret = "provider-secret-0123456789"
	var src struct{ ID string }
	if st, raw := h.call("POST", "/v1/sources", map[string]any{"name": "gh", "scheme": "github", "secrets": []string{secret}, "destination_url": newReceiver(t, 200).URL}, &src); st != 201 {
		t.Fatalf("create source: %d %s", st, raw)
	}
	back := rekeyAway(t, h, oldKey)
	var list struct {
		Data []struct{ Unreadable []string }
	}
	if st, raw := h.call("GET", "/v1/sources", nil, &list); st != 200 || len(list.Data) != 1 || strings.Join(list.Data[0].Unreadable, ",") != "config" {
		t.Errorf("GET /v1/sources on a node lacking the current key = %d %s; want 200, the source marked", st, raw)
	}
	for _, body := range []string{`{"name":"x"}`, `{"scheme":"github","secrets":["another-secret-0123456789"]}`} {
		st, raw := h.call("PATCH", "/v1/sources/"+src.ID, body, nil)
		if st != 503 || !strings.Contains(string(raw), "restart this node with the current key") || strings.Contains(string(raw), "create it again") {
			t.Errorf("PATCH %s on a node lacking the current key = %d %s; want 503 saying to restart it with the current key", body, st, raw)
		}
	}
	body := []byte(`{"action":"opened"}`)
	req, _ := http.NewRequest("POST", h.base+"/in/"+src.ID, bytes.NewReader(body))
	req.Header = providerRequest(t, "github", secret, time.Now(), body, "d-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "10" || !strings.Contains(string(b), "this node cannot verify") {
		t.Errorf("ingest on a node lacking the current key = %d (Retry-After %q) %s; want 503, Retry-After 10", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	back()
	var got struct {
		Name, Scheme string
		Unreadable   []string
	}
	if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, &got); st != 200 || got.Name != "gh" || got.Scheme != "github" || len(got.Unreadable) != 0 {
		t.Errorf("after the key came back: %d %s; want the source as it was", st, raw)
	}
}

// TestSourceShowsItsForwardingEndpointUnreadable: a source's forwarding
// endpoint sealed under a lost key (with the source, by the same node)
// kept what the source accepted waiting, unforwarded, while the source
// showed nothing of it once its own configuration was replaced. The
// source now names the endpoint's values that do not open
// (endpoint_unreadable), and no longer once they are replaced.
func TestSourceShowsItsForwardingEndpointUnreadable(t *testing.T) {
	t.Parallel()
	h, key := startHeraldKeyed(t, func(*app.Config) {})
	var src struct {
		ID         string
		EndpointID string `json:"endpoint_id"`
	}
	if st, raw := h.call("POST", "/v1/sources", map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"provider-secret-0123456789"}, "destination_url": newReceiver(t, 200).URL}, &src); st != 201 {
		t.Fatalf("create source: %d %s", st, raw)
	}
	type out struct {
		EndpointUnreadable []string `json:"endpoint_unreadable"`
	}
	var got out
	if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, &got); st != 200 || got.EndpointUnreadable != nil {
		t.Fatalf("a healthy source: %d %s; want no endpoint_unreadable", st, raw)
	}
	sealColumnUnderLostKey(t, h.m.Store(), "endpoints", "secrets", key, newKey(t), src.EndpointID)
	if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, &got); st != 200 || strings.Join(got.EndpointUnreadable, ",") != "secrets" {
		t.Errorf("a source whose forwarding endpoint's secrets do not open: %d %s; want endpoint_unreadable [secrets]", st, raw)
	}
	var list struct{ Data []out }
	if st, raw := h.call("GET", "/v1/sources", nil, &list); st != 200 || len(list.Data) != 1 || strings.Join(list.Data[0].EndpointUnreadable, ",") != "secrets" {
		t.Errorf("the list: %d %s; want endpoint_unreadable [secrets]", st, raw)
	}
	h.mustCall("POST", "/v1/endpoints/"+src.EndpointID+"/rotate-secret", `{}`, 200)
	got = out{}
	if st, raw := h.call("GET", "/v1/sources/"+src.ID, nil, &got); st != 200 || got.EndpointUnreadable != nil {
		t.Errorf("after the endpoint's secrets were replaced: %d %s; want no endpoint_unreadable", st, raw)
	}
}
