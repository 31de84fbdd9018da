package scheme

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

var requestSentinels = []error{
	webhook.ErrMissingSignature,
	webhook.ErrMalformedHeader,
	webhook.ErrTimestampTooOld,
	webhook.ErrTimestampTooNew,
	webhook.ErrNoMatchingSignature,
}

// assertRequestSentinel checks the promise of Verify: a request error
// wraps exactly one of the five request sentinels and nothing else.
func assertRequestSentinel(t testing.TB, what string, err error) {
	t.Helper()
	n := 0
	for _, s := range requestSentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 || errors.Is(err, ErrInvalidConfig) || errors.Is(err, webhook.ErrInvalidSecret) {
		t.Fatalf("%s: error %v wraps %d request sentinels (config error %v), want exactly 1", what, err, n, errors.Is(err, ErrInvalidConfig))
	}
}

// Secrets valid for every scheme (Standard Webhooks needs base64).
var (
	secretA = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'a'}, 32))
	secretB = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'b'}, 32))
	secretC = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'c'}, 32))
)

const testNow = 1700000000

// Independent reference signers: each provider's rule written out again,
// without this package's code.

func mac(newHash func() hash.Hash, key []byte, parts ...string) []byte {
	m := hmac.New(newHash, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func standardKeyBytes(secret string) []byte {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return k
}

// testHMAC is the generic source used by the table tests: SHA-512, base64,
// a prefix, a timestamp header and a template signing a second header.
var testHMAC = &HMACConfig{
	Header:          "X-Acme-Signature",
	Algorithm:       "sha512",
	Encoding:        "base64",
	Prefix:          "v1=",
	TimestampHeader: "X-Acme-Timestamp",
	Template:        "{timestamp}:{header:X-Acme-Id}:{body}",
}

// testHMACPlain is a timestamp-less generic source (GitHub-like, SHA-1 hex).
var testHMACPlain = &HMACConfig{Header: "X-Plain-Sig", Algorithm: "sha1"}

type schemeCase struct {
	name      string
	scheme    string
	hmac      *HMACConfig
	sigHeader string // the header carrying the MAC
	tsHeader  string // "" when the scheme signs no timestamp
	garbage   string // a malformed signature value
	// sign returns the headers of a request signed with secret at ts;
	// tsText is the timestamp as written in the headers.
	sign func(secret, tsText, body string) http.Header
}

func (sc schemeCase) config(secrets ...string) Config {
	return Config{Scheme: sc.scheme, Secrets: secrets, HMAC: sc.hmac}
}

func schemeCases() []schemeCase {
	heraldFormat := func(header string) func(secret, ts, body string) http.Header {
		return func(secret, ts, body string) http.Header {
			sig := hex.EncodeToString(mac(sha256.New, []byte(secret), ts, ".", body))
			return http.Header{header: {"t=" + ts + ",v1=" + sig}}
		}
	}
	return []schemeCase{
		{name: "herald", scheme: Herald, sigHeader: "X-Signature", tsHeader: "X-Signature", garbage: "t=1,v1=zz",
			sign: heraldFormat("X-Signature")},
		{name: "stripe", scheme: Stripe, sigHeader: "Stripe-Signature", tsHeader: "Stripe-Signature", garbage: "v1=abc",
			sign: heraldFormat("Stripe-Signature")},
		{name: "standard-webhooks", scheme: StandardWebhooks, sigHeader: "Webhook-Signature", tsHeader: "Webhook-Timestamp", garbage: "v1,not-base64",
			sign: func(secret, ts, body string) http.Header {
				sig := base64.StdEncoding.EncodeToString(mac(sha256.New, standardKeyBytes(secret), "msg_1", ".", ts, ".", body))
				return http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {"v1," + sig}}
			}},
		{name: "standard-webhooks-svix", scheme: StandardWebhooks, sigHeader: "Svix-Signature", tsHeader: "Svix-Timestamp", garbage: "v1,AAAA",
			sign: func(secret, ts, body string) http.Header {
				sig := base64.StdEncoding.EncodeToString(mac(sha256.New, standardKeyBytes(secret), "msg_1", ".", ts, ".", body))
				return http.Header{"Svix-Id": {"msg_1"}, "Svix-Timestamp": {ts}, "Svix-Signature": {"v1," + sig}}
			}},
		{name: "github", scheme: GitHub, sigHeader: "X-Hub-Signature-256", garbage: "sha1=" + strings.Repeat("0", 40),
			sign: func(secret, _, body string) http.Header {
				return http.Header{"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac(sha256.New, []byte(secret), body))}}
			}},
		{name: "shopify", scheme: Shopify, sigHeader: "X-Shopify-Hmac-Sha256", garbage: hex.EncodeToString(make([]byte, 32)),
			sign: func(secret, _, body string) http.Header {
				return http.Header{"X-Shopify-Hmac-Sha256": {base64.StdEncoding.EncodeToString(mac(sha256.New, []byte(secret), body))}}
			}},
		{name: "slack", scheme: Slack, sigHeader: "X-Slack-Signature", tsHeader: "X-Slack-Request-Timestamp", garbage: "v1=" + strings.Repeat("0", 64),
			sign: func(secret, ts, body string) http.Header {
				return http.Header{
					"X-Slack-Signature":         {"v0=" + hex.EncodeToString(mac(sha256.New, []byte(secret), "v0:", ts, ":", body))},
					"X-Slack-Request-Timestamp": {ts},
				}
			}},
		{name: "hmac", scheme: HMAC, hmac: testHMAC, sigHeader: "X-Acme-Signature", tsHeader: "X-Acme-Timestamp", garbage: "v1=" + strings.Repeat("A", 10),
			sign: func(secret, ts, body string) http.Header {
				return http.Header{
					"X-Acme-Signature": {"v1=" + base64.StdEncoding.EncodeToString(mac(sha512.New, []byte(secret), ts, ":", "id-7", ":", body))},
					"X-Acme-Timestamp": {ts},
					"X-Acme-Id":        {"id-7"},
				}
			}},
		{name: "hmac-plain", scheme: HMAC, hmac: testHMACPlain, sigHeader: "X-Plain-Sig", garbage: strings.Repeat("0", 64),
			sign: func(secret, _, body string) http.Header {
				return http.Header{"X-Plain-Sig": {hex.EncodeToString(mac(sha1.New, []byte(secret), body))}}
			}},
	}
}

func ts(unix int64) string { return strconv.FormatInt(unix, 10) }

// TestVerifyBadInputs: every class of bad input, per scheme, with the exact
// sentinel.
func TestVerifyBadInputs(t *testing.T) {
	const body = `{"id":"evt_1","type":"x.y"}`
	now := time.Unix(testNow, 0)
	for _, sc := range schemeCases() {
		t.Run(sc.name, func(t *testing.T) {
			signed := func(secret string, at int64) http.Header { return sc.sign(secret, ts(at), body) }
			type tc struct {
				name string
				cfg  Config
				h    http.Header
				body string
				want error // nil: must verify
			}
			cases := []tc{
				{name: "valid", cfg: sc.config(secretA), h: signed(secretA, testNow), body: body},
				{name: "rotation: signed with the old secret", cfg: sc.config(secretB, secretA), h: signed(secretA, testNow), body: body},
				{name: "rotation: signed with the new secret", cfg: sc.config(secretB, secretA), h: signed(secretB, testNow), body: body},
				{name: "wrong secret", cfg: sc.config(secretA), h: signed(secretC, testNow), body: body, want: webhook.ErrNoMatchingSignature},
				{name: "rotation: neither secret", cfg: sc.config(secretB, secretA), h: signed(secretC, testNow), body: body, want: webhook.ErrNoMatchingSignature},
				{name: "tampered body", cfg: sc.config(secretA), h: signed(secretA, testNow), body: body[:len(body)-1] + ` }`, want: webhook.ErrNoMatchingSignature},
				{name: "body with one more byte", cfg: sc.config(secretA), h: signed(secretA, testNow), body: body + "\n", want: webhook.ErrNoMatchingSignature},
				{name: "empty body", cfg: sc.config(secretA), h: signed(secretA, testNow), body: "", want: webhook.ErrNoMatchingSignature},
				{name: "no headers at all", cfg: sc.config(secretA), h: http.Header{}, body: body, want: webhook.ErrMissingSignature},
			}

			h := signed(secretA, testNow)
			h.Del(sc.sigHeader)
			cases = append(cases, tc{name: "missing signature header", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMissingSignature})

			h = signed(secretA, testNow)
			h.Set(sc.sigHeader, "")
			cases = append(cases, tc{name: "empty signature header", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMissingSignature})

			h = signed(secretA, testNow)
			h.Set(sc.sigHeader, sc.garbage)
			cases = append(cases, tc{name: "malformed signature header", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMalformedHeader})

			// A signature header sent several times is a list of
			// candidates (issue 13 point 9).
			h = signed(secretA, testNow)
			h.Add(sc.sigHeader, h.Get(sc.sigHeader))
			cases = append(cases, tc{name: "signature header sent twice", cfg: sc.config(secretA), h: h, body: body, want: nil})

			h = signed(secretA, testNow)
			good := h.Get(sc.sigHeader)
			h[http.CanonicalHeaderKey(sc.sigHeader)] = []string{signed(secretB, testNow).Get(sc.sigHeader), good}
			cases = append(cases, tc{name: "a wrong signature header, then the right one", cfg: sc.config(secretA), h: h, body: body, want: nil})

			h = signed(secretB, testNow)
			h.Add(sc.sigHeader, h.Get(sc.sigHeader))
			cases = append(cases, tc{name: "two wrong signature headers", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrNoMatchingSignature})

			h = signed(secretA, testNow)
			for range 17 {
				h.Add(sc.sigHeader, good)
			}
			cases = append(cases, tc{name: "signature header sent 18 times", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMalformedHeader})

			h = signed(secretA, testNow)
			h.Set(sc.sigHeader, h.Get(sc.sigHeader)+strings.Repeat("0", 9<<10))
			cases = append(cases, tc{name: "signature header over 8 KiB", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMalformedHeader})

			h = signed(secretA, testNow)
			h.Set(sc.sigHeader, h.Get(sc.sigHeader)+"0")
			cases = append(cases, tc{name: "signature one character too long", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMalformedHeader})

			tol := int64(DefaultTolerance / time.Second)
			if sc.tsHeader != "" {
				cases = append(cases,
					tc{name: "timestamp too old", cfg: sc.config(secretA), h: signed(secretA, testNow-tol-1), body: body, want: webhook.ErrTimestampTooOld},
					tc{name: "timestamp too new", cfg: sc.config(secretA), h: signed(secretA, testNow+tol+1), body: body, want: webhook.ErrTimestampTooNew},
					tc{name: "timestamp exactly tolerance old", cfg: sc.config(secretA), h: signed(secretA, testNow-tol), body: body},
					tc{name: "timestamp exactly tolerance ahead", cfg: sc.config(secretA), h: signed(secretA, testNow+tol), body: body},
					tc{name: "timestamp an hour ahead", cfg: sc.config(secretA), h: signed(secretA, testNow+3600), body: body, want: webhook.ErrTimestampTooNew},
					tc{name: "timestamp zero", cfg: sc.config(secretA), h: signed(secretA, 0), body: body, want: webhook.ErrTimestampTooOld},
					tc{name: "timestamp far future", cfg: sc.config(secretA), h: sc.sign(secretA, "9223372036854775807", body), body: body, want: webhook.ErrTimestampTooNew},
					tc{name: "timestamp out of int64", cfg: sc.config(secretA), h: sc.sign(secretA, "9223372036854775808", body), body: body, want: webhook.ErrMalformedHeader},
					tc{name: "timestamp not digits", cfg: sc.config(secretA), h: sc.sign(secretA, "17e8", body), body: body, want: webhook.ErrMalformedHeader},
					tc{name: "timestamp negative", cfg: sc.config(secretA), h: sc.sign(secretA, "-1", body), body: body, want: webhook.ErrMalformedHeader},
				)
				custom := sc.config(secretA)
				custom.Tolerance = 10 * time.Second
				cases = append(cases,
					tc{name: "custom tolerance: 11 s old", cfg: custom, h: signed(secretA, testNow-11), body: body, want: webhook.ErrTimestampTooOld},
					tc{name: "custom tolerance: 10 s old", cfg: custom, h: signed(secretA, testNow-10), body: body},
				)
				if sc.tsHeader != sc.sigHeader {
					h = signed(secretA, testNow)
					h.Del(sc.tsHeader)
					cases = append(cases, tc{name: "missing timestamp header", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMissingSignature})
					h = signed(secretA, testNow)
					h.Add(sc.tsHeader, ts(testNow))
					cases = append(cases, tc{name: "timestamp header sent twice", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrMalformedHeader})
					// A timestamp changed after signing: fresh, but the MAC
					// covered the old one.
					h = signed(secretA, testNow-100)
					h.Set(sc.tsHeader, ts(testNow))
					cases = append(cases, tc{name: "timestamp changed after signing", cfg: sc.config(secretA), h: h, body: body, want: webhook.ErrNoMatchingSignature})
				}
			} else {
				// No timestamp is signed, so none is checked: a request
				// signed long ago still verifies.
				cases = append(cases,
					tc{name: "no replay window (scheme signs no timestamp)", cfg: sc.config(secretA), h: signed(secretA, 0), body: body},
				)
			}

			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					in := []byte(c.body)
					orig := bytes.Clone(in)
					err := Verify(c.cfg, c.h, in, now)
					if !bytes.Equal(in, orig) {
						t.Fatal("Verify modified the body")
					}
					if c.want == nil {
						if err != nil {
							t.Fatalf("want valid, got %v", err)
						}
						return
					}
					if !errors.Is(err, c.want) {
						t.Fatalf("got %v, want %v", err, c.want)
					}
					assertRequestSentinel(t, c.name, err)
				})
			}
		})
	}
}

