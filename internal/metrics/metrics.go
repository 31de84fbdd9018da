// Package metrics exports Herald's Prometheus metrics from a private
// registry (never the global one). Labels are bounded sets (states,
// outcomes, result classes): never an event, delivery or endpoint id. The
// one tenant label, of herald_tenant_attempts_in_flight, is bounded by
// construction: at most TenantSeriesMax tenants per scrape, the rest summed
// under OtherTenants, emitted from the current values only.
package metrics

import (
	"cmp"
	"context"
	"crypto/x509"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/herald-webhooks/herald/internal/store"
)

// Metrics holds the collectors. A nil *Metrics is valid and records
// nothing, so packages can be used without metrics in tests.
type Metrics struct {
	reg              *prometheus.Registry
	eventsPublished  prometheus.Counter
	personalData     *prometheus.CounterVec
	attempts         *prometheus.CounterVec
	deliveries       *prometheus.CounterVec
	attemptDuration  *prometheus.HistogramVec
	deferred         *prometheus.CounterVec
	pulledIn         prometheus.Counter
	circuitsOpened   prometheus.Counter
	leasesRescued    prometheus.Counter
	poisoned         prometheus.Counter
	operationalEvent *prometheus.CounterVec
	opSuppressed     *prometheus.CounterVec
	retentionPurged  prometheus.Counter
	retentionBehind  prometheus.Gauge
	inbound          *prometheus.CounterVec
	authFailures     *prometheus.CounterVec
	clusterNodes     prometheus.Gauge
	unreadable       prometheus.Gauge
	firstAttempt     prometheus.Histogram
	state            *stateCollector
	inFlight         *inFlightCollector
	ready            *readyCollector
	tlsCert          *tlsCertCollector
}

