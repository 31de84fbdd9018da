package egress

// TestHostileDestinations (issue "Trust", acceptance point 1): hostile URLs
// and address forms are refused at create/update time (CheckURL, exact
// rule) or at dial time (ClassBlocked, no address in the detail), and a
// loopback canary listener sees no connection.
//
// No packet leaves the host: every URL the test lets reach the dialer
// either points at a loopback or unspecified address (where a policy hole
// would show up as a canary hit) or resolves only to addresses the policy
// is first verified to deny, so the dialer's Control hook refuses them
// before connect(2). Host names are resolved by a fake DNS server on
// 127.0.0.1 (Config.Resolver); the system resolver is never asked. The
// "public" address a name answers is played by 127.0.0.2, opened with
// AllowCIDRs 127.0.0.2/32 exactly as an operator would open a range; a real
// public address (93.184.216.34) is only ever returned to an explicit
// lookup, never dialed.

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// --- fake DNS server --------------------------------------------------------

const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
)

// fakeDNS is a minimal authoritative DNS server on 127.0.0.1 (UDP) that
// answers A and AAAA questions from a table; unknown names get NXDOMAIN.
type fakeDNS struct {
	pc      net.PacketConn
	wg      sync.WaitGroup
	mu      sync.Mutex
	zones   map[string]func(qtype uint16) []netip.Addr // lower-case name without the final dot
	queries map[string]int                             // per name, all types
}

func startFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDNS{pc: pc, zones: map[string]func(uint16) []netip.Addr{}, queries: map[string]int{}}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := d.respond(buf[:n]); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		d.wg.Wait()
	})
	return d
}

// set registers static answers for name.
func (d *fakeDNS) set(name string, addrs ...netip.Addr) {
	d.setFunc(name, func(qtype uint16) []netip.Addr { return byType(addrs, qtype) })
}

func (d *fakeDNS) setFunc(name string, f func(qtype uint16) []netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.zones[strings.ToLower(name)] = f
}

// answers returns what name resolves to (both types) without counting a query.
func (d *fakeDNS) answers(name string) []netip.Addr {
	d.mu.Lock()
	f := d.zones[strings.ToLower(name)]
	d.mu.Unlock()
	if f == nil {
		return nil
	}
	return append(f(dnsTypeA), f(dnsTypeAAAA)...)
}

func (d *fakeDNS) queryCount(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.queries[strings.ToLower(name)]
}

func byType(addrs []netip.Addr, qtype uint16) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if (qtype == dnsTypeA && a.Is4()) || (qtype == dnsTypeAAAA && a.Is6()) {
			out = append(out, a)
		}
	}
	return out
}

// respond builds the answer to one query message (RFC 1035 §4.1), or nil
// to drop it.
func (d *fakeDNS) respond(q []byte) []byte {
	if len(q) < 12 || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	i := 12
	var labels []string
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l&0xc0 != 0 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	question := q[12 : i+4]
	name := strings.ToLower(strings.Join(labels, "."))

	d.mu.Lock()
	f, known := d.zones[name]
	d.queries[name]++
	d.mu.Unlock()
	var addrs []netip.Addr
	if known {
		addrs = f(qtype)
	}

	resp := make([]byte, 12, 512)
	copy(resp, q[:2])                 // ID
	resp[2] = 0x80 | 0x04 | q[2]&0x79 // QR, AA, opcode and RD copied
	resp[3] = 0x80                    // RA
	if !known {
		resp[3] |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(resp[4:], 1)
	binary.BigEndian.PutUint16(resp[6:], uint16(len(addrs)))
	resp = append(resp, question...)
	for _, a := range addrs {
		var rdata []byte
		if qtype == dnsTypeA {
			b := a.As4()
			rdata = b[:]
		} else {
			b := a.As16()
			rdata = b[:]
		}
		resp = append(resp, 0xc0, 12) // name: pointer to the question
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // IN
		resp = binary.BigEndian.AppendUint32(resp, 0) // TTL
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
		resp = append(resp, rdata...)
	}
	return resp
}

// resolver returns a pure-Go resolver that sends every DNS query to d,
// whatever /etc/resolv.conf says.
func (d *fakeDNS) resolver() *net.Resolver {
	addr := d.pc.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "udp", addr)
		},
	}
}

// --- canaries -------------------------------------------------------------

// canary is a TCP listener on a loopback address that counts accepted
// connections and closes them at once.
type canary struct {
	ln   net.Listener
	hits atomic.Int64
	wg   sync.WaitGroup
}

func newCanary(t *testing.T, ln net.Listener) *canary {
	c := &canary{ln: ln}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.hits.Add(1) // counted before the close the client would see
			conn.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		c.wg.Wait()
	})
	return c
}

// --- environment ------------------------------------------------------------

