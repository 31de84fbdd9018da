// Package egress is Herald's one HTTP client for every delivery attempt
// (outbound webhooks and inbound forwarding alike). It enforces the
// "endpoint URLs" and "timeout" rows of the contract (docs/contract.md):
//
//   - endpoint URLs are https only (http with AllowHTTP), without userinfo,
//     fragment, whitespace, backslash or control characters, without
//     credentials in the query (token=, api_key=, …: secrets belong in
//     custom endpoint headers), at most 2048 bytes (CheckURL, at
//     create/update time and again before each attempt);
//   - every IP address the client dials is checked at connect time, inside
//     net.Dialer.Control, by an ssrf.Guardian (code.dny.dev/ssrf) against
//     private, loopback, link-local, unspecified, CGNAT, multicast, reserved,
//     documentation, NAT64, 6to4/Teredo, IPv4-mapped and cloud-metadata
//     ranges. Because the check runs on the address actually connected to,
//     after DNS resolution, it is safe against DNS rebinding. Operators
//     may allow CIDRs explicitly (Config.AllowCIDRs) and loopback
//     (Config.AllowLoopback, the --dev mode);
//   - proxies from the environment (HTTP_PROXY, HTTPS_PROXY, …) are
//     ignored, and redirects are never followed (the 3xx answer and its
//     Location are reported instead);
//   - one deadline covers the whole attempt: connect, TLS, response headers
//     and body read (10 s by default); at most 64 KiB of the response body
//     is read and an excerpt of 4 KiB kept.
//
// Do never returns a Go error: every failure is classified into
// Result.ErrorClass, which the retry policy (package retry) consumes.
package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"code.dny.dev/ssrf"
)

// Defaults applied by New to zero Config fields (docs/contract.md,
// "timeout").
const (
	DefaultTimeout             = 10 * time.Second
	DefaultMaxResponseBytes    = 64 << 10 // 64 KiB
	DefaultExcerptBytes        = 4 << 10  // 4 KiB
	DefaultMaxIdleConnsPerHost = 64
	DefaultUserAgent           = "Herald"
)

// MaxURLLength is the longest endpoint URL CheckURL accepts, in bytes.
const MaxURLLength = 2048

// Fixed transport limits (not configurable).
const (
	// maxIdleConns bounds idle connections over all hosts.
	maxIdleConns = 1024
	// idleConnTimeout closes connections unused this long.
	idleConnTimeout = 90 * time.Second
	// maxResponseHeaderBytes bounds the response header block; a receiver
	// has no reason to send more.
	maxResponseHeaderBytes = 64 << 10
	// maxDetail bounds Result.ErrorDetail.
	maxDetail = 200
	// maxRetryAfterLen bounds Result.RetryAfter (an HTTP-date is 29 bytes).
	maxRetryAfterLen = 64
)

// Error classes reported in Result.ErrorClass. Every non-empty class is a
// failed attempt that the retry policy retries.
const (
	// ClassTimeout: the attempt deadline (Config.Timeout, or the caller's
	// context deadline) expired before the response body was read, or a
	// network operation timed out.
	ClassTimeout = "timeout"
	// ClassDNS: the host name could not be resolved.
	ClassDNS = "dns"
	// ClassConnectionRefused: the destination refused the TCP connection.
	ClassConnectionRefused = "connection_refused"
	// ClassConnectionReset: the connection was reset or closed by the
	// destination before a complete response was read.
	ClassConnectionReset = "connection_reset"
	// ClassTLS: the TLS handshake failed (untrusted, expired or mismatched
	// certificate, protocol mismatch, alert from the server, plain HTTP on
	// an https port, …).
	ClassTLS = "tls"
	// ClassBlocked: the egress policy refused the destination: a dialed
	// address is in a denied range, or the URL no longer passes CheckURL
	// (e.g. --allow-http was turned off). No connection was made.
	ClassBlocked = "blocked"
	// ClassNetwork: any other transport failure (unreachable network,
	// malformed HTTP response, …).
	ClassNetwork = "network"
	// ClassCanceled: the caller's context was canceled (e.g. Herald is
	// shutting down). The attempt says nothing about the endpoint and
	// should not count against it.
	ClassCanceled = "canceled"
)

