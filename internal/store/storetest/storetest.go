// Package storetest is the conformance suite every store.Store driver
// passes. It is written once against the interface and run by each driver's
// own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Exercise(t, func(t *testing.T) store.Store { … })
//	}
//
// Every subtest gets its own fresh store, runs in parallel with the others,
// and passes every time explicitly (a fixed base time plus durations), so the
// suite never sleeps and never depends on the wall clock.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/herald-webhooks/herald/internal/store"
)

// base is the fixed "now" of the suite; every other time is base + a duration.
var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// Exercise runs the conformance suite against a driver. newStore returns a
// fresh, empty, migrated store for each subtest, opened as Herald opens it
// (with a secret box), and registers its Close with t.Cleanup (the suite
// may close it first, so Close must be safe to call twice). The run fails
// when some method of store.Store, or of a capability the driver declares
// (store.Capabilities), was never called by any subtest (unless -run
// selects subtests or -skip is set).
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	cov := newCoverage()
	s := suite{newStore: func(t *testing.T) store.Store { return cov.wrap(newStore(t)) }}
	// Cleanup runs once every (parallel) subtest has finished.
	t.Cleanup(func() { cov.check(t) })
	group := func(name string, fn func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t)
		})
	}
	group("Ping", s.ping)
	group("Lifecycle", s.lifecycle)
	group("EventTypes", s.eventTypes)
	group("EventTypePages", s.eventTypePages)
	group("APIKeys", s.apiKeys)
	group("Endpoint", s.endpoints)
	group("Publish", s.publish)
	group("PublishCatalogRevision", s.publishCatalogRevision)
	group("PublishedEvent", s.publishedEvent)
	group("Events", s.events)
	group("Claim", s.claim)
	group("FairClaim", s.fairClaim)
	group("Unreadable", s.unreadable)
	group("EndpointLimit", s.endpointLimit)
	group("FanOut", s.fanOut)
	group("Backlog", s.backlog)
	group("Rescue", s.rescue)
	group("Complete", s.complete)
	group("Deliveries", s.deliveries)
	group("Attempts", s.attempts)
	group("NextDueAt", s.nextDueAt)
	group("Time", s.times)
	group("EndpointState", s.endpointState)
	group("Replay", s.replay)
	group("Deferred", s.deferred)
	group("FailureStreak", s.failureStreak)
	group("FailureStreakRule", s.streakRule)
	group("Postpone", s.postpone)
	group("Notices", s.noticesGroup)
	group("DeadLetterCounts", s.deadLetterCounts)
	group("SpikeAlert", s.spikeAlert)
	group("Stats", s.stats)
	group("EndpointStats", s.endpointStats)
	group("HealthNotices", s.healthNotices)
	group("RecoveredAfterEnable", s.recoveredAfterEnable)
	group("RecoveredAfterURLChange", s.recoveredAfterURLChange)
	group("FailingBeforeDisable", s.failingBeforeDisable)
	group("Purge", s.purge)
	group("DeliveryFilters", s.deliveryFilters)
	group("PublishClientID", s.publishClientID)
	group("Sources", s.sources)
	group("Secrets", s.secrets)
	group("Capabilities", s.capabilities)
}

type suite struct {
	newStore func(t *testing.T) store.Store
}

// run runs fn as a parallel subtest with its own fresh store.
func (s suite) run(t *testing.T, name string, fn func(t *testing.T, f *fixture)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t, &fixture{t: t, ctx: t.Context(), s: s.newStore(t)})
	})
}

// fixture is one subtest's store plus helpers that fail the test on error.
type fixture struct {
	t   *testing.T
	ctx context.Context
	s   store.Store
}

// ---------------------------------------------------------------------------
// builders and helpers

func newEndpoint(tenant string, types ...string) store.Endpoint {
	id := store.NewID("ep")
	if types == nil {
		types = []string{}
	}
	return store.Endpoint{
		ID:          id,
		Tenant:      tenant,
		URL:         "https://example.com/hooks/" + id,
		Description: "endpoint " + id,
		EventTypes:  types,
		Headers:     map[string]string{},
		State:       store.EndpointEnabled,
		Secrets:     []store.Secret{{Value: "whsec_" + id, CreatedAt: base}},
		CreatedAt:   base,
		UpdatedAt:   base,
	}
}

func (f *fixture) createEndpoint(e store.Endpoint) store.Endpoint {
	f.t.Helper()
	got, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: e})
	if err != nil {
		f.t.Fatalf("CreateEndpoint(%s): %v", e.ID, err)
	}
	return got
}

// endpoint creates an enabled endpoint of tenant with the filter types.
func (f *fixture) endpoint(tenant string, types ...string) store.Endpoint {
	f.t.Helper()
	return f.createEndpoint(newEndpoint(tenant, types...))
}

func (f *fixture) endpointInState(tenant string, state store.EndpointState) store.Endpoint {
	f.t.Helper()
	e := newEndpoint(tenant)
	e.State = state
	e.StateReason = "set by test"
	return f.createEndpoint(e)
}

func (f *fixture) getEndpoint(id string) store.Endpoint {
	f.t.Helper()
	e, err := f.s.GetEndpoint(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetEndpoint(%s): %v", id, err)
	}
	return e
}

// newEvent returns an event with a fresh id, a body in the wire shape and the
// fingerprint of (tenant, typ, data).
func newEvent(tenant, typ, data string) store.Event {
	id := store.NewID("evt")
	return store.Event{
		ID:          id,
		Tenant:      tenant,
		Type:        typ,
		OccurredAt:  base,
		Body:        fmt.Appendf(nil, `{"id":%q,"type":%q,"tenant":%q,"occurred_at":%q,"data":%s}`, id, typ, tenant, base.Format(time.RFC3339), data),
		Fingerprint: store.Fingerprint(tenant, typ, []byte(data)),
	}
}

func publishParams(ev store.Event, now time.Time) store.PublishParams {
	return store.PublishParams{Event: ev, Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}
}

func (f *fixture) publishEvent(ev store.Event, now time.Time) store.PublishResult {
	f.t.Helper()
	res, err := f.s.PublishEvent(f.ctx, publishParams(ev, now))
	if err != nil {
		f.t.Fatalf("PublishEvent(%s): %v", ev.ID, err)
	}
	return res
}

// publish publishes a new event of tenant and typ at now.
func (f *fixture) publish(tenant, typ string, now time.Time) store.PublishResult {
	f.t.Helper()
	return f.publishEvent(newEvent(tenant, typ, `{"n":1}`), now)
}

func (f *fixture) getEvent(id string) store.Event {
	f.t.Helper()
	e, err := f.s.GetEvent(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetEvent(%s): %v", id, err)
	}
	return e
}

func (f *fixture) getDelivery(id string) store.Delivery {
	f.t.Helper()
	d, err := f.s.GetDelivery(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetDelivery(%s): %v", id, err)
	}
	return d
}

// listDeliveries returns every delivery matching p, following all pages.
func (f *fixture) listDeliveries(p store.ListDeliveriesParams) []store.Delivery {
	f.t.Helper()
	if p.Limit == 0 {
		p.Limit = 1000
	}
	return collect(f.t, p.Limit, func(cursor string) (store.Page[store.Delivery], error) {
		p.Cursor = cursor
		return f.s.ListDeliveries(f.ctx, p)
	}, deliveryID)
}

// deliveryFor returns the delivery of event to endpoint.
func (f *fixture) deliveryFor(eventID, endpointID string) store.Delivery {
	f.t.Helper()
	for _, d := range f.listDeliveries(store.ListDeliveriesParams{EventID: eventID}) {
		if d.EndpointID == endpointID {
			return d
		}
	}
	f.t.Fatalf("no delivery of event %s to endpoint %s", eventID, endpointID)
	return store.Delivery{}
}

func (f *fixture) claim(owner string, limit int, lease time.Duration, now time.Time) []store.Claim {
	f.t.Helper()
	cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: owner, Limit: limit, Lease: lease, Now: now})
	if err != nil {
		f.t.Fatalf("ClaimDeliveries(owner %s, limit %d, now %s): %v", owner, limit, now, err)
	}
	return cs
}

// claimOne claims and expects exactly one claim.
func (f *fixture) claimOne(owner string, lease time.Duration, now time.Time) store.Claim {
	f.t.Helper()
	cs := f.claim(owner, 10, lease, now)
	if len(cs) != 1 {
		f.t.Fatalf("ClaimDeliveries at %s: got %d claims %v, want 1", now, len(cs), claimIDs(cs))
	}
	return cs[0]
}

func (f *fixture) expectNoClaim(now time.Time) {
	f.t.Helper()
	if cs := f.claim("probe", 1000, time.Minute, now); len(cs) != 0 {
		f.t.Fatalf("ClaimDeliveries at %s: got claims %v, want none", now, claimIDs(cs))
	}
}

func (f *fixture) complete(cs ...store.Completion) {
	f.t.Helper()
	if err := f.s.CompleteDeliveries(f.ctx, cs); err != nil {
		f.t.Fatalf("CompleteDeliveries(%d): %v", len(cs), err)
	}
}

func (f *fixture) rescue(now time.Time) int {
	f.t.Helper()
	n, err := f.s.RescueExpiredLeases(f.ctx, now)
	if err != nil {
		f.t.Fatalf("RescueExpiredLeases(%s): %v", now, err)
	}
	return n
}

func (f *fixture) nextDueAt() time.Time {
	f.t.Helper()
	next, err := f.s.NextDueAt(f.ctx, nil)
	if err != nil {
		f.t.Fatalf("NextDueAt: %v", err)
	}
	return next
}

func (f *fixture) expectNextDueAt(want time.Time) {
	f.t.Helper()
	got := f.nextDueAt()
	if !got.Equal(want) || got.IsZero() != want.IsZero() {
		f.t.Fatalf("NextDueAt = %v, want %v", got, want)
	}
}

func (f *fixture) attempts(deliveryID string) []store.Attempt {
	f.t.Helper()
	as, err := f.s.ListAttempts(f.ctx, deliveryID)
	if err != nil {
		f.t.Fatalf("ListAttempts(%s): %v", deliveryID, err)
	}
	return as
}

// seed creates endpoints enabled endpoints of tenant "acme" matching every
// type and publishes events events at now: endpoints × events pending
// deliveries, due at now. It returns their ids.
func (f *fixture) seed(endpoints, events int, now time.Time) map[string]bool {
	f.t.Helper()
	for range endpoints {
		f.endpoint("acme")
	}
	ids := map[string]bool{}
	for range events {
		res := f.publish("acme", "file.created", now)
		for _, d := range f.listDeliveries(store.ListDeliveriesParams{EventID: res.Event.ID}) {
			ids[d.ID] = true
		}
	}
	if len(ids) != endpoints*events {
		f.t.Fatalf("seed: %d deliveries, want %d", len(ids), endpoints*events)
	}
	return ids
}

// completion is a completion of claim c by its owner.
func completion(c store.Claim, state store.DeliveryState, now time.Time) store.Completion {
	cp := store.Completion{
		DeliveryID: c.Delivery.ID,
		EndpointID: c.Delivery.EndpointID,
		Owner:      c.Delivery.LeaseOwner,
		LeaseUntil: c.Delivery.LeaseUntil,
		Attempt:    store.Attempt{Number: c.Delivery.Attempts + 1, StartedAt: now.Add(-time.Second), Duration: 250 * time.Millisecond, StatusCode: 200},
		State:      state,
		Now:        now,
	}
	switch state {
	case store.DeliveryPending:
		cp.Attempt.StatusCode = 503
		cp.NextAttemptAt = now.Add(30 * time.Second)
	case store.DeliveryDead:
		cp.Attempt.StatusCode = 500
	}
	return cp
}

// expectLeasedAsBefore fails t unless the delivery is as before (leased,
// with its state and counts): what a completion made under another lease
// must leave.
func expectLeasedAsBefore(t *testing.T, f *fixture, before store.Delivery, after string) {
	t.Helper()
	d := f.getDelivery(before.ID)
	if d.State != before.State || d.LeaseOwner != before.LeaseOwner || !d.LeaseUntil.Equal(before.LeaseUntil) || d.Attempts != before.Attempts ||
		d.ClientErrors != before.ClientErrors || !d.NextAttemptAt.Equal(before.NextAttemptAt) || d.LastStatusCode != before.LastStatusCode {
		t.Errorf("delivery %s changed by %s:\nbefore %+v\nafter  %+v", before.ID, after, before, d)
	}
}

func deliveryID(d store.Delivery) string { return d.ID }
func endpointID(e store.Endpoint) string { return e.ID }
func eventID(e store.Event) string       { return e.ID }
func claimIDs(cs []store.Claim) []string {
	return mapSlice(cs, func(c store.Claim) string { return c.Delivery.ID })
}
func mapSlice[T, U any](in []T, fn func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = fn(v)
	}
	return out
}

// collect follows a paginated list to its end and checks the pagination
// contract: pages hold at most limit items, every page but the last is full,
// the last has an empty NextCursor, no item appears twice.
func collect[T any](t *testing.T, limit int, fetch func(cursor string) (store.Page[T], error), id func(T) string) []T {
	t.Helper()
	var (
		all    []T
		seen   = map[string]bool{}
		cursor string
	)
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatalf("pagination does not end (cursor %q)", cursor)
		}
		pg, err := fetch(cursor)
		if err != nil {
			t.Fatalf("list page %d (cursor %q): %v", page, cursor, err)
		}
		if len(pg.Data) > limit {
			t.Fatalf("page %d has %d items, limit %d", page, len(pg.Data), limit)
		}
		if pg.Data == nil {
			t.Errorf("page %d: Data is nil, want an empty non-nil slice", page)
		}
		for _, v := range pg.Data {
			if seen[id(v)] {
				t.Fatalf("page %d repeats %s", page, id(v))
			}
			seen[id(v)] = true
		}
		all = append(all, pg.Data...)
		if pg.NextCursor == "" {
			return all
		}
		if len(pg.Data) != limit {
			t.Fatalf("page %d has %d items and a NextCursor, want a full page of %d", page, len(pg.Data), limit)
		}
		cursor = pg.NextCursor
	}
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want errors.Is(err, %v)", what, err, target)
	}
}

// wantRefusal fails t unless err is the refusal want (store/refusals.go):
// the same code, and the same text shown to the client (store.Message),
// whatever the driver.
func wantRefusal(t *testing.T, what string, err, want error) {
	t.Helper()
	if err == nil || store.CodeOf(err) != store.CodeOf(want) || store.Message(err) != store.Message(want) {
		t.Errorf("%s: err = %v; want code %v with the message %q", what, err, store.CodeOf(want), store.Message(want))
	}
}

