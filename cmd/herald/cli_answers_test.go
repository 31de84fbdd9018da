package main

import (
	"strings"
	"testing"
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