// TestVerifyRawBytes: bodies that a parse-and-re-serialise step would
// change verify as sent, in every scheme.
func TestVerifyRawBytes(t *testing.T) {
	bodies := map[string]string{
		"trailing newline":  "{\"id\":\"evt_1\"}\n",
		"trailing CRLF":     "{\"id\":\"evt_1\"}\r\n",
		"escaped slashes":   `{"id":"evt_1","url":"https:\/\/example.com\/a\/b"}`,
		"non-ASCII":         `{"id":"evt_1","name":"Zoë 🚀 café — 東京"}`,
		"unicode escapes":   `{"id":"evt_1","name":"Zo\u00eb \ud83d\ude80"}`,
		"pretty and spaced": "{\n  \"id\" : \"evt_1\",\n\t\"n\": 1.0e0\n}\n",
		"duplicate keys":    `{"id":"evt_1","id":"evt_2"}`,
		"not JSON":          "a=1&b=%2F",
		"invalid UTF-8":     "\xff\xfe\x00\x01",
		"empty":             "",
	}
	now := time.Unix(testNow, 0)
	for _, sc := range schemeCases() {
		for name, body := range bodies {
			h := sc.sign(secretA, ts(testNow), body)
			if err := Verify(sc.config(secretA), h, []byte(body), now); err != nil {
				t.Errorf("%s / %s: %v", sc.name, name, err)
			}
			// One byte changed anywhere fails.
			if len(body) > 0 {
				b := []byte(body)
				b[len(b)/2] ^= 0x01
				if err := Verify(sc.config(secretA), h, b, now); !errors.Is(err, webhook.ErrNoMatchingSignature) {
					t.Errorf("%s / %s with a flipped bit: %v", sc.name, name, err)
				}
			}
		}
	}
}

