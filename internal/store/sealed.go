package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// SealedColumn is a database column whose values are encrypted at rest
// with HERALD_ENCRYPTION_KEY. SealedColumns lists them all, in one place:
// `herald rekey` re-encrypts exactly these, on every driver. A new
// encrypted column needs only a row here (the drivers read Table, Key,
// Column and Where into their SQL; the names are constants of this file,
// never user input).
type SealedColumn struct {
	// Table, Key (the primary key column) and Column name the values.
	Table, Key, Column string
	// Where, if set, restricts the rows (an SQL condition valid on both
	// drivers, without parameters).
	Where string
	// Context returns the AEAD context a value is bound to, from the row's
	// key; nil means the key itself (SealBytes(box, id, …)).
	Context func(key string) string
	// Bare values are base64 without the "enc:v1:" prefix (the key check);
	// otherwise values without the prefix are plain (written without a
	// box) and left alone.
	Bare bool
	// Member, if set, says the column holds a JSON object whose string
	// members are sealed one by one ("enc:v1:…"), each bound to
	// Member(key, name) (e.g. endpoints.headers: SealHeaders).
	Member func(key, name string) string
}

// SealedColumns are all the encrypted columns. The key check value
// (KeyCheckMeta) is last: rekey moves it to the new key only after every
// other value, so until then a node with only the old key still starts.
var SealedColumns = []SealedColumn{
	{Table: "endpoints", Key: "id", Column: "secrets"},
	{Table: "sources", Key: "id", Column: "config"},
	{Table: "endpoints", Key: "id", Column: "headers", Where: "headers <> '{}'", Member: HeaderContext},
	{Table: "meta", Key: "key", Column: "value", Where: "key = '" + KeyCheckMeta + "'", Context: func(string) string { return KeyCheckMeta }, Bare: true},
}

// SealedValue is one row of a sealed column.
type SealedValue struct {
	Key, Value string
}

// SealedStore is the rekey capability (Capabilities.Sealed): pages of a sealed
// column's rows (by key in byte order, after the given one, ascending),
// one row's value, and a
// compare-and-set of one value (false when the value changed meanwhile).
type SealedStore interface {
	SealedValues(ctx context.Context, c SealedColumn, after string, limit int) ([]SealedValue, error)
	// SealedValue reads one row's value; ok is false when the row is gone.
	SealedValue(ctx context.Context, c SealedColumn, key string) (value string, ok bool, err error)
	ReplaceSealed(ctx context.Context, c SealedColumn, key, old, new string) (bool, error)
}

// RekeyStats counts what Rekey did.
type RekeyStats struct {
	Rewritten int // values moved to the new key
	Current   int // values already under the new key (a resumed run)
	Plain     int // values stored unencrypted, left alone
}

// Rekey re-encrypts every value of SealedColumns under newKey: a value
// that opens with newKey is left (so an interrupted run resumes where it
// stopped); one that opens with old (a Keyring of the previous keys) is
// sealed again with newKey and written only if it did not change meanwhile
// (otherwise it is read again). A value neither key opens stops the run
// with an error naming the row. Each value is its own write, so nodes keep
// running with both keys (secretbox.Keyring) throughout.
func Rekey(ctx context.Context, st SealedStore, old, newKey SecretBox) (RekeyStats, error) {
	var stats RekeyStats
	for i, c := range SealedColumns {
		if i == len(SealedColumns)-1 {
			// Before the key check value moves: the key it leaves is
			// recorded as retired (a node sealing with it is stale).
			if err := retireKeyCheck(ctx, st, c, newKey); err != nil {
				return stats, err
			}
		}
		after := ""
		for {
			rows, err := st.SealedValues(ctx, c, after, 100)
			if err != nil {
				return stats, fmt.Errorf("rekey %s.%s: %w", c.Table, c.Column, err)
			}
			if len(rows) == 0 {
				break
			}
			for _, r := range rows {
				if err := rekeyOne(ctx, st, c, r, old, newKey, &stats); err != nil {
					return stats, err
				}
				after = r.Key
			}
		}
	}
	return stats, nil
}

// metaEnsurer is the Store method retireKeyCheck records with; the
// drivers' SealedStore (Capabilities.Sealed) is their Store, which has it.
type metaEnsurer interface {
	EnsureMeta(ctx context.Context, key, value string) (string, error)
}

