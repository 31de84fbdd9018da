package storetest

// Conformance tests of the operations methods: endpoint states, replay,
// deferral, failure streaks, circuit-breaker postponement, notices,
// dead-letter counts, spike alerts, stats and purge.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// ---------------------------------------------------------------------------
// helpers

func (f *fixture) setState(p store.SetEndpointStateParams) (store.Endpoint, int) {
	f.t.Helper()
	e, n, err := f.s.SetEndpointState(f.ctx, p)
	if err != nil {
		f.t.Fatalf("SetEndpointState(%s → %s): %v", p.ID, p.State, err)
	}
	return e, n
}

func (f *fixture) replay(p store.ReplayParams) int {
	f.t.Helper()
	n, err := f.s.ReplayDeliveries(f.ctx, p)
	if err != nil {
		f.t.Fatalf("ReplayDeliveries(%+v): %v", p, err)
	}
	return n
}

// notices returns every pending notice without its outbox id, sorted by
// endpoint id and, for one endpoint, in outbox order.
func (f *fixture) notices() []store.Notice {
	f.t.Helper()
	ns := f.outbox()
	for i := range ns {
		ns[i].ID = 0
	}
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].Endpoint.ID < ns[j].Endpoint.ID })
	return ns
}

// outbox returns every pending notice of an endpoint's state or
// configuration as PendingNotices orders them; the notices of its health
// (endpoint.failing, endpoint.recovered, delivery.dead_lettered), which
// failed attempts add besides, are left out: healthNotices checks those.
func (f *fixture) outbox() []store.Notice {
	f.t.Helper()
	var out []store.Notice
	for _, n := range f.allNotices() {
		switch n.Type {
		case store.NoticeEndpointFailing, store.NoticeEndpointRecovered, store.NoticeDeliveryDeadLettered:
		default:
			out = append(out, n)
		}
	}
	return out
}

// allNotices returns every pending notice as PendingNotices orders them.
func (f *fixture) allNotices() []store.Notice {
	f.t.Helper()
	ns, err := f.s.PendingNotices(f.ctx, 1000)
	if err != nil {
		f.t.Fatalf("PendingNotices: %v", err)
	}
	return ns
}

func (f *fixture) clearNotice(id int64) {
	f.t.Helper()
	if err := f.s.ClearNotices(f.ctx, []int64{id}); err != nil {
		f.t.Fatalf("ClearNotices(%d): %v", id, err)
	}
}

// snap is the snapshot of an endpoint a notice carries.
func snap(e store.Endpoint) store.Endpoint {
	return store.Endpoint{ID: e.ID, Tenant: e.Tenant, URL: e.URL, Kind: e.Kind, State: e.State, StateReason: e.StateReason}
}

// claimFirst claims the single oldest due delivery at now for owner "w".
func (f *fixture) claimFirst(now time.Time) store.Claim {
	f.t.Helper()
	cs := f.claim("w", 1, time.Minute, now)
	if len(cs) != 1 {
		f.t.Fatalf("ClaimDeliveries(limit 1) at %s: got %d claims, want 1", now, len(cs))
	}
	return cs[0]
}

// completeDue claims every delivery due at now and completes each with
// outcome(c) in one batch; it returns the claims, oldest due first.
func (f *fixture) completeDue(now time.Time, outcome func(c store.Claim) store.Completion) []store.Claim {
	f.t.Helper()
	cs := f.claim("w", 1000, time.Hour, now)
	f.complete(mapSlice(cs, outcome)...)
	return cs
}

// attempt is completion with the delivery's endpoint set, as the engine
// sends it.
func attempt(c store.Claim, state store.DeliveryState, now time.Time) store.Completion {
	cp := completion(c, state, now)
	cp.EndpointID = c.Delivery.EndpointID
	return cp
}

// failure is a failed attempt that started at started and was completed at
// now: a retry at next (or a dead letter when next is zero), answered with
// status or, when status is 0, the error class errClass.
func failure(c store.Claim, started, now, next time.Time, status int, errClass string) store.Completion {
	cp := attempt(c, store.DeliveryPending, now)
	cp.Attempt = store.Attempt{StartedAt: started, Duration: time.Second, StatusCode: status, Error: errClass}
	cp.NextAttemptAt = next
	if next.IsZero() {
		cp.State = store.DeliveryDead
	}
	return cp
}

func deferral(c store.Claim, next, now time.Time) store.Completion {
	return store.Completion{
		DeliveryID: c.Delivery.ID, EndpointID: c.Delivery.EndpointID, Owner: c.Delivery.LeaseOwner, LeaseUntil: c.Delivery.LeaseUntil,
		// The attempt and state are ignored for a deferral: garbage on purpose.
		Attempt:       store.Attempt{StartedAt: now, Duration: time.Second, StatusCode: 500, Error: "timeout"},
		State:         store.DeliveryPending,
		NextAttemptAt: next,
		ClientError:   true,
		Deferred:      true,
		Now:           now,
	}
}

func (f *fixture) expectState(id string, want store.DeliveryState) store.Delivery {
	f.t.Helper()
	d := f.getDelivery(id)
	if d.State != want {
		f.t.Errorf("delivery %s: state %s, want %s", id, d.State, want)
	}
	return d
}

