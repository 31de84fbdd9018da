package main

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// Every bad serve flag is refused before anything starts, with an error
// that names the flag and the rule.
func TestServeBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--attempt-timeout", "0s"}, "--attempt-timeout must be positive"},
		{[]string{"--heartbeat-interval", "0s"}, "--heartbeat-interval 0s: use 10ms to 1m (a starting node waits 3 intervals before it delivers)"},
		{[]string{"--heartbeat-interval", "-1s"}, "--heartbeat-interval -1s: use 10ms to 1m (a starting node waits 3 intervals before it delivers)"},
		{[]string{"--heartbeat-interval", "24h"}, "--heartbeat-interval 24h0m0s: use 10ms to 1m (a starting node waits 3 intervals before it delivers)"},
		{[]string{"--lease", "5s"}, "--lease 5s must be longer than --attempt-timeout 10s (a lease must outlive its attempt)"},
		{[]string{"--lease", "-1s", "--attempt-timeout", "2s"}, "--lease -1s must be longer than --attempt-timeout 2s (a lease must outlive its attempt)"},
		{[]string{"--workers", "0"}, "--workers must be at least 1"},
		{[]string{"--endpoint-concurrency", "-3"}, "--endpoint-concurrency must be 0 (workers/8) or more"},
		{[]string{"--fanout-chunk", "0"}, "--fanout-chunk must be at least 1"},
		{[]string{"--max-payload-bytes", "0"}, "--max-payload-bytes 0: at least 1024 (1 KiB): an event's envelope alone (id, type, tenant, occurred_at) is about 100 bytes, so a smaller cap refuses (413) nearly every publish; it is taken for a mistake (bytes given where KiB were meant)"},
		{[]string{"--max-payload-bytes", "64"}, "--max-payload-bytes 64: at least 1024 (1 KiB): an event's envelope alone (id, type, tenant, occurred_at) is about 100 bytes, so a smaller cap refuses (413) nearly every publish; it is taken for a mistake (bytes given where KiB were meant)"},
		{[]string{"--operator-tenant", "src_ops"}, `--operator-tenant "src_ops": tenant names starting with src_ (in any case) are reserved for inbound sources`},
		{[]string{"--public-url", "notaurl"}, `--public-url "notaurl": want the absolute base URL clients reach Herald at, https://HOST[:PORT][/PATH], without user information, query or fragment`},
		{[]string{"--breaker-threshold", "0"}, "--breaker-threshold must be at least 1"},
		{[]string{"--rescue-interval", "0s"}, "--rescue-interval must be positive"},
		{[]string{"--breaker-cooldown", "-5s"}, "--breaker-cooldown must be positive"},
		{[]string{"--housekeeping-interval", "0s"}, "--housekeeping-interval must be positive"},
		{[]string{"--dlq-spike-window", "0s"}, "--dlq-spike-window must be positive"},
		{[]string{"--dlq-spike-threshold", "-1"}, "--dlq-spike-threshold must be 0 (off) or more"},
		{[]string{"--log-level", "loud"}, `--log-level "loud": use debug, info, warn or error`},
		{[]string{"--allow-cidr", "10.0.0.0"}, `--allow-cidr "10.0.0.0": not a CIDR prefix such as 10.0.0.0/8`},
		{[]string{"--trusted-proxy", ""}, `--trusted-proxy "": empty value; give a CIDR range such as 10.0.0.0/8 or an IP address (leave the flag and HERALD_TRUSTED_PROXY out to trust no proxy)`},
		{[]string{"--trusted-proxy", "10.0.0.2/32,"}, `--trusted-proxy "10.0.0.2/32,": empty value; give a CIDR range such as 10.0.0.0/8 or an IP address (leave the flag and HERALD_TRUSTED_PROXY out to trust no proxy)`},
	} {
		if err := serveRefused(t, c.args...); err.Error() != c.want {
			t.Errorf("serve %v: err %v, want %q", c.args, err, c.want)
		}
	}
}

