package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	}{
		{"drain", []string{"--events", "50", "--endpoints", "2"},
			[]string{"deliveries_per_second", "reference_per_second", "ratio", "drain_seconds", "deliveries"}},
		{"latency", []string{"--rate", "50", "--duration", "1s"},
			[]string{"p50_ms", "p95_ms", "p99_ms", "deliveries", "events_published"}},
		{"publish", []string{"--concurrency", "4", "--duration", "1s"},
			[]string{"events_per_second", "p50_ms", "p99_ms", "events"}},
		{"isolation", []string{"--endpoints", "5", "--rate", "20", "--duration", "1s", "--events", "20"},
			[]string{"p99_ratio", "throughput_ratio", "baseline_p99_ms", "blackhole_p99_ms", "baseline_deliveries_per_second", "blackhole_deliveries_per_second", "blackholed"}},
		{"inbound", []string{"--concurrency", "4", "--rate", "50", "--duration", "1s"},
			[]string{"requests_per_second", "ack_p50_ms", "ack_p99_ms", "acknowledged"}},
		{"fairness", []string{"--endpoints", "5", "--rate", "20", "--duration", "1s"},
			[]string{"p99_ratio", "alone_p99_ms", "p99_ms", "a_requests"}},
		{"fanout", []string{"--endpoints", "20", "--events", "2", "--rate", "20", "--duration", "1s"},
			[]string{"publish_p99_ratio", "alone_publish_p99_ms", "publish_p99_ms", "a_deliveries", "a_deliveries_per_second"}},
		{"backlog", []string{"--size", "200", "--events", "20", "--endpoints", "2"},
			[]string{"throughput_ratio", "rss_bytes", "rss_peak_bytes", "setup_seconds", "backlog_deliveries", "pending_deliveries", "empty_per_second", "backlog_per_second"}},
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
			if ts, _ := v["targets"].([]any); len(ts) == 0 {
				t.Errorf("no targets in %s", last)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}

	t.Run("interrupt", func(t *testing.T) { testBenchInterrupt(t, bin) })
	t.Run("unknown", func(t *testing.T) {
		out, err := exec.Command(bin, "bench", "nope").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `unknown scenario "nope"`) {
			t.Fatalf("bench nope: %v\n%s", err, out)
		}
	})
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
