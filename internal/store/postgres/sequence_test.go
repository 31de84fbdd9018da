package postgres

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestSequencesAcrossNodes: 1,000 events about 10 resources, published
// concurrently through two stores on one database (two nodes, each with
// its own pool and group committer), are numbered 1…100 per resource with
// no gap or repeat, the numbers are in the bodies and the X-Event-Sequence
// header, and they increase in commit order: an event whose publish
// returned (committed) before another's began has the smaller number.
func TestSequencesAcrossNodes(t *testing.T) {
	t.Parallel()
	db := newSchema(t)
	nodes := []*Store{openStore(t, db), openStore(t, db)}
	createEndpoint(t, nodes[0], newEndpoint("acme"))
	const events, resources = 1000, 10
	type pub struct {
		resource     int
		seq          int64
		start, after time.Time
	}
	var (
		mu   sync.Mutex
		pubs []pub
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 32)
	)
	for i := range events {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := i % resources
			ev := newEvent("acme")
			ev.Type = "file.updated"
			body, err := store.EncodeVersionedBody(ev.ID, ev.Type, 1, true, "acme", base, fmt.Appendf(nil, `{"file_id":"f_%d"}`, r))
			if err != nil {
				t.Error(err)
				return
			}
			ev.Body = body
			start := time.Now()
			res, err := nodes[i%2].PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: base,
				NewDeliveryID: func() string { return store.NewID("dlv") }, SequenceKey: store.SequenceKeyOf("acme", ev.Type, fmt.Sprint(r))})
			after := time.Now()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			pubs = append(pubs, pub{r, res.Event.Sequence, start, after})
			mu.Unlock()
			// What is stored (and delivered) says the same number.
			got, err := nodes[0].GetEvent(t.Context(), ev.ID)
			if err != nil {
				t.Error(err)
				return
			}
			var env struct {
				Sequence int64 `json:"sequence"`
			}
			if err := json.Unmarshal(got.Body, &env); err != nil || env.Sequence != res.Event.Sequence || got.Sequence != res.Event.Sequence ||
				got.Headers[store.SequenceHeader] != fmt.Sprint(res.Event.Sequence) {
				t.Errorf("stored event: body %s, sequence %d, headers %v; publish answered %d", got.Body, got.Sequence, got.Headers, res.Event.Sequence)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := make([]map[int64]bool, resources)
	for r := range seen {
		seen[r] = map[int64]bool{}
	}
	for _, p := range pubs {
		if seen[p.resource][p.seq] {
			t.Fatalf("resource %d: number %d given twice", p.resource, p.seq)
		}
		seen[p.resource][p.seq] = true
	}
	for r := range seen {
		for n := int64(1); n <= events/resources; n++ {
			if !seen[r][n] {
				t.Fatalf("resource %d: number %d missing (gap)", r, n)
			}
		}
	}
	for _, a := range pubs {
		for _, b := range pubs {
			if a.resource == b.resource && a.after.Before(b.start) && a.seq >= b.seq {
				t.Fatalf("resource %d: an event committed before another began has number %d ≥ %d", a.resource, a.seq, b.seq)
			}
		}
	}
}