// New registers every collector in a new registry. stats, when not nil, is
// called (with a 5 s timeout) for the queue-depth and endpoint gauges, at
// most once per StatsMaxAge: scrapes in between, and concurrent scrapes,
// share its last answer.
func New(stats func(ctx context.Context) (store.Stats, error)) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.eventsPublished = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_events_published_total", Help: "Events accepted by POST /v1/events (duplicates excluded).",
	})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_attempts_total", Help: "Delivery attempts by result: success (2xx) or failure (anything else).",
	}, []string{"result"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_deliveries_total", Help: "Deliveries reaching an outcome after an attempt: succeeded, retry (scheduled again) or dead (dead-lettered).",
	}, []string{"outcome"})
	m.attemptDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "herald_attempt_duration_seconds", Help: "Duration of delivery attempts in seconds, from start to the end of the response body read.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"result"})
	m.deferred = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_deliveries_deferred_total", Help: "Claimed deliveries put back without an attempt, by reason (concurrency_cap, tenant_cap, host_cap, rate_limit, circuit_open, circuit_half_open, shutdown, endpoint_changed, lease_expired, renewal_failed).",
	}, []string{"reason"})
	m.pulledIn = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_deliveries_pulled_in_total", Help: "Deferred deliveries spaced again at their endpoint's new pace because it now answers far faster than when they were turned away at its cap (a cold start).",
	})
	m.circuitsOpened = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_circuit_breaker_opened_total", Help: "Times an endpoint's circuit breaker opened after consecutive transport failures.",
	})
	m.leasesRescued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_leases_rescued_total", Help: "Deliveries whose lease expired (their worker crashed) and were returned to the queue.",
	})
	m.poisoned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_deliveries_poisoned_total", Help: "Deliveries dead-lettered by a claim without an attempt because their stored row or their event's could not be read (a damaged database or a hand edit); not in herald_deliveries_total.",
	})
	m.operationalEvent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_operational_events_total", Help: "Operational events emitted, by type.",
	}, []string{"type"})
	m.opSuppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_operational_events_suppressed_total", Help: "Operational events held back by the per-tenant rate limit, by type.",
	}, []string{"type"})
	m.retentionPurged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_retention_purged_rows_total", Help: "Rows of old history (succeeded deliveries, dead letters, events, endpoint stats rollups) deleted by this node's retention rounds; attempts deleted with their deliveries not counted.",
	})
	m.retentionBehind = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_retention_behind", Help: "1 when this node's last retention round stopped at its time budget with old history left to delete (the next round carries on), 0 when it deleted all there was.",
	})
	m.inbound = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_inbound_requests_total", Help: "Inbound gateway requests by result (accepted, duplicate, unauthorized, too_large, unsupported_encoding, unknown_source, challenge, bad_request, error, unreadable: the source's sealed configuration does not open on this node, answered 503).",
	}, []string{"result"})
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_auth_failures_total", Help: "API requests refused at authentication, by reason (missing, malformed, invalid, expired, revoked, throttled).",
	}, []string{"reason"})
	m.clusterNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_cluster_nodes", Help: "Live Herald nodes sharing this node's database, as this node last saw them (1 on SQLite; 0 while this node holds no share of the endpoints' limits: warming up after joining, or cut off from the database).",
	})
	m.unreadable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_endpoints_unreadable", Help: "Endpoints whose stored values (signing secrets, custom header values) did not open with this node's encryption keys at its last claim of their deliveries: this node leaves those deliveries pending and skips the endpoint for up to a minute at a time (a key no node holds after herald rekey, or a node not restarted with the new key).",
	})
	m.firstAttempt = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "herald_first_attempt_latency_seconds", Help: "Time from a publish's commit to the start of its deliveries' first attempts, in seconds (fan-out, queueing and isolation waits included, and the time a delivery was held on a paused or disabled endpoint; replays and retries excluded).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	m.inFlight = &inFlightCollector{}
	m.ready = &readyCollector{}
	m.tlsCert = &tlsCertCollector{}
	m.personalData = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_events_personal_data_total",
		Help: "Strings that looked like personal data in published events, by kind (email, phone, payment-card, iban) and action (refused, warned).",
	}, []string{"kind", "action"})
	m.reg.MustRegister(m.personalData)
	// The counters the alert rules take increase() or rate() of exist from
	// the start, at 0, with every label value: a series born at its first
	// increment loses that increment in increase() and rate() (after a
	// start, the first dead letters never reached HeraldDeadLettersGrowing).
	for _, r := range []string{"success", "failure"} {
		m.attempts.WithLabelValues(r)
	}
	for _, o := range []string{"succeeded", "retry", "dead"} {
		m.deliveries.WithLabelValues(o)
	}
	m.inbound.WithLabelValues("unreadable") // HeraldSourceValuesDoNotOpen
	m.reg.MustRegister(m.clusterNodes, m.unreadable, m.eventsPublished, m.attempts, m.deliveries, m.attemptDuration, m.deferred, m.pulledIn, m.circuitsOpened,
		m.leasesRescued, m.poisoned, m.operationalEvent, m.opSuppressed, m.retentionPurged, m.retentionBehind, m.inbound, m.authFailures, m.firstAttempt, m.inFlight, m.ready, m.tlsCert,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if stats != nil {
		m.state = &stateCollector{stats: stats, now: time.Now}
		m.reg.MustRegister(m.state)
	}
	return m
}

// Handler serves /metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SetClock sets the clock of the store gauges' cache (tests).
func (m *Metrics) SetClock(now func() time.Time) {
	if m.state != nil {
		m.state.mu.Lock()
		m.state.now = now
		m.state.mu.Unlock()
	}
}

