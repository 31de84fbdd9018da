package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-webhooks/herald/internal/store"
)

const sourceColumns = "id, name, endpoint_id, config, created_at, updated_at"

func (s *Store) scanSource(row pgx.Row) (store.Source, error) {
	var (
		src    store.Source
		config string
	)
	if err := row.Scan(&src.ID, &src.Name, &src.EndpointID, &config, &src.CreatedAt, &src.UpdatedAt); err != nil {
		return src, err
	}
	src.CreatedAt, src.UpdatedAt = src.CreatedAt.UTC(), src.UpdatedAt.UTC()
	raw, err := store.OpenBytes(s.box, src.ID, config)
	if err != nil {
		return src, store.UnreadableSource(src, err)
	}
	src.Config = raw
	return src, nil
}

// CreateSource implements store.Store: the forwarding endpoint (kind
// "source", tenant = the source id) and the source in one transaction.
func (s *Store) CreateSource(ctx context.Context, p store.CreateSourceParams) (store.Source, error) {
	src, ep := p.Source, p.Endpoint
	ep.Kind = store.EndpointKindSource
	ep.Tenant = src.ID
	src.EndpointID = ep.ID
	config, err := store.SealBytes(s.box, src.ID, src.Config)
	if err != nil {
		return store.Source{}, err
	}
	insEndpoint, args, err := s.insertEndpoint(ep)
	if err != nil {
		return store.Source{}, fmt.Errorf("create source: %w", err)
	}
	var out store.Source
	b := newTxBatch()
	b.Queue(insEndpoint, args...).Exec(func(pgconn.CommandTag) error { return nil })
	b.Queue("INSERT INTO sources ("+sourceColumns+") VALUES ($1, $2, $3, $4, $5, $6) RETURNING "+sourceColumns,
		src.ID, src.Name, src.EndpointID, config, ts(src.CreatedAt), ts(src.UpdatedAt)).QueryRow(func(row pgx.Row) error {
		var err error
		out, err = s.scanSource(row)
		return err
	})
	if err := s.txBatch(ctx, "create source", b, nil); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			if pgErr.TableName == "endpoints" {
				return store.Source{}, store.Exists("endpoint " + ep.ID)
			}
			return store.Source{}, store.Exists("source " + src.ID)
		}
		return store.Source{}, err
	}
	return out, nil
}

// GetSource implements store.Store.
func (s *Store) GetSource(ctx context.Context, id string) (store.Source, error) {
	src, err := s.scanSource(s.pool.QueryRow(ctx, "SELECT "+sourceColumns+" FROM sources WHERE id = $1", id))
	return src, store.SourceError(wrap("source "+id, err))
}

// ListSources implements store.Store: newest first by id; the cursor is the
// last id of the page.
func (s *Store) ListSources(ctx context.Context, p store.ListParams) (store.Page[store.Source], error) {
	var f filter
	if p.Cursor != "" {
		f.add("id < ?", p.Cursor)
	}
	lim := p.PageSize()
	rows, err := s.pool.Query(ctx, "SELECT "+sourceColumns+" FROM sources"+f.clause()+" ORDER BY id DESC"+f.limit(lim+1), f.args...)
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

// UpdateSource implements store.Store. A new destination is a new URL of
// the forwarding endpoint, which starts a new failure streak.
func (s *Store) UpdateSource(ctx context.Context, p store.UpdateSourceParams) (store.Source, error) {
	var config *string
	if p.Config != nil {
		c, err := store.SealBytes(s.box, p.ID, *p.Config)
		if err != nil {
			return store.Source{}, err
		}
		config = &c
	}
	now := ts(p.Now)
	var out store.Source
	b := newTxBatch()
	b.Queue(`UPDATE sources SET name = COALESCE($2, name), config = COALESCE($3, config), updated_at = $4
		WHERE id = $1 RETURNING `+sourceColumns, p.ID, p.Name, config, now).QueryRow(func(row pgx.Row) error {
		var err error
		if out, err = s.scanSource(row); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("source %s: %w", p.ID, store.ErrNotFound)
		}
		return err
	})
	if p.DestinationURL != nil {
		b.Queue(`UPDATE endpoints SET url = $2, failing_since = NULL, updated_at = $3
			WHERE id = (SELECT endpoint_id FROM sources WHERE id = $1)`, p.ID, *p.DestinationURL, now)
	}
	if err := s.txBatch(ctx, "update source", b, nil); err != nil {
		// An update without a configuration of a source whose
		// configuration does not open: rolled back.
		return store.Source{}, store.SourceError(err)
	}
	return out, nil
}

// DeleteSource implements store.Store: the source, its forwarding endpoint
// and that endpoint's deliveries. Like DeleteEndpoint it takes the tenant
// (the source id) lock exclusively, so no publish adds a delivery to the
// endpoint being deleted; the endpoint's deliveries are deleted in chunks
// as DeleteEndpoint deletes them.
func (s *Store) DeleteSource(ctx context.Context, id string) error {
	var (
		found      bool
		endpointID string
	)
	b := newTxBatch()
	b.Queue("SELECT pg_advisory_xact_lock($2::integer, hashtext($1))", id, tenantLockClass)
	b.Queue("DELETE FROM sources WHERE id = $1 RETURNING endpoint_id", id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&endpointID); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	var (
		rest deletion
		more bool
	)
	err := s.txBatch(ctx, "delete source", b, func(tx pgx.Tx) error {
		if !found {
			return fmt.Errorf("source %s: %w", id, store.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM endpoints WHERE id = $1", endpointID); err != nil {
			return err
		}
		// Its deliveries as DeleteEndpoint deletes them: the first chunk
		// here, the rest after the commit.
		var err error
		rest, more, err = startDeletion(ctx, tx, endpointID)
		return err
	})
	if err != nil || !more {
		return err
	}
	if _, _, err := s.deleteChunks(context.WithoutCancel(ctx), rest); err != nil {
		return s.leftToRescue("delete the deliveries of deleted source "+id+"'s endpoint "+endpointID, err)
	}
	return nil
}
