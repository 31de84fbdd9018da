package storetest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herald-webhooks/herald/internal/store"
)

// capabilities runs each method of the optional capabilities a driver
// declares (store.Capabilities); a subtest of a capability the driver
// lacks is skipped. Listen and LiveNodes are also run by
// Lifecycle/Capabilities.
func (s suite) capabilities(t *testing.T) {
	s.run(t, "Membership/HeartbeatAndLeave", func(t *testing.T, f *fixture) {
		caps := f.s.Capabilities()
		m := caps.Membership
		if m == nil {
			t.Skip("the driver declares no Membership")
		}
		// Intervals of minutes: no node of this test expires while it runs
		// (NodeTTLIntervals of its own interval).
		b := store.Node{ID: "node_b", HeartbeatInterval: time.Minute, AttemptTimeout: 10 * time.Second}
		a := store.Node{ID: "node_a", HeartbeatInterval: 2 * time.Minute, AttemptTimeout: 5 * time.Second}
		heartbeat := func(self store.Node, want ...store.Node) {
			t.Helper()
			live, err := m.Heartbeat(f.ctx, self)
			if err != nil {
				t.Fatalf("Heartbeat(%s): %v", self.ID, err)
			}
			if d := cmp.Diff(want, live); d != "" {
				t.Errorf("Heartbeat(%s): live nodes (-want +got):\n%s", self.ID, d)
			}
		}
		liveNodes := func(want ...string) {
			t.Helper()
			if caps.Nodes == nil {
				return
			}
			ids, err := caps.Nodes.LiveNodes(f.ctx)
			if err != nil {
				t.Fatalf("LiveNodes: %v", err)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("LiveNodes = %v, want %v", ids, want)
			}
		}
		liveNodes()
		heartbeat(b, b) // alone: the caller itself
		heartbeat(a, a, b)
		liveNodes("node_a", "node_b")
		// A heartbeat records the node's current interval and timeout:
		// the others see them.
		b2 := store.Node{ID: "node_b", HeartbeatInterval: 30 * time.Second, AttemptTimeout: 20 * time.Second}
		heartbeat(b2, a, b2)
		heartbeat(a, a, b2)

		if err := m.Leave(f.ctx, "node_a"); err != nil {
			t.Fatalf("Leave(node_a): %v", err)
		}
		liveNodes("node_b")
		heartbeat(b2, b2)
		// Leaving again, or without a heartbeat, is not an error.
		if err := m.Leave(f.ctx, "node_a"); err != nil {
			t.Errorf("Leave(node_a) again: %v", err)
		}
		if err := m.Leave(f.ctx, "node_never_seen"); err != nil {
			t.Errorf("Leave of a node without a heartbeat: %v", err)
		}
		liveNodes("node_b")
		// A node that left and beats again is live again.
		heartbeat(a, a, b2)
	})

	s.run(t, "Membership/Invalid", func(t *testing.T, f *fixture) {
		caps := f.s.Capabilities()
		m := caps.Membership
		if m == nil {
			t.Skip("the driver declares no Membership")
		}
		for _, n := range []store.Node{
			{ID: "", HeartbeatInterval: time.Minute, AttemptTimeout: time.Second},
			{ID: "node_x", HeartbeatInterval: 0, AttemptTimeout: time.Second},
			{ID: "node_x", HeartbeatInterval: -time.Second, AttemptTimeout: time.Second},
			{ID: "node_x", HeartbeatInterval: time.Minute, AttemptTimeout: 0},
			{ID: "node_x", HeartbeatInterval: time.Minute, AttemptTimeout: -time.Second},
		} {
			_, err := m.Heartbeat(f.ctx, n)
			wantErr(t, "Heartbeat("+n.ID+", "+n.HeartbeatInterval.String()+", "+n.AttemptTimeout.String()+")", err, store.ErrInvalid)
		}
		// Nothing was recorded: a valid node is alone.
		ok := store.Node{ID: "node_ok", HeartbeatInterval: time.Minute, AttemptTimeout: time.Second}
		if live, err := m.Heartbeat(f.ctx, ok); err != nil || !slices.Equal(live, []store.Node{ok}) {
			t.Errorf("Heartbeat after the refused ones = %v, %v; want only %s", live, err, ok.ID)
		}
	})

	s.run(t, "Exclusive/KeepsOwnLeases", func(t *testing.T, f *fixture) {
		ex := f.s.Capabilities().Exclusive
		if ex == nil {
			t.Skip("the driver declares no Exclusive")
		}
		f.endpoint("acme")
		f.publish("acme", "file.created", base)
		if err := ex.ClaimExclusively(f.ctx); err != nil {
			t.Fatalf("ClaimExclusively on a store no other process uses: %v", err)
		}
		// Held until Close: taking it again in the process is no error.
		if err := ex.ClaimExclusively(f.ctx); err != nil {
			t.Fatalf("ClaimExclusively again: %v", err)
		}
		// The process that holds it claims as before...
		first := f.claimOne("w1", time.Minute, at(time.Second))
		// ...and taking it again after a claim keeps that claim's lease:
		// the delivery is not claimed twice.
		if err := ex.ClaimExclusively(f.ctx); err != nil {
			t.Fatalf("ClaimExclusively after a claim: %v", err)
		}
		f.expectNoClaim(at(2 * time.Second))
		f.publish("acme", "file.created", at(2*time.Second))
		if c := f.claimOne("w1", time.Minute, at(3*time.Second)); c.Delivery.ID == first.Delivery.ID {
			t.Fatalf("claimed %s again while its lease runs, want the new delivery", c.Delivery.ID)
		}
	})

	// ClaimParams.Hold and Holds.ReleaseHeld: a held endpoint's due
	// deliveries are not taken; those the walk stepped over are due at
	// Until afterwards (nothing else changes), so a claim that no longer
	// holds them does not take them before then; ReleaseHeld makes exactly
	// those due again, and a crash (nothing in memory) leaves them due at
	// Until.
	s.run(t, "Holds/HeldUntilReleased", func(t *testing.T, f *fixture) {
		h := f.s.Capabilities().Holds
		if h == nil {
			t.Skip("the driver declares no Holds")
		}
		black := f.endpoint("acme")
		ok := f.endpoint("acme")
		other := f.endpoint("beta")
		// acme: 5 events (a delivery to each endpoint, black's first in
		// each event's pair or not: ids decide), due 1 ms apart; beta: 1.
		for i := range 5 {
			f.publish("acme", "t", at(time.Duration(i)*time.Millisecond))
		}
		f.publish("beta", "t", at(time.Second))
		// A retry of black's scheduled in an hour is not due: never held.
		late := f.publish("acme", "t", at(time.Hour))
		lateBlack := f.deliveryFor(late.Event.ID, black.ID)
		now := at(time.Minute)
		until := at(10 * time.Minute)
		hold := []store.HeldEndpoint{{EndpointID: black.ID, Until: until}}
		claim := func(limit int, when time.Time, hold []store.HeldEndpoint) []store.Claim {
			t.Helper()
			cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: limit, Lease: time.Hour, Now: when, Hold: hold})
			if err != nil {
				t.Fatalf("ClaimDeliveries(hold %v): %v", hold, err)
			}
			return cs
		}
		cs := claim(100, now, hold)
		got := map[string]int{}
		for _, c := range cs {
			got[c.Delivery.EndpointID]++
		}
		diff(t, "endpoints of a claim holding black", map[string]int{ok.ID: 5, other.ID: 1}, got)
		// black's 5 due deliveries are held until `until`, attempts
		// untouched; its retry in an hour is left alone.
		held := f.listDeliveries(store.ListDeliveriesParams{EndpointID: black.ID, ListParams: store.ListParams{Limit: 100}})
		var heldIDs []string
		for _, d := range held {
			if d.ID == lateBlack.ID {
				if !d.NextAttemptAt.Equal(at(time.Hour)) {
					t.Errorf("black's delivery due in an hour is due at %v after the hold, want unchanged", d.NextAttemptAt)
				}
				continue
			}
			heldIDs = append(heldIDs, d.ID)
			if d.State != store.DeliveryPending || d.Attempts != 0 || !d.NextAttemptAt.Equal(until) {
				t.Errorf("held delivery %s: state %s, attempts %d, due %v; want pending, 0, %v", d.ID, d.State, d.Attempts, d.NextAttemptAt, until)
			}
		}
		if len(heldIDs) != 5 {
			t.Fatalf("black has %d held deliveries, want 5", len(heldIDs))
		}
		// A claim that holds nothing does not take them before until...
		if cs := claim(100, at(2*time.Minute), nil); len(cs) != 0 {
			t.Fatalf("claim before the hold ends took %d, want none", len(cs))
		}
		// ...NextDueAt reports until (the retry in an hour is later)...
		f.expectNextDueAt(until)
		// ...and ReleaseHeld with another Until releases nothing.
		if n, err := h.ReleaseHeld(f.ctx, black.ID, until.Add(time.Microsecond), at(2*time.Minute)); err != nil || n != 0 {
			t.Fatalf("ReleaseHeld(another until) = %d, %v; want 0", n, err)
		}
		// ReleaseHeld makes exactly the held ones due at now.
		if n, err := h.ReleaseHeld(f.ctx, black.ID, until, at(2*time.Minute)); err != nil || n != 5 {
			t.Fatalf("ReleaseHeld = %d, %v; want 5", n, err)
		}
		cs = claim(100, at(2*time.Minute), nil)
		var claimed []string
		for _, c := range cs {
			claimed = append(claimed, c.Delivery.ID)
			if !c.Delivery.NextAttemptAt.Equal(at(2 * time.Minute)) {
				t.Errorf("released delivery %s due at %v, want the release's now %v", c.Delivery.ID, c.Delivery.NextAttemptAt, at(2*time.Minute))
			}
		}
		slices.Sort(claimed)
		slices.Sort(heldIDs)
		diff(t, "deliveries claimed after the release", heldIDs, claimed)
		if d := f.getDelivery(lateBlack.ID); !d.NextAttemptAt.Equal(at(time.Hour)) {
			t.Errorf("ReleaseHeld moved the delivery due in an hour to %v", d.NextAttemptAt)
		}
	})

	s.run(t, "Holds/BoundedWalk", func(t *testing.T, f *fixture) {
		h := f.s.Capabilities().Holds
		if h == nil {
			t.Skip("the driver declares no Holds")
		}
		// black has 30 deliveries older than ok's 2: a claim of 1 steps
		// over at most ClaimTenantProbes of black's (holding them) and may
		// take nothing; the claims that follow go further, each holding
		// what it stepped over, and take ok's without ever claiming
		// black's.
		black := f.endpoint("acme", "old")
		ok := f.endpoint("acme", "new")
		for i := range 30 {
			f.publishEvent(newEvent("acme", "old", `{"n":1}`), at(time.Duration(i)*time.Millisecond))
		}
		for range 2 {
			f.publishEvent(newEvent("acme", "new", `{"n":1}`), at(time.Second))
		}
		hold := []store.HeldEndpoint{{EndpointID: black.ID, Until: at(time.Hour)}}
		var got []string
		for i := 0; i < 40 && len(got) < 2; i++ {
			cs, err := f.s.ClaimDeliveries(f.ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Hour, Now: at(time.Minute), Hold: hold})
			if err != nil {
				t.Fatalf("ClaimDeliveries: %v", err)
			}
			if len(cs) > 1 {
				t.Fatalf("claim of 1 took %d", len(cs))
			}
			for _, c := range cs {
				if c.Delivery.EndpointID != ok.ID {
					t.Fatalf("a claim holding black took a delivery of %s", c.Delivery.EndpointID)
				}
				got = append(got, c.Delivery.ID)
			}
		}
		if len(got) != 2 {
			t.Fatalf("claims of 1 holding black took %d of ok's 2 in 40 tries", len(got))
		}
		if n, err := h.ReleaseHeld(f.ctx, black.ID, at(time.Hour), at(time.Minute)); err != nil || n != 30 {
			t.Fatalf("ReleaseHeld = %d, %v; want all 30 of black's held", n, err)
		}
	})

	s.run(t, "HeaderSealer/NothingWrittenInClear", func(t *testing.T, f *fixture) {
		hs := f.s.Capabilities().HeaderSealer
		if hs == nil {
			t.Skip("the driver declares no HeaderSealer")
		}
		// Every path that writes an endpoint's headers: create, update,
		// a source's forwarding endpoint, and no headers at all.
		created := newEndpoint("acme")
		created.Headers = map[string]string{"X-Team": "storage", "Authorization": "Bearer abc"}
		f.createEndpoint(created)
		updated := f.endpoint("acme")
		h := map[string]string{"X-Updated": "yes"}
		if _, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: updated.ID, Headers: &h, Now: at(time.Minute)}); err != nil {
			t.Fatalf("UpdateEndpoint: %v", err)
		}
		p := newSource("gh")
		p.Endpoint.Headers = map[string]string{"X-Source": "gh"}
		if _, err := f.s.CreateSource(f.ctx, p); err != nil {
			t.Fatalf("CreateSource: %v", err)
		}
		bare := f.endpoint("acme")
		want := map[string]map[string]string{created.ID: created.Headers, updated.ID: h, p.Endpoint.ID: p.Endpoint.Headers, bare.ID: {}}
		// What the store wrote itself is never in clear (sealed when the
		// store seals, or nothing to seal without a key): nothing changes.
		for round := 1; round <= 2; round++ {
			n, err := hs.SealClearHeaders(f.ctx)
			if err != nil || n != 0 {
				t.Errorf("SealClearHeaders (round %d) = %d, %v; want 0 endpoints changed", round, n, err)
			}
		}
		for id, hdr := range want {
			if got := f.getEndpoint(id).Headers; !maps.Equal(got, hdr) { // nil and empty are both "none"
				t.Errorf("endpoint %s headers after SealClearHeaders = %v, want %v", id, got, hdr)
			}
		}
	})

	s.run(t, "Sealed/PagesInByteOrderAndCompareAndSet", func(t *testing.T, f *fixture) {
		sealed := f.s.Capabilities().Sealed
		if sealed == nil {
			t.Skip("the driver declares no Sealed")
		}
		column := func(table, col string) store.SealedColumn {
			for _, c := range store.SealedColumns {
				if c.Table == table && c.Column == col {
					return c
				}
			}
			t.Fatalf("no sealed column %s.%s", table, col)
			return store.SealedColumn{}
		}
		list := func(c store.SealedColumn) []store.SealedValue {
			t.Helper()
			var all []store.SealedValue
			for after := ""; ; {
				page, err := sealed.SealedValues(f.ctx, c, after, 2)
				if err != nil {
					t.Fatalf("SealedValues(%s.%s after %q): %v", c.Table, c.Column, after, err)
				}
				if len(page) > 2 {
					t.Fatalf("SealedValues(limit 2) returned %d rows", len(page))
				}
				if len(page) == 0 {
					return all
				}
				all = append(all, page...)
				after = page[len(page)-1].Key
			}
		}
		keys := func(vs []store.SealedValue) []string {
			return idsOf(vs, func(v store.SealedValue) string { return v.Key })
		}
		// Ids whose byte order is not a case-insensitive collation's
		// order: rekey pages by byte order on every driver.
		ids := []string{"ep_a", "ep_B", "ep_c", "ep_D", "ep_e"}
		withHeaders := map[string]bool{"ep_B": true, "ep_c": true}
		eps := map[string]store.Endpoint{}
		for _, id := range ids {
			e := newEndpoint("acme")
			e.ID = id
			e.Secrets = []store.Secret{{Value: "whsec_" + id, CreatedAt: base}}
			if withHeaders[id] {
				e.Headers = map[string]string{"X-Key": "v-" + id}
			}
			eps[id] = f.createEndpoint(e)
		}
		src := newSource("gh")
		if _, err := f.s.CreateSource(f.ctx, src); err != nil {
			t.Fatalf("CreateSource: %v", err)
		}
		secrets := column("endpoints", "secrets")
		got := list(secrets)
		want := append(slices.Clone(ids), src.Endpoint.ID)
		slices.Sort(want) // byte order
		if !slices.Equal(keys(got), want) {
			t.Errorf("SealedValues(endpoints.secrets) keys %v, want %v (each once, in byte order)", keys(got), want)
		}
		// A column's own condition: only endpoints with headers.
		if hk := keys(list(column("endpoints", "headers"))); !slices.Equal(hk, []string{"ep_B", "ep_c"}) {
			t.Errorf("SealedValues(endpoints.headers) keys %v, want [ep_B ep_c]", hk)
		}
		if sk := keys(list(column("sources", "config"))); !slices.Equal(sk, []string{src.Source.ID}) {
			t.Errorf("SealedValues(sources.config) keys %v, want [%s]", sk, src.Source.ID)
		}
		if _, err := f.s.EnsureMeta(f.ctx, "suite.other", "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.EnsureMeta(f.ctx, store.KeyCheckMeta, "check-value"); err != nil {
			t.Fatal(err)
		}
		if mk := list(column("meta", "value")); !slices.Equal(mk, []store.SealedValue{{Key: store.KeyCheckMeta, Value: "check-value"}}) {
			t.Errorf("SealedValues(meta.value) = %v, want only the key check value", mk)
		}

		// SealedValue reads one row as SealedValues listed it.
		var cur string
		for _, v := range got {
			if v.Key == "ep_B" {
				cur = v.Value
			}
		}
		if v, ok, err := sealed.SealedValue(f.ctx, secrets, "ep_B"); err != nil || !ok || v != cur || v == "" {
			t.Fatalf("SealedValue(ep_B) = %q, %v, %v; want the listed %q", v, ok, err, cur)
		}
		if v, ok, err := sealed.SealedValue(f.ctx, secrets, "ep_none"); err != nil || ok {
			t.Errorf("SealedValue(unknown key) = %q, %v, %v; want not found", v, ok, err)
		}
		// ReplaceSealed is a compare-and-set.
		if ok, err := sealed.ReplaceSealed(f.ctx, secrets, "ep_B", cur+"-stale", "replaced"); err != nil || ok {
			t.Errorf("ReplaceSealed from a value that is not the stored one = %v, %v; want false", ok, err)
		}
		if v, _, _ := sealed.SealedValue(f.ctx, secrets, "ep_B"); v != cur {
			t.Errorf("after a refused ReplaceSealed the value is %q, want it unchanged", v)
		}
		if ok, err := sealed.ReplaceSealed(f.ctx, secrets, "ep_B", cur, "replaced"); err != nil || !ok {
			t.Fatalf("ReplaceSealed from the stored value = %v, %v; want true", ok, err)
		}
		if v, _, _ := sealed.SealedValue(f.ctx, secrets, "ep_B"); v != "replaced" {
			t.Errorf("after ReplaceSealed the value is %q, want %q", v, "replaced")
		}
		if v, _, _ := sealed.SealedValue(f.ctx, secrets, "ep_a"); v == "replaced" {
			t.Error("ReplaceSealed changed another row")
		}
		if ok, err := sealed.ReplaceSealed(f.ctx, secrets, "ep_B", "replaced", cur); err != nil || !ok {
			t.Fatalf("ReplaceSealed back = %v, %v; want true", ok, err)
		}
		if ok, err := sealed.ReplaceSealed(f.ctx, secrets, "ep_none", cur, "x"); err != nil || ok {
			t.Errorf("ReplaceSealed of an unknown key = %v, %v; want false", ok, err)
		}
		diff(t, "the endpoint after its value was put back", eps["ep_B"], f.getEndpoint("ep_B"))
	})
}
