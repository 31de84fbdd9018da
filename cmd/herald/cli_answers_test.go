package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
)

// TestDeletesSaySo: `herald sources delete` and `herald endpoints delete`
// print what they deleted, as `herald keys revoke` prints what it revoked,
// instead of nothing.
func TestDeletesSaySo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sources", "delete", "src_1"}, "deleted src_1\n"},
		{[]string{"endpoints", "delete", "ep_1"}, "deleted ep_1\n"},
	} {
		srv, last := fakeAPI(t, 204, "application/json", "")
		out, _, err := execHerald(t, "", append(c.args, "--server", srv.URL, "--api-key", "k")...)
		if err != nil {
			t.Fatal(err)
		}
		if r := last(); r.method != "DELETE" {
			t.Fatalf("%v: %s", c.args, r.method)
		}
		if out != c.want {
			t.Errorf("%v printed %q; want %q", c.args, out, c.want)
		}
	}
}

// TestHTMLAnswerNamesTheConsoleURL: a --server that is the web console's
// URL (…/ui) gets HTML pages where the API answers JSON; the CLI does not
// print the page (nor name the path as if it were the API's) but says the
// URL looks like the console's, naming the URL it asked and the base URL
// to give. An HTML 200 from a URL without /ui is refused too (not the
// API); an HTML error page (a proxy's 502) is still shown as it is.
func TestHTMLAnswerNamesTheConsoleURL(t *testing.T) {
	page := "<!DOCTYPE html><html><head><title>Herald</title></head><body>sign in</body></html>"
	for _, status := range []int{200, 404} {
		srv, _ := fakeAPI(t, status, "text/html; charset=utf-8", page)
		out, errOut, err := execHerald(t, "", "sources", "list", "--server", srv.URL+"/ui/", "--api-key", "k")
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if err == nil || strings.Contains(out+errOut+msg, "<html>") || !strings.Contains(msg, "web console") ||
			!strings.Contains(msg, srv.URL+"/ui/v1/sources") || !strings.Contains(msg, "--server "+srv.URL+" ") {
			t.Errorf("HTML %d from --server …/ui/: err %v, stdout %q, stderr %q; want an error naming the console's URL and the base URL %s", status, err, out, errOut, srv.URL)
		}
	}
	srv, _ := fakeAPI(t, 200, "text/html", page)
	_, _, err := execHerald(t, "", "sources", "list", "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "HTML page") {
		t.Errorf("HTML 200: err %v; want an error saying the answer is an HTML page", err)
	}
}

// TestEventTenantHintNamesTheFlag: `herald events get` and `herald events
// deliveries` with an admin key and a producer-chosen id, without
// --tenant, are told to add --tenant <tenant>: the API's hint "add
// ?tenant=<tenant>" is for HTTP clients, and a CLI user has no query
// string to add it to. An HTTP client still gets the API's own hint.
func TestEventTenantHintNamesTheFlag(t *testing.T) {
	t.Setenv("HERALD_ENCRYPTION_KEY", "")
	t.Setenv("HERALD_ENCRYPTION_KEY_PREVIOUS", "")
	const key = "test-admin-key-0123456789abcdefghijkl"
	m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(t.TempDir(), "herald.db"), APIKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	server := "http://" + m.Addr()
	if _, _, err := execHerald(t, "", "events", "publish", "--server", server, "--api-key", key, "--tenant", "acme", "--type", "order.placed", "--id", "inv-1", "--data", "{}"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"events", "get", "inv-1"}, {"events", "deliveries", "inv-1"}} {
		_, errOut, err := execHerald(t, "", append(args, "--server", server, "--api-key", key)...)
		if err == nil || !strings.Contains(errOut, "add --tenant <tenant>") || strings.Contains(errOut, "?tenant=") {
			t.Errorf("herald %s without --tenant: %v, stderr %q; want the hint to add --tenant <tenant>", strings.Join(args, " "), err, errOut)
		}
		if out, _, err := execHerald(t, "", append(args, "--server", server, "--api-key", key, "--tenant", "acme")...); err != nil || !strings.Contains(out, "inv-1") && args[1] == "get" {
			t.Errorf("herald %s --tenant acme: %q, %v", strings.Join(args, " "), out, err)
		}
	}
	req, _ := http.NewRequest("GET", server+"/v1/events/inv-1", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "?tenant=") {
		t.Errorf("GET /v1/events/inv-1 without a tenant: %d %s; want 404 with the API's ?tenant= hint", resp.StatusCode, body)
	}
}

// TestDLQReplayWindowNamesBothEnds: herald dlq replay with --since 10m
// --until 20m (until before since: durations are that long ago) is refused
// before any request, naming both flags with the values given and the
// times they name; the API's refusal showed only until's value. A window
// in the right order is sent.
func TestDLQReplayWindowNamesBothEnds(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"replayed":0}`)
	}))
	t.Cleanup(srv.Close)
	_, _, err := execHerald(t, "", "dlq", "replay", "ep_1", "--since", "10m", "--until", "20m", "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "--since 10m (") || !strings.Contains(err.Error(), "--until 20m (") {
		t.Errorf("dlq replay --since 10m --until 20m: %v; want a refusal naming both values", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("a refused window sent %d requests", n)
	}
	since, until := "2026-01-31T10:00:00Z", "2026-01-31T09:00:00Z"
	_, _, err = execHerald(t, "", "dlq", "replay", "ep_1", "--since", since, "--until", until, "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "--since "+since) || !strings.Contains(err.Error(), "--until "+until) {
		t.Errorf("dlq replay --since %s --until %s: %v; want a refusal naming both values", since, until, err)
	}
	if _, _, err := execHerald(t, "", "dlq", "replay", "ep_1", "--since", "20m", "--until", "10m", "--server", srv.URL, "--api-key", "k"); err != nil || requests.Load() != 1 {
		t.Errorf("dlq replay --since 20m --until 10m: %v, %d requests; want it sent", err, requests.Load())
	}
}
