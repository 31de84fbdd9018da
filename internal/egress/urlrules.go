package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxURLLength is the longest endpoint URL CheckURL accepts, in bytes.
const MaxURLLength = 2048

// Rules reported in PolicyError.Rule. They are stable machine names, suitable
// for API error responses (422 with the rule that failed).
const (
	RuleLength           = "length"            // longer than MaxURLLength bytes
	RuleWhitespace       = "whitespace"        // a space, tab, newline or other Unicode white space
	RuleBackslash        = "backslash"         // a "\"
	RuleControlCharacter = "control_character" // C0/C1 controls, DEL, Unicode format characters (e.g. bidi overrides)
	RuleSyntax           = "syntax"            // not valid UTF-8, or malformed (e.g. a bad %-escape)
	RuleScheme           = "scheme"            // not an absolute https URL (http with AllowHTTP)
	RuleFragment         = "fragment"          // a "#fragment"
	RuleUserinfo         = "userinfo"          // "user:password@" before the host
	RuleHost             = "host"              // missing or malformed host name
	RulePort             = "port"              // port not a number in 1..65535
	RuleBlockedAddress   = "blocked_address"   // a literal IP address (or localhost) the egress policy denies
	// RuleCredentialsInQuery: a query parameter named like a credential
	// (token, secret, password, api_key, key, signature, auth, …). Secrets
	// in URLs end up in logs, proxies and dashboards; they belong in
	// headers (custom endpoint headers).
	RuleCredentialsInQuery = "credentials_in_query"
)

// PolicyError is returned by CheckURL when a URL violates the endpoint URL
// policy (docs/contract.md, "endpoint URLs").
type PolicyError struct {
	// Rule is the stable machine name of the rule that failed: one of the
	// Rule* constants ("scheme", "userinfo", "fragment", "host",
	// "whitespace", "backslash", "control_character", "blocked_address",
	// "port", "length", "syntax", "credentials_in_query").
	Rule string
	// Message explains the failure to a human; it may quote the offending
	// part of the URL.
	Message string
}

// Error returns "endpoint URL: <rule>: <message>".
func (e *PolicyError) Error() string { return "endpoint URL: " + e.Rule + ": " + e.Message }

