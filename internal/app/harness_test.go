package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for creating test databases

	"github.com/herald-webhooks/herald/internal/app"
)

const testAPIKey = "test-admin-key-0123456789abcdefghijkl"

// testDB returns a fresh, empty store for one test: a SQLite file, or —
// with HERALD_TEST_E2E_DB=postgres — a new database on the server of
// HERALD_TEST_POSTGRES_URL (dropped at cleanup), with the encryption key
// every node of it must share.
func testDB(t *testing.T) (db, encryptionKey string) {
	t.Helper()
	if os.Getenv("HERALD_TEST_E2E_DB") != "postgres" {
		return "sqlite:" + filepath.Join(t.TempDir(), "herald.db"), ""
	}
	admin := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if admin == "" {
		t.Fatal("HERALD_TEST_E2E_DB=postgres needs HERALD_TEST_POSTGRES_URL")
	}
	conn, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "herald_e2e_" + hex.EncodeToString(rnd[:])
	if _, err := conn.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		c, err := sql.Open("pgx", admin)
		if err == nil {
			c.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			c.Close()
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Set("pool_max_conns", "8")
	u.RawQuery = q.Encode()
	var key [32]byte
	rand.Read(key[:])
	return u.String(), base64.StdEncoding.EncodeToString(key[:])
}

// sqliteOnly skips a test that reads SQLite files directly.
func sqliteOnly(t *testing.T) {
	if os.Getenv("HERALD_TEST_E2E_DB") == "postgres" {
		t.Skip("reads the SQLite database files; the end-to-end run on PostgreSQL skips it")
	}
}

// herald is a running server for one test.
type herald struct {
	t    *testing.T
	base string
	m    *app.Main
	stop func() // stops the server (also done at cleanup)
}

// startHerald runs a real Herald (API + engine on a temporary SQLite file)
// on a loopback port. mod adjusts the configuration.
func startHerald(t *testing.T, mod func(*app.Config)) *herald {
	t.Helper()
	db, key := testDB(t)
	cfg := app.Config{
		Addr:           "127.0.0.1:0",
		DB:             db,
		EncryptionKey:  key,
		APIKey:         testAPIKey,
		Dev:            true,
		RetrySchedule:  []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond},
		AttemptTimeout: 10 * time.Second,
		RescueInterval: 100 * time.Millisecond,
		// On PostgreSQL a node alone delivers after two heartbeats (a
		// quarter interval apart); each heartbeat may take half an interval.
		HeartbeatInterval: 200 * time.Millisecond,
		// The circuit breaker would postpone retries of the always-failing
		// receivers of these tests; it has its own tests.
		BreakerThreshold: 1000,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &herald{t: t, base: "http://" + m.Addr(), m: m, stop: stop}
}

// call makes an API request and decodes the JSON answer into out (when not
// nil). It returns the status and the raw body.
func (h *herald) call(method, path string, body any, out any, hdr ...string) (int, []byte) {
	h.t.Helper()
	return h.callWithKey(testAPIKey, method, path, body, out, hdr...)
}

// callWithKey is call with another API key.
func (h *herald) callWithKey(key, method, path string, body any, out any, hdr ...string) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

type endpointResp struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Secret string `json:"secret"`
	URL    string `json:"url"`
}

func (h *herald) createEndpoint(tenant, url string) endpointResp {
	h.t.Helper()
	var ep endpointResp
	st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": tenant, "url": url}, &ep)
	if st != http.StatusCreated {
		h.t.Fatalf("create endpoint: %d %s", st, raw)
	}
	return ep
}

type publishResp struct {
	ID         string `json:"id"`
	Deliveries int    `json:"deliveries"`
	Duplicate  bool   `json:"duplicate"`
}