// blockedDetail is the only text ever reported for ClassBlocked: it must
// not reveal resolved addresses or system error text.
const blockedDetail = "destination address is not allowed by the egress policy"

// Config configures a Client. The zero value is the production default:
// https only, no loopback, no extra allowed ranges, 10 s timeout, 64 KiB
// body cap, 4 KiB excerpt.
type Config struct {
	// AllowHTTP permits http:// URLs (--allow-http). Default https only.
	AllowHTTP bool
	// AllowLoopback permits loopback destinations 127.0.0.0/8 and ::1 and
	// the names "localhost" and "*.localhost" (--dev, together with
	// AllowHTTP).
	AllowLoopback bool
	// AllowCIDRs are ranges explicitly allowed (--allow-cidr); they are
	// checked before the deny list, so they can open otherwise denied
	// ranges such as 10.0.0.0/8. IPv4-mapped IPv6 prefixes
	// (::ffff:a.b.c.d/n, n ≥ 96) are treated as the IPv4 prefix.
	AllowCIDRs []netip.Prefix
	// Timeout bounds the whole attempt: connect, TLS, request, response
	// headers and body read. Zero means DefaultTimeout (10 s).
	Timeout time.Duration
	// MaxResponseBytes is how many bytes of the response body are read at
	// most; the rest is not read and the connection is closed. Zero means
	// DefaultMaxResponseBytes (64 KiB).
	MaxResponseBytes int64
	// ExcerptBytes is how many bytes of the body are kept in
	// Result.Excerpt (cut on a UTF-8 boundary). Zero means
	// DefaultExcerptBytes (4 KiB); it must not exceed MaxResponseBytes.
	ExcerptBytes int
	// UserAgent is sent when the request headers carry none, e.g.
	// "Herald/0.1.0". Empty means DefaultUserAgent.
	UserAgent string
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// per destination host. Zero means DefaultMaxIdleConnsPerHost (64).
	MaxIdleConnsPerHost int
	// Resolver, if non-nil, resolves endpoint host names for the dialer
	// instead of net.DefaultResolver. It is meant for tests (a fake DNS
	// server) and special deployments (a dedicated resolver for
	// deliveries). It cannot widen the policy: every address it returns is
	// still checked at connect time like any other.
	Resolver *net.Resolver
}

// Client sends delivery attempts. It holds one shared http.Transport, so
// connections (HTTP/1.1 keep-alive and HTTP/2) are reused across attempts.
// It is safe for concurrent use.
type Client struct {
	cfg       Config
	guardian  *ssrf.Guardian
	transport *http.Transport
	bufs      sync.Pool // *[]byte of len ExcerptBytes, for reading excerpts
}

// extraDeniedV4 are IPv4 ranges denied in addition to ssrf.IPv4DeniedPrefixes
// (which already covers 0/8, 10/8, 100.64/10 CGNAT — incl. Alibaba Cloud's
// 100.100.100.200 metadata —, 127/8, 169.254/16 link-local — incl. the
// 169.254.169.254 metadata service of AWS, GCP, Azure, … —, 172.16/12,
// 192.0.0/24 — incl. Oracle Cloud's 192.0.0.192 —, 192.168/16, 198.18/15,
// documentation ranges, multicast and 240/4).
//
// IPv6 needs nothing extra: ssrf denies everything outside 2000::/3, which
// covers ::1, ::, fc00::/7 (incl. AWS's fd00:ec2::254 metadata), fe80::/10,
// ff00::/8, ::ffff:0:0/96 and 64:ff9b::/96 (NAT64), and inside it denies
// 2001::/23 (incl. Teredo) and 2002::/16 (6to4).
var extraDeniedV4 = []netip.Prefix{
	netip.MustParsePrefix("168.63.129.16/32"), // Azure WireServer / host metadata (a public address)
}

