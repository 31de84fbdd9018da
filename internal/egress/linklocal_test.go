package egress

// Link-local and cloud-metadata addresses are refused whatever the policy:
// tenants' endpoints, --dev, a wide AllowCIDRs range, and the relaxed
// policy of inbound sources' destinations (AllowPrivate), which allows
// private addresses. Only an AllowCIDRs range inside them opens them.
//
// No packet goes to a link-local or metadata address: the address checks
// below make no connection, and the dial test stops before dialing a name
// unless the policy is first verified to refuse every non-loopback address
// it answers (so the dialer's Control hook refuses it before connect(2)).

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// neverDialed are link-local and cloud-metadata addresses, with the
// IPv4-mapped, NAT64 (well-known and local-use, RFC 8215) and 6to4 forms
// of 169.254.169.254, and the local-use NAT64 form of 100.100.100.200.
var neverDialed = []string{
	"169.254.169.254", "169.254.0.1", "169.254.170.2", "169.254.42.42", "169.254.255.255",
	"fe80::1", "fe80::a9fe:a9fe", "febf:ffff::1",
	"fd00:ec2::254", "fd00:ec2::23", "fd20:ce::254", "fd00:42::42",
	"100.100.100.200", "192.0.0.192", "168.63.129.16",
	"::ffff:169.254.169.254", "::ffff:100.100.100.200",
	"64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1:ffff::6464:64c8", "2002:a9fe:a9fe::1",
}

// privatePolicies allow private (or all) addresses. The second is how
// inbound sources' destinations were configured before AllowPrivate: an
// allow list of every address, which must not open metadata either.
func privatePolicies() map[string]Config {
	all := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	return map[string]Config{
		"AllowPrivate":         {AllowHTTP: true, AllowLoopback: true, AllowPrivate: true},
		"AllowCIDRs 0/0, ::/0": {AllowHTTP: true, AllowLoopback: true, AllowCIDRs: all},
	}
}

func TestLinkLocalAndMetadataRefusedWhateverThePolicy(t *testing.T) {
	policies := privatePolicies()
	policies["production (http allowed)"] = Config{AllowHTTP: true}
	policies["dev"] = devConfig()
	policies["wide AllowCIDRs containing them"] = Config{AllowHTTP: true, AllowCIDRs: []netip.Prefix{
		netip.MustParsePrefix("169.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("168.63.0.0/16"), netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/9"),
		netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("2002::/16"),
	}}
	for name, cfg := range policies {
		c := newClient(t, cfg)
		for _, s := range neverDialed {
			a := netip.MustParseAddr(s)
			err := c.checkAddr(a)
			if !isBlocked(err) {
				t.Errorf("%s: checkAddr(%s) = %v, want refused", name, s, err)
			}
			if err := c.control("tcp6", netip.AddrPortFrom(a, 80).String(), nil); !isBlocked(err) {
				t.Errorf("%s: control(%s) = %v, want refused", name, s, err)
			}
			_, err = c.CheckURL("http://" + hostLiteral(a) + "/latest/meta-data/")
			if ruleOf(err) != RuleBlockedAddress {
				t.Errorf("%s: CheckURL(%s) = %v, want rule %s", name, s, err, RuleBlockedAddress)
				continue
			}
			// Where the policy would otherwise allow the address, the
			// refusal names this rule.
			if _, private := privatePolicies()[name]; private && !strings.Contains(err.Error(), "link-local or cloud metadata address") {
				t.Errorf("%s: CheckURL(%s) = %v, want the link-local or metadata rule named", name, s, err)
			}
		}
	}
}

func TestAllowPrivateKeepsPrivateAddresses(t *testing.T) {
	c := newClient(t, Config{AllowHTTP: true, AllowLoopback: true, AllowPrivate: true})
	for _, s := range []string{
		"10.0.0.5", "172.16.0.1", "192.168.1.1", "127.0.0.1", "::1", "fd00::5", "fc00::1",
		"100.64.0.1", "100.100.100.199", "192.0.0.191", "168.63.129.17", "169.253.255.255", "169.255.0.0",
		"fd00:ec2::253", "fec0::1", "8.8.8.8", "2606:4700:4700::1111", "::ffff:10.0.0.1", "64:ff9b::a00:5",
		"64:ff9b:1::a00:5", "64:ff9b:1::7f00:1",
	} {
		a := netip.MustParseAddr(s)
		if err := c.checkAddr(a); err != nil {
			t.Errorf("checkAddr(%s) = %v, want allowed", s, err)
		}
		if _, err := c.CheckURL("http://" + hostLiteral(a) + "/hook"); err != nil {
			t.Errorf("CheckURL(%s) = %v, want accepted", s, err)
		}
	}
	if _, err := c.CheckURL("http://localhost:8080/hook"); err != nil {
		t.Errorf("CheckURL(localhost) = %v, want accepted", err)
	}
	if len(c.Config().AllowCIDRs) != 0 {
		t.Errorf("AllowPrivate shows in the effective AllowCIDRs: %v", c.Config().AllowCIDRs)
	}
}

