package ops_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newEndpoint(t *testing.T, s store.Store, id, tenant string, types ...string) store.Endpoint {
	t.Helper()
	e, err := s.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: tenant, URL: "https://" + id + ".example/",
		EventTypes: types, State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_" + id + "-secret-value", CreatedAt: t0}}, CreatedAt: t0, UpdatedAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// opEvents returns the operational events of tenant, oldest first, as
// type → the endpoint state their data names.
func opEvents(t *testing.T, s store.Store, tenant string) []string {
	t.Helper()
	pg, err := s.ListEvents(t.Context(), store.ListEventsParams{Tenant: tenant, ListParams: store.ListParams{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(pg.Data) - 1; i >= 0; i-- {
		ev := pg.Data[i]
		var body struct {
			Data struct{ State string }
		}
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Type+" "+body.Data.State)
	}
	return out
}

// Issue 13, point 6: an endpoint disabled and enabled again before the
// housekeeper's round emits both events, in order, each naming the state
// at its change — to the owner and to the operator tenant.
func TestQuickStateChangesEmitEveryEvent(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	ep := newEndpoint(t, s, "ep_a", "acme")
	newEndpoint(t, s, "ep_watch", "acme", "endpoint.disabled", "endpoint.enabled")
	newEndpoint(t, s, "ep_ops", "ops", "endpoint.disabled", "endpoint.enabled")
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointDisabled, Reason: "the endpoint answered 410 Gone", Notice: ops.TypeEndpointDisabled, Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: ep.ID, State: store.EndpointEnabled, Notice: ops.TypeEndpointEnabled, Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	h := ops.New(ops.Config{Store: s, OperatorTenant: "ops", Clock: clock.NewFake(t0.Add(2 * time.Second)), SpikeThreshold: -1})
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"endpoint.disabled disabled", "endpoint.enabled enabled"}
	for _, tenant := range []string{"acme", "ops"} {
		if got := opEvents(t, s, tenant); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s's operational events = %q, want %q", tenant, got, want)
		}
	}
	// Emitted exactly once: another round adds nothing.
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := opEvents(t, s, "acme"); len(got) != 2 {
		t.Errorf("after a second round: %q, want the same 2 events", got)
	}
	if ns, err := s.PendingNotices(ctx, 10); err != nil || len(ns) != 0 {
		t.Errorf("outbox after the rounds: %+v, %v; want empty", ns, err)
	}
}

// Issue 13, point 7: deleting an endpoint emits endpoint.deleted, naming
// its tenant and URL although its row is gone, to the owner's endpoint.*
// endpoints and the operator tenant.
func TestDeleteEmitsEndpointDeleted(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	newEndpoint(t, s, "ep_watch", "acme", "endpoint.*")
	newEndpoint(t, s, "ep_ops", "ops", "endpoint.*")
	e, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: "ep_a", Tenant: "acme", URL: "https://a.example/hook", State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: "whsec_ep_a-secret-value", CreatedAt: t0}}, CreatedAt: t0, UpdatedAt: t0}, Notice: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: e.ID, Notice: true, Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	h := ops.New(ops.Config{Store: s, OperatorTenant: "ops", Clock: clock.NewFake(t0.Add(2 * time.Second)), SpikeThreshold: -1})
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "ops"} {
		want := []string{"endpoint.created enabled", "endpoint.deleted enabled"}
		if got := opEvents(t, s, tenant); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("%s's operational events = %q, want %q", tenant, got, want)
		}
		pg, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{Tenant: tenant, EventType: ops.TypeEndpointDeleted})
		if err != nil || len(pg.Data) != 1 {
			t.Fatalf("%s's deliveries of endpoint.deleted: %+v, %v; want 1 (to its endpoint.* endpoint)", tenant, pg.Data, err)
		}
		ev, err := s.GetEvent(ctx, pg.Data[0].EventID)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Tenant string
			Data   struct {
				EndpointID     string `json:"endpoint_id"`
				EndpointTenant string `json:"endpoint_tenant"`
				URL            string
			}
		}
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Tenant != tenant || body.Data.EndpointID != "ep_a" || body.Data.EndpointTenant != "acme" || body.Data.URL != "https://a.example/hook" {
			t.Errorf("%s's endpoint.deleted: %s", tenant, ev.Body)
		}
	}
}

