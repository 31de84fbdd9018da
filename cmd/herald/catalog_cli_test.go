package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEventsPublishDataVersions: --data-version N=JSON sends data_versions,
// data kept as given; bad values are refused before any request.
func TestEventsPublishDataVersions(t *testing.T) {
	srv, last := fakeAPI(t, 202, "application/json", `{}`)
	if _, _, err := execHerald(t, "", "events", "publish", "--server", srv.URL, "--api-key", "k", "--tenant", "acme", "--type", "file.updated",
		"--data", `{"file_id":"f_1","revision":2}`, "--data-version", `2={"file_id":"f_1","r":1}`, "--data-version", `1={"file_id":"f_1"}`); err != nil {
		t.Fatal(err)
	}
	want := `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2},"data_versions":{"1":{"file_id":"f_1"},"2":{"file_id":"f_1","r":1}}}`
	if r := last(); string(r.body) != want {
		t.Fatalf("body %s, want %s", r.body, want)
	}
	for _, c := range []struct{ arg, want string }{
		{`x={}`, "want N=JSON"}, {`0={}`, "want N=JSON"}, {`{}`, "want N=JSON"}, {`1={`, "not valid JSON"},
	} {
		_, _, err := execHerald(t, "", "events", "publish", "--server", "http://127.0.0.1:1", "--api-key", "k", "--type", "a.b", "--data", `{}`, "--data-version", c.arg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--data-version %s: %v, want %q", c.arg, err, c.want)
		}
	}
	_, _, err := execHerald(t, "", "events", "publish", "--server", "http://127.0.0.1:1", "--api-key", "k", "--type", "a.b", "--data", `{}`,
		"--data-version", `1={}`, "--data-version", `1={}`)
	if err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("duplicate version: %v", err)
	}
}

// TestEventsPublishPrintsPersonalDataWarning: the server's warning header
// reaches the user on stderr.
func TestEventsPublishPrintsPersonalDataWarning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Herald-Personal-Data-Warning", "/data/email email")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(202)
		_, _ = io.WriteString(w, `{"id":"evt_1"}`)
	}))
	t.Cleanup(srv.Close)
	_, stderr, err := execHerald(t, "", "events", "publish", "--server", srv.URL, "--api-key", "k", "--type", "user.signed_up", "--data", `{"email":"a@b.example"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "/data/email email") {
		t.Fatalf("stderr %q does not show the warning", stderr)
	}
}

// TestEventTypesDescribeNeedsDescription: without --description nothing is
// sent.
func TestEventTypesDescribeNeedsDescription(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(srv.Close)
	_, _, err := execHerald(t, "", "event-types", "describe", "file.updated", "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "--description is required") {
		t.Fatalf("describe without --description: %v", err)
	}
}

// TestEventTypesCreateDuplicate: a 409 shows the server's reason, which
// says what to do instead, and fails the command.
func TestEventTypesCreateDuplicate(t *testing.T) {
	srv, _ := fakeAPI(t, 409, "application/problem+json", `{"status":409,"title":"Conflict","detail":"event type File.Updated differs from the catalogued file.updated only in case"}`)
	schema := filepath.Join(t.TempDir(), "v1.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := execHerald(t, "", "event-types", "create", "File.Updated", "--schema", schema, "--server", srv.URL, "--api-key", "k")
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(errOut, "only in case") || strings.Contains(err.Error()+errOut, "already exists") {
		t.Fatalf("conflicting create: %v, stderr %q; want the server's reason only", err, errOut)
	}
}

// TestEventTypesSchemaAndExampleNotBothStdin: stdin is read once, so
// --schema - with --example - is refused naming the rule, nothing sent
// (the example read nothing and was said to be "not valid JSON").
func TestEventTypesSchemaAndExampleNotBothStdin(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{{"create", "file.updated"}, {"add-version", "file.updated", "2"}} {
		args = append(args, "--schema", "-", "--example", "-", "--server", srv.URL, "--api-key", "k")
		_, _, err := execHerald(t, `{"type":"object"}`, append([]string{"event-types"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "cannot both be - (stdin)") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestEndpointsPrintDeprecationWarning: the API's Warning headers (a pin to
// a deprecated event type version, docs/contract.md) reach the user on
// stderr as "Warning: <value>", one line each, as curl -v shows them;
// stdout stays the JSON answer alone.
func TestEndpointsPrintDeprecationWarning(t *testing.T) {
	const (
		w1 = `299 - "file.updated version 1 is deprecated (the newest is 2): the endpoint keeps receiving version 1 until its pin moves (versions)"`
		w2 = `299 - "invoice.paid version 3 is deprecated (the newest is 4): the endpoint keeps receiving version 3 until its pin moves (versions)"`
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Add("Warning", w1)
		w.Header().Add("Warning", w2)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"id":"ep_1"}`)
	}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{
		{"endpoints", "create", "--tenant", "acme", "--url", "https://example.com/h"},
		{"endpoints", "update", "ep_1", "--pin", "file.updated=1"},
	} {
		stdout, stderr, err := execHerald(t, "", append(args, "--server", srv.URL, "--api-key", "k")...)
		if err != nil {
			t.Fatalf("%v: %v (stderr %q)", args, err, stderr)
		}
		if want := "Warning: " + w1 + "\nWarning: " + w2 + "\n"; stderr != want {
			t.Errorf("%v: stderr %q; want\n%q", args, stderr, want)
		}
		if stdout != "{\n  \"id\": \"ep_1\"\n}\n" {
			t.Errorf("%v: stdout %q; want the JSON answer alone", args, stdout)
		}
	}
}

// TestPrintableHeaderValue: a header value printed to the terminal keeps
// its text and loses its control and invisible format characters.
func TestPrintableHeaderValue(t *testing.T) {
	if got := printable("299 - \"a\x1b[31mb\r\nc\x7f\u0085d\tö\""); got != "299 - \"a?[31mb??c??d\tö\"" {
		t.Errorf("printable = %q", got)
	}
	// Invisible format characters (bidi controls that reorder the rest
	// of the line, zero-width ones) go too; other scripts stay.
	if got := printable("299 - \"a\u202eb\u2066c\u200bd\ufeff 日本\""); got != "299 - \"a?b?c?d? 日本\"" {
		t.Errorf("printable = %q", got)
	}
}
