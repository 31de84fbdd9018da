package scheme

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzVerify: any scheme, headers, body and clock — no panic; an error
// wraps exactly one request sentinel (or is a config error); and a request
// that verifies stops verifying when one byte is appended to its body.
func FuzzVerify(f *testing.F) {
	// Seeds: a correctly signed request per scheme, then variations.
	for i, sc := range schemeCases() {
		for _, body := range []string{`{"id":"evt_1"}`, "{\"a\":\"\\/\"}\n", "Zoë"} {
			h := sc.sign(secretA, ts(testNow), body)
			names := make([]string, 0, 3)
			for name := range h {
				names = append(names, name)
			}
			sort.Strings(names)
			// Up to three headers travel as name/value pairs.
			for len(names) < 3 {
				names = append(names, "")
			}
			f.Add(uint8(i), secretA, names[0], h.Get(names[0]), names[1], h.Get(names[1]), names[2], h.Get(names[2]), []byte(body), int64(testNow), "", "", "", "", "", "")
		}
	}
	f.Add(uint8(100), "s", "X-Sig", "sha256=00", "", "", "", "", []byte("x"), int64(0), "X-Sig", "sha1", "hex", "sha256=", "", "{body}")
	f.Add(uint8(101), "s", "X-Sig", "AAAA", "X-Ts", "1", "", "", []byte("x"), int64(1), "X-Sig", "sha512", "base64", "", "X-Ts", "{timestamp}.{header:X-Ts}{body}")
	f.Add(uint8(3), secretA, "Webhook-Signature", "v1,"+strings.Repeat("A", 44)+" v1a,x", "Webhook-Id", "a.b", "Webhook-Timestamp", "00000000000000000001", []byte{}, int64(-1), "", "", "", "", "", "")
	f.Add(uint8(0), "", "X-Signature", "t=,v1=", "X-Signature", "t=1", "", "", []byte(nil), int64(1<<62), "", "", "", "", "", "")
	f.Add(uint8(20), "s", "X-Hub-Signature", "sha1=00", "", "", "", "", []byte("x"), int64(0), "", "", "", "", "", "")

	schemes := schemeCases()
	f.Fuzz(func(t *testing.T, pick uint8, secret, n1, v1, n2, v2, n3, v3 string, body []byte, now int64,
		hHeader, hAlg, hEnc, hPrefix, hTS, hTemplate string) {
		var c Config
		switch k := int(pick) - len(schemes); {
		case k < 0: // a scheme of the table tests, with the fuzzer's secret
			c = schemes[pick].config(secret)
		case k%2 == 0: // any scheme name, two secrets (rotation)
			c = Config{Scheme: Schemes[(k/2)%len(Schemes)], Secrets: []string{secret, secretB}}
		default: // a generic hmac source built by the fuzzer
			c = Config{Scheme: HMAC, Secrets: []string{secret}, HMAC: &HMACConfig{
				Header: hHeader, Algorithm: hAlg, Encoding: hEnc, Prefix: hPrefix, TimestampHeader: hTS, Template: hTemplate,
			}}
		}
		h := http.Header{}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}, {n3, v3}} {
			if kv[0] != "" {
				h.Add(kv[0], kv[1])
			}
		}
		orig := bytes.Clone(body)
		clock := time.Unix(now, 0)
		err := Verify(c, h, body, clock)
		if !bytes.Equal(body, orig) {
			t.Fatal("Verify modified the body")
		}
		if err != nil {
			if errors.Is(err, ErrInvalidConfig) {
				if c.Validate() == nil {
					t.Fatalf("config error %v for a valid config", err)
				}
				return
			}
			assertRequestSentinel(t, "Verify", err)
			if strings.Contains(err.Error(), secret) && len(secret) > 8 {
				t.Fatalf("error %q contains the secret", err)
			}
			return
		}
		// Verified: the body is covered by every scheme's MAC.
		longer := append(bytes.Clone(body), 'x')
		if err := Verify(c, h, longer, clock); err == nil {
			t.Fatalf("scheme %s verifies both a body and the body + \"x\"", c.Scheme)
		}
	})
}

// referenceLookup evaluates a JSON pointer the simple way: unmarshal the
// whole document (numbers kept as their text) and walk it.
func referenceLookup(body []byte, tokens []string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	for _, tok := range tokens {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return "", false
			}
		case []any:
			n, ok := arrayIndex(tok)
			if !ok || n >= len(x) {
				return "", false
			}
			v = x[n]
		default:
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return NumberKeyPrefix + referenceNumber(string(x)), true
	}
	return "", false
}