// Registry returns the private registry (tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// AuthFailure counts one API request refused at authentication: reason is
// missing, malformed, invalid, expired, revoked or throttled.
func (m *Metrics) AuthFailure(reason string) {
	if m != nil {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// PersonalData counts one string of a published event that looked like
// personal data of kind, refused or warned about (action).
func (m *Metrics) PersonalData(kind, action string) {
	if m != nil {
		m.personalData.WithLabelValues(kind, action).Inc()
	}
}

// EventPublished counts one accepted event.
func (m *Metrics) EventPublished() {
	if m != nil {
		m.eventsPublished.Inc()
	}
}

// Attempt records one attempt: whether it got a 2xx, its duration, and the
// delivery outcome ("succeeded", "retry", "dead").
func (m *Metrics) Attempt(success bool, d time.Duration, outcome string) {
	if m == nil {
		return
	}
	result := "failure"
	if success {
		result = "success"
	}
	m.attempts.WithLabelValues(result).Inc()
	m.attemptDuration.WithLabelValues(result).Observe(d.Seconds())
	m.deliveries.WithLabelValues(outcome).Inc()
}

// FirstAttempt records the time from a publish's commit to the start of
// one of its deliveries' first attempt.
func (m *Metrics) FirstAttempt(d time.Duration) {
	if m != nil {
		m.firstAttempt.Observe(max(d, 0).Seconds())
	}
}

// InFlight is a node's attempts in flight at one moment: Total, Tenants
// with at least one, TenantMax, the most any one tenant has, and ByTenant,
// the attempts in flight of each tenant that has at least one (nil or
// empty when none).
type InFlight struct {
	Total, Tenants, TenantMax int
	ByTenant                  map[string]int
}

// SetInFlight sets the function read at each scrape for the in-flight
// gauges (the engine's scheduler: nothing is counted on the attempts' path
// for them). Tenants are not a bounded set, so the per-tenant gauge
// herald_tenant_attempts_in_flight names only the TenantSeriesMax busiest
// tenants at the scrape and sums the others under OtherTenants; the
// busiest tenant's count against --tenant-concurrency tells whether one
// tenant holds the workers.
func (m *Metrics) SetInFlight(f func() InFlight) {
	if m != nil {
		m.inFlight.mu.Lock()
		m.inFlight.f = f
		m.inFlight.mu.Unlock()
	}
}

// The reasons herald_not_ready names, the checks of GET /readyz that can
// fail: NotReadyStore, the store cannot commit (on SQLite also: its
// database file was deleted or replaced, a publish failed on storage in
// the last 10 s, its claim lock was lost), and NotReadyEncryptionKey, the
// store's sealed values do not open with this node's encryption key.
const (
	NotReadyStore         = "store"
	NotReadyEncryptionKey = "encryption_key"
)

// notReadyReasons is every reason, each a series of herald_not_ready.
var notReadyReasons = []string{NotReadyEncryptionKey, NotReadyStore}

// SetReady sets the function read at each scrape for herald_ready and
// herald_not_ready: it answers "" when the node is ready, else the reason
// it is not (NotReadyStore or NotReadyEncryptionKey). The API registers
// its readiness check (GET /readyz's), which reuses a recent result so
// that a scrape does not add a store round trip per scrape. Until it is
// set, neither family has a series.
func (m *Metrics) SetReady(f func() string) {
	if m != nil {
		m.ready.mu.Lock()
		m.ready.f = f
		m.ready.mu.Unlock()
	}
}

var (
	readyDesc = prometheus.NewDesc("herald_ready",
		"1 when this node is ready (GET /readyz answers 200), 0 when it is not (it answers 503: for reason store every publish fails too, for encryption_key the node delivers nothing); see herald_not_ready for the reason. A scrape reuses a readiness result up to 5 s old.", nil, nil)
	notReadyDesc = prometheus.NewDesc("herald_not_ready",
		"1 for the reason this node is not ready (store: the store cannot commit, or on SQLite its database file was deleted or replaced, a publish failed on storage or the claim lock was lost; encryption_key: the store's sealed values do not open with this node's key (herald rekey moved them to a key it lacks), or its current key is one herald rekey retired while the database's key is among its previous ones (HERALD_ENCRYPTION_KEY and HERALD_ENCRYPTION_KEY_PREVIOUS swapped)), 0 for the others; all 0 while it is ready.",
		[]string{"reason"}, nil)
)

type readyCollector struct {
	mu sync.Mutex
	f  func() string
}

func (c *readyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- notReadyDesc
}

func (c *readyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return
	}
	reason := f()
	ready := 0.0
	if reason == "" {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	for _, r := range notReadyReasons {
		v := 0.0
		if r == reason {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(notReadyDesc, prometheus.GaugeValue, v, r)
	}
}

// SetTLSCertificate sets the function read at each scrape for
// herald_tls_certificate_expiry_timestamp_seconds,
// herald_tls_certificate_lifetime_seconds and
// herald_tls_certificate_not_before_timestamp_seconds, of the chain the
// node serves now (--tls-cert; a renewal is served from the next handshake
// after its files change, or from SIGHUP). f returns two certificates of
// that chain: expiring, whose NotAfter and lifetime (NotAfter - NotBefore)
// the first two expose (internal/app gives tlsreload.FirstExpiring: the
// leaf, or an intermediate that expires before it), and starting, whose
// NotBefore the third exposes (tlsreload.LatestNotBefore: the latest start
// among the leaf and the intermediates, so a leaf not valid yet shows even
// when an intermediate expires first). Neither is ever a self-signed root,
// which clients ignore. Until it is set (a node without TLS), and while it
// returns nils, no family has a series.
func (m *Metrics) SetTLSCertificate(f func() (expiring, starting *x509.Certificate)) {
	if m != nil {
		m.tlsCert.mu.Lock()
		m.tlsCert.f = f
		m.tlsCert.mu.Unlock()
	}
}

var (
	tlsExpiryDesc = prometheus.NewDesc("herald_tls_certificate_expiry_timestamp_seconds",
		"Expiry (NotAfter) of the TLS certificate this node serves (--tls-cert), of the certificate of its chain that expires first (the leaf or an intermediate; a self-signed root is left out), in seconds since the Unix epoch; absent without TLS.", nil, nil)
	tlsLifetimeDesc = prometheus.NewDesc("herald_tls_certificate_lifetime_seconds",
		"Lifetime (NotAfter - NotBefore) of the certificate of the served chain whose expiry herald_tls_certificate_expiry_timestamp_seconds shows, in seconds (its warning window is the last sixth of it, at most 14 days); absent without TLS.", nil, nil)
	tlsNotBeforeDesc = prometheus.NewDesc("herald_tls_certificate_not_before_timestamp_seconds",
		"Start of validity (NotBefore) of the TLS chain this node serves (--tls-cert): the latest NotBefore among the leaf and the intermediates (a self-signed root is left out), in seconds since the Unix epoch; clients that check dates refuse the chain before it; absent without TLS.", nil, nil)
)

type tlsCertCollector struct {
	mu sync.Mutex
	f  func() (expiring, starting *x509.Certificate)
}

func (c *tlsCertCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tlsExpiryDesc
	ch <- tlsLifetimeDesc
	ch <- tlsNotBeforeDesc
}

func (c *tlsCertCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return
	}
	expiring, starting := f()
	if expiring != nil {
		ch <- prometheus.MustNewConstMetric(tlsExpiryDesc, prometheus.GaugeValue, float64(expiring.NotAfter.Unix()))
		ch <- prometheus.MustNewConstMetric(tlsLifetimeDesc, prometheus.GaugeValue, expiring.NotAfter.Sub(expiring.NotBefore).Seconds())
	}
	if starting != nil {
		ch <- prometheus.MustNewConstMetric(tlsNotBeforeDesc, prometheus.GaugeValue, float64(starting.NotBefore.Unix()))
	}
}

// TenantSeriesMax is the most tenants herald_tenant_attempts_in_flight
// names at one scrape: the busiest by attempts in flight on this node, ties
// in tenant order. A tenant with nothing in flight has no series.
const TenantSeriesMax = 10

// OtherTenants is the tenant label value of herald_tenant_attempts_in_flight
// that sums the attempts in flight of the tenants beyond the
// TenantSeriesMax busiest (present only when there are such tenants). It
// can never be a tenant key: store.ValidTenant refuses '~' (letters,
// digits, '_', '.', ':' and '-' only).
const OtherTenants = "~other"

var (
	inFlightDesc       = prometheus.NewDesc("herald_attempts_in_flight", "Attempts this node is making now.", nil, nil)
	inFlightTenants    = prometheus.NewDesc("herald_tenants_in_flight", "Tenants with at least one attempt in flight on this node.", nil, nil)
	inFlightTenantsMax = prometheus.NewDesc("herald_tenant_attempts_in_flight_max", "Attempts in flight on this node of the tenant that has the most (compare with --tenant-concurrency).", nil, nil)
	inFlightByTenant   = prometheus.NewDesc("herald_tenant_attempts_in_flight",
		"Attempts in flight on this node by tenant: the "+strconv.Itoa(TenantSeriesMax)+" busiest tenants at the scrape (ties in tenant order), the others summed under tenant=\""+OtherTenants+"\"; a tenant with none in flight has no series.",
		[]string{"tenant"}, nil)
)

type inFlightCollector struct {
	mu sync.Mutex
	f  func() InFlight
}

func (c *inFlightCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	ch <- inFlightTenants
	ch <- inFlightTenantsMax
	ch <- inFlightByTenant
}

func (c *inFlightCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	var v InFlight
	if f != nil {
		v = f()
	}
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(v.Total))
	ch <- prometheus.MustNewConstMetric(inFlightTenants, prometheus.GaugeValue, float64(v.Tenants))
	ch <- prometheus.MustNewConstMetric(inFlightTenantsMax, prometheus.GaugeValue, float64(v.TenantMax))
	top, rest := busiestTenants(v.ByTenant, TenantSeriesMax)
	for _, t := range top {
		ch <- prometheus.MustNewConstMetric(inFlightByTenant, prometheus.GaugeValue, float64(t.n), t.tenant)
	}
	if rest > 0 {
		ch <- prometheus.MustNewConstMetric(inFlightByTenant, prometheus.GaugeValue, float64(rest), OtherTenants)
	}
}

type tenantCount struct {
	tenant string
	n      int
}

// busiestTenants returns the at most n tenants of byTenant with the most
// (positive) counts, most first and ties in tenant order, and the sum of
// the others' counts.
func busiestTenants(byTenant map[string]int, n int) ([]tenantCount, int) {
	all := make([]tenantCount, 0, len(byTenant))
	for t, c := range byTenant {
		if c > 0 {
			all = append(all, tenantCount{t, c})
		}
	}
	slices.SortFunc(all, func(a, b tenantCount) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.tenant, b.tenant))
	})
	rest := 0
	if len(all) > n {
		for _, t := range all[n:] {
			rest += t.n
		}
		all = all[:n]
	}
	return all, rest
}