func nonZero[K comparable](m map[K]int) map[K]int {
	out := map[K]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func (f *fixture) countDeliveries(state store.DeliveryState) int {
	f.t.Helper()
	return len(f.listDeliveries(store.ListDeliveriesParams{State: state}))
}

func (f *fixture) eventIDs() []string {
	f.t.Helper()
	evs := collect(f.t, 1000, func(cursor string) (store.Page[store.Event], error) {
		return f.s.ListEvents(f.ctx, store.ListEventsParams{ListParams: store.ListParams{Limit: 1000, Cursor: cursor}})
	}, eventID)
	return sorted(idsOf(evs, eventID))
}

// ---------------------------------------------------------------------------
// SetEndpointState

func (s suite) endpointState(t *testing.T) {
	s.run(t, "PauseHoldsPendingUnleased", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		o := f.endpoint("globex")
		f.publish("acme", "file.created", base)
		waitingEv := f.publish("acme", "file.created", at(time.Second)).Event
		otherEv := f.publish("globex", "file.created", at(2*time.Second)).Event
		leased := f.claimOne("w", time.Minute, base) // e's first delivery: in flight
		waiting := f.deliveryFor(waitingEv.ID, e.ID)
		otherID := f.deliveryFor(otherEv.ID, o.ID).ID

		got, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Reason: "paused by owner", Now: at(10 * time.Second)})
		if n != 1 {
			t.Errorf("SetEndpointState(paused) held %d deliveries, want 1 (the leased one is left to its worker)", n)
		}
		want := e
		want.State, want.StateReason, want.UpdatedAt = store.EndpointPaused, "paused by owner", at(10*time.Second)
		diff(t, "SetEndpointState result", want, got)
		diff(t, "GetEndpoint after pause", want, f.getEndpoint(e.ID))

		if d := f.expectState(waiting.ID, store.DeliveryPaused); d.Attempts != 0 || d.LeaseOwner != "" {
			t.Errorf("held delivery: attempts %d, lease %q; want 0, none", d.Attempts, d.LeaseOwner)
		}
		inFlight := f.getDelivery(leased.Delivery.ID)
		if inFlight.State != store.DeliveryPending || inFlight.LeaseOwner != "w" || !inFlight.LeaseUntil.Equal(leased.Delivery.LeaseUntil) {
			t.Errorf("leased delivery after pause: %s leased by %q until %v; want pending leased by w until %v",
				inFlight.State, inFlight.LeaseOwner, inFlight.LeaseUntil, leased.Delivery.LeaseUntil)
		}
		f.expectState(otherID, store.DeliveryPending)

		// New events for the paused endpoint are held.
		res := f.publish("acme", "file.created", at(20*time.Second))
		f.expectState(f.deliveryFor(res.Event.ID, e.ID).ID, store.DeliveryPaused)
		f.expectNextDueAt(at(2 * time.Second)) // only the other tenant's delivery

		// The in-flight attempt fails: its retry is held.
		f.complete(attempt(leased, store.DeliveryPending, at(30*time.Second)))
		if d := f.expectState(leased.Delivery.ID, store.DeliveryPaused); d.LeaseOwner != "" || d.Attempts != 1 {
			t.Errorf("completed in-flight delivery: lease %q, attempts %d; want none, 1", d.LeaseOwner, d.Attempts)
		}
		diff(t, "claimable while paused", []string{otherID}, claimIDs(f.claim("w2", 100, time.Minute, at(time.Hour))))
		if ns := f.notices(); len(ns) != 0 {
			t.Errorf("PendingNotices after a pause without Notice = %+v, want none", ns)
		}
	})
	// Issue 13, point 5: deliveries released together (due at the same
	// time) are claimed in creation order, whatever order they were held
	// or dead-lettered in.
	s.run(t, "ReleasedInCreationOrder", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		var want []string
		for i := range 6 {
			res := f.publish("acme", "file.created", at(time.Duration(i)*time.Second))
			want = append(want, f.deliveryFor(res.Event.ID, e.ID).ID)
		}
		// Claimed and failed in reverse order, then held by a pause while
		// their retries wait.
		cs := f.claim("w", 10, time.Minute, at(10*time.Second))
		slices.Reverse(cs)
		for i, c := range cs {
			f.complete(failure(c, at(11*time.Second+time.Duration(i)*time.Millisecond), at(12*time.Second), at(time.Hour-time.Duration(i)*time.Second), 500, ""))
		}
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Now: at(time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(2 * time.Minute)})
		// One claim returns them in creation order (the engine hands them to
		// its workers in that order), and so do claims of one at a time.
		diff(t, "claim order after release", want, claimIDs(f.claim("w", 10, time.Minute, at(2*time.Minute))))
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Now: at(3 * time.Minute)})
		f.s.RescueExpiredLeases(f.ctx, at(time.Hour))
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(time.Hour)})
		var got []string
		for range want {
			cs := f.claim("w", 1, time.Minute, at(time.Hour))
			if len(cs) != 1 {
				t.Fatalf("claim(limit 1) = %d claims, want 1", len(cs))
			}
			got = append(got, cs[0].Delivery.ID)
		}
		diff(t, "claim order after release, one at a time", want, got)
	})
	// A resume of more held deliveries than one transaction releases
	// (SQLite releases 500 at a time behind waiting publishes) releases
	// every one, counted once, claimed in creation order.
	s.run(t, "ResumeReleasesALargeBacklogInOrder", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Now: base})
		const held = 1203
		var want []string
		for i := range held {
			res := f.publish("acme", "file.created", at(time.Duration(i)*time.Millisecond))
			want = append(want, f.deliveryFor(res.Event.ID, e.ID).ID)
		}
		if _, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(time.Hour)}); n != held {
			t.Fatalf("resume released %d, want %d", n, held)
		}
		var got []string
		for len(got) < held {
			cs := f.claim("w", 100, time.Minute, at(time.Hour))
			if len(cs) == 0 {
				t.Fatalf("claim after %d of %d: none due", len(got), held)
			}
			got = append(got, claimIDs(cs)...)
		}
		diff(t, "claim order after a large resume", want, got)
		if _, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(2 * time.Hour)}); n != 0 {
			t.Errorf("a second resume released %d, want 0", n)
		}
	})
	// Deliveries of one tenant due at the same time are claimed oldest
	// first even when the claim takes fewer than are due, whatever order
	// their rows were last written in (on PostgreSQL, ties in an index are
	// otherwise broken by the rows' physical position).
	s.run(t, "TiesClaimedInCreationOrder", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.endpoint("other") // a second tenant with nothing due
		var want []string
		for i := range 12 {
			res := f.publish("acme", "file.created", at(time.Duration(i)*time.Millisecond))
			want = append(want, f.deliveryFor(res.Event.ID, e.ID).ID)
		}
		cs := f.claim("w", 20, time.Minute, at(time.Second))
		// Fail them one by one in a scrambled order, all due again at once.
		for _, i := range []int{7, 2, 11, 0, 9, 4, 6, 1, 10, 3, 8, 5} {
			f.complete(failure(cs[i], at(2*time.Second), at(2*time.Second), at(time.Minute), 500, ""))
		}
		var got []string
		for range want {
			cs := f.claim("w2", 1, time.Minute, at(time.Minute))
			if len(cs) != 1 {
				t.Fatalf("claim(limit 1) = %d claims, want 1", len(cs))
			}
			got = append(got, cs[0].Delivery.ID)
		}
		diff(t, "claim order of deliveries due together", want, got)
	})
	s.run(t, "PauseTwiceHoldsNothingMore", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", base)
		if _, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Now: at(time.Second)}); n != 2 {
			t.Errorf("first pause held %d, want 2", n)
		}
		got, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Reason: "by operator", Now: at(2 * time.Second)})
		if n != 0 {
			t.Errorf("paused → disabled held %d, want 0 (already held)", n)
		}
		if got.State != store.EndpointDisabled || got.StateReason != "by operator" {
			t.Errorf("endpoint: %s %q, want disabled \"by operator\"", got.State, got.StateReason)
		}
	})
	for _, from := range []store.EndpointState{store.EndpointPaused, store.EndpointDisabled} {
		s.run(t, "EnableReleasesHeldFrom_"+string(from), func(t *testing.T, f *fixture) {
			e := f.endpoint("acme")
			f.publish("acme", "file.created", base)                        // d0: fails, retry in an hour
			f.publish("acme", "file.created", at(time.Second))             // d1: dead letter
			pend := f.publish("acme", "file.created", at(time.Hour)).Event // d2: pending, not yet due
			cs := f.completeDue(at(time.Second), func(c store.Claim) store.Completion {
				if c.Delivery.NextAttemptAt.Equal(base) {
					return failure(c, at(time.Second), at(2*time.Second), at(time.Hour), 503, "")
				}
				return attempt(c, store.DeliveryDead, at(2*time.Second))
			})
			if len(cs) != 2 {
				t.Fatalf("claimed %d, want 2", len(cs))
			}
			retry, dead := cs[0].Delivery.ID, cs[1].Delivery.ID
			pendID := f.deliveryFor(pend.ID, e.ID).ID
			if fs := f.getEndpoint(e.ID).FailingSince; !fs.Equal(at(time.Second)) {
				t.Fatalf("FailingSince after a failure = %v, want %v", fs, at(time.Second))
			}

			if _, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: from, Reason: "held", Now: at(time.Minute)}); n != 2 {
				t.Errorf("SetEndpointState(%s) held %d, want 2 (the retry and the pending one)", from, n)
			}
			held := f.publish("acme", "file.created", at(2*time.Minute)).Event
			heldID := f.deliveryFor(held.ID, e.ID).ID
			for _, id := range []string{retry, pendID, heldID} {
				f.expectState(id, store.DeliveryPaused)
			}
			f.expectNoClaim(at(10 * time.Hour))

			now := at(10 * time.Minute)
			got, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Reason: "resumed by owner", Now: now})
			if n != 3 {
				t.Errorf("SetEndpointState(enabled) released %d, want 3", n)
			}
			if got.State != store.EndpointEnabled || got.StateReason != "resumed by owner" || !got.FailingSince.IsZero() || !got.UpdatedAt.Equal(now) {
				t.Errorf("enabled endpoint: state %s, reason %q, failing since %v, updated %v; want enabled, \"resumed by owner\", zero, %v",
					got.State, got.StateReason, got.FailingSince, got.UpdatedAt, now)
			}
			diff(t, "GetEndpoint after enable", got, f.getEndpoint(e.ID))
			for _, id := range []string{retry, pendID, heldID} {
				d := f.expectState(id, store.DeliveryPending)
				if !d.NextAttemptAt.Equal(now) {
					t.Errorf("released delivery %s due at %v, want now (%v)", id, d.NextAttemptAt, now)
				}
			}
			if d := f.getDelivery(retry); d.Attempts != 1 || d.LastStatusCode != 503 {
				t.Errorf("released retry: attempts %d, last status %d; want its history kept (1, 503)", d.Attempts, d.LastStatusCode)
			}
			f.expectState(dead, store.DeliveryDead)
			f.expectNextDueAt(now)
			f.expectNoClaim(now.Add(-time.Microsecond))
			diff(t, "claimable after enable", sorted([]string{retry, pendID, heldID}), sorted(claimIDs(f.claim("w", 100, time.Minute, now))))
			res := f.publish("acme", "file.created", at(11*time.Minute))
			f.expectState(f.deliveryFor(res.Event.ID, e.ID).ID, store.DeliveryPending)
		})
	}
	s.run(t, "NoticeOnlyWhenSet", func(t *testing.T, f *fixture) {
		e1 := f.endpoint("acme")
		e2 := f.endpoint("acme")
		e3 := f.endpoint("globex")
		f.setState(store.SetEndpointStateParams{ID: e1.ID, State: store.EndpointPaused, Reason: "paused by owner", Now: at(time.Second)})
		f.setState(store.SetEndpointStateParams{ID: e2.ID, State: store.EndpointEnabled, Now: at(time.Second)})
		if ns := f.notices(); len(ns) != 0 {
			t.Fatalf("PendingNotices without any Notice set = %+v, want none", ns)
		}
		f.setState(store.SetEndpointStateParams{ID: e1.ID, State: store.EndpointDisabled, Reason: "by operator", Notice: "endpoint.disabled", Now: at(time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: e2.ID, State: store.EndpointDisabled, Reason: "by operator", Notice: "endpoint.disabled", Now: at(2 * time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: e3.ID, State: store.EndpointEnabled, Reason: "re-enabled", Notice: "endpoint.enabled", Now: at(3 * time.Minute)})
		want := []store.Notice{
			{Endpoint: snap(f.getEndpoint(e1.ID)), Type: "endpoint.disabled", At: at(time.Minute)},
			{Endpoint: snap(f.getEndpoint(e2.ID)), Type: "endpoint.disabled", At: at(2 * time.Minute)},
			{Endpoint: snap(f.getEndpoint(e3.ID)), Type: "endpoint.enabled", At: at(3 * time.Minute)},
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Endpoint.ID < want[j].Endpoint.ID })
		diff(t, "PendingNotices", want, f.notices())
		ns, err := f.s.PendingNotices(f.ctx, 2)
		if err != nil {
			t.Fatalf("PendingNotices(2): %v", err)
		}
		if len(ns) != 2 {
			t.Errorf("PendingNotices(limit 2) returned %d, want 2", len(ns))
		}
	})
	s.run(t, "UnknownIsNotFound", func(t *testing.T, f *fixture) {
		_, _, err := f.s.SetEndpointState(f.ctx, store.SetEndpointStateParams{ID: "ep_unknown", State: store.EndpointPaused, Now: base})
		wantErr(t, "SetEndpointState(unknown)", err, store.ErrNotFound)
		_, _, err = f.s.SetEndpointState(f.ctx, store.SetEndpointStateParams{ID: "ep_unknown", State: store.EndpointEnabled, Notice: "endpoint.enabled", Now: base})
		wantErr(t, "SetEndpointState(unknown, enabled)", err, store.ErrNotFound)
		if ns := f.notices(); len(ns) != 0 {
			t.Errorf("PendingNotices = %+v, want none", ns)
		}
	})
	s.run(t, "InvalidStateIsInvalid", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		res := f.publish("acme", "file.created", base)
		for _, st := range []store.EndpointState{"", "deleted", "Paused", "pending"} {
			_, _, err := f.s.SetEndpointState(f.ctx, store.SetEndpointStateParams{ID: e.ID, State: st, Reason: "x", Notice: "endpoint.x", Now: at(time.Second)})
			wantRefusal(t, fmt.Sprintf("SetEndpointState(%q)", st), err, store.BadEndpointState(st))
		}
		diff(t, "endpoint after invalid state changes", e, f.getEndpoint(e.ID))
		f.expectState(f.deliveryFor(res.Event.ID, e.ID).ID, store.DeliveryPending)
		if ns := f.notices(); len(ns) != 0 {
			t.Errorf("PendingNotices = %+v, want none", ns)
		}
	})
}

// ---------------------------------------------------------------------------
// ReplayDeliveries

// dlq is a dead-letter scenario of tenant acme: endpoint e received events
// 0–3 (file.created, file.deleted, file.created, file.created) dead-lettered
// at 1 m, 2 m, 3 m and succeeded at 3 m, plus one pending delivery due in an
// hour; endpoint o has a dead letter of each of the four events (at 1 m).
type dlq struct {
	e, o      store.Endpoint
	eDlv      []string // e's deliveries of events 0–3
	oDlv      []string // o's deliveries of events 0–3
	ePending  string   // e's pending delivery
	replayNow time.Time
}

func (f *fixture) deadLetterScenario() dlq {
	f.t.Helper()
	sc := dlq{e: f.endpoint("acme", "file.*"), o: f.endpoint("acme", "file.*"), replayNow: at(30 * time.Minute)}
	types := []string{"file.created", "file.deleted", "file.created", "file.created"}
	index := map[string]int{}
	var evs []string
	for i, typ := range types {
		ev := f.publish("acme", typ, at(time.Duration(i)*time.Second)).Event
		index[ev.ID] = i
		evs = append(evs, ev.ID)
	}
	pend := f.publish("acme", "file.created", at(time.Hour)).Event
	cs := f.completeDue(at(10*time.Second), func(c store.Claim) store.Completion {
		if c.Delivery.EndpointID == sc.o.ID {
			return attempt(c, store.DeliveryDead, at(time.Minute))
		}
		switch i := index[c.Delivery.EventID]; i {
		case 3:
			return attempt(c, store.DeliverySucceeded, at(3*time.Minute))
		default:
			return attempt(c, store.DeliveryDead, at(time.Duration(i+1)*time.Minute))
		}
	})
	if len(cs) != 8 {
		f.t.Fatalf("scenario: claimed %d, want 8", len(cs))
	}
	for _, ev := range evs {
		sc.eDlv = append(sc.eDlv, f.deliveryFor(ev, sc.e.ID).ID)
		sc.oDlv = append(sc.oDlv, f.deliveryFor(ev, sc.o.ID).ID)
	}
	sc.ePending = f.deliveryFor(pend.ID, sc.e.ID).ID
	return sc
}

