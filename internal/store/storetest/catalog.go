package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// eventTypes: the catalog stores types with their versions (schemas kept
// byte for byte), refuses a second type of one name, lists by name, and
// updates only from the stored revision (optimistic concurrency).
func (s suite) eventTypes(t *testing.T) {
	st := s.newStore(t)
	ctx := t.Context()
	if cat, err := st.ListEventTypes(ctx); err != nil || len(cat) != 0 {
		t.Fatalf("empty catalog: %v %v", cat, err)
	}
	schema := json.RawMessage(`{"type":"object","required":["file_id"]}`)
	b, err := st.CreateEventType(ctx, store.EventType{Name: "file.updated", Description: "d", ResourceID: "/file_id",
		Versions: []store.EventTypeVersion{{Version: 1, Schema: schema, CreatedAt: base}}, CreatedAt: base, UpdatedAt: base})
	if err != nil || b.Revision != 1 || string(b.Versions[0].Schema) != string(schema) || b.ResourceID != "/file_id" || !b.CreatedAt.Equal(base) {
		t.Fatalf("create: %+v %v", b, err)
	}
	if _, err := st.CreateEventType(ctx, store.EventType{Name: "file.updated", Versions: b.Versions, CreatedAt: base, UpdatedAt: base}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
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
	if _, err := st.UpdateEventType(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update from a stale revision = %v, want ErrConflict", err)
	}
	if _, err := st.UpdateEventType(ctx, store.EventType{Name: "nope", Revision: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown = %v, want ErrNotFound", err)
	}
	cat, err := st.ListEventTypes(ctx)
	if err != nil || len(cat) != 2 || cat[0].Name != "a.first" || cat[1].Name != "file.updated" || cat[1].Revision != 2 {
		t.Fatalf("list: %+v %v", cat, err)
	}
}
