package clientip

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted, err := ParseCIDRs([]string{"10.0.0.0/8,192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	r := New(trusted)
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer: its own address, headers ignored", "203.0.113.9:5555", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer, one hop", "10.1.2.3:5555", []string{"198.51.100.4"}, "198.51.100.4"},
		{"spoofed leftmost entry is not believed", "10.1.2.3:5555", []string{"6.6.6.6, 198.51.100.4"}, "198.51.100.4"},
		{"two trusted proxies are skipped", "10.1.2.3:5555", []string{"198.51.100.4, 192.0.2.7", "10.9.9.9"}, "198.51.100.4"},
		{"all hops trusted: the leftmost", "10.1.2.3:5555", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"no header: the proxy", "10.1.2.3:5555", nil, "10.1.2.3"},
		{"garbage hop: stop at the last trusted one", "10.1.2.3:5555", []string{"198.51.100.4, nonsense"}, "10.1.2.3"},
		{"IPv6 with port", "10.1.2.3:5555", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:5555", []string{"198.51.100.4"}, "198.51.100.4"},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = c.peer
		for _, v := range c.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		got, ok := r.ClientIP(req)
		if !ok || got.String() != c.want {
			t.Errorf("%s: ClientIP = %v, %v; want %s", c.name, got, ok, c.want)
		}
	}
}

func TestParseCIDRsNamesBadValue(t *testing.T) {
	t.Parallel()
	if _, err := ParseCIDRs([]string{"10.0.0.0/8", "10.0.0.0/99"}); err == nil || !contains(err.Error(), "10.0.0.0/99") {
		t.Fatalf("err = %v, want one naming the bad value", err)
	}
}

// TestParseCIDRsRefusesEmpty: an empty --trusted-proxy (or
// HERALD_TRUSTED_PROXY=""), or an empty item of a list, is refused with an
// error naming the value; ranges that trust every address parse, and
// TrustsEveryone picks them out (herald serve warns about them).
func TestParseCIDRsRefusesEmpty(t *testing.T) {
	t.Parallel()
	for _, vals := range [][]string{{""}, {"  "}, {"10.0.0.0/8,"}, {"10.0.0.0/8", ""}} {
		if got, err := ParseCIDRs(vals); err == nil || !contains(err.Error(), "empty value") {
			t.Errorf("ParseCIDRs(%q) = %v, %v; want an error naming the empty value", vals, got, err)
		}
	}
	got, err := ParseCIDRs([]string{"0.0.0.0/0", "::/0", "10.0.0.0/8", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	if every := TrustsEveryone(got); len(every) != 2 || every[0].String() != "0.0.0.0/0" || every[1].String() != "::/0" {
		t.Fatalf("TrustsEveryone = %v, want [0.0.0.0/0 ::/0]", every)
	}
}

func TestMiddlewareRewritesRemoteAddr(t *testing.T) {
	t.Parallel()
	var seen string
	h := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr }))
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "127.0.0.1:4000"
	req.Header.Set("X-Forwarded-For", "198.51.100.4")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if seen != "198.51.100.4:0" {
		t.Fatalf("RemoteAddr = %q", seen)
	}
	// no trusted range: the handler is unchanged
	plain := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if got := New(nil).Middleware(plain); got == nil {
		t.Fatal("nil handler")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
