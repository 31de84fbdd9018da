package api_test

import (
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestDeliveryInFlight: a pending delivery a node is attempting (it holds
// the lease) says in_flight, in the delivery and in the lists; a waiting
// one, and one whose attempt ended, do not.
func TestDeliveryInFlight(t *testing.T) {
	w := newWorld(t, nil)
	var ev struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"order.placed","data":{}}`, 202, &ev)
	var list api.DeliveryList
	w.mustCall(adminKey, "GET", "/v1/events/"+ev.ID+"/deliveries?tenant=acme", "", 200, &list)
	if len(list.Data) != 1 || list.Data[0].InFlight || list.Data[0].State != "pending" {
		t.Fatalf("before any claim: %+v, want one pending delivery not in flight", list.Data)
	}
	id := list.Data[0].ID
	now := w.clock()
	claims, err := w.st.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node-1", Limit: 10, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 1 || claims[0].Delivery.ID != id {
		t.Fatalf("claim: %d %v", len(claims), err)
	}
	var d api.DeliveryOut
	w.mustCall(adminKey, "GET", "/v1/deliveries/"+id, "", 200, &d)
	if !d.InFlight || d.State != "pending" {
		t.Fatalf("while attempted: %+v, want pending and in_flight", d)
	}
	w.mustCall(adminKey, "GET", "/v1/endpoints/"+w.epA+"/deliveries?state=pending", "", 200, &list)
	if len(list.Data) != 1 || !list.Data[0].InFlight {
		t.Fatalf("endpoint's pending list while attempted: %+v", list.Data)
	}
	c := claims[0]
	if err := w.st.CompleteDeliveries(t.Context(), []store.Completion{{DeliveryID: id, EndpointID: c.Endpoint.ID, Owner: "node-1", LeaseUntil: c.Delivery.LeaseUntil,
		State: store.DeliveryPending, NextAttemptAt: now.Add(time.Minute), Now: now,
		Attempt: store.Attempt{DeliveryID: id, Number: 1, StartedAt: now, StatusCode: 503}}}); err != nil {
		t.Fatal(err)
	}
	w.mustCall(adminKey, "GET", "/v1/deliveries/"+id, "", 200, &d)
	if d.InFlight || d.State != "pending" || d.Attempts != 1 {
		t.Fatalf("after the attempt: %+v, want pending, 1 attempt, not in flight", d)
	}
}
