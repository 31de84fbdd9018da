package scheme

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/herald-webhooks/herald/webhook"
)

// Scheme names, the values of [Config.Scheme].
const (
	Herald           = "herald"
	StandardWebhooks = "standard-webhooks"
	Stripe           = "stripe"
	GitHub           = "github"
	Shopify          = "shopify"
	Slack            = "slack"
	HMAC             = "hmac"
)

// Schemes lists every scheme name in documentation order.
var Schemes = []string{Herald, StandardWebhooks, Stripe, GitHub, Shopify, Slack, HMAC}

const (
	// DefaultTolerance is the replay window used when Config.Tolerance is
	// zero: 300 s in either direction, as in webhook.DefaultTolerance.
	DefaultTolerance = webhook.DefaultTolerance

	// MaxSecrets caps Config.Secrets: every secret costs one HMAC per
	// request, and a rotation needs two.
	MaxSecrets = 16

	// maxHeaderLen caps every header value read (bytes), as in package
	// webhook.
	maxHeaderLen = 8 << 10
	// maxTemplateLen caps HMACConfig.Template and maxPrefixLen
	// HMACConfig.Prefix (bytes).
	maxTemplateLen = 1 << 10
	maxPrefixLen   = 64
)

// Config is a source's verification configuration (stored as JSON by the
// gateway). Check it with [Config.Validate] when a source is created or
// changed; [Verify] checks it again and refuses to verify with an invalid
// one.
type Config struct {
	// Scheme is one of [Schemes]: "herald", "standard-webhooks", "stripe",
	// "github", "shopify", "slack" or "hmac".
	Scheme string `json:"scheme"`

	// Secrets holds every currently valid secret, several during a
	// rotation: a signature made with any one of them verifies. For every
	// scheme but standard-webhooks the HMAC key is the secret string's
	// bytes as given (Stripe's "whsec_…" included, GitHub's and Slack's
	// signing secrets, Shopify's app client secret). For standard-webhooks
	// the key is the base64-decoded part after "whsec_", so each secret
	// must pass webhook.ValidateSecret.
	Secrets []string `json:"secrets"`

	// Tolerance is the replay window for schemes with a timestamp (herald,
	// standard-webhooks, stripe, slack, hmac with TimestampHeader): a
	// timestamp further than Tolerance from the gateway's clock, in either
	// direction, is refused. Applied in whole seconds. Zero means
	// [DefaultTolerance] (300 s); otherwise it must be at least 1 s.
	Tolerance time.Duration `json:"-"`

	// HMAC configures scheme "hmac", and must be nil for every other.
	HMAC *HMACConfig `json:"hmac,omitempty"`
}

// HMACConfig describes a generic HMAC signature: one header holding one
// MAC of a signed content built from a template.
type HMACConfig struct {
	// Header carries the signature, e.g. "X-Signature-256".
	Header string `json:"header"`
	// Algorithm is the HMAC hash: "sha256" (default when empty), "sha1" or
	// "sha512".
	Algorithm string `json:"algorithm"`
	// Encoding of the MAC in Header: "hex" (default when empty; either
	// case) or "base64" (standard alphabet, padded or not).
	Encoding string `json:"encoding"`
	// Prefix, when set, must begin the header value and is stripped
	// before decoding, e.g. "sha256=".
	Prefix string `json:"prefix,omitempty"`
	// TimestampHeader, when set, names a header holding unix seconds
	// (plain decimal digits); the replay window then applies, and Template
	// must sign the timestamp ({timestamp} or {header:<TimestampHeader>}).
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// Template is the signed content: literal text and the placeholders
	// {body} (the raw body, required), {timestamp} (the TimestampHeader
	// value as sent; needs TimestampHeader) and {header:Name} (the value
	// of request header Name; an absent header is ErrMissingSignature).
	// Default "{body}". A "{" must open one of these placeholders.
	Template string `json:"template,omitempty"`
}

// ErrInvalidConfig is wrapped by every error of [Config.Validate], and by
// [Verify] when it is given an invalid configuration.
var ErrInvalidConfig = errors.New("invalid verification config")

