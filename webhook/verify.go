package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Verifier checks signed webhook requests of both schemes against a set of
// secrets. The zero value is not usable: set Secrets. A Verifier that is not
// modified after first use is safe for concurrent use.
type Verifier struct {
	// Secrets holds every currently valid secret; during a rotation overlap
	// that is the old and the new one, and a signature made with any of them
	// is accepted. For the Herald/Stripe scheme any non-empty string works
	// (its bytes are the key, e.g. Stripe's "whsec_…"); the Standard
	// Webhooks scheme needs every secret to pass [ValidateSecret].
	Secrets []string

	// Tolerance is the replay window: a timestamp further than Tolerance
	// from Now, in either direction, is rejected. It is applied in whole
	// seconds (rounded down). Zero or negative means [DefaultTolerance]
	// (300 s, as in both Stripe's and Standard Webhooks' libraries).
	Tolerance time.Duration

	// Now returns the current time; nil means time.Now. It is truncated to
	// unix seconds, so a message exactly Tolerance old is accepted.
	Now func() time.Time
}

// VerifyHerald verifies a Herald/Stripe signature header (see
// [ParseSignatureHeader]) for body, the exact raw request body. It succeeds
// when the timestamp is within the replay window and at least one v1
// signature equals HMAC-SHA256(secret, "<t>.<body>") for at least one of
// v.Secrets, compared in constant time. Rule: Stripe, "Verify webhook
// signatures manually" (https://docs.stripe.com/webhooks),
// except that Herald also rejects timestamps too far in the future.
//
// Errors, checked in this order: [ErrInvalidSecret] (no secrets, or an
// empty one), [ErrMissingSignature] (empty header), [ErrMalformedHeader],
// [ErrTimestampTooOld] / [ErrTimestampTooNew], [ErrNoMatchingSignature].
func (v *Verifier) VerifyHerald(header string, body []byte) error {
	if err := v.checkSecrets(); err != nil {
		return err
	}
	if header == "" {
		return fmt.Errorf("%w: empty %s header", ErrMissingSignature, HeaderSignature)
	}
	ts, sigs, err := ParseSignatureHeader(header)
	if err != nil {
		return err
	}
	return v.verifyHeraldSignatures(ts, sigs, body)
}

// MaxHeraldCopyTimestamps is how many different timestamps the copies of
// a Herald/Stripe signature header may carry ([Verifier.VerifyHeraldCopies]).
const MaxHeraldCopyTimestamps = 2

// VerifyHeraldCopies verifies the values of a Herald/Stripe signature
// header sent several times (a proxy may repeat it; an [http.Header]'s
// Values) as [Verifier.VerifyHerald] verifies one, succeeding when any
// copy verifies, at the cost of one: the copies carrying one timestamp
// are checked together, each secret's MAC computed once per timestamp,
// and copies with more than [MaxHeraldCopyTimestamps] different
// timestamps are refused before any MAC is computed. Without both, a
// sender with no secret could make a receiver compute a MAC of the whole
// body per secret per copy. Empty values are skipped.
//
// Errors: those of VerifyHerald, for the first copy that failed (in the
// order of values); [ErrMalformedHeader] for more than 16 copies or too
// many timestamps; [ErrMissingSignature] when every value is empty.
func (v *Verifier) VerifyHeraldCopies(values []string, body []byte) error {
	if err := v.checkSecrets(); err != nil {
		return err
	}
	if len(values) > maxEntries {
		return fmt.Errorf("%w: %s header sent %d times", ErrMalformedHeader, HeaderSignature, len(values))
	}
	type group struct {
		ts    int64
		first int // index in values of its first copy
		sigs  [][]byte
	}
	var (
		groups   []group
		firstErr error
		errAt    = len(values)
	)
	fail := func(i int, err error) {
		if i < errAt {
			firstErr, errAt = err, i
		}
	}
	for i, c := range values {
		if c == "" {
			continue
		}
		ts, sigs, err := ParseSignatureHeader(c)
		if err != nil {
			fail(i, err)
			continue
		}
		g := 0
		for g < len(groups) && groups[g].ts != ts {
			g++
		}
		if g == len(groups) {
			if len(groups) == MaxHeraldCopyTimestamps {
				return fmt.Errorf("%w: %s sent with more than %d different timestamps", ErrMalformedHeader, HeaderSignature, MaxHeraldCopyTimestamps)
			}
			groups = append(groups, group{ts: ts, first: i})
		}
		groups[g].sigs = append(groups[g].sigs, sigs...)
	}
	for _, g := range groups {
		err := v.verifyHeraldSignatures(g.ts, g.sigs, body)
		if err == nil {
			return nil
		}
		fail(g.first, err)
	}
	if firstErr == nil {
		return fmt.Errorf("%w: empty %s header", ErrMissingSignature, HeaderSignature)
	}
	return firstErr
}

