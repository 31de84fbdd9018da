package scheme

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// Header names read by the fixed schemes (canonical form).
const (
	headerHerald          = "X-Signature"
	headerStripe          = "Stripe-Signature"
	headerGitHub          = "X-Hub-Signature-256"
	headerGitHubSHA1      = "X-Hub-Signature"
	headerShopify         = "X-Shopify-Hmac-Sha256"
	headerSlackSignature  = "X-Slack-Signature"
	headerSlackTimestamp  = "X-Slack-Request-Timestamp"
	githubSignaturePrefix = "sha256="
	slackVersionPrefix    = "v0="
)

var (
	standardHeaders = [3]string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
	svixHeaders     = [3]string{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}
)

// Verify checks the request's headers h and raw body at time now against
// the source's configuration c. It returns nil, or an error wrapping
// exactly one of webhook.ErrMissingSignature, webhook.ErrMalformedHeader,
// webhook.ErrTimestampTooOld, webhook.ErrTimestampTooNew and
// webhook.ErrNoMatchingSignature (the gateway counts the reason and
// answers 401 with no detail), or — when c fails [Config.Validate] — the
// *[ConfigError], wrapping [ErrInvalidConfig].
//
// body must be the exact bytes received; it is only read. h is looked up
// with canonical keys, as net/http provides them. Within one scheme the
// checks run in the order: signature headers present (Missing), well formed
// and not repeated (Malformed), timestamp within the window (TooOld /
// TooNew), MAC of some secret matches (NoMatchingSignature). The rules of
// each scheme:
//
//   - herald: X-Signature "t=<unix>,v1=<hex>[,v1=<hex>…]", verified by
//     webhook.Verifier.VerifyHerald (see package webhook).
//   - standard-webhooks: webhook-id, webhook-timestamp, webhook-signature,
//     or when none of those is present svix-id, svix-timestamp,
//     svix-signature, verified by webhook.Verifier.VerifyStandard. Standard
//     Webhooks spec, "Verifying signatures"
//     (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
//   - stripe: Stripe-Signature in the same format as X-Signature, key =
//     the secret string as is, any v1 may match (Stripe, "Verify webhook
//     signatures manually", https://docs.stripe.com/webhooks#verify-manually).
//     Unlike Stripe's libraries, a timestamp too far in the FUTURE is
//     refused too (webhook.ErrTimestampTooNew).
//   - github: X-Hub-Signature-256 "sha256=" + hex HMAC-SHA256(secret, body)
//     (GitHub, "Validating webhook deliveries",
//     https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
//     The legacy SHA-1 X-Hub-Signature is not accepted: a request carrying
//     only it is ErrMissingSignature. (A source that must accept SHA-1 can
//     use scheme hmac with header X-Hub-Signature, sha1, prefix "sha1=".)
//     GitHub signs no timestamp.
//   - shopify: X-Shopify-Hmac-Sha256 = base64 HMAC-SHA256(secret, body)
//     (Shopify, "Verify webhooks",
//     https://shopify.dev/docs/apps/build/webhooks/subscribe/https). No
//     timestamp.
//   - slack: X-Slack-Signature "v0=" + hex HMAC-SHA256(secret,
//     "v0:" + X-Slack-Request-Timestamp + ":" + body), with the replay
//     window on X-Slack-Request-Timestamp (Slack, "Verifying requests from
//     Slack", https://api.slack.com/authentication/verifying-requests-from-slack).
//   - hmac: as described by [HMACConfig].
//
// Signatures in hex are accepted in either case; base64 must be the
// canonical encoding of a MAC of the algorithm's size.
func Verify(c Config, h http.Header, body []byte, now time.Time) error {
	spec, err := c.check()
	if err != nil {
		return err
	}
	switch c.Scheme {
	case Herald:
		return verifyHeraldFormat(c, h, headerHerald, body, now)
	case Stripe:
		return verifyHeraldFormat(c, h, headerStripe, body, now)
	case StandardWebhooks:
		return verifyStandard(c, h, body, now)
	case GitHub:
		return verifyGitHub(c, h, body)
	case Shopify:
		return verifyShopify(c, h, body)
	case Slack:
		return verifySlack(c, h, body, now)
	default: // HMAC; check admits no other scheme, and compiled c.HMAC.
		return verifyHMAC(c, spec, h, body, now)
	}
}

