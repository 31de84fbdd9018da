package webhook

import "errors"

// Sentinel errors. Every error returned by the signing, parsing and
// verification functions wraps exactly one of them (test with [errors.Is])
// and adds context that never contains a secret or an expected signature.
// Receivers should answer all but ErrInvalidSecret with 401 and no detail;
// ErrInvalidSecret is a configuration problem on the receiver's side.
var (
	// ErrMissingSignature: no signature header of any supported scheme was
	// present, or a Standard Webhooks header set was incomplete (one of
	// webhook-id, webhook-timestamp, webhook-signature empty).
	ErrMissingSignature = errors.New("webhook: missing signature")

	// ErrMalformedHeader: a signature, id or timestamp header could not be
	// parsed: too long (more than 8 KiB), too many signature entries (more
	// than 16), an item that is not key=value, an X-Signature without t or
	// with two, a timestamp that is not plain decimal digits fitting an
	// int64, no usable v1 signature, an id or timestamp header sent more
	// than once, or a signature header sent more than 16 times (a signature
	// header sent several times is a list of candidates: [Verifier.Verify]).
	ErrMalformedHeader = errors.New("webhook: malformed signature header")

	// ErrTimestampTooOld: the signed timestamp is further in the past than
	// the verifier's tolerance (replay protection).
	ErrTimestampTooOld = errors.New("webhook: timestamp too old")

	// ErrTimestampTooNew: the signed timestamp is further in the future than
	// the verifier's tolerance. Stripe's libraries do not check this;
	// Standard Webhooks' do, and so does Herald.
	ErrTimestampTooNew = errors.New("webhook: timestamp too new")

	// ErrNoMatchingSignature: the header was well formed and fresh but no
	// v1 signature in it matches any of the verifier's secrets (wrong
	// secret, tampered body, id or timestamp).
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")

	// ErrInvalidSecret: a secret is empty, or (for the Standard Webhooks
	// scheme and for signing) not standard base64 after the optional
	// "whsec_" prefix, or no secret was given at all.
	ErrInvalidSecret = errors.New("webhook: invalid secret")
)
