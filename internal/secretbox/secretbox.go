// Package secretbox encrypts endpoint signing secrets at rest with
// AES-256-GCM (NIST SP 800-38D). The key comes from HERALD_ENCRYPTION_KEY
// (standard base64 of 32 bytes) or, in embedded mode, from a key file
// created beside the database with mode 0600.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// ErrDecrypt is returned by Open when a ciphertext was not sealed with this
// key for this context (wrong key, tampered data, or another row's data).
var ErrDecrypt = errors.New("secretbox: cannot decrypt: wrong encryption key or corrupted data")

// Box seals and opens small values. Safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secretbox: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// ParseKey decodes a key given as standard (or URL-safe) base64 of 32
// bytes, as in HERALD_ENCRYPTION_KEY.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("encryption key must be base64 of %d bytes, got %d bytes", KeySize, len(k))
			}
			return k, nil
		}
	}
	return nil, errors.New("encryption key must be base64 of 32 bytes (e.g. `openssl rand -base64 32`)")
}

// LoadOrCreateKeyFile reads the key file at path, or creates it with a new
// random key and mode 0600 when it does not exist. created reports the
// latter, so the caller can warn that the key must be backed up.
func LoadOrCreateKeyFile(path string) (key []byte, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := ParseKey(string(b))
		if err != nil {
			return nil, false, fmt.Errorf("key file %s: %w", path, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("key file %s: %w", path, err)
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("create key file %s: %w", path, err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, false, err
	}
	return key, true, f.Close()
}

// Seal encrypts plaintext bound to context (e.g. the endpoint id, so a
// ciphertext copied to another row does not open). Output: nonce ‖
// ciphertext ‖ tag.
func (b *Box) Seal(plaintext, context []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, plaintext, context), nil
}

// Open decrypts what Seal produced for the same context; ErrDecrypt
// otherwise.
func (b *Box) Open(sealed, context []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, ErrDecrypt
	}
	pt, err := b.aead.Open(nil, sealed[:n], sealed[n:], context)
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

// Keyring seals with its current key and opens with the current key or
// any previous one: nodes run with HERALD_ENCRYPTION_KEY (current) and
// HERALD_ENCRYPTION_KEY_PREVIOUS while `herald rekey` re-encrypts the
// values at rest, so every value opens whichever key sealed it. A sealed
// value carries no key id; Open tries the keys in order (an AES-GCM tag
// mismatch is detected without output).
type Keyring struct {
	current  *Box
	previous []*Box
}

// NewKeyring returns a Keyring sealing with current and opening with
// current or any of previous.
func NewKeyring(current *Box, previous ...*Box) *Keyring {
	return &Keyring{current: current, previous: previous}
}

// Seal seals with the current key.
func (k *Keyring) Seal(plaintext, context []byte) ([]byte, error) {
	return k.current.Seal(plaintext, context)
}

// Open opens with the current key, else with each previous key; ErrDecrypt
// when none opens it.
func (k *Keyring) Open(sealed, context []byte) ([]byte, error) {
	pt, err := k.current.Open(sealed, context)
	if err == nil {
		return pt, nil
	}
	for _, b := range k.previous {
		if pt, err := b.Open(sealed, context); err == nil {
			return pt, nil
		}
	}
	return nil, ErrDecrypt
}

// OpenCurrent opens with the current key alone (store.CurrentOpener: the
// key check tells a database under the current key from one under a
// previous key only).
func (k *Keyring) OpenCurrent(sealed, context []byte) ([]byte, error) {
	return k.current.Open(sealed, context)
}

// Current returns the Box of the current key.
func (k *Keyring) Current() *Box { return k.current }

// DeriveKey returns a KeySize key for purpose derived from key with HKDF
// (RFC 5869, SHA-256), so a secondary use (e.g. sealing list cursors)
// never encrypts under the key that seals secrets at rest.
func DeriveKey(key []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, key, nil, purpose, KeySize)
	if err != nil {
		panic(err) // only for a length HKDF cannot produce
	}
	return k
}
