package metrics_test

import (
	"context"
	"crypto/x509"
	"maps"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestStoreGaugesReadAtMostOncePerMaxAge (issue 13 point 16): 30
// concurrent scrapes cost one store read; scrapes within StatsMaxAge reuse
// it; an older answer is read again; a failed read is not cached.
func TestStoreGaugesReadAtMostOncePerMaxAge(t *testing.T) {
	var reads atomic.Int64
	var fail atomic.Bool
	m := metrics.New(func(context.Context) (store.Stats, error) {
		reads.Add(1)
		if fail.Load() {
			return store.Stats{}, context.DeadlineExceeded
		}
		return store.Stats{DeliveriesByState: map[store.DeliveryState]int{store.DeliveryPending: 7}}, nil
	})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	m.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			if body := scrape(); !strings.Contains(body, `herald_queue_depth{state="pending"} 7`) {
				t.Errorf("scrape without the gauge:\n%s", body)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("30 concurrent scrapes read the store %d times; want 1", n)
	}
	advance(metrics.StatsMaxAge - time.Millisecond)
	scrape()
	if n := reads.Load(); n != 1 {
		t.Errorf("a scrape within StatsMaxAge read the store (%d reads); want the cached answer", n)
	}
	advance(time.Millisecond)
	fail.Store(true)
	if body := scrape(); !strings.Contains(body, "herald_store_scrape_error 1") {
		t.Errorf("failed read not reported:\n%s", body)
	}
	fail.Store(false)
	if body := scrape(); !strings.Contains(body, "herald_store_scrape_error 0") || reads.Load() != 3 {
		t.Errorf("after a failed read: %d reads; want the store read again (3)", reads.Load())
	}
}

// TestOldestDueAgeAndInFlight: the oldest due delivery's age is taken at
// the scrape from the (cached) due time, so a cached read still ages; 0
// when nothing is due or the due time is ahead. The in-flight gauges come
// from the function the engine registers, read at each scrape.
func TestOldestDueAgeAndInFlight(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	due := now.Add(-90 * time.Second)
	var reads atomic.Int64
	m := metrics.New(func(context.Context) (store.Stats, error) {
		reads.Add(1)
		return store.Stats{OldestDue: due}, nil
	})
	var mu sync.Mutex
	m.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); !strings.Contains(body, "herald_oldest_due_delivery_age_seconds 90\n") {
		t.Errorf("age not 90 s:\n%s", grep(body, "oldest"))
	}
	mu.Lock()
	now = now.Add(2 * time.Second) // within StatsMaxAge: the cached due time ages
	mu.Unlock()
	if body := scrape(); !strings.Contains(body, "herald_oldest_due_delivery_age_seconds 92\n") || reads.Load() != 1 {
		t.Errorf("cached age not 92 s after %d reads:\n%s", reads.Load(), grep(body, "oldest"))
	}
	mu.Lock()
	now, due = now.Add(metrics.StatsMaxAge), now.Add(time.Hour) // next due in the future
	mu.Unlock()
	if body := scrape(); !strings.Contains(body, "herald_oldest_due_delivery_age_seconds 0\n") {
		t.Errorf("a delivery due later is not 0:\n%s", grep(body, "oldest"))
	}

	if body := scrape(); !strings.Contains(body, "herald_attempts_in_flight 0\n") {
		t.Errorf("in flight before the engine registered:\n%s", grep(body, "in_flight"))
	}
	m.SetInFlight(func() metrics.InFlight { return metrics.InFlight{Total: 9, Tenants: 3, TenantMax: 5} })
	body := scrape()
	for _, want := range []string{"herald_attempts_in_flight 9\n", "herald_tenants_in_flight 3\n", "herald_tenant_attempts_in_flight_max 5\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, grep(body, "in_flight"))
		}
	}
	m.FirstAttempt(30 * time.Millisecond)
	if body := scrape(); !strings.Contains(body, `herald_first_attempt_latency_seconds_bucket{le="0.05"} 1`) || !strings.Contains(body, `herald_first_attempt_latency_seconds_bucket{le="0.025"} 0`) {
		t.Errorf("first-attempt latency not in its bucket:\n%s", grep(body, "first_attempt"))
	}
}