// deadLetters gives endpoint ep (of tenant acme) n dead letters at t0.
func deadLetters(t *testing.T, s store.Store, n int) {
	t.Helper()
	ctx := t.Context()
	for i := range n {
		body := []byte(`{"n":` + strconv.Itoa(i) + `}`)
		if _, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: store.NewID("evt"), Tenant: "acme", Type: "order.placed", OccurredAt: t0, Body: body, Fingerprint: store.Fingerprint("acme", "order.placed", body)},
			Now:   t0, NewDeliveryID: func() string { return store.NewID("dlv") },
		}); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 100, Lease: time.Minute, Now: t0})
	if err != nil || len(claims) != n {
		t.Fatalf("claimed %d, %v; want %d", len(claims), err, n)
	}
	var cs []store.Completion
	for _, c := range claims {
		cs = append(cs, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliveryDead, Now: t0,
			Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: t0, StatusCode: 500}})
	}
	if err := s.CompleteDeliveries(ctx, cs); err != nil {
		t.Fatal(err)
	}
}

// A SpikeThreshold of 0 turns the dead-letter spike alert off (it used to
// become 10 silently); a positive one raises it at that many dead letters.
func TestSpikeThresholdZeroIsOff(t *testing.T) {
	for _, c := range []struct {
		threshold int
		want      int // endpoint.dead_letter_spike events
	}{{0, 0}, {-1, 0}, {10, 1}, {11, 0}} {
		s := newStore(t)
		newEndpoint(t, s, "ep_a", "acme", "order.placed", ops.TypeDeadLetterSpike)
		deadLetters(t, s, 10)
		h := ops.New(ops.Config{Store: s, Clock: clock.NewFake(t0.Add(time.Minute)), SpikeThreshold: c.threshold})
		if err := h.Round(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range opEvents(t, s, "acme") {
			if strings.HasPrefix(e, ops.TypeDeadLetterSpike) {
				got++
			}
		}
		if got != c.want {
			t.Errorf("SpikeThreshold %d with 10 dead letters: %d spike events, want %d", c.threshold, got, c.want)
		}
	}
}

// Zero retentions keep history forever (they used to become 7 and 30
// days); a positive one purges what is older.
func TestRetentionZeroKeepsForever(t *testing.T) {
	for _, c := range []struct {
		retention time.Duration
		wantDead  int
	}{{0, 3}, {time.Hour, 0}} {
		s := newStore(t)
		newEndpoint(t, s, "ep_a", "acme", "order.placed")
		deadLetters(t, s, 3)
		h := ops.New(ops.Config{Store: s, Clock: clock.NewFake(t0.Add(365 * 24 * time.Hour)), DeadRetention: c.retention, SucceededRetention: c.retention})
		if err := h.Round(t.Context()); err != nil {
			t.Fatal(err)
		}
		st, err := s.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := st.DeliveriesByState[store.DeliveryDead]; got != c.wantDead {
			t.Errorf("DeadRetention %v a year later: %d dead letters, want %d", c.retention, got, c.wantDead)
		}
	}
}

// A housekeeping round purges the portal sessions that ended (expired or
// revoked) longer ago than the longer retention, as it purges events —
// one is made per dashboard visit in the usual integration, and they were
// kept forever — and keeps them all when a retention is 0 (forever).
func TestRetentionPurgesEndedPortalSessions(t *testing.T) {
	for _, c := range []struct {
		retention time.Duration
		want      []string
	}{{0, []string{"ps_new", "ps_old", "ps_revoked"}}, {24 * time.Hour, []string{"ps_new"}}} {
		s := newStore(t)
		ctx := t.Context()
		for i, k := range []struct {
			id      string
			expires time.Time
		}{{"ps_old", t0.Add(time.Hour)}, {"ps_revoked", t0.Add(300 * 24 * time.Hour)}, {"ps_new", t0.Add(300 * 24 * time.Hour)}} {
			if _, err := s.CreateAPIKey(ctx, store.APIKey{ID: k.id, Kind: store.KeyKindPortal, Role: store.RoleViewer, Tenant: "acme",
				Hash: bytes.Repeat([]byte{byte(i + 1)}, 32), CreatedAt: t0, ExpiresAt: k.expires, CreatedBy: "env"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RevokeAPIKey(ctx, store.KeyKindPortal, "ps_revoked", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		h := ops.New(ops.Config{Store: s, Clock: clock.NewFake(t0.Add(30 * 24 * time.Hour)), SpikeThreshold: -1,
			DeadRetention: c.retention, SucceededRetention: c.retention})
		if err := h.Round(ctx); err != nil {
			t.Fatal(err)
		}
		pg, err := s.ListAPIKeys(ctx, store.KeyKindPortal, store.ListParams{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range pg.Data {
			got = append(got, k.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("retention %v, 30 days later: portal sessions %v, want %v", c.retention, got, c.want)
		}
	}
}

// A bulk import's notices (more than one page of the outbox) are all
// emitted in one round, each exactly once, and one endpoint's notices in
// the order they were recorded although endpoints are published
// concurrently.
func TestBulkNoticesOneRoundInOrder(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	const n = 620 // more than one page of the outbox (500)
	for i := range n {
		id := fmt.Sprintf("ep_%04d", i)
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: "bulk", URL: "https://" + id + ".example/",
			State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_" + id + "-secret-value", CreatedAt: t0}}, CreatedAt: t0, UpdatedAt: t0}, Notice: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Three endpoints change state twice after their creation.
	for _, i := range []int{3, 307, 611} {
		id := fmt.Sprintf("ep_%04d", i)
		for _, st := range []store.EndpointState{store.EndpointDisabled, store.EndpointEnabled} {
			notice := ops.TypeEndpointDisabled
			if st == store.EndpointEnabled {
				notice = ops.TypeEndpointEnabled
			}
			if _, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: id, State: st, Notice: notice, Now: t0.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := ops.New(ops.Config{Store: s, Clock: clock.NewFake(t0.Add(2 * time.Second)), SpikeThreshold: -1})
	if err := h.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if ns, err := s.PendingNotices(ctx, 10); err != nil || len(ns) != 0 {
		t.Fatalf("outbox after one round: %d notices, %v; want empty", len(ns), err)
	}
	// Every event, oldest first (the list is newest first).
	var all []store.Event
	for cursor := ""; ; {
		pg, err := s.ListEvents(ctx, store.ListEventsParams{Tenant: "bulk", ListParams: store.ListParams{Limit: 1000, Cursor: cursor}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, pg.Data...)
		if cursor = pg.NextCursor; cursor == "" {
			break
		}
	}
	perEndpoint := map[string][]string{}
	for i := len(all) - 1; i >= 0; i-- {
		var body struct {
			Data struct {
				EndpointID string `json:"endpoint_id"`
			}
		}
		if err := json.Unmarshal(all[i].Body, &body); err != nil {
			t.Fatal(err)
		}
		perEndpoint[body.Data.EndpointID] = append(perEndpoint[body.Data.EndpointID], all[i].Type)
	}
	if len(all) != n+6 || len(perEndpoint) != n {
		t.Fatalf("%d events for %d endpoints, want %d for %d", len(all), len(perEndpoint), n+6, n)
	}
	for id, types := range perEndpoint {
		want := []string{ops.TypeEndpointCreated}
		if id == "ep_0003" || id == "ep_0307" || id == "ep_0611" {
			want = append(want, ops.TypeEndpointDisabled, ops.TypeEndpointEnabled)
		}
		if fmt.Sprint(types) != fmt.Sprint(want) {
			t.Errorf("%s: events %v, want %v in that order", id, types, want)
		}
	}
}