// verifier returns the webhook package's verifier for c at time now.
func verifier(c Config, now time.Time) *webhook.Verifier {
	return &webhook.Verifier{
		Secrets:   c.Secrets,
		Tolerance: c.Tolerance, // zero means webhook.DefaultTolerance
		Now:       func() time.Time { return now },
	}
}

// verifyHeraldFormat verifies the copies of header name together
// (webhook.Verifier.VerifyHeraldCopies: each secret's MAC once per
// timestamp, at most 2 timestamps), within anyCandidate's limits on their
// number and length.
func verifyHeraldFormat(c Config, h http.Header, name string, body []byte, now time.Time) error {
	vs := h.Values(name)
	if len(vs) > maxCandidates {
		return fmt.Errorf("%w: %s header sent %d times", webhook.ErrMalformedHeader, name, len(vs))
	}
	sent := false
	for _, v := range vs {
		if len(v) > maxHeaderLen {
			return fmt.Errorf("%w: %s longer than %d bytes", webhook.ErrMalformedHeader, name, maxHeaderLen)
		}
		sent = sent || v != ""
	}
	if !sent {
		return fmt.Errorf("%w: no %s header", webhook.ErrMissingSignature, name)
	}
	err := verifier(c, now).VerifyHeraldCopies(vs, body)
	if err == nil {
		return nil
	}
	if name != webhook.HeaderSignature {
		// The webhook package names its own header: name the one read.
		return renamedHeaderError{strings.ReplaceAll(err.Error(), webhook.HeaderSignature, name), err}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// renamedHeaderError is an error of the webhook package about
// X-Signature, reworded for the header that was actually read
// (Stripe-Signature); errors.Is still finds its sentinel.
type renamedHeaderError struct {
	msg string
	err error
}

func (e renamedHeaderError) Error() string { return e.msg }
func (e renamedHeaderError) Unwrap() error { return e.err }

// maxCandidates caps how many times a signature header may be sent.
const maxCandidates = 16

// anyCandidate calls verify with each value of the signature header name
// (a header sent several times is a list of candidates, as a proxy may
// split or repeat it) and succeeds when one verifies; otherwise it answers
// the first candidate's error. No value: ErrMissingSignature; more than 16
// values or one longer than 8 KiB: ErrMalformedHeader.
func anyCandidate(h http.Header, name string, verify func(v string) error) error {
	vs := h.Values(name)
	if len(vs) > maxCandidates {
		return fmt.Errorf("%w: %s header sent %d times", webhook.ErrMalformedHeader, name, len(vs))
	}
	var first error
	for _, v := range vs {
		if v == "" {
			continue
		}
		if len(v) > maxHeaderLen {
			return fmt.Errorf("%w: %s longer than %d bytes", webhook.ErrMalformedHeader, name, maxHeaderLen)
		}
		err := verify(v)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return fmt.Errorf("%w: no %s header", webhook.ErrMissingSignature, name)
	}
	return first
}

func verifyStandard(c Config, h http.Header, body []byte, now time.Time) error {
	vals, found, err := headerSet(h, standardHeaders)
	if err != nil {
		return err
	}
	if !found {
		if vals, found, err = headerSet(h, svixHeaders); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: neither webhook-* nor svix-* headers present", webhook.ErrMissingSignature)
	}
	return verifier(c, now).VerifyStandard(vals[0], vals[1], vals[2], body)
}

func verifyGitHub(c Config, h http.Header, body []byte) error {
	if len(h.Values(headerGitHub)) == 0 && len(h.Values(headerGitHubSHA1)) > 0 {
		return fmt.Errorf("%w: no %s header (the SHA-1 %s alone is not accepted)", webhook.ErrMissingSignature, headerGitHub, headerGitHubSHA1)
	}
	macs := &secretMACs{secrets: c.Secrets, newHash: sha256.New}
	return anyCandidate(h, headerGitHub, func(v string) error { return verifyGitHubValue(macs, v, body) })
}

func verifyGitHubValue(macs *secretMACs, v string, body []byte) error {
	hexSig, ok := strings.CutPrefix(v, githubSignaturePrefix)
	if !ok {
		return fmt.Errorf("%w: %s does not start with %q", webhook.ErrMalformedHeader, headerGitHub, githubSignaturePrefix)
	}
	sig, err := decodeHex(hexSig, sha256.Size, headerGitHub)
	if err != nil {
		return err
	}
	if !macs.match(sig, func(m hash.Hash) { m.Write(body) }) {
		return fmt.Errorf("%w: %s", webhook.ErrNoMatchingSignature, headerGitHub)
	}
	return nil
}

func verifyShopify(c Config, h http.Header, body []byte) error {
	macs := &secretMACs{secrets: c.Secrets, newHash: sha256.New}
	return anyCandidate(h, headerShopify, func(v string) error { return verifyShopifyValue(macs, v, body) })
}

func verifyShopifyValue(macs *secretMACs, v string, body []byte) error {
	sig, err := decodeBase64(v, sha256.Size, false, headerShopify)
	if err != nil {
		return err
	}
	if !macs.match(sig, func(m hash.Hash) { m.Write(body) }) {
		return fmt.Errorf("%w: %s", webhook.ErrNoMatchingSignature, headerShopify)
	}
	return nil
}

func verifySlack(c Config, h http.Header, body []byte, now time.Time) error {
	tsHeader, err := single(h, headerSlackTimestamp)
	if err != nil {
		return err
	}
	if tsHeader == "" && len(h.Values(headerSlackSignature)) > 0 {
		return fmt.Errorf("%w: no %s header", webhook.ErrMissingSignature, headerSlackTimestamp)
	}
	macs := &secretMACs{secrets: c.Secrets, newHash: sha256.New}
	return anyCandidate(h, headerSlackSignature, func(v string) error { return verifySlackValue(c, macs, v, tsHeader, body, now) })
}

func verifySlackValue(c Config, macs *secretMACs, sigHeader, tsHeader string, body []byte, now time.Time) error {
	hexSig, ok := strings.CutPrefix(sigHeader, slackVersionPrefix)
	if !ok {
		return fmt.Errorf("%w: %s does not start with %q", webhook.ErrMalformedHeader, headerSlackSignature, slackVersionPrefix)
	}
	sig, err := decodeHex(hexSig, sha256.Size, headerSlackSignature)
	if err != nil {
		return err
	}
	ts, err := parseTimestamp(tsHeader, headerSlackTimestamp)
	if err != nil {
		return err
	}
	if err := checkWindow(ts, now, c.Tolerance); err != nil {
		return err
	}
	// Slack's base string is "v0:" + the timestamp header as sent + ":" + body.
	if macs.match(sig, func(mac hash.Hash) {
		mac.Write([]byte("v0:"))
		mac.Write([]byte(tsHeader))
		mac.Write([]byte{':'})
		mac.Write(body)
	}) {
		return nil
	}
	return fmt.Errorf("%w: %s", webhook.ErrNoMatchingSignature, headerSlackSignature)
}

func verifyHMAC(c Config, s *hmacSpec, h http.Header, body []byte, now time.Time) error {
	newHash, _ := hashFor(s.algorithm)
	macs := &secretMACs{secrets: c.Secrets, newHash: newHash}
	return anyCandidate(h, s.header, func(v string) error { return verifyHMACValue(c, s, macs, v, h, body, now) })
}

func verifyHMACValue(c Config, s *hmacSpec, macs *secretMACs, v string, h http.Header, body []byte, now time.Time) error {
	_, size := hashFor(s.algorithm)
	var err error
	enc, ok := strings.CutPrefix(v, s.prefix)
	if !ok {
		return fmt.Errorf("%w: %s does not start with the configured prefix", webhook.ErrMalformedHeader, s.header)
	}
	var sig []byte
	if s.base64 {
		sig, err = decodeBase64(enc, size, true, s.header)
	} else {
		sig, err = decodeHex(enc, size, s.header)
	}
	if err != nil {
		return err
	}

	var tsValue string
	if s.tsHeader != "" {
		if tsValue, err = single(h, s.tsHeader); err != nil {
			return err
		}
		if tsValue == "" {
			return fmt.Errorf("%w: no %s header (the signed timestamp)", webhook.ErrMissingSignature, s.tsHeader)
		}
		ts, err := parseTimestamp(tsValue, s.tsHeader)
		if err != nil {
			return err
		}
		if err := checkWindow(ts, now, c.Tolerance); err != nil {
			return err
		}
	}

	// Resolve the {header:Name} values once, before computing any MAC.
	values := make([]string, len(s.parts))
	for i, p := range s.parts {
		if p.kind != partHeader {
			continue
		}
		vs := h.Values(p.text)
		switch {
		case len(vs) == 0:
			return fmt.Errorf("%w: no %s header (signed by the template)", webhook.ErrMissingSignature, p.text)
		case len(vs) > 1:
			return fmt.Errorf("%w: %s header sent %d times", webhook.ErrMalformedHeader, p.text, len(vs))
		case len(vs[0]) > maxHeaderLen:
			return fmt.Errorf("%w: %s longer than %d bytes", webhook.ErrMalformedHeader, p.text, maxHeaderLen)
		}
		values[i] = vs[0]
	}

	if macs.match(sig, func(mac hash.Hash) {
		for i, p := range s.parts {
			switch p.kind {
			case partLiteral:
				mac.Write([]byte(p.text))
			case partBody:
				mac.Write(body)
			case partTimestamp:
				mac.Write([]byte(tsValue))
			case partHeader:
				mac.Write([]byte(values[i]))
			}
		}
	}) {
		return nil
	}
	return fmt.Errorf("%w: %s", webhook.ErrNoMatchingSignature, s.header)
}

func hashFor(algorithm string) (func() hash.Hash, int) {
	switch algorithm {
	case "sha1":
		return sha1.New, sha1.Size
	case "sha512":
		return sha512.New, sha512.Size
	default:
		return sha256.New, sha256.Size
	}
}

// secretMACs holds each secret's MAC of one request's signed content,
// computed on the first match and reused for the request's other
// candidates (a signature header sent several times): the content these
// schemes sign (the body, Slack's timestamp, an hmac template's headers)
// is the same for every candidate, so 16 candidates cost one MAC per
// secret, not 16 passes over a body of up to 16 MiB each, which anyone
// could have the gateway make without knowing a secret.
type secretMACs struct {
	secrets []string
	newHash func() hash.Hash
	sums    [][]byte // nil until the first match
}

// match reports whether sig equals the MAC of any secret, each comparison
// in constant time. write writes the signed content into a keyed MAC; it
// is called only on the first match of a request (once per secret), and
// must write the same content on every call for one secretMACs.
func (m *secretMACs) match(sig []byte, write func(hash.Hash)) bool {
	if m.sums == nil {
		m.sums = make([][]byte, 0, len(m.secrets))
		for _, secret := range m.secrets {
			mac := hmac.New(m.newHash, []byte(secret))
			write(mac)
			m.sums = append(m.sums, mac.Sum(nil))
		}
	}
	ok := false
	for _, sum := range m.sums {
		if hmac.Equal(sum, sig) {
			ok = true
		}
	}
	return ok
}

// decodeHex decodes a MAC of size bytes written in hex (either case).
func decodeHex(s string, size int, header string) ([]byte, error) {
	if len(s) != hex.EncodedLen(size) {
		return nil, fmt.Errorf("%w: %s signature is not %d hex digits", webhook.ErrMalformedHeader, header, hex.EncodedLen(size))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s signature is not hex", webhook.ErrMalformedHeader, header)
	}
	return b, nil
}

// decodeBase64 decodes a MAC of size bytes written in canonical standard
// base64, padded, or also unpadded when allowRaw.
func decodeBase64(s string, size int, allowRaw bool, header string) ([]byte, error) {
	var enc *base64.Encoding
	switch {
	case len(s) == base64.StdEncoding.EncodedLen(size):
		enc = base64.StdEncoding.Strict()
	case allowRaw && len(s) == base64.RawStdEncoding.EncodedLen(size):
		enc = base64.RawStdEncoding.Strict()
	default:
		return nil, fmt.Errorf("%w: %s signature is not the base64 of %d bytes", webhook.ErrMalformedHeader, header, size)
	}
	b, err := enc.DecodeString(s)
	if err != nil || len(b) != size {
		return nil, fmt.Errorf("%w: %s signature is not canonical base64", webhook.ErrMalformedHeader, header)
	}
	return b, nil
}

// parseTimestamp parses unix seconds written as 1 to 19 plain decimal
// digits (no sign, no spaces, no leading zero), as package webhook does.
func parseTimestamp(s, header string) (int64, error) {
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: %s has a leading zero", webhook.ErrMalformedHeader, header)
	}
	if len(s) > 19 {
		return 0, fmt.Errorf("%w: %s longer than 19 digits", webhook.ErrMalformedHeader, header)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %s is not plain decimal digits", webhook.ErrMalformedHeader, header)
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s out of range", webhook.ErrMalformedHeader, header)
	}
	return ts, nil
}

// checkWindow applies the replay window exactly as webhook.Verifier does:
// now truncated to unix seconds, the tolerance in whole seconds (zero means
// DefaultTolerance), |now - ts| > tolerance rejected in either direction.
// ts is non-negative; no subtraction below can overflow.
func checkWindow(ts int64, now time.Time, tol time.Duration) error {
	if tol <= 0 {
		tol = DefaultTolerance
	}
	tolSec := int64(tol / time.Second)
	n := now.Unix()
	if n > ts && n-tolSec > ts { // n > ts >= 0
		return fmt.Errorf("%w: %d s old, tolerance %d s", webhook.ErrTimestampTooOld, n-ts, tolSec)
	}
	if ts > n && ts-tolSec > n { // ts >= 0
		return fmt.Errorf("%w: more than %d s in the future", webhook.ErrTimestampTooNew, tolSec)
	}
	return nil
}

// single returns the one value of header name: "" when absent,
// ErrMalformedHeader when sent more than once or longer than 8 KiB.
func single(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", fmt.Errorf("%w: %s header sent %d times", webhook.ErrMalformedHeader, name, len(vs))
	case len(vs[0]) > maxHeaderLen:
		return "", fmt.Errorf("%w: %s longer than %d bytes", webhook.ErrMalformedHeader, name, maxHeaderLen)
	}
	return vs[0], nil
}

// headerSet returns the values of three headers and whether any of them is
// non-empty.
func headerSet(h http.Header, names [3]string) (vals [3]string, found bool, err error) {
	for i, name := range names {
		if i == 2 { // the signature: several values are one list of entries
			vs := h.Values(name)
			if len(vs) > maxCandidates {
				return vals, false, fmt.Errorf("%w: %s header sent %d times", webhook.ErrMalformedHeader, name, len(vs))
			}
			vals[i] = strings.Join(vs, " ")
			found = found || vals[i] != ""
			continue
		}
		if vals[i], err = single(h, name); err != nil {
			return vals, false, err
		}
		found = found || vals[i] != ""
	}
	return vals, found, nil
}

func canonicalHeader(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }
