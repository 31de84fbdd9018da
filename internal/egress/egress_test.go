package egress

// These tests only ever connect to loopback addresses (127.0.0.1 / ::1).
// Non-loopback addresses appear only where the egress policy refuses them
// in net.Dialer.Control, i.e. before connect(2): no packet leaves the host.

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// countingServer is an httptest server that counts connections and requests.
type countingServer struct {
	*httptest.Server
	ln       *countingListener
	requests atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.requests.Add(1)
		h(w, r)
	}))
	cs.ln = &countingListener{Listener: s.Listener}
	s.Listener = cs.ln
	s.Start()
	cs.Server = s
	t.Cleanup(s.Close)
	return cs
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// devConfig is the --dev mode: http and loopback allowed.
func devConfig() Config { return Config{AllowHTTP: true, AllowLoopback: true} }

// stallListener accepts connections and never answers.
func stallListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), accepted
}

func TestDo200Excerpt(t *testing.T) {
	// "a" + 2-byte runes: byte 4096 falls in the middle of a rune.
	body := "a" + strings.Repeat("é", 5000)
	var got struct {
		method, ct, ua, custom string
		body                   []byte
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got.method, got.ct, got.ua, got.custom = r.Method, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"), r.Header.Get("X-Event-Id")
		got.body, _ = io.ReadAll(r.Body)
		w.Header().Set("Location", "/ignored-on-2xx")
		io.WriteString(w, body)
	})
	c := newClient(t, devConfig())
	hdr := http.Header{"X-Event-Id": {"evt_1"}, "Content-Type": {"text/plain"}}
	res := c.Do(context.Background(), Request{URL: s.URL + "/hook", Header: hdr, Body: []byte(`{"id":"evt_1"}`)})

	if res.ErrorClass != "" || res.StatusCode != 200 {
		t.Fatalf("result = %+v", res)
	}
	if want := body[:4095]; res.Excerpt != want {
		t.Errorf("excerpt: %d bytes, want the first %d", len(res.Excerpt), len(want))
	}
	if !utf8.ValidString(res.Excerpt) {
		t.Error("excerpt is not valid UTF-8")
	}
	if res.BodyBytes != int64(len(body)) || res.Truncated {
		t.Errorf("BodyBytes = %d, Truncated = %v; want %d, false", res.BodyBytes, res.Truncated, len(body))
	}
	if res.Location != "" {
		t.Errorf("Location reported for a 2xx: %q", res.Location)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %v", res.Duration)
	}
	// A Content-Type given is sent as is (an inbound forward keeps the
	// provider's); User-Agent is added.
	if got.method != "POST" || got.ct != "text/plain" || got.ua != DefaultUserAgent || got.custom != "evt_1" || string(got.body) != `{"id":"evt_1"}` {
		t.Errorf("server saw %+v", got)
	}
	if hdr.Get("Content-Type") != "text/plain" || hdr.Get("User-Agent") != "" {
		t.Errorf("caller's header was modified: %v", hdr)
	}
	// Without one, the body is sent as application/json.
	c.Do(context.Background(), Request{URL: s.URL + "/hook", Header: http.Header{"X-Event-Id": {"evt_2"}}, Body: []byte(`{}`)})
	if got.ct != "application/json" || got.custom != "evt_2" {
		t.Errorf("without a Content-Type the server saw %+v, want application/json", got)
	}

	// a User-Agent in the request wins over the configured one
	c2 := newClient(t, Config{AllowHTTP: true, AllowLoopback: true, UserAgent: "Herald/0.1.0"})
	c2.Do(context.Background(), Request{URL: s.URL})
	if got.ua != "Herald/0.1.0" {
		t.Errorf("configured User-Agent: server saw %q", got.ua)
	}
	c2.Do(context.Background(), Request{URL: s.URL, Header: http.Header{"User-Agent": {"custom"}}})
	if got.ua != "custom" {
		t.Errorf("request User-Agent: server saw %q", got.ua)
	}
}

func TestDoBigBodyTruncated(t *testing.T) {
	const pause = 100 * time.Millisecond
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		time.Sleep(pause)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for range 64 { // 2 MiB; stops when the client hangs up
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c := newClient(t, devConfig())
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != "" || res.StatusCode != 200 {
		t.Fatalf("result = %+v", res)
	}
	if res.BodyBytes != DefaultMaxResponseBytes || !res.Truncated {
		t.Errorf("BodyBytes = %d, Truncated = %v; want %d, true", res.BodyBytes, res.Truncated, DefaultMaxResponseBytes)
	}
	if len(res.Excerpt) != DefaultExcerptBytes {
		t.Errorf("excerpt is %d bytes, want %d", len(res.Excerpt), DefaultExcerptBytes)
	}
	// Duration covers the body read, which could not finish before the pause.
	if res.Duration < pause {
		t.Errorf("Duration = %v, less than the server's pause before the body (%v)", res.Duration, pause)
	}

	// a small cap
	c2 := newClient(t, Config{AllowHTTP: true, AllowLoopback: true, MaxResponseBytes: 100, ExcerptBytes: 10})
	res = c2.Do(context.Background(), Request{URL: s.URL})
	if res.BodyBytes != 100 || !res.Truncated || res.Excerpt != "xxxxxxxxxx" {
		t.Errorf("small cap: %+v", res)
	}
}

func TestDoRedirectNotFollowed(t *testing.T) {
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	redir := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	})
	c := newClient(t, devConfig())
	for _, code := range []int{301, 302, 303, 307, 308} {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", target.URL+"/x")
			w.WriteHeader(code)
		})
		res := c.Do(context.Background(), Request{URL: s.URL})
		if res.StatusCode != code || res.Location != target.URL+"/x" || res.ErrorClass != "" {
			t.Errorf("%d: %+v", code, res)
		}
	}
	// header values are stored as valid, bounded text
	odd := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/caf\xe9/"+strings.Repeat("a", 5000))
		w.Header().Set("Retry-After", "\xff"+strings.Repeat("9", 100))
		w.WriteHeader(http.StatusMovedPermanently)
	})
	res := c.Do(context.Background(), Request{URL: odd.URL})
	if !strings.HasPrefix(res.Location, "/caf\uFFFD/aaa") || len(res.Location) > MaxURLLength || !utf8.ValidString(res.Location) ||
		!strings.HasPrefix(res.RetryAfter, "\uFFFD999") || len(res.RetryAfter) > 64 || !utf8.ValidString(res.RetryAfter) {
		t.Errorf("odd headers: Location %d bytes %.20q, Retry-After %q", len(res.Location), res.Location, res.RetryAfter)
	}

	res = c.Do(context.Background(), Request{URL: redir.URL})
	if res.StatusCode != http.StatusFound || res.ErrorClass != "" {
		t.Fatalf("result = %+v", res)
	}
	if res.Location != target.URL+"/elsewhere" {
		t.Errorf("Location = %q", res.Location)
	}
	if n := target.ln.accepted.Load(); n != 0 {
		t.Errorf("redirect target saw %d connections, want 0", n)
	}
}

func TestDoStatusAndRetryAfter(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/429":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(429)
		case "/503":
			w.Header().Set("Retry-After", "Sat, 01 Mar 2025 12:01:00 GMT")
			w.WriteHeader(503)
		case "/410":
			w.WriteHeader(410)
		case "/binary":
			w.Write([]byte{'o', 'k', 0, 0xff, 0xfe, 'z'})
		}
	})
	c := newClient(t, devConfig())
	tests := []struct {
		path, retryAfter, excerpt string
		code                      int
	}{
		{"/429", "120", "", 429},
		{"/503", "Sat, 01 Mar 2025 12:01:00 GMT", "", 503},
		{"/410", "", "", 410},
		{"/binary", "", "ok\uFFFD\uFFFD\uFFFDz", 200}, // NUL and invalid bytes replaced
	}
	for _, tc := range tests {
		res := c.Do(context.Background(), Request{URL: s.URL + tc.path})
		if res.StatusCode != tc.code || res.RetryAfter != tc.retryAfter || res.ErrorClass != "" {
			t.Errorf("%s: %+v", tc.path, res)
		}
		if tc.excerpt != "" && !strings.HasPrefix(res.Excerpt, tc.excerpt) {
			t.Errorf("%s: excerpt %q, want prefix %q", tc.path, res.Excerpt, tc.excerpt)
		}
		if !utf8.ValidString(res.Excerpt) || strings.ContainsRune(res.Excerpt, 0) || len(res.Excerpt) > DefaultExcerptBytes {
			t.Errorf("%s: unsafe excerpt %q", tc.path, res.Excerpt)
		}
	}
}