func policyErr(rule, format string, args ...any) *PolicyError {
	return &PolicyError{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// CheckURL applies the endpoint URL policy (docs/contract.md, "endpoint
// URLs") at create/update time, and Do applies it again before each
// attempt. The rules, checked in this order:
//
//  1. length: at most MaxURLLength (2048) bytes;
//  2. whitespace, backslash, control_character (also Unicode format
//     characters such as bidi overrides), syntax (invalid UTF-8): checked
//     on every character of the raw string;
//  3. scheme: an absolute URL with scheme https (or http if AllowHTTP);
//  4. fragment: no "#";
//  5. host: an authority ("//host") is present;
//  6. userinfo: no "user@" or "user:password@";
//  7. host / port / syntax: the URL parses (net/url) with a host name
//     (ASCII letters, digits, "-", "_", "."; labels of 1..63 bytes; at
//     most 253 bytes; no %-encoding; not a numeric IPv4 form other than
//     dotted-quad, such as "127.1" or "0x7f.1") or an IP literal without
//     zone, and a port, if any, in 1..65535;
//  8. blocked_address: a literal IP host is checked against the same
//     address policy as the dialer (so https://127.0.0.1/ is refused unless
//     AllowLoopback, AllowPrivate or AllowCIDRs permit it, and a link-local
//     or cloud-metadata address such as 169.254.169.254 whatever the
//     policy, unless an AllowCIDRs range inside them opens it);
//     "localhost" and "*.localhost" are refused unless AllowLoopback;
//  9. credentials_in_query: no query parameter named like a credential
//     (see credentialParam); secrets belong in custom endpoint headers.
//
// Host names are not resolved here: their addresses are checked when
// dialed. It returns the parsed URL, or a *PolicyError.
func (c *Client) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, policyErr(RuleLength, "URL is %d bytes long, at most %d allowed", len(raw), MaxURLLength)
	}
	if raw == "" {
		return nil, policyErr(RuleScheme, "URL is empty; an absolute %s URL is required", c.schemes())
	}
	for i, r := range raw {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(raw[i:], "\uFFFD"):
			return nil, policyErr(RuleSyntax, "URL is not valid UTF-8 (byte %d)", i)
		case unicode.IsSpace(r):
			return nil, policyErr(RuleWhitespace, "URL contains white space %U at byte %d", r, i)
		case r == '\\':
			return nil, policyErr(RuleBackslash, "URL contains a backslash at byte %d", i)
		case r < 0x20, r >= 0x7f && r <= 0x9f, unicode.Is(unicode.Cf, r):
			return nil, policyErr(RuleControlCharacter, "URL contains control character %U at byte %d", r, i)
		}
	}

	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !validScheme(scheme) {
		return nil, policyErr(RuleScheme, "URL must be absolute and start with %s://", c.schemes())
	}
	switch strings.ToLower(scheme) {
	case "https":
	case "http":
		if !c.cfg.AllowHTTP {
			return nil, policyErr(RuleScheme, "scheme http is not allowed; use https")
		}
	default:
		return nil, policyErr(RuleScheme, "scheme %q is not allowed; use %s", scheme, c.schemes())
	}
	if strings.Contains(raw, "#") {
		return nil, policyErr(RuleFragment, "URL must not contain a fragment (#…)")
	}
	if !strings.HasPrefix(rest, "//") {
		return nil, policyErr(RuleHost, "URL must have a host (%s://host/…)", strings.ToLower(scheme))
	}
	authority := rest[2:]
	if i := strings.IndexAny(authority, "/?"); i >= 0 {
		authority = authority[:i]
	}
	if strings.Contains(authority, "@") {
		return nil, policyErr(RuleUserinfo, "URL must not contain a user name or password; send credentials in headers")
	}
	if strings.Contains(authority, "%") {
		return nil, policyErr(RuleHost, "%%-encoding is not allowed in the host")
	}

	u, err := url.Parse(raw)
	if err != nil {
		msg := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error()
		}
		var ihe url.InvalidHostError
		switch {
		case strings.Contains(msg, "port"):
			return nil, policyErr(RulePort, "invalid port")
		case errors.As(err, &ihe), strings.Contains(msg, "host"), strings.Contains(msg, "IP-literal"):
			return nil, policyErr(RuleHost, "invalid host")
		}
		return nil, policyErr(RuleSyntax, "malformed URL: %s", clip(msg))
	}
	if u.User != nil { // unreachable after the "@" check; kept as a guard
		return nil, policyErr(RuleUserinfo, "URL must not contain a user name or password")
	}
	if u.Fragment != "" || u.Opaque != "" {
		return nil, policyErr(RuleSyntax, "malformed URL")
	}

	if err := c.checkHost(u); err != nil {
		return nil, err
	}
	if name, ok := credentialParam(u.RawQuery); ok {
		return nil, policyErr(RuleCredentialsInQuery,
			"query parameter %q looks like a credential; secrets must not be put in URLs (they end up in logs): send them in headers (custom endpoint headers)",
			clipName(name))
	}
	return u, nil
}

// Query parameter names treated as credentials by CheckURL. A name is
// compared case-insensitively after %-decoding and with everything but
// ASCII letters and digits removed ("API-Key", "api_key" and "apiKey" are
// all "apikey"): it is a credential if it equals one of credentialNames or
// ends with one of credentialSuffixes ("access_token", "client_secret",
// "X-Amz-Signature", "hub.verify_token", "auth[token]", …).
var (
	credentialNames = map[string]bool{
		"key": true, "auth": true, "authorization": true, "sig": true, "jwt": true, "bearer": true,
		"pass": true, "pwd": true, "accesskey": true, "secretkey": true, "privatekey": true,
	}
	credentialSuffixes = []string{
		"token", "secret", "password", "passwd", "apikey", "signature", "credential", "credentials",
	}
)

