package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// execHerald runs the herald command line in-process with stdin and
// returns its stdout, stderr and error.
func execHerald(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// recorded is one request seen by the fake API.
type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// fakeAPI answers every request with status and answer and records it.
func fakeAPI(t *testing.T, status int, contentType, answer string) (*httptest.Server, func() recorded) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []recorded
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), b})
		mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, func() recorded {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("API saw %d requests, want 1", len(got))
		}
		return got[0]
	}
}

func TestEndpointsCreate(t *testing.T) {
	srv, last := fakeAPI(t, 201, "application/json", `{"id":"ep_1","state":"enabled","secret":"whsec_x"}`)
	out, _, err := execHerald(t, "", "endpoints", "create", "--server", srv.URL+"/", "--api-key", "k1",
		"--tenant", "acme", "--url", "https://example.com/hook",
		"--event-type", "file.*", "--event-type", "user.created",
		"--header", "X-Team=core", "--header", "X-Note=a=b,c",
		"--description", "demo", "--rate-limit", "50")
	if err != nil {
		t.Fatal(err)
	}
	r := last()
	if r.method != "POST" || r.path != "/v1/endpoints" || r.query != "" {
		t.Fatalf("request %s %s?%s", r.method, r.path, r.query)
	}
	if h := r.header.Get("Authorization"); h != "Bearer k1" {
		t.Fatalf("Authorization %q", h)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"tenant": "acme", "url": "https://example.com/hook", "description": "demo",
		"event_types":           []any{"file.*", "user.created"},
		"headers":               map[string]any{"X-Team": "core", "X-Note": "a=b,c"},
		"rate_limit_per_second": float64(50),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %s\nwant %v", r.body, want)
	}
	if want := "{\n  \"id\": \"ep_1\",\n  \"state\": \"enabled\",\n  \"secret\": \"whsec_x\"\n}\n"; out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
}

func TestEndpointsCreateMinimal(t *testing.T) {
	srv, last := fakeAPI(t, 201, "application/json", `{}`)
	if _, _, err := execHerald(t, "", "endpoints", "create", "--server", srv.URL, "--api-key", "k", "--tenant", "t", "--url", "https://x.test/"); err != nil {
		t.Fatal(err)
	}
	if b := string(last().body); b != `{"tenant":"t","url":"https://x.test/"}` {
		t.Fatalf("body %s", b)
	}
}

func TestEndpointsUpdateSendsOnlyGivenFields(t *testing.T) {
	srv, last := fakeAPI(t, 200, "application/json", `{}`)
	if _, _, err := execHerald(t, "", "endpoints", "update", "ep_1", "--server", srv.URL, "--api-key", "k",
		"--rate-limit", "0", "--event-type", ""); err != nil {
		t.Fatal(err)
	}
	r := last()
	if r.method != "PATCH" || r.path != "/v1/endpoints/ep_1" {
		t.Fatalf("request %s %s", r.method, r.path)
	}
	if b := string(r.body); b != `{"event_types":[],"rate_limit_per_second":0}` {
		t.Fatalf("body %s", b)
	}
}

func TestEventsPublishPreservesData(t *testing.T) {
	srv, last := fakeAPI(t, 202, "application/json", `{"id":"evt_9","deliveries":2}`)
	data := `{ "file_id": "f_1",  "note": "<a&b>", "n": 1.50, "version": 2 }`
	_, _, err := execHerald(t, "", "events", "publish", "--server", srv.URL, "--api-key", "k",
		"--tenant", "acme", "--type", "file.extraction.completed", "--data", data,
		"--id", "evt_9", "--idempotency-key", "idem-1")
	if err != nil {
		t.Fatal(err)
	}
	r := last()
	if r.method != "POST" || r.path != "/v1/events" || r.header.Get("Idempotency-Key") != "idem-1" || r.header.Get("Authorization") != "Bearer k" {
		t.Fatalf("request %s %s %v", r.method, r.path, r.header)
	}
	if !bytes.Contains(r.body, []byte(`"data":`+data)) {
		t.Fatalf("data bytes not preserved: %s", r.body)
	}
	var got struct {
		Tenant, Type, ID string
		Data             json.RawMessage
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.body)
	}
	if got.Tenant != "acme" || got.Type != "file.extraction.completed" || got.ID != "evt_9" || string(got.Data) != data {
		t.Fatalf("body %s", r.body)
	}
}