func TestDoTimeout(t *testing.T) {
	addr, accepted := stallListener(t)
	c := newClient(t, Config{AllowHTTP: true, AllowLoopback: true, Timeout: 200 * time.Millisecond})
	res := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if res.ErrorClass != ClassTimeout || res.StatusCode != 0 {
		t.Fatalf("result = %+v, want class timeout", res)
	}
	if accepted.Load() == 0 {
		t.Error("the stalled server saw no connection: the timeout did not come from waiting for it")
	}
}

func TestDoBodyTimeout(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-release
	})
	defer close(release) // before s.Close (LIFO with t.Cleanup)
	c := newClient(t, Config{AllowHTTP: true, AllowLoopback: true, Timeout: 200 * time.Millisecond})
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != ClassTimeout || res.StatusCode != 200 || res.Excerpt != "partial" {
		t.Fatalf("result = %+v; want timeout with status 200 and the partial excerpt", res)
	}
}

func TestDoCanceled(t *testing.T) {
	addr, _ := stallListener(t)
	c := newClient(t, devConfig())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := c.Do(ctx, Request{URL: "http://" + addr + "/"})
	if res.ErrorClass != ClassCanceled {
		t.Fatalf("result = %+v, want canceled", res)
	}
	// a caller deadline is a timeout
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res = c.Do(ctx, Request{URL: "http://" + addr + "/"})
	if res.ErrorClass != ClassTimeout {
		t.Fatalf("result = %+v, want timeout", res)
	}
}

func TestDoConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, devConfig())
	res := c.Do(context.Background(), Request{URL: "http://" + addr + "/"})
	if res.ErrorClass != ClassConnectionRefused {
		t.Fatalf("result = %+v, want connection_refused", res)
	}
	if strings.Contains(res.ErrorDetail, "127.0.0.1") {
		t.Errorf("detail leaks the address: %q", res.ErrorDetail)
	}
}

func TestDoConnectionClosed(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // no response at all
	})
	c := newClient(t, devConfig())
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != ClassConnectionReset {
		t.Fatalf("result = %+v, want connection_reset", res)
	}
}

func TestDoMalformedResponse(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		buf.WriteString("NOT HTTP AT ALL\r\n\r\n")
		buf.Flush()
		conn.Close()
	})
	c := newClient(t, devConfig())
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != ClassNetwork {
		t.Fatalf("result = %+v, want network", res)
	}
}

func TestDoBlockedLoopback(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c := newClient(t, Config{AllowHTTP: true}) // no AllowLoopback
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != ClassBlocked || res.ErrorDetail != blockedDetail {
		t.Errorf("Do literal 127.0.0.1: %+v", res)
	}

	// The dialer itself (a host name resolving to loopback, or a URL that
	// slipped past CheckURL): Control refuses before connect(2).
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	for _, u := range []string{s.URL, "http://localhost:" + port + "/"} {
		res := c.send(context.Background(), time.Now(), Request{URL: u})
		if res.ErrorClass != ClassBlocked || res.ErrorDetail != blockedDetail {
			t.Errorf("send %s: %+v", u, res)
		}
	}
	if n := s.ln.accepted.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want 0", n)
	}
}

