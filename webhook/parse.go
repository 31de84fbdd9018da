package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// strictBase64 rejects non-canonical encodings (non-zero padding bits), so
// that exactly one string decodes to a given MAC, as with the string
// comparison of the Standard Webhooks libraries.
var strictBase64 = base64.StdEncoding.Strict()

// ParseSignatureHeader parses a Herald/Stripe signature header
//
//	t=<unix seconds>,v1=<hex>[,v1=<hex>...]
//
// as described in Stripe's "Verify webhook signatures manually"
// (https://docs.stripe.com/webhooks). Items are separated by
// "," and split at the first "="; optional whitespace (spaces and tabs)
// around "," and "=" is ignored, as Stripe's own libraries do
// ("t=1, v1=…" verifies). It returns the timestamp in unix seconds and the
// decoded v1 signatures in header order.
//
// Rules: exactly one t item, plain decimal digits that fit an int64 (no
// sign, no leading zero: the signed string is the timestamp's exact text,
// which must be the decimal Herald recomputes). Items with other keys (v0, ...) are ignored, as in
// Stripe's libraries. A v1 value that is not 64 hex digits (either case; a
// 32-byte HMAC-SHA256) is skipped, as stripe-go does; at least one usable v1
// must remain. The header may be at most 8 KiB long and hold at most 16
// items besides t.
//
// Every failure wraps [ErrMalformedHeader].
func ParseSignatureHeader(v string) (timestamp int64, v1 [][]byte, err error) {
	if len(v) > maxHeaderLen {
		return 0, nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, maxHeaderLen)
	}
	if v == "" {
		return 0, nil, fmt.Errorf("%w: empty", ErrMalformedHeader)
	}
	haveT := false
	entries := 0
	for i, rest := 1, v; ; i++ {
		item, more, hasMore := strings.Cut(rest, ",")
		key, val, ok := strings.Cut(item, "=")
		key, val = strings.Trim(key, ows), strings.Trim(val, ows)
		if !ok || key == "" {
			return 0, nil, fmt.Errorf("%w: item %d is not key=value", ErrMalformedHeader, i)
		}
		switch key {
		case "t":
			if haveT {
				return 0, nil, fmt.Errorf("%w: more than one t item", ErrMalformedHeader)
			}
			if timestamp, err = parseTimestamp(val); err != nil {
				return 0, nil, err
			}
			haveT = true
		default:
			entries++
			if entries > maxEntries {
				return 0, nil, fmt.Errorf("%w: more than %d signature entries", ErrMalformedHeader, maxEntries)
			}
			if key == "v1" && len(val) == hex.EncodedLen(sha256.Size) {
				if sig, err := hex.DecodeString(val); err == nil {
					v1 = append(v1, sig)
				}
			}
		}
		if !hasMore {
			break
		}
		rest = more
	}
	if !haveT {
		return 0, nil, fmt.Errorf("%w: no t item", ErrMalformedHeader)
	}
	if len(v1) == 0 {
		return 0, nil, fmt.Errorf("%w: no v1 signature of 64 hex digits", ErrMalformedHeader)
	}
	return timestamp, v1, nil
}

// ParseStandardSignatures parses a Standard Webhooks (or Svix) signature
// header: space-separated "<version>,<signature>" entries such as
//
//	v1,<base64> v1,<base64>
//
// (spec: https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md,
// "Webhook headers"). It returns the decoded v1 signatures in header order.
//
// Rules: entries are split on single spaces (empty entries are skipped) and
// at the first ","; entries with another version (v1a, v2, ...) or without a
// "," are ignored, as in the Standard Webhooks libraries. A v1 signature
// that is not the canonical padded standard base64 of 32 bytes is skipped;
// at least one usable v1 must remain. The header may be at most 8 KiB long
// and hold at most 16 entries of any version.
//
// Every failure wraps [ErrMalformedHeader].
func ParseStandardSignatures(v string) (v1 [][]byte, err error) {
	if len(v) > maxHeaderLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, maxHeaderLen)
	}
	entries := 0
	for rest := v; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, " ")
		if entry == "" {
			continue
		}
		entries++
		if entries > maxEntries {
			return nil, fmt.Errorf("%w: more than %d signature entries", ErrMalformedHeader, maxEntries)
		}
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" || len(sig) != strictBase64.EncodedLen(sha256.Size) {
			continue
		}
		if b, err := strictBase64.DecodeString(sig); err == nil && len(b) == sha256.Size {
			v1 = append(v1, b)
		}
	}
	if entries == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedHeader)
	}
	if len(v1) == 0 {
		return nil, fmt.Errorf("%w: no v1 signature of 32 base64-encoded bytes", ErrMalformedHeader)
	}
	return v1, nil
}

// ows is the optional whitespace of RFC 9110 §5.6.3 (space and tab).
const ows = " \t"

// parseTimestamp parses unix seconds written as plain decimal digits
// without a leading zero ("0" itself is allowed): the MAC covers the
// timestamp's text, and the verifier recomputes it from the number, so
// only the one canonical spelling may be accepted.
func parseTimestamp(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty timestamp", ErrMalformedHeader)
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: timestamp has a leading zero", ErrMalformedHeader)
	}
	if len(s) > 19 { // math.MaxInt64 has 19 digits; refuse before ParseInt
		return 0, fmt.Errorf("%w: timestamp longer than 19 digits", ErrMalformedHeader)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: timestamp is not plain decimal digits", ErrMalformedHeader)
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: timestamp out of range", ErrMalformedHeader)
	}
	return ts, nil
}