func idsOf[T any](items []T, id func(T) string) []string { return mapSlice(items, id) }

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------------------
// Ping and API keys

func (s suite) ping(t *testing.T) {
	s.run(t, "Answers", func(t *testing.T, f *fixture) {
		if err := f.s.Ping(f.ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
}

func (s suite) apiKeys(t *testing.T) {
	key := func(id, role, tenant string, hash byte) store.APIKey {
		return store.APIKey{ID: id, Kind: store.KeyKindAPIKey, Name: "n " + id, Role: role, Tenant: tenant,
			Hash: bytes.Repeat([]byte{hash}, 32), CreatedAt: base}
	}
	s.run(t, "EmptyStoreHasNone", func(t *testing.T, f *fixture) {
		if n, err := f.s.CountAPIKeys(f.ctx); err != nil || n != 0 {
			t.Fatalf("CountAPIKeys = %d, %v; want 0", n, err)
		}
		if _, err := f.s.LookupAPIKey(f.ctx, bytes.Repeat([]byte{1}, 32)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LookupAPIKey of nothing = %v, want ErrNotFound", err)
		}
	})
	s.run(t, "PurgeEndedPortalSessions", func(t *testing.T, f *fixture) {
		// Portal sessions that expired or were revoked before the bound go,
		// at most Limit per call; the others, and every API key, stay.
		session := func(id string, hash byte, expires time.Time) store.APIKey {
			k := key(id, store.RoleViewer, "acme", hash)
			k.Kind, k.CreatedBy, k.ExpiresAt = store.KeyKindPortal, "key_k", expires
			return k
		}
		expiredKey := key("key_k", store.RoleManager, "acme", 1)
		expiredKey.ExpiresAt = at(time.Hour)
		revokedKey := key("key_r", store.RoleManager, "acme", 2)
		for _, k := range []store.APIKey{expiredKey, revokedKey,
			session("ps_expired", 3, at(time.Hour)), session("ps_revoked", 4, at(100*time.Hour)),
			session("ps_late", 5, at(3*time.Hour)), session("ps_active", 6, at(100*time.Hour))} {
			if _, err := f.s.CreateAPIKey(f.ctx, k); err != nil {
				t.Fatalf("CreateAPIKey(%s): %v", k.ID, err)
			}
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindPortal, "ps_revoked", at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindAPIKey, "key_r", at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		ids := func(kind string) []string {
			t.Helper()
			pg, err := f.s.ListAPIKeys(f.ctx, kind, store.ListParams{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, k := range pg.Data {
				out = append(out, k.ID)
			}
			slices.Sort(out)
			return out
		}
		p := store.PurgeParams{PortalSessionsBefore: at(2 * time.Hour), Limit: 1}
		if n, err := f.s.Purge(f.ctx, p); err != nil || n != 1 {
			t.Fatalf("Purge with Limit 1 = %d, %v; want 1", n, err)
		}
		p.Limit = 100
		if n, err := f.s.Purge(f.ctx, p); err != nil || n != 1 {
			t.Fatalf("second Purge = %d, %v; want the other ended session", n, err)
		}
		if got := ids(store.KeyKindPortal); !slices.Equal(got, []string{"ps_active", "ps_late"}) {
			t.Errorf("portal sessions left: %v, want ps_active and ps_late (ended after the bound or not yet)", got)
		}
		if got := ids(store.KeyKindAPIKey); !slices.Equal(got, []string{"key_k", "key_r"}) {
			t.Errorf("API keys left: %v, want both (expired and revoked keys are never purged)", got)
		}
		if n, err := f.s.Purge(f.ctx, store.PurgeParams{SucceededBefore: at(100 * time.Hour), Limit: 100}); err != nil || n != 0 {
			t.Errorf("Purge without PortalSessionsBefore = %d, %v; want 0", n, err)
		}
	})
	s.run(t, "CreateLookupListRevoke", func(t *testing.T, f *fixture) {
		a := key("key_a", store.RoleAdmin, "", 1)
		p := key("key_b", store.RolePublisher, "acme", 2)
		p.ExpiresAt = at(time.Hour)
		portal := key("ps_c", store.RoleViewer, "acme", 3)
		portal.Kind, portal.CreatedBy = store.KeyKindPortal, "key_b"
		other := key("ps_d", store.RoleViewer, "acme", 4)
		other.Kind, other.CreatedBy = store.KeyKindPortal, "key_a"
		for _, k := range []store.APIKey{a, p, portal, other} {
			got, err := f.s.CreateAPIKey(f.ctx, k)
			if err != nil {
				t.Fatalf("CreateAPIKey(%s): %v", k.ID, err)
			}
			diff(t, "created "+k.ID, k, got)
		}
		_, err := f.s.CreateAPIKey(f.ctx, key("key_a", store.RoleAdmin, "", 9))
		wantRefusal(t, "CreateAPIKey with a used id", err, store.Exists("API key key_a"))
		got, err := f.s.LookupAPIKey(f.ctx, p.Hash)
		if err != nil {
			t.Fatalf("LookupAPIKey: %v", err)
		}
		diff(t, "looked up", p, got)
		pg, err := f.s.ListAPIKeys(f.ctx, store.KeyKindAPIKey, store.ListParams{Limit: 1})
		if err != nil || len(pg.Data) != 1 || pg.Data[0].ID != "key_b" || pg.NextCursor == "" {
			t.Fatalf("ListAPIKeys page 1 = %+v, %v; want key_b and a cursor (portal sessions are not listed)", pg, err)
		}
		pg, err = f.s.ListAPIKeys(f.ctx, store.KeyKindAPIKey, store.ListParams{Limit: 5, Cursor: pg.NextCursor})
		if err != nil || len(pg.Data) != 1 || pg.Data[0].ID != "key_a" || pg.NextCursor != "" {
			t.Fatalf("ListAPIKeys page 2 = %+v, %v; want key_a only", pg, err)
		}
		pg, err = f.s.ListAPIKeys(f.ctx, store.KeyKindPortal, store.ListParams{Limit: 5})
		if err != nil || len(pg.Data) != 2 || pg.Data[0].ID != "ps_d" || pg.Data[1].ID != "ps_c" || pg.Data[1].CreatedBy != "key_b" {
			t.Fatalf("ListAPIKeys(portal) = %+v, %v; want ps_d, ps_c with their creators", pg, err)
		}
		if n, _ := f.s.CountAPIKeys(f.ctx); n != 2 {
			t.Fatalf("CountAPIKeys = %d, want 2", n)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindAPIKey, "key_b", at(time.Minute)); err != nil {
			t.Fatalf("RevokeAPIKey: %v", err)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindAPIKey, "key_b", at(time.Hour)); err != nil {
			t.Fatalf("RevokeAPIKey again: %v", err)
		}
		// Revoking key_b revoked the session it created (ps_c), not ps_d.
		if got, _ := f.s.LookupAPIKey(f.ctx, portal.Hash); !got.RevokedAt.Equal(at(time.Minute)) {
			t.Fatalf("ps_c after its creator was revoked: RevokedAt = %v, want %v", got.RevokedAt, at(time.Minute))
		}
		if got, _ := f.s.LookupAPIKey(f.ctx, other.Hash); !got.RevokedAt.IsZero() {
			t.Fatalf("ps_d (made by key_a) was revoked with key_b: %v", got.RevokedAt)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindAPIKey, "ps_d", at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("RevokeAPIKey(key) of a portal session = %v, want ErrNotFound", err)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindPortal, "ps_d", at(2*time.Minute)); err != nil {
			t.Fatalf("RevokeAPIKey(portal): %v", err)
		}
		if got, _ := f.s.LookupAPIKey(f.ctx, other.Hash); !got.RevokedAt.Equal(at(2 * time.Minute)) {
			t.Fatalf("ps_d after its revocation: RevokedAt = %v", got.RevokedAt)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindPortal, "key_a", at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("RevokeAPIKey(portal) of an API key = %v, want ErrNotFound", err)
		}
		if err := f.s.RevokeAPIKey(f.ctx, store.KeyKindAPIKey, "key_nope", at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("RevokeAPIKey of an unknown id = %v, want ErrNotFound", err)
		}
		got, _ = f.s.LookupAPIKey(f.ctx, p.Hash)
		if !got.RevokedAt.Equal(at(time.Minute)) || got.Usable(at(2*time.Minute)) {
			t.Fatalf("after revoke: RevokedAt = %v, usable = %v; want the first revocation time, unusable", got.RevokedAt, got.Usable(at(2*time.Minute)))
		}
		if n, _ := f.s.CountAPIKeys(f.ctx); n != 1 {
			t.Fatalf("CountAPIKeys after a revoke = %d, want 1", n)
		}
		if err := f.s.TouchAPIKeys(f.ctx, map[string]time.Time{"key_a": at(2 * time.Minute)}); err != nil {
			t.Fatalf("TouchAPIKeys: %v", err)
		}
		if err := f.s.TouchAPIKeys(f.ctx, map[string]time.Time{"key_a": at(time.Minute)}); err != nil {
			t.Fatalf("TouchAPIKeys older: %v", err)
		}
		got, _ = f.s.LookupAPIKey(f.ctx, a.Hash)
		if !got.LastUsedAt.Equal(at(2 * time.Minute)) {
			t.Fatalf("LastUsedAt = %v, want %v (an older touch is ignored)", got.LastUsedAt, at(2*time.Minute))
		}
	})
}

// ---------------------------------------------------------------------------
// Endpoints

func fullEndpoint(tenant string) store.Endpoint {
	e := newEndpoint(tenant)
	e.URL = "https://hooks.example.com/in/a?x=1&y=%20"
	e.Description = "Grüße — storage team"
	e.EventTypes = []string{"file.*", "invoice.paid"}
	e.Headers = map[string]string{"X-Team": "storage", "X-Trace": "a=b; c=\"d\""}
	e.RateLimitPerSecond = 25
	e.State = store.EndpointPaused
	e.StateReason = "paused by owner"
	e.Secrets = []store.Secret{
		{Value: "whsec_current", CreatedAt: at(time.Hour)},
		{Value: "whsec_previous", CreatedAt: base, ExpiresAt: at(25 * time.Hour)},
	}
	e.CreatedAt = at(time.Second)
	e.UpdatedAt = at(2 * time.Second)
	return e
}

func (s suite) endpoints(t *testing.T) {
	s.run(t, "CreateGetRoundTrip", func(t *testing.T, f *fixture) {
		for _, state := range []store.EndpointState{store.EndpointEnabled, store.EndpointPaused, store.EndpointDisabled} {
			e := fullEndpoint("acme")
			e.State = state
			created := f.createEndpoint(e)
			diff(t, "CreateEndpoint result ("+string(state)+")", e, created)
			diff(t, "GetEndpoint ("+string(state)+")", e, f.getEndpoint(e.ID))
		}
	})
	s.run(t, "CreateMinimal", func(t *testing.T, f *fixture) {
		e := newEndpoint("acme")
		e.EventTypes, e.Headers, e.Description = nil, nil, ""
		got := f.createEndpoint(e)
		diff(t, "CreateEndpoint result", e, got)
		diff(t, "GetEndpoint", e, f.getEndpoint(e.ID))
	})
	s.run(t, "CreateDuplicateIDIsConflict", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		other := newEndpoint("globex")
		other.ID = e.ID
		_, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: other})
		wantRefusal(t, "CreateEndpoint with an existing id", err, store.Exists("endpoint "+e.ID))
		diff(t, "GetEndpoint after conflict", e, f.getEndpoint(e.ID))
	})
	s.run(t, "GetUnknownIsNotFound", func(t *testing.T, f *fixture) {
		_, err := f.s.GetEndpoint(f.ctx, "ep_unknown")
		wantErr(t, "GetEndpoint(unknown)", err, store.ErrNotFound)
	})
	s.run(t, "ListByTenantNewestFirst", func(t *testing.T, f *fixture) {
		var acme []string
		for i := range 7 {
			e := newEndpoint("acme")
			e.CreatedAt = at(time.Duration(i) * time.Second)
			acme = append(acme, f.createEndpoint(e).ID)
			if i%3 == 0 {
				f.endpoint("globex")
			}
		}
		for _, limit := range []int{1, 2, 3, 7, 8, 1000} {
			got := collect(t, limit, func(cursor string) (store.Page[store.Endpoint], error) {
				return f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "acme", ListParams: store.ListParams{Limit: limit, Cursor: cursor}})
			}, endpointID)
			diff(t, fmt.Sprintf("ListEndpoints(acme, limit %d) ids", limit), reversed(acme), idsOf(got, endpointID))
		}
	})
	s.run(t, "ListExactMultipleOfLimit", func(t *testing.T, f *fixture) {
		var ids []string
		for range 6 {
			ids = append(ids, f.endpoint("acme").ID)
		}
		pages := 0
		got := collect(t, 3, func(cursor string) (store.Page[store.Endpoint], error) {
			pages++
			return f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "acme", ListParams: store.ListParams{Limit: 3, Cursor: cursor}})
		}, endpointID)
		diff(t, "ids", reversed(ids), idsOf(got, endpointID))
		if pages > 3 {
			t.Errorf("6 endpoints with limit 3 took %d requests, want 2 (or 3 with a final empty page)", pages)
		}
	})
	s.run(t, "ListAllTenantsAndFields", func(t *testing.T, f *fixture) {
		a := f.createEndpoint(fullEndpoint("acme"))
		b := f.endpoint("globex")
		pg, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEndpoints: %v", err)
		}
		diff(t, "ListEndpoints(all)", []store.Endpoint{b, a}, pg.Data)
		if pg.NextCursor != "" {
			t.Errorf("NextCursor = %q, want empty", pg.NextCursor)
		}
	})
	s.run(t, "ListUnknownTenantIsEmpty", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		pg, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "nobody", ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEndpoints: %v", err)
		}
		if len(pg.Data) != 0 || pg.NextCursor != "" {
			t.Fatalf("ListEndpoints(nobody) = %+v, want empty", pg)
		}
	})

	str := func(v string) *string { return &v }
	num := func(v int) *int { return &v }
	updates := []struct {
		name  string
		apply func(p *store.UpdateEndpointParams)
		want  func(e *store.Endpoint)
	}{
		{"NothingButUpdatedAt", func(p *store.UpdateEndpointParams) {}, func(e *store.Endpoint) {}},
		{"URL", func(p *store.UpdateEndpointParams) { p.URL = str("https://new.example.org/h") },
			func(e *store.Endpoint) { e.URL = "https://new.example.org/h" }},
		{"Description", func(p *store.UpdateEndpointParams) { p.Description = str("") },
			func(e *store.Endpoint) { e.Description = "" }},
		{"EventTypes", func(p *store.UpdateEndpointParams) { p.EventTypes = &[]string{"order.*", "user.created"} },
			func(e *store.Endpoint) { e.EventTypes = []string{"order.*", "user.created"} }},
		{"EventTypesToAll", func(p *store.UpdateEndpointParams) { p.EventTypes = &[]string{} },
			func(e *store.Endpoint) { e.EventTypes = []string{} }},
		{"Headers", func(p *store.UpdateEndpointParams) { p.Headers = &map[string]string{"X-New": "1"} },
			func(e *store.Endpoint) { e.Headers = map[string]string{"X-New": "1"} }},
		{"HeadersToNone", func(p *store.UpdateEndpointParams) { p.Headers = &map[string]string{} },
			func(e *store.Endpoint) { e.Headers = map[string]string{} }},
		{"RateLimit", func(p *store.UpdateEndpointParams) { p.RateLimitPerSecond = num(0) },
			func(e *store.Endpoint) { e.RateLimitPerSecond = 0 }},
		{"AllAtOnce", func(p *store.UpdateEndpointParams) {
			p.URL, p.Description, p.RateLimitPerSecond = str("https://all.example.org"), str("all"), num(7)
			p.EventTypes, p.Headers = &[]string{"*"}, &map[string]string{"A": "b"}
		}, func(e *store.Endpoint) {
			e.URL, e.Description, e.RateLimitPerSecond = "https://all.example.org", "all", 7
			e.EventTypes, e.Headers = []string{"*"}, map[string]string{"A": "b"}
		}},
	}
	for _, u := range updates {
		s.run(t, "Update"+u.name, func(t *testing.T, f *fixture) {
			orig := f.createEndpoint(fullEndpoint("acme"))
			other := f.createEndpoint(fullEndpoint("acme"))
			p := store.UpdateEndpointParams{ID: orig.ID, Now: at(time.Hour)}
			u.apply(&p)
			got, err := f.s.UpdateEndpoint(f.ctx, p)
			if err != nil {
				t.Fatalf("UpdateEndpoint: %v", err)
			}
			want := orig
			u.want(&want)
			want.UpdatedAt = at(time.Hour)
			diff(t, "UpdateEndpoint result", want, got)
			diff(t, "GetEndpoint after update", want, f.getEndpoint(orig.ID))
			diff(t, "other endpoint", other, f.getEndpoint(other.ID))
		})
	}
	s.run(t, "UpdateUnknownIsNotFound", func(t *testing.T, f *fixture) {
		u := "https://x.example.com"
		_, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: "ep_unknown", URL: &u, Now: base})
		wantErr(t, "UpdateEndpoint(unknown)", err, store.ErrNotFound)
	})
	s.run(t, "UpdatedFilterAppliesToNextPublish", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme", "invoice.paid")
		if res := f.publish("acme", "file.created", base); res.Deliveries != 0 {
			t.Fatalf("before update: %d deliveries, want 0", res.Deliveries)
		}
		if _, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, EventTypes: &[]string{"file.*"}, Now: at(time.Second)}); err != nil {
			t.Fatalf("UpdateEndpoint: %v", err)
		}
		if res := f.publish("acme", "file.created", at(2*time.Second)); res.Deliveries != 1 {
			t.Fatalf("after update: %d deliveries, want 1", res.Deliveries)
		}
	})
	s.run(t, "Delete", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		keep := f.endpoint("acme")
		if err := f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: e.ID}); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		_, err := f.s.GetEndpoint(f.ctx, e.ID)
		wantErr(t, "GetEndpoint after delete", err, store.ErrNotFound)
		wantErr(t, "DeleteEndpoint again", f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: e.ID}), store.ErrNotFound)
		wantErr(t, "DeleteEndpoint(unknown)", f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: "ep_unknown"}), store.ErrNotFound)
		_, err = f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, Now: at(time.Second)})
		wantErr(t, "UpdateEndpoint after delete", err, store.ErrNotFound)
		pg, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "acme", ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEndpoints: %v", err)
		}
		diff(t, "ListEndpoints after delete", []string{keep.ID}, idsOf(pg.Data, endpointID))
	})
	s.run(t, "DeleteRemovesDeliveries", func(t *testing.T, f *fixture) {
		gone := f.endpoint("acme")
		keep := f.endpoint("acme")
		ev1 := f.publish("acme", "file.created", base).Event
		ev2 := f.publish("acme", "file.created", at(time.Second)).Event
		// One of the doomed deliveries has an attempt and is pending a retry.
		c := f.claim("w1", 10, time.Minute, at(time.Second))
		if len(c) != 4 {
			t.Fatalf("claimed %d, want 4", len(c))
		}
		var goneAttempted string
		for _, cl := range c {
			if cl.Delivery.EndpointID == gone.ID && goneAttempted == "" {
				goneAttempted = cl.Delivery.ID
				f.complete(completion(cl, store.DeliveryPending, at(2*time.Second)))
			}
		}
		goneDeliveries := f.listDeliveries(store.ListDeliveriesParams{EndpointID: gone.ID})
		if len(goneDeliveries) != 2 {
			t.Fatalf("deliveries of the endpoint before delete: %d, want 2", len(goneDeliveries))
		}
		if err := f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: gone.ID}); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		if got := f.listDeliveries(store.ListDeliveriesParams{EndpointID: gone.ID}); len(got) != 0 {
			t.Errorf("ListDeliveries(deleted endpoint) = %v, want none", idsOf(got, deliveryID))
		}
		for _, d := range goneDeliveries {
			_, err := f.s.GetDelivery(f.ctx, d.ID)
			wantErr(t, "GetDelivery of a deleted endpoint's delivery", err, store.ErrNotFound)
		}
		_, err := f.s.ListAttempts(f.ctx, goneAttempted)
		wantErr(t, "ListAttempts of a deleted endpoint's delivery", err, store.ErrNotFound)
		for _, ev := range []store.Event{ev1, ev2} {
			f.getEvent(ev.ID) // events are kept
			got := f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID})
			if len(got) != 1 || got[0].EndpointID != keep.ID {
				t.Errorf("deliveries of event %s after delete = %+v, want only the kept endpoint's", ev.ID, got)
			}
		}
		// The deleted endpoint's retry is not claimable and not due.
		f.expectNextDueAt(time.Time{})
		f.expectNoClaim(at(time.Hour))
		if res := f.publish("acme", "file.created", at(time.Hour)); res.Deliveries != 1 {
			t.Errorf("publish after delete: %d deliveries, want 1", res.Deliveries)
		}
	})
}