// TestEventsPublishOccurredAt: --occurred-at is sent as the body's
// occurred_at; a value that is not RFC 3339 is refused before any request.
func TestEventsPublishOccurredAt(t *testing.T) {
	srv, last := fakeAPI(t, 202, "application/json", `{}`)
	if _, _, err := execHerald(t, "", "events", "publish", "--server", srv.URL, "--api-key", "k",
		"--tenant", "acme", "--type", "a.b", "--data", `{}`, "--occurred-at", "2026-01-31T09:00:00+01:00"); err != nil {
		t.Fatal(err)
	}
	if want := `{"occurred_at":"2026-01-31T09:00:00+01:00","tenant":"acme","type":"a.b","data":{}}`; string(last().body) != want {
		t.Fatalf("body %s, want %s", last().body, want)
	}
	_, _, err := execHerald(t, "", "events", "publish", "--server", "http://127.0.0.1:1", "--api-key", "k",
		"--tenant", "acme", "--type", "a.b", "--data", `{}`, "--occurred-at", "yesterday")
	if err == nil || !strings.Contains(err.Error(), "--occurred-at") || !strings.Contains(err.Error(), "RFC 3339") {
		t.Fatalf("--occurred-at yesterday: %v, want an error naming the flag and RFC 3339", err)
	}
}

func TestEventsPublishDataFromStdin(t *testing.T) {
	srv, last := fakeAPI(t, 202, "application/json", `{}`)
	data := "{\"x\":\"\\u00e9\"}\n"
	if _, _, err := execHerald(t, data, "events", "publish", "--server", srv.URL, "--api-key", "k",
		"--tenant", "acme", "--type", "a.b", "--data-file", "-"); err != nil {
		t.Fatal(err)
	}
	r := last()
	if want := `{"tenant":"acme","type":"a.b","data":` + data + `}`; string(r.body) != want {
		t.Fatalf("body %q, want %q", r.body, want)
	}
	if r.header.Get("Idempotency-Key") != "" {
		t.Fatal("Idempotency-Key sent without the flag")
	}
}

func TestEventsPublishRejectsBadData(t *testing.T) {
	for _, args := range [][]string{
		{"--data", "{not json"},
		{},
		{"--data", "{}", "--data-file", "x"},
	} {
		_, _, err := execHerald(t, "", append([]string{"events", "publish", "--server", "http://127.0.0.1:1", "--api-key", "k", "--tenant", "a", "--type", "a.b"}, args...)...)
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	// A bad file is named as the file, not as --data.
	dir := t.TempDir()
	empty, bad := filepath.Join(dir, "empty.json"), filepath.Join(dir, "bad.json")
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(bad, []byte("{nope"), 0o600)
	for file, want := range map[string]string{empty: "--data-file " + empty + ": empty", bad: "--data-file " + bad + ": not valid JSON"} {
		_, _, err := execHerald(t, "", "events", "publish", "--server", "http://127.0.0.1:1", "--api-key", "k", "--tenant", "a", "--type", "a.b", "--data-file", file)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("--data-file %s: %v; want %q", file, err, want)
		}
	}
}