func (s suite) replay(t *testing.T) {
	// An endpoint's replay of more dead letters than one transaction
	// moves (SQLite replays 500 at a time behind waiting publishes) moves
	// every one once, within the filters, claimed in creation order; the
	// succeeded ones asked for too are replayed after them.
	s.run(t, "LargeEndpointReplay", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		const dead, succeeded = 1103, 7
		var want, early []string
		for i := range dead + succeeded {
			res := f.publish("acme", "file.created", at(time.Duration(i)*time.Millisecond))
			want = append(want, f.deliveryFor(res.Event.ID, e.ID).ID)
		}
		cs := f.claim("w", dead+succeeded, time.Hour, at(time.Minute))
		var done []store.Completion
		for i, c := range cs {
			// The first 3 die a minute earlier than the rest: left out by since.
			when := at(2 * time.Minute)
			if i < 3 {
				when = at(time.Minute + time.Second)
				early = append(early, c.Delivery.ID)
			}
			if i < dead {
				done = append(done, failure(c, when, when, time.Time{}, 500, ""))
			} else {
				done = append(done, attempt(c, store.DeliverySucceeded, when))
			}
		}
		f.complete(done...)
		now := at(time.Hour)
		n := f.replay(store.ReplayParams{EndpointID: e.ID, States: []store.DeliveryState{store.DeliveryDead, store.DeliverySucceeded}, Since: at(2 * time.Minute), Now: now})
		if n != dead+succeeded-3 {
			t.Fatalf("replay of %d dead letters and %d successes since the later ones = %d, want %d", dead, succeeded, n, dead+succeeded-3)
		}
		var got []string
		for {
			cs := f.claim("w2", 200, time.Minute, now)
			if len(cs) == 0 {
				break
			}
			got = append(got, claimIDs(cs)...)
		}
		diff(t, "claim order after a large replay", want[3:], got)
		for _, id := range early {
			f.expectState(id, store.DeliveryDead)
		}
		if n := f.replay(store.ReplayParams{EndpointID: e.ID, Since: at(2 * time.Minute), Now: at(2 * time.Hour)}); n != 0 {
			t.Errorf("a second replay = %d, want 0", n)
		}
	})
	s.run(t, "DeadLetterBackToPending", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		ev := f.publish("acme", "file.created", base).Event
		c := f.claimOne("w", time.Minute, base)
		cp := failure(c, base, at(time.Second), at(30*time.Second), 400, "")
		cp.ClientError = true
		f.complete(cp)
		c = f.claimOne("w", time.Minute, at(30*time.Second))
		cp = failure(c, at(30*time.Second), at(31*time.Second), time.Time{}, 404, "")
		cp.ClientError = true
		f.complete(cp)
		before := f.expectState(c.Delivery.ID, store.DeliveryDead)
		if before.Attempts != 2 || before.ClientErrors != 2 || before.ReplayBase != 0 {
			t.Fatalf("dead letter: attempts %d, client errors %d, replay base %d; want 2, 2, 0", before.Attempts, before.ClientErrors, before.ReplayBase)
		}
		history := f.attempts(c.Delivery.ID)

		now := at(time.Hour)
		if n := f.replay(store.ReplayParams{DeliveryID: c.Delivery.ID, Now: now}); n != 1 {
			t.Fatalf("ReplayDeliveries(dead delivery) = %d, want 1", n)
		}
		got := f.getDelivery(c.Delivery.ID)
		want := before
		want.State, want.NextAttemptAt, want.UpdatedAt = store.DeliveryPending, now, now
		want.ClientErrors, want.ReplayBase = 0, 2
		want.LastStatusCode, want.LastError = got.LastStatusCode, got.LastError // not specified
		diff(t, "replayed delivery", want, got)
		diff(t, "attempt history after replay", history, f.attempts(c.Delivery.ID))
		diff(t, "deliveries of the event after replay (no new row)", []string{c.Delivery.ID}, idsOf(f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID}), deliveryID))
		diff(t, "deliveries of the endpoint after replay", []string{c.Delivery.ID}, idsOf(f.listDeliveries(store.ListDeliveriesParams{EndpointID: e.ID}), deliveryID))

		// Replaying what is already pending does nothing.
		if n := f.replay(store.ReplayParams{DeliveryID: c.Delivery.ID, Now: at(2 * time.Hour)}); n != 0 {
			t.Errorf("ReplayDeliveries(pending delivery) = %d, want 0", n)
		}
		if n := f.replay(store.ReplayParams{EndpointID: e.ID, Now: at(2 * time.Hour)}); n != 0 {
			t.Errorf("ReplayDeliveries(endpoint, nothing dead) = %d, want 0", n)
		}
		diff(t, "pending delivery after a second replay", got, f.getDelivery(c.Delivery.ID))

		f.expectNextDueAt(now)
		f.expectNoClaim(now.Add(-time.Microsecond))
		again := f.claimOne("w", time.Minute, now)
		if again.Delivery.ID != c.Delivery.ID || again.Event.ID != ev.ID || again.Delivery.ReplayBase != 2 {
			t.Fatalf("claim after replay: delivery %s, event %s, replay base %d; want %s, %s, 2", again.Delivery.ID, again.Event.ID, again.Delivery.ReplayBase, c.Delivery.ID, ev.ID)
		}
		f.complete(attempt(again, store.DeliverySucceeded, at(time.Hour+time.Second)))
		d := f.getDelivery(c.Delivery.ID)
		if d.State != store.DeliverySucceeded || d.Attempts != 3 || d.ReplayBase != 2 {
			t.Errorf("after the replayed attempt: state %s, attempts %d, replay base %d; want succeeded, 3, 2", d.State, d.Attempts, d.ReplayBase)
		}
		if as := f.attempts(c.Delivery.ID); len(as) != 3 || as[2].Number != 3 || as[2].StatusCode != 200 {
			t.Errorf("attempts after the replayed attempt = %+v, want 3 numbered on", as)
		}
		// Succeeded is not replayed by default.
		if n := f.replay(store.ReplayParams{DeliveryID: c.Delivery.ID, Now: at(3 * time.Hour)}); n != 0 {
			t.Errorf("ReplayDeliveries(succeeded, default states) = %d, want 0", n)
		}
	})

	cases := []struct {
		name string
		p    store.ReplayParams // EndpointID filled in
		want []int              // e's events replayed
	}{
		{"EndpointDeadOnly", store.ReplayParams{}, []int{0, 1, 2}},
		{"EndpointSince", store.ReplayParams{Since: at(2 * time.Minute)}, []int{1, 2}},
		{"EndpointSinceAfterAll", store.ReplayParams{Since: at(3*time.Minute + time.Microsecond)}, nil},
		{"EndpointEventType", store.ReplayParams{EventType: "file.deleted"}, []int{1}},
		{"EndpointSinceAndEventType", store.ReplayParams{Since: at(2 * time.Minute), EventType: "file.created"}, []int{2}},
		{"EndpointUnknownEventType", store.ReplayParams{EventType: "invoice.paid"}, nil},
		{"EndpointExplicitDead", store.ReplayParams{States: []store.DeliveryState{store.DeliveryDead}}, []int{0, 1, 2}},
		{"EndpointExplicitSucceeded", store.ReplayParams{States: []store.DeliveryState{store.DeliverySucceeded}}, []int{3}},
		{"EndpointDeadAndSucceeded", store.ReplayParams{States: []store.DeliveryState{store.DeliverySucceeded, store.DeliveryDead}}, []int{0, 1, 2, 3}},
		{"EndpointSucceededSince", store.ReplayParams{States: []store.DeliveryState{store.DeliverySucceeded}, Since: at(3 * time.Minute)}, []int{3}},
		// Issue 13, point 5: until bounds the window (exclusive).
		{"EndpointUntil", store.ReplayParams{Until: at(2 * time.Minute)}, []int{0}},
		{"EndpointSinceUntil", store.ReplayParams{Since: at(2 * time.Minute), Until: at(3 * time.Minute)}, []int{1}},
		{"EndpointUntilAfterAll", store.ReplayParams{Until: at(3*time.Minute + time.Microsecond)}, []int{0, 1, 2}},
	}
	for _, c := range cases {
		s.run(t, "Filters/"+c.name, func(t *testing.T, f *fixture) {
			sc := f.deadLetterScenario()
			before := map[string]store.Delivery{}
			for _, id := range append(append(slices.Clone(sc.eDlv), sc.oDlv...), sc.ePending) {
				before[id] = f.getDelivery(id)
			}
			p := c.p
			p.EndpointID, p.Now = sc.e.ID, sc.replayNow
			if n := f.replay(p); n != len(c.want) {
				t.Errorf("ReplayDeliveries = %d, want %d", n, len(c.want))
			}
			replayed := map[string]bool{}
			for _, i := range c.want {
				replayed[sc.eDlv[i]] = true
			}
			for id, b := range before {
				got := f.getDelivery(id)
				if !replayed[id] {
					diff(t, "delivery not replayed "+id, b, got)
					continue
				}
				if got.State != store.DeliveryPending || !got.NextAttemptAt.Equal(sc.replayNow) || got.ReplayBase != b.Attempts ||
					got.Attempts != b.Attempts || got.ClientErrors != 0 || got.EventID != b.EventID {
					t.Errorf("replayed delivery %s = %+v, want pending due %v with replay base %d", id, got, sc.replayNow, b.Attempts)
				}
				if as := f.attempts(id); len(as) != b.Attempts {
					t.Errorf("replayed delivery %s has %d attempts, want its %d kept", id, len(as), b.Attempts)
				}
			}
			var wantClaims []string
			for id := range replayed {
				wantClaims = append(wantClaims, id)
			}
			diff(t, "claimable at replay time", sorted(wantClaims), sorted(claimIDs(f.claim("w", 100, time.Minute, sc.replayNow))))
		})
	}

	s.run(t, "HeldWhenEndpointNotEnabled", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", at(time.Second))
		cs := f.claim("w", 10, time.Minute, at(time.Second))
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		f.complete(attempt(cs[0], store.DeliveryDead, at(2*time.Second)))
		gone := failure(cs[1], at(2*time.Second), at(3*time.Second), time.Time{}, 410, "")
		gone.DisableEndpoint, gone.DisableReason = true, "gone"
		f.complete(gone)
		if st := f.getEndpoint(e.ID).State; st != store.EndpointDisabled {
			t.Fatalf("endpoint after 410: %s, want disabled", st)
		}
		if n := f.replay(store.ReplayParams{DeliveryID: cs[0].Delivery.ID, Now: at(time.Minute)}); n != 1 {
			t.Errorf("ReplayDeliveries(delivery of a disabled endpoint) = %d, want 1", n)
		}
		if n := f.replay(store.ReplayParams{EndpointID: e.ID, Now: at(2 * time.Minute)}); n != 1 {
			t.Errorf("ReplayDeliveries(disabled endpoint) = %d, want 1", n)
		}
		for _, c := range cs {
			if d := f.expectState(c.Delivery.ID, store.DeliveryPaused); d.ReplayBase != 1 || d.ClientErrors != 0 {
				t.Errorf("held replay %s: replay base %d, client errors %d; want 1, 0", d.ID, d.ReplayBase, d.ClientErrors)
			}
		}
		f.expectNoClaim(at(time.Hour))
		f.expectNextDueAt(time.Time{})
		if n := f.replay(store.ReplayParams{EndpointID: e.ID, Now: at(3 * time.Minute)}); n != 0 {
			t.Errorf("ReplayDeliveries(held ones) = %d, want 0", n)
		}

		// Enabled again: released. Then dead again and paused by its owner.
		if _, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(time.Hour)}); n != 2 {
			t.Errorf("enable released %d, want 2", n)
		}
		if got := f.completeDue(at(time.Hour), func(c store.Claim) store.Completion { return attempt(c, store.DeliveryDead, at(time.Hour+time.Second)) }); len(got) != 2 {
			t.Fatalf("claimed %d after enable, want 2", len(got))
		}
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Now: at(2 * time.Hour)})
		if n := f.replay(store.ReplayParams{EndpointID: e.ID, Now: at(3 * time.Hour)}); n != 2 {
			t.Errorf("ReplayDeliveries(paused endpoint) = %d, want 2", n)
		}
		for _, c := range cs {
			if d := f.expectState(c.Delivery.ID, store.DeliveryPaused); d.ReplayBase != 2 {
				t.Errorf("held replay %s: replay base %d, want 2", d.ID, d.ReplayBase)
			}
		}
		f.expectNoClaim(at(4 * time.Hour))
	})
	s.run(t, "Errors", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		c := f.claimOne("w", time.Minute, base)
		f.complete(attempt(c, store.DeliveryDead, at(time.Second)))
		before := f.getDelivery(c.Delivery.ID)
		now := at(time.Hour)
		for _, tc := range []struct {
			name   string
			p      store.ReplayParams
			target error
		}{
			{"unknown delivery", store.ReplayParams{DeliveryID: "dlv_unknown"}, store.ErrNotFound},
			{"unknown endpoint", store.ReplayParams{EndpointID: "ep_unknown"}, store.ErrNotFound},
			{"both ids", store.ReplayParams{DeliveryID: c.Delivery.ID, EndpointID: e.ID}, store.BadReplayTarget()},
			{"neither id", store.ReplayParams{}, store.BadReplayTarget()},
			{"pending state", store.ReplayParams{DeliveryID: c.Delivery.ID, States: []store.DeliveryState{store.DeliveryPending}}, store.NotReplayable(store.DeliveryPending)},
			{"paused state", store.ReplayParams{EndpointID: e.ID, States: []store.DeliveryState{store.DeliveryPaused}}, store.NotReplayable(store.DeliveryPaused)},
			{"dead and pending", store.ReplayParams{EndpointID: e.ID, States: []store.DeliveryState{store.DeliveryDead, store.DeliveryPending}}, store.NotReplayable(store.DeliveryPending)},
			{"unknown state", store.ReplayParams{DeliveryID: c.Delivery.ID, States: []store.DeliveryState{"gone"}}, store.NotReplayable("gone")},
		} {
			tc.p.Now = now
			n, err := f.s.ReplayDeliveries(f.ctx, tc.p)
			if store.CodeOf(tc.target) == store.CodeNotFound {
				wantErr(t, "ReplayDeliveries("+tc.name+")", err, tc.target)
			} else {
				wantRefusal(t, "ReplayDeliveries("+tc.name+")", err, tc.target)
			}
			if n != 0 {
				t.Errorf("ReplayDeliveries(%s) = %d with an error, want 0", tc.name, n)
			}
		}
		diff(t, "dead letter after failed replays", before, f.getDelivery(c.Delivery.ID))
	})
}

func dlc(endpointID, tenant string, n int) store.DeadLetterCount {
	return store.DeadLetterCount{EndpointID: endpointID, Tenant: tenant, Count: n}
}

// ---------------------------------------------------------------------------
// Completion.Deferred

func (s suite) deferred(t *testing.T) {
	s.run(t, "MovesWithoutAttempt", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		c := f.claimOne("w", time.Minute, base)
		f.complete(deferral(c, at(45*time.Second), at(time.Second)))
		d := f.getDelivery(c.Delivery.ID)
		if d.State != store.DeliveryPending || d.Attempts != 0 || d.ClientErrors != 0 || d.LastStatusCode != 0 || d.LastError != "" ||
			!d.NextAttemptAt.Equal(at(45*time.Second)) || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() {
			t.Errorf("deferred delivery = %+v, want pending, no attempt, due %v, unleased", d, at(45*time.Second))
		}
		if as := f.attempts(c.Delivery.ID); len(as) != 0 {
			t.Errorf("deferral recorded attempts %+v, want none", as)
		}
		if ep := f.getEndpoint(e.ID); !ep.FailingSince.IsZero() || ep.State != store.EndpointEnabled {
			t.Errorf("endpoint after a deferral: state %s, failing since %v; want enabled, zero", ep.State, ep.FailingSince)
		}
		f.expectNextDueAt(at(45 * time.Second))
		f.expectNoClaim(at(45*time.Second - time.Microsecond))
		again := f.claimOne("w2", time.Minute, at(45*time.Second))
		if again.Delivery.ID != c.Delivery.ID || again.Delivery.Attempts != 0 {
			t.Fatalf("claim after deferral = %+v", again.Delivery)
		}
		f.complete(attempt(again, store.DeliverySucceeded, at(46*time.Second)))
		if as := f.attempts(c.Delivery.ID); len(as) != 1 || as[0].Number != 1 {
			t.Errorf("attempts after the real attempt = %+v, want one numbered 1", as)
		}
	})
	s.run(t, "StaleOwnerIgnored", func(t *testing.T, f *fixture) {
		f.seed(1, 1, base)
		old := f.claimOne("a", 30*time.Second, base)
		f.rescue(at(time.Minute))
		cur := f.claimOne("b", 30*time.Second, at(time.Minute))
		before := f.getDelivery(cur.Delivery.ID)
		f.complete(deferral(old, at(time.Hour), at(61*time.Second)))
		diff(t, "delivery after a stale deferral", before, f.getDelivery(cur.Delivery.ID))
		if as := f.attempts(cur.Delivery.ID); len(as) != 0 {
			t.Errorf("stale deferral recorded attempts %+v", as)
		}
		// Unleased (rescued, not reclaimed) is ignored too.
		f.rescue(at(2 * time.Minute))
		before = f.getDelivery(cur.Delivery.ID)
		f.complete(deferral(cur, at(time.Hour), at(121*time.Second)))
		diff(t, "unleased delivery after a deferral", before, f.getDelivery(cur.Delivery.ID))
	})
	s.run(t, "OfPausedEndpointIsHeld", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		c := f.claimOne("w", time.Minute, base)
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointPaused, Now: at(time.Second)})
		f.complete(deferral(c, at(time.Minute), at(2*time.Second)))
		if d := f.getDelivery(c.Delivery.ID); d.State != store.DeliveryPaused || d.LeaseOwner != "" || d.Attempts != 0 {
			t.Errorf("deferred delivery of a paused endpoint: state %s, lease %q, attempts %d; want paused, none, 0", d.State, d.LeaseOwner, d.Attempts)
		}
		f.expectNoClaim(at(time.Hour))
		if _, n := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(2 * time.Hour)}); n != 1 {
			t.Errorf("enable released %d, want 1", n)
		}
		f.claimOne("w", time.Minute, at(2*time.Hour))
	})
}

// ---------------------------------------------------------------------------
// Failure streak

func (s suite) failureStreak(t *testing.T) {
	s.run(t, "FailureStartsSuccessEnds", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		for i := range 4 {
			f.publish("acme", "file.created", at(time.Duration(i)*time.Second))
		}
		failingSince := func(what string, want time.Time) {
			t.Helper()
			if got := f.getEndpoint(e.ID).FailingSince; !got.Equal(want) {
				t.Errorf("FailingSince %s = %v, want %v", what, got, want)
			}
		}
		failingSince("of a new endpoint", time.Time{})
		c := f.claimFirst(at(time.Minute))
		f.complete(failure(c, at(time.Minute), at(time.Minute+time.Second), at(100*time.Hour), 503, ""))
		failingSince("after the first failure", at(time.Minute))
		c = f.claimFirst(at(2 * time.Minute))
		f.complete(failure(c, at(2*time.Minute), at(2*time.Minute+10*time.Second), at(100*time.Hour), 0, "timeout"))
		failingSince("after a second failure", at(time.Minute))
		c = f.claimFirst(at(3 * time.Minute))
		f.complete(failure(c, at(3*time.Minute), at(3*time.Minute+time.Second), time.Time{}, 500, ""))
		failingSince("after a dead letter", at(time.Minute))
		if st := f.getEndpoint(e.ID).State; st != store.EndpointEnabled {
			t.Errorf("endpoint without DisableAfter: %s, want enabled", st)
		}
		c = f.claimFirst(at(4 * time.Minute))
		f.complete(attempt(c, store.DeliverySucceeded, at(4*time.Minute)))
		failingSince("after a success", time.Time{})
		c = f.claimFirst(at(100 * time.Hour))
		f.complete(failure(c, at(100*time.Hour), at(100*time.Hour+time.Second), at(200*time.Hour), 502, ""))
		failingSince("after a new failure", at(100*time.Hour))
		if st := f.getEndpoint(e.ID).State; st != store.EndpointEnabled {
			t.Errorf("endpoint failing 100 h without DisableAfter: %s, want enabled", st)
		}
	})
	// Issue 13, point 4: three failures, a quiet period past DisableAfter,
	// then one more failure does not disable the endpoint (4 failures <
	// DisableMinFailures 5); the fifth failed attempt of the streak does.
	s.run(t, "DisableNeedsMinFailures", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		for i := range 3 {
			f.publish("acme", "file.created", at(time.Duration(i)*time.Second))
		}
		fail := func(c store.Claim, started time.Time) {
			t.Helper()
			cp := failure(c, started, started.Add(time.Second), time.Time{}, 503, "")
			cp.DisableAfter, cp.DisableMinFailures = time.Hour, 5
			f.complete(cp)
		}
		for i := range 3 {
			fail(f.claimFirst(at(time.Minute+time.Duration(i)*time.Second)), at(time.Minute+time.Duration(i)*time.Second))
		}
		// A week later, one failure: past DisableAfter, but 4 failures.
		week := 7 * 24 * time.Hour
		f.publish("acme", "file.created", at(week))
		fail(f.claimFirst(at(week)), at(week))
		if ep := f.getEndpoint(e.ID); ep.State != store.EndpointEnabled || !ep.FailingSince.Equal(at(time.Minute)) {
			t.Fatalf("after a quiet week and one failure: %s (failing since %v), want enabled, failing since %v", ep.State, ep.FailingSince, at(time.Minute))
		}
		if ns := f.notices(); len(ns) != 0 {
			t.Fatalf("notices: %+v, want none", ns)
		}
		f.publish("acme", "file.created", at(week+time.Minute))
		fail(f.claimFirst(at(week+time.Minute)), at(week+time.Minute))
		if ep := f.getEndpoint(e.ID); ep.State != store.EndpointDisabled {
			t.Fatalf("after the fifth failure: %s, want disabled", ep.State)
		}
		// A success ends the streak and its count: after enabling, four
		// failures past DisableAfter do not disable it again.
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(week + time.Hour)})
		for i := range 4 {
			now := at(week + 2*time.Hour + time.Duration(i)*time.Hour)
			f.publish("acme", "file.created", now)
			fail(f.claimFirst(now), now)
		}
		if ep := f.getEndpoint(e.ID); ep.State != store.EndpointEnabled {
			t.Fatalf("four failures over 3 h of a new streak: %s, want enabled", ep.State)
		}
	})
	for _, tc := range []struct {
		name     string
		status   int
		errClass string
		inReason string
	}{
		{"Status", 503, "", "503"},
		{"Error", 0, "timeout", "timeout"},
	} {
		s.run(t, "DisableAfter"+tc.name, func(t *testing.T, f *fixture) {
			const after = 120 * time.Hour
			e := f.endpoint("acme")
			g := f.endpoint("globex")
			f.publish("acme", "file.created", base)
			waiting := f.publish("acme", "file.created", at(500*time.Hour)).Event // pending, due later
			fail := func(started time.Time, next time.Time) {
				t.Helper()
				c := f.claimFirst(started)
				cp := failure(c, started, started.Add(time.Second), next, tc.status, tc.errClass)
				cp.DisableAfter = after
				f.complete(cp)
			}
			fail(base, at(60*time.Hour))
			fail(at(60*time.Hour), at(119*time.Hour))
			fail(at(119*time.Hour), at(120*time.Hour)) // a streak of 119 h
			ep := f.getEndpoint(e.ID)
			if ep.State != store.EndpointEnabled || !ep.FailingSince.Equal(base) {
				t.Fatalf("after 119 h of failures: state %s, failing since %v; want enabled, %v", ep.State, ep.FailingSince, base)
			}
			if ns := f.notices(); len(ns) != 0 {
				t.Fatalf("notices before the disable: %+v", ns)
			}
			fail(at(120*time.Hour), at(121*time.Hour)) // 120 h
			now := at(120*time.Hour + time.Second)
			ep = f.getEndpoint(e.ID)
			if ep.State != store.EndpointDisabled || !strings.Contains(ep.StateReason, tc.inReason) {
				t.Fatalf("after 120 h of failures: state %s, reason %q; want disabled, a reason naming %q", ep.State, ep.StateReason, tc.inReason)
			}
			diff(t, "PendingNotices after the disable", []store.Notice{{
				Endpoint: snap(ep), Type: "endpoint.disabled", At: now, LastStatusCode: tc.status, LastError: tc.errClass,
			}}, f.notices())
			d0 := f.listDeliveries(store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryPaused})
			if len(d0) != 2 {
				t.Errorf("held deliveries of the disabled endpoint: %d, want 2 (its retry and its pending one)", len(d0))
			}
			f.expectState(f.deliveryFor(waiting.ID, e.ID).ID, store.DeliveryPaused)
			res := f.publish("acme", "file.created", at(121*time.Hour))
			f.expectState(f.deliveryFor(res.Event.ID, e.ID).ID, store.DeliveryPaused)
			other := f.publish("globex", "file.created", at(121*time.Hour)).Event
			diff(t, "claimable after the disable", []string{f.deliveryFor(other.ID, g.ID).ID}, claimIDs(f.claim("w", 100, time.Minute, at(1000*time.Hour))))
		})
	}
	s.run(t, "FailingSinceRoundTrip", func(t *testing.T, f *fixture) {
		e := newEndpoint("acme")
		e.FailingSince = at(-48 * time.Hour)
		diff(t, "CreateEndpoint result", e, f.createEndpoint(e))
		diff(t, "GetEndpoint", e, f.getEndpoint(e.ID))
		pg, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "acme", ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEndpoints: %v", err)
		}
		diff(t, "ListEndpoints", []store.Endpoint{e}, pg.Data)
		f.publish("acme", "file.created", base)
		c := f.claimOne("w", time.Minute, base)
		diff(t, "claimed endpoint", e, c.Endpoint)
		// A failure keeps the streak's start; a success ends it.
		f.complete(failure(c, base, at(time.Second), at(time.Minute), 500, ""))
		if got := f.getEndpoint(e.ID).FailingSince; !got.Equal(e.FailingSince) {
			t.Errorf("FailingSince after a failure = %v, want %v", got, e.FailingSince)
		}
		c = f.claimOne("w", time.Minute, at(time.Minute))
		f.complete(attempt(c, store.DeliverySucceeded, at(time.Minute)))
		if got := f.getEndpoint(e.ID).FailingSince; !got.IsZero() {
			t.Errorf("FailingSince after a success = %v, want zero", got)
		}
	})
	s.run(t, "SuccessResetsStreak", func(t *testing.T, f *fixture) {
		const after = 120 * time.Hour
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		c := f.claimFirst(base)
		cp := failure(c, base, at(time.Second), at(72*time.Hour), 500, "")
		cp.DisableAfter = after
		f.complete(cp)
		c = f.claimFirst(at(72 * time.Hour))
		cp = attempt(c, store.DeliverySucceeded, at(72*time.Hour))
		cp.DisableAfter = after
		f.complete(cp)
		f.publish("acme", "file.created", at(96*time.Hour))
		c = f.claimFirst(at(96 * time.Hour))
		cp = failure(c, at(96*time.Hour), at(96*time.Hour+time.Second), at(125*time.Hour), 500, "")
		cp.DisableAfter = after
		f.complete(cp)
		c = f.claimFirst(at(125 * time.Hour))
		cp = failure(c, at(125*time.Hour), at(125*time.Hour+time.Second), at(130*time.Hour), 500, "")
		cp.DisableAfter = after
		f.complete(cp)
		ep := f.getEndpoint(e.ID)
		if ep.State != store.EndpointEnabled || !ep.FailingSince.Equal(at(96*time.Hour)) {
			t.Errorf("failing 125 h with a success at 72 h: state %s, failing since %v; want enabled, %v", ep.State, ep.FailingSince, at(96*time.Hour))
		}
	})
	s.run(t, "NewURLStartsNewStreak", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		c := f.claimFirst(base)
		f.complete(failure(c, base, at(time.Second), at(121*time.Hour), 503, ""))
		same, desc := e.URL, "renamed"
		got, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, URL: &same, Description: &desc, Now: at(time.Hour)})
		if err != nil {
			t.Fatalf("UpdateEndpoint(same URL): %v", err)
		}
		if !got.FailingSince.Equal(base) || !f.getEndpoint(e.ID).FailingSince.Equal(base) {
			t.Errorf("FailingSince after an update with the same URL = %v, want %v", got.FailingSince, base)
		}
		moved := "https://moved.example.com/hooks"
		got, err = f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, URL: &moved, Now: at(2 * time.Hour)})
		if err != nil {
			t.Fatalf("UpdateEndpoint(new URL): %v", err)
		}
		if !got.FailingSince.IsZero() || !f.getEndpoint(e.ID).FailingSince.IsZero() {
			t.Errorf("FailingSince after a URL change = %v, want zero", got.FailingSince)
		}
		c = f.claimFirst(at(121 * time.Hour))
		cp := failure(c, at(121*time.Hour), at(121*time.Hour+time.Second), at(122*time.Hour), 503, "")
		cp.DisableAfter = 120 * time.Hour
		f.complete(cp)
		ep := f.getEndpoint(e.ID)
		if ep.State != store.EndpointEnabled || !ep.FailingSince.Equal(at(121*time.Hour)) {
			t.Errorf("first failure at the new URL: state %s, failing since %v; want enabled, %v", ep.State, ep.FailingSince, at(121*time.Hour))
		}
	})
	s.run(t, "GoneRecordsNotice", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", at(time.Second))
		cs := f.claim("w", 10, time.Minute, at(time.Second))
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		f.complete(failure(cs[0], at(time.Second), at(2*time.Second), at(time.Hour), 503, ""))
		gone := failure(cs[1], at(2*time.Second), at(3*time.Second), time.Time{}, 410, "")
		gone.DisableEndpoint, gone.DisableReason = true, "gone"
		f.complete(gone)
		ep := f.getEndpoint(e.ID)
		if ep.State != store.EndpointDisabled || ep.StateReason != "gone" {
			t.Fatalf("endpoint after 410: %s %q, want disabled gone", ep.State, ep.StateReason)
		}
		f.expectState(cs[0].Delivery.ID, store.DeliveryPaused)
		disabled := store.Notice{Endpoint: snap(ep), Type: "endpoint.disabled", At: at(3 * time.Second), LastStatusCode: 410}
		diff(t, "PendingNotices after 410", []store.Notice{disabled}, f.notices())
		// Re-enabled before the notice was emitted: the streak is over, and
		// both changes wait in the outbox, in order (issue 13, point 6: the
		// single notice column lost endpoint.disabled).
		got, _ := f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Reason: "fixed", Notice: "endpoint.enabled", Now: at(time.Hour)})
		if !got.FailingSince.IsZero() {
			t.Errorf("FailingSince after enable = %v, want zero", got.FailingSince)
		}
		enabled := store.Notice{Endpoint: snap(got), Type: "endpoint.enabled", At: at(time.Hour), LastStatusCode: 410}
		diff(t, "PendingNotices after enable", []store.Notice{disabled, enabled}, f.notices())
		// An attempt after the changes is not part of them: the notices
		// still carry the last attempt before each.
		f.publish("acme", "file.created", at(2*time.Hour))
		for _, c := range f.claim("w", 10, time.Minute, at(2*time.Hour)) {
			if c.Delivery.ID != cs[0].Delivery.ID {
				f.complete(failure(c, at(2*time.Hour), at(2*time.Hour+time.Second), at(3*time.Hour), 500, ""))
			}
		}
		diff(t, "PendingNotices after a later attempt", []store.Notice{disabled, enabled}, f.notices())
	})
}

