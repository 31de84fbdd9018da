package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/herald-webhooks/herald/internal/store"
)

// where joins a column's own condition to one more.
func where(c store.SealedColumn, cond string) string {
	if c.Where == "" {
		return cond
	}
	return "(" + c.Where + ") AND " + cond
}

// SealedValues implements store.SealedStore (herald rekey). Table and
// column names come from store.SealedColumns, never from input.
func (s *Store) SealedValues(ctx context.Context, c store.SealedColumn, after string, limit int) ([]store.SealedValue, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+c.Key+", "+c.Column+" FROM "+c.Table+" WHERE "+where(c, c.Key+" > ?")+" ORDER BY "+c.Key+" LIMIT ?", after, limit)
	if err != nil {
		return nil, wrap("rekey", err)
	}
	defer rows.Close()
	var out []store.SealedValue
	for rows.Next() {
		var v store.SealedValue
		if err := rows.Scan(&v.Key, &v.Value); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// SealedValue implements store.SealedStore.
func (s *Store) SealedValue(ctx context.Context, c store.SealedColumn, key string) (string, bool, error) {
	var v string
	err := s.r.QueryRowContext(ctx, "SELECT "+c.Column+" FROM "+c.Table+" WHERE "+where(c, c.Key+" = ?"), key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
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
	res, err := s.execWrite(ctx, "UPDATE "+c.Table+" SET "+c.Column+" = ? WHERE "+where(c, c.Key+" = ? AND "+c.Column+" = ?"), new, key, old)
	if err != nil {
		return false, wrap("rekey", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