// ConfigError is the error of [Config.Validate]: the field that broke a
// rule, as a JSON path ("scheme", "secrets[1]", "hmac.template", …), and
// the rule. Its message is "<field>: <rule>"; it never contains a secret.
type ConfigError struct {
	Field string
	Rule  string
	Err   error // the underlying cause, if any (e.g. webhook.ErrInvalidSecret)
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Rule }

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying cause, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// ReplayWindow reports whether c's scheme signs a timestamp, so a captured
// request stops verifying after the tolerance: herald, stripe,
// standard-webhooks, slack, and hmac with a timestamp_header. GitHub,
// Shopify and hmac without one sign only the body: a captured request
// verifies forever, and the gateway dedupes it on the body (BodyKey).
func ReplayWindow(c Config) bool {
	switch c.Scheme {
	case Herald, Stripe, StandardWebhooks, Slack:
		return true
	case HMAC:
		spec, err := c.check()
		return err == nil && spec != nil && spec.tsHeader != ""
	}
	return false
}

// MinSecretBytes is the shortest provider secret a source may be saved
// with: a shorter one can be guessed offline from one signed request.
const MinSecretBytes = 16

// CheckSecretsAtSave applies the rules a source's secrets must pass when
// they are saved (not when verifying, so a configuration saved earlier
// keeps working): each at least MinSecretBytes bytes and without leading
// or trailing whitespace (a copy-paste accident: the provider signs
// without it, so every request would fail), without control characters
// or invisible format characters (Unicode category Cf: U+200B, a BOM, a
// bidi control, pasted along unseen), and distinct (a secret given
// twice is a rotation that lost its new secret, or costs one HMAC more
// per request for nothing). For schemeName standard-webhooks the key is
// the bytes the base64 after an optional "whsec_" decodes to, so "whsec_X"
// and "X" are compared as the same secret, and so are two texts that
// differ only in bits the padding leaves unused (a non-canonical
// encoding, RFC 4648 §3.5), which verify the same signatures. It returns nil or a *[ConfigError] naming the
// secret by index and the rule, never its value.
func CheckSecretsAtSave(schemeName string, secrets []string) error {
	seen := make(map[string]int, len(secrets))
	for i, s := range secrets {
		switch {
		case strings.TrimSpace(s) != s:
			return configErr(fmt.Sprintf("secrets[%d]", i), "has leading or trailing whitespace")
		case strings.ContainsFunc(s, unicode.IsControl):
			// A line break or tab inside is a paste mistake: no provider's
			// secret holds one, and the console's one-a-line box could not
			// give it back.
			return configErr(fmt.Sprintf("secrets[%d]", i), "contains a control character (a line break, a tab): paste the secret as the provider shows it, one per entry")
		case strings.ContainsFunc(s, isFormat):
			// U+200B, a BOM, a bidi control: invisible, so pasted along
			// unseen; no provider's secret holds one, so it never verifies.
			return configErr(fmt.Sprintf("secrets[%d]", i), "contains an invisible format character (Unicode category Cf: U+200B zero-width space, U+FEFF byte order mark, bidirectional controls such as U+202E): paste the secret as the provider shows it")
		case len(s) < MinSecretBytes:
			return configErr(fmt.Sprintf("secrets[%d]", i), "shorter than %d bytes", MinSecretBytes)
		}
		key := s
		if schemeName == StandardWebhooks {
			key = standardKeyOf(s)
		}
		if j, ok := seen[key]; ok {
			field := fmt.Sprintf("secrets[%d]", i)
			switch {
			case secrets[j] == s:
				return configErr(field, "the same as secrets[%d]: secrets must be distinct", j)
			case strings.TrimPrefix(secrets[j], webhook.SecretPrefix) == strings.TrimPrefix(s, webhook.SecretPrefix):
				return configErr(field, "the same as secrets[%d]: secrets must be distinct (a standard-webhooks secret is the same key with or without %s)", j, webhook.SecretPrefix)
			default:
				return configErr(field, "the same as secrets[%d]: secrets must be distinct (a standard-webhooks secret is its base64-decoded key, and these two decode to the same bytes)", j)
			}
		}
		seen[key] = i
	}
	return nil
}

