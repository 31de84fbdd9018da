package listen

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/testutil"
	"github.com/herald-webhooks/herald/webhook"
)

var fixedNow = time.Unix(1_750_000_000, 0)

func newSecret(t *testing.T) string {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t *testing.T, cfg Config) (*Receiver, *httptest.Server, *testutil.SyncBuffer) {
	t.Helper()
	out := &testutil.SyncBuffer{}
	cfg.Out = out
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return fixedNow }
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv, out
}

// signedRequest builds a delivery like Herald's sender does, signed at
// fixedNow with secrets.
func signedRequest(t *testing.T, url string, body []byte, secrets ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Event-Id", "evt_1")
	req.Header.Set("X-Event-Type", "file.extraction.completed")
	req.Header.Set("X-Delivery-Attempt", "3")
	if len(secrets) > 0 {
		s, err := webhook.NewSigner(secrets...)
		if err != nil {
			t.Fatal(err)
		}
		s.Sign(req.Header, "evt_1", fixedNow, body)
	}
	return req
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, _ := do(t, signedRequest(t, url, []byte(`{}`)))
	return resp.StatusCode
}

const body = `{"id":"evt_1","type":"file.extraction.completed","tenant":"acme","occurred_at":"2025-06-15T15:06:40Z","data":{"file_id":"f_1","version":2}}`