var (
	loopbackV4 = netip.MustParsePrefix("127.0.0.0/8")
	loopbackV6 = netip.MustParsePrefix("::1/128")
)

// New builds a Client from cfg, applying the defaults documented on Config.
// It returns an error for a negative Timeout, MaxResponseBytes,
// ExcerptBytes or MaxIdleConnsPerHost, an ExcerptBytes above
// MaxResponseBytes, an invalid AllowCIDRs prefix, or a UserAgent with
// control characters.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("egress: negative Timeout %v", cfg.Timeout)
	case cfg.MaxResponseBytes < 0:
		return nil, fmt.Errorf("egress: negative MaxResponseBytes %d", cfg.MaxResponseBytes)
	case cfg.ExcerptBytes < 0:
		return nil, fmt.Errorf("egress: negative ExcerptBytes %d", cfg.ExcerptBytes)
	case cfg.MaxIdleConnsPerHost < 0:
		return nil, fmt.Errorf("egress: negative MaxIdleConnsPerHost %d", cfg.MaxIdleConnsPerHost)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.ExcerptBytes == 0 {
		cfg.ExcerptBytes = DefaultExcerptBytes
	}
	if int64(cfg.ExcerptBytes) > cfg.MaxResponseBytes {
		return nil, fmt.Errorf("egress: ExcerptBytes %d exceeds MaxResponseBytes %d", cfg.ExcerptBytes, cfg.MaxResponseBytes)
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	for _, r := range cfg.UserAgent {
		if r < 0x20 || r == 0x7f {
			return nil, fmt.Errorf("egress: UserAgent %q contains a control character", cfg.UserAgent)
		}
	}

	var allowV4, allowV6 []netip.Prefix
	if cfg.AllowLoopback {
		allowV4 = append(allowV4, loopbackV4)
		allowV6 = append(allowV6, loopbackV6)
	}
	cidrs := make([]netip.Prefix, 0, len(cfg.AllowCIDRs))
	for _, p := range cfg.AllowCIDRs {
		if !p.IsValid() {
			return nil, fmt.Errorf("egress: invalid AllowCIDRs prefix %q", p.String())
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if p.Addr().Is4() {
			allowV4 = append(allowV4, p)
		} else {
			allowV6 = append(allowV6, p)
		}
		cidrs = append(cidrs, p)
	}
	cfg.AllowCIDRs = cidrs

	c := &Client{cfg: cfg}
	c.bufs.New = func() any {
		b := make([]byte, cfg.ExcerptBytes)
		return &b
	}
	c.guardian = ssrf.New(
		ssrf.WithAnyPort(),
		ssrf.WithAllowedV4Prefixes(allowV4...),
		ssrf.WithAllowedV6Prefixes(allowV6...),
		ssrf.WithDeniedV4Prefixes(extraDeniedV4...),
	)
	dialer := &net.Dialer{
		Timeout:   cfg.Timeout,
		KeepAlive: 30 * time.Second,
		Control:   c.control,
		Resolver:  cfg.Resolver, // nil: net.DefaultResolver
	}
	c.transport = &http.Transport{
		Proxy:                  nil, // environment proxies are ignored (docs/contract.md "endpoint URLs")
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.Timeout,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		DisableCompression:     true, // the excerpt shows the bytes as sent; no decompression work
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return c, nil
}

// Config returns the effective configuration, with defaults applied (for
// example to publish the running contract at GET /contract).
func (c *Client) Config() Config {
	cfg := c.cfg
	cfg.AllowCIDRs = append([]netip.Prefix(nil), c.cfg.AllowCIDRs...)
	return cfg
}

// CloseIdleConnections closes the idle keep-alive connections of the shared
// transport (at shutdown, and in tests before leak checks). Connections in
// use are not affected.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// nat64 is the well-known NAT64 prefix (RFC 6052); an address in it carries
// an IPv4 address in its last 32 bits. sixToFour is the 6to4 prefix (RFC
// 3056); an address in it carries an IPv4 address in bits 16..47.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// control is the net.Dialer Control hook: it runs for every address the
// client connects to, after DNS resolution and before connect(2), so a
// denied address never sees a packet.
func (c *Client) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ssrf.ErrInvalidHostPort, address)
	}
	// Check IPv4-mapped IPv6 addresses as the IPv4 address they reach.
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if err := c.guardian.Safe(network, ap.String(), nil); err != nil {
		return err
	}
	return c.checkEmbedded(ap.Addr())
}