// isFormat reports whether r is of Unicode general category Cf (format):
// invisible characters such as U+200B, U+FEFF, U+202E.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// CheckHMACAtSave applies the rules an hmac setting must pass when it is
// saved (not when verifying, so a configuration saved earlier keeps
// loading): the prefix must not start with a space, since HTTP removes a
// field value's leading whitespace (RFC 9110 §5.5), so no request's header
// could start with it and none would verify. (Tabs and other control
// characters are refused by Validate; the header names are tokens, without
// spaces; the template is the signed content, where spaces are content.)
// Nor may the prefix or the template hold an invisible format character
// (Unicode category Cf: U+200B, a BOM, a bidi control such as U+202E),
// refused in names and secrets too: pasted along unseen, it would make
// every signature fail while the setting looks right, and a bidi control
// reverses the text shown after it.
// It returns nil or a *[ConfigError] naming the setting.
func CheckHMACAtSave(h *HMACConfig) error {
	if h == nil {
		return nil
	}
	if strings.HasPrefix(h.Prefix, " ") {
		return configErr("hmac.prefix", "starts with a space: HTTP removes a header value's leading whitespace (RFC 9110 §5.5), so no request's header could start with it and none would verify; remove the leading space")
	}
	for _, f := range []struct{ field, value string }{{"hmac.prefix", h.Prefix}, {"hmac.template", h.Template}} {
		if strings.ContainsFunc(f.value, isFormat) {
			return configErr(f.field, "contains an invisible format character (Unicode category Cf: U+200B zero-width space, U+FEFF byte order mark, bidirectional controls such as U+202E): no provider signs with one; type the setting as the provider documents it")
		}
	}
	return nil
}

// standardKeyOf is what CheckSecretsAtSave compares for a
// standard-webhooks secret: the key it signs with, the bytes the base64
// after an optional "whsec_" decodes to, as the Standard Webhooks
// libraries decode it (padding bits a text sets are ignored, so "q6s=" and
// "q6t=" are one key, RFC 4648 §3.5). A secret that does not decode (which
// Validate refuses) is compared as the text after the prefix. The two
// kinds are told apart by their first byte.
func standardKeyOf(s string) string {
	enc := strings.TrimPrefix(s, webhook.SecretPrefix)
	if k, err := base64.StdEncoding.DecodeString(enc); err == nil && !strings.ContainsAny(enc, "\r\n") {
		return "k" + string(k)
	}
	return "s" + enc
}

func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// Validate checks the configuration and returns nil, a *[ConfigError]
// (wrapping [ErrInvalidConfig]) naming the rule broken, or, when several
// are, errors.Join of a *[ConfigError] per rule broken (an unknown scheme
// alone: the other rules depend on it; a template's rules on the
// timestamp only once timestamp_header is valid), in this order:
//
//	scheme: unknown scheme "x" (want herald, standard-webhooks, stripe, github, shopify, slack or hmac)
//	secrets: at least one secret is required
//	secrets: more than 16 secrets
//	secrets[i]: empty
//	secrets[i]: not a Standard Webhooks secret (standard base64, optionally prefixed whsec_)
//	tolerance: must be 0 (default 300s) or at least 1s
//	hmac: required for scheme hmac
//	hmac: only allowed with scheme hmac
//	hmac.header: required
//	hmac.header: not a valid header name
//	hmac.algorithm: unknown algorithm "x" (want sha256, sha1 or sha512)
//	hmac.encoding: unknown encoding "x" (want hex or base64)
//	hmac.prefix: longer than 64 bytes
//	hmac.prefix: contains a control character
//	hmac.timestamp_header: not a valid header name
//	hmac.timestamp_header: must differ from hmac.header
//	hmac.template: longer than 1024 bytes
//	hmac.template: unterminated placeholder at byte N
//	hmac.template: unknown placeholder "{x}" (want {body}, {timestamp} or {header:Name})
//	hmac.template: placeholder "{header:x}" needs a valid header name
//	hmac.template: must contain {body}
//	hmac.template: {timestamp} needs hmac.timestamp_header
//	hmac.template: must sign the timestamp ({timestamp}) when hmac.timestamp_header is set
//
// (i counts from 0.) The last rule exists because a timestamp that is not
// signed can be changed by anyone, so its replay window would protect
// nothing.
func (c Config) Validate() error {
	_, err := c.check()
	return err
}

