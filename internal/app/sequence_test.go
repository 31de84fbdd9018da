package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
)

// TestCatalogSequencesTwoNodes: 1,000 events about 10 resources published
// concurrently through two Herald nodes on one PostgreSQL database arrive
// with per-resource sequences 1…100 (no gap, no repeat) that increase in
// commit order (a publish answered before another began has the smaller
// number), in the body and in X-Event-Sequence. PostgreSQL only
// (HERALD_TEST_E2E_DB=postgres): SQLite has one node.
func TestCatalogSequencesTwoNodes(t *testing.T) {
	if os.Getenv("HERALD_TEST_E2E_DB") != "postgres" {
		t.Skip("two nodes need PostgreSQL (HERALD_TEST_E2E_DB=postgres)")
	}
	var db, key string
	h1 := startHerald(t, func(c *app.Config) { db, key = c.DB, c.EncryptionKey })
	h2 := startHerald(t, func(c *app.Config) { c.DB, c.EncryptionKey = db, key })
	h1.mustCall("POST", "/v1/event-types", `{"name":"doc.changed","resource_id":"/doc_id","versions":[{"version":1,
		"schema":{"type":"object","required":["doc_id"],"properties":{"doc_id":{"type":"string"}}}}]}`, 201)
	rcv := newReceiver(t, 200)
	h1.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"`+rcv.URL+`","event_types":["doc.changed"]}`, 201)

	const events, resources = 1000, 10
	type pub struct {
		doc          string
		seq          int64
		start, after time.Time
	}
	var (
		mu   sync.Mutex
		pubs = map[string]pub{}
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 16)
	)
	for i := range events {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h := []*herald{h1, h2}[i%2]
			doc := "d" + strconv.Itoa(i%resources)
			var out struct {
				ID       string `json:"id"`
				Sequence int64  `json:"sequence"`
			}
			start := time.Now()
			st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"doc.changed","data":{"doc_id":"`+doc+`"}}`, &out)
			after := time.Now()
			if st != 202 {
				t.Errorf("publish: %d %s", st, raw)
				return
			}
			mu.Lock()
			pubs[out.ID] = pub{doc, out.Sequence, start, after}
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	arrived := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(arrived) < events && time.Now().Before(deadline) {
		for _, r := range rcv.got() {
			var env struct {
				ID       string `json:"id"`
				Sequence int64  `json:"sequence"`
				Data     struct {
					DocID string `json:"doc_id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &env); err != nil {
				t.Fatal(err)
			}
			p, ok := pubs[env.ID]
			if !ok || env.Sequence != p.seq || env.Data.DocID != p.doc || r.Header.Get("X-Event-Sequence") != fmt.Sprint(p.seq) {
				t.Fatalf("arrived %s (X-Event-Sequence %s); published %+v", r.Body, r.Header.Get("X-Event-Sequence"), p)
			}
			arrived[env.ID] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(arrived) != events {
		t.Fatalf("%d of %d events arrived", len(arrived), events)
	}
	seen := map[string]map[int64]bool{}
	for _, p := range pubs {
		if seen[p.doc] == nil {
			seen[p.doc] = map[int64]bool{}
		}
		if seen[p.doc][p.seq] {
			t.Fatalf("%s: number %d given twice", p.doc, p.seq)
		}
		seen[p.doc][p.seq] = true
	}
	for doc, s := range seen {
		for n := int64(1); n <= events/resources; n++ {
			if !s[n] {
				t.Fatalf("%s: number %d missing (gap)", doc, n)
			}
		}
	}
	for _, a := range pubs {
		for _, b := range pubs {
			if a.doc == b.doc && a.after.Before(b.start) && a.seq >= b.seq {
				t.Fatalf("%s: an event answered before another was sent has number %d ≥ %d", a.doc, a.seq, b.seq)
			}
		}
	}
}