// verifyHeraldSignatures checks timestamp ts against the replay window and
// sigs against HMAC-SHA256(secret, "<ts>.<body>") of each secret.
func (v *Verifier) verifyHeraldSignatures(ts int64, sigs [][]byte, body []byte) error {
	if err := v.checkTimestamp(ts); err != nil {
		return err
	}
	var tsBuf [20]byte
	tsb := strconv.AppendInt(tsBuf[:0], ts, 10)
	var sum [sha256.Size]byte
	for _, secret := range v.Secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(tsb)
		mac.Write(dot)
		mac.Write(body)
		if anyEqual(sigs, mac.Sum(sum[:0])) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatchingSignature, HeaderSignature)
}

// VerifyStandard verifies a Standard Webhooks message given the values of
// its webhook-id, webhook-timestamp (unix seconds, plain decimal digits) and
// webhook-signature headers (see [ParseStandardSignatures]) and body, the
// exact raw request body. It succeeds when the timestamp is within the
// replay window and at least one v1 signature equals
// HMAC-SHA256(key, "<msgID>.<timestamp>.<body>") for the key of at least one
// of v.Secrets, compared in constant time. Rule: Standard Webhooks spec,
// "Verifying signatures"
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
//
// Errors, checked in this order: [ErrInvalidSecret] (no secrets, or one
// failing [ValidateSecret]), [ErrMissingSignature] (any of the three values
// empty), [ErrMalformedHeader] (including an id or timestamp longer than
// 8 KiB or a timestamp that is not plain digits), [ErrTimestampTooOld] /
// [ErrTimestampTooNew], [ErrNoMatchingSignature].
func (v *Verifier) VerifyStandard(msgID, timestamp, signatures string, body []byte) error {
	keys, err := v.standardKeys()
	if err != nil {
		return err
	}
	switch {
	case msgID == "":
		return fmt.Errorf("%w: empty webhook-id", ErrMissingSignature)
	case timestamp == "":
		return fmt.Errorf("%w: empty webhook-timestamp", ErrMissingSignature)
	case signatures == "":
		return fmt.Errorf("%w: empty webhook-signature", ErrMissingSignature)
	case len(msgID) > maxHeaderLen:
		return fmt.Errorf("%w: webhook-id longer than %d bytes", ErrMalformedHeader, maxHeaderLen)
	}
	ts, err := parseTimestamp(timestamp)
	if err != nil {
		return err
	}
	sigs, err := ParseStandardSignatures(signatures)
	if err != nil {
		return err
	}
	if err := v.checkTimestamp(ts); err != nil {
		return err
	}
	// "<msgID>.<t>." once, then one MAC per key.
	prefix := make([]byte, 0, len(msgID)+22)
	prefix = append(prefix, msgID...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, ts, 10)
	prefix = append(prefix, '.')
	var sum [sha256.Size]byte
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(prefix)
		mac.Write(body)
		if anyEqual(sigs, mac.Sum(sum[:0])) {
			return nil
		}
	}
	return fmt.Errorf("%w: webhook-signature", ErrNoMatchingSignature)
}

