package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// TestEveryOperationHasACommand (issue 13 point 17): every operation of
// the API's OpenAPI document (the huma registry) that needs an API key has
// a CLI command naming it as "METHOD /path" in its help; TestRoutes and
// TestNewCommandRoutes check that the commands send those requests. The
// public routes the document also describes (the probes and /contract,
// api.Policy's public rows) are read by load balancers, monitors and
// browsers without a key, not through the API client commands (GET
// /readyz has `herald healthcheck` all the same).
func TestEveryOperationHasACommand(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: st, URLs: eg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var helps []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		helps = append(helps, c.Short+"\n"+c.Long)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	n := 0
	for path, item := range srv.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{"GET": item.Get, "POST": item.Post, "PATCH": item.Patch, "PUT": item.Put, "DELETE": item.Delete} {
			if op == nil || api.Policy[op.OperationID].Public {
				continue
			}
			n++
			want := method + " " + path
			if !slices.ContainsFunc(helps, func(h string) bool { return strings.Contains(h, want) }) {
				t.Errorf("no CLI command for %s", want)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d operations found; the walk is broken", n)
	}
}

// TestUnknownSubcommandFails (issue 13 point 17): an unknown subcommand
// exits non-zero with a suggestion, instead of printing help and
// succeeding.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, args := range [][]string{{"endpoints", "rotate-secrt", "ep_1"}, {"sourcs"}, {"dlq", "replai"},
		// Synonyms of a verb point to it.
		{"keys", "delete", "key_1"}, {"portal-sessions", "rm", "ps_1"}, {"events", "show", "evt_1"}, {"event-types", "get", "x.y"},
		{"sources", "remove", "src_1"}, {"deliveries", "retry", "dlv_1"}} {
		_, _, err := execHerald(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "unknown command") || !strings.Contains(err.Error(), "Did you mean this?") {
			t.Errorf("herald %s: %v; want an unknown-command error with a suggestion", strings.Join(args, " "), err)
		}
	}
	if out, _, err := execHerald(t, "", "endpoints"); err != nil || !strings.Contains(out, "Available Commands") {
		t.Errorf("herald endpoints: %v %q; want its help", err, out)
	}
}

// TestNewCommandRoutes: the commands added for issue 13 point 17 send the
// requests they name.
func TestNewCommandRoutes(t *testing.T) {
	for _, c := range []struct {
		args         []string
		method, path string
		body         string
	}{
		{[]string{"endpoints", "rotate-secret", "ep_1"}, "POST", "/v1/endpoints/ep_1/rotate-secret", `{}`},
		{[]string{"endpoints", "rotate-secret", "ep_1", "--overlap-seconds", "0"}, "POST", "/v1/endpoints/ep_1/rotate-secret", `{"overlap_seconds":0}`},
		{[]string{"endpoints", "test", "ep_1"}, "POST", "/v1/endpoints/ep_1/test", ``},
		{[]string{"sources", "create", "--name", "gh", "--scheme", "github", "--secret", "provider-secret-0123", "--destination-url", "http://10.0.0.1/in"}, "POST", "/v1/sources",
			`{"destination_url":"http://10.0.0.1/in","name":"gh","scheme":"github","secrets":["provider-secret-0123"]}`},
		{[]string{"sources", "list"}, "GET", "/v1/sources", ``},
		{[]string{"sources", "get", "src_1"}, "GET", "/v1/sources/src_1", ``},
		{[]string{"sources", "update", "src_1", "--dedupe", "json:/id"}, "PATCH", "/v1/sources/src_1", `{"dedupe":"json:/id"}`},
		// A source whose configuration does not open (unreadable [config])
		// is given its scheme and secrets anew.
		{[]string{"sources", "update", "src_1", "--scheme", "github", "--secret", "provider-secret-0123"}, "PATCH", "/v1/sources/src_1",
			`{"scheme":"github","secrets":["provider-secret-0123"]}`},
		{[]string{"sources", "delete", "src_1"}, "DELETE", "/v1/sources/src_1", ``},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			srv, last := fakeAPI(t, 200, "application/json", `{}`)
			if _, _, err := execHerald(t, "", append(c.args, "--server", srv.URL, "--api-key", "k")...); err != nil {
				t.Fatal(err)
			}
			r := last()
			if r.method != c.method || r.path != c.path || string(r.body) != c.body {
				t.Fatalf("got %s %s %s, want %s %s %s", r.method, r.path, r.body, c.method, c.path, c.body)
			}
		})
	}
}

// TestEmptyIDRefused: an empty (or blank) id argument is refused before any
// request, naming the rule. It made a path such as /v1/events//deliveries,
// which the server cleaned into another route: "event deliveries not found",
// or 405 "POST is not allowed on /v1/endpoints/replay" for dlq replay.
func TestEmptyIDRefused(t *testing.T) {
	var requests atomic.Int32
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	defer counting.Close()
	for _, args := range [][]string{
		{"keys", "revoke", ""}, {"events", "deliveries", ""}, {"endpoints", "delete", " "},
		{"dlq", "replay", ""}, {"dlq", "list", ""}, {"endpoints", "revoke-secret", "ep_1", ""},
		{"event-types", "deprecate", "", "1"}, {"portal-sessions", "revoke", "\t"},
	} {
		_, _, err := execHerald(t, "", append(args, "--server", counting.URL, "--api-key", "k")...)
		if err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("herald %q: %v; want a refusal saying the argument is empty", args, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests were sent with an empty id", n)
	}
}