// CredentialInQuery returns the first query parameter of rawQuery whose
// name looks like a credential (the rule RuleCredentialsInQuery), for URLs
// checked outside CheckURL (inbound sources' destinations).
func CredentialInQuery(rawQuery string) (string, bool) { return credentialParam(rawQuery) }

// credentialParam returns the first query parameter of rawQuery whose name
// looks like a credential. Both "&" and ";" separate parameters (some
// receivers split on ";").
func credentialParam(rawQuery string) (string, bool) {
	for _, part := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		compact := strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
				return r
			case r >= 'A' && r <= 'Z':
				return r + 'a' - 'A'
			}
			return -1
		}, name)
		if compact == "" {
			continue
		}
		if credentialNames[compact] {
			return name, true
		}
		for _, s := range credentialSuffixes {
			if strings.HasSuffix(compact, s) {
				return name, true
			}
		}
	}
	return "", false
}

// clipName bounds a quoted query parameter name in a message.
func clipName(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func (c *Client) schemes() string {
	if c.cfg.AllowHTTP {
		return "https or http"
	}
	return "https"
}

// validScheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1).
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z':
		case i > 0 && (b >= '0' && b <= '9' || b == '+' || b == '-' || b == '.'):
		default:
			return false
		}
	}
	return true
}

func (c *Client) checkHost(u *url.URL) error {
	host := u.Hostname()
	if host == "" {
		return policyErr(RuleHost, "URL must have a host")
	}
	// Port.
	if strings.HasSuffix(u.Host, ":") {
		return policyErr(RulePort, "empty port after \":\"")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) > 5 || n < 1 || n > 65535 {
			return policyErr(RulePort, "port %q is not in 1..65535", p)
		}
	}
	// Literal IP address.
	if strings.HasPrefix(u.Host, "[") || strings.Count(host, ":") > 0 {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return policyErr(RuleHost, "invalid IPv6 address")
		}
		if a.Zone() != "" {
			return policyErr(RuleHost, "IPv6 zones are not allowed")
		}
		return c.checkLiteral(a)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return c.checkLiteral(a)
	}
	// Host name.
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return policyErr(RuleHost, "host name must be 1..253 bytes")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return policyErr(RuleHost, "host name labels must be 1..63 bytes")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return policyErr(RuleHost, "host name labels must not start or end with \"-\"")
		}
		for i := 0; i < len(l); i++ {
			b := l[i]
			if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
				if b >= 0x80 {
					return policyErr(RuleHost, "host name must be ASCII; use the punycode (xn--) form of internationalized names")
				}
				return policyErr(RuleHost, "host name contains %q", string(rune(b)))
			}
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		return policyErr(RuleHost, "host %q looks like an IPv4 address in a non-standard form; write it as a dotted quad", host)
	}
	lower := strings.ToLower(name)
	if !c.cfg.AllowLoopback && (lower == "localhost" || strings.HasSuffix(lower, ".localhost")) {
		return policyErr(RuleBlockedAddress, "localhost is not allowed by the egress policy")
	}
	return nil
}

func (c *Client) checkLiteral(a netip.Addr) error {
	if err := c.checkAddr(a); err != nil {
		if errors.Is(err, errLinkLocalOrMetadata) {
			return policyErr(RuleBlockedAddress, "%s is a link-local or cloud metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, …), which Herald never connects to: not for inbound sources' destinations, not in --dev mode, not through a wider --allow-cidr range", a)
		}
		return policyErr(RuleBlockedAddress, "%s is not allowed by the egress policy (private, loopback, link-local, reserved or metadata range)", a)
	}
	return nil
}

// numericLabel reports whether a final host label would make WHATWG URL
// parsers and getaddrinfo treat the host as an IPv4 address (decimal, octal
// or hex forms such as "2130706433", "0177.1", "0x7f.1").
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}