// ---------------------------------------------------------------------------
// PostponeEndpointDeliveries

func (s suite) postpone(t *testing.T) {
	s.run(t, "MovesDueBeforeUntil", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme", "file.*")
		o := f.endpoint("acme", "other.*")
		p := newEndpoint("acme", "held.*")
		p.State = store.EndpointPaused
		f.createEndpoint(p)
		leasedEv := f.publish("acme", "file.created", base).Event
		leased := f.claimOne("w", time.Hour, base)
		if leased.Delivery.EventID != leasedEv.ID {
			t.Fatalf("claimed %s, want the delivery of %s", leased.Delivery.EventID, leasedEv.ID)
		}
		d0 := f.deliveryFor(f.publish("acme", "file.created", at(time.Second)).Event.ID, e.ID).ID
		d1 := f.deliveryFor(f.publish("acme", "file.created", at(time.Minute)).Event.ID, e.ID).ID
		later := f.deliveryFor(f.publish("acme", "file.created", at(2*time.Hour)).Event.ID, e.ID).ID
		atUntil := f.deliveryFor(f.publish("acme", "file.created", at(time.Hour)).Event.ID, e.ID).ID
		otherID := f.deliveryFor(f.publish("acme", "other.x", at(time.Second)).Event.ID, o.ID).ID
		heldID := f.deliveryFor(f.publish("acme", "held.x", at(time.Second)).Event.ID, p.ID).ID

		before := map[string]store.Delivery{}
		for _, id := range []string{leased.Delivery.ID, later, atUntil, otherID, heldID} {
			before[id] = f.getDelivery(id)
		}
		until := at(time.Hour)
		n, err := f.s.PostponeEndpointDeliveries(f.ctx, e.ID, until)
		if err != nil {
			t.Fatalf("PostponeEndpointDeliveries: %v", err)
		}
		if n != 2 {
			t.Errorf("PostponeEndpointDeliveries = %d, want 2", n)
		}
		for _, id := range []string{d0, d1} {
			d := f.getDelivery(id)
			if d.State != store.DeliveryPending || !d.NextAttemptAt.Equal(until) || d.Attempts != 0 || d.LeaseOwner != "" {
				t.Errorf("postponed delivery %s = %+v, want pending due %v, no attempt", id, d, until)
			}
		}
		for id, b := range before {
			got := f.getDelivery(id)
			if got.State != b.State || !got.NextAttemptAt.Equal(b.NextAttemptAt) || got.LeaseOwner != b.LeaseOwner || got.Attempts != b.Attempts {
				t.Errorf("delivery %s moved by the postponement:\nbefore %+v\nafter  %+v", id, b, got)
			}
		}
		diff(t, "claimable before until", []string{otherID}, claimIDs(f.claim("w", 100, time.Minute, until.Add(-time.Microsecond))))
		diff(t, "claimable at until", sorted([]string{d0, d1, atUntil}), sorted(claimIDs(f.claim("w", 100, time.Minute, until))))

		n, err = f.s.PostponeEndpointDeliveries(f.ctx, p.ID, until)
		if err != nil || n != 0 {
			t.Errorf("PostponeEndpointDeliveries(paused endpoint) = %d, %v; want 0 (held deliveries are not pending)", n, err)
		}
	})
	s.run(t, "MoveHoldsAndHandsBack", func(t *testing.T, f *fixture) {
		// A half-open circuit's backlog: held (due by now → the probe's
		// deadline), then handed back (due exactly at the deadline → now).
		e := f.endpoint("acme", "file.*")
		o := f.endpoint("acme", "other.*")
		leasedEv := f.publish("acme", "file.created", base).Event
		leased := f.claimOne("w", time.Hour, base)
		if leased.Delivery.EventID != leasedEv.ID {
			t.Fatalf("claimed %s, want the delivery of %s", leased.Delivery.EventID, leasedEv.ID)
		}
		d0 := f.deliveryFor(f.publish("acme", "file.created", at(time.Second)).Event.ID, e.ID).ID
		d1 := f.deliveryFor(f.publish("acme", "file.created", at(time.Minute)).Event.ID, e.ID).ID
		retry := f.deliveryFor(f.publish("acme", "file.created", at(90*time.Second)).Event.ID, e.ID).ID // due after now
		otherID := f.deliveryFor(f.publish("acme", "other.x", at(time.Second)).Event.ID, o.ID).ID
		now, deadline := at(time.Minute), at(2*time.Minute)

		n, err := f.s.MoveEndpointDeliveries(f.ctx, store.MoveParams{EndpointID: e.ID, DueTo: now, At: deadline})
		if err != nil || n != 2 {
			t.Fatalf("hold: MoveEndpointDeliveries = %d, %v; want 2 (the due ones, not the leased one, the later one or another endpoint's)", n, err)
		}
		for id, want := range map[string]time.Time{d0: deadline, d1: deadline, retry: at(90 * time.Second), otherID: at(time.Second), leased.Delivery.ID: base} {
			if d := f.getDelivery(id); !d.NextAttemptAt.Equal(want) || d.Attempts != 0 || d.State != store.DeliveryPending {
				t.Errorf("after the hold, delivery %s = due %v, %d attempts, %s; want due %v, no attempt, pending", id, d.NextAttemptAt, d.Attempts, d.State, want)
			}
		}
		diff(t, "claimable while held", sorted([]string{otherID}), sorted(claimIDs(f.claim("w2", 100, time.Minute, now))))

		back := at(70 * time.Second)
		n, err = f.s.MoveEndpointDeliveries(f.ctx, store.MoveParams{EndpointID: e.ID, DueFrom: deadline, DueTo: deadline, At: back})
		if err != nil || n != 2 {
			t.Fatalf("hand back: MoveEndpointDeliveries = %d, %v; want 2", n, err)
		}
		diff(t, "claimable once handed back", sorted([]string{d0, d1}), sorted(claimIDs(f.claim("w3", 100, time.Minute, back))))
		if d := f.getDelivery(retry); !d.NextAttemptAt.Equal(at(90 * time.Second)) {
			t.Errorf("the hand-back moved a delivery it did not hold: due %v", d.NextAttemptAt)
		}
	})
	for _, limit := range []int{0, 1, 2} {
		s.run(t, fmt.Sprintf("MovePullsInUnattemptedOnly/limit=%d", limit), func(t *testing.T, f *fixture) {
			// A pull-in: the endpoint's deliveries deferred ahead, not
			// attempted since created or replayed, are due now (with a
			// limit, the earliest due); a retry due in the same window keeps
			// its backoff, as do deliveries due before the window, after
			// it, or of another endpoint.
			e := f.endpoint("acme", "file.*")
			o := f.endpoint("acme", "other.*")
			retried := f.publish("acme", "file.created", base).Event
			c := f.claimOne("w", time.Minute, base)
			if c.Delivery.EventID != retried.ID {
				t.Fatalf("claimed %s, want the delivery of %s", c.Delivery.EventID, retried.ID)
			}
			f.complete(failure(c, base, at(time.Second), at(20*time.Second), 500, ""))
			f.publish("acme", "file.created", at(500*time.Millisecond))
			dead := f.claimOne("w", time.Minute, at(500*time.Millisecond))
			f.complete(failure(dead, at(500*time.Millisecond), at(600*time.Millisecond), time.Time{}, 500, ""))
			if n := f.replay(store.ReplayParams{DeliveryID: dead.Delivery.ID, Now: at(4 * time.Second)}); n != 1 {
				t.Fatalf("replayed %d, want 1", n)
			}
			replayed := dead.Delivery.ID
			early := f.deliveryFor(f.publish("acme", "file.created", at(time.Second)).Event.ID, e.ID).ID
			d0 := f.deliveryFor(f.publish("acme", "file.created", at(2*time.Second)).Event.ID, e.ID).ID
			d1 := f.deliveryFor(f.publish("acme", "file.created", at(3*time.Second)).Event.ID, e.ID).ID
			later := f.deliveryFor(f.publish("acme", "file.created", at(4*time.Second)).Event.ID, e.ID).ID
			otherID := f.deliveryFor(f.publish("acme", "other.x", at(4*time.Second)).Event.ID, o.ID).ID
			// Each turned away at a cap (a deferral consumes no attempt).
			deferTo := map[string]time.Time{early: at(time.Second), d0: at(10 * time.Second), replayed: at(12 * time.Second), d1: at(15 * time.Second),
				later: at(time.Minute), otherID: at(12 * time.Second)}
			cs := f.claim("w", 10, time.Minute, at(4*time.Second))
			diff(t, "claimed to defer", sorted([]string{early, d0, d1, replayed, later, otherID}), sorted(claimIDs(cs)))
			for _, c := range cs {
				f.complete(deferral(c, deferTo[c.Delivery.ID], at(4*time.Second)))
			}
			now := at(5 * time.Second)
			want := map[string]time.Time{d0: now, replayed: now, d1: now, c.Delivery.ID: at(20 * time.Second), early: deferTo[early], later: deferTo[later], otherID: deferTo[otherID]}
			wantN := 3
			var spacing time.Duration
			moveAt := now
			if limit == 2 { // the two earliest due, spaced apart
				spacing = 1500 * time.Microsecond
				want[replayed], want[d1], wantN = now.Add(spacing), deferTo[d1], 2
			}
			if limit == 1 { // spaced from after the earliest's due time: it stays
				moveAt = at(11 * time.Second)
				want[d0], want[replayed], want[d1], wantN = deferTo[d0], deferTo[replayed], deferTo[d1], 1
			}

			n, err := f.s.MoveEndpointDeliveries(f.ctx, store.MoveParams{EndpointID: e.ID, DueFrom: now, DueTo: at(30 * time.Second), At: moveAt, Unattempted: true, Limit: limit, Spacing: spacing})
			if err != nil || n != wantN {
				t.Fatalf("pull-in: MoveEndpointDeliveries = %d, %v; want %d (the deferred ones, not the retry, the earlier one, the later one or another endpoint's)", n, err, wantN)
			}
			for id, want := range want {
				if d := f.getDelivery(id); !d.NextAttemptAt.Equal(want) || d.State != store.DeliveryPending {
					t.Errorf("after the pull-in, delivery %s = due %v, %d attempts, %s; want due %v, pending", id, d.NextAttemptAt, d.Attempts, d.State, want)
				}
			}
			if d := f.getDelivery(c.Delivery.ID); d.Attempts != 1 {
				t.Errorf("the retry has %d attempts, want 1", d.Attempts)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Notices

func (s suite) noticesGroup(t *testing.T) {
	s.run(t, "EmptyStoreHasNone", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		if ns := f.notices(); len(ns) != 0 {
			t.Fatalf("PendingNotices = %+v, want none", ns)
		}
	})
	s.run(t, "ClearRemovesOne", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		o := f.endpoint("acme")
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Notice: "endpoint.disabled", Now: at(time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: o.ID, State: store.EndpointDisabled, Notice: "endpoint.disabled", Now: at(time.Minute)})
		ns := f.outbox()
		if len(ns) != 2 || ns[0].Endpoint.ID != e.ID || ns[1].Endpoint.ID != o.ID || ns[0].ID >= ns[1].ID {
			t.Fatalf("PendingNotices = %+v, want %s's then %s's, in increasing id order", ns, e.ID, o.ID)
		}
		f.clearNotice(ns[0].ID)
		diff(t, "PendingNotices after ClearNotices", []string{o.ID}, idsOf(f.notices(), func(n store.Notice) string { return n.Endpoint.ID }))
		if err := f.s.ClearNotices(f.ctx, []int64{ns[0].ID}); err != nil {
			t.Errorf("ClearNotices again: %v", err)
		}
		// Clearing does not change the endpoint.
		if ep := f.getEndpoint(e.ID); ep.State != store.EndpointDisabled {
			t.Errorf("endpoint after ClearNotices: %s, want disabled", ep.State)
		}
	})
	s.run(t, "ClearRemovesSeveral", func(t *testing.T, f *fixture) {
		var eps []store.Endpoint
		for range 4 {
			e := f.endpoint("acme")
			f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Notice: "endpoint.disabled", Now: at(time.Minute)})
			eps = append(eps, e)
		}
		ns := f.outbox()
		if len(ns) != 4 {
			t.Fatalf("PendingNotices = %d notices, want 4", len(ns))
		}
		// The first and third, and an id that is not there.
		if err := f.s.ClearNotices(f.ctx, []int64{ns[0].ID, ns[2].ID, ns[3].ID + 1000}); err != nil {
			t.Fatalf("ClearNotices: %v", err)
		}
		diff(t, "PendingNotices after clearing two", []string{eps[1].ID, eps[3].ID}, idsOf(f.notices(), func(n store.Notice) string { return n.Endpoint.ID }))
		if err := f.s.ClearNotices(f.ctx, nil); err != nil {
			t.Errorf("ClearNotices(nil): %v", err)
		}
		if err := f.s.ClearNotices(f.ctx, []int64{ns[0].ID, ns[1].ID}); err != nil { // one cleared already
			t.Errorf("ClearNotices again: %v", err)
		}
		diff(t, "PendingNotices at the end", []string{eps[3].ID}, idsOf(f.notices(), func(n store.Notice) string { return n.Endpoint.ID }))
	})
	// A 410 that dead-letters several deliveries and disables their
	// endpoint in one batch raises endpoint.disabled and one
	// delivery.dead_lettered each, all at the completion's instant: they
	// are written at strictly increasing times in outbox order, so a
	// receiver ordering by occurred_at sees them in the order they were
	// raised.
	s.run(t, "OneEndpointsNoticesStrictlyLater", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		other := f.endpoint("other")
		for range 3 {
			f.publish("acme", "file.created", base)
		}
		f.publish("other", "file.created", base)
		cs := f.claim("w", 10, time.Minute, base)
		now := at(time.Second)
		var batch []store.Completion
		for _, c := range cs {
			cp := failure(c, now, now, time.Time{}, 410, "")
			if c.Delivery.EndpointID == e.ID {
				cp.DisableEndpoint, cp.DisableReason = true, "410 Gone"
			}
			batch = append(batch, cp)
		}
		f.complete(batch...)
		var mine []store.Notice
		for _, n := range f.allNotices() {
			switch {
			case n.Type == store.NoticeEndpointCreated:
			case n.Endpoint.ID == e.ID:
				mine = append(mine, n)
			case n.Endpoint.ID == other.ID:
				// Another endpoint's notice at the same instant is not moved.
				checkTime(t, "the other endpoint's "+n.Type, n.At, now)
			}
		}
		if len(mine) != 4 {
			t.Fatalf("%d notices of the disabled endpoint, want endpoint.disabled and 3 delivery.dead_lettered: %+v", len(mine), mine)
		}
		for i, n := range mine {
			checkTime(t, fmt.Sprintf("notice %d (%s)", i, n.Type), n.At, now.Add(time.Duration(i)*time.Microsecond))
		}
	})
	// Issue 13, point 6: every change is kept, in order, with the
	// endpoint as it was at that change, however quickly the next one
	// comes, and clearing one never clears another.
	s.run(t, "EveryChangeInOrder", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Reason: "by operator", Notice: "endpoint.disabled", Now: at(time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Reason: "", Notice: "endpoint.enabled", Now: at(time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Reason: "again", Notice: "endpoint.disabled", Now: at(2 * time.Minute)})
		ns := f.outbox()
		type seen struct {
			Type, State, Reason string
			At                  time.Time
		}
		var got []seen
		for i, n := range ns {
			got = append(got, seen{n.Type, string(n.Endpoint.State), n.Endpoint.StateReason, n.At})
			if i > 0 && n.ID <= ns[i-1].ID {
				t.Errorf("notice ids not increasing: %d after %d", n.ID, ns[i-1].ID)
			}
		}
		// The enable at the same instant as the disable is written a
		// microsecond after it: one endpoint's notices are at strictly
		// increasing times, so occurred_at orders them.
		diff(t, "PendingNotices", []seen{
			{"endpoint.disabled", "disabled", "by operator", at(time.Minute)},
			{"endpoint.enabled", "enabled", "", at(time.Minute + time.Microsecond)},
			{"endpoint.disabled", "disabled", "again", at(2 * time.Minute)},
		}, got)
		f.clearNotice(ns[1].ID)
		if left := f.outbox(); len(left) != 2 || left[0].ID != ns[0].ID || left[1].ID != ns[2].ID {
			t.Errorf("after clearing the second notice: %+v, want the first and the third", left)
		}
	})
	// Issue 13, point 7: creating, updating and deleting an endpoint
	// record endpoint.created, endpoint.updated and endpoint.deleted when
	// asked, each with the endpoint as it was then — the deleted one's
	// tenant and URL although its row is gone.
	s.run(t, "EndpointLifecycle", func(t *testing.T, f *fixture) {
		e := newEndpoint("acme")
		e.CreatedAt, e.UpdatedAt = at(time.Second), at(time.Second)
		created, err := f.s.CreateEndpoint(f.ctx, store.CreateEndpointParams{Endpoint: e, Notice: true})
		if err != nil {
			t.Fatalf("CreateEndpoint: %v", err)
		}
		f.endpoint("acme") // without Notice: nothing recorded
		u := "https://moved.example/hook"
		updated, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, URL: &u, Now: at(2 * time.Second), Notice: true})
		if err != nil {
			t.Fatalf("UpdateEndpoint: %v", err)
		}
		if err := f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: e.ID, Notice: true, Now: at(3 * time.Second)}); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		diff(t, "PendingNotices", []store.Notice{
			{Endpoint: snap(created), Type: store.NoticeEndpointCreated, At: at(time.Second)},
			{Endpoint: snap(updated), Type: store.NoticeEndpointUpdated, At: at(2 * time.Second)},
			{Endpoint: snap(updated), Type: store.NoticeEndpointDeleted, At: at(3 * time.Second)},
		}, f.notices())
		if updated.URL != u {
			t.Errorf("updated URL = %q, want %q", updated.URL, u)
		}
		// A failed delete records nothing.
		wantErr(t, "DeleteEndpoint again", f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: e.ID, Notice: true, Now: at(4 * time.Second)}), store.ErrNotFound)
		_, err = f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, URL: &u, Now: at(5 * time.Second), Notice: true})
		wantErr(t, "UpdateEndpoint after delete", err, store.ErrNotFound)
		if got := len(f.notices()); got != 3 {
			t.Errorf("notices after failed changes: %d, want 3", got)
		}
	})
	s.run(t, "LastAttemptOfEndpoint", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		fresh := f.endpoint("globex", "nothing.*")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", at(time.Second))
		// d0 fails with 500 at 1 s and retries at 30 s; d1 times out at 10 s
		// and is dead; then d0 is claimed again (in flight).
		d0 := f.claimFirst(base)
		f.complete(failure(d0, at(time.Second), at(2*time.Second), at(30*time.Second), 500, ""))
		d1 := f.claimFirst(at(10 * time.Second))
		if d1.Delivery.ID == d0.Delivery.ID {
			t.Fatalf("claimed the retry early")
		}
		f.complete(failure(d1, at(10*time.Second), at(20*time.Second), time.Time{}, 0, "timeout"))
		f.claimOne("w", time.Minute, at(30*time.Second))
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Reason: "by operator", Notice: "endpoint.disabled", Now: at(time.Minute)})
		f.setState(store.SetEndpointStateParams{ID: fresh.ID, State: store.EndpointDisabled, Reason: "by operator", Notice: "endpoint.disabled", Now: at(time.Minute)})
		want := []store.Notice{
			{Endpoint: snap(f.getEndpoint(e.ID)), Type: "endpoint.disabled", At: at(time.Minute), LastError: "timeout"},
			{Endpoint: snap(f.getEndpoint(fresh.ID)), Type: "endpoint.disabled", At: at(time.Minute)},
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Endpoint.ID < want[j].Endpoint.ID })
		diff(t, "PendingNotices (last attempt: the timeout at 10 s)", want, f.notices())
	})
}

