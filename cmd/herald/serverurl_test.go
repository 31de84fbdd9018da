package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// pathRecorder is an API on 127.0.0.1 that answers {} to every request and
// records the request URI of each.
func pathRecorder(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		s := append([]string(nil), seen...)
		seen = nil
		return s
	}
}

// TestServerURLWithQueryOrFragmentRefused: a --server (or HERALD_SERVER)
// with a query or a fragment is refused before any request, naming the
// flag and the rule and no credential of the URL; it used to be sent with
// the API path appended after the query (…/?x=1/v1/endpoints). A path
// prefix (Herald behind a reverse proxy at /herald) is kept.
func TestServerURLWithQueryOrFragmentRefused(t *testing.T) {
	srv, seen := pathRecorder(t)
	t.Setenv("HERALD_API_KEY", "k")
	t.Setenv("HERALD_SERVER", "")
	for _, c := range []struct{ server, want string }{
		{srv.URL, "/v1/endpoints?tenant=acme"},
		{srv.URL + "/", "/v1/endpoints?tenant=acme"},
		{srv.URL + "/herald", "/herald/v1/endpoints?tenant=acme"},
		{srv.URL + "/herald/", "/herald/v1/endpoints?tenant=acme"},
	} {
		if _, _, err := execHerald(t, "", "endpoints", "list", "--tenant", "acme", "--server", c.server); err != nil {
			t.Fatalf("--server %s: %v", c.server, err)
		}
		if got := seen(); len(got) != 1 || got[0] != c.want {
			t.Errorf("--server %s: requests %q, want [%q]", c.server, got, c.want)
		}
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, server := range []string{
		srv.URL + "/?x=1",
		srv.URL + "?x=1",
		srv.URL + "/herald?",
		srv.URL + "/#frag",
		"http://ops:SRVPASSWORD@" + host + "/?x=1",
		"http://OPSUSERONLY@" + host + "/#x",
		srv.URL + "/?token=QTOKEN",
		srv.URL + "/#access_token=QTOKEN",
	} {
		for _, viaEnv := range []bool{false, true} {
			args := []string{"endpoints", "list", "--tenant", "acme"}
			if viaEnv {
				t.Setenv("HERALD_SERVER", server)
			} else {
				t.Setenv("HERALD_SERVER", "")
				args = append(args, "--server", server)
			}
			_, stderr, err := execHerald(t, "", args...)
			if got := seen(); len(got) != 0 {
				t.Errorf("--server %s (from the environment: %v): requests %q were sent, want none", server, viaEnv, got)
			}
			if err == nil {
				t.Errorf("--server %s (from the environment: %v): no error", server, viaEnv)
				continue
			}
			msg := withEnvSources(nil, err).Error()
			for _, want := range []string{"--server", "no query", "fragment"} {
				if !strings.Contains(msg, want) {
					t.Errorf("--server %s (from the environment: %v): %q lacks %q", server, viaEnv, msg, want)
				}
			}
			noSecret(t, "--server "+server, stderr, err, "SRVPASSWORD", "OPSUSERONLY", "QTOKEN")
		}
	}
	t.Setenv("HERALD_SERVER", "")
	for _, server := range []string{srv.URL + "/?x=1", "http://OPSUSERONLY@" + host + "/#x"} {
		_, stderr, err := execHerald(t, "", "healthcheck", "--server", server)
		if err == nil || !strings.Contains(err.Error(), "no query") {
			t.Errorf("healthcheck --server %s: %v; want the refusal of a query or fragment", server, err)
		}
		noSecret(t, "healthcheck --server "+server, stderr, err, "OPSUSERONLY")
	}
	if got := seen(); len(got) != 0 {
		t.Errorf("healthcheck: requests %q were sent, want none", got)
	}
}

// TestParseServerAndAPIURL: the one place a server URL and an API path
// are joined. A trailing slash and a path prefix are kept as a prefix,
// the user information is kept (redacted in errors), a query or a
// fragment is refused.
func TestParseServerAndAPIURL(t *testing.T) {
	for _, c := range []struct {
		server, path, want, err string
	}{
		{"http://127.0.0.1:8080", "/v1/events", "http://127.0.0.1:8080/v1/events", ""},
		{"http://127.0.0.1:8080/", "/v1/events", "http://127.0.0.1:8080/v1/events", ""},
		{"http://127.0.0.1:8080///", "/v1/events?tenant=a", "http://127.0.0.1:8080/v1/events?tenant=a", ""},
		{"HTTPS://Herald.Example", "/readyz", "https://Herald.Example/readyz", ""},
		{"https://proxy.example/herald", "/v1/events/evt_1?tenant=a", "https://proxy.example/herald/v1/events/evt_1?tenant=a", ""},
		{"https://proxy.example/herald/", "/v1/events", "https://proxy.example/herald/v1/events", ""},
		{"https://proxy.example/a%2Fb/herald", "/v1/events", "https://proxy.example/a%2Fb/herald/v1/events", ""},
		{"http://[::1]:8080/", "/readyz", "http://[::1]:8080/readyz", ""},
		{"http://ops:pw@127.0.0.1:8080/", "/v1/events", "http://ops:pw@127.0.0.1:8080/v1/events", ""},
		{"http://127.0.0.1:8080/?x=1", "", "", "no query"},
		{"http://127.0.0.1:8080?x=1", "", "", "no query"},
		{"http://127.0.0.1:8080/herald?", "", "", "no query"},
		{"http://127.0.0.1:8080/#", "", "", "no query"},
		{"http://127.0.0.1:8080/#frag", "", "", "no query"},
		{"http://ops:SECRET@127.0.0.1:8080/?token=QTOKEN", "", "", `"http://xxxxx@127.0.0.1:8080/?token=xxxxx": a server URL takes no query`},
		{"localhost:8080", "", "", "want a base URL"},
		{"ftp://herald.example", "", "", "want a base URL"},
		{"http:///v1", "", "", "want a base URL"},
		{"", "", "", "want a base URL"},
	} {
		base, err := parseServer(c.server)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseServer(%q) = %v; want an error with %q", c.server, err, c.err)
			} else if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "QTOKEN") {
				t.Errorf("parseServer(%q): the error shows a credential: %v", c.server, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseServer(%q): %v", c.server, err)
			continue
		}
		if got := apiURL(base, c.path); got != c.want {
			t.Errorf("apiURL(%q, %q) = %q, want %q", c.server, c.path, got, c.want)
		}
	}
}