// hostileEnv: canaries on 127.0.0.1:port and [::1]:port (if IPv6 loopback
// works), a stand-in "public" HTTP server on 127.0.0.2:port (allowed by
// AllowCIDRs), a fake DNS server, and a client wired to it.
type hostileEnv struct {
	port      string
	canary4   *canary
	canary6   *canary // nil without IPv6 loopback
	public    *httptest.Server
	publicReq atomic.Int64
	mu        sync.Mutex
	redirects map[string]hostileRow // stand-in path -> row
	dns       *fakeDNS
	c         *Client // AllowHTTP, AllowCIDRs 127.0.0.2/32, fake resolver
	prod      *Client // production defaults, fake resolver
}

var publicStandIn = netip.MustParseAddr("127.0.0.2")

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	e := &hostileEnv{redirects: map[string]hostileRow{}}
	v6 := true
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		v6 = false
	} else {
		ln.Close()
	}
	var ln4, lnPub, ln6 net.Listener
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			t.Fatal("no port free on 127.0.0.1, 127.0.0.2 and ::1 at once")
		}
		var err error
		if ln4, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		_, e.port, _ = net.SplitHostPort(ln4.Addr().String())
		if lnPub, err = net.Listen("tcp", net.JoinHostPort(publicStandIn.String(), e.port)); err != nil {
			ln4.Close()
			continue
		}
		if v6 {
			if ln6, err = net.Listen("tcp", "[::1]:"+e.port); err != nil {
				ln4.Close()
				lnPub.Close()
				continue
			}
		}
		break
	}
	e.canary4 = newCanary(t, ln4)
	if ln6 != nil {
		e.canary6 = newCanary(t, ln6)
	}
	e.public = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.publicReq.Add(1)
		e.mu.Lock()
		row, ok := e.redirects[r.URL.Path]
		e.mu.Unlock()
		if ok {
			w.Header().Set("Location", e.expand(row.url))
			w.WriteHeader(row.redirect)
			return
		}
		io.WriteString(w, "public stand-in")
	}))
	e.public.Listener.Close()
	e.public.Listener = lnPub
	e.public.Start()
	t.Cleanup(e.public.Close)

	e.dns = startFakeDNS(t)
	r := e.dns.resolver()
	e.c = newClient(t, Config{
		AllowHTTP:  true,
		AllowCIDRs: []netip.Prefix{netip.PrefixFrom(publicStandIn, 32)},
		Resolver:   r,
		Timeout:    5 * time.Second,
	})
	e.prod = newClient(t, Config{Resolver: r, Timeout: 5 * time.Second})
	return e
}

func (e *hostileEnv) expand(u string) string { return strings.ReplaceAll(u, "{P}", e.port) }

// hits is the number of connections the canaries accepted.
func (e *hostileEnv) hits() int64 {
	n := e.canary4.hits.Load()
	if e.canary6 != nil {
		n += e.canary6.hits.Load()
	}
	return n
}

// isLocal: an address a connection to which stays on this host.
func isLocal(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsUnspecified()
}

// requireSafeAnswers stops the test before dialing a name unless every
// address it resolves to is local (a hole would hit a canary) or denied by
// the policy (so Control refuses it before connect(2)).
func (e *hostileEnv) requireSafeAnswers(t *testing.T, name string) []netip.Addr {
	t.Helper()
	answers := e.dns.answers(name)
	if len(answers) == 0 {
		t.Fatalf("%s: no answers in the fake DNS", name)
	}
	for _, a := range answers {
		if a.Is6() && !a.Is4In6() && isLocal(a) && e.canary6 == nil {
			t.Skipf("%s answers %s but IPv6 loopback is not available", name, a)
		}
		if !isLocal(a) && e.c.checkAddr(a) == nil && a.Unmap() != publicStandIn {
			t.Fatalf("%s answers %s, which the policy allows: refusing to dial a non-local address", name, a)
		}
	}
	return answers
}

// assertBlockedAtDial checks a dial-time refusal: class blocked, the fixed
// detail, and none of the resolved addresses or the port in it.
func (e *hostileEnv) assertBlockedAtDial(t *testing.T, res Result, answers []netip.Addr) {
	t.Helper()
	if res.ErrorClass != ClassBlocked || res.ErrorDetail != blockedDetail || res.StatusCode != 0 {
		t.Fatalf("result = %+v, want class %q with detail %q", res, ClassBlocked, blockedDetail)
	}
	for _, a := range answers {
		for _, s := range []string{a.String(), a.Unmap().String()} {
			if strings.Contains(res.ErrorDetail, s) {
				t.Errorf("detail %q reveals the address %s", res.ErrorDetail, s)
			}
		}
	}
	if strings.Contains(res.ErrorDetail, e.port) {
		t.Errorf("detail %q reveals the port", res.ErrorDetail)
	}
}

