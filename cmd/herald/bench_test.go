package main

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBenchScenarios runs every scenario of `herald bench` at a tiny size
// with the real binary and checks that the last line of stdout is one JSON
// object with the documented fields, all > 0.
func TestBenchScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the herald binary and runs the benchmarks at a tiny size")
	}
	bin := buildHerald(t)
	common := []string{"--json", "--workers", "16", "--publishers", "8", "--timeout", "2m"}
	for _, tc := range []struct {
		scenario string
		args     []string
		fields   []string
		// indicative: targets this tiny run must mark as not applying
		// (applies false, a note saying why): its size is not the target's.
		indicative []string
	}{
		{"drain", []string{"--events", "50", "--endpoints", "2"},
			[]string{"deliveries_per_second", "reference_per_second", "ratio", "drain_seconds", "deliveries"}, nil},
		{"latency", []string{"--rate", "50", "--duration", "1s"},
			[]string{"p50_ms", "p95_ms", "p99_ms", "deliveries", "events_published"}, []string{"p99_ms"}},
		{"publish", []string{"--concurrency", "4", "--duration", "1s"},
			[]string{"events_per_second", "p50_ms", "p99_ms", "events"}, nil},
		{"isolation", []string{"--endpoints", "5", "--rate", "20", "--duration", "1s", "--events", "20", "--blackholes-first"},
			[]string{"blackholes_first", "p99_ratio", "throughput_ratio", "baseline_p99_ms", "blackhole_p99_ms", "baseline_deliveries_per_second", "blackhole_deliveries_per_second", "blackholed"}, nil},
		{"inbound", []string{"--concurrency", "4", "--rate", "50", "--duration", "1s"},
			[]string{"requests_per_second", "ack_p50_ms", "ack_p99_ms", "acknowledged"}, []string{"ack_p99_ms", "requests_per_second"}},
		{"fairness", []string{"--endpoints", "5", "--rate", "20", "--duration", "1s"},
			[]string{"p99_ratio", "alone_p99_ms", "p99_ms", "a_requests"}, []string{"p99_ratio"}},
		{"fanout", []string{"--endpoints", "20", "--events", "2", "--rate", "20", "--duration", "1s"},
			[]string{"publish_p99_ratio", "alone_publish_p99_ms", "publish_p99_ms", "a_deliveries", "a_deliveries_per_second"}, []string{"publish_p99_ratio"}},
		{"backlog", []string{"--size", "200", "--events", "20", "--endpoints", "2"},
			[]string{"throughput_ratio", "rss_bytes", "rss_peak_bytes", "setup_seconds", "backlog_deliveries", "pending_deliveries", "empty_per_second", "backlog_per_second"}, []string{"throughput_ratio", "rss_bytes"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			cmd := exec.Command(bin, append(append([]string{"bench", tc.scenario}, common...), tc.args...)...)
			cmd.Env = benchEnv()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("herald bench %s: %v\nstdout:\n%s\nstderr:\n%s", tc.scenario, err, stdout.String(), stderr.String())
			}
			t.Logf("%s took %s", tc.scenario, time.Since(start).Round(time.Millisecond))
			lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			var v map[string]any
			if err := json.Unmarshal([]byte(last), &v); err != nil {
				t.Fatalf("last line is not JSON: %v\n%s", err, stdout.String())
			}
			if len(lines) < 5 {
				t.Fatalf("no table before the JSON:\n%s", stdout.String())
			}
			if v["scenario"] != tc.scenario || v["db"] != "sqlite" {
				t.Errorf("scenario %v db %v", v["scenario"], v["db"])
			}
			for _, f := range tc.fields {
				n, ok := v[f].(float64)
				if !ok || !(n > 0) {
					t.Errorf("%s = %v, want a number > 0", f, v[f])
				}
			}
			m, _ := v["machine"].(map[string]any)
			for _, f := range []string{"cores", "gomaxprocs", "mem_total_bytes"} {
				if n, _ := m[f].(float64); !(n > 0) {
					t.Errorf("machine.%s = %v", f, m[f])
				}
			}
			if gv, _ := m["go_version"].(string); !strings.HasPrefix(gv, "go") {
				t.Errorf("machine.go_version = %v", m["go_version"])
			}
			ts, _ := v["targets"].([]any)
			if len(ts) == 0 {
				t.Errorf("no targets in %s", last)
			}
			for _, x := range ts {
				tg, _ := x.(map[string]any)
				if m, _ := tg["metric"].(string); slices.Contains(tc.indicative, m) && (tg["applies"] != false || tg["note"] == nil) {
					t.Errorf("target %v of a run smaller than the target's: applies %v, note %v; want false and a note", tg["metric"], tg["applies"], tg["note"])
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}

	t.Run("inbound-peer-url", func(t *testing.T) { testBenchPeerURL(t, bin, common) })
	t.Run("inbound-peer-express-bullmq", func(t *testing.T) { testBenchPeerExpress(t, bin, common) })
	t.Run("inbound-peer-cannot-start", func(t *testing.T) { testBenchPeerCannotStart(t, bin, common) })
	t.Run("fanout-separate-a", func(t *testing.T) { testBenchFanoutSeparateA(t, bin, common) })
	t.Run("interrupt", func(t *testing.T) { testBenchInterrupt(t, bin) })
	t.Run("unknown", func(t *testing.T) {
		out, err := exec.Command(bin, "bench", "nope").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `unknown scenario "nope"`) {
			t.Fatalf("bench nope: %v\n%s", err, out)
		}
	})
}

// testBenchFanoutSeparateA runs the fanout scenario with tenant A on a
// Herald process of its own: every one of A's deliveries arrives once (from
// A's process), the run says so (a_process), and the target is marked as
// not applying (the ratio measures the machine, not Herald).
func testBenchFanoutSeparateA(t *testing.T, bin string, common []string) {
	args := append(append([]string{"bench", "fanout"}, common...), "--endpoints", "20", "--events", "2", "--rate", "20", "--duration", "1s", "--separate-a")
	cmd := exec.Command(bin, args...)
	cmd.Env = benchEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("herald %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, stdout.String())
	}
	if v["a_process"] != "separate" {
		t.Errorf("a_process = %v, want separate", v["a_process"])
	}
	if v["a_deliveries"] != float64(40) || v["a_duplicates"] != float64(0) {
		t.Errorf("A's deliveries %v (duplicates %v), want 40 once each", v["a_deliveries"], v["a_duplicates"])
	}
	if !strings.Contains(stderr.String(), "A on a Herald process of its own") {
		t.Errorf("no sign in the progress that A ran on a process of its own:\n%s", stderr.String())
	}
	ts, _ := v["targets"].([]any)
	for _, x := range ts {
		tg, _ := x.(map[string]any)
		if tg["metric"] == "publish_p99_ratio" && (tg["applies"] != false || !strings.Contains(fmt.Sprint(tg["note"]), "--separate-a")) {
			t.Errorf("publish_p99_ratio with --separate-a: applies %v, note %v; want false and a note naming --separate-a", tg["applies"], tg["note"])
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// testBenchInterrupt interrupts a run and checks that the Herald and
// receiver processes it started are gone.
func testBenchInterrupt(t *testing.T, bin string) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	cmd := exec.Command(bin, "bench", "latency", "--rate", "20", "--duration", "60s")
	cmd.Env = benchEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "publishing") {
				once = true
				close(started)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the bench did not start publishing within 60s")
	}
	children := childPIDs(cmd.Process.Pid)
	if len(children) < 2 {
		t.Fatalf("children of the bench: %v, want herald serve and a receiver", children)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an interrupted bench exited 0")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the bench did not exit within 30s of SIGINT")
	}
	for _, pid := range children {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("subprocess %d still running: %s", pid, b)
		}
	}
}

