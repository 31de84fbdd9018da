package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKill9LosesNothing runs the real binary, kills it with SIGKILL while
// deliveries are in flight, restarts it on the same database, and checks
// that every (event, endpoint) pair reaches a final state and arrives.
func TestKill9LosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the herald binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "herald")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// Two slow receivers: every request takes 30 ms, so many are in flight.
	var mu sync.Mutex
	seen := map[string]int{} // "endpoint-n/event id" → requests
	mk := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			seen[name+"/"+r.Header.Get("X-Event-Id")]++
			mu.Unlock()
		}))
		t.Cleanup(s.Close)
		return s
	}
	r1, r2 := mk("a"), mk("b")

	db := "sqlite:" + filepath.Join(dir, "herald.db")
	const key = "crash-test-admin-key-0123456789abcdef"
	start := func() (*exec.Cmd, string) {
		return serveProcess(t, bin, db, key, nil, "--dev", "--workers", "8",
			"--attempt-timeout", "1s", "--lease", "3s", "--rescue-interval", "200ms", "--retry-schedule", "100ms,100ms,100ms,100ms")
	}
	call := func(base, method, path, body string) []byte { return adminCall(t, key, base, method, path, body) }

	cmd, base := start()
	call(base, "POST", "/v1/endpoints", `{"tenant":"acme","url":"`+r1.URL+`"}`)
	call(base, "POST", "/v1/endpoints", `{"tenant":"acme","url":"`+r2.URL+`"}`)
	const events = 200
	ids := make([]string, 0, events)
	for i := range events {
		var p struct{ ID string }
		json.Unmarshal(call(base, "POST", "/v1/events", fmt.Sprintf(`{"tenant":"acme","type":"file.created","data":{"n":%d}}`, i)), &p)
		ids = append(ids, p.ID)
	}
	// Kill once some, but not all, deliveries have arrived.
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= 20 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	mu.Lock()
	atKill := len(seen)
	mu.Unlock()
	if atKill >= 2*events {
		t.Fatalf("all %d deliveries arrived before the kill; the test proves nothing", atKill)
	}

	_, base = start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		final := 0
		for _, id := range ids {
			var ds struct{ Data []struct{ State string } }
			json.Unmarshal(call(base, "GET", "/v1/events/"+id+"/deliveries", ""), &ds)
			for _, d := range ds.Data {
				if d.State == "succeeded" {
					final++
				}
			}
		}
		if final == 2*events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries succeeded after restart", final, 2*events)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, id := range ids {
		for _, ep := range []string{"a", "b"} {
			n := seen[ep+"/"+id]
			if n == 0 {
				t.Errorf("event %s never reached endpoint %s", id, ep)
			}
			dups += max(n-1, 0)
		}
	}
	t.Logf("%d deliveries had arrived at the kill; %d duplicates afterwards (attempts in flight at the kill)", atKill, dups)
}

// TestInboundSurvivesKill9: the gateway answers 200 while the destination
// is down; the server is then killed with SIGKILL and restarted; every
// acknowledged event reaches the destination once it is up.
func TestInboundSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the herald binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "herald")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The destination: a port that refuses connections until the test
	// starts a server on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	destAddr := ln.Addr().String()
	ln.Close()

	db := "sqlite:" + filepath.Join(dir, "herald.db")
	const key = "inbound-crash-admin-key-0123456789abcdef"
	start := func() (*exec.Cmd, string) {
		return serveProcess(t, bin, db, key, nil, "--attempt-timeout", "1s", "--breaker-cooldown", "1s",
			"--rescue-interval", "200ms", "--lease", "3s", "--retry-schedule", "200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms")
	}
	cmd, base := start()
	req, _ := http.NewRequest("POST", base+"/v1/sources", strings.NewReader(`{"name":"gh","scheme":"github","secrets":["s3-crash-test-secret"],"destination_url":"http://`+destAddr+`/hook"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var src struct {
		IngestPath string `json:"ingest_path"`
	}
	json.NewDecoder(resp.Body).Decode(&src)
	resp.Body.Close()
	if resp.StatusCode != 201 || src.IngestPath == "" {
		t.Fatalf("create source: %d", resp.StatusCode)
	}
	const events = 30
	for i := range events {
		body := fmt.Sprintf(`{"n":%d}`, i)
		r, _ := http.NewRequest("POST", base+src.IngestPath, strings.NewReader(body))
		r.Header.Set("X-GitHub-Delivery", fmt.Sprintf("d-%d", i))
		r.Header.Set("X-Hub-Signature-256", "sha256="+hmacSHA256Hex("s3-crash-test-secret", body))
		start := time.Now()
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("ingest %d: %d", i, resp.StatusCode)
		}
		if d := time.Since(start); d > 900*time.Millisecond {
			t.Logf("ingest %d took %s (the destination is down; the ack must not wait for it)", i, d)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The destination comes up; Herald restarts.
	var mu sync.Mutex
	got := map[string]int{}
	dl, err := net.Listen("tcp", destAddr)
	if err != nil {
		t.Fatalf("listen on the destination address: %v", err)
	}
	dest := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[string(b)]++
		mu.Unlock()
	})}
	go dest.Serve(dl)
	t.Cleanup(func() { dest.Close() })
	start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged events reached the destination after the restart", n, events)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hmacSHA256Hex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}