func TestProblemAnswer(t *testing.T) {
	problem := `{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"validation failed",
		"errors":[{"location":"body.url","message":"url rule scheme: https only","value":"http://x"},{"location":"body.tenant","message":"expected string"}]}`
	srv, _ := fakeAPI(t, 422, "application/problem+json", problem)
	out, errOut, err := execHerald(t, "", "endpoints", "create", "--server", srv.URL, "--api-key", "k", "--tenant", "t", "--url", "http://x")
	if err == nil {
		t.Fatal("no error for a 422 answer")
	}
	if !strings.Contains(err.Error(), "422") {
		t.Errorf("error %q lacks the status", err)
	}
	if out != "" {
		t.Errorf("stdout %q", out)
	}
	for _, want := range []string{
		"422 Unprocessable Entity: validation failed\n",
		`  body.url: url rule scheme: https only (value "http://x")`,
		"  body.tenant: expected string\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestProblemValuesPrintedAsGiven: a problem's value is printed as the
// API gave it, not HTML-escaped (json.Marshal wrote & as \u0026 and < >
// as \u003c \u003e).
func TestProblemValuesPrintedAsGiven(t *testing.T) {
	problem := `{"title":"Unprocessable Entity","status":422,"detail":"validation failed",
		"errors":[{"location":"body.url","message":"url rule scheme: https only","value":"http://x/?a=1&b=<2>"},{"location":"body.headers","message":"bad","value":{"X-A":"1&2"}}]}`
	srv, _ := fakeAPI(t, 422, "application/problem+json", problem)
	_, errOut, err := execHerald(t, "", "endpoints", "create", "--server", srv.URL, "--api-key", "k", "--tenant", "t", "--url", "http://x/?a=1&b=<2>")
	if err == nil {
		t.Fatal("no error for a 422 answer")
	}
	for _, want := range []string{`(value "http://x/?a=1&b=<2>")` + "\n", `(value {"X-A":"1&2"})` + "\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestPrintJSONKeepsHTMLCharacters: the CLI's own JSON output (herald
// version --json, herald migrate status --json) writes & < > as they are.
func TestPrintJSONKeepsHTMLCharacters(t *testing.T) {
	var b bytes.Buffer
	if err := printJSON(&b, map[string]string{"v": "a&b<c>"}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != `{"v":"a&b<c>"}`+"\n" {
		t.Errorf("printJSON = %q, want the value as it is, one line", got)
	}
}

func TestNonProblemErrorAnswer(t *testing.T) {
	srv, _ := fakeAPI(t, 502, "text/html", "<html>bad gateway</html>")
	_, errOut, err := execHerald(t, "", "events", "get", "evt_1", "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(errOut, "502 Bad Gateway\n<html>bad gateway</html>") {
		t.Fatalf("err %v stderr %q", err, errOut)
	}
}

func TestRoutes(t *testing.T) {
	cases := []struct {
		args                []string
		method, path, query string
	}{
		{[]string{"endpoints", "list", "--tenant", "acme", "--limit", "10", "--cursor", "c1"}, "GET", "/v1/endpoints", "cursor=c1&limit=10&tenant=acme"},
		{[]string{"endpoints", "list"}, "GET", "/v1/endpoints", ""},
		{[]string{"event-types", "list"}, "GET", "/v1/event-types", ""},
		{[]string{"event-types", "list", "--limit", "200", "--cursor", "c2"}, "GET", "/v1/event-types", "cursor=c2&limit=200"},
		{[]string{"endpoints", "get", "ep_1"}, "GET", "/v1/endpoints/ep_1", ""},
		{[]string{"endpoints", "get", "ep/1?x"}, "GET", "/v1/endpoints/ep%2F1%3Fx", ""},
		{[]string{"endpoints", "delete", "ep_1"}, "DELETE", "/v1/endpoints/ep_1", ""},
		{[]string{"endpoints", "secret", "ep_1"}, "GET", "/v1/endpoints/ep_1/secret", ""},
		{[]string{"endpoints", "secrets", "ep_1"}, "GET", "/v1/endpoints/ep_1/secrets", ""},
		{[]string{"endpoints", "revoke-secret", "ep_1", "sec_0123456789abcdef"}, "DELETE", "/v1/endpoints/ep_1/secrets/sec_0123456789abcdef", ""},
		{[]string{"endpoints", "revoke-secret", "ep_1", "sec/1"}, "DELETE", "/v1/endpoints/ep_1/secrets/sec%2F1", ""},
		{[]string{"endpoints", "deliveries", "ep_1", "--state", "dead"}, "GET", "/v1/endpoints/ep_1/deliveries", "state=dead"},
		{[]string{"endpoints", "deliveries", "ep_1", "--event-type", "file.created", "--since", "2026-01-31T09:00:00Z"}, "GET", "/v1/endpoints/ep_1/deliveries", "event_type=file.created&since=2026-01-31T09%3A00%3A00Z"},
		{[]string{"endpoints", "stats", "ep_1"}, "GET", "/v1/endpoints/ep_1/stats", "window=24h"},
		{[]string{"endpoints", "stats", "ep_1", "--window", "1h"}, "GET", "/v1/endpoints/ep_1/stats", "window=1h"},
		{[]string{"endpoints", "stats", "ep/1", "--window", "7d"}, "GET", "/v1/endpoints/ep%2F1/stats", "window=7d"},
		{[]string{"dlq", "list", "ep_1"}, "GET", "/v1/endpoints/ep_1/deliveries", "state=dead"},
		{[]string{"dlq", "list", "ep_1", "--since", "2026-01-31T09:00:00+01:00", "--event-type", "file.created", "--limit", "5"}, "GET", "/v1/endpoints/ep_1/deliveries",
			"event_type=file.created&limit=5&since=2026-01-31T09%3A00%3A00%2B01%3A00&state=dead"},
		{[]string{"dlq", "list", "--tenant", "acme"}, "GET", "/v1/deliveries", "state=dead&tenant=acme"},
		{[]string{"dlq", "list", "--tenant", "acme", "--since", "2026-01-31T09:00:00Z", "--cursor", "c1"}, "GET", "/v1/deliveries", "cursor=c1&since=2026-01-31T09%3A00%3A00Z&state=dead&tenant=acme"},
		{[]string{"dlq", "list"}, "GET", "/v1/deliveries", "state=dead"},
		{[]string{"dlq", "counts"}, "GET", "/v1/dead-letters", ""},
		{[]string{"dlq", "counts", "--tenant", "acme", "--since", "2026-01-31T09:00:00Z"}, "GET", "/v1/dead-letters", "since=2026-01-31T09%3A00%3A00Z&tenant=acme"},
		{[]string{"deliveries", "list"}, "GET", "/v1/deliveries", ""},
		{[]string{"deliveries", "list", "--tenant", "acme", "--state", "pending", "--event-type", "file.created", "--since", "2026-01-31T09:00:00Z", "--limit", "3"},
			"GET", "/v1/deliveries", "event_type=file.created&limit=3&since=2026-01-31T09%3A00%3A00Z&state=pending&tenant=acme"},
		{[]string{"events", "list", "--tenant", "acme", "--type", "file.x"}, "GET", "/v1/events", "tenant=acme&type=file.x"},
		{[]string{"events", "get", "evt_1"}, "GET", "/v1/events/evt_1", ""},
		{[]string{"events", "deliveries", "evt_1"}, "GET", "/v1/events/evt_1/deliveries", ""},
		{[]string{"deliveries", "get", "dlv_1"}, "GET", "/v1/deliveries/dlv_1", ""},
		{[]string{"deliveries", "attempts", "dlv_1"}, "GET", "/v1/deliveries/dlv_1/attempts", ""},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			srv, last := fakeAPI(t, 200, "application/json", `{"data":[],"next_cursor":""}`)
			out, _, err := execHerald(t, "", append(c.args, "--server", srv.URL, "--api-key", "k")...)
			if err != nil {
				t.Fatal(err)
			}
			r := last()
			if r.method != c.method || r.path != c.path || r.query != c.query {
				t.Fatalf("got %s %s?%s, want %s %s?%s", r.method, r.path, r.query, c.method, c.path, c.query)
			}
			if len(r.body) != 0 {
				t.Fatalf("unexpected body %s", r.body)
			}
			if out != "{\n  \"data\": [],\n  \"next_cursor\": \"\"\n}\n" {
				t.Fatalf("stdout %q", out)
			}
		})
	}
}

func TestClientEnvTwins(t *testing.T) {
	srv, last := fakeAPI(t, 204, "application/json", "")
	t.Setenv("HERALD_SERVER", srv.URL)
	t.Setenv("HERALD_API_KEY", "from-env")
	out, _, err := execHerald(t, "", "endpoints", "delete", "ep_1")
	if err != nil {
		t.Fatal(err)
	}
	if r := last(); r.header.Get("Authorization") != "Bearer from-env" || r.method != "DELETE" {
		t.Fatalf("request %s %v", r.method, r.header)
	}
	if out != "deleted ep_1\n" {
		t.Fatalf("stdout %q for an empty answer (204); want what was deleted", out)
	}
}

func TestClientUsageErrors(t *testing.T) {
	t.Setenv("HERALD_API_KEY", "")
	for _, args := range [][]string{
		{"endpoints", "get", "ep_1", "--server", "http://127.0.0.1:1"},               // no API key
		{"endpoints", "get", "ep_1", "--server", "localhost:8080", "--api-key", "k"}, // not a URL
		{"endpoints", "create", "--tenant", "t", "--api-key", "k"},                   // no --url
		{"endpoints", "update", "ep_1", "--api-key", "k"},                            // nothing to change
		{"endpoints", "update", "ep_1", "--header", "novalue", "--api-key", "k"},     // bad header
		{"endpoints", "list", "--limit", "-1", "--api-key", "k"},                     // bad limit
		{"endpoints", "get", "--api-key", "k"},                                       // no id
	} {
		if _, _, err := execHerald(t, "", args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestLimitOutOfRange: a --limit given is 1–1000; 0 is refused like -1
// (it was sent as no limit at all, the server's default of 50), and the
// error names the range; no request is made.
func TestLimitOutOfRange(t *testing.T) {
	for _, limit := range []string{"0", "-1", "1001"} {
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":[]}`)
		}))
		_, _, err := execHerald(t, "", "deliveries", "list", "--limit", limit, "--server", srv.URL, "--api-key", "k")
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "1 to 1000") {
			t.Errorf("--limit %s: error %v, want one naming the range 1 to 1000", limit, err)
		}
		if n := requests.Load(); n != 0 {
			t.Errorf("--limit %s: %d requests made", limit, n)
		}
	}
}

// TestEndpointsUpdateNothingNamesEveryFlag: an update without a change
// names every flag that makes one, --pin included.
func TestEndpointsUpdateNothingNamesEveryFlag(t *testing.T) {
	_, _, err := execHerald(t, "", "endpoints", "update", "ep_1", "--api-key", "k", "--server", "http://127.0.0.1:1")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, f := range []string{"--url", "--description", "--event-type", "--header", "--rate-limit", "--pin"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%q does not name %s", err, f)
		}
	}
}

// TestPostRoutes covers the commands that POST without a body and print the
// answer: pause, resume, enable, replay and redeliver.
func TestPostRoutes(t *testing.T) {
	cases := []struct {
		args   []string
		path   string
		answer string
	}{
		{[]string{"endpoints", "pause", "ep_1"}, "/v1/endpoints/ep_1/pause", `{"endpoint":{"id":"ep_1","state":"paused"},"held":3}`},
		{[]string{"endpoints", "resume", "ep_1"}, "/v1/endpoints/ep_1/resume", `{"endpoint":{"id":"ep_1","state":"enabled"},"released":3}`},
		{[]string{"endpoints", "enable", "ep/1"}, "/v1/endpoints/ep%2F1/enable", `{"endpoint":{"id":"ep/1","state":"enabled"},"released":7}`},
		{[]string{"deliveries", "replay", "dlv_1"}, "/v1/deliveries/dlv_1/replay", `{"replayed":1}`},
		{[]string{"deliveries", "redeliver", "dlv_1"}, "/v1/deliveries/dlv_1/redeliver", `{"replayed":1}`},
		{[]string{"dlq", "replay", "--delivery", "dlv_1"}, "/v1/deliveries/dlv_1/replay", `{"replayed":0}`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			srv, last := fakeAPI(t, 200, "application/json", c.answer)
			out, _, err := execHerald(t, "", append(c.args, "--server", srv.URL, "--api-key", "k")...)
			if err != nil {
				t.Fatal(err)
			}
			r := last()
			if r.method != "POST" || r.path != c.path || r.query != "" {
				t.Fatalf("got %s %s?%s, want POST %s", r.method, r.path, r.query, c.path)
			}
			if len(r.body) != 0 || r.header.Get("Content-Type") != "" {
				t.Fatalf("unexpected body %q (Content-Type %q)", r.body, r.header.Get("Content-Type"))
			}
			if r.header.Get("Authorization") != "Bearer k" {
				t.Fatalf("Authorization %q", r.header.Get("Authorization"))
			}
			var want bytes.Buffer
			if err := json.Indent(&want, []byte(c.answer), "", "  "); err != nil {
				t.Fatal(err)
			}
			if out != want.String()+"\n" {
				t.Fatalf("stdout %q, want %q", out, want.String()+"\n")
			}
		})
	}
}

