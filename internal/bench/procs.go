package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/herald-webhooks/herald/internal/redact"
)

// runner holds what one bench run started: the temporary directory and the
// subprocesses, which close stops.
type runner struct {
	o        Options
	scenario string
	dir      string
	runID    string
	apiKey   string
	encKey   string
	log      io.Writer

	mu      sync.Mutex
	procs   []*proc
	nHerald int

	serveArgsShown []string
	sink           *traceSink // --trace-sink; nil: tracing off
}

func newRunner(o Options, scenario string) (*runner, error) {
	dir, err := os.MkdirTemp("", "herald-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temporary directory: %w", err)
	}
	r := &runner{o: o, scenario: scenario, dir: dir, runID: randomHex(4), apiKey: "hk_bench_" + randomHex(16),
		encKey: randomKey32(), log: o.Stderr}
	if o.TraceSink {
		if r.sink, err = startTraceSink(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("bench: trace sink: %w", err)
		}
	}
	return r, nil
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "bench %s: "+format+"\n", append([]any{r.scenario}, args...)...)
}

// close stops every subprocess still running and removes the temporary
// directory (unless --keep).
func (r *runner) close() {
	r.mu.Lock()
	procs := append([]*proc(nil), r.procs...)
	r.mu.Unlock()
	// Black holes first: their hanging connections would hold Herald's
	// graceful shutdown up to the attempt timeout.
	for _, p := range procs {
		if p.kind == "receiver" {
			p.stop(2 * time.Second)
		}
	}
	for _, p := range procs {
		p.stop(15 * time.Second)
	}
	if r.sink != nil {
		r.sink.close()
	}
	if r.o.Keep {
		r.logf("kept %s (databases and logs)", r.dir)
		return
	}
	os.RemoveAll(r.dir)
}

// showHeraldLogs prints the end of every Herald log to stderr (after a
// failure).
func (r *runner) showHeraldLogs() {
	r.mu.Lock()
	procs := append([]*proc(nil), r.procs...)
	r.mu.Unlock()
	for _, p := range procs {
		if p.kind == "herald" {
			if tail := p.logTail(20); tail != "" {
				fmt.Fprintf(r.log, "last lines of %s's log (%s):\n%s\n", p.name, p.logPath, indent(tail))
			}
		}
	}
}

// proc is one subprocess.
type proc struct {
	name, kind string
	group      bool // signalled as a process group (setGroup)
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	logPath    string
	logFile    *os.File
	done       chan struct{} // closed when the process has exited
	waitErr    error
	stopOnce   sync.Once
}

func (r *runner) start(kind, name string, args []string, env []string, stdout io.Writer) (*proc, error) {
	return r.startExe(kind, name, r.o.Exe, args, env, "", stdout)
}

