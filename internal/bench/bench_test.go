package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/redact"
)

func TestPercentiles(t *testing.T) {
	var ns []int64
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		ns = append(ns, int64(i)*1e6)
	}
	p := percentiles(ns)
	if p.P50 != 50 || p.P95 != 95 || p.P99 != 99 || p.Max != 100 || p.N != 100 {
		t.Fatalf("percentiles(1..100 ms) = %+v", p)
	}
	if ns[0] != 100e6 {
		t.Fatal("percentiles sorted its input in place")
	}
	if p := percentiles([]int64{7e6}); p.P50 != 7 || p.P99 != 7 {
		t.Fatalf("one sample: %+v", p)
	}
	if p := percentiles(nil); p != (pcts{}) {
		t.Fatalf("no samples: %+v", p)
	}
}

func TestParseProm(t *testing.T) {
	text := `# HELP herald_queue_depth Deliveries by state.
# TYPE herald_queue_depth gauge
herald_queue_depth{state="pending"} 1e+06
herald_queue_depth{state="succeeded"} 42
herald_deliveries_deferred_total{reason="concurrency_cap"} 7
herald_deliveries_deferred_total{reason="circuit_open"} 3
herald_circuit_breaker_opened_total 2
`
	pv, err := parseProm(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := pv.byLabel("herald_queue_depth"); got["pending"] != 1e6 || got["succeeded"] != 42 || len(got) != 2 {
		t.Fatalf("byLabel = %v", got)
	}
	if got := pv.sum("herald_deliveries_deferred_total"); got != 10 {
		t.Fatalf("sum = %v", got)
	}
	if got := pv.sum("herald_circuit_breaker_opened_total"); got != 2 {
		t.Fatalf("sum of an unlabelled series = %v", got)
	}
}

func TestParseMeminfo(t *testing.T) {
	mi := parseMeminfo([]byte("MemTotal:       24684312 kB\nMemAvailable:   23000000 kB\nHugePages_Total:       0\nVmRSS:\t  1024 kB\n"))
	if mi["MemTotal"] != 24684312*1024 || mi["MemAvailable"] != 23000000*1024 || mi["HugePages_Total"] != 0 || mi["VmRSS"] != 1<<20 {
		t.Fatalf("parseMeminfo = %v", mi)
	}
}

func TestMachineAndProc(t *testing.T) {
	m := readMachine()
	if m.Cores <= 0 || m.GOMAXPROCS <= 0 || m.GoVersion == "" {
		t.Fatalf("readMachine = %+v", m)
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	if m.MemTotalBytes <= 0 {
		t.Fatalf("MemTotalBytes = %d", m.MemTotalBytes)
	}
	mem := readProcMem(os.Getpid())
	if mem.RSS <= 0 || mem.Peak < mem.RSS {
		t.Fatalf("readProcMem = %+v", mem)
	}
	deadline := time.Now().Add(2 * time.Second)
	for procCPU(os.Getpid()) == 0 && time.Now().Before(deadline) {
		for i := 0; i < 1e6; i++ {
			_ = strconv.Itoa(i)
		}
	}
	if procCPU(os.Getpid()) <= 0 {
		t.Fatal("procCPU of a busy process is 0")
	}
}

func TestEventMakerSizes(t *testing.T) {
	for _, size := range []int{minBodyBytes, 512, 4096} {
		m := newEventMaker("tenant-1", "bench.drain", size)
		for _, seq := range []int{0, 7, 123456} {
			env := m.envelope(seq, time.Now().UnixNano())
			if len(env) != size {
				t.Fatalf("size %d seq %d: envelope is %d bytes", size, seq, len(env))
			}
			var pub struct {
				Tenant, Type string
				OccurredAt   time.Time `json:"occurred_at"`
				Data         struct {
					Seq    string `json:"seq"`
					SentNS int64  `json:"sent_ns"`
				}
			}
			body := m.publishBody(seq, 1234567890123456789)
			if err := json.Unmarshal(body, &pub); err != nil {
				t.Fatalf("publish body %s: %v", body, err)
			}
			if pub.Tenant != "tenant-1" || pub.Type != "bench.drain" || pub.Data.SentNS != 1234567890123456789 || !pub.OccurredAt.Equal(m.occurred) {
				t.Fatalf("publish body decodes to %+v", pub)
			}
			if n, _ := strconv.Atoi(pub.Data.Seq); n != seq {
				t.Fatalf("seq %q, want %d", pub.Data.Seq, seq)
			}
			if got := sentNS(body); got != 1234567890123456789 {
				t.Fatalf("sentNS = %d", got)
			}
		}
	}
	if sentNS([]byte(`{"data":{}}`)) != 0 {
		t.Fatal("sentNS without the field")
	}
}

func TestReceiverTracksArrivals(t *testing.T) {
	rv := newReceiver(ReceiverConfig{Track: true})
	srv := httptest.NewServer(rv)
	defer srv.Close()
	post := func(path, id string, sent int64) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"data":{"sent_ns":`+strconv.FormatInt(sent, 10)+`}}`))
		req.Header.Set("X-Event-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	sent := time.Now().Add(-5 * time.Millisecond).UnixNano()
	if code := post("/a/e0", "evt_1", sent); code != http.StatusNoContent {
		t.Fatalf("status %d, want 204", code)
	}
	post("/a/e0", "evt_1", sent) // duplicate
	post("/a/e1", "evt_1", sent) // same event, other endpoint
	post("/b/e0", "evt_2", sent)

	rc := &receiverClient{base: srv.URL, hc: http.DefaultClient}
	st, err := rc.stats(context.Background(), "/a/")
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests != 3 || st.Unique != 2 || st.Duplicates != 1 || st.FirstNS == 0 || st.LastNS < st.FirstNS {
		t.Fatalf("stats /a/ = %+v", st)
	}
	lats, err := rc.latencies(context.Background(), "/a/")
	if err != nil {
		t.Fatal(err)
	}
	if len(lats) != 2 || lats[0] < int64(5*time.Millisecond) || lats[0] > int64(10*time.Second) {
		t.Fatalf("latencies = %v", lats)
	}
	if all, _ := rc.stats(context.Background(), "/"); all.Unique != 3 {
		t.Fatalf("stats / = %+v", all)
	}
}

func TestReceiverStatusAndBlackhole(t *testing.T) {
	thr := httptest.NewServer(newReceiver(ReceiverConfig{Status: 429, RetryAfter: "3600"}))
	defer thr.Close()
	resp, err := http.Post(thr.URL+"/x", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3600" {
		t.Fatalf("answer %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	bh := newReceiver(ReceiverConfig{Mode: ModeBlackhole})
	srv := httptest.NewServer(bh)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/b0", strings.NewReader("{}"))
	start := time.Now()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the black hole answered %d", resp.StatusCode)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Fatal("the black hole gave up early")
	}
	if st := bh.stats("/"); st.Requests != 1 {
		t.Fatalf("black hole stats = %+v", st)
	}
}

func TestResultJSON(t *testing.T) {
	res := &Result{Scenario: "drain", DB: "sqlite", Machine: Machine{Cores: 2}, StartedAt: time.Unix(0, 0), Elapsed: 1500 * time.Millisecond}
	res.add("deliveries_per_second", 1234.5, "")
	res.add("ratio", 0.5, "")
	res.target("ratio", ">=", 0.8, 0.5, "")
	res.target("rss_bytes", "<=", 200e6, 1e6, "size differs")
	j, err := res.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(j, '\n') {
		t.Fatal("JSON spans lines")
	}
	var v map[string]any
	if err := json.Unmarshal(j, &v); err != nil {
		t.Fatalf("%s: %v", j, err)
	}
	if v["scenario"] != "drain" || v["ratio"] != 0.5 || v["targets_met"] != false || v["elapsed_seconds"] != 1.5 {
		t.Fatalf("decoded %v", v)
	}
	if !bytes.HasPrefix(j, []byte(`{"scenario":"drain","db":"sqlite",`)) || !bytes.Contains(j, []byte(`"op":">="`)) {
		t.Fatalf("field order or escaping: %s", j)
	}
	var out bytes.Buffer
	if err := res.print(&out, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[len(lines)-1] != string(j) {
		t.Fatalf("last line is not the JSON:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "NOT MET") || !strings.Contains(out.String(), "does not apply; would be met") {
		t.Fatalf("table verdicts:\n%s", out.String())
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		o        Options
		want     string
	}{
		{"drain", Options{Events: -1}, "--events"},
		{"latency", Options{Rate: -5}, "--rate"},
		{"isolation", Options{Endpoints: 1}, "at least 2 endpoints"},
		{"drain", Options{BodyBytes: 10}, "--body-bytes"},
		{"drain", Options{DB: "mysql://x"}, "--db"},
		{"drain", Options{DB: "mysql://root:s3cret@db/x"}, `--db "mysql://…": use sqlite`},
		{"fanout", Options{Duration: time.Nanosecond}, "sends no event: give a duration of at least 2ms"},
		{"latency", Options{Duration: 500 * time.Microsecond, Rate: 1000}, "sends no event"},
	} {
		err := tc.o.Defaults(tc.scenario).validate(tc.scenario)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: err %v, want %q", tc.scenario, tc.o, err, tc.want)
		}
	}
	// URL schemes are case-insensitive (RFC 3986 §3.1), as serve reads them.
	for _, db := range []string{"POSTGRES://u@127.0.0.1/x", "PostgreSQL://u@127.0.0.1/x", "SQLite:b.db"} {
		if err := (Options{DB: db}).Defaults("drain").validate("drain"); err != nil {
			t.Errorf("--db %s: %v", db, err)
		}
	}
	if dbKind("POSTGRES://u@127.0.0.1/x") != "postgres" {
		t.Error("POSTGRES:// taken for SQLite")
	}
	for _, s := range []string{"drain", "latency", "publish", "isolation", "backlog", "inbound", "fairness", "fanout"} {
		if err := (Options{}).Defaults(s).validate(s); err != nil {
			t.Errorf("defaults of %s: %v", s, err)
		}
	}
	if err := Run(context.Background(), "inbound", Options{Rate: -1}); err == nil || !strings.Contains(err.Error(), "--rate must be positive") {
		t.Errorf("inbound with a negative rate: %v", err)
	}
	if err := Run(context.Background(), "nope", Options{}); err == nil || !strings.Contains(err.Error(), "drain") {
		t.Errorf("unknown scenario: %v", err)
	}
}

// TestRedactURL: a PostgreSQL --db shown in a result (the serve line, the
// JSON serve_args) carries no credential: its whole user information is
// hidden (redact.URL, Herald's one redactor; this package's own hid the
// password alone and showed a --db=URL argument, which does not parse as
// a URL, whole).
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://postgres:s3cretpw@127.0.0.1:5432/b?sslmode=disable": "postgres://xxxxx@127.0.0.1:5432/b?sslmode=disable",
		"postgres://postgres@127.0.0.1:5432/b":                          "postgres://xxxxx@127.0.0.1:5432/b",
		"--db=postgres://postgres:s3cretpw@127.0.0.1:5432/b":            "(not shown: it may hold a credential)",
		"sqlite:<tmpdir>/bench.db":                                      "sqlite:<tmpdir>/bench.db",
		"127.0.0.1:<free>":                                              "127.0.0.1:<free>",
		"--workers":                                                     "--workers",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("redact.URL(%q) = %q, want %q", in, got, want)
		}
	}
}
