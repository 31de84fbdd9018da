package scheme

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

func TestValidateAccepts(t *testing.T) {
	for _, c := range []Config{
		{Scheme: Herald, Secrets: []string{"any non-empty string"}},
		{Scheme: Stripe, Secrets: []string{"whsec_test_secret", "whsec_old"}},
		{Scheme: StandardWebhooks, Secrets: []string{secretA, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{Scheme: GitHub, Secrets: []string{"It's a Secret to Everybody"}},
		{Scheme: Shopify, Secrets: []string{"hush"}},
		{Scheme: Slack, Secrets: []string{"e6b19c573432dcc6b075501d51b51bb8"}, Tolerance: time.Minute},
		{Scheme: HMAC, Secrets: []string{"s"}, HMAC: &HMACConfig{Header: "X-Signature-256"}},
		{Scheme: HMAC, Secrets: []string{"s"}, HMAC: testHMAC},
		{Scheme: HMAC, Secrets: []string{"s"}, HMAC: &HMACConfig{Header: "X-Sig", Algorithm: "sha1", Encoding: "base64", TimestampHeader: "X-Ts", Template: "{header:x-ts}.{body}"}},
		{Scheme: HMAC, Secrets: []string{"s"}, HMAC: &HMACConfig{Header: "X-Sig", Algorithm: "sha512", Encoding: "hex", Template: "}literal{body}}"}},
		{Scheme: Herald, Secrets: []string{"s"}, Tolerance: time.Second},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestValidateErrors pins the exact messages: the API shows them as the
// rule that failed.
func TestValidateErrors(t *testing.T) {
	hm := func(h HMACConfig) Config { return Config{Scheme: HMAC, Secrets: []string{"s"}, HMAC: &h} }
	tooMany := make([]string, MaxSecrets+1)
	for i := range tooMany {
		tooMany[i] = "s"
	}
	cases := []struct {
		c     Config
		field string
		want  string
	}{
		{Config{Secrets: []string{"s"}}, "scheme", `scheme: unknown scheme "" (want herald, standard-webhooks, stripe, github, shopify, slack or hmac)`},
		{Config{Scheme: "Stripe", Secrets: []string{"s"}}, "scheme", `scheme: unknown scheme "Stripe" (want herald, standard-webhooks, stripe, github, shopify, slack or hmac)`},
		{Config{Scheme: Stripe}, "secrets", "secrets: at least one secret is required"},
		{Config{Scheme: Stripe, Secrets: []string{}}, "secrets", "secrets: at least one secret is required"},
		{Config{Scheme: Stripe, Secrets: tooMany}, "secrets", "secrets: more than 16 secrets"},
		{Config{Scheme: GitHub, Secrets: []string{"a", ""}}, "secrets[1]", "secrets[1]: empty"},
		// The rule states what is accepted: the prefix is optional
		// (TestValidateAccepts takes an unprefixed secret).
		{Config{Scheme: StandardWebhooks, Secrets: []string{secretA, "whsec_not base64!"}}, "secrets[1]", "secrets[1]: not a Standard Webhooks secret (standard base64, optionally prefixed whsec_)"},
		{Config{Scheme: StandardWebhooks, Secrets: []string{"whsec_"}}, "secrets[0]", "secrets[0]: not a Standard Webhooks secret (standard base64, optionally prefixed whsec_)"},
		{Config{Scheme: StandardWebhooks, Secrets: []string{"not base64 at all!"}}, "secrets[0]", "secrets[0]: not a Standard Webhooks secret (standard base64, optionally prefixed whsec_)"},
		{Config{Scheme: Slack, Secrets: []string{"s"}, Tolerance: -time.Second}, "tolerance", "tolerance: must be 0 (default 300s) or at least 1s"},
		{Config{Scheme: Slack, Secrets: []string{"s"}, Tolerance: 999 * time.Millisecond}, "tolerance", "tolerance: must be 0 (default 300s) or at least 1s"},
		{Config{Scheme: HMAC, Secrets: []string{"s"}}, "hmac", "hmac: required for scheme hmac"},
		{Config{Scheme: GitHub, Secrets: []string{"s"}, HMAC: &HMACConfig{Header: "X"}}, "hmac", "hmac: only allowed with scheme hmac"},
		{hm(HMACConfig{}), "hmac.header", "hmac.header: required"},
		{hm(HMACConfig{Header: "X Sig"}), "hmac.header", "hmac.header: not a valid header name"},
		{hm(HMACConfig{Header: "X-Sig:"}), "hmac.header", "hmac.header: not a valid header name"},
		{hm(HMACConfig{Header: "X-Sig", Algorithm: "md5"}), "hmac.algorithm", `hmac.algorithm: unknown algorithm "md5" (want sha256, sha1 or sha512)`},
		{hm(HMACConfig{Header: "X-Sig", Algorithm: "SHA256"}), "hmac.algorithm", `hmac.algorithm: unknown algorithm "SHA256" (want sha256, sha1 or sha512)`},
		{hm(HMACConfig{Header: "X-Sig", Encoding: "base64url"}), "hmac.encoding", `hmac.encoding: unknown encoding "base64url" (want hex or base64)`},
		{hm(HMACConfig{Header: "X-Sig", Prefix: strings.Repeat("p", 65)}), "hmac.prefix", "hmac.prefix: longer than 64 bytes"},
		{hm(HMACConfig{Header: "X-Sig", Prefix: "sha256=\n"}), "hmac.prefix", "hmac.prefix: contains a control character"},
		{hm(HMACConfig{Header: "X-Sig", TimestampHeader: "X Ts"}), "hmac.timestamp_header", "hmac.timestamp_header: not a valid header name"},
		{hm(HMACConfig{Header: "X-Sig", TimestampHeader: "x-sig", Template: "{timestamp}{body}"}), "hmac.timestamp_header", "hmac.timestamp_header: must differ from hmac.header"},
		{hm(HMACConfig{Header: "X-Sig", Template: strings.Repeat("{body}", 200)}), "hmac.template", "hmac.template: longer than 1024 bytes"},
		{hm(HMACConfig{Header: "X-Sig", Template: "{body}.{timestamp"}), "hmac.template", "hmac.template: unterminated placeholder at byte 7"},
		{hm(HMACConfig{Header: "X-Sig", Template: "{body}{id}"}), "hmac.template", `hmac.template: unknown placeholder "{id}" (want {body}, {timestamp} or {header:Name})`},
		{hm(HMACConfig{Header: "X-Sig", Template: "{{body}}"}), "hmac.template", `hmac.template: unknown placeholder "{{body}" (want {body}, {timestamp} or {header:Name})`},
		{hm(HMACConfig{Header: "X-Sig", Template: "{body}{header:}"}), "hmac.template", `hmac.template: placeholder "{header:}" needs a valid header name`},
		{hm(HMACConfig{Header: "X-Sig", Template: "{body}{header:a b}"}), "hmac.template", `hmac.template: placeholder "{header:a b}" needs a valid header name`},
		{hm(HMACConfig{Header: "X-Sig", Template: "{timestamp}.{header:X-Id}"}), "hmac.template", "hmac.template: must contain {body}"},
		{hm(HMACConfig{Header: "X-Sig", Template: "{timestamp}.{body}"}), "hmac.template", "hmac.template: {timestamp} needs hmac.timestamp_header"},
		{hm(HMACConfig{Header: "X-Sig", TimestampHeader: "X-Ts"}), "hmac.template", "hmac.template: must sign the timestamp ({timestamp}) when hmac.timestamp_header is set"},
		{hm(HMACConfig{Header: "X-Sig", TimestampHeader: "X-Ts", Template: "{header:X-Other}.{body}"}), "hmac.template", "hmac.template: must sign the timestamp ({timestamp}) when hmac.timestamp_header is set"},
	}
	for _, tc := range cases {
		err := tc.c.Validate()
		if err == nil {
			t.Errorf("%+v: no error, want %q", tc.c, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.c, err.Error(), tc.want)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%q: ConfigError field %v, want %q", err, ce, tc.field)
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q does not wrap ErrInvalidConfig", err)
		}
		for _, s := range tc.c.Secrets {
			if len(s) > 8 && strings.Contains(err.Error(), s) {
				t.Errorf("%q contains a secret", err)
			}
		}
	}
}

func TestValidateSecretCause(t *testing.T) {
	err := Config{Scheme: StandardWebhooks, Secrets: []string{"whsec_!!"}}.Validate()
	if !errors.Is(err, webhook.ErrInvalidSecret) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("%v: want both ErrInvalidConfig and webhook.ErrInvalidSecret", err)
	}
}

// TestConfigJSON: the stored form. Tolerance is not part of it.
func TestConfigJSON(t *testing.T) {
	c := Config{Scheme: HMAC, Secrets: []string{"a", "b"}, Tolerance: time.Minute, HMAC: &HMACConfig{
		Header: "X-Sig", Algorithm: "sha1", Encoding: "base64", Prefix: "sha1=", TimestampHeader: "X-Ts", Template: "{timestamp}.{body}",
	}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"scheme":"hmac","secrets":["a","b"],"hmac":{"header":"X-Sig","algorithm":"sha1","encoding":"base64","prefix":"sha1=","timestamp_header":"X-Ts","template":"{timestamp}.{body}"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(Config{Scheme: GitHub, Secrets: []string{"s"}})
	if string(b) != `{"scheme":"github","secrets":["s"]}` {
		t.Fatalf("got %s", b)
	}
}

// TestCheckSecretsAtSaveDistinct: a secret given twice is refused naming
// both indexes and the rule, never the value; distinct secrets pass.
func TestCheckSecretsAtSaveDistinct(t *testing.T) {
	const a, b = "secret-a-0123456789", "secret-b-0123456789"
	err := CheckSecretsAtSave(GitHub, []string{a, b, a})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Error() != "secrets[2]: the same as secrets[0]: secrets must be distinct" || strings.Contains(err.Error(), a) {
		t.Errorf("a secret twice: %v", err)
	}
	if err := CheckSecretsAtSave(GitHub, []string{a, b}); err != nil {
		t.Errorf("distinct secrets: %v", err)
	}
}

// TestCheckSecretsAtSaveStandardWebhooksPrefix: a standard-webhooks
// secret's key is the base64 after an optional "whsec_", so "whsec_X" and
// "X" are the same key and are refused as not distinct; for every other
// scheme the key is the string as given, so they stay distinct.
func TestCheckSecretsAtSaveStandardWebhooksPrefix(t *testing.T) {
	const x = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	err := CheckSecretsAtSave(StandardWebhooks, []string{"whsec_" + x, x})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Error() != "secrets[1]: the same as secrets[0]: secrets must be distinct (a standard-webhooks secret is the same key with or without whsec_)" || strings.Contains(err.Error(), x) {
		t.Errorf("whsec_X and X: %v", err)
	}
	if err := CheckSecretsAtSave(StandardWebhooks, []string{x, "whsec_" + x}); err == nil {
		t.Error("X and whsec_X: accepted")
	}
	if err := CheckSecretsAtSave(StandardWebhooks, []string{"whsec_" + x, "whsec_" + x}); err == nil || strings.Contains(err.Error(), "with or without") {
		t.Errorf("whsec_X twice: %v; want the plain rule", err)
	}
	if err := CheckSecretsAtSave(Stripe, []string{"whsec_" + x, x}); err != nil {
		t.Errorf("stripe whsec_X and X (different keys): %v", err)
	}
}

// TestCheckSecretsAtSaveStandardWebhooksDecodedKey: a standard-webhooks
// secret's key is its base64-decoded bytes, and a base64 text whose last
// character differs only in the bits the padding leaves unused (RFC 4648
// §3.5: "q6s=" and "q6t=" both decode to 0xab 0xab) is the same key:
// giving both is refused as not distinct, with or without whsec_, naming
// the rule and neither value. For every other scheme they are two strings,
// so two keys.
func TestCheckSecretsAtSaveStandardWebhooksDecodedKey(t *testing.T) {
	canon := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xab}, 32)) // "q6ur…q6s="
	if !strings.HasSuffix(canon, "s=") {
		t.Fatalf("canonical encoding %q: want it to end in s=", canon)
	}
	other := strings.TrimSuffix(canon, "s=") + "t=" // same bytes, a non-zero unused bit
	if k, err := base64.StdEncoding.DecodeString(other); err != nil || !bytes.Equal(k, bytes.Repeat([]byte{0xab}, 32)) {
		t.Fatalf("%q decodes to %x, %v; want the same 32 bytes", other, k, err)
	}
	const rule = "secrets[1]: the same as secrets[0]: secrets must be distinct (a standard-webhooks secret is its base64-decoded key, and these two decode to the same bytes)"
	for _, pair := range [][2]string{{canon, other}, {"whsec_" + canon, other}, {other, "whsec_" + canon}} {
		err := CheckSecretsAtSave(StandardWebhooks, pair[:])
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Error() != rule || strings.Contains(err.Error(), canon) || strings.Contains(err.Error(), other) {
			t.Errorf("%q and %q: %v; want %q", pair[0], pair[1], err, rule)
		}
	}
	if err := CheckSecretsAtSave(Stripe, []string{canon, other}); err != nil {
		t.Errorf("stripe: two strings are two keys: %v", err)
	}
	if err := CheckSecretsAtSave(StandardWebhooks, []string{canon, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xac}, 32))}); err != nil {
		t.Errorf("two keys: %v", err)
	}
}

