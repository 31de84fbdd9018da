package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	segjson "github.com/segmentio/encoding/json"
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

// FingerprintVersions is Fingerprint covering also the data of the older
// versions of a catalogued event (data_versions: version → compacted
// JSON), so reusing an event id with other data_versions is "other
// content". Without older versions it equals Fingerprint, so the
// fingerprints of events stored before it stay valid.
func FingerprintVersions(tenant, typ string, data []byte, older map[int][]byte) string {
	if len(older) == 0 {
		return Fingerprint(tenant, typ, data)
	}
	vs := make([]int, 0, len(older))
	for v := range older {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(typ))
	h.Write([]byte{0})
	h.Write(data)
	for _, v := range vs {
		// A NUL never occurs in compacted JSON: the parts cannot run together.
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(v)))
		h.Write([]byte{0})
		h.Write(older[v])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// OperationalPrefix starts the types of the operational events Herald
// emits about endpoints (endpoint.disabled, endpoint.enabled,
// endpoint.dead_letter_spike).
const OperationalPrefix = "endpoint."

// MatchEventType reports whether an endpoint with the filter patterns
// receives events of type typ. An empty filter or "*" matches every type
// except operational events, which only endpoints that name them receive
// ("endpoint.*" or an exact type), so a catch-all endpoint never gets
// Herald's own notices; "file.*" matches "file.created" and
// "file.extraction.completed" (any type under the "file." prefix); anything
// else matches exactly.
func MatchEventType(patterns []string, typ string) bool {
	operational := IsOperational(typ)
	if len(patterns) == 0 {
		return !operational
	}
	for _, p := range patterns {
		switch {
		case p == "*":
			if !operational {
				return true
			}
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

// EncodeBody renders the body delivered to endpoints (docs/contract.md "body"): the JSON
// object {"id","type","tenant","occurred_at","data"} with occurred_at in RFC
// 3339 UTC, data as given (already valid, compact JSON), and no HTML
// escaping, so the producer's data arrives as sent. These bytes are stored
// once and sent unchanged on every attempt.
//
// Its bytes are encoding/json's (an Encoder without HTML escaping, which
// validates and compacts data): data goes through CompactJSON, and the
// envelope is appended directly when its three strings are printable ASCII
// without quote or backslash, else encoded by encoding/json
// (FuzzEncodeBody checks the two give the same bytes and errors).
func EncodeBody(id, typ, tenant string, occurredAt time.Time, data []byte) ([]byte, error) {
	data, err := CompactJSON(data)
	if err != nil {
		return nil, err
	}
	return EncodeCompactBody(id, typ, tenant, occurredAt, data)
}

// EncodeCompactBody is EncodeBody for data CompactJSON has returned (valid
// and compact JSON): the same bytes, without checking and scanning data
// again (the publish path compacts data once, for its answer and its
// fingerprint). Other data may be embedded as it is or refused.
func EncodeCompactBody(id, typ, tenant string, occurredAt time.Time, data []byte) ([]byte, error) {
	if !plainJSONString(id) || !plainJSONString(typ) || !plainJSONString(tenant) {
		return encodeBodyStd(id, typ, tenant, occurredAt, data)
	}
	b := make([]byte, 0, len(id)+len(typ)+len(tenant)+len(data)+96)
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"`...)
	b = append(b, typ...)
	b = append(b, `","tenant":"`...)
	b = append(b, tenant...)
	b = append(b, `","occurred_at":"`...)
	b = occurredAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b = append(b, data...)
	return append(b, '}'), nil
}

// CompactJSON returns data without insignificant whitespace (RFC 8259,
// section 2: space, tab, line feed, carriage return), as json.Compact
// does, or json.Compact's error for malformed data. Data with none of those
// four bytes anywhere (most producers' encoders write compact JSON) is
// returned as is, without a copy, after segmentio's validity check (a
// tenth of the time of encoding/json's byte-by-byte compaction, which was
// 6.7 % of Herald's CPU in `herald bench publish`, docs/BENCHMARKS.md).
func CompactJSON(data []byte) ([]byte, error) {
	if !hasJSONSpace(data) {
		if !segjson.Valid(data) {
			var b bytes.Buffer
			return nil, json.Compact(&b, data) // the error
		}
		return data, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// hasJSONSpace reports whether data holds one of JSON's four whitespace
// bytes (RFC 8259 §2). A byte loop: bytes.ContainsAny with a set of four
// took ten instructions a byte, on every publish.
func hasJSONSpace(data []byte) bool {
	for _, c := range data {
		if c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			return true
		}
	}
	return false
}

// plainJSONString reports whether s is written in JSON as itself between
// quotes: printable ASCII without '"' or '\\'.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// encodeBodyStd is EncodeBody through encoding/json, for any strings and
// data.
func encodeBodyStd(id, typ, tenant string, occurredAt time.Time, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		Tenant     string          `json:"tenant"`
		OccurredAt string          `json:"occurred_at"`
		Data       json.RawMessage `json:"data"`
	}{id, typ, tenant, occurredAt.UTC().Format(time.RFC3339Nano), data})
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// PublishConflict explains why a publish conflicts with the existing event
// found by its id or idempotency key; it wraps ErrConflict. Drivers share it
// so the message is the same everywhere.
func PublishConflict(existing, ev Event, idFromClient bool) error {
	switch {
	case ev.IdempotencyKey != "" && existing.IdempotencyKey == ev.IdempotencyKey && idFromClient && existing.ID != ev.ID:
		return Errorf(CodeConflict, "Idempotency-Key %q was already used for event %s, not %s", ev.IdempotencyKey, PublicEventID(existing.ID), PublicEventID(ev.ID))
	case ev.IdempotencyKey != "" && existing.IdempotencyKey == ev.IdempotencyKey:
		return Errorf(CodeConflict, "Idempotency-Key %q was already used for event %s with a different type or data", ev.IdempotencyKey, PublicEventID(existing.ID))
	default:
		return Errorf(CodeConflict, "event id %s already exists with a different type or data", PublicEventID(existing.ID))
	}
}

// RepeatConflict is what the existing event found by a publish's id or
// idempotency key answers it: nil when the publish repeats it (same
// fingerprint, and with idFromClient a key of this very event), else the
// conflict (PublishConflict). Drivers share it.
func RepeatConflict(existing, ev Event, idFromClient bool) error {
	keyOfAnother := idFromClient && ev.IdempotencyKey != "" && existing.IdempotencyKey == ev.IdempotencyKey && existing.ID != ev.ID
	if existing.Fingerprint != ev.Fingerprint || keyOfAnother {
		return PublishConflict(existing, ev, idFromClient)
	}
	return nil
}

// EventKey is the stored key of an event (Event.ID, the id deliveries
// refer to). Herald's own ids ("evt_…") are unique everywhere and stored as
// they are. A producer-chosen id is unique per tenant only (two tenants may
// both publish "inv-1"), so it is stored as "<tenant>~<id>": neither tenant
// names nor event ids may contain "~", so the key splits unambiguously.
// PublicEventID undoes it.
func EventKey(tenant, id string, fromClient bool) string {
	if !fromClient {
		return id
	}
	return tenant + "~" + id
}

// HeraldEventID reports whether id has the shape of an id Herald makes
// itself ("evt_" + 26 characters, a test event's "evt_test_" + 26
// characters — NewID("evt_test"), what POST /v1/endpoints/{id}/test sends
// as webhook-id —, or an operational "evt_op_…"), in any case: such ids
// are unique everywhere, and a producer may not choose one (it would make
// one id name two events of a tenant, or a receiver take a published event
// for a test event it has seen), nor a look-alike differing only in case
// ("EVT_OP_x"), which a receiver folding case would take for Herald's (as
// event types and src_ tenants are reserved in any case).
func HeraldEventID(id string) bool {
	return hasPrefixFold(id, "evt_") && (len(id) == 30 || hasPrefixFold(id, "evt_op_") ||
		len(id) == len("evt_test_")+26 && hasPrefixFold(id, "evt_test_"))
}

// HeraldEventIDRule names the forms HeraldEventID reserves, for the
// refusal of a producer's id.
const HeraldEventIDRule = "ids of the form evt_ + 26 characters, evt_test_ + 26 characters and evt_op_… (in any case) are Herald's own; choose another id"

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// PublicEventID is the id an event is known by outside the store: the
// producer's id (the X-Event-Id header, the body's "id", the API's "id").
func PublicEventID(key string) string {
	if i := strings.LastIndexByte(key, '~'); i >= 0 {
		return key[i+1:]
	}
	return key
}
