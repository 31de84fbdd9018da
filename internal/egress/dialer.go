package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
)

// linkLocalOrMetadata is Herald's one list of link-local and cloud-metadata
// addresses. Every client refuses them, whatever its policy: tenants'
// endpoints, inbound sources' destinations (AllowPrivate), --dev
// (AllowLoopback), and AllowCIDRs ranges that merely contain them
// (0.0.0.0/0, ::/0, fc00::/7, 100.64.0.0/10, 192.0.0.0/24, …). These
// addresses hand out instance credentials, and Herald records what a
// destination answers where an API key can read it back, so reaching one
// would turn a leaked key into stolen cloud credentials. The only exception
// is an operator's explicit choice: an AllowCIDRs range that lies inside one
// of these prefixes (169.254.0.0/16, 169.254.10.0/24, 169.254.169.254/32,
// fe80::/10, …) opens the addresses it covers (see Config.AllowCIDRs).
//
// The ssrf deny list (ssrf.IPv4DeniedPrefixes; for IPv6 everything outside
// 2000::/3) covers every address here except Azure's 168.63.129.16, so
// tenants' endpoints gain nothing but that address from this list; what it
// adds is that no allow list, however wide, reaches these addresses.
var linkLocalOrMetadata = []netip.Prefix{
	// IPv4 link-local (RFC 3927), incl. 169.254.169.254 (the metadata
	// service of AWS, GCP, Azure, OpenStack, DigitalOcean, …),
	// 169.254.170.2 (AWS ECS task credentials) and 169.254.42.42 (Scaleway).
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata (inside CGNAT 100.64.0.0/10)
	netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud metadata (inside 192.0.0.0/24)
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure WireServer / host metadata (a public address)
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS instance metadata over IPv6 (inside fc00::/7)
	netip.MustParsePrefix("fd00:ec2::23/128"),   // AWS EKS Pod Identity agent over IPv6
	netip.MustParsePrefix("fd20:ce::254/128"),   // Google Cloud metadata over IPv6
	netip.MustParsePrefix("fd00:42::42/128"),    // Scaleway metadata over IPv6
}

// errLinkLocalOrMetadata marks a refusal by linkLocalOrMetadata (wrapped
// together with ssrf.ErrProhibitedIP, so it is classified as blocked).
var errLinkLocalOrMetadata = errors.New("link-local or cloud metadata address")

// LinkLocalOrMetadata reports whether p lies inside a link-local or
// cloud-metadata prefix, i.e. whether allowing it (AllowCIDRs) opens such
// addresses. A wider prefix (0.0.0.0/0, fc00::/7) does not: it never opens
// them. IPv4-mapped IPv6 prefixes are taken as the IPv4 prefix, as in New.
func LinkLocalOrMetadata(p netip.Prefix) bool {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if !p.IsValid() {
		return false
	}
	for _, d := range linkLocalOrMetadata {
		if d.Bits() <= p.Bits() && d.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// checkLinkLocalOrMetadata refuses a (already unmapped) if it is a
// link-local or cloud-metadata address that no AllowCIDRs range inside
// linkLocalOrMetadata opens.
func (c *Client) checkLinkLocalOrMetadata(a netip.Addr) error {
	for _, d := range linkLocalOrMetadata {
		if !d.Contains(a) {
			continue
		}
		for _, p := range c.openedLinkLocal {
			if p.Contains(a) {
				return nil
			}
		}
		return fmt.Errorf("%w: %w: %s", ssrf.ErrProhibitedIP, errLinkLocalOrMetadata, a)
	}
	return nil
}

var (
	loopbackV4 = netip.MustParsePrefix("127.0.0.0/8")
	loopbackV6 = netip.MustParsePrefix("::1/128")
)

// nat64 is the well-known NAT64 prefix (RFC 6052 §2.1); an address in it
// carries an IPv4 address in its last 32 bits. nat64Local is the
// local-use translation prefix (RFC 8215), which operators split into more
// specific translation prefixes, typically a /96: an address in it is taken
// to carry an IPv4 address in its last 32 bits too, as in the well-known
// prefix. sixToFour is the 6to4 prefix (RFC 3056); an address in it
// carries an IPv4 address in bits 16..47.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
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
	if err := c.checkLinkLocalOrMetadata(ap.Addr()); err != nil {
		return err
	}
	if err := c.guardian.Safe(network, ap.String(), nil); err != nil {
		return err
	}
	return c.checkEmbedded(ap.Addr())
}

// checkAddr applies the address policy of the dialer to one address.
func (c *Client) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	if err := c.checkOne(a); err != nil {
		return err
	}
	return c.checkEmbedded(a)
}

// checkOne applies the link-local and metadata rule, then the guardian's
// allow and deny lists, to one unmapped address.
func (c *Client) checkOne(a netip.Addr) error {
	if err := c.checkLinkLocalOrMetadata(a); err != nil {
		return err
	}
	return c.guardian.SafeAddr(a)
}

// checkEmbedded re-checks the IPv4 address inside a NAT64 or 6to4 address.
// They are denied by default; if an operator allows 64:ff9b::/96 or
// 64:ff9b:1::/48 for an IPv6-only network (or 2002::/16), or the policy
// allows every address (AllowPrivate), 64:ff9b::7f00:1, 64:ff9b:1::7f00:1
// (or 2002:7f00:1::) must still be judged as 127.0.0.1, and
// 64:ff9b::a9fe:a9fe or 64:ff9b:1::a9fe:a9fe as 169.254.169.254. A
// local-use address is read in the /96 layout (its last 32 bits); the
// shorter layouts of RFC 6052 §2.2 (/48, /56, /64 inside the /48), which
// put the IPv4 address around bits 64..71, are not unpacked.
func (c *Client) checkEmbedded(a netip.Addr) error {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	var v4 netip.Addr
	switch {
	case nat64.Contains(a), nat64Local.Contains(a):
		v4 = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixToFour.Contains(a):
		v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	default:
		return nil
	}
	if err := c.checkOne(v4); err != nil {
		if errors.Is(err, errLinkLocalOrMetadata) {
			return fmt.Errorf("%w: %w: NAT64 or 6to4 address embeds one", ssrf.ErrProhibitedIP, errLinkLocalOrMetadata)
		}
		return fmt.Errorf("%w: NAT64 or 6to4 address embeds a denied IPv4 address", ssrf.ErrProhibitedIP)
	}
	return nil
}
