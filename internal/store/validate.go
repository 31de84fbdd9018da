package store

import (
	"strings"
	"time"
	"unicode/utf8"
)

// The shapes of names the API and the outbox accept: one definition, so
// POST /v1/events and outbox.Publish can never disagree.

// TenantRule is ValidTenant's rule in words, as refusals state it.
const TenantRule = "1–128 letters, digits, _ . : or -"

// EventTypeRule is ValidEventType's rule, as refusals state it.
const EventTypeRule = "event type: segments of letters, digits, _ or - joined by dots, at most 128 bytes"

// ValidTenant reports whether s is a tenant key: 1–128 letters, digits,
// '_', '.', ':' or '-'.
func ValidTenant(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// InternalTenantPrefix starts the tenants Herald keeps for itself: an
// inbound source's forwarding endpoint and events belong to the tenant
// named by the source id ("src_…"). No producer may name such a tenant,
// whatever the case of the prefix ("SRC_x" is refused too: tenants are
// case-sensitive, but a look-alike of an internal tenant serves nobody).
const InternalTenantPrefix = "src_"

// InternalTenantRule is the refusal of a tenant IsInternalTenant reports.
const InternalTenantRule = "tenant names starting with " + InternalTenantPrefix + " (in any case) are reserved for inbound sources and cannot be named through the API"

// IsInternalTenant reports whether a tenant name starts with
// InternalTenantPrefix, compared without regard to case.
func IsInternalTenant(name string) bool {
	return hasPrefixFold(name, InternalTenantPrefix)
}

// ReservedEventTypeRule is the refusal of a type ReservedEventType reports.
const ReservedEventTypeRule = "event types starting with endpoint., delivery. or herald. (in any case) are reserved for Herald's own operational and test events"

// ReservedEventType reports whether typ (an event type or a filter
// pattern) is in the namespaces Herald keeps for its own events —
// "endpoint." and "delivery." (operational events) and "herald." (test
// events) — compared without regard to case, so "Endpoint.disabled"
// cannot pass for one.
func ReservedEventType(typ string) bool {
	lt := strings.ToLower(typ)
	return strings.HasPrefix(lt, OperationalPrefix) || strings.HasPrefix(lt, DeliveryPrefix) || strings.HasPrefix(lt, "herald.")
}

// IdempotencyKeyRule is the rule ValidIdempotencyKey checks, as error
// messages state it.
const IdempotencyKeyRule = "idempotency key: at most 255 bytes of UTF-8 without control characters"

// ValidIdempotencyKey reports whether k may be an Idempotency-Key: at most
// 255 bytes of UTF-8 without control characters (C0, DEL, C1). A header
// may carry a tab or bytes that are not UTF-8, which PostgreSQL would
// refuse to store.
func ValidIdempotencyKey(k string) bool {
	if len(k) > 255 || !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// OccurredAtRule is the rule ValidOccurredAt checks, as error messages
// state it.
const OccurredAtRule = "occurred_at: an instant within the years 0000–9999 once in UTC (RFC 3339, section 5.6: four-digit years; the delivered body states it in UTC)"

// ValidOccurredAt reports whether t, in UTC, has a year RFC 3339 can
// write (0000–9999): "0000-01-01T00:30:00+01:00" is year −1 in UTC, which
// the delivered body, stated in UTC, could not carry as RFC 3339.
func ValidOccurredAt(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// MinOccurredAt and MaxOccurredAt are the first and the last instant
// ValidOccurredAt accepts, at the microsecond stored.
var (
	MinOccurredAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxOccurredAt = time.Date(9999, 12, 31, 23, 59, 59, 999_999_000, time.UTC)
)

// ShownOccurredAt is a stored occurred_at as answers state it: t in UTC,
// or for an instant ValidOccurredAt refuses the nearer of MinOccurredAt
// and MaxOccurredAt. Such an event was stored before the rule, or by a
// producer path that did not apply it (or by hand: PostgreSQL's
// ±infinity are read as the two bounds); RFC 3339, and so encoding/json,
// cannot state its instant, and GET /v1/events/{id}, the events list and a
// repeated publish failed to encode their answer. Its delivered body keeps
// the bytes rendered at its publish.
func ShownOccurredAt(t time.Time) time.Time {
	t = t.UTC()
	if t.Before(MinOccurredAt) {
		return MinOccurredAt
	}
	if t.After(MaxOccurredAt) {
		return MaxOccurredAt
	}
	return t
}

// ValidEventType reports whether t is an event type: at most 128 bytes of
// segments of letters, digits, '_' or '-' joined by single dots
// ("file.extraction.completed").
func ValidEventType(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	seg := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-':
			seg++
		case c == '.':
			if seg == 0 {
				return false
			}
			seg = 0
		default:
			return false
		}
	}
	return seg > 0
}

// ValidEventID reports whether s may be a producer-chosen event id: 1–128
// letters, digits, '_', '-' or ':'. No dots: the Standard Webhooks
// signature covers "<id>.<t>.<body>" (standard-webhooks.md, "Signature
// scheme").
func ValidEventID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':') {
			return false
		}
	}
	return true
}