func TestVerifiedBothSchemes(t *testing.T) {
	secret := newSecret(t)
	r, srv, out := start(t, Config{Secrets: []string{secret}})
	resp, got := do(t, signedRequest(t, srv.URL+"/hooks?x=1", []byte(body), secret))
	if resp.StatusCode != 200 || got != `{"received":true}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %q %q", resp.StatusCode, got, resp.Header.Get("Content-Type"))
	}
	s := out.String()
	for _, want := range []string{
		"POST /hooks?x=1",
		"2025-06-15T15:06:40.000Z",
		"X-Event-Id:         evt_1",
		"X-Event-Type:       file.extraction.completed",
		"X-Delivery-Attempt: 3",
		"X-Signature:        verified",
		"webhook-signature:  verified",
		"answered:           200 OK",
		"\"file_id\": \"f_1\"", // indented JSON
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if r.Count() != 1 {
		t.Errorf("Count = %d", r.Count())
	}
}

func TestRotationEitherSecretVerifies(t *testing.T) {
	oldS, newS := newSecret(t), newSecret(t)
	_, srv, out := start(t, Config{Secrets: []string{oldS, newS}})
	do(t, signedRequest(t, srv.URL, []byte(body), newS))
	if s := out.String(); strings.Count(s, " verified\n") != 2 {
		t.Fatalf("want both schemes verified:\n%s", s)
	}
}

func TestTamperedBody(t *testing.T) {
	secret := newSecret(t)
	_, srv, out := start(t, Config{Secrets: []string{secret}})
	req := signedRequest(t, srv.URL, []byte(body), secret)
	tampered := []byte(strings.Replace(body, `"version":2`, `"version":3`, 1))
	req.Body = io.NopCloser(bytes.NewReader(tampered))
	req.ContentLength = int64(len(tampered))
	resp, got := do(t, req)
	if resp.StatusCode != 401 || got != `{"error":"invalid signature"}` { // refused, as webhook.Middleware does
		t.Fatalf("status %d %q, want 401 {\"error\":\"invalid signature\"}", resp.StatusCode, got)
	}
	s := out.String()
	for _, want := range []string{
		"X-Signature:        NOT VERIFIED: no matching signature: X-Signature",
		"webhook-signature:  NOT VERIFIED: no matching signature: webhook-signature",
		"answered:           401 Unauthorized (invalid signature: no matching signature: X-Signature; the --status script was not advanced)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestStaleTimestamp(t *testing.T) {
	secret := newSecret(t)
	_, srv, out := start(t, Config{Secrets: []string{secret}, Now: func() time.Time { return fixedNow.Add(time.Hour) }})
	do(t, signedRequest(t, srv.URL, []byte(body), secret))
	if s := out.String(); !strings.Contains(s, "X-Signature:        NOT VERIFIED: timestamp too old: 3600 s old") {
		t.Fatalf("output:\n%s", s)
	}
}

func TestMissingSignature(t *testing.T) {
	_, srv, out := start(t, Config{Secrets: []string{newSecret(t)}})
	do(t, signedRequest(t, srv.URL, []byte(body)))
	s := out.String()
	if !strings.Contains(s, "signature:          NOT VERIFIED: missing signature") {
		t.Fatalf("output:\n%s", s)
	}
	if strings.Contains(s, "X-Signature:") {
		t.Fatalf("absent scheme printed:\n%s", s)
	}
}

func TestOnlyOneSchemePresent(t *testing.T) {
	secret := newSecret(t)
	_, srv, out := start(t, Config{Secrets: []string{secret}})
	req := signedRequest(t, srv.URL, []byte(body), secret)
	req.Header.Del("X-Signature")
	req.Header.Del("Webhook-Signature") // id and timestamp remain: an incomplete set
	do(t, req)
	s := out.String()
	if strings.Contains(s, "X-Signature:") || !strings.Contains(s, "webhook-signature:  NOT VERIFIED: missing signature: empty webhook-signature") {
		t.Fatalf("output:\n%s", s)
	}
}

// A signature header sent several times (a proxy adding one, a rotation
// split over two headers) is a list of candidates for webhook.Verifier.Verify
// and so for webhook.Middleware; herald listen must give the same verdict.
// A repeated id or timestamp stays malformed.
func TestRepeatedHeadersAsTheMiddlewareSeesThem(t *testing.T) {
	secret, other := newSecret(t), newSecret(t)
	_, srv, out := start(t, Config{Secrets: []string{secret}})
	foreign := http.Header{}
	s, err := webhook.NewSigner(other)
	if err != nil {
		t.Fatal(err)
	}
	s.Sign(foreign, "evt_1", fixedNow, []byte(body))
	req := signedRequest(t, srv.URL, []byte(body), secret)
	// The foreign (not matching) values first, then Herald's own.
	for _, name := range []string{webhook.HeaderSignature, webhook.HeaderWebhookSignature} {
		req.Header[name] = append(foreign.Values(name), req.Header.Values(name)...)
	}
	do(t, req)
	got := out.String()
	for _, want := range []string{"X-Signature:        verified", "webhook-signature:  verified"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	v := &webhook.Verifier{Secrets: []string{secret}, Now: func() time.Time { return fixedNow }}
	if err := v.Verify(req.Header, []byte(body)); err != nil {
		t.Errorf("webhook.Verifier.Verify: %v (the two must agree)", err)
	}

	req = signedRequest(t, srv.URL, []byte(body), secret)
	req.Header.Add(webhook.HeaderWebhookID, "evt_2")
	do(t, req)
	if got := out.String(); !strings.Contains(got, "webhook-signature:  NOT VERIFIED: malformed signature header: Webhook-Id header sent 2 times") {
		t.Errorf("a repeated webhook-id is not reported malformed:\n%s", got)
	}
}

func TestNoSecrets(t *testing.T) {
	_, srv, out := start(t, Config{Statuses: []int{503, 200}})
	resp, _ := do(t, signedRequest(t, srv.URL, []byte(body), newSecret(t)))
	if s := out.String(); strings.Count(s, "not verified: no --secret given") != 2 {
		t.Fatalf("output:\n%s", s)
	}
	// Without secrets nothing is checked: the script answers, signed or not.
	if resp.StatusCode != 503 {
		t.Fatalf("signed request: status %d, want the scripted 503", resp.StatusCode)
	}
	if resp, _ := do(t, signedRequest(t, srv.URL, []byte(body))); resp.StatusCode != 200 {
		t.Fatalf("unsigned request: status %d, want the scripted 200", resp.StatusCode)
	}
}

// TestUnverifiedRefusedScriptKept: with secrets, a request whose
// signature does not verify (tampered, stale, missing, one of two schemes
// failing) is answered 401 {"error":"invalid signature"}, as
// webhook.Middleware answers it, whatever the script says; the output
// says why, and the script is not advanced: the next verified request
// gets the step the refused one would have taken.
func TestUnverifiedRefusedScriptKept(t *testing.T) {
	secret := newSecret(t)
	r, srv, out := start(t, Config{Secrets: []string{secret}, Statuses: []int{503, 200}})
	tampered := signedRequest(t, srv.URL, []byte(body), secret)
	tampered.Body = io.NopCloser(strings.NewReader(strings.Replace(body, "f_1", "f_2", 1)))
	oneBad := signedRequest(t, srv.URL, []byte(body), secret)
	oneBad.Header.Set(webhook.HeaderWebhookSignature, "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))) // X-Signature verifies, webhook-signature does not
	other := signedRequest(t, srv.URL, []byte(body), newSecret(t))
	stale := signedRequest(t, srv.URL, []byte(body), secret)
	s, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	s.Sign(stale.Header, "evt_1", fixedNow.Add(-time.Hour), []byte(body))
	for name, req := range map[string]*http.Request{
		"tampered":           tampered,
		"one scheme failing": oneBad,
		"another secret":     other,
		"stale":              stale,
		"unsigned":           signedRequest(t, srv.URL, []byte(body)),
	} {
		resp, got := do(t, req)
		if resp.StatusCode != 401 || got != `{"error":"invalid signature"}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %q (%s), want 401 {\"error\":\"invalid signature\"} as JSON", name, resp.StatusCode, got, resp.Header.Get("Content-Type"))
		}
	}
	o := out.String()
	if n := strings.Count(o, "answered:           401 Unauthorized (invalid signature: "); n != 5 {
		t.Errorf("%d refusals printed with their reason, want 5:\n%s", n, o)
	}
	for _, want := range []string{
		"(invalid signature: no matching signature: webhook-signature; the --status script was not advanced)",
		"(invalid signature: timestamp too old: 3600 s old, tolerance 300 s; the --status script was not advanced)",
		"(invalid signature: missing signature: neither X-Signature nor webhook-signature headers present; the --status script was not advanced)",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	if strings.Contains(o, "503") {
		t.Errorf("a refused request took a step of the script:\n%s", o)
	}
	for i, want := range []int{503, 200, 200} {
		if resp, _ := do(t, signedRequest(t, srv.URL, []byte(body), secret)); resp.StatusCode != want {
			t.Fatalf("verified request %d: status %d, want %d (the script from its start)", i+1, resp.StatusCode, want)
		}
	}
	if r.Count() != 8 {
		t.Errorf("Count = %d, want 8 (refused requests are seen too)", r.Count())
	}
}

