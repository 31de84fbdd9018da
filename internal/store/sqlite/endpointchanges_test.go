package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestEndpointChangesCount: every change to what an attempt takes from an
// endpoint (URL, headers, secrets, state) and every deletion moves the
// count the engine compares before attempting a claim that waited in line
// (store.Capabilities.EndpointChanges); a publish, a claim and the
// completions of a drain do not, so the check costs nothing then.
func TestEndpointChangesCount(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "herald.db"))
	defer s.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newEP := func(id string) store.Endpoint {
		return store.Endpoint{ID: id, Tenant: "acme", URL: "https://example.com/hooks/" + id, EventTypes: []string{}, Headers: map[string]string{},
			State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}
	}
	for _, id := range []string{"ep_a", "ep_b"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: newEP(id)}); err != nil {
			t.Fatal(err)
		}
	}
	src := store.Source{ID: "src_a", Name: "gh", Config: []byte(`{"scheme":"github","secrets":["s3cr3t"]}`), CreatedAt: now, UpdatedAt: now}
	srcEP := newEP("ep_src")
	srcEP.Tenant, srcEP.Kind = src.ID, store.EndpointKindSource
	if _, err := s.CreateSource(ctx, store.CreateSourceParams{Source: src, Endpoint: srcEP}); err != nil {
		t.Fatal(err)
	}
	str := func(v string) *string { return &v }
	headers := map[string]string{"X-Team": "billing"}

	step := func(name string, moves bool, do func() error) {
		t.Helper()
		before := s.EndpointChanges()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if moved := s.EndpointChanges() != before; moved != moves {
			t.Errorf("%s: the count moved %v, want %v", name, moved, moves)
		}
	}
	publish := func() error {
		id := store.NewID("evt")
		_, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte(`{}`), Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }})
		return err
	}
	var claims []store.Claim
	step("a publish", false, publish)
	step("a claim", false, func() (err error) {
		claims, err = s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node", Limit: 10, Lease: time.Minute, Now: now})
		return err
	})
	if len(claims) != 2 {
		t.Fatalf("claimed %d deliveries, want 2", len(claims))
	}
	complete := func(c store.Claim, st store.DeliveryState, status int) store.Completion {
		return store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node", LeaseUntil: c.Delivery.LeaseUntil,
			Attempt: store.Attempt{StatusCode: status, Duration: time.Millisecond}, State: st, NextAttemptAt: now.Add(time.Minute), Now: now}
	}
	byEP := map[string]store.Claim{}
	for _, c := range claims {
		byEP[c.Endpoint.ID] = c
	}
	step("a success and a failure to retry (the streak starts)", false, func() error {
		return s.CompleteDeliveries(ctx, []store.Completion{complete(byEP["ep_a"], store.DeliverySucceeded, 204), complete(byEP["ep_b"], store.DeliveryPending, 503)})
	})
	step("a URL, headers and rate limit changed", true, func() error {
		_, err := s.UpdateEndpoint(ctx, store.UpdateEndpointParams{ID: "ep_a", URL: str("https://example.com/new"), Headers: &headers, Now: now})
		return err
	})
	step("a pause", true, func() error {
		_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointPaused, Now: now})
		return err
	})
	step("a resume", true, func() error {
		_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: "ep_a", State: store.EndpointEnabled, Now: now})
		return err
	})
	step("a rotation without overlap", true, func() error {
		_, err := s.RotateSecret(ctx, store.RotateSecretParams{ID: "ep_a", Secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", PreviousExpiresAt: now, Now: now})
		return err
	})
	step("a source's destination changed", true, func() error {
		_, err := s.UpdateSource(ctx, store.UpdateSourceParams{ID: src.ID, DestinationURL: str("https://example.com/elsewhere"), Now: now})
		return err
	})
	step("a source's name changed", false, func() error {
		_, err := s.UpdateSource(ctx, store.UpdateSourceParams{ID: src.ID, Name: str("github"), Now: now})
		return err
	})
	step("a source deleted (with its endpoint)", true, func() error { return s.DeleteSource(ctx, src.ID) })
	step("a publish", false, publish)
	claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node", Limit: 10, Lease: time.Minute, Now: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var bClaim store.Claim
	for _, c := range claims {
		if c.Endpoint.ID == "ep_b" {
			bClaim = c
		}
	}
	if bClaim.Delivery.ID == "" {
		t.Fatalf("no delivery of ep_b claimed: %d claims", len(claims))
	}
	step("a completion that disables its endpoint", true, func() error {
		c := complete(bClaim, store.DeliveryDead, 410)
		c.DisableEndpoint, c.DisableReason = true, "410 Gone"
		if err := s.CompleteDeliveries(ctx, []store.Completion{c}); err != nil {
			return err
		}
		if ep, err := s.GetEndpoint(ctx, "ep_b"); err != nil || ep.State != store.EndpointDisabled {
			t.Fatalf("ep_b after the disabling completion: %+v, %v; want disabled", ep.State, err)
		}
		return nil
	})
	step("an endpoint deleted", true, func() error { return s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: "ep_a", Now: now}) })
}

