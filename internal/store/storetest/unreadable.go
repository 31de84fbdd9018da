package storetest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// unreadable: an endpoint whose stored values do not open with the store's
// key (a value sealed under a key no node holds after a rekey, or a
// corrupted one) never stops a claim: the claim returns the other
// endpoints' deliveries, leaves that endpoint's pending and unleased, and
// reports it (ClaimParams.Unreadable); ClaimParams.SkipEndpoints keeps a
// claim off an endpoint's deliveries; once the value opens again its
// deliveries are claimed as before.
func (s suite) unreadable(t *testing.T) {
	for _, column := range []string{"secrets", "headers"} {
		s.run(t, "LeftOutAndReported/"+column, func(t *testing.T, f *fixture) {
			bad := newEndpoint("acme")
			bad.Headers = map[string]string{"X-Team": "storage"}
			bad = f.createEndpoint(bad)
			mate := f.endpoint("acme") // the same tenant's other endpoint
			other := f.endpoint("globex")
			var want []string // the deliveries of mate and other
			for i := range 2 {
				for _, tenant := range []string{"acme", "globex"} {
					ev := f.publish(tenant, "file.created", at(time.Duration(i)*time.Second)).Event
					for _, ep := range []store.Endpoint{mate, other} {
						if ep.Tenant == tenant {
							want = append(want, f.deliveryFor(ev.ID, ep.ID).ID)
						}
					}
				}
			}
			restore := f.seal(column, bad.ID)
			// A read names the values that do not open and gives the rest
			// of the row (the API shows it, lets it be deleted or its
			// secrets replaced).
			wantValues := "secrets"
			if column == "headers" {
				wantValues = "headers.X-Team"
			}
			_, err := f.s.GetEndpoint(f.ctx, bad.ID)
			var read *store.UnreadableError
			if !errors.As(err, &read) || strings.Join(read.Values, ",") != wantValues || read.Tenant != "acme" || read.Endpoint.ID != bad.ID ||
				read.Endpoint.Tenant != "acme" || read.Endpoint.URL != bad.URL || (column == "headers") != (len(read.Endpoint.Secrets) == 1) ||
				column == "headers" && len(read.Endpoint.Headers) != 0 || column == "secrets" && read.Endpoint.Headers["X-Team"] != "storage" {
				t.Errorf("GetEndpoint with its %s under another key = %v (%+v); want an UnreadableError naming %s, with the rest of the endpoint", column, err, read, wantValues)
			}
			var met []store.UnreadableEndpoint
			now := at(time.Minute)
			cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 100, Lease: time.Minute, Now: now,
				Unreadable: func(u store.UnreadableEndpoint) { met = append(met, u) }})
			if err != nil {
				t.Fatalf("ClaimDeliveries with an endpoint whose %s do not open: %v; want the others' deliveries", column, err)
			}
			diff(t, "claimed (the other endpoints' deliveries)", sorted(want), sorted(claimIDs(cs)))
			for _, c := range cs {
				if c.Endpoint.ID != c.Delivery.EndpointID || len(c.Endpoint.Secrets) == 0 || c.Event.ID != c.Delivery.EventID {
					t.Errorf("claim %s: endpoint %q with %d secrets, event %q; want its own", c.Delivery.ID, c.Endpoint.ID, len(c.Endpoint.Secrets), c.Event.ID)
				}
			}
			if len(met) != 1 {
				t.Fatalf("Unreadable called %d times (%+v), want once for %s", len(met), met, bad.ID)
			}
			u := met[0]
			var ue *store.UnreadableError
			if u.ID != bad.ID || u.Tenant != "acme" || u.Deliveries != 2 || !u.OldestDue.Equal(base) || !errors.As(u.Err, &ue) || ue.EndpointID != bad.ID {
				t.Errorf("reported %+v; want endpoint %s of acme, 2 deliveries, oldest due %v, an UnreadableError", u, bad.ID, base)
			}
			// The reported error names the endpoint and the value once
			// each ("endpoint ep_…: secrets: secretbox: cannot decrypt:
			// …"), as the engine logs it, not "secrets: secrets: …"; so
			// does a read's error name the value once.
			word := map[string]string{"secrets": "secrets", "headers": "header "}[column]
			if msg := u.Err.Error(); strings.Count(msg, bad.ID) != 1 || strings.Count(msg, word) != 1 {
				t.Errorf("reported error %q: want the endpoint %s and %q named once each", msg, bad.ID, word)
			}
			if _, err := f.s.GetEndpoint(f.ctx, bad.ID); err == nil || strings.Count(err.Error(), word) != 1 {
				t.Errorf("GetEndpoint(%s) = %v; want an error naming %q once", bad.ID, err, word)
			}
			badDeliveries := f.listDeliveries(store.ListDeliveriesParams{EndpointID: bad.ID})
			if len(badDeliveries) != 2 {
				t.Fatalf("%d deliveries of %s, want 2", len(badDeliveries), bad.ID)
			}
			for _, d := range badDeliveries {
				d = f.getDelivery(d.ID)
				if d.State != store.DeliveryPending || d.LeaseOwner != "" || !d.LeaseUntil.IsZero() || d.Attempts != 0 || d.NextAttemptAt.After(at(time.Second)) {
					t.Errorf("delivery %s of the unreadable endpoint: state %s, lease %q until %v, attempts %d, due %v; want pending, unleased, unattempted, due as before",
						d.ID, d.State, d.LeaseOwner, d.LeaseUntil, d.Attempts, d.NextAttemptAt)
				}
			}
			f.expectNextDueAt(base) // they are still claimable

			// Without a callback the claim does not fail either.
			if cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 100, Lease: time.Minute, Now: now}); err != nil || len(cs) != 0 {
				t.Fatalf("second claim = %v, %v; want none, nil", claimIDs(cs), err)
			}
			// A claim that skips the endpoint takes the others' new
			// deliveries, and does not meet it.
			ev := f.publish("acme", "file.created", now).Event
			met = nil
			cs, err = f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 100, Lease: time.Minute, Now: now,
				SkipEndpoints: []string{bad.ID}, Unreadable: func(u store.UnreadableEndpoint) { met = append(met, u) }})
			if err != nil || len(met) != 0 {
				t.Fatalf("claim skipping %s: %v, reported %+v; want no error, nothing reported", bad.ID, err, met)
			}
			diff(t, "claimed skipping the endpoint", []string{f.deliveryFor(ev.ID, mate.ID).ID}, claimIDs(cs))

			// The value opens again (herald rekey with the old key): its
			// deliveries are claimed, with its values.
			restore()
			cs = f.claim("w", 100, time.Minute, now)
			if len(cs) != 3 {
				t.Fatalf("after the value opens again: claimed %d, want the endpoint's 3", len(cs))
			}
			for _, c := range cs {
				if c.Endpoint.ID != bad.ID || len(c.Endpoint.Secrets) != 1 || c.Endpoint.Headers["X-Team"] != "storage" {
					t.Errorf("claim %s after the value opens again: endpoint %+v", c.Delivery.ID, c.Endpoint)
				}
			}
		})
	}
	// A rotation replaces secrets that do not open only when asked to
	// (RotateSecretParams.ReplaceUnreadable) and when they are the only
	// values that do not open; the endpoint then reads again, with the new
	// secret alone. A revoke never replaces them.
	s.run(t, "RotateReplacesSecrets", func(t *testing.T, f *fixture) {
		ep := newEndpoint("acme")
		ep.Headers = map[string]string{"X-Team": "storage"}
		ep = f.createEndpoint(ep)
		hdr := newEndpoint("acme")
		hdr.Headers = map[string]string{"X-Team": "search"}
		hdr = f.createEndpoint(hdr)
		f.seal("secrets", ep.ID)
		f.seal("headers", hdr.ID)
		f.seal("secrets", hdr.ID)
		rotate := func(id string, replace bool) (store.Endpoint, error) {
			return f.s.RotateSecret(f.ctx, store.RotateSecretParams{ID: id, Secret: "whsec_new", PreviousExpiresAt: at(time.Hour), Now: at(time.Minute), ReplaceUnreadable: replace})
		}
		var u *store.UnreadableError
		if _, err := rotate(ep.ID, false); !errors.As(err, &u) {
			t.Errorf("rotation of secrets that do not open without ReplaceUnreadable = %v; want the UnreadableError", err)
		}
		if _, err := f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: ep.ID, SecretID: store.SecretID("whsec_x"), Now: at(time.Minute)}); !errors.As(err, &u) {
			t.Errorf("revoke on secrets that do not open = %v; want the UnreadableError", err)
		}
		if _, err := rotate(hdr.ID, true); !errors.As(err, &u) {
			t.Errorf("rotation with ReplaceUnreadable of an endpoint whose header values do not open either = %v; want the UnreadableError", err)
		}
		got, err := rotate(ep.ID, true)
		if err != nil || len(got.Secrets) != 1 || got.Secrets[0].Value != "whsec_new" || got.Headers["X-Team"] != "storage" {
			t.Fatalf("rotation with ReplaceUnreadable = %+v, %v; want the endpoint with the new secret alone", got, err)
		}
		if e := f.getEndpoint(ep.ID); len(e.Secrets) != 1 || e.Secrets[0].Value != "whsec_new" || !e.UpdatedAt.Equal(at(time.Minute)) {
			t.Errorf("endpoint after the replacement: %+v", e)
		}
	})
	// Pausing, resuming, disabling and enabling need none of an
	// endpoint's sealed values: they work on one whose values do not open
	// (they were refused only because the change read the whole row),
	// answering the endpoint as a list shows it (without those values,
	// named in Unreadable), holding and releasing its deliveries and
	// recording the enable's notice; its values stay as they were.
	s.run(t, "StateChanges", func(t *testing.T, f *fixture) {
		for i, columns := range [][]string{{"secrets"}, {"headers"}, {"headers", "secrets"}} {
			tenant := fmt.Sprintf("t%d", i) // a tenant per case: its deliveries alone
			ep := newEndpoint(tenant)
			ep.Headers = map[string]string{"X-Team": "storage"}
			ep = f.createEndpoint(ep)
			f.publish(tenant, "file.created", at(0))
			f.publish(tenant, "file.created", at(time.Second))
			var values []string
			for _, c := range columns {
				f.seal(c, ep.ID)
				values = append(values, map[string]string{"secrets": "secrets", "headers": "headers.X-Team"}[c])
			}
			slices.Sort(values)
			what := strings.Join(columns, "+") + " do not open"
			change := func(state store.EndpointState, notice string, now time.Time, wantMoved int) {
				t.Helper()
				got, moved, err := f.s.SetEndpointState(f.ctx, store.SetEndpointStateParams{ID: ep.ID, State: state, Reason: "by operator", Notice: notice, Now: now})
				if err != nil || got.ID != ep.ID || got.Tenant != tenant || got.State != state || !got.UpdatedAt.Equal(now) ||
					!slices.Equal(got.Unreadable, values) || moved != wantMoved {
					t.Fatalf("%s: SetEndpointState(%s) = %+v, %d, %v; want the endpoint %s without its values (Unreadable %v), %d deliveries moved",
						what, state, got, moved, err, state, values, wantMoved)
				}
				_, err = f.s.GetEndpoint(f.ctx, ep.ID)
				var u *store.UnreadableError
				if !errors.As(err, &u) || u.Endpoint.State != state || !slices.Equal(u.Values, values) {
					t.Errorf("%s: GetEndpoint after SetEndpointState(%s) = %v (%+v); want it %s, its values still not opening", what, state, err, u, state)
				}
			}
			change(store.EndpointPaused, "", at(time.Minute), 2)
			for _, d := range f.listDeliveries(store.ListDeliveriesParams{EndpointID: ep.ID}) {
				if d.State != store.DeliveryPaused {
					t.Errorf("%s: delivery %s after the pause: %s, want paused", what, d.ID, d.State)
				}
			}
			change(store.EndpointEnabled, "", at(2*time.Minute), 2)
			change(store.EndpointDisabled, "", at(3*time.Minute), 2)
			change(store.EndpointEnabled, "endpoint.enabled", at(4*time.Minute), 2)
			ns, err := f.s.PendingNotices(f.ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, n := range ns {
				found = found || n.Endpoint.ID == ep.ID && n.Type == "endpoint.enabled"
			}
			if !found {
				t.Errorf("%s: no endpoint.enabled notice after the enable: %+v", what, ns)
			}
			for _, d := range f.listDeliveries(store.ListDeliveriesParams{EndpointID: ep.ID}) {
				if d.State != store.DeliveryPending {
					t.Errorf("%s: delivery %s after the enable: %s, want pending", what, d.ID, d.State)
				}
			}
		}
	})
	// A list shows every endpoint, those whose sealed values do not open
	// too: without those values, each named in Endpoint.Unreadable, as
	// GetEndpoint's UnreadableError has them; its pages and cursors are
	// those of any list (a review found one such endpoint failing the
	// whole list).
	s.run(t, "Listed", func(t *testing.T, f *fixture) {
		first := f.endpoint("acme")
		sec := newEndpoint("acme")
		sec.Headers = map[string]string{"X-Team": "storage"}
		sec = f.createEndpoint(sec)
		hdr := newEndpoint("acme")
		hdr.Headers = map[string]string{"X-Team": "search"}
		hdr = f.createEndpoint(hdr)
		last := f.endpoint("acme")
		other := newEndpoint("globex")
		other.Headers = map[string]string{"X-Env": "prod"}
		other = f.createEndpoint(other)
		f.seal("secrets", sec.ID)
		f.seal("headers", hdr.ID)
		f.seal("headers", other.ID)
		f.seal("secrets", other.ID)
		_, err := f.s.GetEndpoint(f.ctx, hdr.ID)
		if u := (*store.UnreadableError)(nil); !errors.As(err, &u) || !slices.Equal(u.Endpoint.Unreadable, []string{"headers.X-Team"}) {
			t.Errorf("GetEndpoint(%s) = %v; want an UnreadableError whose Endpoint names headers.X-Team in Unreadable", hdr.ID, err)
		}
		pg, err := f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "acme", ListParams: store.ListParams{Limit: 10}})
		if err != nil {
			t.Fatalf("ListEndpoints(acme) with endpoints whose values do not open: %v; want every endpoint", err)
		}
		diff(t, "ListEndpoints(acme) ids", []string{last.ID, hdr.ID, sec.ID, first.ID}, idsOf(pg.Data, endpointID))
		for _, e := range pg.Data {
			var want []string
			switch e.ID {
			case sec.ID:
				want = []string{"secrets"}
				if len(e.Secrets) != 0 || e.Headers["X-Team"] != "storage" || e.URL != sec.URL {
					t.Errorf("listed %s (secrets do not open): %+v; want it without secrets, with its header", e.ID, e)
				}
			case hdr.ID:
				want = []string{"headers.X-Team"}
				if len(e.Secrets) != 1 || len(e.Headers) != 0 || e.URL != hdr.URL {
					t.Errorf("listed %s (header value does not open): %+v; want it with its secret, without the header", e.ID, e)
				}
			default:
				if len(e.Secrets) != 1 {
					t.Errorf("listed %s: %d secrets, want 1", e.ID, len(e.Secrets))
				}
			}
			diff(t, "listed "+e.ID+" Unreadable", want, e.Unreadable)
		}
		for _, limit := range []int{1, 2, 3} {
			got := collect(t, limit, func(cursor string) (store.Page[store.Endpoint], error) {
				return f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{Tenant: "acme", ListParams: store.ListParams{Limit: limit, Cursor: cursor}})
			}, endpointID)
			diff(t, fmt.Sprintf("ListEndpoints(acme, limit %d) ids", limit), []string{last.ID, hdr.ID, sec.ID, first.ID}, idsOf(got, endpointID))
		}
		pg, err = f.s.ListEndpoints(f.ctx, store.ListEndpointsParams{ListParams: store.ListParams{Limit: 10}})
		if err != nil || len(pg.Data) != 5 || pg.Data[0].ID != other.ID || !slices.Equal(pg.Data[0].Unreadable, []string{"headers.X-Env", "secrets"}) {
			t.Errorf("ListEndpoints(every tenant) = %+v, %v; want 5 endpoints, %s first naming headers.X-Env and secrets", pg.Data, err, other.ID)
		}
	})
	// An update that replaces the custom headers whole replaces header
	// values that do not open, when asked to
	// (UpdateEndpointParams.ReplaceUnreadable) and when they are the only
	// values that do not open; any other update of such an endpoint fails
	// with the UnreadableError and changes nothing.
	s.run(t, "UpdateReplacesHeaders", func(t *testing.T, f *fixture) {
		mk := func(headers map[string]string, columns ...string) store.Endpoint {
			e := newEndpoint("acme")
			e.Headers = headers
			e = f.createEndpoint(e)
			for _, c := range columns {
				f.seal(c, e.ID)
			}
			return e
		}
		hdr := mk(map[string]string{"X-Team": "storage", "X-Env": "prod"}, "headers")
		both := mk(map[string]string{"X-Team": "search"}, "headers", "secrets")
		sec := mk(map[string]string{"X-Team": "billing"}, "secrets")
		desc, headers := "changed", map[string]string{"X-Token": "t0k3n"}
		update := func(id string, headers *map[string]string, replace bool) (store.Endpoint, error) {
			return f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: id, Description: &desc, Headers: headers, Now: at(time.Hour), ReplaceUnreadable: replace})
		}
		unchanged := func(what string, ep store.Endpoint, values string) {
			t.Helper()
			_, err := f.s.GetEndpoint(f.ctx, ep.ID)
			var u *store.UnreadableError
			if !errors.As(err, &u) || strings.Join(u.Values, ",") != values || u.Endpoint.Description != ep.Description || !u.Endpoint.UpdatedAt.Equal(ep.UpdatedAt) {
				t.Errorf("%s: GetEndpoint(%s) = %v (%+v); want it unchanged, naming %s", what, ep.ID, err, u, values)
			}
		}
		for _, c := range []struct {
			name    string
			ep      store.Endpoint
			headers *map[string]string
			replace bool
			values  string
		}{
			{"an update not naming headers", hdr, nil, false, "headers.X-Env,headers.X-Team"},
			{"an update not naming headers, ReplaceUnreadable", hdr, nil, true, "headers.X-Env,headers.X-Team"},
			{"an update of the headers without ReplaceUnreadable", hdr, &headers, false, "headers.X-Env,headers.X-Team"},
			{"an update of the headers when the secrets do not open either", both, &headers, true, "headers.X-Team,secrets"},
			{"an update of the headers when the secrets do not open", sec, &headers, true, "secrets"},
		} {
			var u *store.UnreadableError
			if got, err := update(c.ep.ID, c.headers, c.replace); !errors.As(err, &u) {
				t.Errorf("%s = %+v, %v; want the UnreadableError", c.name, got, err)
			}
			unchanged(c.name, c.ep, c.values)
		}
		got, err := update(hdr.ID, &headers, true)
		if err != nil || got.Description != desc || !maps.Equal(got.Headers, headers) || len(got.Secrets) != 1 || got.Secrets[0].Value != hdr.Secrets[0].Value || got.Unreadable != nil {
			t.Fatalf("an update replacing the headers with ReplaceUnreadable = %+v, %v; want the endpoint with the new headers alone, its secret kept", got, err)
		}
		if e := f.getEndpoint(hdr.ID); !maps.Equal(e.Headers, headers) || e.Description != desc || !e.UpdatedAt.Equal(at(time.Hour)) {
			t.Errorf("endpoint after the replacement: %+v", e)
		}
	})
	// A source whose sealed configuration does not open (sealed under a
	// key this node lacks, or damaged) is read as an UnreadableSourceError
	// carrying the rest of the row, listed with the marker instead of
	// failing the list (a review found one such source failing every list
	// of sources), replaced by an update that gives a configuration, and
	// deleted; an update that gives none changes nothing.
	s.run(t, "Source", func(t *testing.T, f *fixture) {
		var ps []store.CreateSourceParams
		for _, name := range []string{"first", "bad", "last", "gone"} {
			p := newSource(name)
			if _, err := f.s.CreateSource(f.ctx, p); err != nil {
				t.Fatalf("CreateSource(%s): %v", name, err)
			}
			ps = append(ps, p)
		}
		first, bad, last, gone := ps[0].Source, ps[1].Source, ps[2].Source, ps[3].Source
		f.sealSource(bad.ID)
		f.sealSource(gone.ID)
		_, err := f.s.GetSource(f.ctx, bad.ID)
		var u *store.UnreadableSourceError
		if !errors.As(err, &u) || u.SourceID != bad.ID || u.Source.ID != bad.ID || u.Source.Name != "bad" || u.Source.EndpointID != ps[1].Endpoint.ID ||
			u.Source.Config != nil || !slices.Equal(u.Source.Unreadable, []string{store.SourceConfigValue}) || !u.Source.CreatedAt.Equal(base) {
			t.Fatalf("GetSource with its config under another key = %v (%+v); want an UnreadableSourceError with the rest of the row, Unreadable [config]", err, u)
		}
		if msg := err.Error(); strings.Count(msg, bad.ID) != 1 || strings.Contains(msg, "unavailable") {
			t.Errorf("GetSource error %q: want the source %s named once, and no outage", msg, bad.ID)
		}
		pg, err := f.s.ListSources(f.ctx, store.ListParams{Limit: 10})
		if err != nil {
			t.Fatalf("ListSources with a source whose config does not open: %v; want every source", err)
		}
		srcID := func(s store.Source) string { return s.ID }
		wantIDs := []string{gone.ID, last.ID, bad.ID, first.ID}
		diff(t, "ListSources ids", wantIDs, idsOf(pg.Data, srcID))
		for _, got := range pg.Data {
			switch got.ID {
			case bad.ID, gone.ID:
				if got.Config != nil || !slices.Equal(got.Unreadable, []string{store.SourceConfigValue}) || got.EndpointID == "" {
					t.Errorf("listed %s (config does not open): %+v; want it without config, Unreadable [config]", got.ID, got)
				}
			default:
				if got.Unreadable != nil || len(got.Config) == 0 {
					t.Errorf("listed %s: %+v; want its config, no marker", got.ID, got)
				}
			}
		}
		for _, limit := range []int{1, 2, 3} {
			all := collect(t, limit, func(cursor string) (store.Page[store.Source], error) {
				return f.s.ListSources(f.ctx, store.ListParams{Limit: limit, Cursor: cursor})
			}, srcID)
			diff(t, fmt.Sprintf("ListSources(limit %d) ids", limit), wantIDs, idsOf(all, srcID))
		}
		// An update without a configuration cannot seal the one it cannot
		// open again: refused, nothing changed.
		name := "renamed"
		if got, err := f.s.UpdateSource(f.ctx, store.UpdateSourceParams{ID: bad.ID, Name: &name, Now: at(time.Hour)}); !errors.As(err, &u) {
			t.Errorf("UpdateSource(name only) of a source whose config does not open = %+v, %v; want the UnreadableSourceError", got, err)
		}
		if _, err := f.s.GetSource(f.ctx, bad.ID); !errors.As(err, &u) || u.Source.Name != "bad" || !u.Source.UpdatedAt.Equal(base) {
			t.Errorf("after the refused update: %v (%+v); want it unchanged", err, u)
		}
		// One that gives the configuration replaces it.
		cfg := []byte(`{"scheme":"github","secrets":["replaced-provider-secret"]}`)
		got, err := f.s.UpdateSource(f.ctx, store.UpdateSourceParams{ID: bad.ID, Name: &name, Config: &cfg, Now: at(time.Hour)})
		if err != nil || string(got.Config) != string(cfg) || got.Name != name || got.Unreadable != nil {
			t.Fatalf("UpdateSource with a new config of a source whose config does not open = %+v, %v; want it replaced", got, err)
		}
		if got, err := f.s.GetSource(f.ctx, bad.ID); err != nil || string(got.Config) != string(cfg) || !got.UpdatedAt.Equal(at(time.Hour)) {
			t.Errorf("GetSource after the replacement = %+v, %v", got, err)
		}
		// A delete needs none of it.
		if err := f.s.DeleteSource(f.ctx, gone.ID); err != nil {
			t.Fatalf("DeleteSource of a source whose config does not open: %v", err)
		}
		if _, err := f.s.GetEndpoint(f.ctx, ps[3].Endpoint.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("its forwarding endpoint after the delete: %v; want ErrNotFound", err)
		}
	})
	// SkipEndpoints holds in every part of a claim: the round, the fill,
	// and the fills of a claim that also skips tenants.
	s.run(t, "SkipEndpoints", func(t *testing.T, f *fixture) {
		a1, a2 := f.endpoint("a"), f.endpoint("a")
		b1, b2 := f.endpoint("b"), f.endpoint("b")
		c1 := f.endpoint("c")
		for i := range 3 {
			for _, tenant := range []string{"a", "b", "c"} {
				f.publish(tenant, "file.created", at(time.Duration(i)*time.Second))
			}
		}
		byEndpoint := func(cs []store.Claim) map[string]int {
			n := map[string]int{}
			for _, c := range cs {
				n[c.Delivery.EndpointID]++
			}
			return n
		}
		for _, c := range []struct {
			name                 string
			limit                int
			skipTenants, skipEPs []string
			want                 map[string]int
		}{
			{"round and fill", 100, nil, []string{a1.ID, b2.ID}, map[string]int{a2.ID: 3, b1.ID: 3, c1.ID: 3}},
			{"round only", 3, nil, []string{a1.ID, b2.ID}, map[string]int{a2.ID: 1, b1.ID: 1, c1.ID: 1}},
			{"skipping a tenant too", 100, []string{"c"}, []string{a1.ID, b2.ID}, map[string]int{a2.ID: 3, b1.ID: 3}},
			{"skipping every endpoint of a tenant", 100, []string{"c"}, []string{a1.ID, a2.ID, b2.ID}, map[string]int{b1.ID: 3}},
		} {
			owner := "w-" + c.name
			cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: owner, Limit: c.limit, Lease: time.Minute, Now: at(time.Hour),
				SkipTenants: c.skipTenants, SkipEndpoints: c.skipEPs})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			diff(t, c.name+": claims by endpoint", c.want, byEndpoint(cs))
			for _, cl := range cs {
				if slices.Contains(c.skipEPs, cl.Delivery.EndpointID) || slices.Contains(c.skipTenants, cl.Delivery.Tenant) {
					t.Errorf("%s: claimed %s of skipped endpoint %s (tenant %s)", c.name, cl.Delivery.ID, cl.Delivery.EndpointID, cl.Delivery.Tenant)
				}
			}
			// Give them back for the next case.
			var back []store.Completion
			for _, cl := range cs {
				back = append(back, store.Completion{DeliveryID: cl.Delivery.ID, EndpointID: cl.Delivery.EndpointID, Owner: owner,
					LeaseUntil: cl.Delivery.LeaseUntil, Deferred: true, NextAttemptAt: cl.Delivery.NextAttemptAt, Now: at(time.Hour)})
			}
			f.complete(back...)
		}
	})
	// A claim that skips endpoints while another claim of the same owner,
	// made at the same clock reading, still holds its leases: the second
	// claim's fill takes what the first left, not less by the first's
	// count (PostgreSQL once found "its own" leases by owner and lease end,
	// and two claims of one owner at one reading shared both, so the fill
	// counted the first claim's rows as its own and took nothing: with the
	// round on the skipped endpoint's tenant, the other tenant's due
	// delivery was left pending and the claimer slept).
	s.run(t, "SkipEndpointsBesideAnotherClaimOfTheOwner", func(t *testing.T, f *fixture) {
		f.endpoint("0")
		skipped := f.endpoint("a")
		other := f.endpoint("b")
		for _, tenant := range []string{"0", "a", "b"} {
			f.publish(tenant, "file.created", at(0))
		}
		for _, skipTenants := range [][]string{nil, {"zz"}} {
			owner := fmt.Sprintf("w-%d", len(skipTenants))
			now := at(time.Hour)
			first, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: owner, Limit: 1, Lease: time.Minute, Now: now})
			if err != nil || len(first) != 1 || first[0].Delivery.Tenant != "0" {
				t.Fatalf("first claim = %+v, %v; want tenant 0's delivery", first, err)
			}
			second, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: owner, Limit: 1, Lease: time.Minute, Now: now,
				SkipTenants: skipTenants, SkipEndpoints: []string{skipped.ID}})
			if err != nil || len(second) != 1 || second[0].Delivery.EndpointID != other.ID {
				t.Errorf("skipping tenants %v: second claim of the owner at the same reading = %+v, %v; want the delivery of %s (tenant b)", skipTenants, second, err, other.ID)
			}
			var back []store.Completion
			for _, cl := range append(first, second...) {
				back = append(back, store.Completion{DeliveryID: cl.Delivery.ID, EndpointID: cl.Delivery.EndpointID, Owner: owner,
					LeaseUntil: cl.Delivery.LeaseUntil, Deferred: true, NextAttemptAt: cl.Delivery.NextAttemptAt, Now: now})
			}
			f.complete(back...)
		}
	})
}