// serveRefused runs herald serve with args on a temporary database and
// a loopback port, and returns the error it refused to start with (as
// main reports it, naming a HERALD_* variable that set the flag). A serve
// that starts anyway is stopped by a 5 s deadline and fails the test,
// instead of running until the test binary's timeout.
func serveRefused(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	root := newRoot()
	root.SetArgs(append([]string{"serve", "--db", "sqlite:" + t.TempDir() + "/h.db", "--addr", "127.0.0.1:0"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		t.Fatalf("serve %v started", args)
	}
	return withEnvSources(cmd, err)
}

// TestServeBadEnvNamesTheVariable: a bad value set only through a flag's
// HERALD_* twin is refused with the flag's rule and the variable that set
// it (without repeating the value: a --db URL may hold a password).
func TestServeBadEnvNamesTheVariable(t *testing.T) {
	t.Setenv("HERALD_TENANT_CONCURRENCY", "-4")
	run := func(args ...string) string {
		root := newRoot()
		root.SetArgs(append([]string{"serve", "--db", "sqlite:" + t.TempDir() + "/h.db"}, args...))
		cmd, err := root.ExecuteC()
		if err == nil {
			t.Fatalf("serve %v started", args)
		}
		return withEnvSources(cmd, err).Error()
	}
	if got, want := run(), "--tenant-concurrency must be 0 (workers/4) or more (--tenant-concurrency was set by HERALD_TENANT_CONCURRENCY)"; got != want {
		t.Errorf("from the environment: %q, want %q", got, want)
	}
	if got, want := run("--tenant-concurrency", "-5"), "--tenant-concurrency must be 0 (workers/4) or more"; got != want {
		t.Errorf("from the flag (the variable is then ignored): %q, want %q", got, want)
	}
}

// TestServeRefusesDecreasingSchedule: a --retry-schedule with a delay
// shorter than the one before it is refused at start, naming the rule and
// the entries, whether set by the flag or by its twin HERALD_RETRY_SCHEDULE
// (which goes through the same parse); equal delays are allowed.
func TestServeRefusesDecreasingSchedule(t *testing.T) {
	run := func(args ...string) error { return serveRefused(t, args...) }
	if got, want := run("--retry-schedule", "2s,1s").Error(), `--retry-schedule: retry schedule entry 2 "1s": each delay must be at least the one before it (1s after 2s)`; got != want {
		t.Errorf("from the flag: %q, want %q", got, want)
	}
	t.Setenv("HERALD_RETRY_SCHEDULE", "30s,2m,1m")
	if got, want := run().Error(), `--retry-schedule: retry schedule entry 3 "1m": each delay must be at least the one before it (1m after 2m) (--retry-schedule was set by HERALD_RETRY_SCHEDULE)`; got != want {
		t.Errorf("from the environment: %q, want %q", got, want)
	}
	// Equal delays pass the schedule's check: the start stops at the
	// next refusal (the TLS pair), after it.
	if got, want := run("--retry-schedule", "1s,1s,2s", "--tls-cert", "c.pem").Error(), "--tls-cert and --tls-key go together: give both or neither"; got != want {
		t.Errorf("equal delays: %q, want %q", got, want)
	}
}

// TestServeEmptyEnvIsUnset: a flag's twin set to the empty string (what
// deploy/compose.yaml's `${HERALD_TRUSTED_PROXY:-}` gives when the host
// has none) counts as unset, not as an empty value to refuse.
func TestServeEmptyEnvIsUnset(t *testing.T) {
	t.Setenv("HERALD_TRUSTED_PROXY", "")
	t.Setenv("HERALD_WORKERS", "")
	// The last check before anything starts refuses, so serve stops there:
	// reaching it shows the empty twins passed every earlier one.
	_, _, err := execHerald(t, "", "serve", "--db", "sqlite:"+t.TempDir()+"/h.db", "--tls-cert", "c.pem")
	if err == nil || err.Error() != "--tls-cert and --tls-key go together: give both or neither" {
		t.Fatalf("err %v; want only the TLS pair refused (the empty twins unset)", err)
	}
}

// TestServeDebugAddrInUse: a --debug-addr that cannot be listened on (a
// port in use) is refused at start with the flag and the reason, like
// --addr, instead of logging "pprof listening" and serving without the
// profiles; the database is not created.
func TestServeDebugAddrInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	// A serve that starts anyway stops at the deadline (and fails below).
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	root := newRoot()
	root.SetArgs([]string{"serve", "--db", "sqlite:" + dir + "/h.db", "--addr", "127.0.0.1:0", "--debug-addr", busy.Addr().String()})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err = root.ExecuteContext(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "--debug-addr "+busy.Addr().String()+": ") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("serve with --debug-addr in use: err %v, want a refusal naming --debug-addr", err)
	}
	if _, err := os.Stat(dir + "/h.db"); !os.IsNotExist(err) {
		t.Fatalf("the database was created: %v", err)
	}
}
