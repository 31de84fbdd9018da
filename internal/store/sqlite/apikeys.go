package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

const apiKeyColumns = "id, kind, name, role, tenant, hash, created_at, expires_at, revoked_at, last_used_at, created_by"

func scanAPIKey(sc scanner) (store.APIKey, error) {
	var (
		k                          store.APIKey
		created                    int64
		expires, revoked, lastUsed sql.NullInt64
	)
	if err := sc.Scan(&k.ID, &k.Kind, &k.Name, &k.Role, &k.Tenant, &k.Hash, &created, &expires, &revoked, &lastUsed, &k.CreatedBy); err != nil {
		return k, err
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt, k.LastUsedAt = fromMicro(created), nullMicro(expires), nullMicro(revoked), nullMicro(lastUsed)
	return k, nil
}

func optMicro(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micro(t)
}

// CreateAPIKey implements store.Store.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) (store.APIKey, error) {
	_, err := s.execWrite(ctx, "INSERT INTO api_keys ("+apiKeyColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		k.ID, k.Kind, k.Name, k.Role, k.Tenant, k.Hash, micro(k.CreatedAt), optMicro(k.ExpiresAt), optMicro(k.RevokedAt), optMicro(k.LastUsedAt), k.CreatedBy)
	if err != nil && uniqueViolation(err) {
		return store.APIKey{}, store.Exists("API key " + k.ID)
	}
	if err != nil {
		return store.APIKey{}, wrap("create api key", err)
	}
	return s.LookupAPIKey(ctx, k.Hash)
}

// LookupAPIKey implements store.Store.
func (s *Store) LookupAPIKey(ctx context.Context, hash []byte) (store.APIKey, error) {
	k, err := scanAPIKey(s.r.QueryRowContext(ctx, "SELECT "+apiKeyColumns+" FROM api_keys WHERE hash = ?", hash))
	return k, wrap("api key", err)
}

// CountAPIKeys implements store.Store.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM api_keys WHERE kind = 'key' AND revoked_at IS NULL").Scan(&n)
	return n, wrap("count api keys", err)
}

// ListAPIKeys implements store.Store.
func (s *Store) ListAPIKeys(ctx context.Context, kind string, p store.ListParams) (store.Page[store.APIKey], error) {
	q := "SELECT " + apiKeyColumns + " FROM api_keys WHERE kind = ?"
	args := []any{kind}
	if p.Cursor != "" {
		q += " AND id < ?"
		args = append(args, p.Cursor)
	}
	size := p.PageSize()
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, size+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page[store.APIKey]{}, wrap("api keys", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return store.Page[store.APIKey]{}, wrap("api keys", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return store.Page[store.APIKey]{}, wrap("api keys", err)
	}
	return store.Paginate(out, size, func(k store.APIKey) string { return k.ID }), nil
}

// RevokeAPIKey implements store.Store.
func (s *Store) RevokeAPIKey(ctx context.Context, kind, id string, now time.Time) error {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return wrap("revoke api key", err)
	}
	defer done()
	res, err := tx.ExecContext(ctx, "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ? AND kind = ?", micro(now), id, kind)
	if err != nil {
		return wrap("revoke api key", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s %s: %w", kindName(kind), id, store.ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE created_by = ? AND kind = 'portal'", micro(now), id); err != nil {
		return wrap("revoke api key", err)
	}
	return wrap("revoke api key", tx.Commit())
}

// TouchAPIKeys implements store.Store: one transaction.
func (s *Store) TouchAPIKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return wrap("touch api keys", err)
	}
	defer done()
	for id, at := range used {
		if _, err := tx.ExecContext(ctx, "UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)", micro(at), id, micro(at)); err != nil {
			return wrap("touch api keys", err)
		}
	}
	return wrap("touch api keys", tx.Commit())
}

// kindName is how errors name a stored credential of kind.
func kindName(kind string) string {
	if kind == store.KeyKindPortal {
		return "portal session"
	}
	return "api key"
}
