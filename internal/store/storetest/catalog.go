package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// eventTypes: the catalog stores types with their versions (schemas kept
// byte for byte), refuses a second type of one name, lists by name, and
// updates only from the stored revision (optimistic concurrency).
func (s suite) eventTypes(t *testing.T) {
	st := s.newStore(t)
	ctx := t.Context()
	if cat, err := st.ListEventTypes(ctx, store.ListParams{}); err != nil || len(cat.Data) != 0 || cat.Data == nil || cat.NextCursor != "" {
		t.Fatalf("empty catalog: %v %v", cat, err)
	}
	schema := json.RawMessage(`{"type":"object","required":["file_id"]}`)
	b, err := st.CreateEventType(ctx, store.EventType{Name: "file.updated", Description: "d", ResourceID: "/file_id",
		Versions: []store.EventTypeVersion{{Version: 1, Schema: schema, CreatedAt: base}}, CreatedAt: base, UpdatedAt: base})
	if err != nil || b.Revision != 1 || string(b.Versions[0].Schema) != string(schema) || b.ResourceID != "/file_id" || !b.CreatedAt.Equal(base) {
		t.Fatalf("create: %+v %v", b, err)
	}
	_, err = st.CreateEventType(ctx, store.EventType{Name: "file.updated", Versions: b.Versions, CreatedAt: base, UpdatedAt: base})
	wantRefusal(t, "second create", err, store.EventTypeExists("file.updated"))
	if _, err := st.CreateEventType(ctx, store.EventType{Name: "a.first", Versions: b.Versions, CreatedAt: base, UpdatedAt: base}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetEventType(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get unknown = %v", err)
	}
	b.Versions = append(b.Versions, store.EventTypeVersion{Version: 2, Schema: json.RawMessage(`{"type":"object"}`), CreatedAt: base})
	b.Versions[0].Deprecated = true
	stale := b
	got, err := st.UpdateEventType(ctx, b)
	if err != nil || got.Revision != 2 || len(got.Versions) != 2 || !got.Versions[0].Deprecated {
		t.Fatalf("update: %+v %v", got, err)
	}
	_, err = st.UpdateEventType(ctx, stale)
	wantRefusal(t, "update from a stale revision", err, store.EventTypeChanged("file.updated", stale.Revision))
	if _, err := st.UpdateEventType(ctx, store.EventType{Name: "nope", Revision: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown = %v, want ErrNotFound", err)
	}
	cat, err := store.AllEventTypes(ctx, st)
	if err != nil || len(cat) != 2 || cat[0].Name != "a.first" || cat[1].Name != "file.updated" || cat[1].Revision != 2 {
		t.Fatalf("list: %+v %v", cat, err)
	}
	// A name differing only in case from a catalogued one names it; the
	// catalogued name itself, and a name no spelling of which is
	// catalogued, name none.
	for name, want := range map[string]string{"File.updated": "file.updated", "FILE.UPDATED": "file.updated", "A.First": "a.first",
		"file.updated": "", "a.first": "", "file.created": "", "file.update": "", "file_updated": ""} {
		if got, err := st.EventTypeCaseVariant(ctx, name); err != nil || got != want {
			t.Errorf("EventTypeCaseVariant(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
}

// publishCatalogRevision: a publish with PublishParams.CatalogRevision is
// stored only when it names the event type's stored revision (0: not
// catalogued); otherwise it is answered ErrStaleCatalog (a conflict) and
// neither the event nor a delivery is stored. In a group of concurrent
// publishes the stale ones fail alone.
func (s suite) publishCatalogRevision(t *testing.T) {
	s.run(t, "Checked", func(t *testing.T, f *fixture) {
		ep := f.endpoint("acme")
		rev := func(n int) *int { return &n }
		try := func(what string, typ string, r *int, wantStored bool) {
			t.Helper()
			ev := newEvent("acme", typ, `{"n":1}`)
			p := publishParams(ev, base)
			p.CatalogRevision = r
			res, err := f.s.PublishEvent(f.ctx, p)
			if wantStored {
				if err != nil || !res.Created || res.Deliveries != 1 {
					t.Fatalf("%s: PublishEvent = %+v, %v; want stored with 1 delivery", what, res, err)
				}
				return
			}
			if !errors.Is(err, store.ErrStaleCatalog) || !errors.Is(err, store.ErrConflict) {
				t.Fatalf("%s: PublishEvent = %+v, %v; want ErrStaleCatalog (a conflict)", what, res, err)
			}
			if _, err := f.s.GetEvent(f.ctx, ev.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s: the refused event is stored: GetEvent = %v", what, err)
			}
			if d := f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID}); len(d) != 0 {
				t.Fatalf("%s: the refused event has %d deliveries", what, len(d))
			}
		}
		try("uncatalogued, checked as such", "file.updated", rev(0), true)
		try("uncatalogued, checked against revision 1", "file.updated", rev(1), false)
		try("not checked", "file.updated", nil, true)
		et, err := f.s.CreateEventType(f.ctx, store.EventType{Name: "file.updated",
			Versions:  []store.EventTypeVersion{{Version: 1, Schema: json.RawMessage(`{"type":"object"}`), CreatedAt: base}},
			CreatedAt: base, UpdatedAt: base})
		if err != nil {
			t.Fatal(err)
		}
		try("catalogued since the check", "file.updated", rev(0), false)
		try("catalogued, revision 1", "file.updated", rev(1), true)
		if _, err := f.s.UpdateEventType(f.ctx, et); err != nil {
			t.Fatal(err)
		}
		try("changed since the check", "file.updated", rev(1), false)
		try("changed, revision 2", "file.updated", rev(2), true)
		try("not checked, catalogued", "file.updated", nil, true)
		try("another type is not", "file.created", rev(0), true)
		// A name differing only in case from a catalogued one is refused by
		// the caller: a check that found it uncatalogued is stale, and it
		// has no revision of its own to be current with.
		try("a case variant of a catalogued type, checked as uncatalogued", "File.updated", rev(0), false)
		try("a case variant, checked against the catalogued one's revision", "FILE.UPDATED", rev(2), false)
		try("a case variant, not checked", "File.updated", nil, true)

		// Concurrent publishes (a group commit where the driver has one):
		// the stale ones fail, the others are stored.
		const n = 24
		errs := make([]error, n)
		evs := make([]store.Event, n)
		var wg sync.WaitGroup
		for i := range n {
			evs[i] = newEvent("acme", "file.updated", fmt.Sprintf(`{"n":%d}`, i))
			p := publishParams(evs[i], base)
			p.CatalogRevision = rev(2 - i%2) // odd i: revision 1, stale
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = f.s.PublishEvent(f.ctx, p)
			}()
		}
		wg.Wait()
		for i := range n {
			_, gerr := f.s.GetEvent(f.ctx, evs[i].ID)
			if i%2 == 1 && (!errors.Is(errs[i], store.ErrStaleCatalog) || !errors.Is(gerr, store.ErrNotFound)) {
				t.Errorf("stale publish %d: %v, then GetEvent %v; want ErrStaleCatalog and nothing stored", i, errs[i], gerr)
			}
			if i%2 == 0 && (errs[i] != nil || gerr != nil) {
				t.Errorf("current publish %d: %v, then GetEvent %v; want stored", i, errs[i], gerr)
			}
		}
		if d := f.listDeliveries(store.ListDeliveriesParams{EndpointID: ep.ID, ListParams: store.ListParams{Limit: 100}}); len(d) != 7+n/2 {
			t.Errorf("%d deliveries, want %d (one per stored event)", len(d), 7+n/2)
		}
	})
}

// publishedEvent: PublishedEvent answers a publish that repeats a stored
// event (by idempotency key, else by id) as PublishEvent would — the
// original and its delivery count — without writing; other content is
// ErrConflict, a publish that repeats nothing ErrNotFound.
func (s suite) publishedEvent(t *testing.T) {
	s.run(t, "Answers", func(t *testing.T, f *fixture) {
		f.endpoint("acme")
		f.endpoint("acme")
		ev := newEvent("acme", "file.updated", `{"n":1}`)
		ev.ID = store.EventKey("acme", "L1", true)
		ev.IdempotencyKey = "k1"
		p := publishParams(ev, base)
		p.IDFromClient = true
		if _, err := f.s.PublishedEvent(f.ctx, p); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("before the publish: %v, want ErrNotFound", err)
		}
		f.publishEvent(ev, base)
		want := func(what string, p store.PublishParams) {
			t.Helper()
			res, err := f.s.PublishedEvent(f.ctx, p)
			if err != nil || res.Created || res.Event.ID != ev.ID || string(res.Event.Body) != string(ev.Body) || res.Deliveries != 2 {
				t.Fatalf("%s: %+v, %v; want the original with 2 deliveries", what, res, err)
			}
		}
		want("same id and key", p)
		byKey := p
		byKey.Event.ID, byKey.IDFromClient = store.NewID("evt"), false
		want("same key, Herald's id", byKey)
		byID := p
		byID.Event.IdempotencyKey = ""
		want("same id, no key", byID)
		other := p
		other.Event.Fingerprint = store.Fingerprint("acme", "file.updated", []byte(`{"n":2}`))
		_, err := f.s.PublishedEvent(f.ctx, other)
		wantRefusal(t, "same id and key, other content", err, store.PublishConflict(ev, other.Event, true))
		otherID := p
		otherID.Event.ID = store.EventKey("acme", "L2", true)
		_, err = f.s.PublishedEvent(f.ctx, otherID)
		wantRefusal(t, "the key of another event, with an id of the producer's", err, store.PublishConflict(ev, otherID.Event, true))
		elsewhere := p
		elsewhere.Event.Tenant, elsewhere.Event.ID = "globex", store.EventKey("globex", "L1", true)
		if _, err := f.s.PublishedEvent(f.ctx, elsewhere); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the same id and key in another tenant: %v, want ErrNotFound", err)
		}
		if n := len(f.listDeliveries(store.ListDeliveriesParams{EventID: ev.ID})); n != 2 {
			t.Fatalf("%d deliveries after the answers, want 2 (nothing written)", n)
		}
	})
}