// Deferred counts a delivery put back without an attempt.
func (m *Metrics) Deferred(reason string) {
	if m != nil {
		m.deferred.WithLabelValues(reason).Inc()
	}
}

// PulledIn counts n deferred deliveries made due at once (a pull-in).
func (m *Metrics) PulledIn(n int) {
	if m != nil {
		m.pulledIn.Add(float64(n))
	}
}

// CircuitOpened counts an opened circuit breaker.
func (m *Metrics) CircuitOpened() {
	if m != nil {
		m.circuitsOpened.Inc()
	}
}

// LeasesRescued counts rescued leases.
func (m *Metrics) LeasesRescued(n int) {
	if m != nil {
		m.leasesRescued.Add(float64(n))
	}
}

// DeliveriesPoisoned counts n deliveries dead-lettered without an attempt
// because their stored rows could not be read.
func (m *Metrics) DeliveriesPoisoned(n int) {
	if m != nil && n > 0 {
		m.poisoned.Add(float64(n))
	}
}

// OperationalEvent counts an emitted operational event.
func (m *Metrics) OperationalEvent(typ string) {
	if m != nil {
		m.operationalEvent.WithLabelValues(typ).Inc()
	}
}

// OperationalEventSuppressed counts an operational event the per-tenant
// rate limit held back (one per recipient tenant copy).
func (m *Metrics) OperationalEventSuppressed(typ string) {
	if m != nil {
		m.opSuppressed.WithLabelValues(typ).Inc()
	}
}

