package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// healthNotices: completions record endpoint.failing at the FailingAfter-th
// failure in a row (once per streak), endpoint.recovered at the first
// success after such a streak (once), and delivery.dead_lettered for each
// delivery they dead-letter, with its event, type, attempts and last
// status — but not for a completion whose lease was lost, nor for a
// delivery of an operational event.
func (s suite) healthNotices(t *testing.T) {
	s.run(t, "FailingRecoveredDeadLettered", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		ops := f.createEndpoint(newEndpoint("acme", "endpoint.*"))
		t0 := at(time.Minute)
		var evs []store.Event
		for range 7 {
			evs = append(evs, f.publish("acme", "file.created", t0).Event)
		}
		opEv := f.publish("acme", "endpoint.disabled", t0).Event
		byDelivery := map[string]store.Claim{}
		var mine []store.Claim
		for _, c := range f.claim("w1", 100, time.Hour, t0) {
			byDelivery[c.Delivery.ID] = c
			if c.Delivery.EndpointID == e.ID {
				mine = append(mine, c)
			}
		}
		if len(mine) != 7 {
			t.Fatalf("claims of e: %d, want 7", len(mine))
		}
		step := 0
		do := func(c store.Claim, state store.DeliveryState, status int, owner string, endpointID string) time.Time {
			t.Helper()
			step++
			now := at(time.Hour + time.Duration(step)*time.Second)
			cp := store.Completion{DeliveryID: c.Delivery.ID, EndpointID: endpointID, Owner: owner, LeaseUntil: c.Delivery.LeaseUntil, State: state, Now: now,
				Attempt: store.Attempt{StartedAt: now.Add(-time.Millisecond), Duration: time.Millisecond, StatusCode: status}}
			if state == store.DeliveryPending {
				cp.NextAttemptAt = now.Add(time.Hour)
			}
			f.complete(cp)
			return now
		}
		types := func() []string {
			var out []string
			for _, n := range f.allNotices() {
				if n.Type != "endpoint.created" {
					out = append(out, n.Type)
				}
			}
			return out
		}
		do(mine[0], store.DeliveryPending, 503, "w1", e.ID)
		do(mine[1], store.DeliveryPending, 503, "w1", e.ID)
		diff(t, "notices after 2 failures", []string(nil), types())
		failingAt := do(mine[2], store.DeliveryPending, 503, "w1", e.ID)
		diff(t, "notices after 3 failures", []string{store.NoticeEndpointFailing}, types())
		deadAt := do(mine[3], store.DeliveryDead, 500, "w1", e.ID)
		// A completion whose lease was lost (another owner) dead-letters
		// nothing and raises nothing.
		do(mine[4], store.DeliveryDead, 500, "someone-else", e.ID)
		// The operational event's dead letter raises nothing either.
		for id, c := range byDelivery {
			if c.Delivery.EventID == opEv.ID {
				do(byDelivery[id], store.DeliveryDead, 500, "w1", ops.ID)
			}
		}
		diff(t, "notices after the dead letters", []string{store.NoticeEndpointFailing, store.NoticeDeliveryDeadLettered}, types())
		// The first success (its endpoint left for the driver to find)
		// recovers; the next one raises nothing.
		recoveredAt := do(mine[5], store.DeliverySucceeded, 200, "w1", "")
		do(mine[6], store.DeliverySucceeded, 200, "w1", e.ID)
		want := []string{store.NoticeEndpointFailing, store.NoticeDeliveryDeadLettered, store.NoticeEndpointRecovered}
		diff(t, "notices", want, types())
		var got []store.Notice
		for _, n := range f.allNotices() {
			if n.Type != "endpoint.created" {
				got = append(got, n)
			}
		}
		for i, wantAt := range []time.Time{failingAt, deadAt, recoveredAt} {
			if got[i].Endpoint.ID != e.ID || got[i].Endpoint.Tenant != "acme" {
				t.Errorf("%s: endpoint %+v, want %s", got[i].Type, got[i].Endpoint, e.ID)
			}
			checkTime(t, got[i].Type, got[i].At, wantAt)
		}
		dl := got[1]
		if dl.DeliveryID != mine[3].Delivery.ID || dl.EventID != store.PublicEventID(mine[3].Delivery.EventID) || dl.EventType != "file.created" ||
			dl.Attempts != 1 || dl.LastStatusCode != 500 || dl.LastError != "" {
			t.Errorf("delivery.dead_lettered = %+v, want delivery %s of event %s, 1 attempt, last status 500", dl, mine[3].Delivery.ID, mine[3].Delivery.EventID)
		}
		_ = evs
	})
	// A stale completion of a delivery (its lease was rescued and the
	// delivery claimed again, by the same owner or another) and the current
	// lease's, at the same microsecond, in one batch or the current one in
	// an earlier batch: only the completion that moved the delivery raises
	// delivery.dead_lettered (and a 410's endpoint.disabled), whatever
	// their order.
	for _, tc := range []struct {
		name         string
		sameOwner    bool
		staleFirst   bool
		stale, cur   store.DeliveryState
		gone         bool // both answered 410: the endpoint is disabled
		twoBatches   bool // the current completion's batch, then the stale one's
		wantDead     int
		wantDisabled int
	}{
		{name: "BothDead/CurrentFirst/SameOwner", sameOwner: true, stale: store.DeliveryDead, cur: store.DeliveryDead, wantDead: 1},
		{name: "BothDead/StaleFirst/SameOwner", sameOwner: true, staleFirst: true, stale: store.DeliveryDead, cur: store.DeliveryDead, wantDead: 1},
		{name: "BothDead/CurrentFirst/OtherOwner", stale: store.DeliveryDead, cur: store.DeliveryDead, wantDead: 1},
		{name: "BothDead/StaleFirst/OtherOwner", staleFirst: true, stale: store.DeliveryDead, cur: store.DeliveryDead, wantDead: 1},
		{name: "BothGone/CurrentFirst/SameOwner", sameOwner: true, stale: store.DeliveryDead, cur: store.DeliveryDead, gone: true, wantDead: 1, wantDisabled: 1},
		{name: "BothGone/StaleFirst/SameOwner", sameOwner: true, staleFirst: true, stale: store.DeliveryDead, cur: store.DeliveryDead, gone: true, wantDead: 1, wantDisabled: 1},
		{name: "BothDead/TwoBatches/SameOwner", sameOwner: true, twoBatches: true, stale: store.DeliveryDead, cur: store.DeliveryDead, wantDead: 1},
		{name: "BothGone/TwoBatches/SameOwner", sameOwner: true, twoBatches: true, stale: store.DeliveryDead, cur: store.DeliveryDead, gone: true, wantDead: 1, wantDisabled: 1},
		{name: "StaleDeadCurrentRetry/CurrentFirst", sameOwner: true, stale: store.DeliveryDead, cur: store.DeliveryPending},
		{name: "StaleDeadCurrentRetry/StaleFirst", sameOwner: true, staleFirst: true, stale: store.DeliveryDead, cur: store.DeliveryPending},
	} {
		s.run(t, "DeadLetteredOnceForStaleAndCurrent/"+tc.name, func(t *testing.T, f *fixture) {
			f.seed(1, 1, base)
			old := f.claimOne("a", 30*time.Second, base)
			if n := f.rescue(at(time.Minute)); n != 1 {
				t.Fatalf("rescued %d, want 1", n)
			}
			owner := "b"
			if tc.sameOwner {
				owner = "a"
			}
			cur := f.claimOne(owner, 30*time.Second, at(time.Minute))
			now := at(62 * time.Second) // the same microsecond for both
			stale, current := attempt(old, tc.stale, now), attempt(cur, tc.cur, now)
			if tc.gone {
				for _, c := range []*store.Completion{&stale, &current} {
					c.Attempt.StatusCode, c.DisableEndpoint, c.DisableReason = 410, true, "gone"
				}
			}
			switch {
			case tc.twoBatches:
				f.complete(current)
				f.complete(stale)
			case tc.staleFirst:
				f.complete(stale, current)
			default:
				f.complete(current, stale)
			}
			d := f.getDelivery(cur.Delivery.ID)
			if d.State != tc.cur || d.Attempts != 1 || d.LeaseOwner != "" {
				t.Fatalf("delivery: state %s, attempts %d, lease %q; want %s, 1, none (moved by the current lease only)", d.State, d.Attempts, d.LeaseOwner, tc.cur)
			}
			var dead, disabled int
			for _, n := range f.allNotices() {
				switch n.Type {
				case store.NoticeDeliveryDeadLettered:
					dead++
					if n.DeliveryID != cur.Delivery.ID || n.Attempts != 1 {
						t.Errorf("delivery.dead_lettered = %+v, want delivery %s after 1 attempt", n, cur.Delivery.ID)
					}
				case store.NoticeEndpointDisabled:
					disabled++
				}
			}
			if dead != tc.wantDead || disabled != tc.wantDisabled {
				t.Fatalf("notices: %d delivery.dead_lettered, %d endpoint.disabled; want %d, %d", dead, disabled, tc.wantDead, tc.wantDisabled)
			}
		})
	}
}

