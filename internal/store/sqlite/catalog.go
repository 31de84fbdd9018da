package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/herald-webhooks/herald/internal/store"
)

const eventTypeColumns = "name, description, resource_id, versions, revision, created_at, updated_at"

func scanEventType(sc scanner) (store.EventType, error) {
	var (
		t                    store.EventType
		versions             string
		createdAt, updatedAt int64
	)
	if err := sc.Scan(&t.Name, &t.Description, &t.ResourceID, &versions, &t.Revision, &createdAt, &updatedAt); err != nil {
		return t, err
	}
	if err := json.Unmarshal([]byte(versions), &t.Versions); err != nil {
		return t, store.Internal(fmt.Errorf("event type %s versions: %w", t.Name, err))
	}
	t.CreatedAt, t.UpdatedAt = fromMicro(createdAt), fromMicro(updatedAt)
	return t, nil
}

// CreateEventType implements store.Store.
func (s *Store) CreateEventType(ctx context.Context, t store.EventType) (store.EventType, error) {
	vb, err := json.Marshal(t.Versions)
	if err != nil {
		return store.EventType{}, fmt.Errorf("create event type: %w", err)
	}
	t.Revision = 1
	_, err = s.execWrite(ctx, "INSERT INTO event_types ("+eventTypeColumns+") VALUES (?,?,?,?,?,?,?)",
		t.Name, t.Description, t.ResourceID, string(vb), t.Revision, micro(t.CreatedAt), micro(t.UpdatedAt))
	if err != nil {
		if uniqueViolation(err) {
			return store.EventType{}, store.EventTypeExists(t.Name)
		}
		return store.EventType{}, wrap("create event type", err)
	}
	return s.GetEventType(ctx, t.Name)
}

// getEventTypeSQL is the API's catalog read (on a cache miss, internal/api/catalogcache.go).
const getEventTypeSQL = "SELECT " + eventTypeColumns + " FROM event_types WHERE name = ?"

// GetEventType implements store.Store. The API's catalog check asks it
// for every type it has not cached (and after a stale answer), so it runs
// a statement prepared once per read connection (Store.readStmts):
// parsing the query per call was most of its cost when every publish
// asked it (a tenth of Herald's CPU at 1,000 publishes/s,
// docs/BENCHMARKS.md).
func (s *Store) GetEventType(ctx context.Context, name string) (store.EventType, error) {
	t, err := scanEventType(s.readStmts[getEventTypeSQL].QueryRowContext(ctx, name))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("event type %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return t, wrap("get event type", err)
	}
	return t, nil
}

// ListEventTypes implements store.Store: a page by name, from the
// primary key's order.
func (s *Store) ListEventTypes(ctx context.Context, p store.ListParams) (store.Page[store.EventType], error) {
	lim := p.PageSize()
	rows, err := s.r.QueryContext(ctx, "SELECT "+eventTypeColumns+" FROM event_types WHERE name > ? ORDER BY name LIMIT ?", p.Cursor, lim+1)
	if err != nil {
		return store.Page[store.EventType]{}, wrap("list event types", err)
	}
	defer rows.Close()
	var out []store.EventType
	for rows.Next() {
		t, err := scanEventType(rows)
		if err != nil {
			return store.Page[store.EventType]{}, wrap("list event types", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.EventType]{}, wrap("list event types", err)
	}
	return store.Paginate(out, lim, func(t store.EventType) string { return t.Name }), nil
}

// caseVariantSQL finds a catalogued name differing from ?1 only in case:
// on the index event_types_name_nocase (names are ASCII, which NOCASE
// folds), reading names only.
const caseVariantSQL = "SELECT name FROM event_types WHERE name = ?1 COLLATE NOCASE AND name <> ?1 ORDER BY name LIMIT 1"

// EventTypeCaseVariant implements store.Store. The API asks it for every
// type it has not cached that is not catalogued, so it runs prepared
// (Store.readStmts), as GetEventType does.
func (s *Store) EventTypeCaseVariant(ctx context.Context, name string) (string, error) {
	var v string
	err := s.readStmts[caseVariantSQL].QueryRowContext(ctx, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", wrap("get event type", err)
	}
	return v, nil
}

// UpdateEventType implements store.Store.
func (s *Store) UpdateEventType(ctx context.Context, t store.EventType) (store.EventType, error) {
	vb, err := json.Marshal(t.Versions)
	if err != nil {
		return store.EventType{}, fmt.Errorf("update event type: %w", err)
	}
	res, err := s.execWrite(ctx, `UPDATE event_types SET description = ?, resource_id = ?, versions = ?, revision = revision + 1, updated_at = ?
		WHERE name = ? AND revision = ?`, t.Description, t.ResourceID, string(vb), micro(t.UpdatedAt), t.Name, t.Revision)
	if err != nil {
		return store.EventType{}, wrap("update event type", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return store.EventType{}, wrap("update event type", err)
	} else if n == 0 {
		if _, err := s.GetEventType(ctx, t.Name); err != nil {
			return store.EventType{}, err
		}
		return store.EventType{}, store.EventTypeChanged(t.Name, t.Revision)
	}
	return s.GetEventType(ctx, t.Name)
}
