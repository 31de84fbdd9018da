package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/testutil"
	"github.com/herald-webhooks/herald/webhook"
)

func TestListenCommand(t *testing.T) {
	secret, _ := webhook.NewSecret()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRoot()
	out, errOut := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetArgs([]string{"listen", "--port", "0", "--secret", secret, "--status", "503,200", "--retry-after", "2", "--path", "/hooks"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+/hooks) \(verifying with 1 secret\(s\): a request that does not verify is answered 401\)`)
	var url string
	for deadline := time.Now().Add(5 * time.Second); url == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listening line; stdout %q stderr %q", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	body := []byte(`{"id":"evt_1"}`)
	send := func(u string) *http.Response {
		req, _ := http.NewRequest("POST", u, bytes.NewReader(body))
		s, _ := webhook.NewSigner(secret)
		s.Sign(req.Header, "evt_1", time.Now(), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// A request that does not verify is refused without taking a step.
	forged, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	forged.Header.Set("X-Signature", "t=1,v1=00")
	if resp, err := http.DefaultClient.Do(forged); err != nil || resp.StatusCode != 401 {
		t.Fatalf("unverified request answered %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp := send(url); resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("first answer %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := send(strings.TrimSuffix(url, "hooks") + "elsewhere"); resp.StatusCode != 404 {
		t.Fatalf("other path answered %d", resp.StatusCode)
	}
	if resp := send(url); resp.StatusCode != 200 {
		t.Fatalf("second answer %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("listen returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listen did not stop on cancel")
	}
	s := out.String()
	if strings.Count(s, "X-Signature:        verified") != 2 || strings.Count(s, "webhook-signature:  verified") != 2 ||
		!strings.Contains(s, "503 Service Unavailable (Retry-After: 2)") || !strings.Contains(s, "200 OK") ||
		!strings.Contains(s, "401 Unauthorized (invalid signature: ") {
		t.Fatalf("stdout:\n%s", s)
	}
	if !strings.Contains(errOut.String(), "ignored POST /elsewhere") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestListenBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "503,abc"}, "--status"},
		{[]string{"--status", "99"}, "--status"},
		{[]string{"--status", "600"}, "--status"},
		{[]string{"--port", "x"}, "--port"},
		{[]string{"--port", "70000"}, "--port"},
		{[]string{"--path", "hooks"}, "--path"},
		{[]string{"--retry-after", "soon"}, "--retry-after"},
		{[]string{"--retry-after", "-1"}, "--retry-after"},
		{[]string{"--secret", ""}, "--secret"},
	} {
		_, _, err := execHerald(t, "", append([]string{"listen"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %s", c.args, err, c.want)
		}
	}
}

func TestParseStatusScript(t *testing.T) {
	got, err := parseStatusScript(" 503, 503 ,200")
	if err != nil || len(got) != 3 || got[0] != 503 || got[2] != 200 {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := parseStatusScript(""); err != nil || got != nil {
		t.Fatalf("%v %v", got, err)
	}
}