func TestScriptInOrderThenLastRepeats(t *testing.T) {
	_, srv, out := start(t, Config{Statuses: []int{503, 503, 200}})
	want := []int{503, 503, 200, 200, 200}
	for i, w := range want {
		resp, got := do(t, signedRequest(t, srv.URL, []byte(`{}`)))
		if resp.StatusCode != w {
			t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, w)
		}
		wantBody := `{"received":true}`
		if w != 200 {
			wantBody = `{"error":"scripted status"}`
		}
		if got != wantBody {
			t.Fatalf("request %d: body %q", i+1, got)
		}
		if resp.Header.Get("Retry-After") != "" {
			t.Fatalf("Retry-After sent without RetryAfter configured")
		}
	}
	if s := out.String(); strings.Count(s, "503 Service Unavailable") != 2 || strings.Count(s, "200 OK") != 3 {
		t.Fatalf("output:\n%s", s)
	}
}

func TestScriptConcurrent(t *testing.T) {
	script := []int{500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 200}
	r, srv, _ := start(t, Config{Statuses: script})
	const n = 40
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, st := range script[:len(script)-1] {
		if counts[st] != 1 {
			t.Errorf("status %d answered %d times, want once (%v)", st, counts[st], counts)
		}
	}
	if counts[200] != n-len(script)+1 {
		t.Errorf("200 answered %d times (%v)", counts[200], counts)
	}
	if r.Count() != n {
		t.Errorf("Count = %d", r.Count())
	}
}

