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
		{"stripe numeric id", Stripe, nil, `{"id":12345678901234567890}`, "12345678901234567890", nil},
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
		{GitHub, "json:/data/object/n", "-1.5e3", nil}, // a number's text as sent
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
			if verr := ValidateDedupeRule(tc.rule); errors.Is(err, ErrBadDedupeRule) != (verr != nil) {
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
	for _, ok := range []string{"", "header:X-Request-Id", "json:/", "json:/id", "json:/a~0~1/0/-"} {
		if err := ValidateDedupeRule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"x", "header:", "header:a:b", "json:", "json:a", "json:/~", "json:/~x"} {
		if err := ValidateDedupeRule(bad); !errors.Is(err, ErrBadDedupeRule) {
			t.Errorf("%q: %v, want ErrBadDedupeRule", bad, err)
		}
	}
	// The empty pointer's error says why and what a valid rule looks like.
	if err := ValidateDedupeRule("json:"); err == nil || !strings.Contains(err.Error(), "whole document") || !strings.Contains(err.Error(), "json:/id") {
		t.Errorf(`ValidateDedupeRule("json:") = %v; want an error naming the whole document and json:/id`, err)
	}
}
