package scheme

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// TestCandidatesShareTheMACs: a signature header sent several times is a
// list of candidates, but the content a github, shopify, slack or hmac
// signature covers is the same for each of them, so each secret's MAC is
// computed once per request, not once per candidate: 16 candidates (the
// most a request may send) must not cost 16 passes over a body of up to
// 16 MiB per secret, which anyone could make the gateway do without
// knowing a secret. Counted as allocations (each HMAC keyed allocates; a
// candidate's decoding a few).
func TestCandidatesShareTheMACs(t *testing.T) {
	secrets := []string{"candidate-secret-0001", "candidate-secret-0002", "candidate-secret-0003", "candidate-secret-0004", "candidate-secret-0005"}
	body := []byte(`{"event":"x"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	wrongHex := strings.Repeat("0", 64)
	wrongB64 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	m := hmac.New(sha256.New, []byte(secrets[4]))
	m.Write(body)
	rightHex := hex.EncodeToString(m.Sum(nil))
	for _, tc := range []struct {
		name   string
		c      Config
		header string
		value  string
		right  string
		extra  http.Header
	}{
		{"github", Config{Scheme: GitHub}, "X-Hub-Signature-256", "sha256=" + wrongHex, "sha256=" + rightHex, nil},
		{"shopify", Config{Scheme: Shopify}, "X-Shopify-Hmac-Sha256", wrongB64, "", nil},
		{"slack", Config{Scheme: Slack}, "X-Slack-Signature", "v0=" + wrongHex, "", http.Header{"X-Slack-Request-Timestamp": {ts}}},
		{"hmac", Config{Scheme: HMAC, HMAC: &HMACConfig{Header: "X-Sig"}}, "X-Sig", wrongHex, rightHex, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Secrets = secrets
			request := func(n int) http.Header {
				h := http.Header{}
				for k, vs := range tc.extra {
					h[k] = vs
				}
				for range n {
					h.Add(tc.header, tc.value)
				}
				return h
			}
			one, sixteen := request(1), request(16)
			allocs := func(h http.Header) float64 {
				return testing.AllocsPerRun(20, func() { _ = Verify(c, h, body, now) })
			}
			a1, a16 := allocs(one), allocs(sixteen)
			// A candidate's own work (decoding, an error) is a few
			// allocations; a MAC per secret per candidate is dozens.
			if perCandidate := (a16 - a1) / 15; perCandidate > 12 {
				t.Errorf("%v allocations for 1 candidate, %v for 16: %.1f more per candidate; want each secret's MAC computed once per request", a1, a16, perCandidate)
			}
			if tc.right != "" {
				// The right signature after 15 wrong ones still verifies.
				h := request(15)
				h.Add(tc.header, tc.right)
				if err := Verify(c, h, body, now); err != nil {
					t.Errorf("a right signature after 15 wrong ones: %v", err)
				}
			}
		})
	}
}

// TestHeraldFormatCopiesShareTheMACs: the copies of a stripe or herald
// signature header carrying one timestamp cost one MAC per secret, not
// one per copy, and copies with more than two timestamps are refused
// before any MAC (their content differs by timestamp): 16 copies made the
// gateway hash a body of up to 16 MiB 16 times per secret for anyone.
func TestHeraldFormatCopiesShareTheMACs(t *testing.T) {
	secrets := []string{"copy-secret-0001", "copy-secret-0002", "copy-secret-0003", "copy-secret-0004", "copy-secret-0005"}
	body := []byte(`{"id":"evt_1"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	wrong := "t=" + ts + ",v1=" + strings.Repeat("0", 64)
	m := hmac.New(sha256.New, []byte(secrets[4]))
	m.Write([]byte(ts + "."))
	m.Write(body)
	right := "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
	for _, tc := range []struct {
		name   string
		scheme string
		header string
	}{{"stripe", Stripe, "Stripe-Signature"}, {"herald", Herald, "X-Signature"}} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Scheme: tc.scheme, Secrets: secrets}
			request := func(values ...string) http.Header {
				h := http.Header{}
				for _, v := range values {
					h.Add(tc.header, v)
				}
				return h
			}
			copies := func(n int, v string) []string {
				out := make([]string, n)
				for i := range out {
					out[i] = v
				}
				return out
			}
			allocs := func(h http.Header) float64 {
				return testing.AllocsPerRun(20, func() { _ = Verify(c, h, body, now) })
			}
			a1, a16 := allocs(request(wrong)), allocs(request(copies(16, wrong)...))
			if perCopy := (a16 - a1) / 15; perCopy > 12 {
				t.Errorf("%v allocations for 1 copy, %v for 16: %.1f more per copy; want each secret's MAC computed once per timestamp", a1, a16, perCopy)
			}
			if err := Verify(c, request(append(copies(15, wrong), right)...), body, now); err != nil {
				t.Errorf("the right signature after 15 wrong copies: %v", err)
			}
			older := "t=" + strconv.FormatInt(now.Unix()-1, 10) + ",v1=" + strings.Repeat("0", 64)
			if err := Verify(c, request(older, right), body, now); err != nil {
				t.Errorf("two timestamps, the second copy right: %v", err)
			}
			oldest := "t=" + strconv.FormatInt(now.Unix()-2, 10) + ",v1=" + strings.Repeat("0", 64)
			err := Verify(c, request(older, oldest, right), body, now)
			if !errors.Is(err, webhook.ErrMalformedHeader) || !strings.Contains(err.Error(), tc.header) || !strings.Contains(err.Error(), "different timestamps") {
				t.Errorf("three timestamps: %v, want ErrMalformedHeader naming %s and the rule", err, tc.header)
			}
		})
	}
}