// ---------------------------------------------------------------------------
// DeadLetterCounts

func (s suite) deadLetterCounts(t *testing.T) {
	s.run(t, "EmptyIsEmptyNonNil", func(t *testing.T, f *fixture) {
		for _, tenant := range []string{"", "acme"} {
			got, err := f.s.DeadLetterCounts(f.ctx, tenant, time.Time{})
			if err != nil {
				t.Fatalf("DeadLetterCounts(%q): %v", tenant, err)
			}
			if got == nil || len(got) != 0 {
				t.Errorf("DeadLetterCounts(%q) on an empty store = %#v, want an empty non-nil slice", tenant, got)
			}
		}
	})
	s.run(t, "PerEndpointTenantAndSince", func(t *testing.T, f *fixture) {
		e1 := f.endpoint("acme", "e1.*")
		e2 := f.endpoint("acme", "e2.*")
		f.endpoint("acme", "e3.*") // no dead letters
		g := f.endpoint("globex")
		// e1: dead at 1 m, 1 m, 3 m; e2: dead at 2 m; e3: succeeded and
		// pending; g: dead at 1 m, 1 m.
		deadAt := map[string][]time.Duration{e1.ID: {time.Minute, time.Minute, 3 * time.Minute}, e2.ID: {2 * time.Minute}, g.ID: {time.Minute, time.Minute}}
		prefix := map[string]string{e1.ID: "e1.x", e2.ID: "e2.x"}
		byEvent := map[string]time.Duration{}
		for ep, ds := range deadAt {
			for _, d := range ds {
				var ev store.Event
				if ep == g.ID {
					ev = f.publish("globex", "file.created", base).Event
				} else {
					ev = f.publish("acme", prefix[ep], base).Event
				}
				byEvent[ev.ID] = d
			}
		}
		f.publish("acme", "e3.x", base)             // succeeded
		f.publish("acme", "e3.x", at(10*time.Hour)) // pending
		f.completeDue(at(time.Second), func(c store.Claim) store.Completion {
			if d, ok := byEvent[c.Delivery.EventID]; ok {
				return attempt(c, store.DeliveryDead, at(d))
			}
			return attempt(c, store.DeliverySucceeded, at(time.Minute))
		})
		get := func(tenant string, since time.Time) []store.DeadLetterCount {
			t.Helper()
			got, err := f.s.DeadLetterCounts(f.ctx, tenant, since)
			if err != nil {
				t.Fatalf("DeadLetterCounts(%q, %v): %v", tenant, since, err)
			}
			if got == nil {
				t.Errorf("DeadLetterCounts(%q, %v) = nil, want a non-nil slice", tenant, since)
			}
			sort.Slice(got, func(i, j int) bool { return got[i].EndpointID < got[j].EndpointID })
			return got
		}
		want := func(cs ...store.DeadLetterCount) []store.DeadLetterCount {
			sort.Slice(cs, func(i, j int) bool { return cs[i].EndpointID < cs[j].EndpointID })
			return cs
		}
		diff(t, "all", want(dlc(e1.ID, "acme", 3), dlc(e2.ID, "acme", 1), dlc(g.ID, "globex", 2)), get("", time.Time{}))
		diff(t, "acme", want(dlc(e1.ID, "acme", 3), dlc(e2.ID, "acme", 1)), get("acme", time.Time{}))
		diff(t, "globex", want(dlc(g.ID, "globex", 2)), get("globex", time.Time{}))
		diff(t, "since 2 m", want(dlc(e1.ID, "acme", 1), dlc(e2.ID, "acme", 1)), get("", at(2*time.Minute)))
		diff(t, "acme since 3 m", want(dlc(e1.ID, "acme", 1)), get("acme", at(3*time.Minute)))
		diff(t, "since later", want(), get("", at(3*time.Minute+time.Microsecond)))
		diff(t, "unknown tenant", want(), get("nobody", time.Time{}))
		// Replayed dead letters no longer count.
		f.replay(store.ReplayParams{EndpointID: e1.ID, Since: at(2 * time.Minute), Now: at(time.Hour)})
		diff(t, "after replay", want(dlc(e1.ID, "acme", 2), dlc(e2.ID, "acme", 1)), get("acme", time.Time{}))
	})
}

