package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

// closedAddr is a loopback HOST:PORT where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// noSecret fails when the command's error or stderr shows one of secrets.
func noSecret(t *testing.T, what string, stderr string, err error, secrets ...string) {
	t.Helper()
	msg := stderr
	if err != nil {
		msg += "\n" + err.Error()
	}
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Errorf("%s: the error shows %q:\n%s", what, s, msg)
		}
	}
}

// TestHealthcheckErrorRedactsServer: the healthcheck's error (kept by
// container runtimes) shows no part of HERALD_SERVER's userinfo nor a
// credential query parameter of --url.
func TestHealthcheckErrorRedactsServer(t *testing.T) {
	addr := closedAddr(t)
	for _, server := range []string{"http://ops:SRVPASSWORD@" + addr, "http://OPSUSERONLY@" + addr} {
		t.Setenv("HERALD_SERVER", server)
		_, stderr, err := execHerald(t, "", "healthcheck")
		if err == nil {
			t.Fatalf("healthcheck of %s: no error", addr)
		}
		noSecret(t, "healthcheck", stderr, err, "SRVPASSWORD", "OPSUSERONLY")
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("healthcheck: the error does not name %s: %v", addr, err)
		}
	}
	t.Setenv("HERALD_SERVER", "")
	_, stderr, err := execHerald(t, "", "healthcheck", "--url", "http://"+addr+"/readyz?token=QTOKEN")
	noSecret(t, "healthcheck --url", stderr, err, "QTOKEN")
	_, stderr, err = execHerald(t, "", "healthcheck", "--server", "ops:SRVPASSWORD@"+addr)
	if err == nil {
		t.Fatal("healthcheck --server without a scheme: no error")
	}
	noSecret(t, "healthcheck --server without a scheme", stderr, err, "SRVPASSWORD")
}

// TestClientErrorsRedactServer: the hint that --server looks like the
// web console's URL, a connection error and a refused --server show no
// credential of the URL.
func TestClientErrorsRedactServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><p>sign in"))
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv("HERALD_API_KEY", "k")
	for _, server := range []string{
		"http://ops:SRVPASSWORD@" + host + "/ui",
		"http://OPSUSERONLY@" + host + "/ui",
	} {
		t.Setenv("HERALD_SERVER", server)
		_, stderr, err := execHerald(t, "", "endpoints", "list")
		if err == nil || !strings.Contains(err.Error(), "HTML page") {
			t.Fatalf("endpoints list with %s: %v; want the HTML hint", server, err)
		}
		noSecret(t, "endpoints list (HTML hint)", stderr, err, "SRVPASSWORD", "OPSUSERONLY", "QTOKEN")
	}
	// A server URL with a query is refused before any request (it was
	// sent with the API's path after the query), the query's credentials
	// redacted.
	for _, server := range []string{
		"http://" + host + "/ui?token=QTOKEN",
		"http://" + host + "/?api_key=QTOKEN",
	} {
		t.Setenv("HERALD_SERVER", server)
		_, stderr, err := execHerald(t, "", "endpoints", "list")
		if err == nil || !strings.Contains(err.Error(), "takes no query") {
			t.Fatalf("endpoints list with %s: %v; want the refusal of a query", server, err)
		}
		noSecret(t, "endpoints list (query refused)", stderr, err, "QTOKEN")
	}
	addr := closedAddr(t)
	for _, server := range []string{"http://OPSUSERONLY@" + addr, "http://" + addr + "/?token=QTOKEN", "ops:SRVPASSWORD@" + addr} {
		t.Setenv("HERALD_SERVER", server)
		_, stderr, err := execHerald(t, "", "endpoints", "list")
		if err == nil {
			t.Fatalf("endpoints list with %s: no error", server)
		}
		noSecret(t, "endpoints list (no server)", stderr, err, "SRVPASSWORD", "OPSUSERONLY", "QTOKEN")
	}
}

// TestHeaderErrorShowsNoValue: a --header without "=" is refused naming
// the header, never its value.
func TestHeaderErrorShowsNoValue(t *testing.T) {
	srv, _ := fakeAPI(t, 201, "application/json", `{}`)
	t.Setenv("HERALD_SERVER", srv.URL)
	t.Setenv("HERALD_API_KEY", "k")
	for _, h := range []string{"X-Auth: HEADERSECRET", "HEADERSECRET"} {
		t.Setenv("HERALD_HEADER", h)
		_, stderr, err := execHerald(t, "", "endpoints", "create", "--tenant", "acme", "--url", "https://x.example")
		if err == nil || !strings.Contains(err.Error(), "want NAME=VALUE") {
			t.Fatalf("HERALD_HEADER=%q: %v; want the NAME=VALUE refusal", h, err)
		}
		noSecret(t, "--header", stderr, err, "HEADERSECRET")
		if strings.HasPrefix(h, "X-Auth") && !strings.Contains(err.Error(), "X-Auth") {
			t.Errorf("HERALD_HEADER=%q: the error does not name the header: %v", h, err)
		}
	}
}

// TestHelpRedactsWholeUserinfoAndQueryCredentials: a token given as the
// userinfo's user name, or in a query parameter named like a credential,
// is not shown by --help.
func TestHelpRedactsWholeUserinfoAndQueryCredentials(t *testing.T) {
	for _, c := range []struct{ server, want string }{
		{"https://OPSUSERONLY@herald.example", `(default "https://xxxxx@herald.example" from HERALD_SERVER)`},
		// A server URL takes no query: the help says the value is refused,
		// showing it redacted.
		{"https://herald.example/?token=QTOKEN", `(HERALD_SERVER is not a valid value: --server "https://herald.example/?token=xxxxx": a server URL takes no query`},
		{"https://herald.example/?api_key=QTOKEN&x=1", `(HERALD_SERVER is not a valid value: --server "https://herald.example/?api_key=xxxxx&x=1": a server URL takes no query`},
	} {
		t.Setenv("HERALD_SERVER", c.server)
		for _, args := range [][]string{{"endpoints", "list", "--help"}, {"healthcheck", "--help"}} {
			out := helpOf(t, args...)
			if strings.Contains(out, "OPSUSERONLY") || strings.Contains(out, "QTOKEN") {
				t.Errorf("herald %v with HERALD_SERVER=%s shows a credential:\n%s", args, c.server, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("herald %v with HERALD_SERVER=%s lacks %s:\n%s", args, c.server, c.want, out)
			}
		}
	}
}

// TestMigrateStatusHidesDatabaseUser: herald migrate status names the
// store it read with the --db URL's whole user information hidden, the
// user name too (it showed "postgres://postgres@…" and, with a password,
// "postgres://user:xxxxx@…").
func TestMigrateStatusHidesDatabaseUser(t *testing.T) {
	pg := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if pg == "" {
		t.Skip("HERALD_TEST_POSTGRES_URL is not set; skipping (CI sets it)")
	}
	u, err := url.Parse(pg)
	if err != nil || u.User == nil || u.User.Username() == "" {
		t.Skipf("HERALD_TEST_POSTGRES_URL has no user name to hide")
	}
	out, stderr, err := execHerald(t, "", "migrate", "status", "--db", pg)
	if !strings.Contains(out, "store:             postgres (") {
		t.Fatalf("migrate status: %v\n%s%s", err, out, stderr)
	}
	if strings.Contains(out+stderr, u.User.String()+"@") {
		t.Errorf("migrate status shows the database URL's user information:\n%s", out)
	}
	if !strings.Contains(out, "://xxxxx@") {
		t.Errorf("migrate status does not show the user information as xxxxx:\n%s", out)
	}
}
