package app_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/retry"
)

// TestConfigWithDefaults: one meaning of zero per setting. Zero is the
// default for the settings that have one; for the settings that can be
// off (disable-after, retentions, spike alert) zero stays zero, which
// means off, here and in the CLI alike.
func TestConfigWithDefaults(t *testing.T) {
	c := app.Config{}.WithDefaults()
	if c.Addr != app.DefaultAddr || c.DB != app.DefaultDB || c.Workers != app.DefaultWorkers ||
		c.AttemptTimeout != app.DefaultAttemptTimeout || c.MaxPayloadBytes != app.DefaultMaxPayloadBytes ||
		c.Logger == nil || c.Stdout == nil || c.Clock == nil || !slices.Equal(c.RetrySchedule, retry.DefaultSchedule) || c.Catalog != "permissive" {
		t.Errorf("WithDefaults of the zero Config = %+v", c)
	}
	if c.DisableAfter != 0 || c.SucceededRetention != 0 || c.DeadRetention != 0 || c.SpikeThreshold != 0 || c.MaxEndpointsPerTenant != 0 {
		t.Errorf("zero of an off-able setting changed: %+v", c)
	}
	neg := app.Config{DisableAfter: -1, SucceededRetention: -time.Hour, DeadRetention: -1, SpikeThreshold: -1}.WithDefaults()
	if neg.DisableAfter != 0 || neg.SucceededRetention != 0 || neg.DeadRetention != 0 || neg.SpikeThreshold != 0 {
		t.Errorf("negative off-able settings = %+v, want 0 (off)", neg)
	}
	if now := c.Clock.Now(); now.Location() != time.UTC || time.Since(now).Abs() > time.Minute {
		t.Errorf("the default clock says %v, want the wall clock in UTC", now)
	}
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	set := app.Config{Workers: 3, SpikeThreshold: ops.DefaultSpikeThreshold, RetrySchedule: []time.Duration{time.Second}, Clock: fake}.WithDefaults()
	if set.Workers != 3 || set.SpikeThreshold != 10 || !slices.Equal(set.RetrySchedule, []time.Duration{time.Second}) || set.Clock != fake {
		t.Errorf("WithDefaults changed set values: %+v", set)
	}
}

// TestNewRefusesBadConfig: an embedder gets the checks of `herald serve`
// (app.New validates), each error naming the setting and its rule, before
// anything is created.
func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		mod  func(*app.Config)
		want string
	}{
		{func(c *app.Config) { c.EndpointConcurrency = -1 }, "--endpoint-concurrency must be 0 (workers/8) or more"},
		{func(c *app.Config) { c.Workers = -5 }, "--workers must be at least 1"},
		{func(c *app.Config) { c.MaxPayloadBytes = 64 }, "--max-payload-bytes 64: at least 1024 (1 KiB): an event's envelope alone (id, type, tenant, occurred_at) is about 100 bytes, so a smaller cap refuses (413) nearly every publish; it is taken for a mistake (bytes given where KiB were meant)"},
		{func(c *app.Config) { c.MaxPayloadBytes = 2 << 20 }, "--max-payload-bytes 2097152: at most 1032192 (a request body is at most 1 MiB, 16 KiB of a publish's for its envelope; send ids and links, not content)"},
		{func(c *app.Config) { c.Lease = time.Second }, "--lease 1s must be longer than --attempt-timeout 10s (a lease must outlive its attempt)"},
		{func(c *app.Config) { c.HeartbeatInterval = time.Hour }, "--heartbeat-interval 1h0m0s: use 10ms to 1m (a starting node waits 3 intervals before it delivers)"},
		{func(c *app.Config) { c.RetrySchedule = []time.Duration{-time.Second} }, "--retry-schedule: entry 1 is -1s: each delay must be positive and at most 24h0m0s"},
		{func(c *app.Config) { c.RetrySchedule = []time.Duration{time.Second, 2 * time.Second, time.Second} }, "--retry-schedule: entry 3 is 1s: each delay must be at least the one before it (1s after 2s)"},
		{func(c *app.Config) { c.MaxEndpointsPerTenant = -1 }, "--max-endpoints-per-tenant must be 0 (no limit) or more"},
		{func(c *app.Config) { c.BreakerCooldown = -time.Second }, "--breaker-cooldown must be positive"},
		{func(c *app.Config) { c.TLSCertFile = "cert.pem" }, "--tls-cert and --tls-key go together: give both or neither"},
		{func(c *app.Config) { c.Catalog = "loose" }, `--catalog "loose": want permissive or strict`},
		{func(c *app.Config) { c.OperatorTenant = "ops team" }, `--operator-tenant "ops team": a tenant is 1 to 128 letters, digits, _ . : - (as in the API)`},
		{func(c *app.Config) { c.OperatorTenant = "SRC_ops" }, `--operator-tenant "SRC_ops": tenant names starting with src_ (in any case) are reserved for inbound sources`},
		{func(c *app.Config) { c.PublicURL = "herald.example.com" }, `--public-url "herald.example.com": want the absolute base URL clients reach Herald at, https://HOST[:PORT][/PATH], without user information, query or fragment`},
		{func(c *app.Config) { c.PublicURL = "ftp://herald.example.com" }, `--public-url "ftp://herald.example.com": want the absolute base URL clients reach Herald at, https://HOST[:PORT][/PATH], without user information, query or fragment`},
		{func(c *app.Config) { c.PublicURL = "https://herald.example.com/?x=1" }, `--public-url "https://herald.example.com/?x=1": want the absolute base URL clients reach Herald at, https://HOST[:PORT][/PATH], without user information, query or fragment`},
	} {
		dir := t.TempDir()
		cfg := app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(dir, "herald.db")}
		c.mod(&cfg)
		m, err := app.New(context.Background(), cfg)
		if err == nil {
			m.Close()
			t.Errorf("New accepted a config that wants %q", c.want)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("New: %v, want %q", err, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "herald.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("New with a bad config (%s) created the database: %v", c.want, err)
		}
	}
}

// TestSecondProcessOnOneSQLiteFileStopsAtStart: leases live in the claiming
// process's memory on SQLite, so a second node on the same database file is
// refused by app.New with the rule in the error (not left running without
// delivering); once the first node stops, a new one starts.
func TestSecondProcessOnOneSQLiteFileStopsAtStart(t *testing.T) {
	sqliteOnly(t)
	var db string
	first := startHerald(t, func(c *app.Config) { db = c.DB })
	cfg := app.Config{Addr: "127.0.0.1:0", DB: db, APIKey: testAPIKey, Dev: true,
		Logger: slog.New(slog.DiscardHandler)}
	_, err := app.New(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "one process per database file") {
		t.Fatalf("second node on the same file: %v, want the one-process rule", err)
	}
	first.stop()
	m, err := app.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("after the first node stopped: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