// RetentionPurged counts n rows deleted by retention.
func (m *Metrics) RetentionPurged(n int) {
	if m != nil && n > 0 {
		m.retentionPurged.Add(float64(n))
	}
}

// RetentionBehind records whether the last retention round stopped at its
// time budget with old history left.
func (m *Metrics) RetentionBehind(behind bool) {
	if m != nil {
		v := 0.0
		if behind {
			v = 1
		}
		m.retentionBehind.Set(v)
	}
}

// ClusterNodes sets the number of live nodes this node counts when it
// splits endpoints' limits (0 while it holds no share).
func (m *Metrics) ClusterNodes(n int) {
	if m != nil {
		m.clusterNodes.Set(float64(n))
	}
}

// UnreadableEndpoints sets the number of endpoints whose stored values did
// not open at this node's last claim of them (the engine skips them).
func (m *Metrics) UnreadableEndpoints(n int) {
	if m != nil {
		m.unreadable.Set(float64(n))
	}
}

// Inbound counts an inbound gateway request by result.
func (m *Metrics) Inbound(result string) {
	if m != nil {
		m.inbound.WithLabelValues(result).Inc()
	}
}

// StatsMaxAge is how old the store gauges (herald_queue_depth,
// herald_dead_letters, herald_endpoints, herald_oldest_due_delivery_age_seconds)
// may be: reading them counts every
// delivery by state, so a scrape reuses an answer younger than this, and
// concurrent scrapes wait for one read instead of each running it.
const StatsMaxAge = 5 * time.Second

