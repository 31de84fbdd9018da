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
//     (Config.AllowLoopback, the --dev mode); inbound sources' destinations
//     use a relaxed policy that allows private addresses
//     (Config.AllowPrivate);
//   - whatever the policy, link-local and cloud-metadata addresses
//     (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, …: the
//     list linkLocalOrMetadata) are refused, at create/update time for a
//     literal IP (CheckURL, rule blocked_address) and at connect time for
//     every address a name resolves to; only an AllowCIDRs range inside
//     them opens them;
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
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

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
	// AllowPrivate permits every address except the link-local and
	// cloud-metadata ones: private ranges, loopback, CGNAT, unique local
	// IPv6, … It is the policy of inbound sources' destinations, which
	// operators set and which are typically internal services
	// (docs/inbound.md). It does not accept the names "localhost" and
	// "*.localhost" in CheckURL; AllowLoopback does.
	AllowPrivate bool
	// AllowCIDRs are ranges explicitly allowed (--allow-cidr); they are
	// checked before the deny list, so they can open otherwise denied
	// ranges such as 10.0.0.0/8. IPv4-mapped IPv6 prefixes
	// (::ffff:a.b.c.d/n, n ≥ 96) are treated as the IPv4 prefix.
	//
	// Link-local and cloud-metadata addresses (LinkLocalOrMetadata) are
	// opened only by a range that lies inside them, such as
	// 169.254.0.0/16 or 169.254.10.0/24: an operator's explicit choice. A
	// range that merely contains them (0.0.0.0/0, ::/0, fc00::/7,
	// 100.64.0.0/10) allows the rest of itself and never them.
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

	// openedLinkLocal are the AllowCIDRs ranges that lie inside a
	// link-local or cloud-metadata prefix (LinkLocalOrMetadata): the only
	// ranges that open such addresses.
	openedLinkLocal []netip.Prefix
}

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
	if cfg.AllowPrivate {
		// Every address; checkLinkLocalOrMetadata still runs first.
		allowV4 = append(allowV4, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
		allowV6 = append(allowV6, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
	}
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
	for _, p := range cidrs {
		if LinkLocalOrMetadata(p) {
			c.openedLinkLocal = append(c.openedLinkLocal, p)
		}
	}
	c.bufs.New = func() any {
		b := make([]byte, cfg.ExcerptBytes)
		return &b
	}
	c.guardian = ssrf.New(
		ssrf.WithAnyPort(),
		ssrf.WithAllowedV4Prefixes(allowV4...),
		ssrf.WithAllowedV6Prefixes(allowV6...),
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