// checkAddr applies the address policy of the dialer to one address.
func (c *Client) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	if err := c.guardian.SafeAddr(a); err != nil {
		return err
	}
	return c.checkEmbedded(a)
}

// checkEmbedded re-checks the IPv4 address inside a NAT64 or 6to4 address.
// Both are denied by default; if an operator allows 64:ff9b::/96 for an
// IPv6-only network (or 2002::/16), 64:ff9b::7f00:1 (or 2002:7f00:1::)
// must still not reach 127.0.0.1.
func (c *Client) checkEmbedded(a netip.Addr) error {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	var v4 netip.Addr
	switch {
	case nat64.Contains(a):
		v4 = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixToFour.Contains(a):
		v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	default:
		return nil
	}
	if err := c.guardian.SafeAddr(v4); err != nil {
		return fmt.Errorf("%w: NAT64 or 6to4 address embeds a denied IPv4 address", ssrf.ErrProhibitedIP)
	}
	return nil
}

// Request is one delivery attempt to send.
type Request struct {
	// URL is the endpoint URL; it must pass CheckURL.
	URL string
	// Header holds the complete headers to send (signature, event id,
	// custom endpoint headers, …). It is not modified, but it may be sent
	// as is: the caller must not change it until Do returns. The client
	// sets Content-Type: application/json and adds User-Agent if absent
	// (on a copy).
	Header http.Header
	// Body is the request body, the same bytes on every attempt.
	Body []byte
}

// Result is what one attempt produced. Do fills it completely; the attempt
// failed when ErrorClass is non-empty, even if StatusCode is set (the
// response headers arrived but the body could not be read in time).
type Result struct {
	// StatusCode is the HTTP status code, 0 when no response arrived.
	StatusCode int
	// Location is the Location header of a 3xx answer (never followed),
	// "" otherwise; at most MaxURLLength bytes of valid UTF-8.
	Location string
	// RetryAfter is the raw Retry-After header ("" if absent), at most 64
	// bytes of valid UTF-8; see retry.ParseRetryAfter.
	RetryAfter string
	// Excerpt is the first ExcerptBytes of the response body, cut on a
	// UTF-8 boundary. It is always valid UTF-8 without NUL bytes, at most
	// ExcerptBytes long: invalid sequences and NUL are replaced by U+FFFD
	// (so any store, PostgreSQL text included, can keep it as text).
	Excerpt string
	// BodyBytes is how many body bytes were read, at most
	// MaxResponseBytes.
	BodyBytes int64
	// Truncated reports that the body was longer than MaxResponseBytes;
	// the rest was not read.
	Truncated bool
	// Duration is the time from the start of the attempt to the end of the
	// body read (or to the failure).
	Duration time.Duration
	// ErrorClass is "" for a complete HTTP response, else one of the
	// Class* constants: "timeout", "dns", "connection_refused",
	// "connection_reset", "tls", "blocked", "network", "canceled".
	ErrorClass string
	// ErrorDetail is a short, safe, human-readable description of the
	// failure ("" when ErrorClass is ""). It never contains resolved IP
	// addresses or raw system error text; for "blocked" it is always
	// "destination address is not allowed by the egress policy" or names
	// the URL rule that failed.
	ErrorDetail string
}