func (h *herald) publish(tenant, typ string, data string) publishResp {
	h.t.Helper()
	var p publishResp
	st, raw := h.call("POST", "/v1/events", `{"tenant":"`+tenant+`","type":"`+typ+`","data":`+data+`}`, &p)
	if st != http.StatusAccepted {
		h.t.Fatalf("publish: %d %s", st, raw)
	}
	return p
}

type deliveryResp struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"`
	EndpointID     string     `json:"endpoint_id"`
	State          string     `json:"state"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode int        `json:"last_status_code"`
	LastError      string     `json:"last_error"`
}

type attemptResp struct {
	Number          int       `json:"number"`
	StartedAt       time.Time `json:"started_at"`
	DurationMS      float64   `json:"duration_ms"`
	StatusCode      int       `json:"status_code"`
	Error           string    `json:"error"`
	ErrorDetail     string    `json:"error_detail"`
	Location        string    `json:"location"`
	ResponseExcerpt string    `json:"response_excerpt"`
}

func (h *herald) eventDeliveries(eventID string) []deliveryResp {
	h.t.Helper()
	var out struct{ Data []deliveryResp }
	if st, raw := h.call("GET", "/v1/events/"+eventID+"/deliveries", nil, &out); st != 200 {
		h.t.Fatalf("event deliveries: %d %s", st, raw)
	}
	return out.Data
}

func (h *herald) attempts(deliveryID string) []attemptResp {
	h.t.Helper()
	var out struct{ Data []attemptResp }
	if st, raw := h.call("GET", "/v1/deliveries/"+deliveryID+"/attempts", nil, &out); st != 200 {
		h.t.Fatalf("attempts: %d %s", st, raw)
	}
	return out.Data
}

// waitDelivery polls the event's single delivery until it reaches state
// (or the deadline) and returns it. Polling watches a state the engine
// reaches on its own; it asserts no timing.
func (h *herald) waitDelivery(eventID, state string, within time.Duration) deliveryResp {
	h.t.Helper()
	deadline := time.Now().Add(within)
	var last deliveryResp
	for time.Now().Before(deadline) {
		ds := h.eventDeliveries(eventID)
		if len(ds) != 1 {
			h.t.Fatalf("event %s has %d deliveries, want 1", eventID, len(ds))
		}
		last = ds[0]
		if last.State == state {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("delivery of %s is %+v after %s, want state %s", eventID, last, within, state)
	return last
}

// received is one request seen by a receiver.
type received struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// receiver is a loopback webhook receiver answering a script of statuses
// (the last repeats).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	script   []int
	headers  map[string]string
	requests []received
	block    chan struct{} // when set, handlers wait on it (black hole)
	body     string        // when set, the answer's body
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	return newReceiverWith(t, nil, statuses...)
}

// newReceiverWith wraps the receiver's handler (e.g. to count concurrent
// requests).
func newReceiverWith(t *testing.T, wrap func(http.Handler) http.Handler, statuses ...int) *receiver {
	r := &receiver{script: statuses, headers: map[string]string{}}
	var h http.Handler = http.HandlerFunc(r.serve)
	if wrap != nil {
		h = wrap(h)
	}
	r.Server = httptest.NewServer(h)
	t.Cleanup(func() {
		r.mu.Lock()
		if r.block != nil {
			close(r.block)
			r.block = nil
		}
		r.mu.Unlock()
		r.CloseClientConnections()
		r.Close()
	})
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.requests)
	r.requests = append(r.requests, received{At: time.Now(), Header: req.Header.Clone(), Body: body})
	status := 200
	if len(r.script) > 0 {
		status = r.script[min(n, len(r.script)-1)]
	}
	for k, v := range r.headers {
		w.Header().Set(k, v)
	}
	block, answer := r.block, r.body
	r.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-req.Context().Done():
		}
		return
	}
	w.WriteHeader(status)
	if answer != "" {
		io.WriteString(w, answer)
		return
	}
	io.WriteString(w, `{"answer":`+strconv.Itoa(status)+`}`)
}

func (r *receiver) got() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.requests...)
}
