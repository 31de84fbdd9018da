package metrics_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestDocumentedMetricsAreRegistered (issue 13 point 20): the metrics
// table of docs/operations.md names exactly the herald_* families the
// registry has (operations.md once said herald_inbound_requests_total was
// not emitted while it was).
func TestDocumentedMetricsAreRegistered(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(herald_[a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	m := metrics.New(func(context.Context) (store.Stats, error) { return store.Stats{}, nil })
	ch := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	var registered []string
	for d := range ch {
		if n := fqName.FindStringSubmatch(d.String()); n != nil && strings.HasPrefix(n[1], "herald_") {
			registered = append(registered, n[1])
		}
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if len(registered) < 10 {
		t.Fatalf("found only %d registered herald_ families (%v): the test is broken", len(registered), registered)
	}
	for _, n := range registered {
		if _, found := slices.BinarySearch(documented, n); !found {
			t.Errorf("%s is registered but not in docs/operations.md's metrics table", n)
		}
	}
	for _, n := range documented {
		if _, found := slices.BinarySearch(registered, n); !found {
			t.Errorf("docs/operations.md documents %s, which is not registered", n)
		}
	}
	if c := slices.Compact(slices.Clone(documented)); len(c) != len(documented) {
		t.Errorf("docs/operations.md's metrics table names a family twice: %v", documented)
	}
}