// Do sends one POST attempt of r and reads the answer. It never returns a Go
// error: every failure is classified into Result.ErrorClass and
// Result.ErrorDetail. The URL is checked with CheckURL first (the
// configuration may have changed since the endpoint was created); a URL
// that fails is reported as "blocked" without any connection attempt.
//
// The attempt is bounded by Config.Timeout and by ctx. If ctx is canceled
// the result has ErrorClass "canceled".
func (c *Client) Do(ctx context.Context, r Request) Result {
	start := time.Now()
	if _, err := c.CheckURL(r.URL); err != nil {
		res := Result{ErrorClass: ClassBlocked, ErrorDetail: blockedDetail}
		var pe *PolicyError
		if errors.As(err, &pe) && pe.Rule != RuleBlockedAddress {
			res.ErrorDetail = clip("endpoint URL refused by the egress policy (" + pe.Rule + "): " + pe.Message)
		}
		res.Duration = time.Since(start)
		return res
	}
	return c.send(ctx, start, r)
}

// send performs the HTTP exchange; r.URL has been checked by the caller.
func (c *Client) send(ctx context.Context, start time.Time, r Request) (res Result) {
	defer func() { res.Duration = time.Since(start) }()

	// A caller's deadline within the timeout already bounds the attempt
	// (the engine sets one per attempt): no second timer then.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > c.cfg.Timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		res.ErrorClass, res.ErrorDetail = ClassBlocked, "endpoint URL cannot be parsed"
		return res
	}
	if ct := r.Header["Content-Type"]; len(ct) == 1 && ct[0] == "application/json" && r.Header.Get("User-Agent") != "" {
		// Nothing to add: send the caller's header as is, without a copy
		// (a copy of the dozen headers of an attempt was ~0.7 KB, 4 % of
		// the bytes a drain allocated per delivery).
		req.Header = r.Header
	} else {
		if r.Header != nil {
			req.Header = r.Header.Clone()
		}
		req.Header.Set("Content-Type", "application/json")
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", c.cfg.UserAgent)
		}
	}

	// The transport itself, not an http.Client: a Client would only add
	// redirect handling, which must never happen here (SSRF: 3xx answers
	// are reported with their Location, not followed), and it copies every
	// request's headers to be ready for a redirect (9 % of the bytes a
	// drain allocated).
	resp, err := c.transport.RoundTrip(req)
	if err != nil {
		res.ErrorClass, res.ErrorDetail = classify(ctx, err, c.cfg.Timeout)
		return res
	}
	defer resp.Body.Close() // unread data is not drained: the connection is closed instead

	res.StatusCode = resp.StatusCode
	// Header values may hold any bytes: store them as bounded, valid text.
	res.RetryAfter = excerpt([]byte(resp.Header.Get("Retry-After")), false, maxRetryAfterLen)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		res.Location = excerpt([]byte(resp.Header.Get("Location")), false, MaxURLLength)
	}

	// Read at most MaxResponseBytes (+1 byte to detect truncation).
	limit := c.cfg.MaxResponseBytes + 1
	if limit < 0 { // MaxResponseBytes == math.MaxInt64
		limit = c.cfg.MaxResponseBytes
	}
	lr := io.LimitReader(resp.Body, limit)
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	buf := *bp
	n, err := io.ReadFull(lr, buf)
	total := int64(n)
	full := err == nil
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	if full {
		var rest int64
		rest, err = io.Copy(io.Discard, lr)
		total += rest
	}
	if total > c.cfg.MaxResponseBytes {
		total, res.Truncated = c.cfg.MaxResponseBytes, true
	}
	res.BodyBytes = total
	res.Excerpt = excerpt(buf[:n], full, c.cfg.ExcerptBytes)
	if err != nil {
		res.ErrorClass, res.ErrorDetail = classify(ctx, err, c.cfg.Timeout)
	}
	return res
}

