package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// Corrupt sets column of the row id of table to value, a literal of the
// column's type that Herald never writes there (a damaged database or a
// hand edit), outside the store's own writes.
type Corrupt func(t *testing.T, table, column, id, value string)

// PoisonedValue is a value of an events column that no claim can decode.
type PoisonedValue struct{ Column, Value string }

// poisonedEventValues are the PoisonedValues of every driver (PostgreSQL's
// headers column is jsonb: valid JSON, but not an object of strings).
var poisonedEventValues = []PoisonedValue{
	{"version_bodies", `{not json`},
	{"version_bodies", `{"one":{}}`},
	{"headers", `["not","an","object"]`},
	{"headers", `{"X-Count":1}`},
}

// Poisoned runs the subtests about a claim that meets a delivery whose
// event row does not decode (store.PoisonedRows): the claim does not
// fail; it returns every other delivery, dead-letters that one with a
// last_error naming the stored event, reports it (ClaimParams.Poisoned),
// records delivery.dead_lettered, and leaves the endpoint's failure
// streak and state alone. newStore returns a fresh, empty, migrated store
// (opened as Herald opens it) and the driver's Corrupt for it; more are
// values only the driver's column types allow (SQLite: text that is not
// JSON in headers), tried besides the shared ones.
func Poisoned(t *testing.T, newStore func(t *testing.T) (store.Store, Corrupt), more ...PoisonedValue) {
	t.Helper()
	for _, v := range append(slices.Clone(poisonedEventValues), more...) {
		t.Run("Event/"+v.Column+"="+v.Value, func(t *testing.T) {
			t.Parallel()
			s, corrupt := newStore(t)
			f := &fixture{t: t, ctx: t.Context(), s: s}
			ep := f.endpoint("acme")
			mate := f.endpoint("acme")
			other := f.endpoint("globex")
			bad := f.publish("acme", "file.created", base).Event
			var want []string // every other delivery
			for i := 1; i <= 2; i++ {
				for _, tenant := range []string{"acme", "globex"} {
					ev := f.publish(tenant, "file.created", at(time.Duration(i)*time.Second)).Event
					for _, e := range []store.Endpoint{ep, mate, other} {
						if e.Tenant == tenant {
							want = append(want, f.deliveryFor(ev.ID, e.ID).ID)
						}
					}
				}
			}
			poisoned := []string{f.deliveryFor(bad.ID, ep.ID).ID, f.deliveryFor(bad.ID, mate.ID).ID}
			corrupt(t, "events", v.Column, bad.ID, v.Value)

			now := at(time.Minute)
			var met []store.PoisonedDelivery
			cs, err := s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 100, Lease: time.Minute, Now: now,
				Poisoned: func(pd store.PoisonedDelivery) { met = append(met, pd) }})
			if err != nil {
				t.Fatalf("ClaimDeliveries with event %s's %s = %s: %v; want the other deliveries", bad.ID, v.Column, v.Value, err)
			}
			diff(t, "claimed (every delivery of a readable event)", sorted(want), sorted(claimIDs(cs)))
			for _, c := range cs {
				if c.Event.ID != c.Delivery.EventID || c.Endpoint.ID != c.Delivery.EndpointID {
					t.Errorf("claim %s: event %q, endpoint %q; want its own", c.Delivery.ID, c.Event.ID, c.Endpoint.ID)
				}
			}
			diff(t, "reported as poisoned", sorted(poisoned), sorted(mapSlice(met, func(pd store.PoisonedDelivery) string { return pd.ID })))
			prefix := "stored event " + bad.ID + " could not be read: "
			for _, pd := range met {
				var pe *store.PoisonedError
				if pd.EventID != bad.ID || pd.Tenant != "acme" || pd.OwnRow || !errors.As(pd.Err, &pe) || pe.Row != "event" || pe.ID != bad.ID ||
					!strings.HasPrefix(pd.Err.Error(), prefix) {
					t.Errorf("reported %+v; want event %s of acme, a PoisonedError of the event, message starting %q", pd, bad.ID, prefix)
				}
			}
			for _, id := range poisoned {
				d := f.getDelivery(id)
				if d.State != store.DeliveryDead || !strings.HasPrefix(d.LastError, prefix) || len(d.LastError) == len(prefix) ||
					d.Attempts != 0 || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() || !d.UpdatedAt.Equal(now) {
					t.Errorf("poisoned delivery %s: state %s, last_error %q, attempts %d, lease %q until %v, updated %v; want dead, %q…, 0 attempts, no lease, updated %v",
						id, d.State, d.LastError, d.Attempts, d.LeaseOwner, d.LeaseUntil, d.UpdatedAt, prefix, now)
				}
				if as := f.attempts(id); len(as) != 0 {
					t.Errorf("poisoned delivery %s has %d attempts, want none", id, len(as))
				}
			}
			// Not the endpoints' fault: no failure streak, still enabled.
			for _, e := range []store.Endpoint{ep, mate} {
				if got := f.getEndpoint(e.ID); got.State != store.EndpointEnabled || !got.FailingSince.IsZero() {
					t.Errorf("endpoint %s after its delivery was dead-lettered: state %s, failing since %v; want enabled, no streak", e.ID, got.State, got.FailingSince)
				}
			}
			// delivery.dead_lettered, as for any dead letter.
			var noticed []string
			for _, n := range f.allNotices() {
				if n.Type != store.NoticeDeliveryDeadLettered {
					continue
				}
				noticed = append(noticed, n.DeliveryID)
				if n.EventID != bad.ID || !strings.HasPrefix(n.LastError, prefix) || n.Attempts != 0 {
					t.Errorf("notice %+v: want event %s, last_error %q…, 0 attempts", n, bad.ID, prefix)
				}
			}
			diff(t, "delivery.dead_lettered notices", sorted(poisoned), sorted(noticed))
			// Counted in each endpoint's rollups as a dead letter, as a dead
			// letter after an attempt is (no attempt, no failure): in every
			// window, at the claim's time (a review found them in none).
			for _, e := range []store.Endpoint{ep, mate, other} {
				want := int64(1)
				if e.ID == other.ID {
					want = 0
				}
				for _, window := range store.StatsWindows {
					st, err := s.EndpointStats(f.ctx, store.EndpointStatsParams{EndpointID: e.ID, Window: window, Now: now})
					if err != nil || st.DeadLetters() != want || st.Attempts() != 0 || st.Failures() != 0 {
						t.Errorf("EndpointStats(%s, %s) = %d dead letters, %d attempts, %d failures, %v; want %d dead letters, no attempt, no failure",
							e.ID, window, st.DeadLetters(), st.Attempts(), st.Failures(), err, want)
					}
				}
			}
			for _, pd := range met {
				if pd.Unwritten {
					t.Errorf("reported %s as not written; it was dead-lettered", pd.ID)
				}
			}

			// Nothing of them is left to claim.
			if cs, err := s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w2", Limit: 100, Lease: time.Minute, Now: at(time.Hour)}); err != nil || len(cs) != 0 {
				t.Fatalf("second claim = %v, %v; want none, nil", claimIDs(cs), err)
			}
		})
	}
}