// eventTypePages: the catalog is listed a page at a time in byte order of
// the names (upper case before lower, "a.b" before "a.b.c" before "a.c"),
// each type whole; a page starts after the cursor's name even when that
// type is gone, and the last page carries no cursor. AllEventTypes reads
// past the largest page (1,000 types).
func (s suite) eventTypePages(t *testing.T) {
	st := s.newStore(t)
	ctx := t.Context()
	create := func(name string) {
		t.Helper()
		schema := json.RawMessage(`{"type":"object"}`)
		if _, err := st.CreateEventType(ctx, store.EventType{Name: name, Versions: []store.EventTypeVersion{{Version: 1, Schema: schema, CreatedAt: base}},
			CreatedAt: base, UpdatedAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a.c", "a.b.c", "B.z", "a.b", "b.a"} {
		create(n)
	}
	var got []string
	var cursors []string
	p := store.ListParams{Limit: 2}
	for range 10 {
		pg, err := st.ListEventTypes(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, et := range pg.Data {
			if len(et.Versions) != 1 || string(et.Versions[0].Schema) != `{"type":"object"}` {
				t.Errorf("%s listed with versions %+v; want its version 1 whole", et.Name, et.Versions)
			}
			got = append(got, et.Name)
		}
		if len(pg.Data) > 2 {
			t.Fatalf("page of %d with limit 2", len(pg.Data))
		}
		if pg.NextCursor == "" {
			break
		}
		cursors = append(cursors, pg.NextCursor)
		p.Cursor = pg.NextCursor
	}
	if want := "B.z a.b a.b.c a.c b.a"; fmt.Sprint(got) != "["+want+"]" {
		t.Errorf("pages of 2 listed %v; want [%s], by name in byte order", got, want)
	}
	if len(cursors) != 2 {
		t.Errorf("5 types in pages of 2 gave %d cursors; want 2 (the last page has none)", len(cursors))
	}
	// A page after a name that is not (or no longer) catalogued starts at
	// the next name.
	pg, err := st.ListEventTypes(ctx, store.ListParams{Limit: 10, Cursor: "a.bb"})
	if err != nil || len(pg.Data) != 2 || pg.Data[0].Name != "a.c" || pg.NextCursor != "" {
		t.Errorf("page after a.bb = %+v, %v; want a.c, b.a and no cursor", pg, err)
	}
	// The default page is 50; AllEventTypes goes past 1,000.
	for i := range 1001 {
		create(fmt.Sprintf("n.%04d", i))
	}
	if pg, err := st.ListEventTypes(ctx, store.ListParams{}); err != nil || len(pg.Data) != 50 || pg.NextCursor != pg.Data[49].Name {
		t.Errorf("default page: %d types, cursor %q, %v; want 50 and the last one's name", len(pg.Data), pg.NextCursor, err)
	}
	all, err := store.AllEventTypes(ctx, st)
	if err != nil || len(all) != 1006 || all[1005].Name != "n.1000" {
		t.Errorf("AllEventTypes: %d types, %v; want 1006, the last n.1000", len(all), err)
	}
}
