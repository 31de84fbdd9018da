package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Receiver modes.
const (
	// ModeOK answers every request with Status (default 204) at once.
	ModeOK = "ok"
	// ModeBlackhole reads the request and never answers: the connection
	// stays open until the client gives up.
	ModeBlackhole = "blackhole"
)

// ReceiverConfig configures `herald bench receiver`.
type ReceiverConfig struct {
	// Addr to listen on; default 127.0.0.1:0.
	Addr string
	// Mode is ModeOK or ModeBlackhole.
	Mode string
	// Status answered in ModeOK; default 204.
	Status int
	// RetryAfter, when set, is sent with every answer (use with 429/503).
	RetryAfter string
	// Track records each (path, X-Event-Id) once: duplicates are counted
	// apart and latencies kept. Without it only requests are counted.
	Track bool
}

// Stats are the arrivals at the paths under one prefix.
type Stats struct {
	Requests   int64 `json:"requests"`
	Unique     int64 `json:"unique"`
	Duplicates int64 `json:"duplicates"`
	// FirstNS and LastNS are the wall-clock arrival times (Unix ns) of the
	// first and last unique arrival.
	FirstNS int64 `json:"first_ns"`
	LastNS  int64 `json:"last_ns"`
}

type pathStats struct {
	Stats
	lat []int64 // arrival − sent_ns of unique arrivals that carried it
}

// receiver is the handler of `herald bench receiver`.
type receiver struct {
	cfg   ReceiverConfig
	mu    sync.Mutex
	paths map[string]*pathStats
	seen  map[string]struct{}
	bufs  sync.Pool
}

func newReceiver(cfg ReceiverConfig) *receiver {
	if cfg.Mode == "" {
		cfg.Mode = ModeOK
	}
	if cfg.Status == 0 {
		cfg.Status = http.StatusNoContent
	}
	return &receiver{cfg: cfg, paths: map[string]*pathStats{}, seen: map[string]struct{}{},
		bufs: sync.Pool{New: func() any { return new(bytes.Buffer) }}}
}

const controlPrefix = "/_bench/"

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		rv.control(w, r)
		return
	}
	buf := rv.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, _ = buf.ReadFrom(io.LimitReader(r.Body, 1<<20))
	now := time.Now().UnixNano()
	rv.record(r.URL.Path, r.Header.Get("X-Event-Id"), now, sentNS(buf.Bytes()))
	rv.bufs.Put(buf)
	if rv.cfg.Mode == ModeBlackhole {
		<-r.Context().Done() // hang until the client gives up
		return
	}
	if rv.cfg.RetryAfter != "" {
		w.Header().Set("Retry-After", rv.cfg.RetryAfter)
	}
	w.WriteHeader(rv.cfg.Status)
}

var sentKey = []byte(`"sent_ns":`)

// sentNS finds "sent_ns":<digits> in a body; 0 when absent.
func sentNS(body []byte) int64 {
	i := bytes.Index(body, sentKey)
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range body[i+len(sentKey):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func (rv *receiver) record(path, id string, now, sent int64) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	ps := rv.paths[path]
	if ps == nil {
		ps = &pathStats{}
		rv.paths[path] = ps
	}
	ps.Requests++
	if rv.cfg.Track && id != "" {
		key := path + "\x00" + id
		if _, dup := rv.seen[key]; dup {
			ps.Duplicates++
			return
		}
		rv.seen[key] = struct{}{}
		if sent > 0 {
			ps.lat = append(ps.lat, now-sent)
		}
	}
	ps.Unique++
	if ps.FirstNS == 0 || now < ps.FirstNS {
		ps.FirstNS = now
	}
	if now > ps.LastNS {
		ps.LastNS = now
	}
}

// stats aggregates the paths under prefix.
func (rv *receiver) stats(prefix string) Stats {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	var out Stats
	for p, ps := range rv.paths {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		out.Requests += ps.Requests
		out.Unique += ps.Unique
		out.Duplicates += ps.Duplicates
		if ps.FirstNS != 0 && (out.FirstNS == 0 || ps.FirstNS < out.FirstNS) {
			out.FirstNS = ps.FirstNS
		}
		out.LastNS = max(out.LastNS, ps.LastNS)
	}
	return out
}

func (rv *receiver) latencies(prefix string) []int64 {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := []int64{}
	for p, ps := range rv.paths {
		if strings.HasPrefix(p, prefix) {
			out = append(out, ps.lat...)
		}
	}
	return out
}

// control serves GET /_bench/stats?prefix= and GET /_bench/latencies?prefix=.
func (rv *receiver) control(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	var v any
	switch r.URL.Path {
	case controlPrefix + "stats":
		v = rv.stats(prefix)
	case controlPrefix + "latencies":
		v = struct {
			LatenciesNS []int64 `json:"latencies_ns"`
		}{rv.latencies(prefix)}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// RunReceiver listens on cfg.Addr, writes "listening http://ADDR" as its
// first line to out, and serves until ctx ends; then it closes every
// connection at once (black-holed requests included).
func RunReceiver(ctx context.Context, cfg ReceiverConfig, out io.Writer) error {
	switch cfg.Mode {
	case "", ModeOK, ModeBlackhole:
	default:
		return fmt.Errorf("--mode %q: use %s or %s", cfg.Mode, ModeOK, ModeBlackhole)
	}
	if cfg.Status != 0 && (cfg.Status < 200 || cfg.Status > 599) {
		return fmt.Errorf("--status %d: want an HTTP status 200–599", cfg.Status)
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: newReceiver(cfg), ReadHeaderTimeout: 30 * time.Second}
	if _, err := fmt.Fprintf(out, "listening http://%s\n", ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return srv.Close()
}

// receiverClient reads a receiver's control endpoint.
type receiverClient struct {
	base string // http://127.0.0.1:port
	hc   *http.Client
}

func (c *receiverClient) get(ctx context.Context, what, prefix string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+controlPrefix+what+"?prefix="+prefix, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("receiver %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("receiver %s%s: %s", c.base, what, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (c *receiverClient) stats(ctx context.Context, prefix string) (Stats, error) {
	var s Stats
	err := c.get(ctx, "stats", prefix, &s)
	return s, err
}

func (c *receiverClient) latencies(ctx context.Context, prefix string) ([]int64, error) {
	var v struct {
		LatenciesNS []int64 `json:"latencies_ns"`
	}
	err := c.get(ctx, "latencies", prefix, &v)
	return v.LatenciesNS, err
}

func itoa(i int) string { return strconv.Itoa(i) }
