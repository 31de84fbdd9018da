package scheme

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen caps a dedupe key (bytes). Real provider ids are far shorter
// (a UUID, "evt_…", "msg_…"); a longer value is refused rather than stored.
const MaxKeyLen = 512

// Errors of [DedupeKey] and [ValidateDedupeRule]; every error of those
// functions wraps exactly one of them.
var (
	// ErrNoDedupeKey: the request carries no usable key for the rule —
	// header or JSON value absent, empty, sent twice, not a string or
	// number, longer than MaxKeyLen, not valid UTF-8 or containing control
	// characters; body not JSON; scheme hmac without a rule.
	ErrNoDedupeKey = errors.New("no dedupe key")
	// ErrBadDedupeRule: the rule itself is invalid (unknown prefix, bad
	// header name, bad JSON pointer) or, with no rule, the scheme is
	// unknown. A configuration error: reject it when the source is saved.
	ErrBadDedupeRule = errors.New("invalid dedupe rule")
)

// Natural id headers (canonical form).
const (
	headerEventID         = "X-Event-Id"
	headerWebhookID       = "Webhook-Id"
	headerSvixID          = "Svix-Id"
	headerGitHubDelivery  = "X-Github-Delivery"
	headerShopifyWebhook  = "X-Shopify-Webhook-Id"
	rulePrefixHeader      = "header:"
	rulePrefixJSONPointer = "json:"
)

// ValidateDedupeRule checks a dedupe rule when it is saved: "" (the
// scheme's natural id), "header:<Name>" with a valid header field name, or
// "json:<pointer>" with a non-empty RFC 6901 JSON pointer ("json:/id",
// "json:/data/object/id", "json:/a~1b" for member "a/b"; "json:" alone,
// the whole document, is refused: the document is the event, not an id).
// A pointer with a reference token "-" is refused too: RFC 6901 §4 makes
// "-" in an array the nonexistent element after the last one, so such a
// pointer never finds an id and every event would be deduped on its body
// instead (a member named "-" is the one thing it gives up: no provider's
// id is one). Only saving refuses it: a rule saved earlier keeps deduping
// as it did (on the body). Other tokens are taken as written, spaces
// included (a member name may hold them). Errors wrap [ErrBadDedupeRule].
func ValidateDedupeRule(rule string) error {
	kind, parsed, err := parseRule(rule)
	if err != nil || kind != ruleJSON {
		return err
	}
	for i, tok := range parsed.([]string) {
		if tok == "-" {
			return fmt.Errorf(`%w: %q: reference token %d is "-", which in an array designates the nonexistent element after the last one (RFC 6901 §4), so the pointer never finds an id; give an element's index, e.g. json:/items/0`, ErrBadDedupeRule, rule, i+1)
		}
	}
	return nil
}

type ruleKind int

const (
	ruleNatural ruleKind = iota
	ruleHeader
	ruleJSON
)

// parseRule returns the rule's kind and its header name (canonical) or
// pointer tokens.
func parseRule(rule string) (ruleKind, any, error) {
	switch {
	case rule == "":
		return ruleNatural, nil, nil
	case strings.HasPrefix(rule, rulePrefixHeader):
		name := rule[len(rulePrefixHeader):]
		if !validHeaderName(name) {
			return 0, nil, fmt.Errorf("%w: %q is not a valid header name", ErrBadDedupeRule, name)
		}
		return ruleHeader, canonicalHeader(name), nil
	case strings.HasPrefix(rule, rulePrefixJSONPointer):
		if rule == rulePrefixJSONPointer {
			// RFC 6901: the empty pointer designates the whole document,
			// which is the event, not its id.
			return 0, nil, fmt.Errorf("%w: %q has an empty JSON pointer, which designates the whole document (RFC 6901), not an id in it; give the pointer of the id, e.g. json:/id or json:/data/object/id", ErrBadDedupeRule, rule)
		}
		tokens, err := parsePointer(rule[len(rulePrefixJSONPointer):])
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrBadDedupeRule, err)
		}
		return ruleJSON, tokens, nil
	default:
		return 0, nil, fmt.Errorf("%w: %q (not \"\", \"header:<Name>\" or \"json:/<JSON pointer>\")", ErrBadDedupeRule, rule)
	}
}

