package app_test

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// TestTrustedProxyEverywhereWarns: a --trusted-proxy range holding every
// address (0.0.0.0/0, ::/0) lets any client choose its address, so the
// node logs a WARN naming the range at start; a range of proxies does not.
func TestTrustedProxyEverywhereWarns(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	for _, c := range []struct {
		ranges []string
		warn   bool
	}{
		{[]string{"0.0.0.0/0"}, true},
		{[]string{"10.0.0.0/8", "::/0"}, true},
		{[]string{"10.0.0.0/8", "192.0.2.7/32"}, false},
	} {
		logs := startLogs(t, func(cfg *app.Config) { cfg.TrustedProxies = mustPrefixes(c.ranges) })
		got := strings.Contains(logs, "level=WARN msg=\"--trusted-proxy trusts every address")
		if got != c.warn {
			t.Errorf("--trusted-proxy %v: warned %v, want %v; logs:\n%s", c.ranges, got, c.warn, logs)
		}
		if c.warn && !strings.Contains(logs, "range="+c.ranges[len(c.ranges)-1]) {
			t.Errorf("the warning does not name the range %s:\n%s", c.ranges[len(c.ranges)-1], logs)
		}
	}
}

// startLogs starts a node in --dev mode on a fresh test database with the
// changes of configure, closes it, and returns what it logged.
func startLogs(t *testing.T, configure func(*app.Config)) string {
	t.Helper()
	var logs testutil.SyncBuffer
	db, _ := testDB(t)
	cfg := app.Config{Addr: "127.0.0.1:0", DB: db, APIKey: testAPIKey, Dev: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	configure(&cfg)
	m, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	return logs.String()
}

// mustPrefixes parses CIDR ranges written by a test.
func mustPrefixes(ranges []string) []netip.Prefix {
	var ps []netip.Prefix
	for _, r := range ranges {
		ps = append(ps, netip.MustParsePrefix(r))
	}
	return ps
}
