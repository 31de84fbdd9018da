package store

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

// idEncoding is lowercase Crockford base32: ids of one prefix sort by
// creation time because UUIDv7 starts with a millisecond timestamp and the
// alphabet is in ASCII order.
var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 26 characters of a UUIDv7 (RFC 9562), e.g.
// "evt_06ny4d9v8c7qcw1zqk4p0e3h2m". It panics only if the system random
// source fails.
func NewID(prefix string) string {
	u := uuid.Must(uuid.NewV7())
	var b strings.Builder
	b.Grow(len(prefix) + 27)
	b.WriteString(prefix)
	b.WriteByte('_')
	b.WriteString(idEncoding.EncodeToString(u[:]))
	return b.String()
}

// Fingerprint hashes the parts of a publish request that make it "the same
// event": tenant, type and the data bytes (compacted JSON). Hex SHA-256.
func Fingerprint(tenant, typ string, data []byte) string {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(typ))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// MatchEventType reports whether an endpoint with the filter patterns
// receives events of type typ. An empty filter or "*" matches every type;
// "file.*" matches "file.created" and "file.extraction.completed" (any type
// under the "file." prefix); anything else matches exactly.
func MatchEventType(patterns []string, typ string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		switch {
		case p == "*":
			return true
		case strings.HasSuffix(p, ".*"):
			if strings.HasPrefix(typ, p[:len(p)-1]) {
				return true
			}
		case p == typ:
			return true
		}
	}
	return false
}