// ---------------------------------------------------------------------------
// ClaimSpikeAlert

func (s suite) spikeAlert(t *testing.T) {
	s.run(t, "OncePerWindow", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		o := f.endpoint("acme")
		const window = time.Hour
		claim := func(ep string, now time.Time) bool {
			t.Helper()
			ok, err := f.s.ClaimSpikeAlert(f.ctx, ep, now.Add(-window), now)
			if err != nil {
				t.Fatalf("ClaimSpikeAlert(%s, %v): %v", ep, now, err)
			}
			return ok
		}
		steps := []struct {
			ep   string
			now  time.Duration
			want bool
		}{
			{e.ID, 0, true},                   // first
			{e.ID, 0, false},                  // again at once
			{e.ID, 59 * time.Minute, false},   // within the window
			{o.ID, 59 * time.Minute, true},    // another endpoint has its own window
			{e.ID, 61 * time.Minute, true},    // after the window
			{e.ID, 62 * time.Minute, false},   // the window restarted at 61 m
			{e.ID, 120 * time.Minute, false},  // still within it
			{e.ID, 121 * time.Minute, true},   // emitted at 61 m = windowStart: not after it
			{o.ID, 121 * time.Minute, true},   // 62 m after o's
			{e.ID, 1000 * time.Minute, true},  // long after
			{e.ID, 1000 * time.Minute, false}, // and not twice
		}
		for i, st := range steps {
			if got := claim(st.ep, at(st.now)); got != st.want {
				who := "e"
				if st.ep == o.ID {
					who = "o"
				}
				t.Errorf("step %d: ClaimSpikeAlert(%s, now %v) = %v, want %v", i, who, st.now, got, st.want)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// Stats

func (s suite) stats(t *testing.T) {
	get := func(t *testing.T, f *fixture) store.Stats {
		t.Helper()
		st, err := f.s.Stats(f.ctx)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return st
	}
	s.run(t, "Empty", func(t *testing.T, f *fixture) {
		st := get(t, f)
		diff(t, "deliveries by state", map[store.DeliveryState]int{}, nonZero(st.DeliveriesByState))
		diff(t, "endpoints by state", map[store.EndpointState]int{}, nonZero(st.EndpointsByState))
	})
	s.run(t, "CountsByState", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.endpoint("acme")
		f.endpoint("globex")
		f.endpointInState("acme", store.EndpointPaused)
		f.endpointInState("acme", store.EndpointDisabled)
		f.publish("acme", "file.created", base)                // 2 pending + 2 paused
		f.publish("acme", "file.created", at(time.Second))     // 2 pending + 2 paused
		f.publish("globex", "file.created", at(2*time.Second)) // 1 pending
		cs := f.claim("w", 10, time.Minute, base)
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		f.complete(attempt(cs[0], store.DeliverySucceeded, at(time.Second)), attempt(cs[1], store.DeliveryDead, at(time.Second)))
		f.claim("w", 1, time.Minute, at(time.Second)) // leased: still pending
		st := get(t, f)
		diff(t, "deliveries by state", map[store.DeliveryState]int{
			store.DeliveryPending: 3, store.DeliverySucceeded: 1, store.DeliveryDead: 1, store.DeliveryPaused: 4,
		}, nonZero(st.DeliveriesByState))
		diff(t, "endpoints by state", map[store.EndpointState]int{
			store.EndpointEnabled: 3, store.EndpointPaused: 1, store.EndpointDisabled: 1,
		}, nonZero(st.EndpointsByState))
		// Claimable now: acme's second event (due at 1 s, one of its two
		// deliveries leased) and globex's (2 s); paused ones do not count.
		if !st.OldestDue.Equal(at(time.Second)) {
			t.Errorf("OldestDue = %v, want %v (the claimable delivery due first)", st.OldestDue, at(time.Second))
		}
	})
	s.run(t, "OldestDueNone", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.claim("w", 10, time.Minute, base) // leased: not waiting
		if st := get(t, f); !st.OldestDue.IsZero() {
			t.Errorf("OldestDue = %v with every delivery leased, want zero", st.OldestDue)
		}
	})
	s.run(t, "TraceParentKept", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		f.publishEvent(ev, base)
		c := f.claimOne("w", time.Minute, base)
		if c.Event.TraceParent != ev.TraceParent {
			t.Errorf("claimed event's TraceParent = %q, want %q", c.Event.TraceParent, ev.TraceParent)
		}
		if got := f.getEvent(ev.ID).TraceParent; got != ev.TraceParent {
			t.Errorf("GetEvent TraceParent = %q, want %q", got, ev.TraceParent)
		}
	})
}

// ---------------------------------------------------------------------------
// Purge

func (s suite) purge(t *testing.T) {
	purge := func(t *testing.T, f *fixture, p store.PurgeParams) int {
		t.Helper()
		n, err := f.s.Purge(f.ctx, p)
		if err != nil {
			t.Fatalf("Purge(%+v): %v", p, err)
		}
		return n
	}
	// drain purges until nothing is left to delete.
	drain := func(t *testing.T, f *fixture, p store.PurgeParams) {
		t.Helper()
		for i := 0; ; i++ {
			if i > 100 {
				t.Fatalf("Purge(%+v) never returns 0", p)
			}
			if purge(t, f, p) == 0 {
				return
			}
		}
	}
	s.run(t, "ByKindAndAge", func(t *testing.T, f *fixture) {
		f.endpoint("acme", "file.*")
		held := newEndpoint("acme", "held.*")
		held.State = store.EndpointPaused
		f.createEndpoint(held)
		// Outcomes of the file.* deliveries, by event.
		type outcome struct {
			state store.DeliveryState
			at    time.Duration
		}
		plan := map[string]outcome{}
		ev := func(name string, o outcome) string {
			id := f.publish("acme", "file."+name, base).Event.ID
			plan[id] = o
			return id
		}
		oldOK := ev("ok1", outcome{store.DeliverySucceeded, time.Hour})
		newOK := ev("ok2", outcome{store.DeliverySucceeded, 3 * time.Hour})
		oldDead := ev("dead1", outcome{store.DeliveryDead, time.Hour})
		newDead := ev("dead2", outcome{store.DeliveryDead, 5 * time.Hour})
		retry := ev("retry", outcome{store.DeliveryPending, time.Hour})
		heldEv := f.publish("acme", "held.x", base).Event.ID
		lonelyOld := f.publish("acme", "invoice.paid", base).Event.ID // no endpoint
		lonelyNew := f.publish("acme", "invoice.paid", at(10*time.Hour)).Event.ID
		dlv := map[string]string{}
		f.completeDue(base, func(c store.Claim) store.Completion {
			o := plan[c.Delivery.EventID]
			dlv[c.Delivery.EventID] = c.Delivery.ID
			cp := attempt(c, o.state, at(o.at))
			if o.state == store.DeliveryPending {
				cp.NextAttemptAt = at(1000 * time.Hour)
			}
			return cp
		})
		if len(dlv) != 5 {
			t.Fatalf("completed %d deliveries, want 5", len(dlv))
		}
		heldDlv := f.listDeliveries(store.ListDeliveriesParams{EventID: heldEv})[0].ID

		gone := func(what string, deliveries []string, events []string) {
			t.Helper()
			for _, id := range deliveries {
				_, err := f.s.GetDelivery(f.ctx, id)
				wantErr(t, what+": GetDelivery(purged)", err, store.ErrNotFound)
				_, err = f.s.ListAttempts(f.ctx, id)
				wantErr(t, what+": ListAttempts(purged)", err, store.ErrNotFound)
			}
			for _, id := range events {
				_, err := f.s.GetEvent(f.ctx, id)
				wantErr(t, what+": GetEvent(purged)", err, store.ErrNotFound)
			}
		}
		kept := func(what string, deliveries []string, events []string) {
			t.Helper()
			for _, id := range deliveries {
				if _, err := f.s.GetDelivery(f.ctx, id); err != nil {
					t.Errorf("%s: GetDelivery(%s) = %v, want kept", what, id, err)
				}
			}
			for _, id := range events {
				if _, err := f.s.GetEvent(f.ctx, id); err != nil {
					t.Errorf("%s: GetEvent(%s) = %v, want kept", what, id, err)
				}
			}
		}

		// Succeeded and dead before 2 h, events before 2 h.
		drain(t, f, store.PurgeParams{SucceededBefore: at(2 * time.Hour), DeadBefore: at(2 * time.Hour), EventsBefore: at(2 * time.Hour), Limit: 100})
		gone("first purge", []string{dlv[oldOK], dlv[oldDead]}, []string{oldOK, oldDead, lonelyOld})
		kept("first purge", []string{dlv[newOK], dlv[newDead], dlv[retry], heldDlv}, []string{newOK, newDead, retry, heldEv, lonelyNew})
		if as := f.attempts(dlv[newOK]); len(as) != 1 {
			t.Errorf("attempts of a kept delivery: %d, want 1", len(as))
		}

		// Succeeded only: dead letters are kept without DeadBefore.
		drain(t, f, store.PurgeParams{SucceededBefore: at(100 * time.Hour), Limit: 100})
		gone("succeeded purge", []string{dlv[newOK]}, nil)
		kept("succeeded purge", []string{dlv[newDead], dlv[retry], heldDlv}, []string{newDead, retry, heldEv, lonelyNew})

		// Dead letters before 4 h: the one dead at 5 h stays.
		drain(t, f, store.PurgeParams{DeadBefore: at(4 * time.Hour), Limit: 100})
		kept("dead purge before its time", []string{dlv[newDead]}, nil)

		// Everything old: pending and held deliveries and their events stay.
		drain(t, f, store.PurgeParams{SucceededBefore: at(10000 * time.Hour), DeadBefore: at(10000 * time.Hour), EventsBefore: at(10000 * time.Hour), Limit: 100})
		gone("full purge", []string{dlv[newDead]}, []string{newOK, newDead, lonelyNew})
		kept("full purge", []string{dlv[retry], heldDlv}, []string{retry, heldEv})
		if d := f.getDelivery(dlv[retry]); d.State != store.DeliveryPending || d.Attempts != 1 {
			t.Errorf("pending delivery after purge: %+v", d)
		}
		if as := f.attempts(dlv[retry]); len(as) != 1 {
			t.Errorf("attempts of the pending delivery after purge: %d, want 1", len(as))
		}
		if n := purge(t, f, store.PurgeParams{SucceededBefore: at(10000 * time.Hour), DeadBefore: at(10000 * time.Hour), EventsBefore: at(10000 * time.Hour), Limit: 100}); n != 0 {
			t.Errorf("Purge with nothing left = %d, want 0", n)
		}
	})
	s.run(t, "LimitPerCall", func(t *testing.T, f *fixture) {
		f.endpoint("acme", "file.*")
		for i := range 10 {
			f.publish("acme", "file.created", at(time.Duration(i)*time.Millisecond))
		}
		for range 5 {
			f.publish("acme", "invoice.paid", base) // no delivery
		}
		i := 0
		f.completeDue(at(time.Second), func(c store.Claim) store.Completion {
			i++
			if i%2 == 0 {
				return attempt(c, store.DeliveryDead, at(time.Minute))
			}
			return attempt(c, store.DeliverySucceeded, at(time.Minute))
		})
		p := store.PurgeParams{SucceededBefore: at(time.Hour), DeadBefore: at(time.Hour), EventsBefore: at(time.Hour), Limit: 2}
		purge(t, f, p)
		if n := f.countDeliveries(store.DeliverySucceeded); n < 3 || n > 4 {
			t.Errorf("succeeded left after one Purge with Limit 2: %d, want 3 (at most 2 deleted)", n)
		}
		if n := f.countDeliveries(store.DeliveryDead); n < 3 || n > 4 {
			t.Errorf("dead left after one Purge with Limit 2: %d, want 3 (at most 2 deleted)", n)
		}
		if n := len(f.eventIDs()); n < 13 {
			t.Errorf("events left after one Purge with Limit 2: %d, want at least 13 of 15", n)
		}
		calls := 1
		for ; purge(t, f, p) != 0; calls++ {
			if calls > 50 {
				t.Fatalf("Purge never returns 0")
			}
		}
		if calls < 3 {
			t.Errorf("purging 5 + 5 deliveries and 15 events with Limit 2 took %d calls, want at least 3", calls)
		}
		for _, st := range []store.DeliveryState{store.DeliverySucceeded, store.DeliveryDead} {
			if n := f.countDeliveries(st); n != 0 {
				t.Errorf("%s deliveries left after purging: %d", st, n)
			}
		}
		if ids := f.eventIDs(); len(ids) != 0 {
			t.Errorf("events left after purging: %v", ids)
		}
	})
}

// ---------------------------------------------------------------------------
// ListDeliveries by tenant, event type and time

func (s suite) deliveryFilters(t *testing.T) {
	s.run(t, "TenantEventTypeSince", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		o := f.endpoint("acme")
		g := f.endpoint("globex")
		type ev struct {
			tenant, typ string
			deadAt      time.Duration // 0: succeeded at 1 m
		}
		plan := []ev{
			{"acme", "file.created", time.Minute},
			{"acme", "file.deleted", 2 * time.Minute},
			{"acme", "file.created", 3 * time.Minute},
			{"globex", "file.created", 2 * time.Minute},
			{"acme", "file.created", 0},
		}
		var evs []string
		deadAt := map[string]time.Duration{}
		for _, p := range plan {
			id := f.publish(p.tenant, p.typ, base).Event.ID
			evs = append(evs, id)
			deadAt[id] = p.deadAt
		}
		pendingEv := f.publish("acme", "file.deleted", at(time.Hour)).Event.ID
		f.completeDue(at(time.Second), func(c store.Claim) store.Completion {
			d := deadAt[c.Delivery.EventID]
			if d == 0 || c.Delivery.EndpointID == o.ID {
				return attempt(c, store.DeliverySucceeded, at(time.Minute))
			}
			return attempt(c, store.DeliveryDead, at(d))
		})
		of := func(ep string, idx ...int) []string {
			var out []string
			for _, i := range idx {
				id := pendingEv
				if i >= 0 {
					id = evs[i]
				}
				out = append(out, f.deliveryFor(id, ep).ID)
			}
			return out
		}
		cat := func(parts ...[]string) []string {
			var out []string
			for _, p := range parts {
				out = append(out, p...)
			}
			return reversed(sorted(out))
		}
		cases := []struct {
			name string
			p    store.ListDeliveriesParams
			want []string
		}{
			{"tenant", store.ListDeliveriesParams{Tenant: "acme"}, cat(of(e.ID, 0, 1, 2, 4, -1), of(o.ID, 0, 1, 2, 4, -1))},
			{"other tenant", store.ListDeliveriesParams{Tenant: "globex"}, cat(of(g.ID, 3))},
			{"unknown tenant", store.ListDeliveriesParams{Tenant: "nobody"}, nil},
			{"tenant DLQ", store.ListDeliveriesParams{Tenant: "acme", State: store.DeliveryDead}, cat(of(e.ID, 0, 1, 2))},
			{"all DLQ", store.ListDeliveriesParams{State: store.DeliveryDead}, cat(of(e.ID, 0, 1, 2), of(g.ID, 3))},
			{"event type", store.ListDeliveriesParams{EventType: "file.deleted"}, cat(of(e.ID, 1, -1), of(o.ID, 1, -1))},
			{"event type and state", store.ListDeliveriesParams{EventType: "file.deleted", State: store.DeliveryPending}, cat(of(e.ID, -1), of(o.ID, -1))},
			{"endpoint DLQ since", store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryDead, Since: at(2 * time.Minute)}, cat(of(e.ID, 1, 2))},
			{"endpoint DLQ since later", store.ListDeliveriesParams{EndpointID: e.ID, State: store.DeliveryDead, Since: at(2*time.Minute + time.Microsecond)}, cat(of(e.ID, 2))},
			{"DLQ since", store.ListDeliveriesParams{State: store.DeliveryDead, Since: at(2 * time.Minute)}, cat(of(e.ID, 1, 2), of(g.ID, 3))},
			{"tenant DLQ since and type", store.ListDeliveriesParams{Tenant: "acme", State: store.DeliveryDead, Since: at(2 * time.Minute), EventType: "file.created"}, cat(of(e.ID, 2))},
			{"since only", store.ListDeliveriesParams{Since: at(3 * time.Minute)}, cat(of(e.ID, 2, -1), of(o.ID, -1))},
			{"event and tenant", store.ListDeliveriesParams{EventID: evs[0], Tenant: "acme"}, cat(of(e.ID, 0), of(o.ID, 0))},
			{"event of other tenant", store.ListDeliveriesParams{EventID: evs[0], Tenant: "globex"}, nil},
		}
		for _, c := range cases {
			for _, limit := range []int{1, 2, 100} {
				p := c.p
				p.Limit = limit
				got := f.listDeliveries(p)
				diff(t, fmt.Sprintf("ListDeliveries(%s, limit %d) ids, newest first", c.name, limit), c.want, idsOf(got, deliveryID))
			}
		}
	})
}

