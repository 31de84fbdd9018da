// Package clientip finds the address of the client behind trusted reverse
// proxies, for logs and per-client throttling.
//
// Rule (the usual right-to-left reading of X-Forwarded-For; see
// RFC 7239 §5.2 for Forwarded's "for=", which carries the same list): when
// the TCP peer is in a trusted range, the X-Forwarded-For entries are read
// from the right (the one the nearest proxy appended) and trusted entries
// are skipped; the first untrusted entry is the client. A peer outside the
// trusted ranges is the client, whatever headers it sends, so a client
// cannot choose its own address by sending X-Forwarded-For. With no
// trusted range configured the headers are ignored.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver resolves client addresses; the zero value trusts no proxy.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns a Resolver trusting proxies in the given ranges.
func New(trusted []netip.Prefix) *Resolver {
	return &Resolver{trusted: trusted}
}

// ParseCIDRs parses --trusted-proxy values ("10.0.0.0/8", "127.0.0.1/32";
// a bare address is a single host; a value may hold several, comma-
// separated, as HERALD_TRUSTED_PROXY does). The error names the bad value;
// an empty value or an empty item of a list ("", "10.0.0.0/8,") is refused,
// since it trusts nothing and most likely lost its address. A range that
// holds every address (0.0.0.0/0, ::/0) is accepted: see TrustsEveryone.
func ParseCIDRs(vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	type item struct{ v, whole string }
	var split []item
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			split = append(split, item{s, v})
		}
	}
	for _, it := range split {
		v := strings.TrimSpace(it.v)
		if v == "" {
			return nil, fmt.Errorf("--trusted-proxy %q: empty value; give a CIDR range such as 10.0.0.0/8 or an IP address (leave the flag and HERALD_TRUSTED_PROXY out to trust no proxy)", it.whole)
		}
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxy %q: not a CIDR range such as 10.0.0.0/8 or an IP address", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// TrustsEveryone returns the ranges of trusted that hold every address
// (prefix length 0: 0.0.0.0/0, ::/0). Trusting them lets any client choose
// its address with X-Forwarded-For (defeating the authentication throttle
// and falsifying logs), so herald serve logs a warning for each.
func TrustsEveryone(trusted []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range trusted {
		if p.Bits() == 0 {
			out = append(out, p)
		}
	}
	return out
}

func (r *Resolver) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the client's address for req (see the package comment).
// ok is false when RemoteAddr does not parse (it is then left alone).
func (r *Resolver) ClientIP(req *http.Request) (addr netip.Addr, ok bool) {
	peer, err := netip.ParseAddrPort(req.RemoteAddr)
	if err != nil {
		host, _, err2 := net.SplitHostPort(req.RemoteAddr)
		if err2 != nil {
			return netip.Addr{}, false
		}
		a, err3 := netip.ParseAddr(host)
		if err3 != nil {
			return netip.Addr{}, false
		}
		peer = netip.AddrPortFrom(a, 0)
	}
	client := peer.Addr().Unmap()
	if !r.isTrusted(client) {
		return client, true
	}
	hops := req.Header.Values("X-Forwarded-For")
	var list []string
	for _, h := range hops {
		list = append(list, strings.Split(h, ",")...)
	}
	for i := len(list) - 1; i >= 0; i-- {
		a, err := parseHop(list[i])
		if err != nil {
			// A hop that does not parse: the chain cannot be followed
			// past it; the last trusted hop is the best answer.
			return client, true
		}
		client = a
		if !r.isTrusted(a) {
			return a, true
		}
	}
	return client, true
}

// parseHop parses one X-Forwarded-For entry: an IP, optionally with a port
// or in brackets.
func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap(), nil
}

// Middleware sets each request's RemoteAddr to the client's address (port
// 0) when the peer is a trusted proxy, so everything after it (throttling,
// logs) sees the client. With no trusted range it returns next unchanged.
func (r *Resolver) Middleware(next http.Handler) http.Handler {
	if r == nil || len(r.trusted) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if a, ok := r.ClientIP(req); ok {
			req.RemoteAddr = netip.AddrPortFrom(a, 0).String()
		}
		next.ServeHTTP(w, req)
	})
}