func TestOversizeBody(t *testing.T) {
	r, srv, out := start(t, Config{MaxBodyBytes: 100, Statuses: []int{503, 200}})
	resp, _ := do(t, signedRequest(t, srv.URL, bytes.Repeat([]byte("x"), 101)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !strings.Contains(out.String(), "413 Request Entity Too Large (body larger than 100 bytes)") {
		t.Fatalf("output:\n%s", out.String())
	}
	// Exactly the limit is accepted, and the 413 did not consume the script.
	if st := post(t, srv.URL); st != 503 {
		t.Fatalf("next status %d, want 503", st)
	}
	resp, _ = do(t, signedRequest(t, srv.URL, bytes.Repeat([]byte("x"), 100)))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d at the limit", resp.StatusCode)
	}
	if r.Count() != 3 {
		t.Fatalf("Count = %d", r.Count())
	}
}

func TestDefaultMaxBody(t *testing.T) {
	_, srv, _ := start(t, Config{})
	resp, _ := do(t, signedRequest(t, srv.URL, make([]byte, DefaultMaxBodyBytes+1)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestRetryAfter(t *testing.T) {
	_, srv, out := start(t, Config{Statuses: []int{429, 503, 500, 200}, RetryAfter: "2"})
	for _, c := range []struct {
		status int
		ra     string
	}{{429, "2"}, {503, "2"}, {500, ""}, {200, ""}} {
		resp, _ := do(t, signedRequest(t, srv.URL, []byte(`{}`)))
		if resp.StatusCode != c.status || resp.Header.Get("Retry-After") != c.ra {
			t.Fatalf("got %d Retry-After %q, want %d %q", resp.StatusCode, resp.Header.Get("Retry-After"), c.status, c.ra)
		}
	}
	if !strings.Contains(out.String(), "429 Too Many Requests (Retry-After: 2)") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestBodyPrinting(t *testing.T) {
	_, srv, out := start(t, Config{})
	do(t, signedRequest(t, srv.URL, []byte("line one\nline two")))
	do(t, signedRequest(t, srv.URL, []byte(strings.Repeat("é", 2000)))) // 4000 bytes
	do(t, signedRequest(t, srv.URL, nil))
	s := out.String()
	for _, want := range []string{
		"17 bytes, raw\n     line one\n     line two\n",
		"4000 bytes, raw",
		"… (1952 more bytes not shown)", // cut at a rune boundary: 1024 runes = 2048 bytes shown
		"body:               (empty)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

// The body comes from whoever reaches the port, signed or not: terminal
// control sequences in it (ESC, or the C1 CSI that JSON strings may hold
// unescaped) must be printed quoted, never reach the terminal as they are.
func TestBodyControlCharactersQuoted(t *testing.T) {
	_, srv, out := start(t, Config{})
	do(t, signedRequest(t, srv.URL, []byte("hi\x1b[2J\x1b]0;pwned\x07")))
	do(t, signedRequest(t, srv.URL, []byte("{\"note\":\"\u009b2J\"}"))) // valid JSON: U+009B raw in a string
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07\u009b") {
		t.Errorf("output holds raw control characters: %q", s)
	}
	for _, want := range []string{`"hi\x1b[2J\x1b]0;pwned\a"`, `"{\"note\":\"\u009b2J\"}"`} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %s:\n%s", want, s)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Statuses: []int{99}},
		{Statuses: []int{200, 600}},
		{Secrets: []string{""}},
		// The README's placeholder, left unpasted: not base64 after whsec_,
		// so no delivery could verify with it.
		{Secrets: []string{"whsec_PASTE_THE_SECRET"}},
		{Secrets: []string{newSecret(t), "not-a-secret"}},
		{MaxBodyBytes: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
