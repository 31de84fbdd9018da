package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
)

// where joins a column's own condition to one more.
func where(c store.SealedColumn, cond string) string {
	if c.Where == "" {
		return cond
	}
	return "(" + c.Where + ") AND " + cond
}

// SealedValues implements store.SealedStore (herald rekey): keys in byte
// order (COLLATE "C"). Table and column names come from
// store.SealedColumns, never from input.
func (s *Store) SealedValues(ctx context.Context, c store.SealedColumn, after string, limit int) ([]store.SealedValue, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+c.Key+", "+c.Column+" FROM "+c.Table+" WHERE "+where(c, c.Key+` > $1 COLLATE "C"`)+" ORDER BY "+c.Key+` COLLATE "C" LIMIT $2`, after, limit)
	if err != nil {
		return nil, wrap("rekey", err)
	}
	defer rows.Close()
	var out []store.SealedValue
	for rows.Next() {
		var v store.SealedValue
		if err := rows.Scan(&v.Key, &v.Value); err != nil {
			return nil, wrap("rekey", err)
		}
		out = append(out, v)
	}
	return out, wrap("rekey", rows.Err())
}

// SealedValue implements store.SealedStore.
func (s *Store) SealedValue(ctx context.Context, c store.SealedColumn, key string) (string, bool, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT "+c.Column+" FROM "+c.Table+" WHERE "+where(c, c.Key+" = $1"), key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("rekey", err)
	}
	return v, true, nil
}

// ReplaceSealed implements store.SealedStore: a compare-and-set of one
// value.
func (s *Store) ReplaceSealed(ctx context.Context, c store.SealedColumn, key, old, new string) (bool, error) {
	tag, err := s.pool.Exec(ctx, "UPDATE "+c.Table+" SET "+c.Column+" = $1 WHERE "+where(c, c.Key+" = $2 AND "+c.Column+" = $3"), new, key, old)
	if err != nil {
		return false, wrap("rekey", err)
	}
	return tag.RowsAffected() == 1, nil
}
