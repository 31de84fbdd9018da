package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// stubVerifyExit records the status verify would exit with.
func stubVerifyExit(t *testing.T) *int {
	t.Helper()
	code := -1
	old := verifyExit
	verifyExit = func(c int) { code = c }
	t.Cleanup(func() { verifyExit = old })
	return &code
}

// signedFixture signs body at signedAt with secrets and writes it to a file.
func signedFixture(t *testing.T, body string, signedAt time.Time, secrets ...string) (string, http.Header) {
	t.Helper()
	s, err := webhook.NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	s.Sign(h, "evt_1", signedAt, []byte(body))
	f := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, h
}

func TestVerifyBothSchemes(t *testing.T) {
	code := stubVerifyExit(t)
	secret, _ := webhook.NewSecret()
	other, _ := webhook.NewSecret()
	at := time.Unix(1_750_000_000, 0)
	body := "{\"id\":\"evt_1\",\"data\":{\"v\":2}}\n" // trailing newline: the raw bytes count
	f, h := signedFixture(t, body, at, secret)
	out, _, err := execHerald(t, "", "verify", "--secret", other, "--secret", secret, "--body-file", f,
		"--x-signature", h.Get("X-Signature"),
		"--webhook-id", h.Get("Webhook-Id"), "--webhook-timestamp", h.Get("Webhook-Timestamp"), "--webhook-signature", h.Get("Webhook-Signature"),
		"--at", strconv.FormatInt(at.Unix()+100, 10))
	if err != nil {
		t.Fatalf("err %v, stdout %q", err, out)
	}
	if out != "X-Signature: valid\nwebhook-signature: valid\n" || *code != -1 {
		t.Fatalf("stdout %q, exit %d", out, *code)
	}

	// The same body from stdin.
	out, _, err = execHerald(t, body, "verify", "--secret", secret, "--body-file", "-",
		"--x-signature", h.Get("X-Signature"), "--at", strconv.FormatInt(at.Unix(), 10))
	if err != nil || out != "X-Signature: valid\n" {
		t.Fatalf("stdin: err %v, stdout %q", err, out)
	}
}

func TestVerifyInvalid(t *testing.T) {
	code := stubVerifyExit(t)
	secret, _ := webhook.NewSecret()
	at := time.Unix(1_750_000_000, 0)
	f, h := signedFixture(t, `{"a":1}`, at, secret)
	if err := os.WriteFile(f, []byte(`{"a": 1}`), 0o600); err != nil { // re-serialised: different bytes
		t.Fatal(err)
	}
	out, _, err := execHerald(t, "", "verify", "--secret", secret, "--body-file", f,
		"--x-signature", h.Get("X-Signature"),
		"--webhook-id", "evt_1", "--webhook-timestamp", h.Get("Webhook-Timestamp"), "--webhook-signature", h.Get("Webhook-Signature"),
		"--at", strconv.FormatInt(at.Unix(), 10))
	if err == nil || *code != -1 { // exit status 1 comes from main's error path
		t.Fatalf("err %v, exit %d", err, *code)
	}
	want := "X-Signature: INVALID: no matching signature: X-Signature\nwebhook-signature: INVALID: no matching signature: webhook-signature\n"
	if out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}

	// The original bytes, checked an hour later with the default tolerance.
	os.WriteFile(f, []byte(`{"a":1}`), 0o600)
	out, _, err = execHerald(t, "", "verify", "--secret", secret, "--body-file", f,
		"--x-signature", h.Get("X-Signature"), "--at", strconv.FormatInt(at.Unix()+3600, 10))
	if err == nil || !strings.HasPrefix(out, "X-Signature: INVALID: timestamp too old: 3600 s old, tolerance 300 s") {
		t.Fatalf("err %v, stdout %q", err, out)
	}
	// ... and with --tolerance 2h it is valid.
	out, _, err = execHerald(t, "", "verify", "--secret", secret, "--body-file", f, "--tolerance", "2h",
		"--x-signature", h.Get("X-Signature"), "--at", strconv.FormatInt(at.Unix()+3600, 10))
	if err != nil || out != "X-Signature: valid\n" {
		t.Fatalf("err %v, stdout %q", err, out)
	}
}

func TestVerifyUsageErrors(t *testing.T) {
	secret, _ := webhook.NewSecret()
	f, _ := signedFixture(t, "{}", time.Now(), secret)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--secret", secret, "--body-file", f}, "no signature given"},
		{[]string{"--body-file", f, "--x-signature", "t=1,v1=00"}, "--secret is required"},
		{[]string{"--secret", secret, "--x-signature", "t=1,v1=00"}, "--body-file is required"},
		{[]string{"--secret", secret, "--body-file", f, "--webhook-id", "evt_1"}, "go together"},
		{[]string{"--secret", secret, "--body-file", f + ".missing", "--x-signature", "t=1,v1=00"}, "--body-file"},
		{[]string{"--secret", secret, "--body-file", f, "--x-signature", "t=1,v1=00", "--tolerance", "0s"}, "--tolerance"},
		{[]string{"--secret", secret, "--body-file", f, "--x-signature", "t=1,v1=00", "--tolerance", "soon"}, "--tolerance"},
	} {
		code := stubVerifyExit(t)
		out, errOut, err := execHerald(t, "", append([]string{"verify"}, c.args...)...)
		if err == nil || *code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: err %v, exit %d, stdout %q, stderr %q (want %q)", c.args, err, *code, out, errOut, c.want)
		}
	}
}