// referenceNumber is the canonical text of a JSON number whose exponent is
// small enough for exact arithmetic, checked against math/big: the
// canonical text must have the same value. For larger exponents it trusts
// CanonicalNumber (the fuzz checks the rest of the key).
func referenceNumber(lit string) string {
	c, err := CanonicalNumber(lit)
	if err != nil {
		return "error: " + err.Error()
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 && len(lit)-i > 5 {
		return c
	}
	a, okA := new(big.Rat).SetString(lit)
	b, okB := new(big.Rat).SetString(c)
	if !okA || !okB || a.Cmp(b) != 0 {
		return "value differs: " + c
	}
	return c
}

// FuzzDedupeKey: any scheme, rule, header and body — no panic; a key
// obeys the key rules; an error wraps exactly one of the two sentinels;
// and a json: rule's key equals what a whole-document decode finds.
func FuzzDedupeKey(f *testing.F) {
	f.Add(Stripe, "", "", "", []byte(`{"id":"evt_1","object":"event"}`))
	f.Add(Stripe, "", "", "", []byte(`{"id":"evt_\/1\u00e9","id2":[1,{"id":"x"}]}`))
	f.Add(Slack, "", "", "", []byte(`{"type":"url_verification","challenge":"abc"}`))
	f.Add(Slack, "", "", "", []byte(`{"type":"event_callback","event_id":"Ev1"}`))
	f.Add(StandardWebhooks, "", "Webhook-Id", "msg_1", []byte(`{}`))
	f.Add(StandardWebhooks, "", "Svix-Id", "msg_1", []byte(`{}`))
	f.Add(GitHub, "", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", []byte(`{}`))
	f.Add(Shopify, "", "X-Shopify-Webhook-Id", "b54557e4", []byte(`{}`))
	f.Add(Herald, "", "X-Event-Id", "evt_1", []byte(`{"id":"evt_1"}`))
	f.Add(HMAC, "header:X-Request-Id", "X-Request-Id", "r1", []byte(`{}`))
	f.Add(HMAC, "json:/a~1b/0/c~0", "", "", []byte(`{"a/b":[{"c~":12.5e-1}]}`))
	f.Add(HMAC, "json:/list/01", "", "", []byte(`{"list":[1,2]}`))
	f.Add(HMAC, "json:", "", "", []byte(`"whole"`))
	f.Add(HMAC, "json:/n", "", "", []byte(`{"n":-0.00120e+3}`))
	f.Add(HMAC, "json:/x", "", "", []byte(`{"x":"a","x":"b"}`))
	f.Add(HMAC, "json:/x", "", "", []byte(`{"x":"\ud800"}`))
	f.Add(HMAC, "json:/~2", "", "", []byte(`{}`))
	f.Add(HMAC, "json:/\xff", "", "", []byte("{\"\xff\":\"v\"}"))
	f.Add(HMAC, "json:/\uFFFD", "", "", []byte(`{"\ud800":"v"}`))
	f.Add("nope", "", "", "", []byte(`{"id":"1"}`))

	f.Fuzz(func(t *testing.T, scheme, rule, hName, hValue string, body []byte) {
		h := http.Header{}
		if hName != "" {
			h.Add(hName, hValue)
		}
		orig := bytes.Clone(body)
		key, err := DedupeKey(scheme, rule, h, body)
		if !bytes.Equal(body, orig) {
			t.Fatal("DedupeKey modified the body")
		}
		if err != nil {
			if key != "" {
				t.Fatalf("error %v with key %q", err, key)
			}
			if errors.Is(err, ErrNoDedupeKey) == errors.Is(err, ErrBadDedupeRule) {
				t.Fatalf("%v wraps both or neither sentinel", err)
			}
			if errors.Is(err, ErrBadDedupeRule) && rule != "" && ValidateDedupeRule(rule) == nil {
				t.Fatalf("bad-rule error %v for a rule ValidateDedupeRule accepts", err)
			}
			return
		}
		if key == "" || len(key) > MaxKeyLen || !utf8.ValidString(key) {
			t.Fatalf("bad key %q", key)
		}
		for _, r := range strings.TrimPrefix(key, NumberKeyPrefix) {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("key %q has a control character", key)
			}
		}
		// A "-" token is refused when a rule is saved (RFC 6901 §4: no
		// array element), yet still names a member "-" of an object.
		if err := ValidateDedupeRule(rule); err != nil && !strings.Contains(err.Error(), "RFC 6901 §4") {
			t.Fatalf("key %q from invalid rule %q", key, rule)
		}
		if p, ok := strings.CutPrefix(rule, "json:"); ok {
			tokens, err := parsePointer(p)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := referenceLookup(body, tokens)
			if !ok || want != key {
				t.Fatalf("rule %q on %q: key %q, reference %q (found %v)", rule, body, key, want, ok)
			}
		}
	})
}

// TestFuzzSeedsSignedVerify makes sure the FuzzVerify seeds built from
// schemeCases are real, verifying requests (so the fuzzer starts next to
// the interesting path).
func TestFuzzSeedsSignedVerify(t *testing.T) {
	for _, sc := range schemeCases() {
		h := sc.sign(secretA, strconv.Itoa(testNow), "{}")
		if len(h) > 3 {
			t.Fatalf("%s signs with %d headers; FuzzVerify passes 3", sc.name, len(h))
		}
		if err := Verify(sc.config(secretA), h, []byte("{}"), time.Unix(testNow, 0)); err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
	}
}
