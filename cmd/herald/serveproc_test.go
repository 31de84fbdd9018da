package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// serveProcess starts the herald binary bin as `serve --addr <a free
// loopback port> --db db args…`, with HERALD_API_KEY=key and env added to
// the environment, and waits (up to about 10 s) for /readyz to answer 200.
// It answers the process, for the test to kill, and the node's base URL.
// At the end of the test the process is killed; its log (stderr) is shown
// if the test failed.
func serveProcess(t *testing.T, bin, db, key string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--db", db}, args...)...)
	cmd.Env = append(append(os.Environ(), "HERALD_API_KEY="+key), env...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i > 200 {
			t.Fatalf("server did not become ready: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cmd, base
}

// adminCall sends method path with the JSON body (may be empty) to the
// node at base with the API key key and answers the response body; a
// transport error or a status of 300 or more fails the test.
func adminCall(t *testing.T, key, base, method, path, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}
