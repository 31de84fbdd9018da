package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

const apiKeyColumns = "id, kind, name, role, tenant, hash, created_at, expires_at, revoked_at, last_used_at, created_by"

func scanAPIKey(row pgx.Row) (store.APIKey, error) {
	var (
		k                          store.APIKey
		created                    time.Time
		expires, revoked, lastUsed *time.Time
	)
	if err := row.Scan(&k.ID, &k.Kind, &k.Name, &k.Role, &k.Tenant, &k.Hash, &created, &expires, &revoked, &lastUsed, &k.CreatedBy); err != nil {
		return k, err
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt, k.LastUsedAt = created.UTC(), fromNullTS(expires), fromNullTS(revoked), fromNullTS(lastUsed)
	return k, nil
}

// CreateAPIKey implements store.Store.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) (store.APIKey, error) {
	row := s.pool.QueryRow(ctx, "INSERT INTO api_keys ("+apiKeyColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING "+apiKeyColumns,
		k.ID, k.Kind, k.Name, k.Role, k.Tenant, k.Hash, ts(k.CreatedAt), nullTS(k.ExpiresAt), nullTS(k.RevokedAt), nullTS(k.LastUsedAt), k.CreatedBy)
	out, err := scanAPIKey(row)
	if isUniqueViolation(err) {
		return store.APIKey{}, store.Exists("API key " + k.ID)
	}
	return out, wrap("create api key", err)
}

// LookupAPIKey implements store.Store.
func (s *Store) LookupAPIKey(ctx context.Context, hash []byte) (store.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, "SELECT "+apiKeyColumns+" FROM api_keys WHERE hash = $1", hash))
	return k, wrap("api key", err)
}

// CountAPIKeys implements store.Store.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM api_keys WHERE kind = 'key' AND revoked_at IS NULL").Scan(&n)
	return n, wrap("count api keys", err)
}

// ListAPIKeys implements store.Store.
func (s *Store) ListAPIKeys(ctx context.Context, kind string, p store.ListParams) (store.Page[store.APIKey], error) {
	q := "SELECT " + apiKeyColumns + " FROM api_keys WHERE kind = $1"
	args := []any{kind}
	if p.Cursor != "" {
		q += " AND id < $2"
		args = append(args, p.Cursor)
	}
	size := p.PageSize()
	q += fmt.Sprintf(" ORDER BY id DESC LIMIT %d", size+1)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.Page[store.APIKey]{}, wrap("api keys", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.APIKey, error) { return scanAPIKey(r) })
	if err != nil {
		return store.Page[store.APIKey]{}, wrap("api keys", err)
	}
	return store.Paginate(out, size, func(k store.APIKey) string { return k.ID }), nil
}

// RevokeAPIKey implements store.Store.
func (s *Store) RevokeAPIKey(ctx context.Context, kind, id string, now time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ct, err := tx.Exec(ctx, "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2 AND kind = $3", ts(now), id, kind)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return fmt.Errorf("%s %s: %w", kindName(kind), id, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE created_by = $2 AND kind = 'portal'", ts(now), id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return err
	}
	return wrap("revoke api key", err)
}

// LockAdminKeys implements store.AdminKeyLocker: a session advisory lock
// (pg_advisory_lock(adminKeysLockClass, 0)) on a connection of its own,
// outside the pool (as Listen's), held until unlock, which closes it and
// with it the session and its lock. Outside the pool, since the check and
// the revocation the lock covers take the pool's connections: with a pool
// of one, holding the lock on a pooled connection waited for itself.
func (s *Store) LockAdminKeys(ctx context.Context) (func(), error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, wrap("lock admin keys", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1::integer, 0)", adminKeysLockClass); err != nil {
		// A wait cut by ctx may leave the lock's request behind: the
		// session ends with the connection.
		conn.Close(context.Background()) //nolint:errcheck
		return nil, wrap("lock admin keys", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn.Close(ctx) //nolint:errcheck // closing ends the session, which releases its locks
		})
	}, nil
}

// TouchAPIKeys implements store.Store.
func (s *Store) TouchAPIKeys(ctx context.Context, used map[string]time.Time) error {
	for id, at := range used {
		if _, err := s.pool.Exec(ctx, "UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)", ts(at), id); err != nil {
			return wrap("touch api keys", err)
		}
	}
	return nil
}

// kindName is how errors name a stored credential of kind.
func kindName(kind string) string {
	if kind == store.KeyKindPortal {
		return "portal session"
	}
	return "api key"
}