// ---------------------------------------------------------------------------
// PublishParams.IDFromClient

func (s suite) publishClientID(t *testing.T) {
	s.run(t, "KeyOfAnotherClientIDIsConflict", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		ev := newEvent("acme", "file.created", `{"n":1}`)
		ev.IdempotencyKey = "key-1"
		p := publishParams(ev, base)
		p.IDFromClient = true
		first, err := f.s.PublishEvent(f.ctx, p)
		if err != nil || !first.Created {
			t.Fatalf("PublishEvent = %+v, %v", first, err)
		}
		// The same client id and key again: the original.
		again, err := f.s.PublishEvent(f.ctx, p)
		if err != nil || again.Created || again.Event.ID != ev.ID || again.Deliveries != 1 {
			t.Errorf("republish of the same client id and key = %+v, %v; want the original", again, err)
		}
		// Another client-chosen id with the same key and content: conflict.
		other := newEvent("acme", "file.created", `{"n":1}`)
		other.IdempotencyKey = "key-1"
		po := publishParams(other, at(time.Minute))
		po.IDFromClient = true
		_, err = f.s.PublishEvent(f.ctx, po)
		wantErr(t, "PublishEvent(key of another client id)", err, store.ErrConflict)
		_, err = f.s.GetEvent(f.ctx, other.ID)
		wantErr(t, "GetEvent(refused id)", err, store.ErrNotFound)
		// A server-chosen id with the key: a client retry, the original.
		po.IDFromClient = false
		res, err := f.s.PublishEvent(f.ctx, po)
		if err != nil || res.Created || res.Event.ID != ev.ID {
			t.Errorf("retry with a server id = %+v, %v; want the original", res, err)
		}
		if got := f.listDeliveries(store.ListDeliveriesParams{}); len(got) != 1 {
			t.Errorf("deliveries = %d, want 1", len(got))
		}
	})
}