// ---------------------------------------------------------------------------
// Publish

func (s suite) publish(t *testing.T) {
	s.run(t, "FanOutByFilter", func(t *testing.T, f *fixture) {
		want := []string{
			f.endpoint("acme", "file.created").ID,                  // exact
			f.endpoint("acme", "file.*").ID,                        // prefix
			f.endpoint("acme", "*").ID,                             // everything
			f.endpoint("acme").ID,                                  // empty filter = everything
			f.endpoint("acme", "invoice.paid", "file.created").ID,  // one of several
			f.endpoint("acme", "invoice.*", "file.*", "user.*").ID, // one of several prefixes
		}
		f.endpoint("acme", "invoice.paid")   // other type
		f.endpoint("acme", "file.created.*") // under the type, not the type
		f.endpoint("acme", "files.*")        // look-alike prefix
		f.endpoint("acme", "file.create")    // exact only
		f.endpoint("globex")                 // other tenant, matches all
		f.endpoint("globex", "file.created") // other tenant, exact
		res := f.publish("acme", "file.created", base)
		if !res.Created || res.Deliveries != len(want) {
			t.Fatalf("PublishEvent = Created %v, Deliveries %d; want true, %d", res.Created, res.Deliveries, len(want))
		}
		got := f.listDeliveries(store.ListDeliveriesParams{EventID: res.Event.ID})
		diff(t, "endpoints that got a delivery", sorted(want), sorted(idsOf(got, func(d store.Delivery) string { return d.EndpointID })))

		res = f.publish("acme", "file.extraction.completed", base)
		if res.Deliveries != 4 { // file.*, *, empty, the three prefixes
			t.Errorf("file.extraction.completed: %d deliveries, want 4", res.Deliveries)
		}
	})
	// A driver may filter endpoints by type in its query (PostgreSQL):
	// whatever it reads, the deliveries are exactly the endpoints
	// store.MatchEventType accepts, for every kind of pattern and for
	// operational types, also when publishes of several types share a
	// group commit.
	s.run(t, "FanOutAgreesWithMatchEventType", func(t *testing.T, f *fixture) {
		patterns := [][]string{
			nil, {"*"}, {"order.*"}, {"order.paid"}, {"order.paid.*"}, {"ord.*"}, {".*"}, {"order.paid", "user.*"},
			{"endpoint.*"}, {"endpoint.created"}, {"*", "delivery.*"}, {"order.paid.v2"}, {"o*"}, {"*.paid"},
		}
		endpoints := map[string][]string{}
		for _, ps := range patterns {
			endpoints[f.endpoint("acme", ps...).ID] = ps
		}
		f.endpoint("globex", "*")
		types := []string{"order.paid", "order.paid.v2", "order", "user.created", "endpoint.created", "delivery.dead_lettered", "x", ".hidden", "ord"}
		var wg sync.WaitGroup
		results := make([]store.PublishResult, len(types))
		errs := make([]error, len(types))
		for i, typ := range types {
			wg.Go(func() {
				results[i], errs[i] = f.s.PublishEvent(f.ctx, publishParams(newEvent("acme", typ, `{}`), base))
			})
		}
		wg.Wait()
		for i, typ := range types {
			if errs[i] != nil {
				t.Fatalf("publish %s: %v", typ, errs[i])
			}
			var want []string
			for id, ps := range endpoints {
				if store.MatchEventType(ps, typ) {
					want = append(want, id)
				}
			}
			got := f.listDeliveries(store.ListDeliveriesParams{EventID: results[i].Event.ID})
			diff(t, typ+": endpoints that got a delivery", sorted(want), sorted(idsOf(got, func(d store.Delivery) string { return d.EndpointID })))
			if results[i].Deliveries != len(want) {
				t.Errorf("%s: Deliveries %d, want %d", typ, results[i].Deliveries, len(want))
			}
		}
	})
	// Retries of one publish racing each other (a producer's timeouts):
	// where a driver commits publishes in groups, several share a group,
	// and the ones answered "duplicate" must count the deliveries the first
	// created in that same transaction, not yet committed (and, where a
	// driver writes a group's deliveries together, not yet written).
	s.run(t, "ConcurrentDuplicatesCountTheFirstsDeliveries", func(t *testing.T, f *fixture) {
		for range 3 {
			f.endpoint("acme")
		}
		for round := range 4 {
			ev := newEvent("acme", "file.created", fmt.Sprintf(`{"round":%d}`, round))
			const racers = 24
			var wg sync.WaitGroup
			results := make([]store.PublishResult, racers)
			errs := make([]error, racers)
			for i := range racers {
				wg.Go(func() { results[i], errs[i] = f.s.PublishEvent(f.ctx, publishParams(ev, base)) })
			}
			wg.Wait()
			created := 0
			for i := range racers {
				if errs[i] != nil {
					t.Fatalf("round %d, publish %d: %v", round, i, errs[i])
				}
				if results[i].Created {
					created++
				}
				if results[i].Deliveries != 3 || results[i].Event.ID != ev.ID {
					t.Errorf("round %d, publish %d: Created %v, Deliveries %d, event %s; want 3 deliveries of %s",
						round, i, results[i].Created, results[i].Deliveries, results[i].Event.ID, ev.ID)
				}
			}
			if created != 1 {
				t.Errorf("round %d: %d publishes created the event, want 1", round, created)
			}
			if got := f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID}); len(got) != 3 {
				t.Errorf("round %d: %d deliveries stored, want 3", round, len(got))
			}
		}
	})
	s.run(t, "NoMatchingEndpoint", func(t *testing.T, f *fixture) {
		f.endpoint("acme", "invoice.paid")
		res := f.publish("acme", "file.created", base)
		if !res.Created || res.Deliveries != 0 {
			t.Fatalf("PublishEvent = Created %v, Deliveries %d; want true, 0", res.Created, res.Deliveries)
		}
		f.getEvent(res.Event.ID)
		if got := f.listDeliveries(store.ListDeliveriesParams{EventID: res.Event.ID}); len(got) != 0 {
			t.Fatalf("deliveries = %v, want none", idsOf(got, deliveryID))
		}
	})
	s.run(t, "DeliveriesStartPendingDueNow", func(t *testing.T, f *fixture) {
		e1 := f.endpoint("acme")
		e2 := f.endpoint("acme", "file.*")
		now := at(90 * time.Second)
		ev := newEvent("acme", "file.created", `{"n":1}`)
		var made []string
		p := publishParams(ev, now)
		p.NewDeliveryID = func() string {
			id := store.NewID("dlv")
			made = append(made, id)
			return id
		}
		res, err := f.s.PublishEvent(f.ctx, p)
		if err != nil {
			t.Fatalf("PublishEvent: %v", err)
		}
		if res.Deliveries != 2 {
			t.Fatalf("Deliveries = %d, want 2", res.Deliveries)
		}
		got := f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID})
		diff(t, "delivery ids come from NewDeliveryID", sorted(made), sorted(idsOf(got, deliveryID)))
		for _, ep := range []store.Endpoint{e1, e2} {
			d := f.deliveryFor(ev.ID, ep.ID)
			want := store.Delivery{
				ID: d.ID, EventID: ev.ID, EndpointID: ep.ID, Tenant: "acme", EventType: "file.created",
				State: store.DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now,
			}
			diff(t, "new delivery", want, d)
			diff(t, "GetDelivery", want, f.getDelivery(d.ID))
		}
	})
	s.run(t, "PausedAndDisabledEndpointsGetHeldDeliveries", func(t *testing.T, f *fixture) {
		enabled := f.endpoint("acme")
		paused := f.endpointInState("acme", store.EndpointPaused)
		disabled := f.endpointInState("acme", store.EndpointDisabled)
		res := f.publish("acme", "file.created", base)
		if res.Deliveries != 3 {
			t.Fatalf("Deliveries = %d, want 3 (held ones count)", res.Deliveries)
		}
		if res.Pending != 1 {
			t.Fatalf("Pending = %d, want 1 (only the enabled endpoint's delivery is due)", res.Pending)
		}
		for ep, want := range map[string]store.DeliveryState{enabled.ID: store.DeliveryPending, paused.ID: store.DeliveryPaused, disabled.ID: store.DeliveryPaused} {
			if d := f.deliveryFor(res.Event.ID, ep); d.State != want {
				t.Errorf("delivery to %s endpoint: state %s, want %s", f.getEndpoint(ep).State, d.State, want)
			}
		}
		cs := f.claim("w", 10, time.Minute, at(time.Hour))
		if len(cs) != 1 || cs[0].Delivery.EndpointID != enabled.ID {
			t.Fatalf("claimed %v, want only the enabled endpoint's delivery", claimIDs(cs))
		}
		f.expectNextDueAt(time.Time{})
	})
	s.run(t, "SameIDSameContentReturnsOriginal", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		first := f.publishEvent(ev, base)
		f.endpoint("acme") // a new matching endpoint must not get the old event
		again := ev
		again.OccurredAt = at(time.Hour) // not part of the fingerprint
		res, err := f.s.PublishEvent(f.ctx, publishParams(again, at(time.Minute)))
		if err != nil {
			t.Fatalf("PublishEvent again: %v", err)
		}
		if res.Created {
			t.Errorf("Created = true for a republished id")
		}
		if res.Deliveries != 2 {
			t.Errorf("Deliveries = %d, want the original 2", res.Deliveries)
		}
		diff(t, "republish returns the original event", first.Event, res.Event)
		diff(t, "stored event", first.Event, f.getEvent(ev.ID))
		if got := f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID}); len(got) != 2 {
			t.Errorf("deliveries after republish = %d, want 2", len(got))
		}
	})
	s.run(t, "SameIdempotencyKeyReturnsOriginal", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		ev.IdempotencyKey = "key-1"
		first := f.publishEvent(ev, base)
		if !first.Created || first.Event.IdempotencyKey != "key-1" {
			t.Fatalf("first publish = %+v", first)
		}
		retry := newEvent("acme", "file.created", `{"n":1}`) // a new id, as a client retry would get
		retry.IdempotencyKey = "key-1"
		res, err := f.s.PublishEvent(f.ctx, publishParams(retry, at(time.Minute)))
		if err != nil {
			t.Fatalf("PublishEvent retry: %v", err)
		}
		if res.Created || res.Deliveries != 1 {
			t.Errorf("retry: Created %v, Deliveries %d; want false, 1", res.Created, res.Deliveries)
		}
		diff(t, "retry returns the original event", first.Event, res.Event)
		_, err = f.s.GetEvent(f.ctx, retry.ID)
		wantErr(t, "GetEvent(retry id)", err, store.ErrNotFound)
		if got := f.listDeliveries(store.ListDeliveriesParams{EndpointID: ""}); len(got) != 1 {
			t.Errorf("deliveries = %d, want 1", len(got))
		}
	})
	s.run(t, "SameIDOtherContentIsConflict", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		first := f.publishEvent(ev, base)
		variants := map[string]func(e *store.Event){
			"data": func(e *store.Event) { e.Fingerprint = store.Fingerprint("acme", "file.created", []byte(`{"n":2}`)) },
			"type": func(e *store.Event) {
				e.Type = "file.deleted"
				e.Fingerprint = store.Fingerprint("acme", "file.deleted", []byte(`{"n":1}`))
			},
			"tenant": func(e *store.Event) {
				e.Tenant = "globex"
				e.Fingerprint = store.Fingerprint("globex", "file.created", []byte(`{"n":1}`))
			},
		}
		for name, mod := range variants {
			other := ev
			mod(&other)
			_, err := f.s.PublishEvent(f.ctx, publishParams(other, at(time.Minute)))
			wantErr(t, "republish with other "+name, err, store.ErrConflict)
		}
		diff(t, "stored event unchanged", first.Event, f.getEvent(ev.ID))
		if got := f.listDeliveries(store.ListDeliveriesParams{}); len(got) != 1 {
			t.Errorf("deliveries = %d, want 1", len(got))
		}
	})
	s.run(t, "SameIdempotencyKeyOtherContentIsConflict", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		ev.IdempotencyKey = "key-1"
		f.publishEvent(ev, base)
		other := newEvent("acme", "file.created", `{"n":2}`)
		other.IdempotencyKey = "key-1"
		_, err := f.s.PublishEvent(f.ctx, publishParams(other, at(time.Minute)))
		wantErr(t, "reuse of an idempotency key with other data", err, store.ErrConflict)
		_, err = f.s.GetEvent(f.ctx, other.ID)
		wantErr(t, "GetEvent(conflicting id)", err, store.ErrNotFound)
		evs, err := f.s.ListEvents(f.ctx, store.ListEventsParams{ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		diff(t, "events", []string{ev.ID}, idsOf(evs.Data, eventID))
		if got := f.listDeliveries(store.ListDeliveriesParams{}); len(got) != 1 {
			t.Errorf("deliveries = %d, want 1", len(got))
		}
	})
	s.run(t, "IdempotencyKeyIsPerTenant", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.endpoint("globex")
		a := newEvent("acme", "file.created", `{"n":1}`)
		a.IdempotencyKey = "shared"
		b := newEvent("globex", "file.created", `{"n":1}`)
		b.IdempotencyKey = "shared"
		ra := f.publishEvent(a, base)
		rb := f.publishEvent(b, base)
		if !ra.Created || !rb.Created {
			t.Fatalf("Created = %v, %v; want true, true", ra.Created, rb.Created)
		}
		if rb.Event.ID != b.ID || rb.Deliveries != 1 {
			t.Fatalf("globex publish = %+v, want its own event with 1 delivery", rb)
		}
		f.getEvent(a.ID)
		f.getEvent(b.ID)
	})
	s.run(t, "BodyRoundTripsExactly", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"name":"Grüße, 世界 🚀","esc":"a\"b\\c\u00e9","n":1.50}`)
		ev.Body = append(ev.Body, '\n')
		body := slices.Clone(ev.Body)
		res := f.publishEvent(ev, base)
		if string(res.Event.Body) != string(body) {
			t.Errorf("PublishResult body = %q, want %q", res.Event.Body, body)
		}
		if got := f.getEvent(ev.ID).Body; string(got) != string(body) {
			t.Errorf("GetEvent body = %q, want %q", got, body)
		}
		c := f.claimOne("w", time.Minute, base)
		if string(c.Event.Body) != string(body) {
			t.Errorf("claimed body = %q, want %q", c.Event.Body, body)
		}
		again := f.publishEvent(ev, at(time.Second))
		if string(again.Event.Body) != string(body) {
			t.Errorf("republish body = %q, want %q", again.Event.Body, body)
		}
	})
	s.run(t, "EventRoundTrip", func(t *testing.T, f *fixture) {
		ev := newEvent("acme", "invoice.paid", `{"n":1}`)
		ev.OccurredAt = at(-time.Hour)
		ev.IdempotencyKey = "k"
		res := f.publishEvent(ev, at(time.Minute))
		want := ev
		want.CreatedAt = at(time.Minute)
		diff(t, "PublishResult event", want, res.Event)
		diff(t, "GetEvent", want, f.getEvent(ev.ID))
	})
	s.run(t, "GetUnknownEventIsNotFound", func(t *testing.T, f *fixture) {
		_, err := f.s.GetEvent(f.ctx, "evt_unknown")
		wantErr(t, "GetEvent(unknown)", err, store.ErrNotFound)
	})
	s.run(t, "ConcurrentSameIdempotencyKey", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		const n = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			ids     = map[string]bool{}
		)
		for range n {
			wg.Go(func() {
				ev := newEvent("acme", "file.created", `{"n":1}`)
				ev.IdempotencyKey = "race"
				res, err := f.s.PublishEvent(f.ctx, publishParams(ev, base))
				if err != nil {
					t.Errorf("PublishEvent: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if res.Created {
					created++
				}
				ids[res.Event.ID] = true
			})
		}
		wg.Wait()
		if created != 1 || len(ids) != 1 {
			t.Fatalf("%d publishes with one key: %d created, %d distinct events; want 1, 1", n, created, len(ids))
		}
		if got := f.listDeliveries(store.ListDeliveriesParams{}); len(got) != 1 {
			t.Fatalf("deliveries = %d, want 1", len(got))
		}
	})
}

// ---------------------------------------------------------------------------
// Events

func (s suite) events(t *testing.T) {
	s.run(t, "CursorNotIssuedIsInvalid", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.publish("acme", "file.created", base)
		for _, c := range []string{"not-a-cursor", "0", "-5", "1.5"} {
			_, err := f.s.ListEvents(f.ctx, store.ListEventsParams{ListParams: store.ListParams{Limit: 10, Cursor: c}})
			wantRefusal(t, fmt.Sprintf("ListEvents(cursor %q)", c), err, store.BadCursor(c))
		}
	})
	s.run(t, "ListFiltersAndPaginates", func(t *testing.T, f *fixture) {
		var ax, ay, bx []string
		for i := range 12 {
			now := at(time.Duration(i) * time.Second)
			switch {
			case i%4 == 3:
				ay = append(ay, f.publish("acme", "y.happened", now).Event.ID)
			case i%3 == 2:
				bx = append(bx, f.publish("globex", "x.happened", now).Event.ID)
			default:
				ax = append(ax, f.publish("acme", "x.happened", now).Event.ID)
			}
		}
		cases := []struct {
			tenant, typ string
			want        []string
		}{
			{"acme", "x.happened", ax},
			{"acme", "y.happened", ay},
			{"globex", "x.happened", bx},
			{"globex", "y.happened", nil},
			{"acme", "", append(slices.Clone(ax), ay...)},
			{"", "x.happened", append(slices.Clone(ax), bx...)},
			{"", "", append(append(slices.Clone(ax), ay...), bx...)},
			{"nobody", "", nil},
		}
		for _, c := range cases {
			for _, limit := range []int{1, 2, 5, 100} {
				got := collect(t, limit, func(cursor string) (store.Page[store.Event], error) {
					return f.s.ListEvents(f.ctx, store.ListEventsParams{Tenant: c.tenant, Type: c.typ, ListParams: store.ListParams{Limit: limit, Cursor: cursor}})
				}, eventID)
				want := reversed(sorted(c.want)) // ids are time-ordered: newest first
				diff(t, fmt.Sprintf("ListEvents(tenant %q, type %q, limit %d)", c.tenant, c.typ, limit), want, idsOf(got, eventID))
			}
		}
	})
	s.run(t, "ListReturnsFullEvents", func(t *testing.T, f *fixture) {
		ev := newEvent("acme", "x.happened", `{"a":"ü"}`)
		ev.IdempotencyKey = "k1"
		res := f.publishEvent(ev, at(time.Second))
		pg, err := f.s.ListEvents(f.ctx, store.ListEventsParams{Tenant: "acme", ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		diff(t, "ListEvents", []store.Event{res.Event}, pg.Data)
	})
}

// ---------------------------------------------------------------------------
// Claim

func (s suite) claim(t *testing.T) {
	s.run(t, "EmptyStore", func(t *testing.T, f *fixture) {
		f.expectNoClaim(at(time.Hour))
	})
	s.run(t, "OnlyDue", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		early := f.publish("acme", "file.created", base).Event
		late := f.publish("acme", "file.created", at(10*time.Second)).Event
		c := f.claimOne("w", time.Minute, at(5*time.Second))
		if c.Delivery.EventID != early.ID {
			t.Fatalf("claimed event %s, want %s", c.Delivery.EventID, early.ID)
		}
		f.expectNoClaim(at(10*time.Second - time.Microsecond))
		c = f.claimOne("w", time.Minute, at(10*time.Second)) // due exactly now
		if c.Delivery.EventID != late.ID {
			t.Fatalf("claimed event %s, want %s", c.Delivery.EventID, late.ID)
		}
	})
	s.run(t, "OldestDueFirstUpToLimit", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		byDue := map[time.Duration]string{}
		for _, sec := range []time.Duration{5, 1, 3, 2, 4, 6} {
			byDue[sec] = f.publish("acme", "file.created", at(sec*time.Second)).Event.ID
		}
		now := at(5 * time.Second) // the one due at 6 s is not due yet
		first := f.claim("w", 2, time.Minute, now)
		diff(t, "first claim (events, oldest due first)", []string{byDue[1], byDue[2]}, mapSlice(first, func(c store.Claim) string { return c.Delivery.EventID }))
		rest := f.claim("w", 10, time.Minute, now)
		diff(t, "second claim (events, oldest due first)", []string{byDue[3], byDue[4], byDue[5]}, mapSlice(rest, func(c store.Claim) string { return c.Delivery.EventID }))
		f.expectNoClaim(now)
	})
	// A lease keeps every other claim out until it is completed or
	// rescued, whether the driver keeps it in the row (PostgreSQL) or in
	// memory (SQLite): the lease's holder is shown by GetDelivery, the
	// delivery counts as neither due nor claimable, and a completion by
	// anyone but the holder records its attempt without moving it.
	s.run(t, "LeaseKeepsOthersOut", func(t *testing.T, f *fixture) {
		f.seed(1, 3, base)
		cs := f.claim("a", 2, time.Minute, base)
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		for _, c := range cs {
			if d := f.getDelivery(c.Delivery.ID); d.LeaseOwner != "a" || !d.LeaseUntil.Equal(at(time.Minute)) || d.State != store.DeliveryPending {
				t.Errorf("claimed delivery: state %s, lease %q until %v; want pending, a until %v", d.State, d.LeaseOwner, d.LeaseUntil, at(time.Minute))
			}
		}
		rest := f.claimOne("b", time.Minute, at(time.Minute-time.Microsecond))
		if rest.Delivery.ID == cs[0].Delivery.ID || rest.Delivery.ID == cs[1].Delivery.ID {
			t.Fatalf("b claimed %s, leased to a", rest.Delivery.ID)
		}
		f.expectNoClaim(at(time.Minute - time.Microsecond))
		f.expectNextDueAt(time.Time{}) // all three are leased
		// b completes a's delivery: the attempt is recorded, the delivery
		// stays a's.
		stolen := completion(cs[0], store.DeliverySucceeded, at(time.Second))
		stolen.Owner = "b"
		f.complete(stolen)
		if d := f.getDelivery(cs[0].Delivery.ID); d.State != store.DeliveryPending || d.LeaseOwner != "a" || d.Attempts != 0 {
			t.Errorf("after a completion by a non-holder: state %s, lease %q, attempts %d; want pending, a, 0", d.State, d.LeaseOwner, d.Attempts)
		}
		if as := f.attempts(cs[0].Delivery.ID); len(as) != 1 {
			t.Errorf("attempts recorded for the non-holder's completion: %d, want 1", len(as))
		}
		// a's own completion moves it and ends the lease.
		f.complete(completion(cs[0], store.DeliverySucceeded, at(2*time.Second)))
		if d := f.getDelivery(cs[0].Delivery.ID); d.State != store.DeliverySucceeded || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() {
			t.Errorf("after the holder's completion: state %s, lease %q until %v; want succeeded, none", d.State, d.LeaseOwner, d.LeaseUntil)
		}
		f.expectNoClaim(at(time.Minute - time.Microsecond))
	})
	s.run(t, "LimitZeroClaimsNothing", func(t *testing.T, f *fixture) {
		f.seed(1, 2, base)
		cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 0, Lease: time.Minute, Now: base})
		if err != nil || len(cs) != 0 {
			t.Fatalf("ClaimDeliveries(limit 0) = %v, %v; want none, nil", claimIDs(cs), err)
		}
		if got := len(f.claim("w", 10, time.Minute, base)); got != 2 {
			t.Fatalf("after a limit-0 claim, %d claimable, want 2", got)
		}
	})
	s.run(t, "SkipsHeldAndFinal", func(t *testing.T, f *fixture) {
		f.endpointInState("acme", store.EndpointPaused)
		f.endpointInState("acme", store.EndpointDisabled)
		ok := f.endpoint("acme")
		for range 3 {
			f.publish("acme", "file.created", base)
		}
		cs := f.claim("w", 10, time.Minute, base)
		if len(cs) != 3 {
			t.Fatalf("claimed %d, want the 3 deliveries of the enabled endpoint", len(cs))
		}
		for _, c := range cs {
			if c.Delivery.EndpointID != ok.ID {
				t.Fatalf("claimed a delivery of held endpoint %s", c.Delivery.EndpointID)
			}
		}
		f.complete(
			completion(cs[0], store.DeliverySucceeded, at(time.Second)),
			completion(cs[1], store.DeliveryDead, at(time.Second)),
			completion(cs[2], store.DeliveryPending, at(time.Second)),
		)
		c := f.claimOne("w", time.Minute, at(time.Hour))
		if c.Delivery.ID != cs[2].Delivery.ID {
			t.Fatalf("claimed %s, want only the retry %s", c.Delivery.ID, cs[2].Delivery.ID)
		}
		f.expectNoClaim(at(2 * time.Hour))
	})
	s.run(t, "FillsDeliveryEventEndpoint", func(t *testing.T, f *fixture) {
		e := f.createEndpoint(func() store.Endpoint { e := fullEndpoint("acme"); e.State = store.EndpointEnabled; return e }())
		ev := newEvent("acme", "file.created", `{"x":"ü"}`)
		ev.IdempotencyKey = "k"
		published := f.publishEvent(ev, base).Event
		now := at(time.Second)
		c := f.claimOne("worker-1", 45*time.Second, now)
		d := c.Delivery
		if d.LeaseOwner != "worker-1" || !d.LeaseUntil.Equal(now.Add(45*time.Second)) {
			t.Errorf("claimed lease = %q until %v, want worker-1 until %v", d.LeaseOwner, d.LeaseUntil, now.Add(45*time.Second))
		}
		if d.State != store.DeliveryPending || d.Attempts != 0 || d.EventID != ev.ID || d.EndpointID != e.ID || !d.NextAttemptAt.Equal(base) {
			t.Errorf("claimed delivery = %+v", d)
		}
		diff(t, "claimed delivery vs GetDelivery", f.getDelivery(d.ID), d)
		diff(t, "claimed event", published, c.Event)
		diff(t, "claimed endpoint", e, c.Endpoint)
		if len(c.Endpoint.Secrets) != 2 || c.Endpoint.Headers["X-Team"] != "storage" || c.Endpoint.URL != e.URL {
			t.Errorf("claimed endpoint lacks secrets, headers or URL: %+v", c.Endpoint)
		}
	})
	s.run(t, "ManyEventsAndEndpointsInOneClaim", func(t *testing.T, f *fixture) {
		ids := f.seed(7, 9, base)
		cs := f.claim("w", 1000, time.Minute, base)
		diff(t, "claimed", keys(ids), sorted(claimIDs(cs)))
		for _, c := range cs {
			if c.Event.ID != c.Delivery.EventID || len(c.Event.Body) == 0 {
				t.Errorf("claim %s: event %q (body %d bytes), want %s", c.Delivery.ID, c.Event.ID, len(c.Event.Body), c.Delivery.EventID)
			}
			if c.Endpoint.ID != c.Delivery.EndpointID || c.Endpoint.URL == "" || len(c.Endpoint.Secrets) == 0 {
				t.Errorf("claim %s: endpoint %+v, want %s", c.Delivery.ID, c.Endpoint, c.Delivery.EndpointID)
			}
		}
	})
	s.run(t, "NotClaimedTwice", func(t *testing.T, f *fixture) {
		f.seed(1, 3, base)
		first := f.claim("a", 10, time.Minute, base)
		if len(first) != 3 {
			t.Fatalf("first claim: %d, want 3", len(first))
		}
		f.expectNoClaim(base)
		// An expired but unrescued lease is still a lease.
		f.expectNoClaim(at(time.Hour))
		f.expectNextDueAt(time.Time{})
	})
	s.run(t, "ConcurrentClaimers", func(t *testing.T, f *fixture) {
		ids := f.seed(10, 20, base)
		const workers = 8
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			got = map[string]string{}
			dup []string
		)
		for w := range workers {
			owner := fmt.Sprintf("worker-%d", w)
			wg.Go(func() {
				for {
					cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: owner, Limit: 7, Lease: time.Minute, Now: at(time.Second)})
					if err != nil {
						t.Errorf("%s: ClaimDeliveries: %v", owner, err)
						return
					}
					if len(cs) == 0 {
						return
					}
					mu.Lock()
					for _, c := range cs {
						if prev, ok := got[c.Delivery.ID]; ok {
							dup = append(dup, fmt.Sprintf("%s by %s and %s", c.Delivery.ID, prev, owner))
						}
						got[c.Delivery.ID] = owner
						if c.Delivery.LeaseOwner != owner {
							t.Errorf("%s got a claim leased to %q", owner, c.Delivery.LeaseOwner)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(dup) > 0 {
			t.Fatalf("claimed twice: %v", dup)
		}
		gotIDs := make([]string, 0, len(got))
		for id := range got {
			gotIDs = append(gotIDs, id)
		}
		diff(t, "all deliveries claimed", keys(ids), sorted(gotIDs))
		for id, owner := range got {
			if d := f.getDelivery(id); d.LeaseOwner != owner {
				t.Errorf("delivery %s leased to %q, claimed by %q", id, d.LeaseOwner, owner)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// Rescue

// fairClaim: claims serve the tenants with due work in turn (ClaimParams),
// not oldest-first over the whole queue.
func (s suite) fairClaim(t *testing.T) {
	tenantsOf := func(cs []store.Claim) map[string]int {
		out := map[string]int{}
		for _, c := range cs {
			out[c.Delivery.Tenant]++
		}
		return out
	}
	s.run(t, "NewTenantNotBehindBacklog", func(t *testing.T, f *fixture) {
		// Tenant a has 40 deliveries due long ago; b publishes one now. A
		// claim of 8 takes b's (oldest-first would take 8 of a's).
		f.endpoint("a")
		f.endpoint("b")
		for i := range 40 {
			f.publish("a", "t", at(time.Duration(i)*time.Millisecond))
		}
		bev := f.publish("b", "t", at(time.Minute)).Event
		cs := f.claim("w", 8, time.Hour, at(time.Minute))
		diff(t, "tenants of the claim", map[string]int{"a": 7, "b": 1}, tenantsOf(cs))
		found := false
		for _, c := range cs {
			found = found || c.Delivery.EventID == bev.ID
		}
		if !found {
			t.Fatalf("b's delivery not claimed: %v", claimIDs(cs))
		}
	})
	// A tenant whose due deliveries are all leased has nothing due: it
	// takes no turn (and no share) in the next claim.
	s.run(t, "TenantWhollyInFlightTakesNoTurn", func(t *testing.T, f *fixture) {
		f.endpoint("a")
		f.endpoint("b")
		f.publish("a", "t", base)
		for range 3 {
			f.publish("b", "t", at(time.Second))
		}
		first := f.claim("w", 1, time.Hour, at(time.Minute))
		if len(first) != 1 || first[0].Delivery.Tenant != "a" {
			t.Fatalf("first claim = %v, want a's delivery", tenantsOf(first))
		}
		cs := f.claim("w", 2, time.Hour, at(time.Minute))
		diff(t, "tenants of the second claim", map[string]int{"b": 2}, tenantsOf(cs))
		for _, c := range cs {
			if c.Turn != 1 {
				t.Errorf("b's claim %s has turn %d, want 1 (a, wholly in flight, takes no turn)", c.Delivery.ID, c.Turn)
			}
		}
	})
	s.run(t, "EvenSharesThenFill", func(t *testing.T, f *fixture) {
		for _, tn := range []string{"a", "b", "c"} {
			f.endpoint(tn)
		}
		for range 10 {
			f.publish("a", "t", base)
			f.publish("b", "t", base)
		}
		f.publish("c", "t", base)
		// 9 = 3 tenants × 3: c has only 1, the 2 left go to the oldest.
		cs := f.claim("w", 9, time.Hour, base)
		got := tenantsOf(cs)
		if len(cs) != 9 || got["c"] != 1 || got["a"] < 3 || got["b"] < 3 {
			t.Fatalf("claim of 9 = %v, want c 1 and at least 3 each of a and b, 9 in all", got)
		}
		// One tenant alone gets the whole batch.
		f.endpoint("solo")
		for range 5 {
			f.publish("solo", "t", at(time.Hour))
		}
		rest := f.claim("w", 100, time.Hour, at(2*time.Hour))
		diff(t, "the rest", map[string]int{"a": 10 - got["a"], "b": 10 - got["b"], "solo": 5}, tenantsOf(rest))
	})
	s.run(t, "RoundRobinCursor", func(t *testing.T, f *fixture) {
		for _, tn := range []string{"a", "b", "c"} {
			f.endpoint(tn)
			for range 3 {
				f.publish(tn, "t", base)
			}
		}
		// Not due yet: costs a probe, never a turn.
		f.endpoint("d")
		f.publish("d", "t", at(time.Hour))
		var served []string
		cursor := ""
		for range 7 {
			cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Hour, Now: base, TenantCursor: cursor})
			if err != nil || len(cs) != 1 {
				t.Fatalf("ClaimDeliveries(cursor %q) = %d claims, %v; want 1", cursor, len(cs), err)
			}
			if cs[0].Turn != 1 {
				t.Fatalf("turn %d, want 1", cs[0].Turn)
			}
			served = append(served, cs[0].Delivery.Tenant)
			cursor = store.NextTenantCursor(cursor, cs)
		}
		diff(t, "tenants served one per claim", []string{"a", "b", "c", "a", "b", "c", "a"}, served)
	})
	// ClaimParams.SkipTenants: a skipped tenant's deliveries are taken
	// neither in the round nor in the fill, however old and many; NextDueAt
	// with the same list does not report them.
	skipClaim := func(f *fixture, limit int, now time.Time, cursor string, skip ...string) []store.Claim {
		f.t.Helper()
		cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: limit, Lease: time.Hour, Now: now, TenantCursor: cursor, SkipTenants: skip})
		if err != nil {
			f.t.Fatalf("ClaimDeliveries(skip %q): %v", skip, err)
		}
		return cs
	}
	skipNextDue := func(f *fixture, skip ...string) time.Time {
		f.t.Helper()
		next, err := f.s.NextDueAt(f.ctx, skip)
		if err != nil {
			f.t.Fatalf("NextDueAt(skip %q): %v", skip, err)
		}
		return next
	}
	s.run(t, "SkipTenants", func(t *testing.T, f *fixture) {
		// a: 40 deliveries due long ago (the oldest: the fill would take
		// them); b: 3 due now; c: 1 due in an hour.
		f.endpoint("a")
		f.endpoint("b")
		f.endpoint("c")
		for i := range 40 {
			f.publish("a", "t", at(time.Duration(i)*time.Millisecond))
		}
		for range 3 {
			f.publish("b", "t", at(time.Minute))
		}
		f.publish("c", "t", at(time.Hour))
		now := at(time.Minute)
		if got := skipNextDue(f, "a"); !got.Equal(now) {
			t.Errorf("NextDueAt(skip a) = %v, want b's %v", got, now)
		}
		if got := skipNextDue(f, "zzz"); !got.Equal(base) {
			t.Errorf("NextDueAt(skip a tenant with nothing) = %v, want a's %v", got, base)
		}
		// Without the skip list, a claim of 8 takes b's 3 and fills with a's
		// 5 oldest; with a skipped, b's 3 alone, whatever the cursor.
		for _, cursor := range []string{"", "a", "b", "c"} {
			cs := skipClaim(f, 8, now, cursor, "a")
			diff(t, "tenants of a claim of 8 skipping a (cursor "+cursor+")", map[string]int{"b": 3}, tenantsOf(cs))
			for _, c := range cs {
				f.complete(store.Completion{DeliveryID: c.Delivery.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil, Deferred: true, NextAttemptAt: now, Now: now})
			}
		}
		// One tenant skipped of two with due work: none of a's, even with
		// the round's only other tenant served first.
		if cs := skipClaim(f, 1, now, "", "a"); len(cs) != 1 || cs[0].Delivery.Tenant != "b" {
			t.Fatalf("claim of 1 skipping a = %v, want one of b's", tenantsOf(cs))
		}
		// b's remaining 2 taken; then nothing but a's is due.
		if cs := skipClaim(f, 8, now, "", "a"); len(cs) != 2 {
			t.Fatalf("claim of 8 skipping a = %v, want b's other 2", tenantsOf(cs))
		}
		if cs := skipClaim(f, 8, now, "", "a", "b"); len(cs) != 0 {
			t.Fatalf("claim skipping a and b with only theirs due = %v, want none", tenantsOf(cs))
		}
		if got := skipNextDue(f, "a"); !got.Equal(at(time.Hour)) {
			t.Errorf("NextDueAt(skip a) with b's in flight = %v, want c's %v", got, at(time.Hour))
		}
		if got := skipNextDue(f, "a", "c"); !got.IsZero() {
			t.Errorf("NextDueAt(skip a and c) = %v, want none", got)
		}
		// c's comes due: the skip list does not hold it back.
		later := at(2 * time.Hour)
		cs := skipClaim(f, 8, later, "", "a")
		diff(t, "tenants of a claim skipping a once c's is due", map[string]int{"c": 1}, tenantsOf(cs))
		// And without the list, a's are claimed as before.
		cs = f.claim("w", 100, time.Hour, later)
		diff(t, "tenants of a claim skipping nothing", map[string]int{"a": 40}, tenantsOf(cs))
	})
	s.run(t, "SkipTenantsFillsFromOthers", func(t *testing.T, f *fixture) {
		// b and c each have more due than their share of 4: the fill tops
		// the claim up with theirs, never with a's (the oldest).
		for _, tn := range []string{"a", "b", "c"} {
			f.endpoint(tn)
		}
		for i := range 20 {
			f.publish("a", "t", at(time.Duration(i)*time.Millisecond))
		}
		for range 6 {
			f.publish("b", "t", at(time.Second))
		}
		f.publish("c", "t", at(time.Second))
		cs := skipClaim(f, 8, at(time.Minute), "", "a")
		diff(t, "tenants of a claim of 8 skipping a", map[string]int{"b": 6, "c": 1}, tenantsOf(cs))
	})
	s.run(t, "SkipTenantsBeyondTheRound", func(t *testing.T, f *fixture) {
		// The round of a claim of 1 looks at 4 tenants: b..e have nothing
		// due, so it finds none; the fill still takes z's, the oldest due
		// after a's (skipped).
		for _, tn := range []string{"a", "b", "c", "d", "e", "z"} {
			f.endpoint(tn)
		}
		f.publish("a", "t", base)
		for _, tn := range []string{"b", "c", "d", "e"} {
			f.publish(tn, "t", at(time.Hour))
		}
		f.publish("z", "t", at(time.Second))
		cs := skipClaim(f, 1, at(time.Minute), "", "a")
		diff(t, "tenants of a claim of 1 skipping a", map[string]int{"z": 1}, tenantsOf(cs))
	})
}

// endpointLimit: CreateEndpointParams.MaxPerTenant refuses the endpoint
// past the limit with ErrLimit, per tenant, and stores nothing.
func (s suite) endpointLimit(t *testing.T) {
	s.run(t, "RefusedPastTheLimit", func(t *testing.T, f *fixture) {
		for range 2 {
			if _, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: newEndpoint("a"), MaxPerTenant: 2}); err != nil {
				t.Fatalf("CreateEndpoint under the limit: %v", err)
			}
		}
		_, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: newEndpoint("a"), MaxPerTenant: 2})
		wantRefusal(t, "third endpoint of a with a limit of 2", err, store.EndpointLimit("a", 2, 2))
		if _, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: newEndpoint("b"), MaxPerTenant: 2}); err != nil {
			t.Fatalf("another tenant's endpoint: %v", err)
		}
		if _, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: newEndpoint("a")}); err != nil {
			t.Fatalf("without a limit: %v", err)
		}
		page, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "a", ListParams: store.ListParams{Limit: 100}})
		if err != nil || len(page.Data) != 3 {
			t.Fatalf("tenant a has %d endpoints (%v), want 3 (2 + 1 without a limit)", len(page.Data), err)
		}
		// The limit lowered below what the tenant has: the error says both.
		_, err = f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: newEndpoint("a"), MaxPerTenant: 2})
		wantRefusal(t, "fourth endpoint of a with a limit of 2 (lowered)", err, store.EndpointLimit("a", 3, 2))
	})
}

func (s suite) rescue(t *testing.T) {
	s.run(t, "OnlyExpiredLeases", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		c := f.claimOne("a", 30*time.Second, base)
		if n := f.rescue(at(29 * time.Second)); n != 0 {
			t.Fatalf("rescue before the lease ends: %d, want 0", n)
		}
		f.expectNoClaim(at(29 * time.Second))
		if n := f.rescue(at(31 * time.Second)); n != 1 {
			t.Fatalf("rescue after the lease ended: %d, want 1", n)
		}
		d := f.getDelivery(c.Delivery.ID)
		if d.LeaseOwner != "" || !d.LeaseUntil.IsZero() || d.State != store.DeliveryPending || d.Attempts != 0 {
			t.Fatalf("rescued delivery = %+v, want pending, unleased", d)
		}
		f.expectNextDueAt(base)
		again := f.claimOne("b", 30*time.Second, at(31*time.Second))
		if again.Delivery.ID != c.Delivery.ID || again.Delivery.LeaseOwner != "b" {
			t.Fatalf("reclaim = %+v", again.Delivery)
		}
		if n := f.rescue(at(32 * time.Second)); n != 0 {
			t.Fatalf("rescue of the fresh lease: %d, want 0", n)
		}
		if n := f.rescue(at(2 * time.Minute)); n != 1 {
			t.Fatalf("second rescue: %d, want 1", n)
		}
	})
	s.run(t, "NothingToRescue", func(t *testing.T, f *fixture) {
		if n := f.rescue(at(time.Hour)); n != 0 {
			t.Fatalf("rescue on an empty store: %d", n)
		}
		f.seed(1, 2, base)
		if n := f.rescue(at(time.Hour)); n != 0 {
			t.Fatalf("rescue with no leases: %d", n)
		}
	})
	s.run(t, "CountsOnlyExpired", func(t *testing.T, f *fixture) {
		f.seed(2, 3, base)
		f.claim("short", 2, 10*time.Second, base)
		f.claim("long", 2, time.Hour, base)
		if n := f.rescue(at(time.Minute)); n != 2 {
			t.Fatalf("rescued %d, want the 2 short leases", n)
		}
		if got := len(f.claim("c", 100, time.Minute, at(time.Minute))); got != 4 {
			t.Fatalf("claimable after rescue: %d, want 2 unclaimed + 2 rescued", got)
		}
	})
	s.run(t, "RescuedDeliveryOfDisabledEndpointIsHeld", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", base)
		cs := f.claim("a", 10, time.Minute, base)
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		gone := completion(cs[0], store.DeliveryDead, at(time.Second))
		gone.Attempt.StatusCode = 410
		gone.DisableEndpoint, gone.DisableReason = true, "gone"
		f.complete(gone)
		// cs[1]'s worker crashed; its lease is rescued after the endpoint
		// was disabled. It must be held, not attempted, so it does not
		// count as "claimable again".
		if n := f.rescue(at(2 * time.Minute)); n != 0 {
			t.Errorf("rescue returned %d, want 0 (the rescued delivery is held, not claimable)", n)
		}
		f.expectNoClaim(at(time.Hour))
		f.expectNextDueAt(time.Time{})
		if d := f.getDelivery(cs[1].Delivery.ID); d.State != store.DeliveryPaused || d.LeaseOwner != "" {
			t.Errorf("rescued delivery of a disabled endpoint: state %s, lease %q; want paused, none", d.State, d.LeaseOwner)
		}
		if got := f.getEndpoint(e.ID).State; got != store.EndpointDisabled {
			t.Errorf("endpoint state %s, want disabled", got)
		}
	})
}

// ---------------------------------------------------------------------------
// Complete

func (s suite) complete(t *testing.T) {
	s.run(t, "EmptyBatch", func(t *testing.T, f *fixture) {
		f.complete()
		if err := f.s.CompleteDeliveries(f.ctx, nil); err != nil {
			t.Fatalf("CompleteDeliveries(nil): %v", err)
		}
	})
	s.run(t, "RecordsAttemptAndSchedulesRetry", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		c := f.claimOne("w", time.Minute, base)
		now := at(2 * time.Second)
		a := store.Attempt{
			StartedAt:       at(time.Second + 123*time.Microsecond),
			Duration:        1234567 * time.Microsecond,
			StatusCode:      302,
			Error:           "redirect",
			ErrorDetail:     "the endpoint answered with a redirect; redirects are not followed",
			Location:        "https://elsewhere.example.com/x",
			ResponseExcerpt: "<html>Moved — ü</html>\n",
		}
		f.complete(store.Completion{
			DeliveryID: c.Delivery.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil, Attempt: a, State: store.DeliveryPending,
			NextAttemptAt: at(32 * time.Second), ClientError: true, Now: now,
		})
		want := a
		want.DeliveryID, want.Number = c.Delivery.ID, 1
		diff(t, "ListAttempts", []store.Attempt{want}, f.attempts(c.Delivery.ID))
		d := f.getDelivery(c.Delivery.ID)
		wantD := c.Delivery
		wantD.Attempts, wantD.ClientErrors = 1, 1
		wantD.LastStatusCode, wantD.LastError = 302, "redirect"
		wantD.LeaseOwner, wantD.LeaseUntil = "", time.Time{}
		wantD.NextAttemptAt, wantD.UpdatedAt = at(32*time.Second), now
		diff(t, "delivery after a retryable failure", wantD, d)

		f.expectNextDueAt(at(32 * time.Second))
		f.expectNoClaim(at(32*time.Second - time.Microsecond))
		c2 := f.claimOne("w2", time.Minute, at(32*time.Second))
		if c2.Delivery.ID != c.Delivery.ID || c2.Delivery.Attempts != 1 {
			t.Fatalf("retry claim = %+v", c2.Delivery)
		}

		// A network error: no status code, error class kept.
		a2 := store.Attempt{StartedAt: at(33 * time.Second), Duration: 10 * time.Second, Error: "timeout", ErrorDetail: "no answer within 10s"}
		f.complete(store.Completion{DeliveryID: c.Delivery.ID, Owner: "w2", LeaseUntil: c2.Delivery.LeaseUntil, Attempt: a2, State: store.DeliveryPending, NextAttemptAt: at(3 * time.Minute), Now: at(43 * time.Second)})
		d = f.getDelivery(c.Delivery.ID)
		if d.Attempts != 2 || d.ClientErrors != 1 || d.LastStatusCode != 0 || d.LastError != "timeout" {
			t.Errorf("after a timeout: attempts %d, client errors %d, last status %d, last error %q; want 2, 1, 0, timeout", d.Attempts, d.ClientErrors, d.LastStatusCode, d.LastError)
		}
		as := f.attempts(c.Delivery.ID)
		if len(as) != 2 || as[0].Number != 1 || as[1].Number != 2 || as[1].Error != "timeout" || as[1].Duration != 10*time.Second {
			t.Errorf("attempts = %+v, want numbers 1, 2 oldest first", as)
		}
	})
	s.run(t, "SucceededIsFinal", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		c := f.claimOne("w", time.Minute, base)
		f.complete(completion(c, store.DeliverySucceeded, at(time.Second)))
		d := f.getDelivery(c.Delivery.ID)
		if d.State != store.DeliverySucceeded || d.Attempts != 1 || d.LastStatusCode != 200 || d.LastError != "" || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() {
			t.Fatalf("succeeded delivery = %+v", d)
		}
		f.expectNoClaim(at(1000 * time.Hour))
		f.expectNextDueAt(time.Time{})
		if n := f.rescue(at(1000 * time.Hour)); n != 0 {
			t.Fatalf("rescue after success: %d", n)
		}
	})
	s.run(t, "DeadIsFinal", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		c := f.claimOne("w", time.Minute, base)
		f.complete(completion(c, store.DeliveryDead, at(time.Second)))
		d := f.getDelivery(c.Delivery.ID)
		if d.State != store.DeliveryDead || d.Attempts != 1 || d.LastStatusCode != 500 || d.LeaseOwner != "" {
			t.Fatalf("dead delivery = %+v", d)
		}
		f.expectNoClaim(at(1000 * time.Hour))
		f.expectNextDueAt(time.Time{})
	})
	s.run(t, "ClientErrorsCount", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		now := base
		for i, clientErr := range []bool{true, false, true} {
			c := f.claimOne("w", time.Minute, now)
			cp := completion(c, store.DeliveryPending, now.Add(time.Second))
			cp.ClientError = clientErr
			cp.Attempt.StatusCode = 400
			f.complete(cp)
			now = cp.NextAttemptAt
			d := f.getDelivery(c.Delivery.ID)
			want := []int{1, 1, 2}[i]
			if d.ClientErrors != want || d.Attempts != i+1 {
				t.Fatalf("after attempt %d: client errors %d, attempts %d; want %d, %d", i+1, d.ClientErrors, d.Attempts, want, i+1)
			}
		}
	})
	s.run(t, "StaleOwnerRecordsAttemptOnly", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		old := f.claimOne("a", 30*time.Second, base)
		if n := f.rescue(at(time.Minute)); n != 1 {
			t.Fatalf("rescued %d, want 1", n)
		}
		cur := f.claimOne("b", 30*time.Second, at(time.Minute))
		before := f.getDelivery(cur.Delivery.ID)
		// a finishes late: its attempt happened, but the delivery is b's now.
		late := completion(old, store.DeliverySucceeded, at(61*time.Second))
		late.ClientError = true
		f.complete(late)
		after := f.getDelivery(cur.Delivery.ID)
		if after.State != store.DeliveryPending || after.LeaseOwner != "b" || !after.LeaseUntil.Equal(before.LeaseUntil) ||
			after.Attempts != before.Attempts || after.ClientErrors != before.ClientErrors || !after.NextAttemptAt.Equal(before.NextAttemptAt) {
			t.Fatalf("a stale completion changed the delivery:\nbefore %+v\nafter  %+v", before, after)
		}
		if as := f.attempts(cur.Delivery.ID); len(as) != 1 || as[0].StatusCode != 200 {
			t.Fatalf("attempts = %+v, want the stale attempt recorded", as)
		}
		f.expectNoClaim(at(70 * time.Second))
		// b's completion applies.
		f.complete(completion(cur, store.DeliveryDead, at(62*time.Second)))
		if d := f.getDelivery(cur.Delivery.ID); d.State != store.DeliveryDead || d.LeaseOwner != "" {
			t.Fatalf("owner's completion: %+v", d)
		}
		as := f.attempts(cur.Delivery.ID)
		if len(as) != 2 || as[0].Number != 1 || as[1].Number != 2 {
			t.Fatalf("attempts = %+v, want 2 numbered 1, 2", as)
		}
	})
	// The stale owner's completion and the new owner's, of the same
	// delivery, in one batch (a rescue while the first attempt hung): both
	// attempts are recorded, numbered in the batch's order, and only the
	// owner's moves the delivery.
	s.run(t, "StaleAndOwnerInOneBatch", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		old := f.claimOne("a", 30*time.Second, base)
		if n := f.rescue(at(time.Minute)); n != 1 {
			t.Fatalf("rescued %d, want 1", n)
		}
		cur := f.claimOne("b", 30*time.Second, at(time.Minute))
		late := completion(old, store.DeliveryPending, at(61*time.Second))
		f.complete(late, completion(cur, store.DeliverySucceeded, at(62*time.Second)))
		if d := f.getDelivery(cur.Delivery.ID); d.State != store.DeliverySucceeded || d.Attempts != 1 || d.LeaseOwner != "" {
			t.Fatalf("delivery %+v, want succeeded after the owner's one attempt", d)
		}
		as := f.attempts(cur.Delivery.ID)
		if len(as) != 2 || as[0].Number != 1 || as[0].StatusCode != 503 || as[1].Number != 2 || as[1].StatusCode != 200 {
			t.Fatalf("attempts = %+v, want the stale 503 as 1 and the owner's 200 as 2", as)
		}
	})
	// A completion written after its lease ended, the delivery claimed
	// again meanwhile by the same owner (a node whose completion write was
	// retried past its lease, while its rescuer and claimer ran): the new
	// lease is not the one the completion was made under, so it is a
	// stale completion like another owner's. It records its attempt (a
	// deferral: nothing) and leaves the delivery to the new lease, whose
	// completion then applies. Each kind of completion, alone in its
	// batch.
	for _, kind := range []struct {
		name     string
		state    store.DeliveryState
		deferred bool
	}{
		{"Succeeded", store.DeliverySucceeded, false},
		{"Retry", store.DeliveryPending, false},
		{"Dead", store.DeliveryDead, false},
		{"Deferred", store.DeliveryPending, true},
	} {
		s.run(t, "StaleLeaseOfSameOwner/"+kind.name, func(t *testing.T, f *fixture) {
			f.seed(1, 1, base)
			old := f.claimOne("a", 30*time.Second, base)
			if n := f.rescue(at(time.Minute)); n != 1 {
				t.Fatalf("rescued %d, want 1", n)
			}
			cur := f.claimOne("a", 30*time.Second, at(time.Minute))
			before := f.getDelivery(cur.Delivery.ID)
			if before.LeaseOwner != "a" || !before.LeaseUntil.Equal(at(90*time.Second)) {
				t.Fatalf("re-claimed delivery leased to %q until %v, want a until %v", before.LeaseOwner, before.LeaseUntil, at(90*time.Second))
			}
			late := attempt(old, kind.state, at(61*time.Second))
			if kind.deferred {
				late = store.Completion{DeliveryID: old.Delivery.ID, EndpointID: old.Delivery.EndpointID, Owner: "a", LeaseUntil: old.Delivery.LeaseUntil,
					Deferred: true, NextAttemptAt: at(10 * time.Minute), Now: at(61 * time.Second)}
			}
			f.complete(late)
			expectLeasedAsBefore(t, f, before, "the old lease's completion")
			wantStale := 1
			if kind.deferred {
				wantStale = 0
			}
			if as := f.attempts(cur.Delivery.ID); len(as) != wantStale {
				t.Fatalf("attempts after the old lease's completion: %+v, want %d", as, wantStale)
			}
			f.expectNoClaim(at(70 * time.Second))
			// The new lease's completion applies.
			f.complete(attempt(cur, store.DeliverySucceeded, at(62*time.Second)))
			if d := f.getDelivery(cur.Delivery.ID); d.State != store.DeliverySucceeded || d.Attempts != 1 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() {
				t.Fatalf("after the new lease's completion: state %s, attempts %d, lease %q until %v; want succeeded, 1, none",
					d.State, d.Attempts, d.LeaseOwner, d.LeaseUntil)
			}
			if as := f.attempts(cur.Delivery.ID); len(as) != wantStale+1 || as[wantStale].Number != wantStale+1 || as[wantStale].StatusCode != 200 {
				t.Fatalf("attempts = %+v, want the new lease's 200 as number %d", as, wantStale+1)
			}
		})
	}
	// The same in batches: the old leases' successes of several deliveries
	// in one batch (the batch every healthy drain writes), then the new
	// leases' completions; and an old lease's completion and the new
	// lease's, of one delivery, in one batch.
	s.run(t, "StaleLeasesOfSameOwnerInBatches", func(t *testing.T, f *fixture) {
		f.seed(2, 2, base)
		old := f.claim("a", 10, 30*time.Second, base)
		if len(old) != 4 {
			t.Fatalf("claimed %d, want 4", len(old))
		}
		if n := f.rescue(at(time.Minute)); n != 4 {
			t.Fatalf("rescued %d, want 4", n)
		}
		cur := f.claim("a", 10, 30*time.Second, at(time.Minute))
		if len(cur) != 4 {
			t.Fatalf("re-claimed %d, want 4", len(cur))
		}
		before := map[string]store.Delivery{}
		for _, c := range cur {
			before[c.Delivery.ID] = f.getDelivery(c.Delivery.ID)
		}
		f.complete(mapSlice(old[:3], func(c store.Claim) store.Completion { return attempt(c, store.DeliverySucceeded, at(61*time.Second)) })...)
		for _, c := range old[:3] {
			expectLeasedAsBefore(t, f, before[c.Delivery.ID], "a batch of the old leases' successes")
		}
		f.expectNoClaim(at(70 * time.Second))
		f.complete(mapSlice(cur[:3], func(c store.Claim) store.Completion { return attempt(c, store.DeliveryDead, at(62*time.Second)) })...)
		for _, c := range cur[:3] {
			d := f.getDelivery(c.Delivery.ID)
			if d.State != store.DeliveryDead || d.Attempts != 1 || d.LeaseOwner != "" {
				t.Errorf("delivery %s after the new leases' batch: state %s, attempts %d, lease %q; want dead, 1, none", d.ID, d.State, d.Attempts, d.LeaseOwner)
			}
			if as := f.attempts(c.Delivery.ID); len(as) != 2 || as[0].StatusCode != 200 || as[1].StatusCode != 500 {
				t.Errorf("attempts of %s = %+v, want the old lease's 200, then the new lease's 500", c.Delivery.ID, as)
			}
		}
		// The fourth: the old lease's retry and the new lease's success in
		// one batch, the old one first.
		var oldLast, curLast store.Claim
		for _, c := range old {
			if c.Delivery.ID == cur[3].Delivery.ID {
				oldLast = c
			}
		}
		curLast = cur[3]
		f.complete(attempt(oldLast, store.DeliveryPending, at(61*time.Second)), attempt(curLast, store.DeliverySucceeded, at(62*time.Second)))
		d := f.getDelivery(curLast.Delivery.ID)
		if d.State != store.DeliverySucceeded || d.Attempts != 1 || d.LeaseOwner != "" || d.LastStatusCode != 200 {
			t.Fatalf("delivery after the mixed batch: state %s, attempts %d, lease %q, last status %d; want succeeded, 1, none, 200",
				d.State, d.Attempts, d.LeaseOwner, d.LastStatusCode)
		}
		if as := f.attempts(curLast.Delivery.ID); len(as) != 2 || as[0].StatusCode != 503 || as[1].StatusCode != 200 {
			t.Fatalf("attempts = %+v, want the old lease's 503 as 1 and the new lease's 200 as 2", as)
		}
	})
	s.run(t, "StaleOwnerAfterRescueWithoutReclaim", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		old := f.claimOne("a", 30*time.Second, base)
		f.rescue(at(time.Minute))
		f.complete(completion(old, store.DeliveryDead, at(61*time.Second)))
		d := f.getDelivery(old.Delivery.ID)
		if d.State != store.DeliveryPending || d.LeaseOwner != "" {
			t.Fatalf("completion without the lease moved the delivery: %+v", d)
		}
		if len(f.attempts(old.Delivery.ID)) != 1 {
			t.Fatalf("attempt not recorded")
		}
		f.claimOne("b", time.Minute, at(2*time.Minute))
	})
	s.run(t, "DisableEndpointHoldsItsDeliveries", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", base)
		leased := f.claim("w", 10, time.Minute, base) // both of e's deliveries
		if len(leased) != 2 {
			t.Fatalf("claimed %d, want 2", len(leased))
		}
		other := f.endpoint("acme")
		waiting := f.publish("acme", "file.created", at(time.Second)).Event // one pending for e, one for other
		heldID := f.deliveryFor(waiting.ID, e.ID).ID
		otherID := f.deliveryFor(waiting.ID, other.ID).ID

		gone := completion(leased[0], store.DeliveryDead, at(2*time.Second))
		gone.Attempt.StatusCode = 410
		gone.DisableEndpoint, gone.DisableReason = true, "gone"
		f.complete(gone)

		ep := f.getEndpoint(e.ID)
		if ep.State != store.EndpointDisabled || ep.StateReason != "gone" || !ep.UpdatedAt.Equal(at(2*time.Second)) {
			t.Errorf("endpoint after 410: state %s, reason %q, updated %v; want disabled, gone, %v", ep.State, ep.StateReason, ep.UpdatedAt, at(2*time.Second))
		}
		if d := f.getDelivery(leased[0].Delivery.ID); d.State != store.DeliveryDead {
			t.Errorf("the 410 delivery: %s, want dead", d.State)
		}
		if d := f.getDelivery(heldID); d.State != store.DeliveryPaused {
			t.Errorf("pending delivery of the disabled endpoint: %s, want paused", d.State)
		}
		if d := f.getDelivery(otherID); d.State != store.DeliveryPending {
			t.Errorf("delivery of another endpoint: %s, want pending", d.State)
		}
		if d := f.getDelivery(leased[1].Delivery.ID); d.State != store.DeliveryPending || d.LeaseOwner != "w" {
			t.Errorf("in-flight delivery of the disabled endpoint: %s leased by %q, want pending leased by w until it completes", d.State, d.LeaseOwner)
		}
		// The in-flight one fails and would retry: it is held instead.
		f.complete(completion(leased[1], store.DeliveryPending, at(3*time.Second)))
		d := f.getDelivery(leased[1].Delivery.ID)
		if d.State != store.DeliveryPaused || d.LeaseOwner != "" || d.Attempts != 1 {
			t.Errorf("retry of a disabled endpoint's delivery: state %s, lease %q, attempts %d; want paused, none, 1", d.State, d.LeaseOwner, d.Attempts)
		}
		f.expectNextDueAt(at(time.Second))
		cs := f.claim("w", 10, time.Minute, at(time.Hour))
		diff(t, "claimable after disable", []string{otherID}, claimIDs(cs))
		// New events for the disabled endpoint are held.
		res := f.publish("acme", "file.created", at(time.Hour))
		if d := f.deliveryFor(res.Event.ID, e.ID); d.State != store.DeliveryPaused {
			t.Errorf("new delivery to the disabled endpoint: %s, want paused", d.State)
		}
	})
	s.run(t, "DisableAndRetryInOneBatch", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", base)
		cs := f.claim("w", 10, time.Minute, base)
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		retry := completion(cs[0], store.DeliveryPending, at(time.Second))
		gone := completion(cs[1], store.DeliveryDead, at(time.Second))
		gone.DisableEndpoint, gone.DisableReason = true, "gone"
		f.complete(retry, gone) // the retry comes first in the batch
		if d := f.getDelivery(cs[0].Delivery.ID); d.State != store.DeliveryPaused {
			t.Errorf("retry completed before the disable in one batch: %s, want paused", d.State)
		}
		f.expectNoClaim(at(time.Hour))
		f.expectNextDueAt(time.Time{})
	})
	s.run(t, "EndpointDeletedMeanwhile", func(t *testing.T, f *fixture) {
		gone := f.endpoint("acme")
		keep := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		cs := f.claim("w", 10, time.Minute, base)
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		if err := f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: gone.ID}); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		var batch []store.Completion
		var kept string
		for _, c := range cs {
			cp := completion(c, store.DeliverySucceeded, at(time.Second))
			if c.Delivery.EndpointID == gone.ID {
				cp.State = store.DeliveryDead
				cp.DisableEndpoint, cp.DisableReason = true, "gone"
			} else {
				kept = c.Delivery.ID
			}
			batch = append(batch, cp)
		}
		f.complete(batch...)
		if d := f.getDelivery(kept); d.State != store.DeliverySucceeded || d.EndpointID != keep.ID {
			t.Fatalf("delivery of the remaining endpoint: %+v, want succeeded", d)
		}
		if ep := f.getEndpoint(keep.ID); ep.State != store.EndpointEnabled {
			t.Fatalf("remaining endpoint: %s, want enabled", ep.State)
		}
		_, err := f.s.GetEndpoint(f.ctx, gone.ID)
		wantErr(t, "GetEndpoint(deleted)", err, store.ErrNotFound)
	})
	s.run(t, "UnknownDeliveryDoesNotFailBatch", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		c := f.claimOne("w", time.Minute, base)
		ghost := completion(c, store.DeliverySucceeded, at(time.Second))
		ghost.DeliveryID = "dlv_unknown"
		f.complete(ghost, completion(c, store.DeliverySucceeded, at(time.Second)))
		if d := f.getDelivery(c.Delivery.ID); d.State != store.DeliverySucceeded {
			t.Fatalf("delivery: %s, want succeeded", d.State)
		}
	})
	s.run(t, "LargeBatch", func(t *testing.T, f *fixture) {
		f.seed(10, 25, base)
		cs := f.claim("w", 1000, time.Minute, base)
		if len(cs) != 250 {
			t.Fatalf("claimed %d, want 250", len(cs))
		}
		states := []store.DeliveryState{store.DeliverySucceeded, store.DeliveryDead, store.DeliveryPending}
		batch := make([]store.Completion, len(cs))
		want := map[string]store.DeliveryState{}
		pending := 0
		var earliest time.Time
		for i, c := range cs {
			st := states[i%3]
			batch[i] = completion(c, st, at(time.Second))
			if st == store.DeliveryPending {
				batch[i].NextAttemptAt = at(time.Minute + time.Duration(i)*time.Millisecond)
				if pending == 0 {
					earliest = batch[i].NextAttemptAt
				}
				pending++
			}
			want[c.Delivery.ID] = st
		}
		f.complete(batch...)
		for id, st := range want {
			d := f.getDelivery(id)
			if d.State != st || d.Attempts != 1 || d.LeaseOwner != "" {
				t.Fatalf("delivery %s: state %s, attempts %d, lease %q; want %s, 1, none", id, d.State, d.Attempts, d.LeaseOwner, st)
			}
			if n := len(f.attempts(id)); n != 1 {
				t.Fatalf("delivery %s: %d attempts recorded, want 1", id, n)
			}
		}
		f.expectNextDueAt(earliest)
		if got := len(f.claim("w", 1000, time.Minute, at(time.Hour))); got != pending {
			t.Fatalf("claimable retries: %d, want %d", got, pending)
		}
	})
}

// ---------------------------------------------------------------------------
// Deliveries

func (s suite) deliveries(t *testing.T) {
	s.run(t, "GetUnknownIsNotFound", func(t *testing.T, f *fixture) {
		_, err := f.s.GetDelivery(f.ctx, "dlv_unknown")
		wantErr(t, "GetDelivery(unknown)", err, store.ErrNotFound)
	})
	s.run(t, "ListByEndpointEventAndState", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		o := f.endpoint("acme")
		f.endpoint("globex")
		var evs []string
		for i := range 4 {
			evs = append(evs, f.publish("acme", "file.created", at(time.Duration(i)*time.Second)).Event.ID)
		}
		f.publish("globex", "file.created", base)
		// e: ev0 dead, ev1 dead, ev2 succeeded, ev3 pending.
		outcome := map[string]store.DeliveryState{evs[0]: store.DeliveryDead, evs[1]: store.DeliveryDead, evs[2]: store.DeliverySucceeded}
		var batch []store.Completion
		for _, c := range f.claim("w", 100, time.Minute, at(time.Hour)) {
			if st, ok := outcome[c.Delivery.EventID]; ok && c.Delivery.EndpointID == e.ID {
				batch = append(batch, completion(c, st, at(time.Hour)))
			} else {
				batch = append(batch, completion(c, store.DeliveryPending, at(time.Hour)))
			}
		}
		f.complete(batch...)

		of := func(ep string, evIdx ...int) []string {
			var out []string
			for _, i := range evIdx {
				out = append(out, f.deliveryFor(evs[i], ep).ID)
			}
			return reversed(sorted(out))
		}
		cases := []struct {
			name string
			p    store.ListDeliveriesParams
			want []string
		}{
			{"endpoint", store.ListDeliveriesParams{EndpointID: e.ID}, of(e.ID, 0, 1, 2, 3)},
			{"endpoint DLQ", store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryDead}, of(e.ID, 0, 1)},
			{"endpoint succeeded", store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliverySucceeded}, of(e.ID, 2)},
			{"endpoint pending", store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryPending}, of(e.ID, 3)},
			{"endpoint paused", store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryPaused}, nil},
			{"other endpoint", store.ListDeliveriesParams{EndpointID: o.ID}, of(o.ID, 0, 1, 2, 3)},
			{"other endpoint DLQ", store.ListDeliveriesParams{EndpointID: o.ID, State: store.DeliveryDead}, nil},
			{"event", store.ListDeliveriesParams{EventID: evs[0]}, reversed(sorted(append(of(e.ID, 0), of(o.ID, 0)...)))},
			{"event dead", store.ListDeliveriesParams{EventID: evs[0], State: store.DeliveryDead}, of(e.ID, 0)},
			{"event and endpoint", store.ListDeliveriesParams{EventID: evs[1], EndpointID: o.ID}, of(o.ID, 1)},
			{"state only", store.ListDeliveriesParams{State: store.DeliveryDead}, of(e.ID, 0, 1)},
			{"unknown endpoint", store.ListDeliveriesParams{EndpointID: "ep_unknown"}, nil},
		}
		for _, c := range cases {
			for _, limit := range []int{1, 3, 100} {
				p := c.p
				p.Limit = limit
				got := f.listDeliveries(p)
				diff(t, fmt.Sprintf("ListDeliveries(%s, limit %d) ids, newest first", c.name, limit), c.want, idsOf(got, deliveryID))
				for _, d := range got {
					diff(t, "listed delivery vs GetDelivery", f.getDelivery(d.ID), d)
				}
			}
		}
	})
	s.run(t, "DeadLetterQueuePaginates", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		for i := range 11 {
			f.publish("acme", "file.created", at(time.Duration(i)*time.Millisecond))
		}
		cs := f.claim("w", 100, time.Minute, at(time.Second))
		var batch []store.Completion
		var dead []string
		for i, c := range cs {
			st := store.DeliveryDead
			if i == 4 {
				st = store.DeliverySucceeded
			} else {
				dead = append(dead, c.Delivery.ID)
			}
			batch = append(batch, completion(c, st, at(2*time.Second)))
		}
		f.complete(batch...)
		got := f.listDeliveries(store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryDead, ListParams: store.ListParams{Limit: 4}})
		diff(t, "DLQ", reversed(sorted(dead)), idsOf(got, deliveryID))
	})
}

// ---------------------------------------------------------------------------
// Attempts

func (s suite) attempts(t *testing.T) {
	s.run(t, "UnknownDeliveryIsNotFound", func(t *testing.T, f *fixture) {
		_, err := f.s.ListAttempts(f.ctx, "dlv_unknown")
		wantErr(t, "ListAttempts(unknown)", err, store.ErrNotFound)
	})
	s.run(t, "NoAttemptsIsEmptyNonNil", func(t *testing.T, f *fixture) {
		ids := f.seed(1, 1, base)
		for id := range ids {
			as, err := f.s.ListAttempts(f.ctx, id)
			if err != nil {
				t.Fatalf("ListAttempts: %v", err)
			}
			if as == nil || len(as) != 0 {
				t.Fatalf("ListAttempts = %#v, want an empty non-nil slice", as)
			}
		}
	})
	s.run(t, "OldestFirst", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		now := base
		var id string
		for i := range 5 {
			c := f.claimOne("w", time.Minute, now)
			id = c.Delivery.ID
			cp := completion(c, store.DeliveryPending, now.Add(time.Second))
			cp.Attempt.StartedAt = now
			cp.Attempt.StatusCode = 500 + i
			f.complete(cp)
			now = cp.NextAttemptAt
		}
		as := f.attempts(id)
		if len(as) != 5 {
			t.Fatalf("%d attempts, want 5", len(as))
		}
		for i, a := range as {
			if a.Number != i+1 || a.StatusCode != 500+i || a.DeliveryID != id {
				t.Errorf("attempt %d = %+v", i, a)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// NextDueAt

func (s suite) nextDueAt(t *testing.T) {
	s.run(t, "EmptyIsZero", func(t *testing.T, f *fixture) {
		f.expectNextDueAt(time.Time{})
	})
	s.run(t, "EarliestClaimable", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.publish("acme", "file.created", at(10*time.Second))
		f.publish("acme", "file.created", at(5*time.Second))
		f.publish("acme", "file.created", at(20*time.Second))
		f.expectNextDueAt(at(5 * time.Second))
		c := f.claimOne("w", time.Minute, at(5*time.Second))
		f.expectNextDueAt(at(10 * time.Second))                             // the leased one is not claimable
		f.complete(completion(c, store.DeliveryPending, at(6*time.Second))) // retry at 36 s
		f.expectNextDueAt(at(10 * time.Second))
		f.claim("w", 10, time.Minute, at(20*time.Second))
		f.expectNextDueAt(at(36 * time.Second)) // a retry in the future counts
		f.claim("w", 10, time.Minute, at(36*time.Second))
		f.expectNextDueAt(time.Time{})
	})
	s.run(t, "IgnoresHeld", func(t *testing.T, f *fixture) {
		f.endpointInState("acme", store.EndpointPaused)
		f.publish("acme", "file.created", base)
		f.expectNextDueAt(time.Time{})
	})
}

// ---------------------------------------------------------------------------
// Time

// checkTime fails unless got is want truncated to the microsecond, in UTC.
func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	w := want.Truncate(time.Microsecond).UTC()
	if !got.Equal(w) {
		t.Errorf("%s = %v, want %v", what, got, w)
	}
	if !got.IsZero() && got.Location() != time.UTC {
		t.Errorf("%s location = %v, want UTC", what, got.Location())
	}
}

func (s suite) times(t *testing.T) {
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	// ts returns base+d with sub-microsecond digits in a non-UTC zone.
	ts := func(d time.Duration) time.Time { return base.Add(d + 123456789*time.Nanosecond).In(zone) }

	s.run(t, "EndpointMicrosecondUTC", func(t *testing.T, f *fixture) {
		e := newEndpoint("acme")
		e.CreatedAt, e.UpdatedAt = ts(time.Second), ts(2*time.Second)
		e.Secrets = []store.Secret{{Value: "whsec_a", CreatedAt: ts(3 * time.Second)}, {Value: "whsec_b", CreatedAt: ts(0), ExpiresAt: ts(24 * time.Hour)}}
		check := func(what string, got store.Endpoint) {
			t.Helper()
			checkTime(t, what+" CreatedAt", got.CreatedAt, e.CreatedAt)
			checkTime(t, what+" UpdatedAt", got.UpdatedAt, e.UpdatedAt)
			if len(got.Secrets) != 2 {
				t.Fatalf("%s: %d secrets", what, len(got.Secrets))
			}
			checkTime(t, what+" Secrets[0].CreatedAt", got.Secrets[0].CreatedAt, e.Secrets[0].CreatedAt)
			checkTime(t, what+" Secrets[0].ExpiresAt", got.Secrets[0].ExpiresAt, time.Time{})
			checkTime(t, what+" Secrets[1].CreatedAt", got.Secrets[1].CreatedAt, e.Secrets[1].CreatedAt)
			checkTime(t, what+" Secrets[1].ExpiresAt", got.Secrets[1].ExpiresAt, e.Secrets[1].ExpiresAt)
		}
		check("CreateEndpoint", f.createEndpoint(e))
		check("GetEndpoint", f.getEndpoint(e.ID))
		pg, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{ListParams: store.ListParams{Limit: 1}})
		if err != nil || len(pg.Data) != 1 {
			t.Fatalf("ListEndpoints = %v, %v", pg, err)
		}
		check("ListEndpoints", pg.Data[0])

		desc := "x"
		upd, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, Description: &desc, Now: ts(time.Hour)})
		if err != nil {
			t.Fatalf("UpdateEndpoint: %v", err)
		}
		checkTime(t, "UpdateEndpoint result UpdatedAt", upd.UpdatedAt, ts(time.Hour))
		checkTime(t, "UpdateEndpoint result CreatedAt", upd.CreatedAt, e.CreatedAt)
		checkTime(t, "GetEndpoint after update UpdatedAt", f.getEndpoint(e.ID).UpdatedAt, ts(time.Hour))
		diff(t, "UpdateEndpoint result vs GetEndpoint", f.getEndpoint(e.ID), upd)
	})
	s.run(t, "EventAndDeliveryMicrosecondUTC", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		ev.OccurredAt = ts(-time.Hour)
		res := f.publishEvent(ev, ts(0))
		got := f.getEvent(ev.ID)
		for what, e := range map[string]store.Event{"PublishResult": res.Event, "GetEvent": got} {
			checkTime(t, what+" OccurredAt", e.OccurredAt, ev.OccurredAt)
			checkTime(t, what+" CreatedAt", e.CreatedAt, ts(0))
		}
		diff(t, "PublishResult event vs GetEvent", got, res.Event)
		diff(t, "republished event vs GetEvent", got, f.publishEvent(ev, ts(time.Minute)).Event)

		d := f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID})[0]
		checkTime(t, "delivery NextAttemptAt", d.NextAttemptAt, ts(0))
		checkTime(t, "delivery CreatedAt", d.CreatedAt, ts(0))
		checkTime(t, "delivery UpdatedAt", d.UpdatedAt, ts(0))
		f.expectNextDueAt(ts(0).Truncate(time.Microsecond))
		checkTime(t, "NextDueAt", f.nextDueAt(), ts(0))

		// A claim at exactly the stored due time (sub-microsecond digits
		// dropped) finds it.
		c := f.claimOne("w", 1500*time.Millisecond+999*time.Nanosecond, ts(time.Second))
		checkTime(t, "claim LeaseUntil", c.Delivery.LeaseUntil, ts(time.Second).Add(1500*time.Millisecond+999*time.Nanosecond))
		checkTime(t, "claim event OccurredAt", c.Event.OccurredAt, ev.OccurredAt)
		checkTime(t, "claim event CreatedAt", c.Event.CreatedAt, ts(0))
		checkTime(t, "claim endpoint CreatedAt", c.Endpoint.CreatedAt, base)
		checkTime(t, "GetDelivery LeaseUntil", f.getDelivery(c.Delivery.ID).LeaseUntil, c.Delivery.LeaseUntil)

		a := store.Attempt{StartedAt: ts(2 * time.Second), Duration: 1500*time.Microsecond + 999*time.Nanosecond, StatusCode: 503}
		f.complete(store.Completion{DeliveryID: c.Delivery.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil, Attempt: a, State: store.DeliveryPending, NextAttemptAt: ts(time.Minute), Now: ts(3 * time.Second)})
		as := f.attempts(c.Delivery.ID)
		if len(as) != 1 {
			t.Fatalf("%d attempts", len(as))
		}
		checkTime(t, "attempt StartedAt", as[0].StartedAt, a.StartedAt)
		if as[0].Duration != 1500*time.Microsecond {
			t.Errorf("attempt Duration = %v, want %v (microsecond precision)", as[0].Duration, 1500*time.Microsecond)
		}
		d = f.getDelivery(c.Delivery.ID)
		checkTime(t, "retry NextAttemptAt", d.NextAttemptAt, ts(time.Minute))
		checkTime(t, "retry UpdatedAt", d.UpdatedAt, ts(3*time.Second))
		checkTime(t, "NextDueAt of the retry", f.nextDueAt(), ts(time.Minute))
		f.expectNoClaim(ts(time.Minute).Truncate(time.Microsecond).Add(-time.Microsecond))
		f.claimOne("w", time.Minute, ts(time.Minute))
	})
}
