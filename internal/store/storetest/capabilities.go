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
}