// stateCollector reads the queue depth and endpoint states from the store
// (so the gauges are true across nodes and restarts), at most once per
// StatsMaxAge.
type stateCollector struct {
	stats func(ctx context.Context) (store.Stats, error)

	mu     sync.Mutex // held while reading: concurrent scrapes share one read
	now    func() time.Time
	at     time.Time // when last is from
	last   store.Stats
	lastOK bool
}

// read answers the cached stats when younger than StatsMaxAge, else reads
// the store once (an error is not cached).
func (c *stateCollector) read() (store.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastOK && c.now().Sub(c.at) < StatsMaxAge {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		c.lastOK = false
		return st, err
	}
	c.last, c.at, c.lastOK = st, c.now(), true
	return st, nil
}

var (
	queueDepthDesc  = prometheus.NewDesc("herald_queue_depth", "Deliveries by state (pending, paused, succeeded, dead).", []string{"state"}, nil)
	deadLettersDesc = prometheus.NewDesc("herald_dead_letters", "Deliveries in the dead-letter queue (state dead).", nil, nil)
	endpointsDesc   = prometheus.NewDesc("herald_endpoints", "Endpoints by state (enabled, paused, disabled).", []string{"state"}, nil)
	oldestDueDesc   = prometheus.NewDesc("herald_oldest_due_delivery_age_seconds", "How long the claimable delivery due first has been due, in seconds (0 when none is due): deliveries waiting for a worker. Read with the other store gauges (at most once per 5 s).", nil, nil)
	scrapeErrorDesc = prometheus.NewDesc("herald_store_scrape_error", "1 if reading the store for these gauges failed at this scrape.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- deadLettersDesc
	ch <- endpointsDesc
	ch <- oldestDueDesc
	ch <- scrapeErrorDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.read()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	for _, s := range []store.DeliveryState{store.DeliveryPending, store.DeliveryPaused, store.DeliverySucceeded, store.DeliveryDead} {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(st.DeliveriesByState[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.GaugeValue, float64(st.DeliveriesByState[store.DeliveryDead]))
	// The age at this scrape, from the cached due time: a cached read
	// still ages the oldest delivery.
	age := 0.0
	if !st.OldestDue.IsZero() {
		c.mu.Lock()
		now := c.now()
		c.mu.Unlock()
		age = max(now.Sub(st.OldestDue).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(oldestDueDesc, prometheus.GaugeValue, age)
	for _, s := range []store.EndpointState{store.EndpointEnabled, store.EndpointPaused, store.EndpointDisabled} {
		ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(st.EndpointsByState[s]), string(s))
	}
}