// excerpt turns the first bytes of a body into safe text: a rune cut by the
// buffer end is dropped (when cut is true), invalid UTF-8 and NUL become
// U+FFFD, and the result is at most limit bytes long (replacement characters
// are 3 bytes wide, so a binary body may lose its tail).
func excerpt(b []byte, cut bool, limit int) string {
	if cut {
		// Drop a trailing incomplete rune (at most utf8.UTFMax-1 bytes).
		for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(limit)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == 0 {
			r = utf8.RuneError
		}
		if sb.Len()+utf8.RuneLen(r) > limit {
			break
		}
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}

func clip(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	s = s[:maxDetail]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// classify maps a transport or body-read error to an error class and a safe
// detail. ctx is the attempt context.
func classify(ctx context.Context, err error, timeout time.Duration) (class, detail string) {
	switch {
	case isBlocked(err):
		return ClassBlocked, blockedDetail
	case errors.Is(err, context.Canceled) || errors.Is(context.Cause(ctx), context.Canceled):
		return ClassCanceled, "attempt canceled before it completed"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ClassTimeout, "no complete response within the attempt timeout (" + timeout.String() + ")"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		switch {
		case dnsErr.IsNotFound:
			return ClassDNS, "DNS lookup failed: no such host"
		case dnsErr.IsTimeout:
			return ClassDNS, "DNS lookup timed out"
		}
		return ClassDNS, "DNS lookup failed"
	}
	if d, ok := tlsDetail(err); ok {
		return ClassTLS, d
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnectionRefused, "connection refused by the destination"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return ClassConnectionReset, "connection reset by the destination"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassConnectionReset, "connection closed by the destination before a complete response"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout, "network operation timed out"
	}
	switch {
	case errors.Is(err, syscall.ENETUNREACH):
		return ClassNetwork, "network unreachable"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return ClassNetwork, "host unreachable"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return ClassNetwork, "network error during " + op.Op
	}
	return ClassNetwork, "transport error (malformed or unexpected HTTP response)"
}

func isBlocked(err error) bool {
	return errors.Is(err, ssrf.ErrProhibitedIP) ||
		errors.Is(err, ssrf.ErrProhibitedPort) ||
		errors.Is(err, ssrf.ErrProhibitedNetwork) ||
		errors.Is(err, ssrf.ErrInvalidHostPort)
}

// tlsDetail recognises TLS handshake failures.
func tlsDetail(err error) (string, bool) {
	var (
		unknownAuth x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalid     x509.CertificateInvalidError
		roots       x509.SystemRootsError
		verify      *tls.CertificateVerificationError
		record      tls.RecordHeaderError
		alert       tls.AlertError
		ech         *tls.ECHRejectionError
		op          *net.OpError
	)
	switch {
	case errors.As(err, &unknownAuth):
		return "TLS: certificate signed by an unknown authority", true
	case errors.As(err, &hostname):
		return "TLS: certificate is not valid for the endpoint host name", true
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return "TLS: certificate has expired or is not yet valid", true
		}
		return "TLS: certificate is invalid", true
	case errors.As(err, &roots):
		return "TLS: system root certificates unavailable", true
	case errors.As(err, &verify):
		return "TLS: certificate verification failed", true
	case errors.Is(err, http.ErrSchemeMismatch):
		return "TLS: the destination answered plain HTTP on an https URL", true
	case errors.As(err, &record):
		return "TLS: the destination did not answer with TLS", true
	case errors.As(err, &alert):
		return "TLS: handshake failed: " + alert.Error(), true
	case errors.As(err, &ech):
		return "TLS: encrypted client hello rejected", true
	case errors.As(err, &op) && op.Op == "remote error":
		// the server sent a TLS alert; op.Err is crypto/tls's alert text
		return clip("TLS: alert from the destination: " + op.Err.Error()), true
	case strings.Contains(err.Error(), "tls: "):
		return "TLS: handshake failed", true
	}
	return "", false
}

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
//     AllowLoopback or AllowCIDRs permit it); "localhost" and
//     "*.localhost" are refused unless AllowLoopback;
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