func TestDLQReplayEndpoint(t *testing.T) {
	cases := []struct {
		args []string
		body string
	}{
		{nil, `{"state":"dead"}`},
		{[]string{"--since", "2026-01-31T09:00:00Z"}, `{"since":"2026-01-31T09:00:00Z","state":"dead"}`},
		{[]string{"--since", "2026-01-31T09:00:00Z", "--until", "2026-01-31T10:00:00Z"}, `{"since":"2026-01-31T09:00:00Z","state":"dead","until":"2026-01-31T10:00:00Z"}`},
		{[]string{"--event-type", "file.created", "--since", "2026-01-31T09:00:00.5+02:00"}, `{"event_type":"file.created","since":"2026-01-31T09:00:00.5+02:00","state":"dead"}`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			srv, last := fakeAPI(t, 200, "application/json", `{"replayed":4}`)
			out, _, err := execHerald(t, "", append([]string{"dlq", "replay", "ep_1", "--server", srv.URL, "--api-key", "k"}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			r := last()
			if r.method != "POST" || r.path != "/v1/endpoints/ep_1/replay" || r.query != "" {
				t.Fatalf("request %s %s?%s", r.method, r.path, r.query)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if string(r.body) != c.body {
				t.Fatalf("body %s, want %s", r.body, c.body)
			}
			if out != "{\n  \"replayed\": 4\n}\n" {
				t.Fatalf("stdout %q", out)
			}
		})
	}
}

// TestSinceDurationAgo checks that --since 90m or 2d is sent as the RFC 3339
// UTC time that long ago.
func TestSinceDurationAgo(t *testing.T) {
	for _, c := range []struct {
		arg string
		ago time.Duration
	}{{"90m", 90 * time.Minute}, {"2d", 48 * time.Hour}, {"36h", 36 * time.Hour}} {
		t.Run(c.arg, func(t *testing.T) {
			srv, last := fakeAPI(t, 200, "application/json", `{"data":[]}`)
			before := time.Now().UTC().Add(-c.ago).Truncate(time.Second)
			if _, _, err := execHerald(t, "", "dlq", "counts", "--since", c.arg, "--server", srv.URL, "--api-key", "k"); err != nil {
				t.Fatal(err)
			}
			after := time.Now().UTC().Add(-c.ago)
			q, err := url.ParseQuery(last().query)
			if err != nil {
				t.Fatal(err)
			}
			raw := q.Get("since")
			got, err := time.Parse(time.RFC3339, raw)
			if err != nil || !strings.HasSuffix(raw, "Z") {
				t.Fatalf("since %q: want an RFC 3339 UTC time (%v)", raw, err)
			}
			if got.Before(before) || got.After(after) {
				t.Fatalf("since %s, want between %s and %s", got, before, after)
			}
		})
	}
}

func TestSinceFromEnv(t *testing.T) {
	srv, last := fakeAPI(t, 200, "application/json", `{"data":[]}`)
	t.Setenv("HERALD_SINCE", "2026-01-31T09:00:00Z")
	if _, _, err := execHerald(t, "", "dlq", "list", "--tenant", "acme", "--server", srv.URL, "--api-key", "k"); err != nil {
		t.Fatal(err)
	}
	if q := last().query; q != "since=2026-01-31T09%3A00%3A00Z&state=dead&tenant=acme" {
		t.Fatalf("query %q", q)
	}
}

func TestOperationsUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"dlq", "list", "ep_1", "--tenant", "acme"},                     // both an endpoint and a tenant
		{"dlq", "list", "ep_1", "ep_2"},                                 // two endpoints
		{"dlq", "list", "ep_1", "--since", "yesterday"},                 // not a time
		{"dlq", "list", "ep_1", "--since=-5m"},                          // negative duration
		{"dlq", "counts", "--since", "2026-01-31"},                      // a date without a time
		{"dlq", "counts", "ep_1"},                                       // no argument taken
		{"dlq", "replay"},                                               // nothing to replay
		{"dlq", "replay", "ep_1", "--delivery", "dlv_1"},                // both
		{"dlq", "replay", "--delivery", "dlv_1", "--since", "1h"},       // --since selects an endpoint's
		{"dlq", "replay", "--delivery", "dlv_1", "--event-type", "a.b"}, // so does --event-type
		{"dlq", "replay", "--delivery", "dlv_1", "--until", "1h"},       // and --until
		{"endpoints", "pause"},                                          // no id
		{"endpoints", "resume", "ep_1", "ep_2"},                         // two ids
		{"deliveries", "replay"},                                        // no id
		{"deliveries", "redeliver"},                                     // no id
		{"deliveries", "list", "dlv_1"},                                 // no argument taken
		{"deliveries", "list", "--limit", "-2"},                         // bad limit
	} {
		srv, _ := fakeAPI(t, 200, "application/json", `{}`)
		if _, _, err := execHerald(t, "", append(args, "--server", srv.URL, "--api-key", "k")...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestReplayNotFound(t *testing.T) {
	srv, last := fakeAPI(t, 404, "application/problem+json", `{"title":"Not Found","status":404,"detail":"endpoint ep_x not found"}`)
	out, errOut, err := execHerald(t, "", "dlq", "replay", "ep_x", "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err %v", err)
	}
	if out != "" || !strings.Contains(errOut, "404 Not Found: endpoint ep_x not found") {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if r := last(); r.path != "/v1/endpoints/ep_x/replay" {
		t.Fatalf("path %s", r.path)
	}
}

func TestKeysCommands(t *testing.T) {
	srv, last := fakeAPI(t, 201, "application/json", `{"id":"key_1","key":"herald_key_x","role":"publisher","tenant":"acme"}`)
	if _, _, err := execHerald(t, "", "keys", "create", "--server", srv.URL, "--api-key", "k", "--name", "billing", "--role", "publisher", "--tenant", "acme", "--expires-in", "2d"); err != nil {
		t.Fatal(err)
	}
	r := last()
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	exp, err := time.Parse(time.RFC3339, fmt.Sprint(got["expires_at"]))
	if r.method != "POST" || r.path != "/v1/api-keys" || got["name"] != "billing" || got["role"] != "publisher" || got["tenant"] != "acme" ||
		err != nil || time.Until(exp) < 47*time.Hour || time.Until(exp) > 49*time.Hour {
		t.Fatalf("keys create sent %s %s %s", r.method, r.path, r.body)
	}
	if _, _, err := execHerald(t, "", "keys", "create", "--server", srv.URL, "--api-key", "k", "--role", "viewer"); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("keys create without --name: %v", err)
	}
	// Zero is refused as given, not taken for "never": leaving the flag
	// out is how a key that never expires is made.
	for flag, want := range map[string]string{"-1h": "must not be negative", "500ms": "at least 1m", "0s": "--expires-in 0s: at least 1m", "0d": "omit --expires-in", "0": "omit --expires-in"} {
		if _, _, err := execHerald(t, "", "keys", "create", "--server", srv.URL, "--api-key", "k", "--name", "n", "--role", "viewer", "--tenant", "a", "--expires-in", flag); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("keys create --expires-in %s: %v, want %q", flag, err, want)
		}
	}
	last() // the refused ones sent nothing: still the one create above
	srv, last = fakeAPI(t, 204, "", ``)
	out, _, err := execHerald(t, "", "keys", "revoke", "key_1", "--server", srv.URL, "--api-key", "k")
	if r := last(); err != nil || r.method != "DELETE" || r.path != "/v1/api-keys/key_1" || out != "revoked key_1\n" {
		t.Fatalf("keys revoke: %v, %s %s, %q", err, r.method, r.path, out)
	}
	srv, last = fakeAPI(t, 200, "application/json", `{"data":[],"next_cursor":""}`)
	if _, _, err := execHerald(t, "", "keys", "list", "--server", srv.URL, "--api-key", "k", "--limit", "5"); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != "GET" || r.path != "/v1/api-keys" || r.query != "limit=5" {
		t.Fatalf("keys list sent %s %s?%s", r.method, r.path, r.query)
	}
}

