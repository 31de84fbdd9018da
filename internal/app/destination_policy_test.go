package app_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
)

// TestSourceDestinationPolicy: the server checks sources' destinations
// with the client that forwards to them. Private and loopback destinations
// are accepted, link-local and metadata ones refused (the harness runs in
// --dev mode), and an --allow-cidr range inside 169.254.0.0/16, an
// operator's explicit choice, opens that range and nothing more.
func TestSourceDestinationPolicy(t *testing.T) {
	t.Parallel()
	h := startHerald(t, func(c *app.Config) { c.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24")} })
	for dest, want := range map[string]int{
		"http://10.0.0.5/hook":                     201,
		"http://127.0.0.1:8080/hook":               201,
		"http://[fd00::5]/hook":                    201,
		"http://169.254.10.10/hook":                201,
		"http://169.254.169.254/latest/meta-data/": 422,
		"http://169.254.11.1/hook":                 422,
		"http://[fe80::1]/hook":                    422,
		"http://[fd00:ec2::254]/latest/meta-data/": 422,
		"http://100.100.100.200/latest/meta-data/": 422,
	} {
		st, raw := h.call("POST", "/v1/sources", `{"name":"s","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"`+dest+`"}`, nil)
		if st != want {
			t.Errorf("destination %s: %d %s; want %d", dest, st, raw, want)
		} else if want == 422 && !strings.Contains(string(raw), "link-local or cloud metadata address") {
			t.Errorf("destination %s: %s; want the link-local or metadata rule named", dest, raw)
		}
	}
}

// TestAllowCIDRInsideLinkLocalWarns: an --allow-cidr range inside the
// link-local or metadata prefixes opens them to every endpoint, so the
// node logs a WARN naming it at start; a wider range, which does not open
// them, and a private range do not.
func TestAllowCIDRInsideLinkLocalWarns(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	for _, c := range []struct {
		ranges []string
		warn   bool
	}{
		{[]string{"10.0.0.0/8", "169.254.0.0/16"}, true},
		{[]string{"fd00:ec2::254/128"}, true},
		{[]string{"0.0.0.0/0", "::/0", "100.64.0.0/10"}, false},
		{[]string{"10.0.0.0/8"}, false},
	} {
		logs := startLogs(t, func(cfg *app.Config) { cfg.AllowCIDRs = mustPrefixes(c.ranges) })
		got := strings.Contains(logs, "level=WARN msg=\"--allow-cidr opens link-local or cloud metadata addresses")
		if got != c.warn {
			t.Errorf("--allow-cidr %v: warned %v, want %v; logs:\n%s", c.ranges, got, c.warn, logs)
		}
		if c.warn && !strings.Contains(logs, "range="+c.ranges[len(c.ranges)-1]) {
			t.Errorf("the warning does not name the range %s:\n%s", c.ranges[len(c.ranges)-1], logs)
		}
	}
}