// DedupeKey returns the key under which the gateway stores a verified
// request, unique per source: the same key again is a duplicate. Call it
// only after [Verify] succeeded.
//
// With rule "" it is the scheme's natural event id, the identifier the
// provider keeps the same on every retry of one event:
//
//   - standard-webhooks: webhook-id, else svix-id (signed): the id of
//     the header set Verify read (svix-* when no webhook-* header is
//     non-empty).
//   - stripe: the event's top-level JSON "id" ("evt_…"; signed). Stripe,
//     "Handle duplicate events": https://docs.stripe.com/webhooks#handle-duplicate-events
//   - github: X-GitHub-Delivery, a GUID that a redelivery keeps. GitHub,
//     "Best practices for using webhooks":
//     https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks
//   - shopify: X-Shopify-Webhook-Id. (Shopify's "Ignore duplicate
//     webhooks", https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates,
//     names X-Shopify-Event-Id, which is shared by the deliveries of one
//     event to several subscriptions; use rule "header:X-Shopify-Event-Id"
//     for that behaviour.)
//   - slack: the JSON "event_id" of an Events API callback; for a
//     "url_verification" request, its "challenge" value (Slack, "Events
//     API", https://api.slack.com/apis/events-api). Slash commands and
//     interactivity payloads are form-encoded and have no id: they fall
//     back to the body key.
//   - herald: the event's top-level JSON "id" (Herald's envelope; signed
//     with the body). X-Event-Id is not covered by X-Signature: keyed on
//     it, a captured request replayed within the tolerance under another
//     X-Event-Id would be forwarded again.
//   - hmac: none; ErrNoDedupeKey unless a rule is configured.
//
// Headers are not covered by the github and shopify signatures either: a
// captured request replayed with another id header is not recognised as
// a duplicate by its header (the gateway keys those schemes on the body).
//
// A rule overrides the scheme: "header:<Name>" takes that request header,
// "json:<pointer>" the value an RFC 6901 pointer designates in the JSON
// body (https://www.rfc-editor.org/rfc/rfc6901): a string's unescaped
// text, or a number's literal text as sent.
//
// The key is never empty. Errors wrap [ErrNoDedupeKey] (the request has
// none) or [ErrBadDedupeRule] (the rule or scheme is invalid). On either,
// the gateway keys the request with [BodyKey] instead.
func DedupeKey(scheme, rule string, h http.Header, body []byte) (string, error) {
	kind, arg, err := parseRule(rule)
	if err != nil {
		return "", err
	}
	switch kind {
	case ruleHeader:
		return headerKey(h, arg.(string))
	case ruleJSON:
		return jsonKey(body, arg.([]string), rule[len(rulePrefixJSONPointer):])
	}
	switch scheme {
	case StandardWebhooks:
		return headerKey(h, standardIDHeader(h))
	case Stripe:
		return jsonKey(body, []string{"id"}, "/id")
	case GitHub:
		return headerKey(h, headerGitHubDelivery)
	case Shopify:
		return headerKey(h, headerShopifyWebhook)
	case Slack:
		return slackKey(body)
	case Herald:
		return jsonKey(body, []string{"id"}, "/id")
	case HMAC:
		return "", fmt.Errorf("%w: scheme hmac has no natural event id (configure a header: or json: rule)", ErrNoDedupeKey)
	default:
		return "", fmt.Errorf("%w: unknown scheme %q", ErrBadDedupeRule, scheme)
	}
}

// BodyKey is the gateway's fallback dedupe key when [DedupeKey] fails:
// "sha256:" followed by the lowercase hex SHA-256 of the raw body. Requests
// with byte-identical bodies are then duplicates of each other, which holds
// for a provider that retries with the same bytes (the signature headers
// may change between attempts; the body does not), and is the only
// sensible identity of a message that carries no id. A provider that puts
// attempt-specific data in the body defeats it: configure a rule instead.
func BodyKey(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// headerKey returns the single value of header name as a key.
func headerKey(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0:
		return "", fmt.Errorf("%w: no %s header", ErrNoDedupeKey, name)
	case len(vs) > 1:
		return "", fmt.Errorf("%w: %s header sent %d times", ErrNoDedupeKey, name, len(vs))
	}
	return checkKey(vs[0], name+" header")
}

// standardIDHeader names the id header a standard-webhooks request's
// signature covers, chosen as verifyStandard chooses its header set: the
// webhook-* set when any of its three headers is non-empty, else svix-*.
// Keyed on a header the signature did not cover (an empty webhook-id
// beside verified svix-* headers has no key, and the body's SHA-256 would
// be used), a captured request replayed within the tolerance with an empty
// webhook-id added would be a new event.
func standardIDHeader(h http.Header) string {
	if _, found, err := headerSet(h, standardHeaders); found || err != nil {
		return headerWebhookID
	}
	return headerSvixID
}

// NumberKeyPrefix starts the key of a JSON number (see [jsonKey]). Its
// first character is a control character, which [checkKey] refuses in
// every key read from a request, so no string id can ever have a key that
// starts with it: a number's key never collides with a string's.
const NumberKeyPrefix = "\x1fnumber:"

