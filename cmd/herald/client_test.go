package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
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
		{[]string{"endpoints", "get", "ep_1"}, "GET", "/v1/endpoints/ep_1", ""},
		{[]string{"endpoints", "get", "ep/1?x"}, "GET", "/v1/endpoints/ep%2F1%3Fx", ""},
		{[]string{"endpoints", "delete", "ep_1"}, "DELETE", "/v1/endpoints/ep_1", ""},
		{[]string{"endpoints", "secret", "ep_1"}, "GET", "/v1/endpoints/ep_1/secret", ""},
		{[]string{"endpoints", "deliveries", "ep_1", "--state", "dead"}, "GET", "/v1/endpoints/ep_1/deliveries", "state=dead"},
		{[]string{"dlq", "list", "ep_1"}, "GET", "/v1/endpoints/ep_1/deliveries", "state=dead"},
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
	if out != "" {
		t.Fatalf("stdout %q for an empty answer", out)
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