// TestAllowCIDRInsideLinkLocalOpensIt: an operator who lists a range inside
// the link-local or metadata prefixes reaches the addresses it covers, and
// only those.
func TestAllowCIDRInsideLinkLocalOpensIt(t *testing.T) {
	for _, c := range []struct {
		cidrs   []string
		private bool
		open    []string
		refused []string
	}{
		{cidrs: []string{"169.254.0.0/16"}, open: []string{"169.254.169.254", "169.254.10.10", "::ffff:169.254.10.10"}, refused: []string{"fe80::1", "fd00:ec2::254", "100.100.100.200"}},
		{cidrs: []string{"169.254.10.0/24"}, open: []string{"169.254.10.10"}, refused: []string{"169.254.169.254", "169.254.11.1"}},
		{cidrs: []string{"::ffff:169.254.169.254/128"}, open: []string{"169.254.169.254"}, refused: []string{"169.254.169.253"}},
		{cidrs: []string{"fe80::/64"}, open: []string{"fe80::1"}, refused: []string{"fe80:1::1", "169.254.1.1"}},
		{cidrs: []string{"fd00:ec2::254/128"}, private: true, open: []string{"fd00:ec2::254", "10.0.0.1"}, refused: []string{"fd00:ec2::23", "169.254.169.254"}},
		{cidrs: []string{"169.254.10.0/24"}, private: true, open: []string{"169.254.10.10", "10.0.0.1"}, refused: []string{"169.254.169.254", "64:ff9b::a9fe:a9fe"}},
	} {
		var cidrs []netip.Prefix
		for _, s := range c.cidrs {
			cidrs = append(cidrs, netip.MustParsePrefix(s))
		}
		cl := newClient(t, Config{AllowHTTP: true, AllowPrivate: c.private, AllowCIDRs: cidrs})
		for _, s := range c.open {
			a := netip.MustParseAddr(s)
			if err := cl.checkAddr(a); err != nil {
				t.Errorf("%v private=%v: checkAddr(%s) = %v, want allowed", c.cidrs, c.private, s, err)
			}
			if _, err := cl.CheckURL("http://" + hostLiteral(a) + "/"); err != nil {
				t.Errorf("%v private=%v: CheckURL(%s) = %v, want accepted", c.cidrs, c.private, s, err)
			}
		}
		for _, s := range c.refused {
			if err := cl.checkAddr(netip.MustParseAddr(s)); !isBlocked(err) {
				t.Errorf("%v private=%v: checkAddr(%s) = %v, want refused", c.cidrs, c.private, s, err)
			}
		}
	}
	for p, want := range map[string]bool{
		"169.254.0.0/16": true, "169.254.169.254/32": true, "fe80::/10": true, "fe80::1/128": true,
		"fd00:ec2::254/128": true, "100.100.100.200/32": true, "::ffff:169.254.0.0/112": true,
		"169.0.0.0/8": false, "0.0.0.0/0": false, "::/0": false, "fc00::/7": false, "fd00:ec2::/32": false,
		"100.64.0.0/10": false, "100.100.100.0/24": false, "10.0.0.0/8": false, "fe80::/9": false,
	} {
		if got := LinkLocalOrMetadata(netip.MustParsePrefix(p)); got != want {
			t.Errorf("LinkLocalOrMetadata(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestRelaxedPolicyRefusesMetadataAtDial: with the relaxed policy of
// inbound sources' destinations, a host name is accepted by CheckURL (names
// are not resolved then) and refused when dialed if it resolves to a
// link-local or metadata address; a name resolving to a loopback address
// (a private service) is reached.
func TestRelaxedPolicyRefusesMetadataAtDial(t *testing.T) {
	e := newHostileEnv(t)
	ip := netip.MustParseAddr
	e.dns.set("meta.test", ip("169.254.169.254"))
	e.dns.set("metadata.google.internal", ip("169.254.169.254"))
	e.dns.set("ecs.test", ip("169.254.170.2"))
	e.dns.set("linklocal.test", ip("169.254.10.10"), ip("fe80::1"))
	e.dns.set("ec2v6.test", ip("fd00:ec2::254"))
	e.dns.set("gcpv6.test", ip("fd20:ce::254"))
	e.dns.set("alibaba.test", ip("100.100.100.200"))
	e.dns.set("oracle.test", ip("192.0.0.192"))
	e.dns.set("azure.test", ip("168.63.129.16"))
	e.dns.set("mapped-meta.test", ip("::ffff:169.254.169.254"))
	e.dns.set("nat64-meta.test", ip("64:ff9b::a9fe:a9fe"))
	e.dns.set("nat64-local-meta.test", ip("64:ff9b:1::a9fe:a9fe")) // local-use NAT64 (RFC 8215)
	e.dns.set("sixtofour-meta.test", ip("2002:a9fe:a9fe::1"))
	e.dns.set("internal.test", publicStandIn)                          // a private service, played by 127.0.0.2
	e.dns.set("mixed-meta.test", ip("169.254.169.254"), publicStandIn) // the metadata answer is skipped

	for name, cfg := range privatePolicies() {
		cfg.Resolver = e.dns.resolver()
		cfg.Timeout = 5 * time.Second
		c := newClient(t, cfg)
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			for _, host := range []string{"meta.test", "metadata.google.internal", "ecs.test", "linklocal.test", "ec2v6.test",
				"gcpv6.test", "alibaba.test", "oracle.test", "azure.test", "mapped-meta.test", "nat64-meta.test", "nat64-local-meta.test", "sixtofour-meta.test"} {
				u := e.expand("http://" + host + ":{P}/latest/meta-data/")
				if _, err := c.CheckURL(u); err != nil {
					t.Errorf("CheckURL(%s) = %v, want accepted (names are checked when dialed)", u, err)
					continue
				}
				answers := e.dns.answers(host)
				safe := true
				for _, a := range answers {
					if !isLocal(a) && c.checkAddr(a) == nil {
						t.Errorf("%s answers %s, which the policy allows: not dialing it", host, a)
						safe = false
					}
				}
				if !safe {
					continue
				}
				before := e.hits()
				res := c.Do(context.Background(), Request{URL: u})
				e.assertBlockedAtDial(t, res, answers)
				if n := e.hits() - before; n != 0 {
					t.Errorf("%s: the loopback canary accepted %d connections", host, n)
				}
			}
			// A literal address stored before this rule existed is refused
			// before each attempt, without a connection.
			for _, s := range []string{"169.254.169.254", "fe80::1", "fd00:ec2::254"} {
				a := netip.MustParseAddr(s)
				if c.checkAddr(a) == nil {
					t.Errorf("the policy allows %s: not sending to it", s)
					continue
				}
				res := c.Do(context.Background(), Request{URL: "http://" + hostLiteral(a) + "/latest/meta-data/"})
				if res.ErrorClass != ClassBlocked || res.ErrorDetail != blockedDetail || res.StatusCode != 0 {
					t.Errorf("Do(%s) = %+v, want class %q with detail %q", s, res, ClassBlocked, blockedDetail)
				}
			}
			for _, host := range []string{"internal.test", "mixed-meta.test"} {
				for _, a := range e.dns.answers(host) {
					if !isLocal(a) && c.checkAddr(a) == nil {
						t.Fatalf("%s answers %s, which the policy allows: not dialing it", host, a)
					}
				}
				before := e.publicReq.Load()
				res := c.Do(context.Background(), Request{URL: e.expand("http://" + host + ":{P}/hook")})
				c.CloseIdleConnections()
				if res.ErrorClass != "" || res.StatusCode != 200 || res.Excerpt != "public stand-in" {
					t.Errorf("%s: result = %+v, want 200 from the private service", host, res)
				}
				if n := e.publicReq.Load() - before; n != 1 {
					t.Errorf("%s: the private service saw %d requests, want 1", host, n)
				}
			}
		})
	}
}

// TestLinkLocalRefusalIsBlocked: the refusal is the ssrf error (classified
// blocked, no retry) and is recognisable as this rule.
func TestLinkLocalRefusalIsBlocked(t *testing.T) {
	c := newClient(t, Config{AllowPrivate: true})
	err := c.control("tcp4", "169.254.169.254:80", nil)
	if !isBlocked(err) || !errors.Is(err, errLinkLocalOrMetadata) {
		t.Fatalf("control(169.254.169.254:80) = %v, want the link-local or metadata refusal", err)
	}
	if class, detail := classify(context.Background(), err, time.Second); class != ClassBlocked || detail != blockedDetail {
		t.Errorf("classify = %q %q, want %q %q", class, detail, ClassBlocked, blockedDetail)
	}
}
