package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

const (
	// HeaderSignature is the Herald (Stripe-compatible) signature header:
	// "t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>...]".
	HeaderSignature = "X-Signature"
	// HeaderWebhookID is the canonical form of the Standard Webhooks
	// "webhook-id" header; Herald sends the event id (evt_…).
	HeaderWebhookID = "Webhook-Id"
	// HeaderWebhookTimestamp is the canonical form of the Standard Webhooks
	// "webhook-timestamp" header: decimal unix seconds.
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	// HeaderWebhookSignature is the canonical form of the Standard Webhooks
	// "webhook-signature" header: space-separated "v1,<base64>" entries.
	HeaderWebhookSignature = "Webhook-Signature"
	// SecretPrefix prefixes secrets created by [NewSecret]. For the Herald
	// scheme it is part of the HMAC key; for Standard Webhooks it is
	// stripped before base64 decoding.
	SecretPrefix = "whsec_"
	// DefaultTolerance is the replay window used when
	// [Verifier.Tolerance] is zero: a timestamp more than 300 s away from
	// the verifier's clock, in either direction, is rejected.
	DefaultTolerance = 300 * time.Second
)

// Svix's names for the Standard Webhooks headers, accepted on verification
// when the webhook-* headers are absent.
const (
	headerSvixID        = "Svix-Id"
	headerSvixTimestamp = "Svix-Timestamp"
	headerSvixSignature = "Svix-Signature"
)

const (
	// maxHeaderLen caps every header value this package parses (bytes).
	maxHeaderLen = 8 << 10
	// maxEntries caps the signature entries in one header: every item but
	// t= in X-Signature, every space-separated entry in webhook-signature.
	maxEntries = 16
	// secretBytes is the size of the random key in a new secret.
	secretBytes = 32
)

// NewSecret returns a new signing secret: "whsec_" followed by the standard
// (padded) base64 encoding of 32 bytes from crypto/rand, 50 characters in
// all. The result is valid for both schemes (see [ValidateSecret]); for the
// Herald scheme the whole string is the HMAC key, for Standard Webhooks the
// 32 decoded bytes are. The error is non-nil only if the system's random
// source fails.
func NewSecret() (string, error) {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook: reading random bytes: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// ValidateSecret reports whether s can sign and verify with both schemes:
// after removing an optional "whsec_" prefix, the rest must be non-empty
// standard base64 (RFC 4648 §4, padded, as the Standard Webhooks libraries
// decode it) that decodes to a non-empty key, without line breaks. The
// Herald scheme itself accepts any non-empty string; this check is the
// stricter Standard Webhooks rule (spec section "Signature scheme").
//
// It returns nil or an error wrapping [ErrInvalidSecret] with the reason
// (never the secret itself).
func ValidateSecret(s string) error {
	_, err := standardKey(s)
	return err
}

// standardKey derives the Standard Webhooks HMAC key from a secret.
func standardKey(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	enc := strings.TrimPrefix(s, SecretPrefix)
	if enc == "" {
		return nil, fmt.Errorf("%w: nothing after the %s prefix", ErrInvalidSecret, SecretPrefix)
	}
	// encoding/base64 silently skips CR and LF; a secret containing them is
	// a copy-paste accident whose Herald key would differ from the intent.
	if strings.ContainsAny(enc, "\r\n") {
		return nil, fmt.Errorf("%w: contains a line break", ErrInvalidSecret)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: not standard base64 after the optional %s prefix", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: decodes to an empty key", ErrInvalidSecret)
	}
	return key, nil
}
