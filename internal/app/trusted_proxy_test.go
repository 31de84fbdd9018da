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
		var logs testutil.SyncBuffer
		var prefixes []netip.Prefix
		for _, r := range c.ranges {
			prefixes = append(prefixes, netip.MustParsePrefix(r))
		}
		db, _ := testDB(t)
		m, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: db, APIKey: testAPIKey, Dev: true,
			TrustedProxies: prefixes, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		got := strings.Contains(logs.String(), "level=WARN msg=\"--trusted-proxy trusts every address")
		if got != c.warn {
			t.Errorf("--trusted-proxy %v: warned %v, want %v; logs:\n%s", c.ranges, got, c.warn, logs.String())
		}
		if c.warn && !strings.Contains(logs.String(), "range="+c.ranges[len(c.ranges)-1]) {
			t.Errorf("the warning does not name the range %s:\n%s", c.ranges[len(c.ranges)-1], logs.String())
		}
	}
}
