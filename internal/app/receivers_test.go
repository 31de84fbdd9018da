package app_test

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReceiverSnippets: the Node (node:crypto, the standardwebhooks and svix
// npm packages) and Python (standard library) receivers of
// docs/receivers.md, run as they are printed there (docs/receivers/*,
// which the page includes verbatim), verify a live delivery from Herald
// and refuse a forged one, and a malformed X-Signature with a 400
// rather than an exception. The npm packages are those of interop/node
// (npm ci --prefix interop/node); without them those cases skip, unless
// HERALD_INTEROP_REQUIRE_NODE=1 (CI) makes that a failure.
func TestReceiverSnippets(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/receivers.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range []struct {
		name string
		cmd  []string
		file string
		npm  bool // needs interop/node/node_modules
	}{
		{"node", []string{"node"}, "receiver.mjs", false},
		{"node-standardwebhooks", []string{"node"}, "receiver-standardwebhooks.mjs", true},
		{"node-svix", []string{"node"}, "receiver-svix.mjs", true},
		{"python", []string{"python3"}, "receiver.py", false},
	} {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("..", "..", "docs", "receivers", rc.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), strings.TrimSpace(string(src))) {
				t.Fatalf("docs/receivers.md does not include %s verbatim", rc.file)
			}
			if _, err := exec.LookPath(rc.cmd[0]); err != nil {
				if os.Getenv("HERALD_INTEROP_REQUIRE_NODE") == "1" {
					t.Fatalf("%s is not installed", rc.cmd[0])
				}
				t.Skipf("%s is not installed", rc.cmd[0])
			}
			if rc.npm {
				// ESM resolves packages from the file's directory: run a copy
				// beside a link to interop/node's node_modules.
				mods, err := filepath.Abs(filepath.Join("..", "..", "interop", "node", "node_modules"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(mods); err != nil {
					if os.Getenv("HERALD_INTEROP_REQUIRE_NODE") == "1" {
						t.Fatalf("%s is missing (npm ci --prefix interop/node)", mods)
					}
					t.Skipf("%s is missing: run npm ci --prefix interop/node", mods)
				}
				dir := t.TempDir()
				if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
					t.Fatal(err)
				}
				copyPath := filepath.Join(dir, rc.file)
				if err := os.WriteFile(copyPath, src, 0o600); err != nil {
					t.Fatal(err)
				}
				path = copyPath
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()

			h := startHerald(t, nil)
			ep := h.createEndpoint("acme", "http://127.0.0.1:"+strconv.Itoa(port)+"/hooks")
			cmd := exec.Command(rc.cmd[0], append(rc.cmd[1:], path)...)
			cmd.Env = append(os.Environ(), "HERALD_SECRET="+ep.Secret, "PORT="+strconv.Itoa(port))
			lines := startReceiver(t, cmd)
			for i := 0; ; i++ {
				c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
				if err == nil {
					c.Close()
					break
				}
				if i > 500 {
					t.Fatalf("the %s receiver did not listen: %v", rc.name, err)
				}
				time.Sleep(20 * time.Millisecond)
			}

			// A forged delivery is refused.
			resp, err := http.Post("http://127.0.0.1:"+strconv.Itoa(port)+"/hooks", "application/json", strings.NewReader(`{"id":"evt_forged","type":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("forged request: %d, want 400", resp.StatusCode)
			}
			// So is one whose X-Signature is malformed in ways a verifier
			// must refuse, not fail on: a timestamp of a digit that is not
			// ASCII (0xB2 is "²" read as Latin-1, as HTTP servers decode
			// header bytes), one longer than any integer a language converts
			// (Python refuses over 4,300 digits), and a v1 that is not ASCII
			// (Python's hmac.compare_digest raises on such a str).
			now := strconv.FormatInt(time.Now().Unix(), 10)
			for _, sig := range []string{
				"t=\xb2,v1=" + strings.Repeat("0", 64),
				"t=" + strings.Repeat("1", 5000) + ",v1=" + strings.Repeat("0", 64),
				"t=" + now + ",v1=\xe9" + strings.Repeat("0", 63),
			} {
				req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/hooks", strings.NewReader(`{"id":"evt_forged","type":"x"}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Signature", sig)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("X-Signature %.40q: %v, want a 400 answer", sig, err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("X-Signature %.40q: %d, want 400", sig, resp.StatusCode)
				}
			}

			p := h.publish("acme", "invoice.paid", `{"amount":42}`)
			select {
			case line := <-lines:
				if line != "verified "+p.ID+" invoice.paid" {
					t.Fatalf("receiver printed %q, want verified %s invoice.paid", line, p.ID)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the receiver printed nothing for the live delivery")
			}
		})
	}
}

// TestQuickstartGoReceiver: the Go receiver of docs/quickstart.md, printed
// there verbatim from docs/receivers/receiver.go, builds and runs as it is
// (its imports, the SQLite driver included), refuses a forged delivery,
// handles a live one from Herald once and answers a redelivery of it
// {"duplicate":true} without handling it again.
func TestQuickstartGoReceiver(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../docs/receivers/receiver.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), strings.TrimSpace(string(src))) {
		t.Fatal("docs/quickstart.md does not include docs/receivers/receiver.go verbatim")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "receiver")
	if out, err := exec.Command(goCmd, "build", "-o", bin, "../../docs/receivers").CombinedOutput(); err != nil {
		t.Fatalf("go build docs/receivers: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()

	h := startHerald(t, nil)
	ep := h.createEndpoint("acme", "http://127.0.0.1:"+port+"/hook")
	cmd := exec.Command(bin)
	cmd.Dir = dir // receiver.db is written here
	cmd.Env = append(os.Environ(), "HERALD_SECRET="+ep.Secret, "PORT="+port)
	lines := startReceiver(t, cmd)
	url := "http://127.0.0.1:" + port + "/hook"
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if i > 500 {
			t.Fatalf("the Go receiver did not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"id":"evt_forged","type":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged request: %d, want 401", resp.StatusCode)
	}

	p := h.publish("acme", "invoice.paid", `{"amount":42}`)
	select {
	case line := <-lines:
		if line != "handled "+p.ID+" invoice.paid" {
			t.Fatalf("receiver printed %q, want handled %s invoice.paid", line, p.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver printed nothing for the live delivery")
	}

	// Herald sends the event again (a redelivery: same event id, signed anew).
	d := h.waitDelivery(p.ID, "succeeded", 30*time.Second)
	if st, raw := h.call("POST", "/v1/deliveries/"+d.ID+"/redeliver", nil, nil); st >= 300 {
		t.Fatalf("redeliver: %d %s", st, raw)
	}
	h.waitAttempts(p.ID, 2)
	if a := h.attempts(d.ID); len(a) != 2 || a[1].StatusCode != http.StatusOK || !strings.Contains(a[1].ResponseExcerpt, `"duplicate":true`) {
		t.Fatalf("the redelivery's attempt: %+v, want 200 {\"duplicate\":true}", a)
	}
	select {
	case line := <-lines:
		t.Fatalf("the redelivery was handled again: %q", line)
	default:
	}
}

// startReceiver starts a receiver process (its stderr is the test's) and
// returns its stdout lines, the channel closed when it ends; the process is
// killed when the test ends.
func startReceiver(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}