// recoveredAfterEnable: an endpoint enabled (after a disable) while its
// failure streak had raised endpoint.failing raises endpoint.recovered at
// its first success, as it would without the enable; one enabled before
// any endpoint.failing raises nothing.
func (s suite) recoveredAfterEnable(t *testing.T) {
	s.recoveredAfter(t, func(f *fixture, e store.Endpoint) {
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointDisabled, Reason: "by operator", Now: at(2 * time.Hour)})
		f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(3 * time.Hour)})
	})
}

// recoveredAfterURLChange: a new URL starts a new failure streak (for
// --disable-after), but, as with an enable, a streak that had raised
// endpoint.failing still raises endpoint.recovered at the first success:
// changing the URL is how an owner most often fixes a failing endpoint,
// and its notice receiver must not be left with endpoint.failing alone.
// One changed before any endpoint.failing raises nothing.
func (s suite) recoveredAfterURLChange(t *testing.T) {
	s.recoveredAfter(t, func(f *fixture, e store.Endpoint) {
		url := e.URL + "/fixed"
		if _, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: e.ID, URL: &url, Now: at(2 * time.Hour)}); err != nil {
			f.t.Fatal(err)
		}
	})
}

// recoveredAfter runs, with store.FailingAfter failures and with one
// fewer, a failure streak of a new endpoint of acme (attempts from 1 h),
// change (between 2 h and 3 h), then two successes (from 4 h), and checks
// the notices: endpoint.failing then endpoint.recovered after a streak
// that raised endpoint.failing, none after a shorter one.
func (s suite) recoveredAfter(t *testing.T, change func(f *fixture, e store.Endpoint)) {
	for _, failures := range []int{store.FailingAfter, store.FailingAfter - 1} {
		s.run(t, fmt.Sprintf("%d_failures", failures), func(t *testing.T, f *fixture) {
			e := f.endpoint("acme")
			for range failures {
				f.publish("acme", "file.created", at(time.Second))
			}
			for i, c := range f.claim("w", 100, time.Hour, at(time.Minute)) {
				now := at(time.Hour + time.Duration(i)*time.Second)
				f.complete(failure(c, now, now, now.Add(time.Hour), 503, ""))
			}
			change(f, e)
			f.publish("acme", "file.created", at(3*time.Hour))
			f.publish("acme", "file.created", at(3*time.Hour))
			for i, c := range f.claim("w", 100, time.Hour, at(3*time.Hour+time.Minute)) {
				f.complete(attempt(c, store.DeliverySucceeded, at(4*time.Hour+time.Duration(i)*time.Second)))
			}
			var got []string
			for _, n := range f.allNotices() {
				if n.Type != "endpoint.created" {
					got = append(got, n.Type)
				}
			}
			want := []string{store.NoticeEndpointFailing, store.NoticeEndpointRecovered}
			if failures < store.FailingAfter {
				want = nil
			}
			diff(t, "notices", want, got)
		})
	}
}

