package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

const eventTypeColumns = "name, description, resource_id, versions, revision, created_at, updated_at"

func scanEventType(row pgx.Row) (store.EventType, error) {
	var (
		t                    store.EventType
		versions             string
		createdAt, updatedAt time.Time
	)
	if err := row.Scan(&t.Name, &t.Description, &t.ResourceID, &versions, &t.Revision, &createdAt, &updatedAt); err != nil {
		return t, err
	}
	if err := json.Unmarshal([]byte(versions), &t.Versions); err != nil {
		return t, store.Internal(fmt.Errorf("event type %s versions: %w", t.Name, err))
	}
	t.CreatedAt, t.UpdatedAt = createdAt.UTC(), updatedAt.UTC()
	return t, nil
}

// CreateEventType implements store.Store.
func (s *Store) CreateEventType(ctx context.Context, t store.EventType) (store.EventType, error) {
	vb, err := json.Marshal(t.Versions)
	if err != nil {
		return store.EventType{}, fmt.Errorf("create event type: %w", err)
	}
	got, err := scanEventType(s.pool.QueryRow(ctx, "INSERT INTO event_types ("+eventTypeColumns+") VALUES ($1, $2, $3, $4, 1, $5, $6) RETURNING "+eventTypeColumns,
		t.Name, t.Description, t.ResourceID, string(vb), ts(t.CreatedAt), ts(t.UpdatedAt)))
	if err != nil {
		if isUniqueViolation(err) {
			return store.EventType{}, store.EventTypeExists(t.Name)
		}
		return store.EventType{}, wrap("create event type", err)
	}
	return got, nil
}

// GetEventType implements store.Store.
func (s *Store) GetEventType(ctx context.Context, name string) (store.EventType, error) {
	t, err := scanEventType(s.pool.QueryRow(ctx, "SELECT "+eventTypeColumns+" FROM event_types WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("event type %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return t, wrap("get event type", err)
	}
	return t, nil
}

// caseVariantSQL finds a catalogued name differing from $1 only in case,
// on the index event_types_lower_name, reading names only.
const caseVariantSQL = "SELECT name FROM event_types WHERE lower(name) = lower($1) AND name <> $1 ORDER BY name LIMIT 1"

// EventTypeCaseVariant implements store.Store.
func (s *Store) EventTypeCaseVariant(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, caseVariantSQL, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", wrap("get event type", err)
	}
	return v, nil
}

// ListEventTypes implements store.Store: a page by name, from the
// primary key's order.
func (s *Store) ListEventTypes(ctx context.Context, p store.ListParams) (store.Page[store.EventType], error) {
	lim := p.PageSize()
	rows, err := s.pool.Query(ctx, "SELECT "+eventTypeColumns+" FROM event_types WHERE name > $1 ORDER BY name LIMIT $2", p.Cursor, lim+1)
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

// UpdateEventType implements store.Store.
func (s *Store) UpdateEventType(ctx context.Context, t store.EventType) (store.EventType, error) {
	vb, err := json.Marshal(t.Versions)
	if err != nil {
		return store.EventType{}, fmt.Errorf("update event type: %w", err)
	}
	got, err := scanEventType(s.pool.QueryRow(ctx, `UPDATE event_types SET description = $2, resource_id = $3, versions = $4, revision = revision + 1, updated_at = $5
		WHERE name = $1 AND revision = $6 RETURNING `+eventTypeColumns, t.Name, t.Description, t.ResourceID, string(vb), ts(t.UpdatedAt), t.Revision))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.GetEventType(ctx, t.Name); err != nil {
			return store.EventType{}, err
		}
		return store.EventType{}, store.EventTypeChanged(t.Name, t.Revision)
	}
	if err != nil {
		return store.EventType{}, wrap("update event type", err)
	}
	return got, nil
}