// Verify verifies the request headers h (canonical keys, as net/http
// provides them) and body, the exact raw request body, with whichever
// schemes' headers are present:
//
//   - X-Signature: the Herald/Stripe scheme ([Verifier.VerifyHerald]);
//   - webhook-id, webhook-timestamp, webhook-signature, or, when none of
//     those is present, svix-id, svix-timestamp, svix-signature: the
//     Standard Webhooks scheme ([Verifier.VerifyStandard]).
//
// When both schemes are present both must verify. When neither is present
// it returns [ErrMissingSignature]. A signature header sent several times
// (X-Signature, webhook-signature) is a list of candidates: X-Signature
// verifies when any of its values does ([Verifier.VerifyHeraldCopies]: at
// most [MaxHeraldCopyTimestamps] different timestamps among them),
// webhook-signature's values are joined into one list of entries (at
// most 16 values each). The id and
// timestamp headers sent more than once are [ErrMalformedHeader]: the
// signed string would be ambiguous. Otherwise it returns the first error
// of the scheme methods, Herald first; [ErrInvalidSecret] when v has no
// secrets.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	if len(v.Secrets) == 0 {
		return fmt.Errorf("%w: no secrets configured", ErrInvalidSecret)
	}
	heralds := h[HeaderSignature]
	if len(heralds) > maxEntries {
		return fmt.Errorf("%w: %s header sent %d times", ErrMalformedHeader, HeaderSignature, len(heralds))
	}
	herald := strings.Join(heralds, "") // non-empty when any candidate is
	names := [3]string{HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature}
	std, found, err := headerSet(h, names)
	if err != nil {
		return err
	}
	if !found {
		names = [3]string{headerSvixID, headerSvixTimestamp, headerSvixSignature}
		if std, found, err = headerSet(h, names); err != nil {
			return err
		}
	}
	if herald == "" && !found {
		return fmt.Errorf("%w: neither %s nor webhook-signature headers present", ErrMissingSignature, HeaderSignature)
	}
	if herald != "" {
		if err := v.VerifyHeraldCopies(heralds, body); err != nil {
			return err
		}
	}
	if found {
		return v.VerifyStandard(std[0], std[1], std[2], body)
	}
	return nil
}

// single returns the one value of header key, "" when absent, and
// ErrMalformedHeader when it was sent more than once (a proxy and this
// package could otherwise disagree about which one counts).
func single(h http.Header, key string) (string, error) {
	vs := h[key]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	default:
		return "", fmt.Errorf("%w: %s header sent %d times", ErrMalformedHeader, key, len(vs))
	}
}

// headerSet returns the values of the three headers (id, timestamp,
// signature) and whether any of them is non-empty. The signature header
// may be sent several times: its values are joined with a space (one list
// of entries).
func headerSet(h http.Header, names [3]string) (vals [3]string, found bool, err error) {
	for i, name := range names {
		if i == 2 {
			vs := h[name]
			if len(vs) > maxEntries {
				return vals, false, fmt.Errorf("%w: %s header sent %d times", ErrMalformedHeader, name, len(vs))
			}
			vals[i] = strings.Join(vs, " ")
		} else if vals[i], err = single(h, name); err != nil {
			return vals, false, err
		}
		found = found || vals[i] != ""
	}
	return vals, found, nil
}

func (v *Verifier) checkSecrets() error {
	if len(v.Secrets) == 0 {
		return fmt.Errorf("%w: no secrets configured", ErrInvalidSecret)
	}
	for i, s := range v.Secrets {
		if s == "" {
			return fmt.Errorf("%w: secret %d is empty", ErrInvalidSecret, i+1)
		}
	}
	return nil
}

func (v *Verifier) standardKeys() ([][]byte, error) {
	if len(v.Secrets) == 0 {
		return nil, fmt.Errorf("%w: no secrets configured", ErrInvalidSecret)
	}
	keys := make([][]byte, len(v.Secrets))
	for i, s := range v.Secrets {
		key, err := standardKey(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		keys[i] = key
	}
	return keys, nil
}

// checkTimestamp applies the replay window: |now - ts| > tolerance, in whole
// seconds, is rejected. ts is non-negative (parsed from digits); the
// comparisons are arranged so that no subtraction can overflow.
func (v *Verifier) checkTimestamp(ts int64) error {
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	tolSec := int64(tol / time.Second)
	nowFn := v.Now
	if nowFn == nil {
		nowFn = time.Now
	}
	now := nowFn().Unix()
	if now > ts && now-tolSec > ts { // now > ts >= 0, so now-tolSec cannot overflow
		return fmt.Errorf("%w: %d s old, tolerance %d s", ErrTimestampTooOld, now-ts, tolSec)
	}
	if ts > now && ts-tolSec > now { // ts >= 0, so ts-tolSec cannot overflow
		return fmt.Errorf("%w: %d s in the future, tolerance %d s", ErrTimestampTooNew, uint64(ts)-uint64(now), tolSec)
	}
	return nil
}

// anyEqual reports whether any candidate equals want, each comparison in
// constant time.
func anyEqual(candidates [][]byte, want []byte) bool {
	for _, c := range candidates {
		if hmac.Equal(c, want) {
			return true
		}
	}
	return false
}