func TestVerifyInvalidConfig(t *testing.T) {
	h := http.Header{"X-Signature": {"t=1,v1=" + strings.Repeat("0", 64)}}
	for _, c := range []Config{
		{},
		{Scheme: "nope", Secrets: []string{"s"}},
		{Scheme: Herald},
		{Scheme: StandardWebhooks, Secrets: []string{"not base64!"}},
		{Scheme: HMAC, Secrets: []string{"s"}},
		{Scheme: HMAC, Secrets: []string{"s"}, HMAC: &HMACConfig{Header: "X", Template: "{timestamp}"}},
	} {
		err := Verify(c, h, nil, time.Unix(testNow, 0))
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
		for _, s := range requestSentinels {
			if errors.Is(err, s) {
				t.Errorf("%+v: config error %v wraps request sentinel %v", c, err, s)
			}
		}
	}
}

func TestVerifyHeraldMultipleSignatures(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	good := hex.EncodeToString(mac(sha256.New, []byte(secretA), ts(testNow), ".", string(body)))
	other := hex.EncodeToString(mac(sha256.New, []byte(secretC), ts(testNow), ".", string(body)))
	for _, scheme := range []string{Herald, Stripe} {
		header := map[string]string{Herald: "X-Signature", Stripe: "Stripe-Signature"}[scheme]
		for _, v := range []string{
			"t=" + ts(testNow) + ",v1=" + other + ",v1=" + good,
			"t=" + ts(testNow) + ",v1=" + good + ",v1=" + other,
			"t=" + ts(testNow) + ",v1=" + strings.ToUpper(good),
			// Optional whitespace around "," and "=", as Stripe's libraries
			// accept (issue 13 point 9).
			"t=" + ts(testNow) + ", v1=" + good,
			"t = " + ts(testNow) + " ,\tv1 = " + other + " , v1=" + good,
		} {
			if err := Verify(Config{Scheme: scheme, Secrets: []string{secretA}}, http.Header{header: {v}}, body, time.Unix(testNow, 0)); err != nil {
				t.Errorf("%s %q: %v", scheme, v, err)
			}
		}
	}
}

