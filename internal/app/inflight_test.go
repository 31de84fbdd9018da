package app_test

import (
	"strings"
	"testing"
	"time"
)

// TestTenantInFlightSeriesServed: /metrics serves
// herald_tenant_attempts_in_flight from the engine's own in-flight counts:
// while one receiver holds the attempts to three endpoints of two tenants,
// one series per tenant with its count; once the attempts ended, no tenant
// series at all.
func TestTenantInFlightSeriesServed(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	hold := newReceiver(t, 200)
	release := make(chan struct{})
	hold.mu.Lock()
	hold.block = release
	hold.mu.Unlock()
	for _, tenant := range []string{"acme", "acme", "globex"} {
		h.createEndpoint(tenant, hold.URL+"/"+tenant) // one endpoint each: no endpoint cap in the way
	}
	for _, tenant := range []string{"acme", "globex"} {
		h.publish(tenant, "invoice.paid", `{}`)
	}
	series := func() []string {
		_, body := h.call("GET", "/metrics", nil, nil)
		var out []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "herald_tenant_attempts_in_flight{") {
				out = append(out, l)
			}
		}
		return out
	}
	want := `herald_tenant_attempts_in_flight{tenant="acme"} 2,herald_tenant_attempts_in_flight{tenant="globex"} 1`
	var got []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // polling real I/O
		if got = series(); strings.Join(got, ",") == want {
			break
		}
	}
	if strings.Join(got, ",") != want {
		t.Fatalf("while the attempts are held: %q, want %q", got, want)
	}
	hold.mu.Lock()
	close(release)
	hold.block = nil
	hold.mu.Unlock()
	// The attempts end (the receiver answers 200), and their series with
	// them.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // polling real I/O
		if got = series(); len(got) == 0 {
			break
		}
	}
	if len(got) != 0 {
		t.Fatalf("after the attempts ended: %q, want no tenant series", got)
	}
}
