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
	"time"
)

// SecretBox encrypts endpoint secrets at rest (internal/secretbox
// implements it with AES-256-GCM). context binds a ciphertext to its row.
type SecretBox interface {
	Seal(plaintext, context []byte) ([]byte, error)
	Open(sealed, context []byte) ([]byte, error)
}

type secretJSON struct {
	Value     string `json:"value"`
	CreatedAt int64  `json:"created_at"`           // microseconds since the epoch
	ExpiresAt int64  `json:"expires_at,omitempty"` // microseconds since the epoch
}

// sealedPrefix marks an encrypted secrets column: "enc:v1:" + base64(nonce ‖
// ciphertext ‖ tag) of the JSON list.
const sealedPrefix = "enc:v1:"

// EncodeSecrets renders an endpoint's secrets for its database column:
// sealed by box (bound to endpointID) when box is not nil, else plain JSON.
// Drivers store the result as text.
func EncodeSecrets(box SecretBox, endpointID string, ss []Secret) (string, error) {
	out := make([]secretJSON, len(ss))
	for i, s := range ss {
		out[i] = secretJSON{Value: s.Value, CreatedAt: UnixMicro(s.CreatedAt), ExpiresAt: UnixMicro(s.ExpiresAt)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", err
	}
	v, err := SealBytes(box, endpointID, b)
	if err != nil {
		return "", fmt.Errorf("seal secrets: %w", err)
	}
	return v, nil
}

// DecodeSecrets reverses EncodeSecrets. A sealed column without a box, or
// one the box cannot open, is an error (the wrong HERALD_ENCRYPTION_KEY),
// as is a value that does not decode. Every error reads "secrets: " and
// its cause (e.g. "secrets: secretbox: cannot decrypt: …"): callers add
// which endpoint, not the word again.
func DecodeSecrets(box SecretBox, endpointID, v string) ([]Secret, error) {
	raw, err := OpenBytes(box, endpointID, v)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	var in []secretJSON
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	out := make([]Secret, len(in))
	for i, s := range in {
		out[i] = Secret{Value: s.Value, CreatedAt: FromUnixMicro(s.CreatedAt), ExpiresAt: FromUnixMicro(s.ExpiresAt)}
	}
	return out, nil
}

// UnixMicro encodes a time as microseconds since the Unix epoch, the zero
// time as 0 (the SQLite driver's and the secrets' column format).
func UnixMicro(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// FromUnixMicro reverses UnixMicro (in UTC).
func FromUnixMicro(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// MaxSecrets bounds the secrets an endpoint holds (the current one and
// those still in a rotation overlap).
const MaxSecrets = 5

// RotatedSecrets returns the secret list after a rotation: the new secret
// first; every older secret valid until p.PreviousExpiresAt at the latest
// (an older secret whose own expiry is earlier keeps it), so a rotation
// with overlap N leaves no older secret valid for more than N; a secret
// whose expiry is not after p.Now is dropped (overlap 0: only the new
// secret signs, the case of a leaked secret); at most MaxSecrets are kept.
// Drivers share it so the rule is the same everywhere.
func RotatedSecrets(old []Secret, p RotateSecretParams) []Secret {
	out := []Secret{{Value: p.Secret, CreatedAt: p.Now}}
	for _, s := range old {
		if s.ExpiresAt.IsZero() || s.ExpiresAt.After(p.PreviousExpiresAt) {
			s.ExpiresAt = p.PreviousExpiresAt
		}
		if s.ExpiresAt.IsZero() || !s.ExpiresAt.After(p.Now) {
			continue
		}
		if len(out) < MaxSecrets {
			out = append(out, s)
		}
	}
	return out
}

// SecretID names a secret without revealing it: "sec_" and the first 16
// hex digits of the SHA-256 of its value (GET /v1/endpoints/{id}/secrets,
// DELETE /v1/endpoints/{id}/secrets/{secret_id}).
func SecretID(value string) string {
	h := sha256.Sum256([]byte(value))
	return "sec_" + hex.EncodeToString(h[:8])
}

// ActiveSecrets returns the secrets that sign at now: the current one and
// those whose overlap has not ended.
func ActiveSecrets(ss []Secret, now time.Time) []Secret {
	var out []Secret
	for _, s := range ss {
		if s.ExpiresAt.IsZero() || s.ExpiresAt.After(now) {
			out = append(out, s)
		}
	}
	return out
}

// ErrCurrentSecret is returned when revoking an endpoint's current secret:
// an endpoint always has one; rotate it (with overlap_seconds 0) instead.
var ErrCurrentSecret = Errorf(CodeConflict, "the current secret cannot be revoked: rotate it with overlap_seconds 0 instead")

// RevokedSecrets returns the secret list after revoking the secret named
// id (SecretID) at now: that secret and every expired one are dropped.
// ErrNotFound when no active secret has that id; ErrCurrentSecret for the
// current one. Drivers share it.
func RevokedSecrets(old []Secret, id string, now time.Time) ([]Secret, error) {
	active := ActiveSecrets(old, now)
	for i, s := range active {
		if SecretID(s.Value) != id {
			continue
		}
		if i == 0 && s.ExpiresAt.IsZero() {
			return nil, ErrCurrentSecret
		}
		return append(active[:i:i], active[i+1:]...), nil
	}
	return nil, fmt.Errorf("secret %s: %w", id, ErrNotFound)
}

// KeyCheckMeta is the meta key holding a value sealed with the encryption
// key, written on first start.
const KeyCheckMeta = "encryption_key_check"

// ErrWrongKey means the configured encryption key is not the one this
// database's secrets were encrypted with. Callers add where the right key
// comes from (a key file exists for SQLite only).
var ErrWrongKey = errors.New("the encryption key does not match the one this database was written with")

// ErrRetiredKey means box seals with a key that herald rekey retired (a
// RetiredKeyChecks row opens with it) while the database's key check
// value opens only with one of its previous keys: HERALD_ENCRYPTION_KEY
// and HERALD_ENCRYPTION_KEY_PREVIOUS given swapped. What the node sealed
// would be under the retired key, which the nodes holding only the
// database's key cannot open, so it is stale as a node lacking the key is:
// errors.Is(ErrRetiredKey, ErrWrongKey) holds (start refused, /readyz 503,
// sealing writes 503).
var ErrRetiredKey error = retiredKeyError{}

type retiredKeyError struct{}

func (retiredKeyError) Error() string {
	return "this node's current encryption key was retired by herald rekey: the database's values are under a key this node holds only as a previous one (HERALD_ENCRYPTION_KEY and HERALD_ENCRYPTION_KEY_PREVIOUS swapped?), and what it sealed would not open on the nodes holding only the database's key; give the database's current key as HERALD_ENCRYPTION_KEY (a retired key cannot be made current again: rotate to a new key)"
}

func (retiredKeyError) Is(target error) bool { return target == ErrWrongKey }

// CurrentOpener is a SecretBox that also opens with its sealing key alone
// (secretbox.Keyring): CheckKey asks it whether the database's key is the
// one it seals with or only one of its previous keys.
type CurrentOpener interface {
	OpenCurrent(sealed, context []byte) ([]byte, error)
}

// RetiredKeyMetaPrefix starts the meta keys under which Rekey records the
// key check value of each key it moves the database away from (the value
// as it was, sealed under that key; the rest of the key is a digest of
// it).
const RetiredKeyMetaPrefix = "encryption_key_retired/"

// RetiredKeyChecks are the rows Rekey records (RetiredKeyMetaPrefix). They
// are not in SealedColumns: rekey leaves each under the key it names.
var RetiredKeyChecks = SealedColumn{Table: "meta", Key: "key", Column: "value", Where: "key LIKE '" + RetiredKeyMetaPrefix + "%'", Context: func(string) string { return KeyCheckMeta }, Bare: true}

// CheckKey makes sure box holds the key this database was first written
// with: on first start it stores a sealed check value; later it must open.
// It returns ErrWrongKey otherwise, so a node with the wrong key refuses to
// start instead of failing every delivery; and ErrRetiredKey when the
// value opens only with a previous key of box while box's current key is
// one herald rekey retired (checkRetired).
func CheckKey(ctx context.Context, st Store, box SecretBox) error {
	sealed, err := box.Seal([]byte("herald key check v1"), []byte(KeyCheckMeta))
	if err != nil {
		return err
	}
	stored, err := st.EnsureMeta(ctx, KeyCheckMeta, base64.StdEncoding.EncodeToString(sealed))
	if err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(stored)
	if err != nil {
		return fmt.Errorf("%s: %w", KeyCheckMeta, err)
	}
	if _, err := box.Open(raw, []byte(KeyCheckMeta)); err != nil {
		return ErrWrongKey
	}
	return checkRetired(ctx, st, box, raw)
}

// checkRetired returns ErrRetiredKey when box (a CurrentOpener) opens the
// key check value raw only with a previous key and its current key opens
// a RetiredKeyChecks row: the database was rekeyed away from the key box
// seals with. A current key not retired with a previous one opening the
// value is step 2 of the rotation (docs/production.md), not stale. Reads
// nothing unless the value opens with a previous key only.
func checkRetired(ctx context.Context, st Store, box SecretBox, raw []byte) error {
	cur, ok := box.(CurrentOpener)
	if !ok {
		return nil
	}
	if _, err := cur.OpenCurrent(raw, []byte(KeyCheckMeta)); err == nil {
		return nil
	}
	sealed := st.Capabilities().Sealed
	if sealed == nil {
		return nil
	}
	after := ""
	for {
		rows, err := sealed.SealedValues(ctx, RetiredKeyChecks, after, 100)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if v, err := base64.StdEncoding.DecodeString(r.Value); err == nil {
				if _, err := cur.OpenCurrent(v, []byte(KeyCheckMeta)); err == nil {
					return ErrRetiredKey
				}
			}
		}
		if len(rows) < 100 {
			return nil
		}
		after = rows[len(rows)-1].Key
	}
}

// CheckKeyValue reports whether box opens stored, the value of the
// KeyCheckMeta row of a database (a backup being restored): ErrWrongKey
// otherwise.
func CheckKeyValue(box SecretBox, stored string) error {
	raw, err := base64.StdEncoding.DecodeString(stored)
	if err != nil {
		return fmt.Errorf("%s: %w", KeyCheckMeta, err)
	}
	if _, err := box.Open(raw, []byte(KeyCheckMeta)); err != nil {
		return ErrWrongKey
	}
	return nil
}

// SealBytes seals an opaque value for a database column ("enc:v1:" +
// base64) bound to context; with a nil box it is stored as is (tests).
func SealBytes(box SecretBox, context string, v []byte) (string, error) {
	if box == nil {
		return string(v), nil
	}
	sealed, err := box.Seal(v, []byte(context))
	if err != nil {
		return "", err
	}
	return sealedPrefix + base64.StdEncoding.EncodeToString(sealed), nil
}

// OpenBytes reverses SealBytes.
func OpenBytes(box SecretBox, context, v string) ([]byte, error) {
	rest, ok := strings.CutPrefix(v, sealedPrefix)
	if !ok {
		return []byte(v), nil
	}
	if box == nil {
		return nil, errors.New("value is encrypted but no encryption key is configured")
	}
	sealed, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, err
	}
	return box.Open(sealed, []byte(context))
}
