package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// fanOut: a publish to more endpoints than PublishParams.FanOutChunk writes
// the first chunk and leaves the rest to ContinueFanOut, which creates one
// chunk per call; every matching endpoint that existed at the publish gets
// exactly one delivery, whatever stops between chunks.
func (s suite) fanOut(t *testing.T) {
	s.run(t, "SmallFanOutStaysWhole", func(t *testing.T, f *fixture) {
		for range 3 {
			f.endpoint("a")
		}
		p := publishParams(newEvent("a", "order.paid", `{}`), at(time.Minute))
		p.FanOutChunk = 3
		res, err := f.s.PublishEvent(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.FanOut || res.Deliveries != 3 {
			t.Fatalf("publish to 3 endpoints with a chunk of 3: FanOut %v, Deliveries %d; want false, 3", res.FanOut, res.Deliveries)
		}
		if got := len(f.listDeliveries(store.ListDeliveriesParams{EventID: p.Event.ID})); got != 3 {
			t.Fatalf("%d deliveries after the publish, want 3", got)
		}
		if r := f.continueFanOut(3); r != (store.FanOutResult{}) {
			t.Fatalf("ContinueFanOut with nothing to do = %+v, want zero", r)
		}
	})

	// A driver may keep a large tenant's endpoints in memory between
	// publishes (SQLite: targetCache, from 64 endpoints); every change to
	// which endpoints exist, their state or event types must reach the next
	// publish.
	s.run(t, "PublishSeesEveryEndpointChange", func(t *testing.T, f *fixture) {
		want := map[string]store.DeliveryState{}
		var ids []string
		for range 70 {
			e := f.endpoint("a", "order.*")
			want[e.ID] = store.DeliveryPending
			ids = append(ids, e.ID)
		}
		f.endpoint("b", "order.*") // another tenant
		publish := func(step string) {
			t.Helper()
			ev := newEvent("a", "order.paid", `{}`)
			if res := f.publishEvent(ev, at(time.Minute)); res.FanOut || res.Deliveries != len(want) {
				t.Fatalf("%s: publish: FanOut %v, Deliveries %d; want false, %d", step, res.FanOut, res.Deliveries, len(want))
			}
			f.wantFanOut(ev.ID, want)
		}
		publish("first publish")
		publish("same endpoints again")
		e := f.endpoint("a", "order.*")
		want[e.ID] = store.DeliveryPending
		publish("after a create")
		if err := f.s.DeleteEndpoint(f.ctx, store.DeleteEndpointParams{ID: ids[0], Now: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		delete(want, ids[0])
		publish("after a delete")
		f.setState(store.SetEndpointStateParams{ID: ids[1], State: store.EndpointPaused, Reason: "test", Now: at(time.Minute)})
		want[ids[1]] = store.DeliveryPaused
		publish("after a pause")
		f.setState(store.SetEndpointStateParams{ID: ids[1], State: store.EndpointEnabled, Reason: "test", Now: at(time.Minute)})
		want[ids[1]] = store.DeliveryPending
		publish("after a resume")
		other := []string{"user.*"}
		if _, err := f.s.UpdateEndpoint(f.ctx, store.UpdateEndpointParams{ID: ids[2], EventTypes: &other, Now: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		delete(want, ids[2])
		publish("after a change of event types")
	})

	s.run(t, "ChunksExactlyOnce", func(t *testing.T, f *fixture) {
		want := map[string]store.DeliveryState{}
		for range 11 {
			want[f.endpoint("a", "order.*").ID] = store.DeliveryPending
		}
		paused := newEndpoint("a", "order.*")
		paused.State, paused.StateReason = store.EndpointPaused, "set by test"
		want[f.createEndpoint(paused).ID] = store.DeliveryPaused
		excluded := f.endpoint("a")
		for range 4 {
			f.endpoint("a", "user.*") // does not match
		}
		f.endpoint("b") // another tenant
		ev := newEvent("a", "order.paid", `{}`)
		p := publishParams(ev, at(time.Minute))
		p.FanOutChunk, p.ExcludeEndpointID = 4, excluded.ID
		res, err := f.s.PublishEvent(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !res.FanOut || res.Deliveries != 12 || res.Pending != 11 {
			t.Fatalf("publish: FanOut %v, Deliveries %d, Pending %d; want true, 12 (the matching endpoints), 11", res.FanOut, res.Deliveries, res.Pending)
		}
		if got := len(f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID})); got != 4 {
			t.Fatalf("%d deliveries after the publish, want the first chunk of 4", got)
		}
		// Created after the publish: not part of its fan-out.
		late := newEndpoint("a", "order.*")
		late.CreatedAt, late.UpdatedAt = at(2*time.Minute), at(2*time.Minute)
		f.createEndpoint(late)

		created, pending, calls := 4, 4, 0
		for {
			r := f.continueFanOut(4)
			if r.EventID == "" {
				break
			}
			calls++
			if r.EventID != ev.ID || r.Created > 4 {
				t.Fatalf("ContinueFanOut = %+v: want event %s and at most a chunk of 4", r, ev.ID)
			}
			created += r.Created
			pending += r.Pending
			if r.Done == r.More {
				t.Fatalf("ContinueFanOut = %+v: the only fan-out is either done or has more", r)
			}
			if calls > 10 {
				t.Fatal("the fan-out never ends")
			}
		}
		if created != 12 || pending != 11 {
			t.Fatalf("created %d deliveries, %d pending; want 12 and 11", created, pending)
		}
		f.wantFanOut(ev.ID, want)
		if r := f.continueFanOut(4); r != (store.FanOutResult{}) {
			t.Fatalf("ContinueFanOut after the end = %+v, want zero", r)
		}
		// A retry of the publish answers with the deliveries, adds none.
		again, err := f.s.PublishEvent(f.ctx, p)
		if err != nil || again.Created || again.FanOut || again.Deliveries != 12 {
			t.Fatalf("publish again = %+v, %v; want the original with 12 deliveries", again, err)
		}
	})

	s.run(t, "ResumesAfterAnInterruptedChunk", func(t *testing.T, f *fixture) {
		want := map[string]store.DeliveryState{}
		for range 10 {
			want[f.endpoint("a").ID] = store.DeliveryPending
		}
		ev := newEvent("a", "order.paid", `{}`)
		p := publishParams(ev, at(time.Minute))
		p.FanOutChunk = 3
		if _, err := f.s.PublishEvent(f.ctx, p); err != nil {
			t.Fatal(err)
		}
		f.continueFanOut(3)
		// A chunk whose transaction does not commit (the process dies, or
		// its context ends) creates nothing and does not move the fan-out.
		dead, cancel := context.WithCancel(f.ctx)
		cancel()
		if _, err := f.s.ContinueFanOut(dead, store.FanOutParams{Chunk: 3, Now: at(time.Minute)}); err == nil {
			t.Fatal("ContinueFanOut with a cancelled context succeeded")
		}
		if got := len(f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID})); got != 6 {
			t.Fatalf("%d deliveries after two chunks and an interrupted one, want 6", got)
		}
		// Another engine, with another chunk size, finishes it.
		for f.continueFanOut(4).EventID != "" {
		}
		f.wantFanOut(ev.ID, want)
	})

	s.run(t, "FanOutsTakeTurns", func(t *testing.T, f *fixture) {
		for range 6 {
			f.endpoint("a")
		}
		for range 3 {
			f.endpoint("b")
		}
		var events []string
		for _, tenant := range []string{"a", "b"} {
			ev := newEvent(tenant, "order.paid", `{}`)
			p := publishParams(ev, at(time.Minute))
			p.FanOutChunk = 1
			if _, err := f.s.PublishEvent(f.ctx, p); err != nil {
				t.Fatal(err)
			}
			events = append(events, ev.ID)
		}
		// With the cursor passed back, the two fan-outs alternate until
		// b's (3 endpoints: 2 chunks left) is done; a's (6) goes on alone.
		var order []string
		after := ""
		for {
			r, err := f.s.ContinueFanOut(f.ctx, store.FanOutParams{Chunk: 1, Now: at(time.Minute), After: after})
			if err != nil {
				t.Fatal(err)
			}
			if r.EventID == "" {
				break
			}
			order = append(order, r.EventID)
			after = r.EventID
		}
		// a: 5 calls of one endpoint, then one that finds the end (a
		// fan-out is done on the call that reads less than a chunk); b: 2
		// and 1. Oldest first would switch once; in turn, 5 times.
		seenA, seenB, switches := 0, 0, 0
		for i, id := range order {
			if id == events[0] {
				seenA++
			} else {
				seenB++
			}
			if i > 0 && order[i-1] != id {
				switches++
			}
		}
		if seenA != 6 || seenB != 3 || switches < 5 {
			t.Fatalf("chunk order %v: %d of a, %d of b, %d switches; want 6, 3 and the two in turn while both are unfinished", order, seenA, seenB, switches)
		}
	})

	s.run(t, "ConcurrentEnginesShareFanOuts", func(t *testing.T, f *fixture) {
		want := map[string]store.DeliveryState{}
		for range 25 {
			want[f.endpoint("a").ID] = store.DeliveryPending
		}
		var events []string
		for i := range 4 {
			ev := newEvent("a", "order.paid", `{}`)
			p := publishParams(ev, at(time.Duration(i+1)*time.Second))
			p.FanOutChunk = 2
			if _, err := f.s.PublishEvent(f.ctx, p); err != nil {
				t.Fatal(err)
			}
			events = append(events, ev.ID)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				for {
					r, err := f.s.ContinueFanOut(f.ctx, store.FanOutParams{Chunk: 2, Now: at(time.Minute)})
					if err != nil {
						errs <- err
						return
					}
					if r.EventID == "" && !r.More {
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("ContinueFanOut: %v", err)
		}
		for _, id := range events {
			f.wantFanOut(id, want)
		}
	})
}

func (f *fixture) continueFanOut(chunk int) store.FanOutResult {
	f.t.Helper()
	r, err := f.s.ContinueFanOut(f.ctx, store.FanOutParams{Chunk: chunk, Now: at(time.Minute)})
	if err != nil {
		f.t.Fatalf("ContinueFanOut: %v", err)
	}
	return r
}

// wantFanOut checks the event has exactly one delivery per endpoint of
// want, in the state want gives, and no other.
func (f *fixture) wantFanOut(eventID string, want map[string]store.DeliveryState) {
	f.t.Helper()
	got := map[string]int{}
	for _, d := range f.listDeliveries(store.ListDeliveriesParams{EventID: eventID}) {
		got[d.EndpointID]++
		if st, ok := want[d.EndpointID]; !ok {
			f.t.Errorf("event %s: delivery %s to endpoint %s, which should have none", eventID, d.ID, d.EndpointID)
		} else if d.State != st {
			f.t.Errorf("event %s: delivery to %s is %s, want %s", eventID, d.EndpointID, d.State, st)
		}
	}
	for id := range want {
		if got[id] != 1 {
			f.t.Errorf("event %s: endpoint %s has %d deliveries, want exactly 1", eventID, id, got[id])
		}
	}
}