// startExe starts exe with args in dir ("" for the bench's own), its
// stderr (and stdout, unless given) to <tmpdir>/<name>.log.
func (r *runner) startExe(kind, name, exe string, args []string, env []string, dir string, stdout io.Writer) (*proc, error) {
	logPath := filepath.Join(r.dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stderr = lf
	if stdout == nil {
		cmd.Stdout = lf
	} else {
		cmd.Stdout = stdout
	}
	setProcAttr(cmd)
	if kind == "peer" {
		setGroup(cmd)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, kind: kind, group: kind == "peer", cmd: cmd, stdin: stdin, logPath: logPath, logFile: lf, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM, and stdin closed), waits up to
// grace, then kills it.
func (p *proc) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		if p.exited() {
			return
		}
		p.stdin.Close()
		if p.group {
			_ = signalGroup(p.pid(), syscall.SIGTERM)
		} else {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-p.done:
		case <-time.After(grace):
			if p.group {
				_ = signalGroup(p.pid(), syscall.SIGKILL)
			}
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// logTail returns the last lines of the process's log.
func (p *proc) logTail(lines int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (p *proc) exitError() error {
	msg := fmt.Sprintf("%s exited (%v)", p.name, p.waitErr)
	if tail := p.logTail(15); tail != "" {
		msg += "; last lines of its log:\n" + indent(tail)
	}
	return errors.New(msg)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// childEnv is the environment without HERALD_* variables (they would be
// flag twins of herald serve and change the configuration under test) and
// without OTEL_* ones (tracing is on only with --trace-sink).
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERALD_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// receiverProc is a running `herald bench receiver`.
type receiverProc struct {
	*proc
	base string // http://127.0.0.1:port
	rc   *receiverClient
}

// startReceiver starts a receiver in mode (ModeOK, ModeBlackhole) with
// extra flags and waits for its address.
func (r *runner) startReceiver(ctx context.Context, name, mode string, extra ...string) (*receiverProc, error) {
	pr, pw := io.Pipe()
	args := append([]string{"bench", "receiver", "--addr", "127.0.0.1:0", "--mode", mode, "--exit-on-stdin-eof"}, extra...)
	p, err := r.start("receiver", name, args, childEnv(), pw)
	if err != nil {
		return nil, err
	}
	addrc := make(chan string, 1)
	go func() {
		br := bufio.NewReader(pr)
		line, _ := br.ReadString('\n')
		addrc <- strings.TrimSpace(line)
		io.Copy(io.Discard, br)
	}()
	go func() { <-p.done; pw.Close() }()
	select {
	case line := <-addrc:
		base, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			<-p.done
			return nil, fmt.Errorf("receiver %s did not start: %w", name, p.exitError())
		}
		return &receiverProc{proc: p, base: base, rc: &receiverClient{base: base, hc: controlClient()}}, nil
	case <-time.After(30 * time.Second):
		p.stop(time.Second)
		return nil, fmt.Errorf("receiver %s did not print its address within 30s", name)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// heraldProc is a running `herald serve`.
type heraldProc struct {
	*proc
	base string
	api  *apiClient
	db   string
}

// startHerald starts `herald serve --dev` on a free loopback port with a
// fresh database (unless --db names one) and waits for /readyz.
func (r *runner) startHerald(ctx context.Context, extra ...string) (*heraldProc, error) {
	r.mu.Lock()
	r.nHerald++
	n := r.nHerald
	r.mu.Unlock()
	db := r.o.DB
	if db == "sqlite" {
		sub := filepath.Join(r.dir, "herald"+strconv.Itoa(n))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, err
		}
		db = "sqlite:" + filepath.Join(sub, "bench.db")
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{"serve", "--dev", "--addr", addr, "--db", db, "--workers", strconv.Itoa(r.o.Workers)}
		if r.o.RetrySchedule != "" {
			args = append(args, "--retry-schedule", r.o.RetrySchedule)
		}
		args = append(args, extra...)
		args = append(args, r.o.ServeArgs...)
		shown := append([]string{"serve"}, args[1:]...)
		for i, a := range shown {
			if a == db && r.o.DB == "sqlite" {
				shown[i] = "sqlite:<tmpdir>/bench.db"
			}
			if strings.HasPrefix(a, "127.0.0.1:") {
				shown[i] = "127.0.0.1:<free>"
			}
			shown[i] = redact.URL(shown[i])
		}
		r.serveArgsShown = shown
		name := "herald" + strconv.Itoa(n)
		if try > 0 {
			name += "-" + strconv.Itoa(try)
		}
		env := childEnv("HERALD_API_KEY="+r.apiKey, "HERALD_ENCRYPTION_KEY="+r.encKey)
		if r.sink != nil {
			env = append(env, "OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT="+r.sink.url)
		}
		p, err := r.start("herald", name, args, env, nil)
		if err != nil {
			return nil, err
		}
		h := &heraldProc{proc: p, base: "http://" + addr, db: db}
		h.api = newAPIClient(h.base, r.apiKey, r.o.Workers+r.o.Publishers+r.o.Concurrency+16)
		err = h.waitReady(ctx, 60*time.Second)
		if err == nil {
			return h, nil
		}
		lastErr = err
		if !p.exited() || !strings.Contains(p.logTail(20), "address already in use") {
			p.stop(5 * time.Second)
			return nil, err
		}
	}
	return nil, lastErr
}

// waitReady waits until the API answers /readyz and the engine delivers:
// herald_cluster_nodes ≥ 1 on /metrics (on PostgreSQL a node claims nothing
// until it holds its share of the endpoints' limits, see docs/postgres.md;
// the scenarios measure the steady state, not that start).
func (h *heraldProc) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	hc := controlClient()
	delivering := regexp.MustCompile(`(?m)^herald_cluster_nodes [1-9]`)
	for {
		if h.exited() {
			err := fmt.Errorf("herald serve did not start: %w", h.exitError())
			if strings.Contains(err.Error(), "encryption key does not match") {
				// The bench gives every server a key of its own.
				err = fmt.Errorf("%w\n--db names a database an earlier run wrote: give each run a fresh, empty database (docs/BENCHMARKS.md)", err)
			}
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/metrics", nil)
				if resp, err = hc.Do(req); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if delivering.Match(b) {
						return nil
					}
					err = errors.New("the engine does not deliver yet (herald_cluster_nodes is 0)")
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("herald serve at %s not ready after %s (last: %v); log tail:\n%s", h.base, limit, err, indent(h.logTail(15)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// controlClient is a small client for readiness and control requests.
func controlClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
}

// loadClient is a client for the load: keep-alive connections for every
// concurrent request, no compression, no proxy.
func loadClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

var errStalled = errors.New("no progress")

// bodyExcerpt returns the start of an answer for error messages.
func bodyExcerpt(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		b = append(b[:300:300], "…"...)
	}
	return string(b)
}