// buildHerald builds the binary into t.TempDir().
func buildHerald(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "herald")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// benchEnv is the environment without HERALD_* twins that would change the
// runs.
func benchEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			env = append(env, kv)
		}
	}
	return env
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// A 0 on the command line is refused with the flag's name, not silently
// taken for the scenario's default.
func TestBenchRefusesZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "latency", "--rate", "0"}, "bench latency: --rate must be positive (got 0)"},
		{[]string{"bench", "latency", "--duration", "0s"}, "bench latency: --duration must be positive (got 0)"},
		{[]string{"bench", "publish", "--concurrency", "0"}, "bench publish: --concurrency must be positive (got 0)"},
		{[]string{"bench", "drain", "--events", "0", "--endpoints", "0"}, "bench drain: --endpoints, --events must be positive (got 0)"},
		{[]string{"bench", "backlog", "--size", "0"}, "bench backlog: --size must be positive (got 0)"},
		{[]string{"bench", "drain", "--timeout", "0s"}, "bench drain: --timeout must be positive (got 0)"},
		{[]string{"bench", "drain", "--workers", "0"}, "bench drain: --workers must be positive (got 0)"},
	} {
		_, _, err := execHerald(t, "", c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
	}
}

// runBenchJSON runs herald bench with args and returns its JSON result.
func runBenchJSON(t *testing.T, bin string, env []string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bench"}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("herald bench %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, stdout.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})
	return v
}

// testBenchPeerURL: --peer with a URL sends the peer the same GitHub-signed
// requests as Herald (the same bodies, valid signatures with the bench's
// secret), and the result gives the peer's figures and the ratio.
func testBenchPeerURL(t *testing.T, bin string, common []string) {
	var (
		mu     sync.Mutex
		bodies = map[string]bool{}
		bad    int
	)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, []byte("bench-github-secret"))
		m.Write(b)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/in/github" || r.Header.Get("X-Hub-Signature-256") != "sha256="+hex.EncodeToString(m.Sum(nil)) || r.Header.Get("X-GitHub-Delivery") == "" {
			bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		bodies[string(b)] = true
	}))
	defer peer.Close()
	v := runBenchJSON(t, bin, benchEnv(), append(append([]string{"inbound"}, common...),
		"--concurrency", "4", "--rate", "50", "--duration", "1s", "--peer", peer.URL+"/in/github")...)
	for _, f := range []string{"requests_per_second", "peer_requests_per_second", "peer_ack_p99_ms", "peer_acknowledged", "peer_ratio"} {
		if n, ok := v[f].(float64); !ok || !(n > 0) {
			t.Errorf("%s = %v, want a number > 0", f, v[f])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if bad > 0 || len(bodies) == 0 {
		t.Errorf("the peer got %d requests with a wrong signature, path or id, and %d valid ones", bad, len(bodies))
	}
	if !bodies[`{"action":"bench","n":0,"pad":"`+strings.Repeat("x", 512-40)+`"}`] {
		t.Error("the peer did not get Herald's first body")
	}
}

// testBenchPeerExpress runs the repository's Express + BullMQ + Redis peer
// beside Herald: every request it acknowledged is forwarded by its worker.
// It needs node, the peer's npm packages (npm ci --prefix
// bench/peers/express-bullmq) and HERALD_TEST_REDIS_URL; without them it
// is skipped.
func testBenchPeerExpress(t *testing.T, bin string, common []string) {
	dir, err := filepath.Abs("../../bench/peers/express-bullmq")
	if err != nil {
		t.Fatal(err)
	}
	redis := os.Getenv("HERALD_TEST_REDIS_URL")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil || redis == "" {
		t.Skip("needs npm ci --prefix bench/peers/express-bullmq and HERALD_TEST_REDIS_URL")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("needs node")
	}
	v := runBenchJSON(t, bin, append(benchEnv(), "PEER_REDIS_URL="+redis), append(append([]string{"inbound"}, common...),
		"--concurrency", "4", "--rate", "50", "--duration", "1s", "--peer", "node "+filepath.Join(dir, "server.js"))...)
	for _, f := range []string{"peer_requests_per_second", "peer_ack_p99_ms", "peer_ratio", "peer_forwarded"} {
		if n, ok := v[f].(float64); !ok || !(n > 0) {
			t.Errorf("%s = %v, want a number > 0", f, v[f])
		}
	}
	acked, _ := v["peer_acknowledged"].(float64)
	if errs, _ := v["peer_errors"].(float64); errs != 0 {
		t.Errorf("peer_errors = %v", errs)
	}
	// peer_acknowledged is the throughput phase's; the forwards include the
	// latency phase's too.
	if fwd, _ := v["peer_forwarded"].(float64); fwd < acked {
		t.Errorf("the peer forwarded %v of more than %v acknowledged requests", fwd, acked)
	}
}

// testBenchPeerCannotStart: a peer command that cannot load its packages
// (Node's error, as when npm ci was not run) fails the run before Herald's
// phases, naming the missing module and what to run.
func testBenchPeerCannotStart(t *testing.T, bin string, common []string) {
	peer := `echo "Error: Cannot find module 'express'" >&2; echo "  code: 'MODULE_NOT_FOUND'" >&2; exit 1`
	cmd := exec.Command(bin, append(append([]string{"bench", "inbound"}, common...),
		"--concurrency", "4", "--rate", "50", "--duration", "1s", "--peer", peer)...)
	cmd.Env = benchEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("a peer that cannot start: the bench exited 0\n%s", stdout.String())
	}
	out := stderr.String()
	for _, want := range []string{"Cannot find module 'express'", "npm ci --prefix bench/peers/express-bullmq"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "providers sending") || strings.Contains(out, "(open loop)") {
		t.Errorf("Herald's phases ran before the peer was checked:\n%s", out)
	}
	// A script path that does not exist is not a missing package.
	cmd = exec.Command(bin, append(append([]string{"bench", "inbound"}, common...),
		"--concurrency", "4", "--rate", "50", "--duration", "1s", "--peer", `echo "Error: Cannot find module '/no/such/server.js'" >&2; exit 1`)...)
	cmd.Env = benchEnv()
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "script was not found") || strings.Contains(stderr.String(), "npm ci") {
		t.Errorf("a missing peer script: %v\n%s", err, stderr.String())
	}
}
