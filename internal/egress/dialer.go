package egress

import (
	"fmt"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
)

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
