package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// problemErrors decodes a problem's errors[] (location, message, value).
func problemErrors(t *testing.T, raw []byte) []struct {
	Location string `json:"location"`
	Message  string `json:"message"`
	Value    any    `json:"value"`
} {
	t.Helper()
	var p struct {
		Errors []struct {
			Location string `json:"location"`
			Message  string `json:"message"`
			Value    any    `json:"value"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("not a problem: %s: %v", raw, err)
	}
	return p.Errors
}

// wantOneRefusal checks that an answer is 422 with one error, at loc,
// whose message holds each of wants and none of huma's generic schema
// messages.
func wantOneRefusal(t *testing.T, what string, st int, raw []byte, loc string, wants ...string) {
	t.Helper()
	if st != 422 {
		t.Errorf("%s = %d %s; want 422 at %s", what, st, raw, loc)
		return
	}
	errs := problemErrors(t, raw)
	if len(errs) != 1 || errs[0].Location != loc {
		t.Errorf("%s = %s; want one error at %s", what, raw, loc)
		return
	}
	for _, w := range wants {
		if !strings.Contains(errs[0].Message, w) {
			t.Errorf("%s: message %q; want it to say %q", what, errs[0].Message, w)
		}
	}
	for _, generic := range []string{"expected number", "expected integer", "expected an integer from -9223372036854775808"} {
		if strings.Contains(errs[0].Message, generic) {
			t.Errorf("%s: message %q is the schema's generic %q, not Herald's rule", what, errs[0].Message, generic)
		}
	}
}

// TestSourceIntegerSettingsNameTheirRule: a source's tolerance_seconds and
// max_body_bytes out of range (negative, past the maximum, however large),
// not an integer (1.5, a string) or an integer written with an exponent or
// a fraction (1e3, 2000.0: refused, as every integer field of Herald's API
// is) answer 422 with one error located at the field that names Herald's
// rule — the range and its unit — on a create and on a PATCH, and nothing
// is stored or changed.
func TestSourceIntegerSettingsNameTheirRule(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/sources", "")
	rules := map[string][]string{
		"max_body_bytes":    {"max_body_bytes must be an integer number of bytes from 1024 (1 KiB", "to 16777216 (16 MiB)", "0 for the default"},
		"tolerance_seconds": {"tolerance_seconds must be an integer number of seconds from", "to 3600 (1 hour)", "0 for the default (300)"},
	}
	for field, values := range map[string][]string{
		"max_body_bytes":    {`-1`, `16777217`, `99999999999`, `1e300`, `1.5`, `"1024"`, `true`, `1e3`, `2e3`, `2000.0`, `1023`},
		"tolerance_seconds": {`-1`, `3601`, `99999999999`, `1e300`, `1.5`, `"300"`, `1e3`, `600.0`},
	} {
		for _, v := range values {
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/v1/sources", `{"name":"x","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.3/in","` + field + `":` + v + `}`},
				{"PATCH", "/v1/sources/" + w.srcID, `{"` + field + `":` + v + `}`},
			} {
				st, raw := w.call(adminKey, req.method, req.path, req.body)
				wants := rules[field]
				if v[0] >= '0' && v[0] <= '9' && strings.ContainsAny(v, "e.") && v != "1e300" && v != "1.5" {
					wants = append(wants, "plain digits")
				}
				wantOneRefusal(t, req.method+" "+field+" "+v, st, raw, "body."+field, wants...)
			}
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); string(after) != string(before) {
		t.Errorf("refused settings changed the sources:\n%s\nwant\n%s", after, before)
	}
}

// TestIntegerFieldsNameTheirRule: the other integer fields of create and
// change bodies (an endpoint's rate_limit_per_second, a rotation's
// overlap_seconds, a portal session's ttl_seconds, an event type's version
// numbers) are refused the same way: at the field (an array item's
// index in brackets), naming the range and its unit.
func TestIntegerFieldsNameTheirRule(t *testing.T) {
	w := newWorld(t, nil)
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
	_, before := w.call(adminKey, "GET", "/v1/endpoints/"+w.epA, "")
	_, typeBefore := w.call(adminKey, "GET", "/v1/event-types/file.updated", "")
	for _, c := range []struct {
		method, path, field string
		values              []string
		want                string
	}{
		{"POST", "/v1/endpoints", "rate_limit_per_second", []string{`-1`, `100001`, `1.5`, `1e3`}, "rate_limit_per_second must be an integer number of attempts per second from 0 (unlimited) to 100000"},
		{"PATCH", "/v1/endpoints/" + w.epA, "rate_limit_per_second", []string{`-1`, `100001`, `1.5`, `1e3`}, "rate_limit_per_second must be an integer number of attempts per second from 0 (unlimited) to 100000"},
		{"POST", "/v1/endpoints/" + w.epA + "/rotate-secret", "overlap_seconds", []string{`-1`, `604801`, `1.5`, `1e3`}, "overlap_seconds must be an integer number of seconds from 0"},
		{"POST", "/v1/portal-sessions", "ttl_seconds", []string{`59`, `604801`, `1.5`, `1e3`}, "ttl_seconds must be an integer number of seconds from 60 (1 minute) to 604800 (7 days)"},
		{"POST", "/v1/event-types/file.updated/versions", "version", []string{`0`, `-1`, `1.5`}, "version must be an integer from 1"},
		{"POST", "/v1/event-types", "versions[0].version", []string{`0`, `1.5`}, "version must be an integer from 1"},
		{"PATCH", "/v1/event-types/file.updated", "deprecate[0]", []string{`1.5`, `"1"`}, "deprecate lists version numbers: integers from 1"},
		{"PATCH", "/v1/event-types/file.updated", "undeprecate[0]", []string{`1.5`}, "undeprecate lists version numbers: integers from 1"},
	} {
		for _, v := range c.values {
			body := `{"` + c.field + `":` + v + `}`
			switch c.path {
			case "/v1/endpoints":
				body = `{"tenant":"acme","url":"https://a.example/h","` + c.field + `":` + v + `}`
			case "/v1/portal-sessions":
				body = `{"tenant":"acme","` + c.field + `":` + v + `}`
			case "/v1/event-types/file.updated/versions":
				body = `{"version":` + v + `,"schema":{"type":"object"}}`
			case "/v1/event-types":
				body = `{"name":"file.created","versions":[{"version":` + v + `,"schema":{"type":"object"}}]}`
			case "/v1/event-types/file.updated":
				body = `{"` + strings.TrimSuffix(c.field, "[0]") + `":[` + v + `]}`
			}
			st, raw := w.call(adminKey, c.method, c.path, body)
			wantOneRefusal(t, c.method+" "+c.path+" "+body, st, raw, "body."+c.field, c.want)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/endpoints/"+w.epA, ""); string(after) != string(before) {
		t.Errorf("refused changes changed the endpoint:\n%s\nwant\n%s", after, before)
	}
	if _, after := w.call(adminKey, "GET", "/v1/event-types/file.updated", ""); string(after) != string(typeBefore) {
		t.Errorf("refused changes changed the event type:\n%s\nwant\n%s", after, typeBefore)
	}
	w.mustCall(adminKey, "GET", "/v1/event-types/file.created", "", 404, nil)
}

// TestDecodeRefusalLocatedAtTheField: an integer written with a fraction
// or an exponent inside an array is located there, with huma's
// convention for array items (body.versions[0].version), not at body.
func TestDecodeRefusalLocatedAtTheField(t *testing.T) {
	w := newWorld(t, nil)
	st, raw := w.call(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1e0,"schema":{"type":"object"}}]}`)
	if st != 422 {
		t.Fatalf("version 1e0: %d %s; want 422", st, raw)
	}
	if errs := problemErrors(t, raw); len(errs) != 1 || errs[0].Location != "body.versions[0].version" || !strings.Contains(errs[0].Message, "without a fraction or exponent") {
		t.Errorf("version 1e0: %s; want one error at body.versions[0].version saying how to write an integer", raw)
	}
}

// TestSourceSecretAndHMACRefusalsAtTheirField: a refused secret is located
// at body.secrets[i] (0-based, huma's convention for array items) and a
// refused hmac setting at body.hmac.<field> (body.hmac when it is missing
// or not allowed), saying the rule (the location names the field, as in
// huma's own refusals), on a create and on a PATCH; nothing changes.
func TestSourceSecretAndHMACRefusalsAtTheirField(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/sources", "")
	const create = `{"name":"x","destination_url":"http://10.0.0.3/in",`
	for _, c := range []struct{ method, path, body, loc, want string }{
		{"POST", "/v1/sources", create + `"scheme":"stripe","secrets":["source-secret-0123456789","short"]}`, "body.secrets[1]", "shorter than 16 bytes"},
		{"POST", "/v1/sources", create + `"scheme":"stripe","secrets":[" source-secret-0123456789"]}`, "body.secrets[0]", "leading or trailing whitespace"},
		{"POST", "/v1/sources", create + `"scheme":"standard-webhooks","secrets":["whsec_not base64 at all!!"]}`, "body.secrets[0]", "not a Standard Webhooks secret"},
		{"PATCH", "/v1/sources/" + w.srcID, `{"secrets":["source-secret-0123456789","source-secret-0123456789"]}`, "body.secrets[1]", "secrets must be distinct"},
		{"PATCH", "/v1/sources/" + w.srcID, `{"secrets":["source-secret-0123456789","source-secret\t0123456789"]}`, "body.secrets[1]", "control character"},
		{"POST", "/v1/sources", create + `"scheme":"hmac","secrets":["source-secret-0123456789"]}`, "body.hmac", "required for scheme hmac"},
		{"POST", "/v1/sources", create + `"scheme":"hmac","secrets":["source-secret-0123456789"],"hmac":{"header":"X-Sig","template":"{foo}"}}`, "body.hmac.template", "unknown placeholder"},
		{"POST", "/v1/sources", create + `"scheme":"hmac","secrets":["source-secret-0123456789"],"hmac":{"header":"X Sig"}}`, "body.hmac.header", "not a valid header name"},
		{"POST", "/v1/sources", create + `"scheme":"hmac","secrets":["source-secret-0123456789"],"hmac":{"header":"X-Sig","timestamp_header":"X-Sig"}}`, "body.hmac.timestamp_header", "must differ"},
		{"PATCH", "/v1/sources/" + w.srcID, `{"hmac":{"header":"X-Sig"}}`, "body.hmac", "only allowed with scheme hmac"},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		wantOneRefusal(t, c.method+" "+c.body, st, raw, c.loc, c.want)
		if strings.Contains(string(raw), "source-secret") {
			t.Errorf("%s %s: the refusal repeats a secret: %s", c.method, c.body, raw)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); string(after) != string(before) {
		t.Errorf("refused settings changed the sources:\n%s\nwant\n%s", after, before)
	}
}

// TestSourceHMACPrefixLeadingSpaceRefusedAtSave: an hmac prefix that
// starts with a space can never match (HTTP strips a field value's leading
// whitespace, RFC 9110 §5.5): refused at body.hmac.prefix naming the rule
// and its source, on a create and on a PATCH; a prefix with a space inside
// or at its end is kept (the signature follows it).
func TestSourceHMACPrefixLeadingSpaceRefusedAtSave(t *testing.T) {
	w := newWorld(t, nil)
	const create = `{"name":"x","destination_url":"http://10.0.0.3/in","scheme":"hmac","secrets":["source-secret-0123456789"],`
	st, raw := w.call(adminKey, "POST", "/v1/sources", create+`"hmac":{"header":"X-Sig","prefix":" sha256="}}`)
	wantOneRefusal(t, "POST prefix \" sha256=\"", st, raw, "body.hmac.prefix", "starts with a space", "RFC 9110")
	st, raw = w.call(adminKey, "POST", "/v1/sources", create+`"hmac":{"header":"X-Sig","prefix":"v1, sha256= "}}`)
	if st != 201 {
		t.Fatalf("prefix with inner and trailing spaces: %d %s; want 201", st, raw)
	}
	var src struct{ ID string }
	if err := json.Unmarshal(raw, &src); err != nil {
		t.Fatal(err)
	}
	st, raw = w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"hmac":{"header":"X-Sig","prefix":"  "}}`)
	wantOneRefusal(t, "PATCH prefix \"  \"", st, raw, "body.hmac.prefix", "starts with a space", "RFC 9110")
}

// TestSourceSecretInvisibleFormatCharacterRefused: a secret holding a
// Unicode format character (category Cf: U+200B, a BOM, a bidi control),
// which never verifies once pasted, is refused at body.secrets[i], without
// its value, on a create and on a PATCH.
func TestSourceSecretInvisibleFormatCharacterRefused(t *testing.T) {
	w := newWorld(t, nil)
	const create = `{"name":"x","destination_url":"http://10.0.0.3/in","scheme":"stripe",`
	for _, c := range []struct{ method, path, body, loc string }{
		{"POST", "/v1/sources", create + `"secrets":["source-secret-0123456789\u200b"]}`, "body.secrets[0]"},
		{"POST", "/v1/sources", create + `"secrets":["\ufeffsource-secret-0123456789"]}`, "body.secrets[0]"},
		{"PATCH", "/v1/sources/" + w.srcID, `{"secrets":["source-secret-0123456789","source-secret-\u202e0123456789"]}`, "body.secrets[1]"},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		wantOneRefusal(t, c.method+" "+c.body, st, raw, c.loc, "invisible format character")
		if strings.Contains(string(raw), "source-secret") {
			t.Errorf("%s %s: the refusal repeats a secret: %s", c.method, c.body, raw)
		}
	}
}