func TestPortalSessionsCommands(t *testing.T) {
	srv, last := fakeAPI(t, 201, "application/json", `{"id":"ps_1","token":"herald_portal_x","url":"http://h/ui/portal#token=herald_portal_x"}`)
	if _, _, err := execHerald(t, "", "portal-sessions", "create", "--server", srv.URL, "--api-key", "k", "--tenant", "acme", "--role", "manager", "--ttl", "2h"); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != "POST" || r.path != "/v1/portal-sessions" || string(r.body) != `{"role":"manager","tenant":"acme","ttl_seconds":7200}` {
		t.Fatalf("portal-sessions create sent %s %s %s", r.method, r.path, r.body)
	}
	srv, last = fakeAPI(t, 201, "application/json", `{"id":"ps_2"}`)
	if _, _, err := execHerald(t, "", "portal-sessions", "create", "--server", srv.URL, "--api-key", "k", "--tenant", "acme", "--ttl", "7d"); err != nil {
		t.Fatal(err)
	}
	if r := last(); string(r.body) != `{"tenant":"acme","ttl_seconds":604800}` {
		t.Fatalf("portal-sessions create --ttl 7d sent %s", r.body)
	}
	for _, args := range [][]string{{"--ttl", "2h"}, {"--tenant", "acme", "--ttl", "30s"}, {"--tenant", "acme", "--ttl", "200h"}, {"--tenant", "acme", "--ttl", "90500ms"}, {"--tenant", "acme", "--ttl", "0"}, {"--tenant", "acme", "--ttl", "0s"}} {
		if _, _, err := execHerald(t, "", append([]string{"portal-sessions", "create", "--server", srv.URL, "--api-key", "k"}, args...)...); err == nil {
			t.Errorf("portal-sessions create %v accepted", args)
		}
	}
	srv, last = fakeAPI(t, 204, "", ``)
	out, _, err := execHerald(t, "", "portal-sessions", "revoke", "ps_1", "--server", srv.URL, "--api-key", "k")
	if r := last(); err != nil || r.method != "DELETE" || r.path != "/v1/portal-sessions/ps_1" || out != "revoked ps_1\n" {
		t.Fatalf("portal-sessions revoke: %v, %s %s, %q", err, r.method, r.path, out)
	}
	srv, last = fakeAPI(t, 200, "application/json", `{"data":[],"next_cursor":""}`)
	if _, _, err := execHerald(t, "", "portal-sessions", "list", "--server", srv.URL, "--api-key", "k", "--limit", "5"); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != "GET" || r.path != "/v1/portal-sessions" || r.query != "limit=5" {
		t.Fatalf("portal-sessions list sent %s %s?%s", r.method, r.path, r.query)
	}
}