func TestVerifySlackTimestampAsSent(t *testing.T) {
	// Slack signs the header text; a timestamp with a leading zero or a
	// sign is refused (issue 13 point 9), whatever it was signed with.
	body := `{"type":"event_callback","event_id":"Ev1"}`
	for _, sent := range []string{"0" + ts(testNow), "+" + ts(testNow)} {
		h := http.Header{
			"X-Slack-Signature":         {"v0=" + hex.EncodeToString(mac(sha256.New, []byte(secretA), "v0:", sent, ":", body))},
			"X-Slack-Request-Timestamp": {sent},
		}
		if err := Verify(Config{Scheme: Slack, Secrets: []string{secretA}}, h, []byte(body), time.Unix(testNow, 0)); !errors.Is(err, webhook.ErrMalformedHeader) {
			t.Fatalf("timestamp %q: %v; want ErrMalformedHeader", sent, err)
		}
	}
	sent := ts(testNow)
	h := http.Header{
		"X-Slack-Signature":         {"v0=" + hex.EncodeToString(mac(sha256.New, []byte(secretA), "v0:", sent, ":", body))},
		"X-Slack-Request-Timestamp": {sent},
	}
	if err := Verify(Config{Scheme: Slack, Secrets: []string{secretA}}, h, []byte(body), time.Unix(testNow, 0)); err != nil {
		t.Fatal(err)
	}
	h.Set("X-Slack-Request-Timestamp", ts(testNow+1))
	if err := Verify(Config{Scheme: Slack, Secrets: []string{secretA}}, h, []byte(body), time.Unix(testNow, 0)); !errors.Is(err, webhook.ErrNoMatchingSignature) {
		t.Fatalf("re-written timestamp: %v", err)
	}
}

