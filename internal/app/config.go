package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/retry"
)

// Defaults of the settings whose zero value means "the default"
// (Config.WithDefaults).
const (
	DefaultAddr            = ":8080"
	DefaultDB              = "sqlite:herald.db"
	DefaultAttemptTimeout  = 10 * time.Second
	DefaultWorkers         = 128
	DefaultMaxPayloadBytes = 64 << 10
	// MinPayloadBytes is the smallest MaxPayloadBytes (--max-payload-bytes)
	// accepted, in bytes: below it nearly every publish would be refused.
	MinPayloadBytes = 1 << 10
	// DefaultDisableAfter is `herald serve`'s --disable-after; in Config
	// zero means never.
	DefaultDisableAfter = 5 * 24 * time.Hour
)

// WithDefaults returns c with the zero value of every setting whose zero
// means "the default" replaced by it: Addr, DB, Logger (slog.Default),
// Stdout (io.Discard), RetrySchedule (retry.DefaultSchedule),
// AttemptTimeout, Workers, MaxPayloadBytes, Catalog ("permissive"),
// PersonalData ("auto" becomes ""). Settings defaulted by the package
// that uses them (Lease, the concurrency caps, the breaker, …) stay zero,
// which means their default there. The settings whose zero means off
// (DisableAfter, MaxEndpointsPerTenant, SpikeThreshold, the retentions)
// keep it; a negative value of those is normalized to zero (also off).
// It never fails: validate checks the result.
func (c Config) WithDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DB == "" {
		c.DB = DefaultDB
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if len(c.RetrySchedule) == 0 {
		c.RetrySchedule = retry.DefaultSchedule
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.Catalog == "" {
		c.Catalog = api.CatalogPermissive
	}
	if c.PersonalData == "auto" {
		c.PersonalData = ""
	}
	c.DisableAfter = max(c.DisableAfter, 0)
	c.SucceededRetention = max(c.SucceededRetention, 0)
	c.DeadRetention = max(c.DeadRetention, 0)
	c.SpikeThreshold = max(c.SpikeThreshold, 0)
	return c
}

// validate checks a configuration after WithDefaults: every error names
// the setting by its `herald serve` flag (Config field in the docs of
// Config) and the rule it breaks. New calls it, so an embedder gets the
// checks the CLI gets.
func (c Config) validate() error {
	if c.AttemptTimeout < 0 {
		return errors.New("--attempt-timeout must be positive")
	}
	if c.Workers < 1 {
		return errors.New("--workers must be at least 1")
	}
	if c.MaxPayloadBytes < MinPayloadBytes {
		return fmt.Errorf("--max-payload-bytes %d: at least %d (1 KiB): an event's envelope alone (id, type, tenant, occurred_at) is about 100 bytes, so a smaller cap refuses (413) nearly every publish; it is taken for a mistake (bytes given where KiB were meant)", c.MaxPayloadBytes, MinPayloadBytes)
	}
	if c.MaxPayloadBytes > api.MaxPayloadBytes {
		return fmt.Errorf("--max-payload-bytes %d: at most %d (a request body is at most 1 MiB, 16 KiB of a publish's for its envelope; send ids and links, not content)", c.MaxPayloadBytes, api.MaxPayloadBytes)
	}
	if len(c.RetrySchedule) > retry.MaxScheduleEntries {
		return fmt.Errorf("--retry-schedule: %d entries, at most %d", len(c.RetrySchedule), retry.MaxScheduleEntries)
	}
	for i, d := range c.RetrySchedule {
		if d <= 0 || d > retry.MaxScheduleEntry {
			return fmt.Errorf("--retry-schedule: entry %d is %v: each delay must be positive and at most %v", i+1, d, retry.MaxScheduleEntry)
		}
		if i > 0 && d < c.RetrySchedule[i-1] {
			return fmt.Errorf("--retry-schedule: entry %d is %v: %s (%v after %v)", i+1, d, retry.OrderRule, d, c.RetrySchedule[i-1])
		}
	}
	if c.DisableMinFailures < 0 {
		return fmt.Errorf("--disable-min-failures %d: must be at least 1 (the failed attempts a streak needs, besides lasting --disable-after, to disable an endpoint)", c.DisableMinFailures)
	}
	if c.HeartbeatInterval != 0 && (c.HeartbeatInterval < 10*time.Millisecond || c.HeartbeatInterval > time.Minute) {
		return fmt.Errorf("--heartbeat-interval %v: use 10ms to 1m (a starting node waits 3 intervals before it delivers)", c.HeartbeatInterval)
	}
	if c.Lease != 0 && c.Lease <= c.AttemptTimeout {
		return fmt.Errorf("--lease %v must be longer than --attempt-timeout %v (a lease must outlive its attempt)", c.Lease, c.AttemptTimeout)
	}
	for _, n := range []struct {
		flag, zero string
		v          int
	}{
		{"--endpoint-concurrency", "workers/8", c.EndpointConcurrency},
		{"--tenant-concurrency", "workers/4", c.TenantConcurrency},
		{"--host-concurrency", "workers/2", c.HostConcurrency},
		{"--max-endpoints-per-tenant", "no limit", c.MaxEndpointsPerTenant},
	} {
		if n.v < 0 {
			return fmt.Errorf("%s must be 0 (%s) or more", n.flag, n.zero)
		}
	}
	if c.FanOutChunk < 0 {
		return errors.New("--fanout-chunk must be at least 1")
	}
	if c.BreakerThreshold < 0 {
		return errors.New("--breaker-threshold must be at least 1")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--rescue-interval", c.RescueInterval}, {"--breaker-cooldown", c.BreakerCooldown},
		{"--housekeeping-interval", c.HousekeepingInterval}, {"--dlq-spike-window", c.SpikeWindow},
		{"KeyCheckInterval", c.KeyCheckInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s must be positive", d.flag)
		}
	}
	switch c.Catalog {
	case api.CatalogPermissive, api.CatalogStrict:
	default:
		return fmt.Errorf("--catalog %q: want %s or %s", c.Catalog, api.CatalogPermissive, api.CatalogStrict)
	}
	switch c.PersonalData {
	case "", api.PersonalDataRefuse, api.PersonalDataWarn, api.PersonalDataOff:
	default:
		return fmt.Errorf("--personal-data %q: want auto, %s, %s or %s", c.PersonalData, api.PersonalDataRefuse, api.PersonalDataWarn, api.PersonalDataOff)
	}
	if c.APIKey != "" && len(c.APIKey) < api.MinAdminKeyLength {
		return fmt.Errorf("HERALD_API_KEY is %d characters: an admin key needs at least %d, so it cannot be guessed (make one with: openssl rand -hex 32)", len(c.APIKey), api.MinAdminKeyLength)
	}
	if i := strings.IndexFunc(c.APIKey, func(r rune) bool { return r < 0x21 || r > 0x7e }); i >= 0 {
		// A bearer token is one run of visible characters (RFC 6750 §2.1,
		// b64token); clients trim or split at whitespace, so such a key
		// could never be presented.
		return fmt.Errorf("HERALD_API_KEY has a space, control or non-ASCII character at byte %d: an API key must be visible ASCII characters only (RFC 6750 §2.1); check for a stray space or newline", i)
	}
	if c.OperatorTenant != "" {
		if !api.ValidTenant(c.OperatorTenant) {
			return fmt.Errorf("--operator-tenant %q: a tenant is 1 to 128 letters, digits, _ . : - (as in the API)", c.OperatorTenant)
		}
		if api.IsInternalTenant(c.OperatorTenant) {
			return fmt.Errorf("--operator-tenant %q: tenant names starting with %s (in any case) are reserved for inbound sources", c.OperatorTenant, api.InternalTenantPrefix)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(c.PublicURL, "?") || strings.HasSuffix(c.PublicURL, "#") {
			return fmt.Errorf("--public-url %q: want the absolute base URL clients reach Herald at, https://HOST[:PORT][/PATH], without user information, query or fragment", c.PublicURL)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	return nil
}