// failingBeforeDisable: a failure streak that disables its endpoint raises
// endpoint.failing before endpoint.disabled, each exactly once, whatever
// DisableMinFailures is: below store.FailingAfter (1, 2) the failing notice
// comes with the disable (taken while the endpoint was still enabled);
// at or above it, at the FailingAfter-th failure as usual. Failures of
// attempts still in flight after the disable raise no second
// endpoint.failing, and the first success after an enable raises
// endpoint.recovered, as after any streak that raised endpoint.failing.
func (s suite) failingBeforeDisable(t *testing.T) {
	const after = time.Hour
	for _, minFailures := range []int{1, 2, store.FailingAfter, store.FailingAfter + 1} {
		for _, inFlight := range []int{0, store.FailingAfter} {
			s.run(t, fmt.Sprintf("min_%d_then_%d_in_flight", minFailures, inFlight), func(t *testing.T, f *fixture) {
				e := f.endpoint("acme")
				for range minFailures + inFlight {
					f.publish("acme", "file.created", base)
				}
				claims := f.claim("w", 100, 100*time.Hour, at(time.Minute))
				if len(claims) != minFailures+inFlight {
					t.Fatalf("claims: %d, want %d", len(claims), minFailures+inFlight)
				}
				since := at(time.Hour)
				var failingAt, disabledAt time.Time
				for i, c := range claims {
					started := since.Add(time.Duration(i) * time.Second)
					now := started.Add(after) // every failure is past DisableAfter
					cp := failure(c, started, now, at(1000*time.Hour), 503, "")
					cp.DisableAfter, cp.DisableMinFailures = after, minFailures
					f.complete(cp)
					if i+1 == min(minFailures, store.FailingAfter) {
						failingAt = now
					}
					if i+1 == minFailures {
						disabledAt = now
						if st := f.getEndpoint(e.ID).State; st != store.EndpointDisabled {
							t.Fatalf("after failure %d (min %d): endpoint %s, want disabled", i+1, minFailures, st)
						}
					}
				}
				var got []store.Notice
				for _, n := range f.allNotices() {
					if n.Type != store.NoticeEndpointCreated {
						got = append(got, n)
					}
				}
				types := func(ns []store.Notice) []string {
					var out []string
					for _, n := range ns {
						out = append(out, n.Type)
					}
					return out
				}
				if disabledAt.Equal(failingAt) {
					// Raised by one attempt: the second is written a
					// microsecond later (one endpoint's notices are at
					// strictly increasing times).
					disabledAt = disabledAt.Add(time.Microsecond)
				}
				diff(t, "notices after the streak", []string{store.NoticeEndpointFailing, store.NoticeEndpointDisabled}, types(got))
				if len(got) == 2 {
					checkTime(t, "endpoint.failing", got[0].At, failingAt)
					checkTime(t, "endpoint.disabled", got[1].At, disabledAt)
					if got[0].Endpoint.State != store.EndpointEnabled || got[1].Endpoint.State != store.EndpointDisabled {
						t.Errorf("snapshots: endpoint.failing of a %s endpoint, endpoint.disabled of a %s one; want enabled, disabled",
							got[0].Endpoint.State, got[1].Endpoint.State)
					}
				}
				f.setState(store.SetEndpointStateParams{ID: e.ID, State: store.EndpointEnabled, Now: at(200 * time.Hour)})
				f.publish("acme", "file.created", at(200*time.Hour))
				for i, c := range f.claim("w", 100, time.Hour, at(201*time.Hour)) {
					f.complete(attempt(c, store.DeliverySucceeded, at(202*time.Hour+time.Duration(i)*time.Second)))
				}
				got = got[:0]
				for _, n := range f.allNotices() {
					if n.Type != store.NoticeEndpointCreated {
						got = append(got, n)
					}
				}
				diff(t, "notices after an enable and a success",
					[]string{store.NoticeEndpointFailing, store.NoticeEndpointDisabled, store.NoticeEndpointRecovered}, types(got))
			})
		}
	}
}
