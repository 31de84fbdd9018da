package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
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

	s.run(t, "AdminLock/Excludes", func(t *testing.T, f *fixture) {
		l := f.s.Capabilities().AdminLock
		if l == nil {
			t.Skip("the driver declares no AdminLock")
		}
		unlock, err := l.LockAdminKeys(f.ctx)
		if err != nil {
			t.Fatalf("LockAdminKeys: %v", err)
		}
		// A second holder waits: its wait ends with its context, holding
		// nothing.
		short, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
		if u, err := l.LockAdminKeys(short); err == nil {
			u()
			t.Fatal("LockAdminKeys while the lock is held succeeded, want it to wait until its context ends")
		} else if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("LockAdminKeys cut by its context: %v, want the context's error", err)
		}
		cancel()
		// Released (twice: the second is a no-op), it is free again,
		// and the abandoned wait above left nothing behind.
		got := make(chan error, 1)
		go func() {
			u, err := l.LockAdminKeys(f.ctx)
			if err == nil {
				u()
			}
			got <- err
		}()
		unlock()
		unlock()
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("LockAdminKeys after the release: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("LockAdminKeys still waits 10 s after the release")
		}
		u, err := l.LockAdminKeys(f.ctx)
		if err != nil {
			t.Fatalf("LockAdminKeys once more: %v", err)
		}
		u()
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

	s.run(t, "Renewer/OnlyTheClaimsOwnRunningLease", func(t *testing.T, f *fixture) {
		r := f.s.Capabilities().Renewer
		if r == nil {
			t.Skip("the driver declares no Renewer")
		}
		f.endpoint("acme")
		f.publish("acme", "file.created", base)
		f.publish("acme", "file.created", base)
		cs := f.claim("w1", 2, time.Minute, at(time.Second))
		if len(cs) != 2 {
			t.Fatalf("claimed %d, want 2", len(cs))
		}
		a, b := cs[0].Delivery, cs[1].Delivery
		renew := func(d store.Delivery, owner string, until, newUntil, now time.Time) bool {
			t.Helper()
			ok, err := r.RenewLease(f.ctx, store.RenewLeaseParams{DeliveryID: d.ID, Owner: owner, Until: until, NewUntil: newUntil, Now: now})
			if err != nil {
				t.Fatalf("RenewLease: %v", err)
			}
			return ok
		}
		later := at(2 * time.Minute)
		if renew(a, "w2", a.LeaseUntil, later, at(2*time.Second)) || renew(a, "w1", a.LeaseUntil.Add(time.Microsecond), later, at(2*time.Second)) {
			t.Fatal("a lease renewed under another owner or another end")
		}
		if renew(b, "w1", b.LeaseUntil, later, b.LeaseUntil.Add(time.Microsecond)) {
			t.Fatal("a lease renewed after its end (not yet rescued)")
		}
		if !renew(a, "w1", a.LeaseUntil, later, at(2*time.Second)) {
			t.Fatal("the claim's own running lease not renewed")
		}
		if d := f.getDelivery(a.ID); !d.LeaseUntil.Equal(later) || d.LeaseOwner != "w1" {
			t.Fatalf("after the renewal: leased to %q until %v; want w1 until %v", d.LeaseOwner, d.LeaseUntil, later)
		}
		if renew(a, "w1", a.LeaseUntil, later.Add(time.Second), at(3*time.Second)) {
			t.Fatal("the lease's old end renewed again")
		}
		// The old end passed, the renewed one not: the rescue frees b only.
		if n := f.rescue(a.LeaseUntil.Add(time.Second)); n != 1 {
			t.Fatalf("rescue freed %d, want b's lease only", n)
		}
		stale := completion(cs[0], store.DeliverySucceeded, at(70*time.Second))
		f.complete(stale)
		if d := f.getDelivery(a.ID); d.State != store.DeliveryPending {
			t.Fatalf("a completion under the lease's old end moved the delivery to %s", d.State)
		}
		current := stale
		current.LeaseUntil = later
		f.complete(current)
		if d := f.getDelivery(a.ID); d.State != store.DeliverySucceeded || d.LeaseOwner != "" {
			t.Fatalf("the completion under the renewed lease: %s, leased to %q; want succeeded, unleased", d.State, d.LeaseOwner)
		}
	})

	s.run(t, "HandOff/LeasesWhatTheEngineReserved", func(t *testing.T, f *fixture) {
		caps := f.s.Capabilities()
		if caps.HandOff == nil {
			t.Skip("the driver declares no HandOff")
		}
		if caps.Exclusive != nil {
			// A node takes the claim lock before it serves (app.New).
			if err := caps.Exclusive.ClaimExclusively(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		ep := f.endpoint("acme")
		f.endpointInState("acme", store.EndpointPaused)
		h := &recordingHandOff{owner: "w1", until: at(time.Minute)}
		caps.HandOff.SetHandOff(h)
		// Every stored field of an event set, so the claim's can be
		// compared with GetEvent's.
		ev := newEvent("acme", "file.created", `{"n":1}`)
		ev.IdempotencyKey = "k-handoff"
		ev.Headers = map[string]string{"X-Source": "conformance"}
		ev.VersionBodies = map[int][]byte{1: []byte(`{"v":1}`)}
		ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		res := f.publishEvent(ev, base)
		if res.Deliveries != 2 || res.Pending != 1 || res.HandedOff != 1 {
			t.Fatalf("publish = %d deliveries, %d pending, %d handed off; want 2, 1, 1 (the paused endpoint's is held)", res.Deliveries, res.Pending, res.HandedOff)
		}
		taken := h.wait(t, 1)
		if len(taken) != 1 || taken[0].Delivery.EndpointID != ep.ID || taken[0].Event.ID != res.Event.ID ||
			taken[0].Endpoint.URL != ep.URL || taken[0].Delivery.LeaseOwner != "w1" || !taken[0].Delivery.LeaseUntil.Equal(at(time.Minute)) {
			t.Fatalf("handed off %+v; want the enabled endpoint's delivery of %s leased to w1", taken, res.Event.ID)
		}
		// The claim is the stored state, as a claim reads it.
		diff(t, "the handed-off claim's event", f.getEvent(res.Event.ID), taken[0].Event)
		diff(t, "the handed-off claim's endpoint", f.getEndpoint(ep.ID), taken[0].Endpoint)
		diff(t, "the handed-off claim's delivery", f.getDelivery(taken[0].Delivery.ID), taken[0].Delivery)
		// Leased: no claim takes it, and its owner's completion applies.
		f.expectNoClaim(at(time.Second))
		f.complete(completion(taken[0], store.DeliverySucceeded, at(time.Second)))
		if d := f.getDelivery(taken[0].Delivery.ID); d.State != store.DeliverySucceeded {
			t.Fatalf("handed-off delivery after its owner's completion: %s", d.State)
		}
		// Without a hand-off the claims take a publish's deliveries.
		caps.HandOff.SetHandOff(nil)
		res = f.publish("acme", "file.created", at(2*time.Second))
		if res.HandedOff != 0 {
			t.Fatalf("handed off %d with no hand-off set", res.HandedOff)
		}
		if c := f.claimOne("w1", time.Minute, at(3*time.Second)); c.Event.ID != res.Event.ID {
			t.Fatalf("claimed a delivery of %s, want %s", c.Event.ID, res.Event.ID)
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

// recordingHandOff reserves every delivery offered and records the claims
// it is given.
type recordingHandOff struct {
	owner string
	until time.Time
	mu    sync.Mutex
	taken []store.Claim
	takes int
}

func (h *recordingHandOff) Reserve(_ string, n int) int { return n }

func (h *recordingHandOff) Lease() (string, time.Time) { return h.owner, h.until }

func (h *recordingHandOff) Take(claims []store.Claim, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.taken = append(h.taken, claims...)
	h.takes++
}

// wait returns the claims given once takes reservations were taken (Take
// runs after the publish is answered).
func (h *recordingHandOff) wait(t *testing.T, takes int) []store.Claim {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // a hang guard
		h.mu.Lock()
		if h.takes >= takes {
			defer h.mu.Unlock()
			return slices.Clone(h.taken)
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%d reservations taken, want %d", h.takes, takes)
		}
	}
}