// --- the table ----------------------------------------------------------------

// wantDial marks a row accepted by CheckURL (a host name: names are not
// resolved at create/update time) and refused when dialed.
const wantDial = "dial"

type hostileRow struct {
	class string
	url   string // "{P}" is replaced by the canary port
	// want is the exact CheckURL rule that refuses url, or wantDial.
	want string
	// redirect, if non-zero: an allowed server (127.0.0.2) answers this
	// status with Location: url; the client must not follow, and url
	// itself must be refused as want says.
	redirect int
	// special rows run their own scenario.
	special func(t *testing.T, e *hostileEnv)
}

func hostileRows() []hostileRow {
	const (
		BA   = RuleBlockedAddress
		HOST = RuleHost
		CRED = RuleCredentialsInQuery
	)
	return []hostileRow{
		// loopback
		{class: "loopback", url: "http://127.0.0.1:{P}/", want: BA},
		{class: "loopback", url: "http://127.255.255.254:{P}/", want: BA},
		{class: "loopback", url: "https://127.0.0.1:{P}/", want: BA},
		{class: "loopback", url: "http://[::1]:{P}/", want: BA},
		{class: "loopback", url: "http://[0:0:0:0:0:0:0:1]:{P}/", want: BA},
		{class: "loopback", url: "http://loop.test:{P}/", want: wantDial},
		{class: "loopback", url: "http://loop6.test:{P}/", want: wantDial},
		{class: "loopback", url: "http://loopboth.test:{P}/", want: wantDial},
		// private
		{class: "private", url: "http://10.0.0.1/", want: BA},
		{class: "private", url: "http://10.255.255.255:8080/", want: BA},
		{class: "private", url: "http://172.16.0.1/", want: BA},
		{class: "private", url: "http://172.31.255.254/", want: BA},
		{class: "private", url: "http://192.168.0.1/", want: BA},
		{class: "private", url: "http://[fc00::1]/", want: BA},
		{class: "private", url: "http://[fd12:3456:789a::1]/", want: BA},
		{class: "private", url: "http://internal.test:{P}/", want: wantDial},
		{class: "private", url: "http://private172.test:{P}/", want: wantDial},
		// link-local
		{class: "link-local", url: "http://169.254.0.1/", want: BA},
		{class: "link-local", url: "http://[fe80::1]/", want: BA},
		{class: "link-local", url: "http://[fe80::1%25eth0]/", want: HOST},
		{class: "link-local", url: "http://linklocal.test:{P}/", want: wantDial},
		// unspecified (0.0.0.0 and :: reach this host when connected to)
		{class: "unspecified", url: "http://0.0.0.0:{P}/", want: BA},
		{class: "unspecified", url: "http://0.1.2.3/", want: BA},
		{class: "unspecified", url: "http://[::]:{P}/", want: BA},
		{class: "unspecified", url: "http://zero.test:{P}/", want: wantDial},
		// CGNAT
		{class: "cgnat", url: "http://100.64.0.1/", want: BA},
		{class: "cgnat", url: "http://100.127.255.254/", want: BA},
		// IPv4-mapped IPv6
		{class: "ipv4-mapped", url: "http://[::ffff:127.0.0.1]:{P}/", want: BA},
		{class: "ipv4-mapped", url: "http://[::ffff:7f00:1]:{P}/", want: BA},
		{class: "ipv4-mapped", url: "http://[0:0:0:0:0:FFFF:7F00:0001]:{P}/", want: BA},
		{class: "ipv4-mapped", url: "http://[::ffff:10.0.0.1]/", want: BA},
		{class: "ipv4-mapped", url: "http://[::ffff:169.254.169.254]/", want: BA},
		{class: "ipv4-mapped", url: "http://mapped.test:{P}/", want: wantDial},
		{class: "ipv4-mapped", url: "http://mapped-meta.test/", want: wantDial},
		// IPv4-compatible IPv6 (deprecated, outside 2000::/3)
		{class: "ipv4-compatible", url: "http://[::127.0.0.1]:{P}/", want: BA},
		{class: "ipv4-compatible", url: "http://[::7f00:1]:{P}/", want: BA},
		{class: "ipv4-compatible", url: "http://[::10.0.0.1]/", want: BA},
		{class: "ipv4-compatible", url: "http://compat.test:{P}/", want: wantDial},
		// NAT64
		{class: "nat64", url: "http://[64:ff9b::7f00:1]:{P}/", want: BA},
		{class: "nat64", url: "http://[64:ff9b::10.0.0.1]/", want: BA},
		{class: "nat64", url: "http://[64:ff9b::a9fe:a9fe]/", want: BA},
		{class: "nat64", url: "http://[64:ff9b:1::a00:1]/", want: BA}, // local-use prefix (RFC 8215)
		{class: "nat64", url: "http://nat64.test:{P}/", want: wantDial},
		// 6to4 and Teredo
		{class: "6to4", url: "http://[2002:7f00:0001::]:{P}/", want: BA},
		{class: "6to4", url: "http://[2002:a00:1::1]/", want: BA},
		{class: "6to4", url: "http://[2002:a9fe:a9fe::1]/", want: BA},
		{class: "6to4", url: "http://sixtofour.test:{P}/", want: wantDial},
		{class: "teredo", url: "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", want: BA},
		// multicast
		{class: "multicast", url: "http://224.0.0.1/", want: BA},
		{class: "multicast", url: "http://239.255.255.250:1900/", want: BA},
		{class: "multicast", url: "http://[ff02::1]/", want: BA},
		{class: "multicast", url: "http://[ff05::1:3]/", want: BA},
		{class: "multicast", url: "http://multicast.test/", want: wantDial},
		// broadcast
		{class: "broadcast", url: "http://255.255.255.255/", want: BA},
		// reserved
		{class: "reserved", url: "http://240.0.0.1/", want: BA},
		{class: "reserved", url: "http://254.1.2.3/", want: BA},
		{class: "reserved", url: "http://198.18.0.1/", want: BA}, // benchmarking
		// documentation
		{class: "documentation", url: "http://192.0.2.1/", want: BA},
		{class: "documentation", url: "http://198.51.100.7/", want: BA},
		{class: "documentation", url: "http://203.0.113.9/", want: BA},
		{class: "documentation", url: "http://[2001:db8::1]/", want: BA},
		{class: "documentation", url: "http://[3fff::1]/", want: BA},
		// cloud metadata
		{class: "metadata", url: "http://169.254.169.254/latest/meta-data/", want: BA},
		{class: "metadata", url: "http://[fd00:ec2::254]/latest/meta-data/", want: BA},
		{class: "metadata", url: "http://100.100.100.200/latest/meta-data/", want: BA},    // Alibaba
		{class: "metadata", url: "http://168.63.129.16/machine?comp=goalstate", want: BA}, // Azure WireServer
		{class: "metadata", url: "http://192.0.0.192/opc/v2/", want: BA},                  // Oracle
		{class: "metadata", url: "http://meta.test/latest/meta-data/", want: wantDial},
		{class: "metadata", url: "http://metadata.google.internal/computeMetadata/v1/", want: wantDial},
		{class: "metadata", url: "http://ec2v6.test/latest/meta-data/", want: wantDial},
		{class: "metadata", url: "http://alibaba.test/latest/meta-data/", want: wantDial},
		{class: "metadata", url: "http://azure.test/machine", want: wantDial},
		// non-canonical numeric hosts (WHATWG / inet_aton forms)
		{class: "numeric", url: "http://2130706433:{P}/", want: HOST},
		{class: "numeric", url: "http://0x7f000001:{P}/", want: HOST},
		{class: "numeric", url: "http://0X7F000001:{P}/", want: HOST},
		{class: "numeric", url: "http://017700000001:{P}/", want: HOST},
		{class: "numeric", url: "http://127.1:{P}/", want: HOST},
		{class: "numeric", url: "http://127.0.1:{P}/", want: HOST},
		{class: "numeric", url: "http://0x7f.1:{P}/", want: HOST},
		{class: "numeric", url: "http://0177.0.0.1:{P}/", want: HOST},
		{class: "numeric", url: "http://127.000.000.001:{P}/", want: HOST},
		{class: "numeric", url: "http://0:{P}/", want: HOST},
		{class: "numeric", url: "http://0x:{P}/", want: HOST},
		{class: "numeric", url: "http://127.0.0.1.:{P}/", want: HOST},
		{class: "numeric", url: "http://3232235777/", want: HOST},           // 192.168.1.1
		{class: "numeric", url: "http://2852039166/", want: HOST},           // 169.254.169.254
		{class: "numeric", url: "http://0xa9fea9fe/", want: HOST},           // 169.254.169.254
		{class: "numeric", url: "http://0251.0376.0251.0376/", want: HOST},  // 169.254.169.254
		{class: "numeric", url: "http://[127.0.0.1]:{P}/", want: HOST},      // IPv4 in brackets
		{class: "numeric", url: "http://[::ffff:127.1]:{P}/", want: HOST},   // short form inside IPv6
		{class: "numeric", url: "http://[::1]:{P}:80/", want: RulePort},     // two ports
		{class: "numeric", url: "http://127.0.0.1:{P}:80/", want: RulePort}, // two ports
		// userinfo
		{class: "userinfo", url: "http://user:pass@127.0.0.1:{P}/", want: RuleUserinfo},
		{class: "userinfo", url: "http://example.com@127.0.0.1:{P}/", want: RuleUserinfo},
		{class: "userinfo", url: "http://127.0.0.1:{P}@example.com/", want: RuleUserinfo},
		{class: "userinfo", url: "http://@127.0.0.1:{P}/", want: RuleUserinfo},
		{class: "userinfo", url: "http://example.com:80@169.254.169.254/", want: RuleUserinfo},
		// fragment
		{class: "fragment", url: "http://example.com#@127.0.0.1:{P}/", want: RuleFragment},
		{class: "fragment", url: "http://127.0.0.1:{P}/#x", want: RuleFragment},
		// backslash
		{class: "backslash", url: `http://example.com\@127.0.0.1:{P}/`, want: RuleBackslash},
		{class: "backslash", url: `http:\\127.0.0.1:{P}\`, want: RuleBackslash},
		{class: "backslash", url: `http://127.0.0.1:{P}\@example.com/`, want: RuleBackslash},
		// whitespace and control characters
		{class: "whitespace", url: "http://127.0.0.1 :{P}/", want: RuleWhitespace},
		{class: "whitespace", url: "http://example.com /@127.0.0.1:{P}/", want: RuleWhitespace},
		{class: "whitespace", url: "http://example.com/\r\nHost: 127.0.0.1", want: RuleWhitespace},
		{class: "whitespace", url: "\thttp://127.0.0.1:{P}/", want: RuleWhitespace},
		{class: "whitespace", url: "http://127.0.0.1\u3000:{P}/", want: RuleWhitespace},
		{class: "whitespace", url: "http://local\u00a0host:{P}/", want: RuleWhitespace},
		{class: "control", url: "http://127.0.0.1\x00.example.com:{P}/", want: RuleControlCharacter},
		{class: "control", url: "http://loc\u200balhost:{P}/", want: RuleControlCharacter},
		{class: "control", url: "http://localhost\ufeff:{P}/", want: RuleControlCharacter},
		{class: "control", url: "http://exa\u202emple.com/", want: RuleControlCharacter},
		{class: "control", url: "http://127.0.0.1:{P}/\x7f", want: RuleControlCharacter},
		{class: "control", url: "http://127.0.0.1:{P}/\u0085", want: RuleWhitespace}, // NEL is white space
		// localhost names
		{class: "localhost", url: "http://localhost:{P}/", want: BA},
		{class: "localhost", url: "http://LocalHost:{P}/", want: BA},
		{class: "localhost", url: "http://app.localhost:{P}/", want: BA},
		{class: "localhost", url: "http://a.b.LOCALHOST:{P}/", want: BA},
		{class: "localhost trailing dot", url: "http://localhost.:{P}/", want: BA},
		{class: "localhost trailing dot", url: "http://app.localhost.:{P}/", want: BA},
		{class: "localhost trailing dot", url: "http://localhost..:{P}/", want: HOST},
		// credentials in the query
		{class: "credentials_in_query", url: "https://hooks.example.com/in?token=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?secret=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?password=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?api_key=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?key=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?signature=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?auth=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?TOKEN=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?%74oken=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?x=1&Api-Key=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?apiKey=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?access_token=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?client_secret=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?X-Amz-Signature=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?a=1;sig=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?auth[token]=abc", want: CRED},
		{class: "credentials_in_query", url: "https://hooks.example.com/in?password", want: CRED},
		// non-http schemes
		{class: "scheme", url: "file:///etc/passwd", want: RuleScheme},
		{class: "scheme", url: "file://127.0.0.1/etc/passwd", want: RuleScheme},
		{class: "scheme", url: "gopher://127.0.0.1:{P}/_SLAVEOF%20evil", want: RuleScheme},
		{class: "scheme", url: "ftp://127.0.0.1:{P}/", want: RuleScheme},
		{class: "scheme", url: "dict://127.0.0.1:{P}/info", want: RuleScheme},
		{class: "scheme", url: "ldap://127.0.0.1:{P}/", want: RuleScheme},
		{class: "scheme", url: "ws://127.0.0.1:{P}/", want: RuleScheme},
		{class: "scheme", url: "jar:http://127.0.0.1:{P}/x.jar!/", want: RuleScheme},
		{class: "scheme", url: "data:text/plain,hello", want: RuleScheme},
		{class: "scheme", url: "javascript:fetch('//127.0.0.1')", want: RuleScheme},
		{class: "scheme", url: "//127.0.0.1:{P}/", want: RuleScheme},
		{class: "scheme", url: "http:/127.0.0.1:{P}/", want: HOST},
		// URL-encoded tricks
		{class: "url-encoded", url: "http://%31%32%37.0.0.1:{P}/", want: HOST},
		{class: "url-encoded", url: "http://127.0.0.%31:{P}/", want: HOST},
		{class: "url-encoded", url: "http://%6c%6f%63%61%6c%68%6f%73%74:{P}/", want: HOST},
		{class: "url-encoded", url: "http://0x7f%2e1:{P}/", want: HOST},
		{class: "url-encoded", url: "http://[::1%5d:{P}/", want: HOST},
		{class: "url-encoded", url: "http://127.0.0.1%2f@example.com/", want: RuleUserinfo},
		// IDN homographs of localhost / 127.0.0.1
		{class: "idn", url: "http://ｌｏｃａｌｈｏｓｔ:{P}/", want: HOST},                // fullwidth
		{class: "idn", url: "http://loca\u217chost:{P}/", want: HOST},           // small roman numeral fifty
		{class: "idn", url: "http://\u2460\u2461\u2466.0.0.1:{P}/", want: HOST}, // circled digits
		{class: "idn", url: "http://127\u30020\u30020\u30021:{P}/", want: HOST}, // ideographic full stops
		{class: "idn", url: "http://localhost\uff0e:{P}/", want: HOST},          // fullwidth full stop

		// redirects to internal addresses: never followed
		{class: "redirect", url: "http://127.0.0.1:{P}/", want: BA, redirect: http.StatusFound},
		{class: "redirect", url: "http://169.254.169.254/latest/meta-data/iam/security-credentials/", want: BA, redirect: http.StatusFound},
		{class: "redirect", url: "http://[::1]:{P}/", want: BA, redirect: http.StatusTemporaryRedirect},
		{class: "redirect", url: "http://[::ffff:127.0.0.1]:{P}/", want: BA, redirect: http.StatusMovedPermanently},
		{class: "redirect", url: "http://2130706433:{P}/", want: HOST, redirect: http.StatusSeeOther},
		{class: "redirect", url: "http://loop.test:{P}/", want: wantDial, redirect: http.StatusPermanentRedirect},
		{class: "redirect", url: "http://metadata.google.internal/computeMetadata/v1/", want: wantDial, redirect: http.StatusFound},

		// names with several answers, and rebinding
		{class: "mixed answers", url: "http://mixed-private.test:{P}/", want: wantDial},
		{class: "mixed answers", url: "http://mixed.test:{P}/", special: mixedPublicPrivate("mixed.test")},
		{class: "mixed answers", url: "http://mixed6.test:{P}/", special: mixedPublicPrivate("mixed6.test")},
		{class: "rebinding", url: "http://rebind.test:{P}/", special: rebindAfterSuccess},
		{class: "rebinding", url: "http://rebind-public.test:{P}/", special: rebindAfterLookup},
	}
}

// zones fills the fake DNS. 127.0.0.2 stands for a public address.
func (e *hostileEnv) zones() {
	ip := netip.MustParseAddr
	d := e.dns
	d.set("internal.test", ip("10.0.0.1"), ip("fd00::1"))
	d.set("private172.test", ip("172.16.5.4"))
	d.set("loop.test", ip("127.0.0.1"))
	d.set("loop6.test", ip("::1"))
	d.set("loopboth.test", ip("127.0.0.1"), ip("::1"))
	d.set("zero.test", ip("0.0.0.0"))
	d.set("linklocal.test", ip("169.254.10.10"), ip("fe80::1"))
	d.set("meta.test", ip("169.254.169.254"))
	d.set("metadata.google.internal", ip("169.254.169.254"))
	d.set("ec2v6.test", ip("fd00:ec2::254"))
	d.set("alibaba.test", ip("100.100.100.200"))
	d.set("azure.test", ip("168.63.129.16"))
	d.set("mapped.test", ip("::ffff:127.0.0.1"))
	d.set("mapped-meta.test", ip("::ffff:169.254.169.254"))
	d.set("compat.test", ip("::127.0.0.1"))
	d.set("nat64.test", ip("64:ff9b::7f00:1"))
	d.set("sixtofour.test", ip("2002:7f00:1::1"))
	d.set("multicast.test", ip("224.0.0.251"), ip("ff02::fb"))
	d.set("mixed-private.test", ip("10.0.0.1"), ip("127.0.0.1"), ip("::1"), ip("fd00:ec2::254"))
	d.set("mixed.test", ip("127.0.0.1"), publicStandIn)
	d.set("mixed6.test", ip("::1"), publicStandIn)
}

// mixedPublicPrivate: a name answering a denied address (the canary) and an
// allowed one (the public stand-in). The denied answer is refused in
// Control and never connected to; the dialer moves on to the allowed one,
// exactly as it would to a real public address.
func mixedPublicPrivate(name string) func(t *testing.T, e *hostileEnv) {
	return func(t *testing.T, e *hostileEnv) {
		if name == "mixed6.test" && e.canary6 == nil {
			t.Skip("no IPv6 loopback")
		}
		u := e.expand("http://" + name + ":{P}/")
		if _, err := e.c.CheckURL(u); err != nil {
			t.Fatalf("CheckURL(%s) = %v, want accepted (names are checked when dialed)", u, err)
		}
		e.requireSafeAnswers(t, name)
		before := e.publicReq.Load()
		res := e.c.Do(context.Background(), Request{URL: u})
		e.c.CloseIdleConnections()
		if res.ErrorClass != "" || res.StatusCode != 200 || res.Excerpt != "public stand-in" {
			t.Fatalf("result = %+v, want 200 from the allowed address", res)
		}
		if e.publicReq.Load() != before+1 {
			t.Errorf("the allowed address saw %d requests, want 1", e.publicReq.Load()-before)
		}
	}
}

// rebindAfterSuccess: rebind.test answers the allowed stand-in first, then
// 127.0.0.1. The first delivery goes through; after the name rebinds, the
// same URL is refused at dial.
func rebindAfterSuccess(t *testing.T, e *hostileEnv) {
	const name = "rebind.test"
	var aQueries atomic.Int64
	e.dns.setFunc(name, func(qtype uint16) []netip.Addr {
		if qtype != dnsTypeA {
			return nil
		}
		if aQueries.Add(1) == 1 {
			return []netip.Addr{publicStandIn}
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	})
	u := e.expand("http://" + name + ":{P}/")
	if _, err := e.c.CheckURL(u); err != nil {
		t.Fatalf("CheckURL(%s) = %v", u, err)
	}
	res := e.c.Do(context.Background(), Request{URL: u})
	if res.StatusCode != 200 || res.ErrorClass != "" {
		t.Fatalf("before rebinding: %+v, want 200 from the allowed address", res)
	}
	e.c.CloseIdleConnections() // a kept-alive connection would not resolve again
	res = e.c.Do(context.Background(), Request{URL: u})
	e.assertBlockedAtDial(t, res, []netip.Addr{publicStandIn, netip.MustParseAddr("127.0.0.1")})
	if n := aQueries.Load(); n < 2 {
		t.Errorf("%d A queries, want at least 2 (one per delivery)", n)
	}
}

// rebindAfterLookup: rebind-public.test answers a real public address to
// the first query only and 127.0.0.1 afterwards. CheckURL does not resolve
// (it sends no query), so the public answer goes to an explicit lookup, as
// a resolve-then-check validator would make; the delivery is refused at
// dial whatever the name answered before. The public address is never
// dialed: the test stops unless the lookup consumed it.
func rebindAfterLookup(t *testing.T, e *hostileEnv) {
	const name = "rebind-public.test"
	public := netip.MustParseAddr("93.184.216.34")
	var aQueries atomic.Int64
	e.dns.setFunc(name, func(qtype uint16) []netip.Addr {
		if qtype != dnsTypeA {
			return nil
		}
		if aQueries.Add(1) == 1 {
			return []netip.Addr{public}
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	})
	u := e.expand("http://" + name + ":{P}/")
	if _, err := e.c.CheckURL(u); err != nil {
		t.Fatalf("CheckURL(%s) = %v", u, err)
	}
	if n := e.dns.queryCount(name); n != 0 {
		t.Fatalf("CheckURL sent %d DNS queries, want none", n)
	}
	got, err := e.dns.resolver().LookupNetIP(context.Background(), "ip4", name)
	if err != nil || len(got) != 1 || got[0].Unmap() != public {
		t.Fatalf("first lookup = %v, %v; want %s", got, err, public)
	}
	if aQueries.Load() < 1 {
		t.Fatal("the public answer was not consumed by the lookup: not dialing")
	}
	res := e.c.Do(context.Background(), Request{URL: u})
	e.assertBlockedAtDial(t, res, []netip.Addr{public, netip.MustParseAddr("127.0.0.1")})
}

func TestHostileDestinations(t *testing.T) {
	e := newHostileEnv(t)
	e.zones()
	rows := hostileRows()
	if len(rows) < 40 {
		t.Fatalf("%d rows, want at least 40", len(rows))
	}
	e.mu.Lock()
	for i, row := range rows {
		if row.redirect != 0 {
			e.redirects["/redirect/"+strconv.Itoa(i)] = row
		}
	}
	e.mu.Unlock()
	perClass := map[string]int{}
	for i, row := range rows {
		perClass[row.class]++
		name := strconv.Itoa(i) + "_" + row.class
		t.Run(name, func(t *testing.T) {
			before := e.hits()
			defer func() {
				if n := e.hits() - before; n != 0 {
					t.Errorf("%s: the loopback canary accepted %d connections, want 0", row.url, n)
				}
			}()
			switch {
			case row.special != nil:
				row.special(t, e)
			case row.redirect != 0:
				e.checkRedirect(t, "/redirect/"+strconv.Itoa(i), row)
				e.checkRefused(t, e.expand(row.url), row.want)
			default:
				e.checkRefused(t, e.expand(row.url), row.want)
			}
		})
	}
	if n := e.hits(); n != 0 {
		t.Errorf("the loopback canaries accepted %d connections in all, want 0", n)
	}
	classes := make([]string, 0, len(perClass))
	for c := range perClass {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	var sb strings.Builder
	for _, c := range classes {
		sb.WriteString("\n  " + c + ": " + strconv.Itoa(perClass[c]))
	}
	t.Logf("%d hostile rows (IPv6 loopback canary: %v):%s", len(rows), e.canary6 != nil, sb.String())
}

// checkRefused asserts that u is refused: by CheckURL with exactly rule
// want (and then by Do, before any connection), or — want == wantDial, a
// host name — accepted by CheckURL and refused at dial.
func (e *hostileEnv) checkRefused(t *testing.T, u, want string) {
	t.Helper()
	_, err := e.c.CheckURL(u)
	got := ruleOf(err)
	if want == wantDial {
		if got != "" {
			t.Fatalf("CheckURL(%q) = %v; want accepted (a host name), refused at dial", u, err)
		}
		pu, _ := url.Parse(u)
		answers := e.requireSafeAnswers(t, pu.Hostname())
		res := e.c.Do(context.Background(), Request{URL: u})
		e.assertBlockedAtDial(t, res, answers)
		return
	}
	if got != want {
		// Not refused as expected: do not dial it.
		t.Fatalf("CheckURL(%q) rule = %q (%v), want %q", u, got, err, want)
	}
	if _, err := e.prod.CheckURL(u); err == nil {
		t.Errorf("production config accepts %q", u)
	}
	res := e.c.Do(context.Background(), Request{URL: u})
	if res.ErrorClass != ClassBlocked || res.StatusCode != 0 {
		t.Fatalf("Do(%q) = %+v, want blocked", u, res)
	}
	if want == RuleBlockedAddress {
		if res.ErrorDetail != blockedDetail {
			t.Errorf("Do(%q) detail = %q, want %q", u, res.ErrorDetail, blockedDetail)
		}
	} else if !strings.Contains(res.ErrorDetail, "("+want+")") {
		t.Errorf("Do(%q) detail = %q, want it to name rule %s", u, res.ErrorDetail, want)
	}
	if strings.Contains(res.ErrorDetail, "abc") {
		t.Errorf("Do(%q) detail = %q echoes the credential", u, res.ErrorDetail)
	}
	// Defence in depth: an http(s) URL whose literal host is local goes to
	// the dialer too, bypassing CheckURL, and must be refused there.
	pu, perr := url.Parse(u)
	if perr != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
		return
	}
	a, aerr := netip.ParseAddr(pu.Hostname())
	if aerr != nil || !isLocal(a) || (a.Is6() && !a.Is4In6() && e.canary6 == nil) {
		return
	}
	res = e.c.send(context.Background(), time.Now(), Request{URL: u})
	e.assertBlockedAtDial(t, res, []netip.Addr{a})
}

// checkRedirect: an allowed server answers row.redirect with Location:
// row.url; the client reports it and does not follow.
func (e *hostileEnv) checkRedirect(t *testing.T, path string, row hostileRow) {
	t.Helper()
	u := e.public.URL + path
	if _, err := e.c.CheckURL(u); err != nil {
		t.Fatalf("CheckURL(%s) = %v: the redirecting server must be allowed", u, err)
	}
	before := e.publicReq.Load()
	res := e.c.Do(context.Background(), Request{URL: u})
	if res.StatusCode != row.redirect || res.ErrorClass != "" || res.Location != e.expand(row.url) {
		t.Fatalf("result = %+v, want %d with Location %s", res, row.redirect, e.expand(row.url))
	}
	if n := e.publicReq.Load() - before; n != 1 {
		t.Errorf("the redirecting server saw %d requests, want 1", n)
	}
}

// TestHostileRefusedBeforeConnect pins the mechanism the table relies on:
// a denied address fails in Control with the ssrf error (before connect),
// not with a connection error.
func TestHostileRefusedBeforeConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cn := newCanary(t, ln)
	c := newClient(t, Config{AllowHTTP: true})
	d := &net.Dialer{Control: c.control}
	conn, err := d.Dial("tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
		t.Fatal("dial to 127.0.0.1 succeeded")
	}
	if !isBlocked(err) || errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial error = %v, want the egress policy refusal", err)
	}
	if cn.hits.Load() != 0 {
		t.Fatal("the canary saw a connection")
	}
}