// TestCheckSecretsAtSaveControlCharacter: a line break or tab inside a
// secret (a paste mistake; the console's one-a-line box could not give it
// back) is refused naming the rule, never the value.
func TestCheckSecretsAtSaveControlCharacter(t *testing.T) {
	for _, s := range []string{"secret-0123456789\nrest", "secret-01234\t56789", "secret-0123456789\u0085x"} {
		err := CheckSecretsAtSave(GitHub, []string{"secret-a-0123456789", s})
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(ce.Error(), "secrets[1]: contains a control character") || strings.Contains(err.Error(), "secret-01234") {
			t.Errorf("secret %q: %v", s, err)
		}
	}
}

// TestHMACPrefixLeadingSpaceLoads: a source saved before the save-time
// rule with a prefix starting with a space still validates (stored
// configurations keep loading); CheckHMACAtSave refuses it.
func TestHMACPrefixLeadingSpaceLoads(t *testing.T) {
	c := Config{Scheme: HMAC, Secrets: []string{"secret-0123456789abcdef"}, HMAC: &HMACConfig{Header: "X-Sig", Prefix: " sha256="}}
	if err := c.Validate(); err != nil {
		t.Fatalf("stored config with prefix %q: %v; want it to load", c.HMAC.Prefix, err)
	}
	var ce *ConfigError
	if err := CheckHMACAtSave(c.HMAC); !errors.As(err, &ce) || ce.Field != "hmac.prefix" || !strings.Contains(ce.Rule, "RFC 9110") {
		t.Errorf("CheckHMACAtSave(prefix %q): %v", c.HMAC.Prefix, err)
	}
	for _, p := range []string{"", "sha256=", "v1, sha256= "} {
		if err := CheckHMACAtSave(&HMACConfig{Header: "X-Sig", Prefix: p}); err != nil {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
	if err := CheckHMACAtSave(nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}

// TestCheckSecretsAtSaveFormatCharacter: an invisible format character
// (Unicode category Cf) in a secret is refused naming the rule, never the
// value.
func TestCheckSecretsAtSaveFormatCharacter(t *testing.T) {
	for _, s := range []string{"secret-0123456789\u200b", "\ufeffsecret-0123456789", "secret-01234\u202e56789", "secret-0123456789\u2060x"} {
		err := CheckSecretsAtSave(GitHub, []string{"secret-a-0123456789", s})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "secrets[1]" || !strings.Contains(ce.Rule, "invisible format character") || strings.Contains(err.Error(), "secret-01234") {
			t.Errorf("secret %q: %v", s, err)
		}
	}
}

// TestHMACFormatCharacterRefusedAtSaveLoads: an invisible format character
// (Unicode category Cf: U+200B, a BOM, a bidi control) in an hmac prefix
// or template is refused at save, naming the setting and the rule; a
// configuration stored with one still loads.
func TestHMACFormatCharacterRefusedAtSaveLoads(t *testing.T) {
	for _, c := range []struct {
		h     HMACConfig
		field string
	}{
		{HMACConfig{Header: "X-Sig", Prefix: "\u202ev1="}, "hmac.prefix"},
		{HMACConfig{Header: "X-Sig", Prefix: "v1=\u200b"}, "hmac.prefix"},
		{HMACConfig{Header: "X-Sig", Template: "\ufeff{body}"}, "hmac.template"},
		{HMACConfig{Header: "X-Sig", Template: "{body}\u2066x"}, "hmac.template"},
	} {
		h := c.h
		cfg := Config{Scheme: HMAC, Secrets: []string{"secret-0123456789abcdef"}, HMAC: &h}
		if err := cfg.Validate(); err != nil {
			t.Errorf("stored %+v: %v; want it to load", h, err)
		}
		var ce *ConfigError
		if err := CheckHMACAtSave(&h); !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Rule, "invisible format character") {
			t.Errorf("CheckHMACAtSave(%+v): %v; want a refusal at %s", h, err, c.field)
		}
	}
}

// TestValidateListsEveryRefusal: a configuration breaking several rules
// returns every refusal (errors.Join of *ConfigError's, in the order of
// the settings), not the first, so the API can list them all; one broken
// rule is still the *ConfigError itself (TestValidateErrors).
func TestValidateListsEveryRefusal(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want []string
	}{
		{Config{Scheme: HMAC, Secrets: []string{"s", ""}, HMAC: &HMACConfig{Header: "X Sig", Prefix: "a\x01", Template: "{body}{nope}"}},
			[]string{"secrets[1]", "hmac.header", "hmac.prefix", "hmac.template"}},
		{Config{Scheme: HMAC, Secrets: []string{"s"}, HMAC: &HMACConfig{Header: "X-Sig", TimestampHeader: "X Ts", Template: "{timestamp}"}},
			[]string{"hmac.timestamp_header", "hmac.template"}},
	} {
		err := tc.c.Validate()
		var got []string
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				var ce *ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("%v is no ConfigError", e)
				}
				got = append(got, ce.Field)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%+v: refusals at %q (%v); want %q", tc.c, got, err, tc.want)
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v does not wrap ErrInvalidConfig", err)
		}
	}
}
