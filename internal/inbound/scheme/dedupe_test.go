package scheme

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestDedupeKeyNatural(t *testing.T) {
	cases := []struct {
		name   string
		scheme string
		h      http.Header
		body   string
		want   string
		err    error
	}{
		// standard-webhooks
		{"standard webhook-id", StandardWebhooks, http.Header{"Webhook-Id": {"msg_1"}, "Svix-Id": {"msg_2"}}, `{}`, "msg_1", nil},
		{"standard svix-id", StandardWebhooks, http.Header{"Svix-Id": {"msg_2"}}, `{}`, "msg_2", nil},
		{"standard none", StandardWebhooks, http.Header{}, `{"id":"x"}`, "", ErrNoDedupeKey},
		{"standard empty id", StandardWebhooks, http.Header{"Webhook-Id": {""}}, `{}`, "", ErrNoDedupeKey},
		{"standard id twice", StandardWebhooks, http.Header{"Webhook-Id": {"a", "b"}}, `{}`, "", ErrNoDedupeKey},
		// stripe
		{"stripe id", Stripe, nil, `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","data":{"object":{"id":"pi_1"}}}`, "evt_1NG8Du2eZvKYlo2CUI79vXWy", nil},
		{"stripe id after nested ids", Stripe, nil, `{"data":{"id":"pi_1","object":{"id":"pi_2"}},"list":[{"id":"x"}],"id":"evt_2"}`, "evt_2", nil},
		{"stripe escaped id", Stripe, nil, `{"id":"evt_\/a\u00e9"}`, "evt_/aé", nil},
		{"stripe escaped member name", Stripe, nil, `{"\u0069d":"evt_3"}`, "evt_3", nil},
		{"stripe whitespace", Stripe, nil, "\n { \"id\" :\t\"evt_4\" }\n", "evt_4", nil},
		{"stripe no id", Stripe, nil, `{"object":"event"}`, "", ErrNoDedupeKey},
		{"stripe id null", Stripe, nil, `{"id":null}`, "", ErrNoDedupeKey},
		{"stripe id object", Stripe, nil, `{"id":{"a":1}}`, "", ErrNoDedupeKey},
		{"stripe id empty", Stripe, nil, `{"id":""}`, "", ErrNoDedupeKey},
		{"stripe duplicate id", Stripe, nil, `{"id":"evt_a","id":"evt_b"}`, "", ErrNoDedupeKey},
		{"stripe not JSON", Stripe, nil, `{"id":"evt_a"`, "", ErrNoDedupeKey},
		{"stripe trailing garbage", Stripe, nil, `{"id":"evt_a"} x`, "", ErrNoDedupeKey},
		{"stripe top-level array", Stripe, nil, `[{"id":"evt_a"}]`, "", ErrNoDedupeKey},
		{"stripe id with NUL", Stripe, nil, `{"id":"evt\u0000"}`, "", ErrNoDedupeKey},
		{"stripe id invalid UTF-8", Stripe, nil, "{\"id\":\"evt\xff\"}", "", ErrNoDedupeKey},
		{"stripe id too long", Stripe, nil, `{"id":"` + strings.Repeat("a", MaxKeyLen+1) + `"}`, "", ErrNoDedupeKey},
		{"stripe id at max length", Stripe, nil, `{"id":"` + strings.Repeat("a", MaxKeyLen) + `"}`, strings.Repeat("a", MaxKeyLen), nil},
		{"stripe numeric id", Stripe, nil, `{"id":12345678901234567890}`, NumberKeyPrefix + "12345678901234567890", nil},
		// github
		{"github delivery", GitHub, http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}}, `{}`, "72d3162e-cc78-11e3-81ab-4c9367dc0958", nil},
		{"github none", GitHub, http.Header{}, `{"id":1}`, "", ErrNoDedupeKey},
		// shopify
		{"shopify webhook id", Shopify, http.Header{"X-Shopify-Webhook-Id": {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}, "X-Shopify-Event-Id": {"e"}}, `{"id":1}`, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", nil},
		{"shopify none", Shopify, http.Header{"X-Shopify-Event-Id": {"e"}}, `{"id":1}`, "", ErrNoDedupeKey},
		// slack
		{"slack event_id", Slack, nil, `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`, "Ev08MFMKH6", nil},
		{"slack url_verification", Slack, nil, `{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", nil},
		{"slack url_verification without challenge", Slack, nil, `{"type":"url_verification","event_id":"Ev1"}`, "", ErrNoDedupeKey},
		{"slack form payload", Slack, nil, `payload=%7B%22type%22%3A%22block_actions%22%7D`, "", ErrNoDedupeKey},
		{"slack no event_id", Slack, nil, `{"type":"event_callback"}`, "", ErrNoDedupeKey},
		// herald
		// herald: the signed body's id, never the unsigned X-Event-Id
		{"herald body id over X-Event-Id", Herald, http.Header{"X-Event-Id": {"evt_1"}, "Webhook-Id": {"evt_2"}}, `{"id":"evt_3"}`, "evt_3", nil},
		{"herald body id, no headers", Herald, http.Header{}, `{"id":"evt_3"}`, "evt_3", nil},
		{"herald no body id", Herald, http.Header{"X-Event-Id": {"evt_1"}}, `{}`, "", ErrNoDedupeKey},
		{"herald not JSON", Herald, http.Header{"X-Event-Id": {"evt_1"}}, `evt_1`, "", ErrNoDedupeKey},
		{"herald control char", Herald, http.Header{}, `{"id":"evt\u0001"}`, "", ErrNoDedupeKey},
		// hmac and unknown
		{"hmac has none", HMAC, http.Header{"X-Event-Id": {"evt_1"}}, `{"id":"x"}`, "", ErrNoDedupeKey},
		{"unknown scheme", "nope", http.Header{"X-Event-Id": {"evt_1"}}, `{"id":"x"}`, "", ErrBadDedupeRule},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DedupeKey(tc.scheme, "", tc.h, []byte(tc.body))
			checkKeyResult(t, got, err, tc.want, tc.err)
		})
	}
}

func checkKeyResult(t *testing.T, got string, err error, want string, wantErr error) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("got %q, %v; want error %v", got, err, wantErr)
		}
		if got != "" {
			t.Fatalf("error with key %q", got)
		}
		if errors.Is(err, ErrNoDedupeKey) == errors.Is(err, ErrBadDedupeRule) {
			t.Fatalf("%v must wrap exactly one of ErrNoDedupeKey, ErrBadDedupeRule", err)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestDedupeKeyRules(t *testing.T) {
	h := http.Header{"X-Request-Id": {"req-1"}, "X-Shopify-Event-Id": {"ev-9"}, "X-Event-Id": {"evt_h"}}
	body := `{"id":"evt_top","data":{"object":{"id":"obj_1","n":-1.5e3}},"a/b":{"m~n":"slashtilde"},"list":[{"k":"zero"},{"k":"one"}],"":"emptyname","t":true}`
	cases := []struct {
		scheme, rule string
		want         string
		err          error
	}{
		{Stripe, "header:X-Request-Id", "req-1", nil},
		{Shopify, "header:x-shopify-event-id", "ev-9", nil}, // any case
		{Herald, "header:X-Missing", "", ErrNoDedupeKey},
		{Herald, "json:/id", "evt_top", nil}, // the signed id instead of the header
		{GitHub, "json:/data/object/id", "obj_1", nil},
		{GitHub, "json:/data/object/n", NumberKeyPrefix + "-1500", nil}, // a number's canonical text
		{HMAC, "json:/a~1b/m~0n", "slashtilde", nil},
		{HMAC, "json:/list/1/k", "one", nil},
		{HMAC, "json:/list/0/k", "zero", nil},
		{HMAC, "json:/", "emptyname", nil},
		{HMAC, "json:/list/2/k", "", ErrNoDedupeKey},
		{HMAC, "json:/list/-/k", "", ErrNoDedupeKey},
		{HMAC, "json:/list/01/k", "", ErrNoDedupeKey},
		{HMAC, "json:/list/k", "", ErrNoDedupeKey},
		{HMAC, "json:/id/x", "", ErrNoDedupeKey},
		{HMAC, "json:/data", "", ErrNoDedupeKey}, // an object
		{HMAC, "json:/t", "", ErrNoDedupeKey},    // a boolean
		{HMAC, "json:", "", ErrBadDedupeRule},    // the whole document (RFC 6901): not an id
		{HMAC, "json:/nope", "", ErrNoDedupeKey},
		// bad rules
		{HMAC, "json:id", "", ErrBadDedupeRule},
		{HMAC, "json:/a~2b", "", ErrBadDedupeRule},
		{HMAC, "json:/a~", "", ErrBadDedupeRule},
		{HMAC, "header:", "", ErrBadDedupeRule},
		{HMAC, "header:X Request", "", ErrBadDedupeRule},
		{HMAC, "id", "", ErrBadDedupeRule},
		{HMAC, "Header:X-Request-Id", "", ErrBadDedupeRule},
		{"unknown", "header:X-Request-Id", "req-1", nil}, // a rule does not need the scheme
	}
	for _, tc := range cases {
		t.Run(tc.scheme+" "+tc.rule, func(t *testing.T) {
			got, err := DedupeKey(tc.scheme, tc.rule, h, []byte(body))
			checkKeyResult(t, got, err, tc.want, tc.err)
			// A "-" token (RFC 6901 §4: no array element) is refused when a
			// rule is saved, and finds no key in a rule saved before.
			refusedAtSave := errors.Is(err, ErrBadDedupeRule) || strings.Contains(tc.rule, "/-/")
			if verr := ValidateDedupeRule(tc.rule); refusedAtSave != (verr != nil) {
				t.Fatalf("ValidateDedupeRule(%q) = %v, DedupeKey error %v", tc.rule, verr, err)
			}
		})
	}
	// A JSON rule on a body that is not JSON.
	if _, err := DedupeKey(HMAC, "json:/id", nil, []byte("a=1")); !errors.Is(err, ErrNoDedupeKey) {
		t.Fatalf("non-JSON body: %v", err)
	}
	// A member name that is not valid UTF-8 matches nothing.
	if _, err := DedupeKey(HMAC, "json:/\xff", nil, []byte("{\"\xff\":\"v\"}")); !errors.Is(err, ErrNoDedupeKey) {
		t.Fatalf("invalid UTF-8 member name: %v", err)
	}
	// The whole document is never a key, not even a string.
	if got, err := DedupeKey(HMAC, "json:", nil, []byte(`"evt_whole"`)); !errors.Is(err, ErrBadDedupeRule) {
		t.Fatalf("whole-document string: %q, %v; want ErrBadDedupeRule", got, err)
	}
}

func TestDedupeKeyDuplicateOnPathOnly(t *testing.T) {
	// Duplicates off the pointer's path do not matter; on it they do.
	body := []byte(`{"a":{"x":1,"x":2},"id":"evt_1","b":{"id":"p","id":"q"}}`)
	if got, err := DedupeKey(Stripe, "", nil, body); err != nil || got != "evt_1" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := DedupeKey(Stripe, "json:/b/id", nil, body); !errors.Is(err, ErrNoDedupeKey) {
		t.Fatalf("duplicate on path: %v", err)
	}
}

func TestBodyKey(t *testing.T) {
	for _, b := range []string{"", "{}\n", "Zoë"} {
		sum := sha256.Sum256([]byte(b))
		if got, want := BodyKey([]byte(b)), "sha256:"+hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("BodyKey(%q) = %q, want %q", b, got, want)
		}
	}
	if BodyKey([]byte("{}")) == BodyKey([]byte("{}\n")) {
		t.Fatal("different bytes, same key")
	}
	if len(BodyKey(nil)) > MaxKeyLen {
		t.Fatal("BodyKey longer than MaxKeyLen")
	}
}

func TestValidateDedupeRule(t *testing.T) {
	for _, ok := range []string{"", "header:X-Request-Id", "json:/", "json:/id", "json:/a~0~1/0/x", "json:/id ", "json:/-x", "json:/~1-"} {
		if err := ValidateDedupeRule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"x", "header:", "header:a:b", "json:", "json:a", "json:/~", "json:/~x"} {
		if err := ValidateDedupeRule(bad); !errors.Is(err, ErrBadDedupeRule) {
			t.Errorf("%q: %v, want ErrBadDedupeRule", bad, err)
		}
	}
	// RFC 6901 §4: in an array, "-" designates the nonexistent element
	// after the last, so a pointer with a "-" token never finds an id.
	for _, bad := range []string{"json:/-", "json:/a~0~1/0/-", "json:/items/-/id"} {
		if err := ValidateDedupeRule(bad); !errors.Is(err, ErrBadDedupeRule) || !strings.Contains(err.Error(), `"-"`) || !strings.Contains(err.Error(), "RFC 6901 §4") {
			t.Errorf("%q: %v, want ErrBadDedupeRule naming the \"-\" token and RFC 6901 §4", bad, err)
		}
	}
	// The empty pointer's error says why and what a valid rule looks like.
	if err := ValidateDedupeRule("json:"); err == nil || !strings.Contains(err.Error(), "whole document") || !strings.Contains(err.Error(), "json:/id") {
		t.Errorf(`ValidateDedupeRule("json:") = %v; want an error naming the whole document and json:/id`, err)
	}
}

// TestDedupeKeyJSONTypes: a json: rule's key knows the value's type. A
// string keeps the key it always had (its text), so events deduped by an
// earlier version stay deduped; a number's key is NumberKeyPrefix and its
// canonical text, so numbers equal in value share a key (1, 1.0, 1e0) and
// no number shares one with a string (1 and "1"; not even with the string
// that spells its key, which holds a control character no string key may).
func TestDedupeKeyJSONTypes(t *testing.T) {
	key := func(v string) string {
		t.Helper()
		k, err := DedupeKey(HMAC, "json:/id", nil, []byte(`{"id":`+v+`}`))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		return k
	}
	if k := key(`"1"`); k != "1" {
		t.Errorf(`the string "1" has the key %q; want "1", as before`, k)
	}
	if k := key(`"evt_1"`); k != "evt_1" {
		t.Errorf(`the string "evt_1" has the key %q; want "evt_1", as before`, k)
	}
	for _, same := range [][]string{
		{`1`, `1.0`, `1e0`, `1E+0`, `10e-1`, `0.1e1`, `1.000`},
		{`0`, `-0`, `0.0`, `0e10`, `-0.0e-3`},
		{`-1500`, `-1.5e3`, `-15e2`, `-1500.0`},
		{`12345678901234567890`, `1.234567890123456789e19`},
		{`1e21`, `10e20`, `1000000000000000000000`},
	} {
		want := key(same[0])
		for _, v := range same[1:] {
			if k := key(v); k != want {
				t.Errorf("%s has the key %q, %s the key %q; want one key for numbers equal in value", same[0], want, v, k)
			}
		}
	}
	for _, differ := range [][2]string{
		{`1`, `"1"`},
		{`1.5`, `"1.5"`},
		{`0`, `"0"`},
		{`1`, `2`},
		{`12345678901234567890`, `12345678901234567891`}, // one float64 apart from none
		{`1`, `-1`},
		{`1e-7`, `1e-6`},
	} {
		if a, b := key(differ[0]), key(differ[1]); a == b {
			t.Errorf("%s and %s share the key %q; want two keys", differ[0], differ[1], a)
		}
	}
	// A string spelling a number's key is refused (a control character),
	// never taken for the number.
	if k, err := DedupeKey(HMAC, "json:/id", nil, []byte(`{"id":"\u001fnumber:1"}`)); !errors.Is(err, ErrNoDedupeKey) {
		t.Errorf("a string spelling the key of 1: %q, %v; want ErrNoDedupeKey", k, err)
	}
}

// TestCanonicalNumber: RFC 8785's texts of numbers (its appendix B and
// ECMAScript's Number::toString), on the exact decimal value.
func TestCanonicalNumber(t *testing.T) {
	for lit, want := range map[string]string{
		"0": "0", "-0": "0", "1": "1", "-1": "-1", "1.0": "1", "1e0": "1", "100": "100", "1e2": "100",
		"1.5": "1.5", "0.5": "0.5", "5e-1": "0.5", "0.000001": "0.000001", "1e-6": "0.000001", "1e-7": "1e-7",
		"1.25e-7": "1.25e-7", "123456789012345678901": "123456789012345678901", "1e20": "100000000000000000000",
		"1e21": "1e+21", "1.5e21": "1.5e+21", "-1.5e-10": "-1.5e-10", "333333333.33333329": "333333333.33333329",
		"9007199254740993": "9007199254740993", "1E+2": "100", "0.0001e4": "1", "1e400": "1e+400",
	} {
		got, err := CanonicalNumber(lit)
		if err != nil || got != want {
			t.Errorf("CanonicalNumber(%q) = %q, %v; want %q", lit, got, err, want)
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "1e1234567890"} {
		if got, err := CanonicalNumber(bad); err == nil {
			t.Errorf("CanonicalNumber(%q) = %q; want an error", bad, got)
		}
	}
}
