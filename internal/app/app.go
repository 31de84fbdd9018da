// Package app wires Herald together: it opens the store, builds the egress
// client, the delivery engine and the API, and runs them until the context
// ends. cmd/herald only parses flags into Config; end-to-end tests drive the
// same Main.
package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/buildinfo"
	"github.com/herald-webhooks/herald/internal/clientip"
	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/console"
	"github.com/herald-webhooks/herald/internal/delivery"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/ops"
	"github.com/herald-webhooks/herald/internal/redact"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
	"github.com/herald-webhooks/herald/internal/tlsreload"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// Version is Herald's version (buildinfo.Version); attempts are sent with
// User-Agent buildinfo.UserAgent(): "Herald/<Version> (<commit>)".
var Version = buildinfo.Version

// Config is the running configuration of `herald serve`. Every field has a
// flag and a HERALD_* environment twin (cmd/herald).
//
// Each setting has one meaning of zero, the same on the command line, here
// and in the package that uses it: "the default" (WithDefaults, or the
// package's own default where a field says so), or, for DisableAfter,
// MaxEndpointsPerTenant, SpikeThreshold and the retentions, "off". New
// applies WithDefaults and refuses a configuration that breaks a rule
// (validate), as the CLI does.
type Config struct {
	// Addr is the listen address of the API; default ":8080".
	Addr string
	// DB selects the store: "sqlite:herald.db" (default) or a file path.
	DB string
	// APIKey is an admin API key given in the configuration
	// (HERALD_API_KEY), at least 32 characters (api.MinAdminKeyLength);
	// accepted besides the keys stored in the database (herald keys
	// create). When empty and no key is stored, one admin key is
	// generated on the first start, stored hashed and printed once to
	// Stdout.
	APIKey string
	// EncryptionKey is HERALD_ENCRYPTION_KEY: standard base64 of 32 bytes,
	// the AES-256-GCM key that encrypts endpoint secrets at rest. When
	// empty in embedded mode, the key is read from (or created in) the file
	// "<database path>.key" with mode 0600, and a warning is logged.
	EncryptionKey string
	// PreviousEncryptionKeys are HERALD_ENCRYPTION_KEY_PREVIOUS (comma-
	// separated, same format): values sealed with them still open while
	// `herald rekey` moves them to EncryptionKey; new values are sealed
	// with EncryptionKey only (secretbox.Keyring).
	PreviousEncryptionKeys []string
	// Dev allows http:// endpoint URLs and loopback destinations, for local
	// work only.
	Dev bool
	// AllowHTTP allows http:// endpoint URLs.
	AllowHTTP bool
	// AllowCIDRs are destination ranges allowed despite the SSRF deny list.
	AllowCIDRs []netip.Prefix
	// RetrySchedule holds the upper bounds of the delays before attempts
	// 2..N; default retry.DefaultSchedule (8 attempts, ~35 h).
	RetrySchedule []time.Duration
	// AttemptTimeout bounds one attempt; default 10 s.
	AttemptTimeout time.Duration
	// Workers is the number of attempts in flight at once; default 128.
	Workers int
	// Lease overrides the claim lease (default 2 × AttemptTimeout + 5 s).
	Lease time.Duration
	// RescueInterval overrides how often expired leases are rescued
	// (default 5 s).
	RescueInterval time.Duration
	// HeartbeatInterval is the time between a node's heartbeats on a store
	// that several nodes share (PostgreSQL); default 1 s. See
	// delivery.Config.Membership.
	HeartbeatInterval time.Duration
	// KeyCheckInterval is how long /readyz keeps the result of checking
	// that the store's key check value still opens with this node's
	// encryption key (after herald rekey to a key this node lacks, every
	// publish fails, so the node is not ready); default 10 s.
	KeyCheckInterval time.Duration
	// MaxPayloadBytes caps the delivered body; default 65536.
	MaxPayloadBytes int
	// Catalog is "permissive" (default: uncatalogued event types are
	// published as they are) or "strict" (they are refused with 422).
	Catalog string
	// PersonalData is the personal-data guard's mode for every event
	// type: "refuse", "warn" or "off"; "" refuses for catalogued types and
	// warns for uncatalogued ones (docs/contract.md, "Thin payloads").
	PersonalData string
	// EndpointConcurrency caps attempts in flight per endpoint until it has
	// proven fast; default Workers/8.
	EndpointConcurrency int
	// TenantConcurrency and HostConcurrency cap attempts in flight per
	// tenant and per destination host to endpoints that have not proven
	// fast; defaults Workers/4 and Workers/2 (delivery.Config).
	TenantConcurrency int
	HostConcurrency   int
	// MaxEndpointsPerTenant refuses creating an endpoint past this many in
	// its tenant (422); 0 = no limit.
	MaxEndpointsPerTenant int
	// FanOutChunk is the most deliveries one transaction creates: a
	// publish to more endpoints writes the first chunk and the engine the
	// rest, one chunk per transaction; default store.DefaultFanOutChunk.
	FanOutChunk int
	// BreakerThreshold and BreakerCooldown configure the per-endpoint
	// circuit breaker; defaults 5 failures and 30 s.
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// DisableAfter disables an endpoint whose every attempt failed for this
	// long; 0 (or negative) never disables (`herald serve`:
	// DefaultDisableAfter, 5 days).
	DisableAfter time.Duration
	// DisableMinFailures is the least number of failed attempts a streak
	// needs, besides lasting DisableAfter, to disable an endpoint; default
	// 10.
	DisableMinFailures int
	// OperatorTenant also receives every operational event.
	OperatorTenant string
	// PublicURL is the base URL clients reach Herald at, for the links it
	// hands out (portal sessions); default: each request's scheme and host.
	PublicURL string
	// SpikeThreshold dead letters of one endpoint within SpikeWindow raise
	// endpoint.dead_letter_spike; SpikeThreshold 0 (or negative) turns the
	// alert off (`herald serve`: ops.DefaultSpikeThreshold, 10); SpikeWindow
	// default 15 minutes.
	SpikeThreshold int
	SpikeWindow    time.Duration
	// SucceededRetention and DeadRetention bound the history kept; 0 (or
	// negative) keeps forever (`herald serve`: ops.DefaultSucceededRetention
	// and ops.DefaultDeadRetention, 7 and 30 days).
	SucceededRetention time.Duration
	DeadRetention      time.Duration
	// HousekeepingInterval is the period of the housekeeping rounds
	// (operational events, spikes, retention); default 5 s.
	HousekeepingInterval time.Duration
	// TLSCertFile and TLSKeyFile (PEM) make the API serve HTTPS (TLS 1.2+,
	// HTTP/2); both or neither. The files are read again when they change
	// (checked at each handshake) or on Main.ReloadTLS (SIGHUP).
	TLSCertFile string
	TLSKeyFile  string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed for the client address of throttling and logs
	// (internal/clientip); none by default.
	TrustedProxies []netip.Prefix
	// Logger; default a text logger on Stderr. Records logged under an
	// active span carry trace_id and span_id (tracing.LogHandler).
	Logger *slog.Logger
	// TracerProvider records the spans of publishes, attempts and the
	// inbound gateway. Nil: the one the standard OTEL_* environment
	// variables ask for (tracing.FromEnv), else tracing off.
	TracerProvider trace.TracerProvider
	// Stdout receives the one-time generated API key.
	Stdout io.Writer
	// Clock is the time of the whole node: the times the API, the inbound
	// gateway and the engine stamp, the engine's schedule (due times,
	// leases, the poll, the rescuer, the fan-out loop; not the cluster
	// heartbeats, which keep to the wall clock), the
	// housekeeping rounds (operational events, spikes, retention) and the
	// age of the store gauges. Nil (WithDefaults): clock.System(), the
	// wall clock in UTC. Tests set a clock.Fake and advance it instead of
	// sleeping; not a flag.
	Clock clock.Clock
}