func TestDoAllowCIDR(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	for _, p := range []string{"127.0.0.1/32", "::ffff:127.0.0.1/128", "127.0.0.0/8"} {
		c := newClient(t, Config{AllowHTTP: true, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix(p)}})
		res := c.Do(context.Background(), Request{URL: s.URL})
		if res.StatusCode != 200 || res.ErrorClass != "" || res.Excerpt != "ok" {
			t.Errorf("AllowCIDRs %s: %+v", p, res)
		}
	}
	// a neighbouring prefix does not open 127.0.0.1
	c := newClient(t, Config{AllowHTTP: true, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	res := c.send(context.Background(), time.Now(), Request{URL: s.URL})
	if res.ErrorClass != ClassBlocked {
		t.Errorf("AllowCIDRs 127.0.0.2/32: %+v", res)
	}
}

func TestProxyFromEnvironmentIgnored(t *testing.T) {
	proxy := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	c := newClient(t, devConfig())
	if c.transport.Proxy != nil {
		t.Fatal("transport has a Proxy function")
	}
	// 192.0.2.1 (TEST-NET-1) is denied by the dialer before connect(2): if
	// the proxy were used, the proxy (loopback, allowed) would see a
	// connection instead.
	res := c.send(context.Background(), time.Now(), Request{URL: "http://192.0.2.1/"})
	if res.ErrorClass != ClassBlocked {
		t.Errorf("result = %+v, want blocked", res)
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	if res := c.Do(context.Background(), Request{URL: s.URL}); res.StatusCode != 200 {
		t.Errorf("direct request: %+v", res)
	}
	if n := proxy.ln.accepted.Load(); n != 0 {
		t.Errorf("proxy saw %d connections, want 0", n)
	}
	if s.requests.Load() != 1 {
		t.Errorf("destination saw %d requests, want 1", s.requests.Load())
	}
}

func TestDoTLSUntrusted(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.Config.ErrorLog = quietLogger()
	t.Cleanup(s.Close)
	c := newClient(t, Config{AllowLoopback: true})
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != ClassTLS || !strings.Contains(res.ErrorDetail, "unknown authority") {
		t.Fatalf("result = %+v, want tls / unknown authority", res)
	}
	// https to a plain HTTP server
	plain := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	res = c.Do(context.Background(), Request{URL: strings.Replace(plain.URL, "http:", "https:", 1)})
	if res.ErrorClass != ClassTLS {
		t.Fatalf("https to plain http: %+v, want tls", res)
	}
}

func TestDoHTTP2AndConnectionReuse(t *testing.T) {
	var protos sync.Map
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		io.WriteString(w, "ok")
	})
	s := httptest.NewUnstartedServer(h)
	ln := &countingListener{Listener: s.Listener}
	s.Listener = ln
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)

	c := newClient(t, Config{AllowLoopback: true})
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	c.transport.TLSClientConfig.RootCAs = pool

	for i := range 5 {
		res := c.Do(context.Background(), Request{URL: s.URL, Body: []byte("{}")})
		if res.StatusCode != 200 || res.ErrorClass != "" {
			t.Fatalf("request %d: %+v", i, res)
		}
	}
	if _, ok := protos.Load("HTTP/2.0"); !ok {
		t.Error("server saw no HTTP/2 request")
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Errorf("HTTP/2: %d connections for 5 requests, want 1", n)
	}

	// HTTP/1.1 keep-alive
	plain := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c1 := newClient(t, devConfig())
	for i := range 10 {
		if res := c1.Do(context.Background(), Request{URL: plain.URL}); res.StatusCode != 200 {
			t.Fatalf("request %d: %+v", i, res)
		}
	}
	if n := plain.ln.accepted.Load(); n != 1 {
		t.Errorf("HTTP/1.1: %d connections for 10 requests, want 1", n)
	}
}

func TestDoURLPolicyAtSendTime(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c := newClient(t, Config{AllowLoopback: true}) // https only
	res := c.Do(context.Background(), Request{URL: s.URL})
	if res.ErrorClass != ClassBlocked || !strings.Contains(res.ErrorDetail, "(scheme)") {
		t.Errorf("http URL with https-only client: %+v", res)
	}
	if s.ln.accepted.Load() != 0 {
		t.Error("server saw a connection")
	}
}