// TestRenewLease: a lease in memory is renewed only while it is still the
// one its claim took (owner and end); the completion then names the new
// end; a rescued lease is not renewed.
func TestRenewLease(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "herald.db"))
	defer s.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ep := store.Endpoint{ID: "ep_a", Tenant: "acme", URL: "https://example.com/hooks", EventTypes: []string{}, Headers: map[string]string{},
		State: store.EndpointEnabled, Secrets: []store.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		id := store.NewID("evt")
		if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: now, Body: []byte(`{}`), Fingerprint: id},
			Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node", Limit: 2, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}
	a, b := claims[0].Delivery, claims[1].Delivery
	renew := func(d store.Delivery, owner string, until, newUntil time.Time) bool {
		t.Helper()
		ok, err := s.RenewLease(ctx, store.RenewLeaseParams{DeliveryID: d.ID, Owner: owner, Until: until, NewUntil: newUntil, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	later := now.Add(30 * time.Second).Add(time.Minute)
	if renew(a, "other", a.LeaseUntil, later) || renew(a, "node", a.LeaseUntil.Add(time.Microsecond), later) {
		t.Fatal("a lease renewed under another owner or another end")
	}
	if !renew(a, "node", a.LeaseUntil, later) {
		t.Fatal("the claim's own lease not renewed")
	}
	if d, err := s.GetDelivery(ctx, a.ID); err != nil || !d.LeaseUntil.Equal(later) {
		t.Fatalf("after the renewal: lease until %v, %v; want %v", d.LeaseUntil, err, later)
	}
	if renew(a, "node", a.LeaseUntil, later.Add(time.Second)) {
		t.Fatal("the old end renewed again")
	}
	if ok, err := s.RenewLease(ctx, store.RenewLeaseParams{DeliveryID: b.ID, Owner: "node", Until: b.LeaseUntil, NewUntil: later,
		Now: b.LeaseUntil.Add(time.Microsecond)}); err != nil || ok {
		t.Fatalf("a lease renewed after its end: %v, %v; want false (the rescue may free it at any moment)", ok, err)
	}
	// The old lease's end has passed; the renewed one has not: the rescue
	// frees only b's.
	if n, err := s.RescueExpiredLeases(ctx, a.LeaseUntil.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("rescue: %d, %v; want b's lease only", n, err)
	}
	if renew(b, "node", b.LeaseUntil, later) {
		t.Fatal("a rescued lease renewed")
	}
	done := func(d store.Delivery, until time.Time) store.Completion {
		return store.Completion{DeliveryID: d.ID, EndpointID: "ep_a", Owner: "node", LeaseUntil: until,
			Attempt: store.Attempt{StatusCode: 204, Duration: time.Millisecond}, State: store.DeliverySucceeded, Now: now.Add(time.Minute)}
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{done(a, a.LeaseUntil)}); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.GetDelivery(ctx, a.ID); d.State != store.DeliveryPending {
		t.Fatalf("a completion under the old lease end moved the delivery to %s", d.State)
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{done(a, later)}); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.GetDelivery(ctx, a.ID); d.State != store.DeliverySucceeded || d.LeaseOwner != "" {
		t.Fatalf("the completion under the renewed lease: %s, leased to %q; want succeeded, unleased", d.State, d.LeaseOwner)
	}
}