// seal makes the sealed column ("secrets" or "headers") of endpoint id a
// value the store's key does not open (sealed under another key, as far as
// the store can tell) and returns the function that puts the original back
// (as herald rekey with the old key would move it to the store's key). It
// skips the test when the driver cannot rewrite sealed values.
func (f *fixture) seal(column, id string) (restore func()) {
	f.t.Helper()
	restore = f.sealIn("endpoints", column, id)
	if _, err := f.s.GetEndpoint(f.ctx, id); err == nil {
		f.t.Fatalf("GetEndpoint(%s) with endpoints.%s under another key: no error", id, column)
	}
	return restore
}

// sealSource makes the sealed configuration of source id a value the
// store's key does not open (sealed under another key, as far as the store
// can tell). It skips the test when the driver cannot rewrite sealed
// values.
func (f *fixture) sealSource(id string) {
	f.t.Helper()
	f.sealIn("sources", "config", id)
}

// sealIn makes the sealed value of table.column in row id one that no key
// made (every member of a column of members, such as an endpoint's
// headers) and returns the function that puts the original back; it skips
// the test when the driver cannot rewrite sealed values.
func (f *fixture) sealIn(table, column, id string) (restore func()) {
	f.t.Helper()
	sealed := f.s.Capabilities().Sealed
	if sealed == nil {
		f.t.Skip("the driver declares no Sealed: no way to store a value under another key")
	}
	var c store.SealedColumn
	for _, sc := range store.SealedColumns {
		if sc.Table == table && sc.Column == column {
			c = sc
		}
	}
	old, ok, err := sealed.SealedValue(f.ctx, c, id)
	if err != nil || !ok {
		f.t.Fatalf("SealedValue(%s.%s, %s) = %v, %v", table, column, id, ok, err)
	}
	// 12 bytes of nonce and a ciphertext with its 16-byte tag that no key
	// made.
	foreign := "enc:v1:" + base64.StdEncoding.EncodeToString([]byte("a value sealed under another key"))
	v := foreign
	if c.Member != nil {
		var m map[string]string
		if err := json.Unmarshal([]byte(old), &m); err != nil || len(m) == 0 {
			f.t.Fatalf("%s.%s of %s = %q: want a JSON object with members", table, column, id, old)
		}
		for k := range m {
			m[k] = foreign
		}
		b, _ := json.Marshal(m)
		v = string(b)
	}
	replace := func(from, to string) {
		f.t.Helper()
		if ok, err := sealed.ReplaceSealed(f.ctx, c, id, from, to); err != nil || !ok {
			f.t.Fatalf("ReplaceSealed(%s.%s, %s) = %v, %v", table, column, id, ok, err)
		}
	}
	replace(old, v)
	return func() { replace(v, old) }
}