// TestAddressPolicy checks the dialer's address policy directly (no
// connection is made).
func TestAddressPolicy(t *testing.T) {
	c := newClient(t, Config{})
	denied := []string{
		"127.0.0.1", "127.255.255.254", "0.0.0.0", "10.1.2.3", "172.16.0.1", "192.168.1.1",
		"169.254.169.254",               // AWS/GCP/Azure metadata
		"100.64.0.1", "100.100.100.200", // CGNAT, Alibaba metadata
		"192.0.0.192",   // Oracle metadata
		"168.63.129.16", // Azure WireServer
		"224.0.0.1", "255.255.255.255", "240.0.0.1", "198.18.0.1", "192.0.2.1",
		"::1", "::", "fd00:ec2::254", "fc00::1", "fe80::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", // NAT64 forms
		"64:ff9b:1::7f00:1", "64:ff9b:1:ab::a00:1", // local-use NAT64 (RFC 8215)
		"2001::1", "2002:7f00:1::1", "2001:db8::1", // Teredo, 6to4, documentation
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"}
	for _, s := range denied {
		a := netip.MustParseAddr(s)
		if err := c.checkAddr(a); !isBlocked(err) {
			t.Errorf("checkAddr(%s) = %v, want denied", s, err)
		}
		if err := c.control("tcp6", netip.AddrPortFrom(a, 443).String(), nil); !isBlocked(err) {
			t.Errorf("control(%s) = %v, want denied", s, err)
		}
		if _, err := c.CheckURL("https://" + hostLiteral(a) + "/"); ruleOf(err) != RuleBlockedAddress {
			t.Errorf("CheckURL(%s) = %v, want blocked_address", s, err)
		}
	}
	for _, s := range allowed {
		a := netip.MustParseAddr(s)
		if err := c.checkAddr(a); err != nil {
			t.Errorf("checkAddr(%s) = %v, want allowed", s, err)
		}
		if err := c.control("tcp4", netip.AddrPortFrom(a, 8443).String(), nil); err != nil {
			t.Errorf("control(%s:8443) = %v, want allowed (any port)", s, err)
		}
	}
	if err := c.control("udp4", "8.8.8.8:53", nil); !isBlocked(err) {
		t.Errorf("control(udp) = %v, want denied", err)
	}
	if err := c.control("tcp4", "garbage", nil); !isBlocked(err) {
		t.Errorf("control(garbage) = %v, want denied", err)
	}

	// Allowing NAT64 for an IPv6-only network still checks the embedded IPv4.
	n64 := newClient(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")}})
	if err := n64.checkAddr(netip.MustParseAddr("64:ff9b::808:808")); err != nil {
		t.Errorf("NAT64 of 8.8.8.8 with 64:ff9b::/96 allowed: %v", err)
	}
	if err := n64.checkAddr(netip.MustParseAddr("64:ff9b::7f00:1")); !isBlocked(err) {
		t.Errorf("NAT64 of 127.0.0.1 with 64:ff9b::/96 allowed: %v, want denied", err)
	}
	// So does allowing the local-use NAT64 prefix (RFC 8215): its /96
	// translation prefixes carry the IPv4 address in the last 32 bits.
	l64 := newClient(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("64:ff9b:1::/48")}})
	for _, s := range []string{"64:ff9b:1::808:808", "64:ff9b:1:ab::101:101"} {
		if err := l64.checkAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("local-use NAT64 %s with 64:ff9b:1::/48 allowed: %v", s, err)
		}
	}
	for _, s := range []string{"64:ff9b:1::7f00:1", "64:ff9b:1:ab::a00:1", "64:ff9b:1::a9fe:a9fe"} {
		if err := l64.checkAddr(netip.MustParseAddr(s)); !isBlocked(err) {
			t.Errorf("local-use NAT64 %s with 64:ff9b:1::/48 allowed: %v, want denied", s, err)
		}
		if err := l64.control("tcp6", netip.AddrPortFrom(netip.MustParseAddr(s), 443).String(), nil); !isBlocked(err) {
			t.Errorf("control(%s) with 64:ff9b:1::/48 allowed: %v, want denied", s, err)
		}
	}
	// Likewise allowing 6to4 still checks the embedded IPv4 (bits 16..47).
	s64 := newClient(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("2002::/16")}})
	if err := s64.checkAddr(netip.MustParseAddr("2002:808:808::1")); err != nil {
		t.Errorf("6to4 of 8.8.8.8 with 2002::/16 allowed: %v", err)
	}
	for _, s := range []string{"2002:7f00:1::", "2002:a00:1::1", "2002:a9fe:a9fe::1"} {
		if err := s64.checkAddr(netip.MustParseAddr(s)); !isBlocked(err) {
			t.Errorf("6to4 %s with 2002::/16 allowed: %v, want denied", s, err)
		}
	}
	// Loopback mode opens loopback only.
	dev := newClient(t, devConfig())
	for _, s := range []string{"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"} {
		if err := dev.checkAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("dev checkAddr(%s) = %v", s, err)
		}
	}
	for _, s := range []string{"10.0.0.1", "169.254.169.254", "::", "0.0.0.0"} {
		if err := dev.checkAddr(netip.MustParseAddr(s)); err == nil {
			t.Errorf("dev checkAddr(%s) allowed", s)
		}
	}
}