// Main is a running Herald node.
type Main struct {
	cfg     Config
	metrics *metrics.Metrics
	ops     *ops.Housekeeper
	gateway *inbound.Gateway
	trusted *egress.Client
	store   store.Store
	engine  *delivery.Engine
	api     *api.Server
	egress  *egress.Client
	ln      net.Listener
	srv     *http.Server
	tls     *tlsreload.Reloader
	log     *slog.Logger
	tracer  *tracing.Tracer
	// traces is the provider built from the environment (nil otherwise):
	// Close flushes and stops it.
	traces *tracing.Provider
	closed sync.Once
	// box is the node's keyring (HERALD_ENCRYPTION_KEY or the key file,
	// plus HERALD_ENCRYPTION_KEY_PREVIOUS), kept for the readiness key check.
	box store.SecretBox
	// cursorKey seals the API's list cursors (api.Config.CursorKey),
	// derived from the encryption key so every node accepts them.
	cursorKey []byte
	// claimLock is the SQLite database's claim lock, taken by openStore
	// before any file is created and kept by the store's first claim
	// (ClaimExclusively); nil on PostgreSQL.
	claimLock *sqlite.ClaimLock
}

// New opens the store, prepares the API key, and binds the listen address;
// Run starts serving.
func New(ctx context.Context, cfg Config) (*Main, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Logger = slog.New(tracing.LogHandler(cfg.Logger.Handler()))
	var traces *tracing.Provider
	if cfg.TracerProvider == nil {
		tp, err := tracing.FromEnv(ctx, Version, cfg.Stdout)
		if err != nil {
			return nil, err
		}
		if tp != nil {
			traces, cfg.TracerProvider = tp, tp
			tracing.LogErrors(cfg.Logger) // a failed export is a WARN of Herald's log
			cfg.Logger.Info("tracing on: spans exported as the OTEL_* environment variables ask")
		}
	}
	started := false
	defer func() {
		if !started && traces != nil {
			_ = traces.Shutdown(context.Background()) // New failed: stop the exporter
		}
	}()
	m := &Main{cfg: cfg, log: cfg.Logger, tracer: tracing.New(cfg.TracerProvider), traces: traces}
	// The certificate pair and the listener first: a start refused for
	// either creates no database or key file.
	if cfg.TLSCertFile != "" {
		var err error
		if m.tls, err = tlsreload.New(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return nil, err
		}
		m.logCert("TLS certificate loaded", m.tls.Certificate())
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %s: %w", cfg.Addr, err)
	}
	m.ln = ln
	defer func() {
		if !started {
			ln.Close()
		}
	}()

	st, err := m.openStore(ctx)
	if err != nil {
		return nil, err
	}
	m.store = st
	// A store one process claims from (SQLite) is taken before anything is
	// written, so a second process on it stops here and changes nothing.
	if ex := st.Capabilities().Exclusive; ex != nil {
		if err := ex.ClaimExclusively(ctx); err != nil {
			st.Close()
			m.claimLock.Release(true) // taken by openStore, not kept by the store
			return nil, err
		}
	}
	keyHashes, err := m.apiKeyHashes(ctx)
	if err != nil {
		st.Close()
		return nil, err
	}
	// Every worker may be sending to one host (one receiver behind many
	// endpoints): keep as many keep-alive connections to it as there are
	// workers, or the ones past the idle limit are closed after each
	// attempt and dialled again (a TCP handshake per delivery).
	idlePerHost := max(cfg.Workers, egress.DefaultMaxIdleConnsPerHost)
	m.egress, err = egress.New(egress.Config{
		AllowHTTP:           cfg.AllowHTTP || cfg.Dev,
		AllowLoopback:       cfg.Dev,
		AllowCIDRs:          cfg.AllowCIDRs,
		Timeout:             cfg.AttemptTimeout,
		UserAgent:           buildinfo.UserAgent(),
		MaxIdleConnsPerHost: idlePerHost,
	})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("egress: %w", err)
	}
	// Inbound sources' destinations are set by operators and may be
	// private: their client allows private and loopback addresses (still
	// https or http, still no redirects, no proxies) but, like every
	// client, never link-local or cloud-metadata ones, unless the
	// operator's --allow-cidr names a range inside them.
	m.trusted, err = egress.New(egress.Config{
		AllowHTTP:           true,
		AllowLoopback:       true,
		AllowPrivate:        true,
		AllowCIDRs:          cfg.AllowCIDRs,
		Timeout:             cfg.AttemptTimeout,
		UserAgent:           buildinfo.UserAgent(),
		MaxIdleConnsPerHost: idlePerHost,
	})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("egress: %w", err)
	}
	m.metrics = metrics.New(st.Stats)
	m.metrics.SetClock(cfg.Clock.Now)
	// What the engine may use of the store is what the driver declares.
	caps := st.Capabilities()
	claimers := max(caps.Claimers, 1)
	m.engine, err = delivery.New(delivery.Config{
		Clock:               cfg.Clock,
		Membership:          caps.Membership,
		SoleClaimer:         caps.Exclusive != nil,
		EndpointChanges:     caps.EndpointChanges,
		Renewer:             caps.Renewer,
		KeyCheck:            func(ctx context.Context) error { return store.CheckKey(ctx, st, m.box) },
		HeartbeatInterval:   cfg.HeartbeatInterval,
		Claimers:            claimers,
		Completers:          claimers,
		EndpointConcurrency: cfg.EndpointConcurrency,
		TenantConcurrency:   cfg.TenantConcurrency,
		HostConcurrency:     cfg.HostConcurrency,
		FanOutChunk:         cfg.FanOutChunk,
		BreakerThreshold:    cfg.BreakerThreshold,
		BreakerCooldown:     cfg.BreakerCooldown,
		DisableAfter:        cfg.DisableAfter,
		DisableMinFailures:  cfg.DisableMinFailures,
		Metrics:             m.metrics,
		Tracer:              m.tracer,
		Store:               st,
		Sender:              m.egress,
		TrustedSender:       m.trusted,
		Policy:              retry.Policy{Schedule: cfg.RetrySchedule},
		Workers:             cfg.Workers,
		AttemptTimeout:      cfg.AttemptTimeout,
		Lease:               cfg.Lease,
		RescueInterval:      cfg.RescueInterval,
		UserAgent:           buildinfo.UserAgent(),
		Logger:              cfg.Logger,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	m.metrics.SetInFlight(m.engine.InFlight)
	if caps.HandOff != nil {
		caps.HandOff.SetHandOff(m.engine) // its publishes' due deliveries need no claim
	}
	m.gateway = inbound.New(inbound.Config{Store: st, Notify: m.engine.Notify, NotifyFanOut: m.engine.NotifyFanOut, FanOutChunk: cfg.FanOutChunk,
		Metrics: m.metrics, Logger: cfg.Logger, Tracer: m.tracer, Now: cfg.Clock.Now,
		KeyCheck: func(ctx context.Context) error { return store.CheckKey(ctx, st, m.box) }})
	m.api, err = api.New(api.Config{
		Inbound:               m.gateway,
		SourceChanged:         m.gateway.Forget,
		Store:                 st,
		URLs:                  m.egress,
		Destinations:          m.trusted,
		AdminKeyHashes:        keyHashes,
		PublicURL:             cfg.PublicURL,
		Notify:                m.engine.Notify,
		NotifyFanOut:          m.engine.NotifyFanOut,
		Tester:                m.engine,
		Circuit:               circuitOf(m.engine),
		MaxPayloadBytes:       cfg.MaxPayloadBytes,
		MaxEndpointsPerTenant: cfg.MaxEndpointsPerTenant,
		FanOutChunk:           cfg.FanOutChunk,
		CatalogMode:           cfg.Catalog,
		PersonalData:          cfg.PersonalData,
		Version:               Version,
		Contract:              Contract(cfg),
		Metrics:               m.metrics,
		Tracer:                m.tracer,
		Logger:                cfg.Logger,
		KeyCheck:              func(ctx context.Context) error { return store.CheckKey(ctx, st, m.box) },
		KeyCheckEvery:         cfg.KeyCheckInterval,
		CursorKey:             m.cursorKey,
		Now:                   cfg.Clock.Now,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	m.ops = ops.New(ops.Config{
		Store:              st,
		Notify:             m.engine.Notify,
		OperatorTenant:     cfg.OperatorTenant,
		SpikeThreshold:     cfg.SpikeThreshold,
		SpikeWindow:        cfg.SpikeWindow,
		SucceededRetention: cfg.SucceededRetention,
		DeadRetention:      cfg.DeadRetention,
		Interval:           cfg.HousekeepingInterval,
		Clock:              cfg.Clock,
		Logger:             cfg.Logger,
		Metrics:            m.metrics,
	})
	// The console serves /ui/, /docs and GET /; it reads and changes data
	// only through m.api, as the signed-in key.
	con, err := console.New(console.Config{API: m.api, Version: Version, Logger: cfg.Logger})
	if err != nil {
		st.Close()
		return nil, err
	}
	m.srv = &http.Server{
		Handler:           clientip.New(cfg.TrustedProxies).Middleware(con),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	if m.tls != nil {
		m.tls.OnError = func(err error) {
			cfg.Logger.Error("TLS certificate not reloaded; the previous one stays in use", "err", err)
		}
		m.tls.OnReload = func(c *tls.Certificate) {
			m.logCert("TLS certificate reloaded after its files changed", c)
		}
		// The chain's first expiry (a self-signed root left out), not
		// only the leaf's: an expired intermediate breaks clients as an
		// expired leaf does.
		m.metrics.SetTLSCertificate(func() (expiring, starting *x509.Certificate) {
			c := m.tls.Certificate()
			return tlsreload.FirstExpiring(c), tlsreload.LatestNotBefore(c)
		})
		m.srv.TLSConfig = m.tls.Config()
	}
	for _, p := range cfg.AllowCIDRs {
		if egress.LinkLocalOrMetadata(p) {
			m.log.Warn("--allow-cidr opens link-local or cloud metadata addresses (169.254.169.254 hands out the instance's credentials) to every endpoint, tenants' included, and Herald keeps what they answer; list only the addresses of the services you forward to", "range", p.String())
		}
	}
	for _, p := range clientip.TrustsEveryone(cfg.TrustedProxies) {
		m.log.Warn("--trusted-proxy trusts every address: any client can choose its address with X-Forwarded-For (the authentication throttle, the console and logs use it); list only your reverse proxies' addresses", "range", p.String())
	}
	started = true
	return m, nil
}

// openStore parses --db and opens the store with the secret box.
func (m *Main) openStore(ctx context.Context) (store.Store, error) {
	db := m.cfg.DB
	postgresURL, path, err := ParseDB(db)
	if err != nil {
		return nil, err
	}
	if postgresURL {
		return m.openPostgres(ctx, db)
	}
	// The database's real path (symbolic links resolved, as SQLite resolves
	// them for its -wal and -shm files and the claim lock does): the key
	// file lives beside the database, not beside a link to it.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	// Before the key file is created beside it: a refused directory must
	// leave nothing behind.
	if err := sqlite.CheckDirectory(path); err != nil {
		return nil, err
	}
	// The claim lock before the key file and the database are created: a
	// herald restore to this path holds it while no database is there yet
	// (and a node on it holds it until it stops), and a start refused by it
	// must leave nothing that would stop the restore or change the files.
	// The store's first claim (New: ClaimExclusively) keeps it.
	lock, err := sqlite.LockClaims(path)
	if err != nil {
		return nil, err
	}
	m.claimLock = lock
	opened := false
	defer func() {
		if !opened {
			lock.Release(true) // a refused start leaves no lock file it created
		}
	}()
	var (
		key        []byte
		createdKey bool
	)
	if m.cfg.EncryptionKey != "" {
		k, err := secretbox.ParseKey(m.cfg.EncryptionKey)
		if err != nil {
			return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY: %w", err)
		}
		key = k
	} else {
		// A key file without its database: the database was deleted or
		// moved. Starting would create an empty database and lose every
		// endpoint, event and delivery silently.
		if _, err := os.Stat(path + ".key"); err == nil {
			if info, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || err == nil && info.Size() == 0 {
				return nil, fmt.Errorf("the database %s is missing or empty but its key file %s exists: the database was deleted or moved; restore it (with its -wal file), or remove the key file to start with an empty database", path, path+".key")
			}
		}
		if _, err := os.Stat(path + ".key"); errors.Is(err, os.ErrNotExist) {
			if info, err := os.Stat(path); err == nil && info.Size() > 0 {
				m.log.Warn("the database exists but its key file does not: creating a new key; if this database holds endpoints, Herald will refuse to start (restore the key file or set HERALD_ENCRYPTION_KEY)", "file", path+".key")
			}
		}
		// The key opens every sealed secret: keep it owner-only, as
		// the database files are (sqlite.Open takes group and other
		// permissions off them), and say that it was exposed.
		if info, err := os.Stat(path + ".key"); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path+".key", info.Mode().Perm()&0o700); err != nil {
				return nil, fmt.Errorf("encryption key: make the key file %s private: %w", path+".key", err)
			}
			m.log.Warn("the key file was open to other users: made it private (owner only); if they are not trusted, rotate the key (herald rekey, docs/production.md)", "file", path+".key", "mode_was", fmt.Sprintf("%04o", uint32(info.Mode().Perm())))
		}
		k, created, err := secretbox.LoadOrCreateKeyFile(path + ".key")
		if err != nil {
			return nil, fmt.Errorf("encryption key: %w (or set HERALD_ENCRYPTION_KEY)", err)
		}
		createdKey = created
		if created {
			m.log.Warn("HERALD_ENCRYPTION_KEY is not set: created a key file beside the database to encrypt endpoint secrets at rest; back it up with the database, or set HERALD_ENCRYPTION_KEY", "file", path+".key")
		}
		key = k
	}
	box, err := m.keyring(key)
	if err != nil {
		return nil, err
	}
	keyFile := path + ".key"
	if m.cfg.EncryptionKey != "" {
		keyFile = "HERALD_ENCRYPTION_KEY"
	}
	st, err := sqlite.Open(ctx, path, sqlite.WithSecretBox(box), sqlite.WithClaimLock(lock), sqlite.WithLogger(m.log))
	if err != nil {
		if createdKey {
			os.Remove(path + ".key") // a refused database keeps nothing of this start
		}
		return nil, err
	}
	m.box = box
	m.cursorKey = secretbox.DeriveKey(key, "herald list cursors v1")
	if err := store.CheckKey(ctx, st, box); err != nil {
		st.Close()
		if createdKey {
			os.Remove(path + ".key") // a key made just now cannot be the right one
		}
		if errors.Is(err, store.ErrRetiredKey) {
			return nil, fmt.Errorf("%s: %w", keyFile, err)
		}
		if errors.Is(err, store.ErrWrongKey) {
			return nil, fmt.Errorf("%s: %w: set HERALD_ENCRYPTION_KEY (or restore the key file) to the key the database was last sealed with (the key it was created with, or the --new-key of the last herald rekey)", keyFile, err)
		}
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	if err := m.sealClearHeaders(ctx, st); err != nil {
		st.Close()
		return nil, err
	}
	opened = true
	return st, nil
}

// openPostgres opens the shared PostgreSQL store. Every node must use the
// same HERALD_ENCRYPTION_KEY, so it is required (no key file: nodes do not
// share a disk).
func (m *Main) openPostgres(ctx context.Context, url string) (store.Store, error) {
	if m.cfg.EncryptionKey == "" {
		return nil, errors.New("HERALD_ENCRYPTION_KEY is required with PostgreSQL: every node must encrypt endpoint secrets with the same key (generate one with `openssl rand -base64 32`)")
	}
	key, err := secretbox.ParseKey(m.cfg.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY: %w", err)
	}
	box, err := m.keyring(key)
	if err != nil {
		return nil, err
	}
	// Say what a start is waiting for when it migrates: the other nodes
	// starting meanwhile wait for its lock, and a migration waiting behind
	// a long transaction is run again for up to 5 minutes
	// (docs/production.md, "Upgrades"). A failed look is left to Open.
	var migrating time.Time
	if sch, err := postgres.SchemaStatus(ctx, url); err == nil && len(sch.Pending) > 0 {
		migrating = time.Now()
		m.log.Info("migrating the database: applying the migrations this binary has and the database lacks",
			"database_version", sch.Database, "binary_version", sch.Binary, "pending", sch.Pending)
	}
	st, err := postgres.Open(ctx, url, postgres.WithSecretBox(box), postgres.WithLogger(m.log))
	if err != nil {
		return nil, err
	}
	if !migrating.IsZero() {
		m.log.Info("database migrated", "took", time.Since(migrating).Round(time.Millisecond))
	}
	m.box = box
	m.cursorKey = secretbox.DeriveKey(key, "herald list cursors v1")
	if err := store.CheckKey(ctx, st, box); err != nil {
		st.Close()
		if errors.Is(err, store.ErrRetiredKey) {
			return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY: %w", err)
		}
		if errors.Is(err, store.ErrWrongKey) {
			return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY: %w: set it to the key the database was last sealed with (the first node's key, or the --new-key of the last herald rekey), the same on every node (PostgreSQL has no key file)", err)
		}
		return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY: %w", err)
	}
	if err := m.sealClearHeaders(ctx, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// sealClearHeaders seals endpoint header values stored in clear by an
// earlier version (store.SealHeaders), once the key is proven right, when
// the store declares the capability (Capabilities.HeaderSealer).
func (m *Main) sealClearHeaders(ctx context.Context, st store.Store) error {
	s := st.Capabilities().HeaderSealer
	if s == nil {
		return nil
	}
	n, err := s.SealClearHeaders(ctx)
	if err != nil {
		return fmt.Errorf("seal endpoint headers: %w", err)
	}
	if n > 0 {
		m.log.Info("sealed the custom header values of endpoints stored in clear by an earlier version", "endpoints", n)
	}
	return nil
}

// keyring returns the box sealing with key and opening with key or any of
// PreviousEncryptionKeys.
func (m *Main) keyring(key []byte) (*secretbox.Keyring, error) {
	cur, err := secretbox.New(key)
	if err != nil {
		return nil, err
	}
	var prev []*secretbox.Box
	for i, v := range m.cfg.PreviousEncryptionKeys {
		k, err := secretbox.ParseKey(v)
		if err != nil {
			return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY_PREVIOUS (key %d): %w", i+1, err)
		}
		b, err := secretbox.New(k)
		if err != nil {
			return nil, err
		}
		prev = append(prev, b)
	}
	return secretbox.NewKeyring(cur, prev...), nil
}

// apiKeyHashes returns the hash of HERALD_API_KEY when set. Otherwise, when
// no API key is stored yet (the very first start), it generates an admin
// key, stores it hashed and prints it once; when keys are stored but no
// usable admin key (all revoked or expired), it logs a WARN saying how to
// recover.
func (m *Main) apiKeyHashes(ctx context.Context) ([][]byte, error) {
	if m.cfg.APIKey != "" {
		h := api.HashAPIKey(m.cfg.APIKey)
		// The configured admin key must be a key of its own: were it the
		// secret of a stored key, that key's role would silently become
		// admin and revoking it would change nothing.
		k, err := m.store.LookupAPIKey(ctx, h)
		switch {
		case err == nil:
			state := "a stored"
			if !k.RevokedAt.IsZero() {
				state = "a revoked"
			}
			return nil, fmt.Errorf("HERALD_API_KEY is the secret of %s API key (%s, role %s): the configured admin key must be a key of its own, or revoking that key would not stop it; choose a new one (openssl rand -hex 32)", state, k.ID, k.Role)
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		return [][]byte{h}, nil
	}
	n, err := m.store.CountAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		// Unrevoked keys exist, so none is generated (with every key
		// revoked, a start generates one as the first did); should no
		// admin key be left
		// (all revoked or expired), say how to get one back.
		admins, err := api.UsableAdminKeys(ctx, m.store, m.cfg.Clock.Now())
		if err != nil {
			return nil, err
		}
		if len(admins) == 0 {
			m.log.Warn("no usable admin key: every stored admin key is revoked or expired and HERALD_API_KEY is not set, so nobody can manage API keys, sources or tenants; to recover, restart with HERALD_API_KEY set to a new key (openssl rand -hex 32) and create an admin key with it (herald keys create --role admin)")
		}
		return nil, nil
	}
	key, err := api.NewSecretKey(api.APIKeyPrefix)
	if err != nil {
		return nil, err
	}
	if _, err := m.store.CreateAPIKey(ctx, store.APIKey{ID: store.NewID("key"), Kind: store.KeyKindAPIKey, Name: "admin key (generated at first start)",
		Role: store.RoleAdmin, Hash: api.HashAPIKey(key), CreatedAt: m.cfg.Clock.Now()}); err != nil {
		return nil, err
	}
	fmt.Fprintf(m.cfg.Stdout, "Generated an admin API key (shown once; set HERALD_API_KEY to choose your own):\n\n    %s\n\n", key)
	return nil, nil
}

// Addr returns the address the API listens on (useful with ":0").
func (m *Main) Addr() string { return m.ln.Addr().String() }

// ReloadTLS reads the TLS certificate and key files again (SIGHUP) and
// logs the result as a reload after the files changed is logged; on error
// the previous certificate stays in use. Without TLS it only logs that
// there is nothing to reload.
func (m *Main) ReloadTLS() error {
	if m.tls == nil {
		m.log.Info("SIGHUP: no TLS configured (--tls-cert), nothing to reload")
		return nil
	}
	if err := m.tls.Reload(); err != nil {
		m.log.Error("SIGHUP: TLS certificate not reloaded; the previous one stays in use", "err", err)
		return err
	}
	m.logCert("TLS certificate reloaded on SIGHUP", m.tls.Certificate())
	return nil
}

// logCert logs msg (INFO) with the files and the certificate c the node
// now serves (tlsreload.Describe: subject, SANs, serial, expiry), then a
// WARN for each of tlsreload.Warnings at the node's clock: a certificate
// of the chain (the leaf or an intermediate, named) expired, not valid yet
// or expiring soon, a key file open to other users. The
// certificate is served either way (see tlsreload.Warnings).
func (m *Main) logCert(msg string, c *tls.Certificate) {
	attrs := append([]slog.Attr{slog.String("cert", m.cfg.TLSCertFile), slog.String("key", m.cfg.TLSKeyFile)}, tlsreload.Describe(c)...)
	m.log.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
	for _, w := range tlsreload.Warnings(c, m.cfg.TLSCertFile, m.cfg.TLSKeyFile, m.cfg.Clock.Now()) {
		m.log.LogAttrs(context.Background(), slog.LevelWarn, w.Msg, w.Attrs...)
	}
}

// Store returns the store (for tests and tools).
func (m *Main) Store() store.Store { return m.store }

// Run serves the API and delivers until ctx ends, then shuts down
// gracefully: the listener stops, requests in progress finish (up to
// 10 s), attempts in flight finish and are recorded.
func (m *Main) Run(ctx context.Context) error {
	engineCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	engineDone := make(chan error, 1)
	go func() { engineDone <- m.engine.Run(engineCtx) }()
	// PostgreSQL: a publish on any node wakes this node's workers at once
	// (LISTEN/NOTIFY); polling remains the fallback.
	listenDone := make(chan struct{})
	if l := m.store.Capabilities().Wakeups; l != nil {
		go func() {
			defer close(listenDone)
			_ = l.Listen(engineCtx, m.engine.Notify)
		}()
	} else {
		close(listenDone)
	}
	opsDone := make(chan struct{})
	go func() {
		defer close(opsDone)
		m.ops.Run(engineCtx)
	}()

	serveErr := make(chan error, 1)
	go func() {
		if m.tls != nil {
			serveErr <- m.srv.ServeTLS(m.ln, "", "")
			return
		}
		serveErr <- m.srv.Serve(m.ln)
	}()
	m.log.Info("herald serving", "addr", m.Addr(), "tls", m.tls != nil, "trusted_proxies", len(m.cfg.TrustedProxies), "db", redact.URL(m.cfg.DB), "node", m.engine.Owner(), "version", Version, "dev", m.cfg.Dev)

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	stopping := time.Now()
	m.log.Info("herald stopping: no new connections; finishing requests (≤ 10 s) and attempts in flight (≤ --attempt-timeout)",
		"attempt_timeout", m.cfg.AttemptTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(shutdownCtx)
	stopEngine()
	<-engineDone
	<-opsDone
	<-listenDone
	m.egress.CloseIdleConnections()
	m.trusted.CloseIdleConnections()
	err = errors.Join(err, m.Close())
	if err == nil {
		m.log.Info("herald stopped: the attempts in flight finished and were recorded", "took", time.Since(stopping).Round(time.Millisecond))
	}
	return err
}

// Close releases the store. Run calls it.
func (m *Main) Close() error {
	var err error
	m.closed.Do(func() {
		if m.api != nil {
			m.api.Close() // its background writes use the store
		}
		err = m.store.Close()
		if m.traces != nil {
			// Flush the spans still batched (bounded: a collector away
			// does not hold the stop).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if terr := m.traces.Shutdown(ctx); terr != nil {
				m.log.Warn("tracing: spans not flushed at stop", "error", terr)
			}
		}
	})
	return err
}

// pgKeywordValue matches the start of a libpq keyword/value connection
// string ("host=db dbname=herald …"): a known keyword, then "=".
var pgKeywordValue = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|passfile|sslmode|sslrootcert|sslcert|sslkey|service|servicefile|connect_timeout|application_name|options|target_session_attrs)\s*=`)

// ParseDB reads a --db value: a postgres:// (or postgresql://) URL, or a
// SQLite database as sqlite:PATH (sqlite://PATH) or a bare PATH, whose
// path it returns; sqlite: with no path (or only whitespace), and a path
// holding '?' or '#' or with leading or trailing whitespace
// (checkSQLitePath), are refused before any work. A
// URL of another scheme is refused, and so is a
// PostgreSQL keyword/value string (host=… dbname=…): taken as a path it
// would create a SQLite file named after it (password included) and run
// on that. Schemes are read in any case (RFC 3986 §3.1: POSTGRES://,
// SQLite:PATH). Errors show the value as given, its credentials redacted
// (redact.URL: the whole user information, a password parameter).
func ParseDB(db string) (postgresURL bool, sqlitePath string, err error) {
	switch {
	case hasPrefixFold(db, "postgres://"), hasPrefixFold(db, "postgresql://"):
		return true, "", nil
	case hasPrefixFold(db, "sqlite:"):
		path := strings.TrimPrefix(db[len("sqlite:"):], "//")
		if strings.TrimSpace(path) == "" {
			// Taken as a path, "" (or spaces) would put the database (or
			// a restore's copy) under names like ".restore-…" in the
			// working directory before anything noticed.
			return false, "", fmt.Errorf("--db %q names no database file: use sqlite:PATH (e.g. sqlite:herald.db)", db)
		}
		if err := checkSQLitePath(db, path); err != nil {
			return false, "", err
		}
		return false, path, nil
	case strings.Contains(db, "://"):
		return false, "", fmt.Errorf("--db %q: unknown scheme; use sqlite:PATH or postgres://…", redact.URL(db))
	case pgKeywordValue.MatchString(db):
		return false, "", errors.New("--db looks like a PostgreSQL keyword/value connection string (host=… dbname=…; not shown, it may hold a password): Herald takes PostgreSQL as a URL, postgres://USER:PASSWORD@HOST:PORT/DBNAME?sslmode=…; for a SQLite file with such a name, write sqlite:PATH")
	case db == "":
		return false, "", errors.New("--db is empty: use sqlite:PATH or postgres://…")
	case strings.TrimSpace(db) == "":
		return false, "", fmt.Errorf("--db %q names no database file: use sqlite:PATH (e.g. sqlite:herald.db)", db)
	}
	if err := checkSQLitePath(db, db); err != nil {
		return false, "", err
	}
	return false, db, nil
}

// checkSQLitePath applies the rules of a SQLite database path to path,
// given as --db db, so that every command taking --db refuses it before
// any work: no '?' or '#' (Herald builds SQLite's URI itself, with its own
// parameters, and the store refuses such a path at open: taken by backup
// or restore as a file name, it made a database serve refused), and no
// leading or trailing whitespace (a file named " herald.db" is never the
// one meant).
func checkSQLitePath(db, path string) error {
	if strings.ContainsAny(path, "?#") {
		return fmt.Errorf("--db %q: the SQLite database path %q must not contain '?' or '#' (Herald sets SQLite's parameters itself): use sqlite:PATH with the file's path alone", db, path)
	}
	if strings.TrimSpace(path) != path {
		return fmt.Errorf("--db %q: the SQLite database path %q must not have leading or trailing whitespace: use sqlite:PATH with the file's path alone", db, path)
	}
	return nil
}

// hasPrefixFold reports whether s begins with prefix, ASCII case ignored.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// circuitOf shows the engine's circuit breakers in the API's endpoints.
func circuitOf(e *delivery.Engine) func(string) api.CircuitOut {
	return func(id string) api.CircuitOut {
		c := e.Circuit(id)
		out := api.CircuitOut{State: c.State, ConsecutiveFailures: c.Failures, Threshold: c.Threshold, Probing: c.Probing}
		if !c.OpenUntil.IsZero() {
			t := c.OpenUntil.UTC()
			out.OpenUntil = &t
		}
		return out
	}
}
