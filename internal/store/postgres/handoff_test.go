package postgres

import (
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestHandOffLeavesAnUnreadableEndpointToTheClaims: a node whose key
// cannot open an endpoint's secrets (it missed a key rotation) still
// publishes; the endpoint's delivery is not handed off (its worker is
// given back), its lease is dropped on the publish's transaction, and a
// node with the key claims it at once — while the readable endpoint's
// delivery of the same publish is handed off.
func TestHandOffLeavesAnUnreadableEndpointToTheClaims(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	good := openStore(t, dbURL, WithSecretBox(newBox(t)))
	sealed := createEndpoint(t, good, newEndpoint("acme"))
	wrong := openStore(t, dbURL, WithSecretBox(newBox(t)))
	if _, err := wrong.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: newEndpoint("acme")}); err != nil {
		t.Fatal(err)
	}
	h := newReviewHandOff("node_wrong", base.Add(time.Hour))
	wrong.SetHandOff(h)
	res := publish(t, wrong, newEvent("acme"), base)
	if res.Pending != 2 || res.HandedOff != 1 {
		t.Fatalf("publish: %d pending, %d handed off; want 2, 1 (the endpoint this node cannot open left to the claims)", res.Pending, res.HandedOff)
	}
	<-h.took
	if reserved, takes, given, taken := h.state(); reserved != 1 || takes != 1 || given != 1 || len(taken) != 1 || taken[0].Endpoint.ID == sealed.ID {
		t.Fatalf("%d reservations, %d takes, %d workers given back, claims %+v; want one reservation of 2 ended with the readable endpoint's claim", reserved, takes, given, taken)
	}
	cs, err := good.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node_good", Limit: 8, Lease: time.Hour, Now: base})
	if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != sealed.ID {
		t.Fatalf("claim with the key: %d claims, %v; want the sealed endpoint's delivery, its lease dropped", len(cs), err)
	}
}

// TestHandOffNotForPublishTx: a publish on a caller's transaction commits
// when the caller commits: nothing of it is handed off (its deliveries are
// claimed).
func TestHandOffNotForPublishTx(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	createEndpoint(t, s, newEndpoint("acme"))
	h := newReviewHandOff("w", base.Add(time.Hour))
	s.SetHandOff(h)
	conn := rawConn(t, dbURL)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := PublishTx(t.Context(), tx, store.PublishParams{Event: newEvent("acme"), Now: base})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if reserved, takes, _, _ := h.state(); res.HandedOff != 0 || reserved != 0 || takes != 0 {
		t.Fatalf("PublishTx handed off %d (%d reservations, %d takes)", res.HandedOff, reserved, takes)
	}
	cs, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w2", Limit: 8, Lease: time.Hour, Now: base})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d claims, %v; want the delivery", len(cs), err)
	}
}