func hostLiteral(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

func ruleOf(err error) string {
	var pe *PolicyError
	if errors.As(err, &pe) {
		return pe.Rule
	}
	if err != nil {
		return "non-policy error: " + err.Error()
	}
	return ""
}

func TestCheckURL(t *testing.T) {
	prod := newClient(t, Config{})
	dev := newClient(t, devConfig())
	cidr := newClient(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	tests := []struct {
		name string
		c    *Client
		in   string
		rule string // "" = accepted
	}{
		{"https", prod, "https://example.com/hooks/herald?x=1", ""},
		{"https port", prod, "https://example.com:8443/", ""},
		{"uppercase scheme and host", prod, "HTTPS://Example.COM/", ""},
		{"trailing dot", prod, "https://example.com./", ""},
		{"underscore label", prod, "https://my_host.example.com/", ""},
		{"punycode", prod, "https://xn--bcher-kva.example/", ""},
		{"public IPv4", prod, "https://8.8.8.8/", ""},
		{"public IPv6", prod, "https://[2606:4700:4700::1111]:443/", ""},
		{"no path", prod, "https://example.com", ""},
		{"non-ASCII path", prod, "https://example.com/ünïcode", ""},
		{"percent-encoded path", prod, "https://example.com/a%20b", ""},
		{"dev http loopback", dev, "http://127.0.0.1:8080/", ""},
		{"dev localhost", dev, "http://localhost:8080/", ""},
		{"dev ::1", dev, "http://[::1]:8080/", ""},
		{"allowed cidr", cidr, "https://10.1.2.3/", ""},
		{"query words that are not credentials", prod, "https://example.com/?page=2&sort=key&keyword=x&monkey=1&author=me&tokens=3", ""},
		{"credential in the value only", prod, "https://example.com/?type=token&q=password", ""},
		{"empty query", prod, "https://example.com/?", ""},
		{"token param", prod, "https://example.com/?token=x", RuleCredentialsInQuery},
		{"encoded api_key", prod, "https://example.com/?api%5Fkey=x", RuleCredentialsInQuery},
		{"hub.verify_token", prod, "https://example.com/?hub.verify_token=x", RuleCredentialsInQuery},
		{"dev too", dev, "http://localhost:8080/?secret=x", RuleCredentialsInQuery},

		{"http refused", prod, "http://example.com/", RuleScheme},
		{"ftp", dev, "ftp://example.com/", RuleScheme},
		{"javascript", prod, "javascript:alert(1)", RuleScheme},
		{"relative", prod, "/hooks", RuleScheme},
		{"scheme-relative", prod, "//example.com/", RuleScheme},
		{"empty", prod, "", RuleScheme},
		{"bad scheme chars", prod, "1https://example.com/", RuleScheme},
		{"no authority", prod, "https:example.com", RuleHost},
		{"empty host", prod, "https:///path", RuleHost},
		{"userinfo", prod, "https://user:pass@example.com/", RuleUserinfo},
		{"user only", prod, "https://token@example.com/", RuleUserinfo},
		{"empty userinfo", prod, "https://@example.com/", RuleUserinfo},
		{"fragment", prod, "https://example.com/#frag", RuleFragment},
		{"empty fragment", prod, "https://example.com/#", RuleFragment},
		{"space", prod, "https://example.com/a b", RuleWhitespace},
		{"tab", prod, "https://example.com/\t", RuleWhitespace},
		{"newline", prod, "https://example.com/\r\nX-Injected: 1", RuleWhitespace},
		{"nbsp", prod, "https://example.com/\u00a0", RuleWhitespace},
		{"leading space", prod, " https://example.com/", RuleWhitespace},
		{"backslash", prod, `https://example.com\@evil.com/`, RuleBackslash},
		{"backslash path", prod, `https://example.com/a\b`, RuleBackslash},
		{"NUL", prod, "https://example.com/\x00", RuleControlCharacter},
		{"DEL", prod, "https://example.com/\x7f", RuleControlCharacter},
		{"C1", prod, "https://example.com/\u0090", RuleControlCharacter},
		{"bidi override", prod, "https://example.com/\u202e", RuleControlCharacter},
		{"zero-width space", prod, "https://exa\u200bmple.com/", RuleControlCharacter},
		{"invalid UTF-8", prod, "https://example.com/\xff", RuleSyntax},
		{"bad escape", prod, "https://example.com/%zz", RuleSyntax},
		{"too long", prod, "https://example.com/" + strings.Repeat("a", MaxURLLength), RuleLength},
		{"port 0", prod, "https://example.com:0/", RulePort},
		{"port too big", prod, "https://example.com:65536/", RulePort},
		{"port letters", prod, "https://example.com:https/", RulePort},
		{"empty port", prod, "https://example.com:/", RulePort},
		{"two ports", prod, "https://example.com:443:80/", RulePort},
		{"loopback literal", prod, "https://127.0.0.1/", RuleBlockedAddress},
		{"metadata", prod, "https://169.254.169.254/latest/meta-data/", RuleBlockedAddress},
		{"IPv6 loopback", prod, "https://[::1]/", RuleBlockedAddress},
		{"mapped loopback", prod, "https://[::ffff:127.0.0.1]/", RuleBlockedAddress},
		{"private", prod, "https://10.0.0.1/", RuleBlockedAddress},
		{"CGNAT", prod, "https://100.64.1.1/", RuleBlockedAddress},
		{"localhost name", prod, "https://localhost/", RuleBlockedAddress},
		{"sub.localhost", prod, "https://app.LOCALHOST./", RuleBlockedAddress},
		{"dev still blocks private", dev, "http://192.168.0.1/", RuleBlockedAddress},
		{"decimal IPv4", prod, "https://2130706433/", RuleHost},
		{"short IPv4", prod, "https://127.1/", RuleHost},
		{"hex IPv4", prod, "https://0x7f.0.0.1/", RuleHost},
		{"octal IPv4", prod, "https://0177.0.0.1/", RuleHost},
		{"percent host", prod, "https://%31%32%37.0.0.1/", RuleHost},
		{"IPv6 zone", prod, "https://[fe80::1%25eth0]/", RuleHost},
		{"bad IPv6", prod, "https://[::g]/", RuleHost},
		{"unclosed bracket", prod, "https://[::1/", RuleHost},
		{"bracketed IPv4", prod, "https://[127.0.0.1]/", RuleHost},
		{"unicode host", prod, "https://bücher.example/", RuleHost},
		{"empty label", prod, "https://a..example.com/", RuleHost},
		{"hyphen label", prod, "https://-a.example.com/", RuleHost},
		{"long label", prod, "https://" + strings.Repeat("a", 64) + ".com/", RuleHost},
		{"bad host char", prod, "https://exa!mple.com/", RuleHost},
		{"dot host", prod, "https://./", RuleHost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.c.CheckURL(tc.in)
			if got := ruleOf(err); got != tc.rule {
				t.Fatalf("CheckURL(%q) rule = %q (%v), want %q", tc.in, got, err, tc.rule)
			}
			if tc.rule == "" && (u == nil || u.Host == "") {
				t.Fatalf("CheckURL(%q) = %v", tc.in, u)
			}
			if err != nil && (u != nil || err.Error() == "") {
				t.Fatalf("CheckURL(%q) = %v, %v", tc.in, u, err)
			}
		})
	}
	// exactly MaxURLLength bytes is fine
	u := "https://example.com/"
	u += strings.Repeat("a", MaxURLLength-len(u))
	if _, err := prod.CheckURL(u); err != nil {
		t.Errorf("URL of %d bytes: %v", len(u), err)
	}
	// messages do not echo secrets from userinfo or the query
	for _, raw := range []string{"https://user:s3cret@example.com/", "https://example.com/?a=1&access_token=s3cret"} {
		_, err := prod.CheckURL(raw)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("CheckURL(%q) = %v: want an error that does not echo the secret", raw, err)
		}
	}
}