func TestVerifyHMACTemplate(t *testing.T) {
	body := `{"a":1}`
	now := time.Unix(testNow, 0)
	sign := func(h http.Header) http.Header {
		sig := mac(sha512.New, []byte(secretA), h.Get("X-Acme-Timestamp"), ":", h.Get("X-Acme-Id"), ":", body)
		h.Set("X-Acme-Signature", "v1="+base64.StdEncoding.EncodeToString(sig))
		return h
	}
	c := Config{Scheme: HMAC, Secrets: []string{secretA}, HMAC: testHMAC}

	ok := sign(http.Header{"X-Acme-Timestamp": {ts(testNow)}, "X-Acme-Id": {"id-1"}})
	if err := Verify(c, ok, []byte(body), now); err != nil {
		t.Fatal(err)
	}
	// The signed header is part of the content.
	changed := ok.Clone()
	changed.Set("X-Acme-Id", "id-2")
	if err := Verify(c, changed, []byte(body), now); !errors.Is(err, webhook.ErrNoMatchingSignature) {
		t.Fatalf("changed signed header: %v", err)
	}
	// Present but empty is the empty string, and signed as such.
	if err := Verify(c, sign(http.Header{"X-Acme-Timestamp": {ts(testNow)}, "X-Acme-Id": {""}}), []byte(body), now); err != nil {
		t.Fatalf("empty signed header: %v", err)
	}
	absent := ok.Clone()
	absent.Del("X-Acme-Id")
	if err := Verify(c, absent, []byte(body), now); !errors.Is(err, webhook.ErrMissingSignature) {
		t.Fatalf("absent signed header: %v", err)
	}
	twice := ok.Clone()
	twice.Add("X-Acme-Id", "id-1")
	if err := Verify(c, twice, []byte(body), now); !errors.Is(err, webhook.ErrMalformedHeader) {
		t.Fatalf("signed header twice: %v", err)
	}
	noPrefix := ok.Clone()
	noPrefix.Set("X-Acme-Signature", strings.TrimPrefix(ok.Get("X-Acme-Signature"), "v1="))
	if err := Verify(c, noPrefix, []byte(body), now); !errors.Is(err, webhook.ErrMalformedHeader) {
		t.Fatalf("missing prefix: %v", err)
	}
	// Unpadded base64 is accepted too.
	raw := ok.Clone()
	raw.Set("X-Acme-Signature", strings.TrimRight(ok.Get("X-Acme-Signature"), "="))
	if err := Verify(c, raw, []byte(body), now); err != nil {
		t.Fatalf("unpadded base64: %v", err)
	}
}