func grep(body, s string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTenantInFlightSeriesBounded: herald_tenant_attempts_in_flight names
// at most TenantSeriesMax tenants per scrape, the busiest (ties in tenant
// order, whatever the map's order), and sums the others under
// OtherTenants, which no tenant key can be; a tenant with nothing in flight
// has no series, and a scrape after tenants went idle has none of theirs.
func TestTenantInFlightSeriesBounded(t *testing.T) {
	if store.ValidTenant(metrics.OtherTenants) {
		t.Fatalf("OtherTenants %q is a valid tenant key", metrics.OtherTenants)
	}
	m := metrics.New(nil)
	var mu sync.Mutex
	var now map[string]int
	m.SetInFlight(func() metrics.InFlight {
		mu.Lock()
		defer mu.Unlock()
		v := metrics.InFlight{ByTenant: map[string]int{}}
		for tn, n := range now {
			v.ByTenant[tn] = n
			if n > 0 {
				v.Total += n
				v.Tenants++
				v.TenantMax = max(v.TenantMax, n)
			}
		}
		return v
	})
	set := func(byTenant map[string]int) { mu.Lock(); now = byTenant; mu.Unlock() }
	series := func() map[string]float64 {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "herald_tenant_attempts_in_flight" {
				continue
			}
			for _, s := range mf.GetMetric() {
				if len(s.GetLabel()) != 1 || s.GetLabel()[0].GetName() != "tenant" {
					t.Fatalf("labels %v, want tenant only", s.GetLabel())
				}
				out[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
			}
		}
		return out
	}
	// 15 tenants with attempts in flight (three tied at the 10th place)
	// and one with none.
	set(map[string]int{
		"umbrella": 9, "acme": 7, "initech": 7, "globex": 6, "hooli": 5, "stark": 4, "wayne": 4, "wonka": 3,
		"tyrell": 2, "soylent": 2, "cyberdyne": 2, "vandelay": 1, "oscorp": 1, "zorg": 1, "aperture": 1, "idle": 0,
	})
	want := map[string]float64{
		"umbrella": 9, "acme": 7, "initech": 7, "globex": 6, "hooli": 5, "stark": 4, "wayne": 4, "wonka": 3,
		"cyberdyne": 2, "soylent": 2, // tyrell, tied with them, comes after in tenant order
		metrics.OtherTenants: 2 + 1 + 1 + 1 + 1, // tyrell, vandelay, oscorp, zorg, aperture
	}
	if len(want) != metrics.TenantSeriesMax+1 {
		t.Fatalf("the test expects %d series, TenantSeriesMax is %d", len(want), metrics.TenantSeriesMax)
	}
	for range 20 { // the map's order changes from one scrape to the next
		if got := series(); !maps.Equal(got, want) {
			t.Fatalf("15 tenants in flight: series %v, want %v", got, want)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{`herald_tenant_attempts_in_flight{tenant="~other"} 6` + "\n", `herald_tenant_attempts_in_flight{tenant="umbrella"} 9` + "\n",
		"herald_attempts_in_flight 55\n", "herald_tenants_in_flight 15\n", "herald_tenant_attempts_in_flight_max 9\n"} {
		if !strings.Contains(rec.Body.String(), line) {
			t.Errorf("no %q in:\n%s", line, grep(rec.Body.String(), "in_flight"))
		}
	}
	// Most tenants went idle: their series are gone, and with no tenant
	// beyond the busiest there is no sum of the others.
	set(map[string]int{"zorg": 1, "acme": 2, "umbrella": 0})
	if got, want := series(), map[string]float64{"acme": 2, "zorg": 1}; !maps.Equal(got, want) {
		t.Fatalf("after most went idle: series %v, want %v", got, want)
	}
	set(nil)
	if got := series(); len(got) != 0 {
		t.Fatalf("nothing in flight: series %v, want none", got)
	}
}

// TestAlertedCountersExistAtZero: the counters the alert rules take
// increase() or rate() of (deploy/prometheus/herald-alerts.yml) have every
// label value from the start, at 0. A series born at its first increment
// loses that increment in increase(): after a start, the first dead
// letters never reached HeraldDeadLettersGrowing.
func TestAlertedCountersExistAtZero(t *testing.T) {
	rec := httptest.NewRecorder()
	metrics.New(nil).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, s := range []string{
		`herald_attempts_total{result="success"} 0`,
		`herald_attempts_total{result="failure"} 0`,
		`herald_deliveries_total{outcome="succeeded"} 0`,
		`herald_deliveries_total{outcome="retry"} 0`,
		`herald_deliveries_total{outcome="dead"} 0`,
		`herald_deliveries_poisoned_total 0`,
		`herald_inbound_requests_total{result="unreadable"} 0`,
	} {
		if !strings.Contains(rec.Body.String(), s+"\n") {
			t.Errorf("no %s before any attempt", s)
		}
	}
}

// TestReadyGauges: herald_ready is 1 while the readiness function answers
// "" and 0 otherwise, with herald_not_ready 1 for the reason it gives and
// 0 for the other, every series present at every scrape; neither family
// has a series before a readiness function is set.
func TestReadyGauges(t *testing.T) {
	m := metrics.New(nil)
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		var out []string
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(l, "herald_ready ") || strings.HasPrefix(l, "herald_not_ready{") {
				out = append(out, l)
			}
		}
		return strings.Join(out, ",")
	}
	if got := scrape(); got != "" {
		t.Errorf("before SetReady: %s; want no series", got)
	}
	var reason atomic.Value
	reason.Store("")
	m.SetReady(func() string { return reason.Load().(string) })
	for _, c := range []struct{ reason, want string }{
		{"", `herald_not_ready{reason="encryption_key"} 0,herald_not_ready{reason="store"} 0,herald_ready 1`},
		{metrics.NotReadyStore, `herald_not_ready{reason="encryption_key"} 0,herald_not_ready{reason="store"} 1,herald_ready 0`},
		{metrics.NotReadyEncryptionKey, `herald_not_ready{reason="encryption_key"} 1,herald_not_ready{reason="store"} 0,herald_ready 0`},
		{"", `herald_not_ready{reason="encryption_key"} 0,herald_not_ready{reason="store"} 0,herald_ready 1`},
	} {
		reason.Store(c.reason)
		if got := scrape(); got != c.want {
			t.Errorf("reason %q: %s; want %s", c.reason, got, c.want)
		}
	}
}

// TestTLSCertificateGauges: the first-expiring certificate's NotAfter and
// lifetime, and the latest NotBefore, in seconds, read at each scrape (a reload shows at the
// next one); no series before SetTLSCertificate (a node without TLS) or
// while it answers nil.
func TestTLSCertificateGauges(t *testing.T) {
	m := metrics.New(nil)
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		var out []string
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(l, "herald_tls_") {
				out = append(out, l)
			}
		}
		return strings.Join(out, ",")
	}
	if got := scrape(); got != "" {
		t.Errorf("without TLS: %s; want no series", got)
	}
	var served atomic.Pointer[x509.Certificate]
	m.SetTLSCertificate(func() (expiring, starting *x509.Certificate) { return served.Load(), served.Load() })
	if got := scrape(); got != "" {
		t.Errorf("no certificate: %s; want no series", got)
	}
	served.Store(&x509.Certificate{NotBefore: time.Unix(1790000000, 0), NotAfter: time.Unix(1797776000, 0)})
	if got, want := scrape(), "herald_tls_certificate_expiry_timestamp_seconds 1.797776e+09,herald_tls_certificate_lifetime_seconds 7.776e+06,herald_tls_certificate_not_before_timestamp_seconds 1.79e+09"; got != want {
		t.Errorf("got %s; want %s", got, want)
	}
	served.Store(&x509.Certificate{NotBefore: time.Unix(1797000000, 0), NotAfter: time.Unix(1804776000, 0)})
	if got := scrape(); !strings.Contains(got, "expiry_timestamp_seconds 1.804776e+09") {
		t.Errorf("after a reload: %s", got)
	}
	// The not-before of another certificate than the first to expire (a
	// leaf not valid yet behind an intermediate expiring first).
	inter := &x509.Certificate{NotBefore: time.Unix(1700000000, 0), NotAfter: time.Unix(1800000000, 0)}
	leaf := &x509.Certificate{NotBefore: time.Unix(1799000000, 0), NotAfter: time.Unix(1810000000, 0)}
	m.SetTLSCertificate(func() (expiring, starting *x509.Certificate) { return inter, leaf })
	if got, want := scrape(), "herald_tls_certificate_expiry_timestamp_seconds 1.8e+09,herald_tls_certificate_lifetime_seconds 1e+08,herald_tls_certificate_not_before_timestamp_seconds 1.799e+09"; got != want {
		t.Errorf("got %s; want %s", got, want)
	}
}
