package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/herald-webhooks/herald/internal/store"
)

const sourceColumns = "id, name, endpoint_id, config, created_at, updated_at"

func (s *Store) scanSource(sc scanner) (store.Source, error) {
	var (
		src                  store.Source
		config               string
		createdAt, updatedAt int64
	)
	if err := sc.Scan(&src.ID, &src.Name, &src.EndpointID, &config, &createdAt, &updatedAt); err != nil {
		return src, err
	}
	src.CreatedAt, src.UpdatedAt = fromMicro(createdAt), fromMicro(updatedAt)
	raw, err := store.OpenBytes(s.box, src.ID, config)
	if err != nil {
		return src, store.UnreadableSource(src, err)
	}
	src.Config = raw
	return src, nil
}

// CreateSource implements store.Store.
func (s *Store) CreateSource(ctx context.Context, p store.CreateSourceParams) (store.Source, error) {
	src, ep := p.Source, p.Endpoint
	ep.Kind = store.EndpointKindSource
	ep.Tenant = src.ID
	src.EndpointID = ep.ID
	if ep.State == "" {
		ep.State = store.EndpointEnabled
	}
	config, err := store.SealBytes(s.box, src.ID, src.Config)
	if err != nil {
		return store.Source{}, err
	}
	args, err := s.endpointArgs(ep)
	if err != nil {
		return store.Source{}, err
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return store.Source{}, wrap("create source", err)
	}
	defer done()
	if _, err := tx.ExecContext(ctx, "INSERT INTO endpoints ("+endpointColumns+") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", args...); err != nil {
		if uniqueViolation(err) {
			return store.Source{}, store.Exists("endpoint " + ep.ID)
		}
		return store.Source{}, wrap("create source", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO sources ("+sourceColumns+") VALUES (?,?,?,?,?,?)",
		src.ID, src.Name, src.EndpointID, config, micro(src.CreatedAt), micro(src.UpdatedAt)); err != nil {
		if uniqueViolation(err) {
			return store.Source{}, store.Exists("source " + src.ID)
		}
		return store.Source{}, wrap("create source", err)
	}
	out, err := s.scanSource(tx.QueryRowContext(ctx, "SELECT "+sourceColumns+" FROM sources WHERE id = ?", src.ID))
	if err != nil {
		return store.Source{}, wrap("create source", err)
	}
	return out, wrap("create source", tx.Commit())
}

// GetSource implements store.Store.
func (s *Store) GetSource(ctx context.Context, id string) (store.Source, error) {
	src, err := s.scanSource(s.r.QueryRowContext(ctx, "SELECT "+sourceColumns+" FROM sources WHERE id = ?", id))
	return src, store.SourceError(wrap("source "+id, err))
}

// ListSources implements store.Store.
func (s *Store) ListSources(ctx context.Context, p store.ListParams) (store.Page[store.Source], error) {
	q := "SELECT " + sourceColumns + " FROM sources"
	var args []any
	if p.Cursor != "" {
		q += " WHERE id < ?"
		args = append(args, p.Cursor)
	}
	lim := p.PageSize()
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, lim+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page[store.Source]{}, wrap("list sources", err)
	}
	defer rows.Close()
	var out []store.Source
	for rows.Next() {
		src, err := store.ListedSource(s.scanSource(rows))
		if err != nil {
			return store.Page[store.Source]{}, wrap("list sources", err)
		}
		out = append(out, src)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.Source]{}, wrap("list sources", err)
	}
	return store.Paginate(out, lim, func(s store.Source) string { return s.ID }), nil
}

// UpdateSource implements store.Store.
func (s *Store) UpdateSource(ctx context.Context, p store.UpdateSourceParams) (store.Source, error) {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return store.Source{}, wrap("update source", err)
	}
	defer done()
	src, err := s.scanSource(tx.QueryRowContext(ctx, "SELECT "+sourceColumns+" FROM sources WHERE id = ?", p.ID))
	if u := (*store.UnreadableSourceError)(nil); errors.As(err, &u) && p.Config != nil {
		// Its configuration does not open: replaced whole by p.Config.
		src, err = u.Source, nil
	}
	if err != nil {
		return store.Source{}, store.SourceError(wrap("source "+p.ID, err))
	}
	if p.Name != nil {
		src.Name = *p.Name
	}
	if p.Config != nil {
		src.Config = *p.Config
	}
	config, err := store.SealBytes(s.box, src.ID, src.Config)
	if err != nil {
		return store.Source{}, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE sources SET name = ?, config = ?, updated_at = ? WHERE id = ?", src.Name, config, micro(p.Now), src.ID); err != nil {
		return store.Source{}, wrap("update source", err)
	}
	if p.DestinationURL != nil {
		if _, err := tx.ExecContext(ctx, "UPDATE endpoints SET url = ?, failing_since = NULL, updated_at = ? WHERE id = ?", *p.DestinationURL, micro(p.Now), src.EndpointID); err != nil {
			return store.Source{}, wrap("update source", err)
		}
		s.endpointChanged()
	}
	out, err := s.scanSource(tx.QueryRowContext(ctx, "SELECT "+sourceColumns+" FROM sources WHERE id = ?", src.ID))
	if err != nil {
		return store.Source{}, wrap("update source", err)
	}
	return out, wrap("update source", tx.Commit())
}

// DeleteSource implements store.Store. Its forwarding endpoint goes with
// it, the endpoint's deliveries in chunks (deleteFirstChunk, deleteRest).
func (s *Store) DeleteSource(ctx context.Context, id string) error {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return wrap("delete source", err)
	}
	defer done()
	var endpointID string
	if err := tx.QueryRowContext(ctx, "DELETE FROM sources WHERE id = ? RETURNING endpoint_id", id).Scan(&endpointID); err != nil {
		if err == sql.ErrNoRows {
			return fmt.Errorf("source %s: %w", id, store.ErrNotFound)
		}
		return wrap("delete source", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM endpoints WHERE id = ?", endpointID); err != nil {
		return wrap("delete source", err)
	}
	s.endpointChanged()
	// Its forwarding endpoint's deliveries go as an endpoint's delete's
	// do (DeleteEndpoint): the first chunk here, the rest one chunk per
	// transaction behind waiting publishes, not all in this transaction
	// (the single writer, and every tenant's publishes, waited for it).
	more, err := deleteFirstChunk(ctx, tx, endpointID)
	if err != nil {
		return wrap("delete source", err)
	}
	if err := tx.Commit(); err != nil {
		return wrap("delete source", err)
	}
	done() // the next chunks take the writer again
	if more {
		if _, err := s.deleteRest(context.WithoutCancel(ctx), endpointID); err != nil {
			s.retryDeleteRest(endpointID, err)
			return wrap("delete source: delete its deliveries", err)
		}
	}
	return nil
}