// check validates c and returns the compiled HMACConfig for scheme hmac.
func (c Config) check() (*hmacSpec, error) {
	if !knownScheme(c.Scheme) {
		return nil, configErr("scheme", "unknown scheme %q (want herald, standard-webhooks, stripe, github, shopify, slack or hmac)", c.Scheme)
	}
	// Every setting is checked (the scheme above first: the others'
	// rules depend on it) and every refusal returned (joinConfig).
	var errs []error
	switch {
	case len(c.Secrets) == 0:
		errs = append(errs, configErr("secrets", "at least one secret is required"))
	case len(c.Secrets) > MaxSecrets:
		errs = append(errs, configErr("secrets", "more than %d secrets", MaxSecrets))
	}
	for i, s := range c.Secrets {
		if s == "" {
			errs = append(errs, configErr(fmt.Sprintf("secrets[%d]", i), "empty"))
			continue
		}
		if c.Scheme == StandardWebhooks {
			if err := webhook.ValidateSecret(s); err != nil {
				errs = append(errs, &ConfigError{Field: fmt.Sprintf("secrets[%d]", i), Rule: "not a Standard Webhooks secret (standard base64, optionally prefixed whsec_)", Err: err})
			}
		}
	}
	if c.Tolerance < 0 || (c.Tolerance > 0 && c.Tolerance < time.Second) {
		errs = append(errs, configErr("tolerance", "must be 0 (default 300s) or at least 1s"))
	}
	var spec *hmacSpec
	switch {
	case c.Scheme == HMAC && c.HMAC == nil:
		errs = append(errs, configErr("hmac", "required for scheme hmac"))
	case c.Scheme != HMAC && c.HMAC != nil:
		errs = append(errs, configErr("hmac", "only allowed with scheme hmac"))
	case c.HMAC != nil:
		var err error
		if spec, err = c.HMAC.compile(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := joinConfig(errs); err != nil {
		return nil, err
	}
	return spec, nil
}

// joinConfig is nil for no refusal, the refusal itself for one (a
// *ConfigError), and errors.Join of several, flattened (each a
// *ConfigError, in order: the API lists them all, each at its setting).
func joinConfig(errs []error) error {
	var flat []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			flat = append(flat, j.Unwrap()...)
		} else {
			flat = append(flat, err)
		}
	}
	switch len(flat) {
	case 0:
		return nil
	case 1:
		return flat[0]
	}
	return errors.Join(flat...)
}

func knownScheme(s string) bool {
	for _, k := range Schemes {
		if s == k {
			return true
		}
	}
	return false
}

// Template parts.
const (
	partLiteral = iota
	partBody
	partTimestamp
	partHeader
)

type part struct {
	kind int
	text string // literal text, or the canonical header name for partHeader
}

// hmacSpec is a validated HMACConfig.
type hmacSpec struct {
	header    string // canonical
	algorithm string // sha256, sha1, sha512
	base64    bool
	prefix    string
	tsHeader  string // canonical; "" when no replay window
	parts     []part
}