// jsonKey returns the key of the string or number at tokens in the JSON
// body. A string's key is its unescaped text, as it always was (so keys
// stored by earlier versions still match). A number's key is
// [NumberKeyPrefix] followed by its canonical text ([CanonicalNumber]):
// numbers equal in value (1, 1.0, 1e0, 10e-1) share one key, and no
// number shares one with a string (1 and "1" are different ids).
func jsonKey(body []byte, tokens []string, pointer string) (string, error) {
	raw, err := lookupJSON(body, tokens)
	if err != nil {
		return "", fmt.Errorf("%w: JSON pointer %q: %w", ErrNoDedupeKey, pointer, err)
	}
	s, err := scalarText(raw)
	if err != nil {
		return "", fmt.Errorf("%w: JSON pointer %q: %w", ErrNoDedupeKey, pointer, err)
	}
	if raw[0] == '"' {
		return checkKey(s, "JSON pointer "+pointer)
	}
	n, err := CanonicalNumber(s)
	if err != nil {
		return "", fmt.Errorf("%w: JSON pointer %q: %w", ErrNoDedupeKey, pointer, err)
	}
	if len(NumberKeyPrefix)+len(n) > MaxKeyLen {
		return "", fmt.Errorf("%w: JSON pointer %s: the number's key is longer than %d bytes", ErrNoDedupeKey, pointer, MaxKeyLen)
	}
	return NumberKeyPrefix + n, nil
}

// maxExponentDigits bounds the exponent of a number CanonicalNumber
// accepts (its digits once leading zeros are dropped): far beyond any id,
// and small enough that the arithmetic never overflows.
const maxExponentDigits = 9

// CanonicalNumber returns the canonical text of a JSON number literal:
// the text RFC 8785 (JSON Canonicalization Scheme, section 3.2.2.3) gives
// a number — ECMAScript's Number::toString: no "+", no leading or
// trailing zero, plain notation from 1e-6 up to below 1e21, otherwise one
// digit, a fraction if any and "e+N"/"e-N"; -0 is "0" — but of the exact
// decimal value, with every significant digit kept, never rounded to a
// float64 first: so 1, 1.0, 1e0 and 10e-1 all give "1", while two integer
// ids beyond 2^53 that a float64 cannot tell apart keep two texts. Where
// the value is a float64 with at most 17 significant digits, the text is
// RFC 8785's.
func CanonicalNumber(lit string) (string, error) {
	bad := fmt.Errorf("%q is not a JSON number", lit)
	i := 0
	neg := i < len(lit) && lit[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
		i++
	}
	intPart := lit[start:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return "", bad
	}
	frac := ""
	if i < len(lit) && lit[i] == '.' {
		i++
		fs := i
		for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
			i++
		}
		if frac = lit[fs:i]; frac == "" {
			return "", bad
		}
	}
	exp := 0
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		expNeg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		es := i
		for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
			i++
		}
		digits := strings.TrimLeft(lit[es:i], "0")
		if es == i {
			return "", bad
		}
		if len(digits) > maxExponentDigits {
			return "", fmt.Errorf("number %.40q has an exponent beyond %d digits", lit, maxExponentDigits)
		}
		for _, c := range digits {
			exp = exp*10 + int(c-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(lit) {
		return "", bad
	}
	// value = digits × 10^exp, digits without leading or trailing zeros.
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if digits == "" {
		return "0", nil // 0, -0, 0.0, 0e5
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	k := len(digits)
	n := exp + k // the decimal point sits after n digits (ECMAScript's n)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return b.String(), nil
}

// slackKey returns event_id, or the challenge of a url_verification.
func slackKey(body []byte) (string, error) {
	if raw, err := lookupJSON(body, []string{"type"}); err == nil {
		if t, err := scalarText(raw); err == nil && t == "url_verification" {
			return jsonKey(body, []string{"challenge"}, "/challenge")
		}
	}
	return jsonKey(body, []string{"event_id"}, "/event_id")
}

// checkKey applies the rules every key obeys: non-empty, at most
// MaxKeyLen bytes, valid UTF-8 without control characters (keys are stored
// as text; PostgreSQL refuses NUL and invalid UTF-8).
func checkKey(k, what string) (string, error) {
	switch {
	case k == "":
		return "", fmt.Errorf("%w: %s is empty", ErrNoDedupeKey, what)
	case len(k) > MaxKeyLen:
		return "", fmt.Errorf("%w: %s is longer than %d bytes", ErrNoDedupeKey, what, MaxKeyLen)
	case !utf8.ValidString(k):
		return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrNoDedupeKey, what)
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", fmt.Errorf("%w: %s contains a control character", ErrNoDedupeKey, what)
		}
	}
	return k, nil
}