func TestVerifyHMACDefaults(t *testing.T) {
	// Defaults: sha256, hex (either case), template {body}, no timestamp.
	body := `{"a":1}`
	c := Config{Scheme: HMAC, Secrets: []string{"plain secret"}, HMAC: &HMACConfig{Header: "x-signature-256", Prefix: "sha256="}}
	sig := hex.EncodeToString(mac(sha256.New, []byte("plain secret"), body))
	for _, v := range []string{"sha256=" + sig, "sha256=" + strings.ToUpper(sig)} {
		if err := Verify(c, http.Header{"X-Signature-256": {v}}, []byte(body), time.Unix(0, 0)); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
	}
	if err := Verify(c, http.Header{"X-Signature-256": {"SHA256=" + sig}}, []byte(body), time.Unix(0, 0)); !errors.Is(err, webhook.ErrMalformedHeader) {
		t.Fatalf("prefix is case-sensitive: %v", err)
	}
	// Literal text in the template is signed.
	c.HMAC = &HMACConfig{Header: "X-Sig", Template: "POST /hook\n{body}"}
	sig = hex.EncodeToString(mac(sha256.New, []byte("plain secret"), "POST /hook\n", body))
	if err := Verify(c, http.Header{"X-Sig": {sig}}, []byte(body), time.Unix(0, 0)); err != nil {
		t.Fatalf("literal template: %v", err)
	}
}

func TestVerifyGitHubOnlySHA1(t *testing.T) {
	body := `{"zen":"x"}`
	h := http.Header{"X-Hub-Signature": {"sha1=" + hex.EncodeToString(mac(sha1.New, []byte(secretA), body))}}
	err := Verify(Config{Scheme: GitHub, Secrets: []string{secretA}}, h, []byte(body), time.Unix(0, 0))
	if !errors.Is(err, webhook.ErrMissingSignature) {
		t.Fatalf("SHA-1 only: %v", err)
	}
	// With both (as GitHub sends), the -256 one decides.
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac(sha256.New, []byte(secretA), body)))
	if err := Verify(Config{Scheme: GitHub, Secrets: []string{secretA}}, h, []byte(body), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
}

// TestStripeErrorsNameStripeSignature: a refused Stripe request's reason
// (logged) names Stripe-Signature, not the X-Signature of Herald's own
// format, and still wraps the webhook package's sentinel.
func TestStripeErrorsNameStripeSignature(t *testing.T) {
	c := Config{Scheme: Stripe, Secrets: []string{"whsec_0123456789abcdef"}, Tolerance: 5 * time.Minute}
	now := time.Unix(1_700_000_000, 0)
	h := http.Header{"Stripe-Signature": {"t=1700000000,v1=" + strings.Repeat("ab", 32)}}
	err := Verify(c, h, []byte(`{"id":"evt_1"}`), now)
	if !errors.Is(err, webhook.ErrNoMatchingSignature) || !strings.Contains(err.Error(), "Stripe-Signature") || strings.Contains(err.Error(), "X-Signature") {
		t.Fatalf("err = %v; want ErrNoMatchingSignature naming Stripe-Signature only", err)
	}
}

// TestMissingTimestampNamesIt: an hmac source's request without its
// timestamp header is refused as a missing signature, and the reason (in
// the log) says the missing header is the signed timestamp, not the
// signature.
func TestMissingTimestampNamesIt(t *testing.T) {
	h := http.Header{}
	h.Set(testHMAC.Header, "v1="+base64.StdEncoding.EncodeToString(make([]byte, 64))) // a SHA-512 MAC's shape
	h.Set("X-Acme-Id", "1")
	err := Verify(Config{Scheme: HMAC, Secrets: []string{"secret-a-0123456789"}, HMAC: testHMAC}, h, []byte(`{}`), time.Unix(testNow, 0))
	if !errors.Is(err, webhook.ErrMissingSignature) || !strings.Contains(err.Error(), "no X-Acme-Timestamp header (the signed timestamp)") {
		t.Errorf("no timestamp header: %v", err)
	}
}