func TestNew(t *testing.T) {
	bad := []Config{
		{Timeout: -1},
		{MaxResponseBytes: -1},
		{ExcerptBytes: -1},
		{MaxIdleConnsPerHost: -1},
		{MaxResponseBytes: 10, ExcerptBytes: 11},
		{MaxResponseBytes: 100}, // default excerpt 4 KiB > 100
		{AllowCIDRs: []netip.Prefix{{}}},
		{UserAgent: "Herald\r\nX: y"},
	}
	for _, cfg := range bad {
		if c, err := New(cfg); err == nil {
			c.CloseIdleConnections()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	c := newClient(t, Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")}})
	got := c.Config()
	if got.Timeout != DefaultTimeout || got.MaxResponseBytes != DefaultMaxResponseBytes || got.ExcerptBytes != DefaultExcerptBytes ||
		got.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost || got.UserAgent != DefaultUserAgent ||
		len(got.AllowCIDRs) != 1 || got.AllowCIDRs[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("effective config = %+v", got)
	}
	if c.transport.Proxy != nil || !c.transport.ForceAttemptHTTP2 || c.transport.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost {
		t.Error("transport not configured as required")
	}
}

func TestExcerpt(t *testing.T) {
	tests := []struct {
		in    string
		cut   bool
		limit int
		want  string
	}{
		{"hello", false, 5, "hello"},
		{"hello", true, 5, "hello"},
		{"ab\xc3", true, 3, "ab"},              // cut inside é
		{"ab\xe2\x82", true, 4, "ab"},          // cut inside €
		{"ab\xf0\x9f\x98", true, 5, "ab"},      // cut inside 😀
		{"ab\xc3\xa9", true, 4, "abé"},         // complete
		{"ab\xc3", false, 5, "ab\uFFFD"},       // body really ends there: replaced
		{"a\x00b", false, 3, "a"},              // U+FFFD (3 bytes) would exceed 3 bytes: stop
		{"a\x00b", false, 10, "a\uFFFDb"},      // NUL replaced
		{"a\x00bcdef", false, 7, "a\uFFFDbcd"}, // capped at the limit
		{"\xff\xfe\xfd\xfc", false, 4, "\uFFFD"},
		{"", true, 0, ""},
	}
	for _, tc := range tests {
		got := excerpt([]byte(tc.in), tc.cut, tc.limit)
		if got != tc.want {
			t.Errorf("excerpt(%q, %v, %d) = %q, want %q", tc.in, tc.cut, tc.limit, got, tc.want)
		}
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0) || len(got) > tc.limit {
			t.Errorf("excerpt(%q) = %q is unsafe", tc.in, got)
		}
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/", "http://127.0.0.1:8080/x", "https://user@example.com", "https://[::1]/",
		"https://example.com/#f", "https://2130706433/", "https://[fe80::1%25eth0]/", "HTTPS://EXAMPLE.COM",
		"https://example.com:443/a?b=c", `https://a\b`, "https:example", "https://%41/", "https://a..b/",
		"https://[::ffff:10.0.0.1]:1/", "https://xn--bcher-kva.example/", "https://example.com:/",
		"https://example.com/?page=2&sort=key", "https://example.com/?token=x", "https://localhost./",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	// Every class of TestHostileDestinations (loopback, private, link-local,
	// unspecified, CGNAT, mapped, compatible, NAT64, 6to4, multicast,
	// broadcast, reserved, documentation, metadata, numeric forms,
	// userinfo, fragment, backslash, white space, controls, localhost,
	// credentials in the query, schemes, %-encoding, IDN homographs).
	for _, row := range hostileRows() {
		s := strings.ReplaceAll(row.url, "{P}", "8080")
		f.Add(s, false)
		f.Add(s, true)
	}
	prod, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	dev, err := New(devConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string, isDev bool) {
		c := prod
		if isDev {
			c = dev
		}
		u, err := c.CheckURL(raw)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Rule == "" || u != nil {
				t.Fatalf("CheckURL(%q) = %v, %v", raw, u, err)
			}
			return
		}
		if u.Scheme != "https" && !(isDev && u.Scheme == "http") {
			t.Fatalf("CheckURL(%q) accepted scheme %q", raw, u.Scheme)
		}
		if u.Host == "" || u.Hostname() == "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") || u.Opaque != "" {
			t.Fatalf("CheckURL(%q) accepted %#v", raw, u)
		}
		if len(raw) > MaxURLLength || strings.ContainsAny(raw, " \t\r\n\\\x00") || !utf8.ValidString(raw) {
			t.Fatalf("CheckURL(%q) accepted forbidden characters", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := c.checkAddr(a); err != nil {
				t.Fatalf("CheckURL(%q) accepted a denied address: %v", raw, err)
			}
		} else {
			name := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
			labels := strings.Split(name, ".")
			if numericLabel(labels[len(labels)-1]) {
				t.Fatalf("CheckURL(%q) accepted a numeric IPv4 form", raw)
			}
			if !isDev && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
				t.Fatalf("CheckURL(%q) accepted localhost", raw)
			}
		}
		for k := range u.Query() {
			if _, bad := credentialParam(url.QueryEscape(k)); bad {
				t.Fatalf("CheckURL(%q) accepted credential parameter %q", raw, k)
			}
		}
		// net/http must be able to build a request from it.
		if _, err := http.NewRequest(http.MethodPost, raw, nil); err != nil {
			t.Fatalf("CheckURL(%q) accepted a URL net/http refuses: %v", raw, err)
		}
		// The API stores u.String() and Do checks it again: it must pass too.
		if _, err := c.CheckURL(u.String()); err != nil {
			t.Fatalf("CheckURL(%q) accepted, but not its normalized form %q: %v", raw, u.String(), err)
		}
	})
}

// quietLogger discards the TLS handshake errors the server logs.
func quietLogger() *log.Logger { return log.New(io.Discard, "", 0) }