// retireKeyCheck records the key check value (column c, the last of
// SealedColumns) as it is, under RetiredKeyMetaPrefix, when newKey does not
// open it: the key sealing it is being retired. CheckKey then finds a node
// whose current key is that one, with the database's key only among its
// previous ones (the variables swapped), stale. Recorded before the value
// moves, so an interrupted rekey has recorded it; a node whose current key
// still opens the key check value is never refused by it. A store that
// cannot record it (no EnsureMeta) records nothing.
func retireKeyCheck(ctx context.Context, st SealedStore, c SealedColumn, newKey SecretBox) error {
	m, ok := st.(metaEnsurer)
	if !ok {
		return nil
	}
	v, found, err := st.SealedValue(ctx, c, KeyCheckMeta)
	if err != nil || !found {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return fmt.Errorf("rekey %s: %w", KeyCheckMeta, err)
	}
	if _, err := newKey.Open(raw, []byte(KeyCheckMeta)); err == nil {
		return nil // already under the new key: nothing is retired
	}
	sum := sha256.Sum256([]byte(v))
	if _, err := m.EnsureMeta(ctx, RetiredKeyMetaPrefix+hex.EncodeToString(sum[:8]), v); err != nil {
		return fmt.Errorf("rekey: recording the retired key: %w", err)
	}
	return nil
}

// reseal moves one sealed value (bound to ctxt) to newKey: it returns the
// value to store and true when it was under old; false (counted as plain or
// current) when nothing needs rewriting. what names the value in errors.
func (c SealedColumn) reseal(v, ctxt, what string, old, newKey SecretBox, stats *RekeyStats) (string, bool, error) {
	raw, plain, err := c.decode(v)
	if err != nil {
		return "", false, fmt.Errorf("rekey %s: %w", what, err)
	}
	if plain {
		stats.Plain++
		return "", false, nil
	}
	if _, err := newKey.Open(raw, []byte(ctxt)); err == nil {
		stats.Current++
		return "", false, nil
	}
	pt, err := old.Open(raw, []byte(ctxt))
	if err != nil {
		return "", false, fmt.Errorf("rekey %s: neither the new nor the previous key opens it: %w", what, err)
	}
	sealed, err := newKey.Seal(pt, []byte(ctxt))
	if err != nil {
		return "", false, err
	}
	return c.encode(sealed), true, nil
}

// rekeyValue computes a row's value under newKey: the value itself, or for
// a Member column each sealed member of its JSON object. changed is false
// when nothing needs rewriting.
func (c SealedColumn) rekeyValue(r SealedValue, old, newKey SecretBox, stats *RekeyStats) (string, bool, error) {
	what := c.Table + "." + c.Column + " of " + r.Key
	if c.Member == nil {
		ctxt := r.Key
		if c.Context != nil {
			ctxt = c.Context(r.Key)
		}
		return c.reseal(r.Value, ctxt, what, old, newKey, stats)
	}
	var members map[string]string
	if err := json.Unmarshal([]byte(r.Value), &members); err != nil {
		return "", false, fmt.Errorf("rekey %s: not a JSON object of strings: %w", what, err)
	}
	changed := false
	for name, v := range members {
		sealed, ok, err := c.reseal(v, c.Member(r.Key, name), what+" ("+name+")", old, newKey, stats)
		if err != nil {
			return "", false, err
		}
		if ok {
			members[name], changed = sealed, true
		}
	}
	if !changed {
		return "", false, nil
	}
	b, err := json.Marshal(members)
	return string(b), true, err
}

// rekeyOne rewrites one row under newKey with a compare-and-set; a value
// changed meanwhile (a node rotated a secret) is read again and retried.
func rekeyOne(ctx context.Context, st SealedStore, c SealedColumn, r SealedValue, old, newKey SecretBox, stats *RekeyStats) error {
	for try := 0; try < 10; try++ {
		before := *stats
		v, changed, err := c.rekeyValue(r, old, newKey, stats)
		if err != nil || !changed {
			return err
		}
		ok, err := st.ReplaceSealed(ctx, c, r.Key, r.Value, v)
		if err != nil {
			return fmt.Errorf("rekey %s.%s of %s: %w", c.Table, c.Column, r.Key, err)
		}
		if ok {
			stats.Rewritten++
			return nil
		}
		*stats = before // the row is counted again once read again
		cur, found, err := st.SealedValue(ctx, c, r.Key)
		if err != nil || !found {
			return err // found false: deleted meanwhile
		}
		r.Value = cur
	}
	return fmt.Errorf("rekey %s.%s of %s: the value kept changing; run rekey again", c.Table, c.Column, r.Key)
}

func (c SealedColumn) decode(v string) (raw []byte, plain bool, err error) {
	s := v
	if !c.Bare {
		rest, ok := strings.CutPrefix(v, sealedPrefix)
		if !ok {
			return nil, true, nil
		}
		s = rest
	}
	raw, err = base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false, errors.New("not base64")
	}
	return raw, false, nil
}

func (c SealedColumn) encode(sealed []byte) string {
	s := base64.StdEncoding.EncodeToString(sealed)
	if c.Bare {
		return s
	}
	return sealedPrefix + s
}