// TestTenantOptionalWithTenantKeys: a tenant key's tenant is the default,
// so --tenant may be left out; the body then names none.
func TestTenantOptionalWithTenantKeys(t *testing.T) {
	srv, last := fakeAPI(t, 202, "application/json", `{"id":"evt_1"}`)
	if _, _, err := execHerald(t, "", "events", "publish", "--server", srv.URL, "--api-key", "k", "--type", "a.b", "--data", `{}`); err != nil {
		t.Fatal(err)
	}
	if r := last(); strings.Contains(string(r.body), "tenant") {
		t.Fatalf("publish without --tenant sent %s", r.body)
	}
	srv, last = fakeAPI(t, 201, "application/json", `{"id":"ep_1"}`)
	if _, _, err := execHerald(t, "", "endpoints", "create", "--server", srv.URL, "--api-key", "k", "--url", "https://x.example/"); err != nil {
		t.Fatal(err)
	}
	if r := last(); strings.Contains(string(r.body), "tenant") {
		t.Fatalf("endpoints create without --tenant sent %s", r.body)
	}
	if _, _, err := execHerald(t, "", "events", "publish", "--server", srv.URL, "--api-key", "k", "--data", `{}`); err == nil || !strings.Contains(err.Error(), "--type") {
		t.Fatalf("publish without --type: %v", err)
	}
}

// TestEventsGetTenant: an admin reads a producer-chosen id by naming its
// tenant (--tenant becomes ?tenant=).
func TestEventsGetTenant(t *testing.T) {
	for _, sub := range []string{"get", "deliveries"} {
		srv, last := fakeAPI(t, 200, "application/json", `{"id":"inv-1"}`)
		if _, _, err := execHerald(t, "", "events", sub, "inv-1", "--tenant", "acme", "--server", srv.URL, "--api-key", "k"); err != nil {
			t.Fatal(err)
		}
		want := "/v1/events/inv-1"
		if sub == "deliveries" {
			want += "/deliveries"
		}
		if r := last(); r.path != want || r.query != "tenant=acme" {
			t.Fatalf("events %s sent %s?%s", sub, r.path, r.query)
		}
	}
}