// compile validates h and returns its normalised form.
func (h *HMACConfig) compile() (*hmacSpec, error) {
	s := &hmacSpec{algorithm: h.Algorithm, prefix: h.Prefix}
	// Every member is checked and every refusal returned (joinConfig);
	// the template's rules on the timestamp use timestamp_header only
	// when it is valid.
	var errs []error
	switch {
	case h.Header == "":
		errs = append(errs, configErr("hmac.header", "required"))
	case !validHeaderName(h.Header):
		errs = append(errs, configErr("hmac.header", "not a valid header name"))
	}
	s.header = canonicalHeader(h.Header)
	switch h.Algorithm {
	case "":
		s.algorithm = "sha256"
	case "sha256", "sha1", "sha512":
	default:
		errs = append(errs, configErr("hmac.algorithm", "unknown algorithm %q (want sha256, sha1 or sha512)", h.Algorithm))
	}
	switch h.Encoding {
	case "", "hex":
	case "base64":
		s.base64 = true
	default:
		errs = append(errs, configErr("hmac.encoding", "unknown encoding %q (want hex or base64)", h.Encoding))
	}
	if len(h.Prefix) > maxPrefixLen {
		errs = append(errs, configErr("hmac.prefix", "longer than %d bytes", maxPrefixLen))
	} else if strings.ContainsFunc(h.Prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		errs = append(errs, configErr("hmac.prefix", "contains a control character"))
	}
	if h.TimestampHeader != "" {
		if !validHeaderName(h.TimestampHeader) {
			errs = append(errs, configErr("hmac.timestamp_header", "not a valid header name"))
		} else if ts := canonicalHeader(h.TimestampHeader); ts == s.header {
			errs = append(errs, configErr("hmac.timestamp_header", "must differ from hmac.header"))
		} else {
			s.tsHeader = ts
		}
	}
	tmpl := h.Template
	if tmpl == "" {
		tmpl = "{body}"
	}
	parts, err := parseTemplate(tmpl)
	if err != nil {
		errs = append(errs, err)
		return nil, joinConfig(errs)
	}
	var haveBody, haveTS, signsTS bool
	for _, p := range parts {
		switch p.kind {
		case partBody:
			haveBody = true
		case partTimestamp:
			haveTS, signsTS = true, true
		case partHeader:
			if s.tsHeader != "" && p.text == s.tsHeader {
				signsTS = true
			}
		}
	}
	switch {
	case !haveBody:
		errs = append(errs, configErr("hmac.template", "must contain {body}"))
	case haveTS && s.tsHeader == "" && h.TimestampHeader == "":
		errs = append(errs, configErr("hmac.template", "{timestamp} needs hmac.timestamp_header"))
	case s.tsHeader != "" && !signsTS:
		errs = append(errs, configErr("hmac.template", "must sign the timestamp ({timestamp}) when hmac.timestamp_header is set"))
	}
	if err := joinConfig(errs); err != nil {
		return nil, err
	}
	s.parts = parts
	return s, nil
}

// parseTemplate splits a signed-content template into literal text and
// placeholders.
func parseTemplate(t string) ([]part, error) {
	if len(t) > maxTemplateLen {
		return nil, configErr("hmac.template", "longer than %d bytes", maxTemplateLen)
	}
	var parts []part
	for pos := 0; pos < len(t); {
		open := strings.IndexByte(t[pos:], '{')
		if open < 0 {
			parts = append(parts, part{kind: partLiteral, text: t[pos:]})
			break
		}
		if open > 0 {
			parts = append(parts, part{kind: partLiteral, text: t[pos : pos+open]})
		}
		start := pos + open
		end := strings.IndexByte(t[start:], '}')
		if end < 0 {
			return nil, configErr("hmac.template", "unterminated placeholder at byte %d", start)
		}
		ph := t[start : start+end+1]
		switch {
		case ph == "{body}":
			parts = append(parts, part{kind: partBody})
		case ph == "{timestamp}":
			parts = append(parts, part{kind: partTimestamp})
		case strings.HasPrefix(ph, "{header:"):
			name := ph[len("{header:") : len(ph)-1]
			if !validHeaderName(name) {
				return nil, configErr("hmac.template", "placeholder %q needs a valid header name", ph)
			}
			parts = append(parts, part{kind: partHeader, text: canonicalHeader(name)})
		default:
			return nil, configErr("hmac.template", "unknown placeholder %q (want {body}, {timestamp} or {header:Name})", ph)
		}
		pos = start + end + 1
	}
	return parts, nil
}

// validHeaderName reports whether s is an RFC 9110 field name (a token).
func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
