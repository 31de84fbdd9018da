package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitsReceiver records, for one endpoint, how many requests were in
// flight at once at most and when each request arrived.
type limitsReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	inflight int
	maxIn    int
	arrivals []time.Time
	ids      map[string]bool
}

func newLimitsReceiver(t *testing.T, hold time.Duration) *limitsReceiver {
	r := &limitsReceiver{ids: map[string]bool{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.inflight++
		r.maxIn = max(r.maxIn, r.inflight)
		r.arrivals = append(r.arrivals, time.Now())
		r.mu.Unlock()
		io.Copy(io.Discard, req.Body)
		time.Sleep(hold)
		r.mu.Lock()
		r.inflight--
		r.ids[req.Header.Get("X-Event-Id")] = true
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *limitsReceiver) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// maxInWindow is the largest number of arrivals within any window of
// length w.
func (r *limitsReceiver) maxInWindow(w time.Duration) int {
	r.mu.Lock()
	a := append([]time.Time(nil), r.arrivals...)
	r.mu.Unlock()
	sort.Slice(a, func(i, j int) bool { return a[i].Before(a[j]) })
	best, j := 0, 0
	for i := range a {
		for a[i].Sub(a[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// TestClusterLimitsHoldAcrossNodes: three nodes on one database share each
// endpoint's concurrency cap and rate limit (internal/delivery/cluster.go).
// A slow endpoint (answers after 300 ms, so never "fast") under
// --endpoint-concurrency 6 never sees more than 6 requests in flight from
// the three nodes together (each node alone would allow 6: 18 in all); an
// endpoint limited to 10 requests/s never receives more than
// R·T + nodes·max(2, ceil(burst/nodes)) = 10 + 3·2 = 16 requests in any
// second (the nodes' bursts, docs/postgres.md; each node alone would allow
// 10/s: 30/s in all), with one more allowed for loopback jitter between a
// node's send and the arrival. Then a fourth
// node joins while a slower endpoint (1.5 s answers) has the whole cap in
// flight, and the cap still holds.
func TestClusterLimitsHoldAcrossNodes(t *testing.T) {
	const (
		nodesN  = 3
		capN    = 6
		perSec  = 10
		slowN   = 60
		ratedN  = 40
		maxRate = perSec + nodesN*max(2, (2+nodesN-1)/nodesN) + 1
	)
	e := newClusterEnv(t, url.Values{"pool_max_conns": {"6"}})
	flags := []string{"--workers", "32", "--endpoint-concurrency", fmt.Sprint(capN), "--heartbeat-interval", "500ms",
		"--attempt-timeout", "5s", "--retry-schedule", "100ms,100ms,100ms,100ms,100ms,100ms,100ms", "--breaker-threshold", "100000"}
	var nodes []*clusterNode
	for i := range nodesN {
		nodes = append(nodes, e.start(fmt.Sprintf("n%d", i), flags...))
	}
	// Every node counts the three (they heartbeat every 500 ms: a heartbeat may take half of that, which a loaded CI machine needs; at 200 ms a node starved of its heartbeats stopped claiming and the cap was never reached).
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for {
			_, b, err := n.call("GET", "/metrics", "")
			if err == nil && regexp.MustCompile(`(?m)^herald_cluster_nodes 3$`).Match(b) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s never counted 3 nodes: %s", n.name, grepLines(string(b), "herald_cluster_nodes"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	slow := newLimitsReceiver(t, 300*time.Millisecond)
	rated := newLimitsReceiver(t, time.Millisecond)
	nodes[0].mustCall(t, "POST", "/v1/endpoints", `{"tenant":"slow","url":"`+slow.URL+`"}`)
	nodes[1].mustCall(t, "POST", "/v1/endpoints", fmt.Sprintf(`{"tenant":"rated","url":%q,"rate_limit_per_second":%d}`, rated.URL, perSec))
	for i := range max(slowN, ratedN) {
		if i < slowN {
			nodes[i%nodesN].mustCall(t, "POST", "/v1/events", fmt.Sprintf(`{"tenant":"slow","type":"t.x","data":{"n":%d}}`, i))
		}
		if i < ratedN {
			nodes[(i+1)%nodesN].mustCall(t, "POST", "/v1/events", fmt.Sprintf(`{"tenant":"rated","type":"t.x","data":{"n":%d}}`, i))
		}
	}
	started := time.Now()
	deadline = time.Now().Add(3 * time.Minute)
	for slow.delivered() < slowN || rated.delivered() < ratedN {
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes: slow endpoint %d/%d, rated endpoint %d/%d delivered", slow.delivered(), slowN, rated.delivered(), ratedN)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(started)

	slow.mu.Lock()
	maxIn := slow.maxIn
	slow.mu.Unlock()
	if maxIn > capN {
		t.Errorf("slow endpoint: %d requests in flight at once from %d nodes, want ≤ %d (the cluster-wide cap)", maxIn, nodesN, capN)
	}
	if maxIn <= capN/nodesN {
		t.Errorf("slow endpoint: at most %d requests in flight, want more than one node's share (%d): the nodes should deliver together", maxIn, capN/nodesN)
	}
	perSecond := rated.maxInWindow(time.Second)
	if perSecond > maxRate {
		t.Errorf("rated endpoint (%d/s): %d requests within one second, want ≤ %d", perSec, perSecond, maxRate)
	}
	t.Logf("slow endpoint: max %d in flight (cap %d); rated endpoint: max %d requests in 1 s (limit %d/s, bound %d); all delivered in %v",
		maxIn, capN, perSecond, perSec, maxRate, took.Round(time.Millisecond))

	// A fourth node joins while a slower endpoint (1.5 s answers) has the
	// whole cap in flight: it must not start attempts before the others'
	// attempts under their former, larger shares have ended.
	const slowerN = 40
	slower := newLimitsReceiver(t, 1500*time.Millisecond)
	nodes[2].mustCall(t, "POST", "/v1/endpoints", `{"tenant":"slower","url":"`+slower.URL+`"}`)
	for i := range slowerN {
		nodes[i%nodesN].mustCall(t, "POST", "/v1/events", fmt.Sprintf(`{"tenant":"slower","type":"t.x","data":{"n":%d}}`, i))
	}
	deadline = time.Now().Add(time.Minute)
	for {
		slower.mu.Lock()
		busy := slower.inflight
		slower.mu.Unlock()
		if busy >= capN {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slower endpoint never had %d requests in flight (%d)", capN, busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
	joined := e.start("n3", flags...)
	deadline = time.Now().Add(3 * time.Minute)
	for slower.delivered() < slowerN {
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes: slower endpoint %d/%d delivered", slower.delivered(), slowerN)
		}
		time.Sleep(20 * time.Millisecond)
	}
	slower.mu.Lock()
	maxIn = slower.maxIn
	slower.mu.Unlock()
	if maxIn > capN {
		t.Errorf("slower endpoint: %d requests in flight at once while a node joined, want ≤ %d", maxIn, capN)
	}
	_, b, _ := joined.call("GET", "/metrics", "")
	t.Logf("slower endpoint across a join: max %d in flight (cap %d); the new node: %s", maxIn, capN, regexp.MustCompile(`(?m)^herald_cluster_nodes .*$`).FindString(string(b)))
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
