package api_test

import (
	"strconv"
	"strings"
	"testing"
)

// TestPersonalDataGuardSeesHiddenAtSigns: an e-mail address written with
// its "@" percent-encoded (%40, or again: %2540), as an HTML character
// reference (&#64;, &#x40;, &commat;) or full-width (＠ U+FF20) is refused in a
// version's example and in a catalogued type's data, like one written
// plainly, and the 422 names the rule that read it (percent-decoding, RFC
// 3986 §2.1; NFKC, UAX #15); a refused create stores no type.
func TestPersonalDataGuardSeesHiddenAtSigns(t *testing.T) {
	w := newWorld(t, nil)
	for ex, rule := range map[string]string{
		`{"contact":"jane.doe%40example.com"}`:    "email found once percent-decoded (RFC 3986 §2.1)",
		`{"contact":"jane.doe＠example.com"}`:      "email found once NFKC-normalised (Unicode UAX #15",
		`{"contact":"jane.doe%EF%BC%A0ex.com"}`:   "email found once percent-decoded (RFC 3986 §2.1), then NFKC-normalised",
		`{"contact":"jane.doe%2540example.com"}`:  "email found once percent-decoded repeatedly (RFC 3986 §2.1",
		`{"contact":"jane.doe&#x40;example.com"}`: "email found once HTML character references decoded (HTML Living Standard §13.5",
	} {
		st, raw := w.call(adminKey, "POST", "/v1/event-types", `{"name":"contact.added","versions":[{"version":1,"schema":{"type":"object"},"example":`+ex+`}]}`)
		if st != 422 || !strings.Contains(string(raw), "body.versions[0].example") || !strings.Contains(string(raw), "at /contact ("+rule) {
			t.Errorf("example %s: %d %s; want 422 naming /contact and %q", ex, st, raw, rule)
		}
	}
	if st, raw := w.call(adminKey, "GET", "/v1/event-types/contact.added", ""); st != 404 {
		t.Fatalf("after refused creates: %d %s; want 404", st, raw)
	}
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"contact.added","versions":[{"version":1,"schema":{"type":"object"},"example":{"contact":"c_1"}}]}`, 201, nil)
	for data, rule := range map[string]string{
		`{"contact":"mailto:jane.doe%40example.com"}`:                "percent-decoded (RFC 3986 §2.1)",
		`{"contact":"jane.doe﹫example.com"}`:                         "NFKC-normalised (Unicode UAX #15",
		`{"contact":"jane.doe&#64;example.com"}`:                     "HTML character references decoded",
		`{"contact":"jane.doe&commat;example.com"}`:                  "HTML character references decoded",
		`{"contact":"https://x.example/?to=jane%252540example.com"}`: "percent-decoded repeatedly",
		`{"contact":"jane\u200b@example.com"}`:                       "format and other invisible characters removed (Unicode general category Cf and Default_Ignorable_Code_Point",
		`{"contact":"jane\u00ad@example.com"}`:                       "format and other invisible characters removed (Unicode general category Cf and Default_Ignorable_Code_Point",
		`{"contact":"jane&#8203;@example.com"}`:                      "HTML character references decoded (HTML Living Standard §13.5: &#64;, &#x40; and &commat; read as @), then format and other invisible characters removed",
		`{"contact":"jane%E2%80%8B%40example.com"}`:                  "percent-decoded (RFC 3986 §2.1), then format and other invisible characters removed",
		`{"contact":"jane\u034f@example.com"}`:                       "format and other invisible characters removed",
		`{"contact":"jane\u0000@example.com"}`:                       "format and other invisible characters removed",
		`{"contact":"jane@example。com"}`:                             "ideographic full stops read as dots (IDNA, UTS #46 and RFC 3490 §3.1",
	} {
		st, raw := w.call(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"contact.added","data":`+data+`}`)
		if st != 422 || !strings.Contains(string(raw), "/data/contact: personal-data: email") || !strings.Contains(string(raw), rule) {
			t.Errorf("publish %s: %d %s; want 422 naming /data/contact, personal-data: email and %q", data, st, raw, rule)
		}
	}
}

// TestPersonalDataGuardPassesThinLinksWithAt: links whose "@" comes before
// a file name (logo@2x.png, key%40v2.json) are no e-mail addresses: a
// catalogued type's example and data carrying them are accepted under the
// default mode, while a real address beside them is still refused.
func TestPersonalDataGuardPassesThinLinksWithAt(t *testing.T) {
	w := newWorld(t, nil)
	links := `{"logo":"https://cdn.example.com/img/logo@2x.png","icon":"icon@2x.png","enc":"logo%402x.png","key":"s3://bucket/key%40v2.json"}`
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"asset.added","versions":[{"version":1,"schema":{"type":"object"},"example":`+links+`}]}`, 201, nil)
	rec := w.request("192.0.2.1", adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"asset.added","data":`+links+`}`)
	if rec.Code != 202 || rec.Header().Get("X-Herald-Personal-Data-Warning") != "" {
		t.Fatalf("publish thin links: %d %s (warning %q); want 202 without a warning", rec.Code, rec.Body.Bytes(), rec.Header().Get("X-Herald-Personal-Data-Warning"))
	}
	st, raw := w.call(adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"asset.added","data":{"logo":"logo@2x.png","owner":"jane@example.co.uk"}}`)
	if st != 422 || !strings.Contains(string(raw), "/data/owner: personal-data: email") || strings.Contains(string(raw), "/data/logo") {
		t.Errorf("publish with an address: %d %s; want 422 naming /data/owner only", st, raw)
	}
}

// TestPersonalDataWarningIsBounded: the X-Herald-Personal-Data-Warning of a
// publish whose data holds thousands of addresses (or one under a member
// name of thousands of bytes) names the first findings, each pointer cut,
// and counts the rest, so the header stays within a few KB: a 54 KB one
// made Node's fetch fail the request (UND_ERR_HEADERS_OVERFLOW; its limit
// is 16 KB, as are many proxies') while the event was stored, so the
// producer's retry without an id published it twice.
func TestPersonalDataWarningIsBounded(t *testing.T) {
	w := newWorld(t, nil)
	var data strings.Builder
	data.WriteString(`{"` + strings.Repeat("a", 5000) + `@example.com":1`)
	for i := range 2000 {
		data.WriteString(`,"k` + strconv.Itoa(i) + `":"u` + strconv.Itoa(i) + `@ex.com"`)
	}
	data.WriteString(`}`)
	rec := w.request("192.0.2.1", adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"contact.imported","data":`+data.String()+`}`)
	h := rec.Header().Get("X-Herald-Personal-Data-Warning")
	first := "/data/" + strings.Repeat("a", 250) + "… email, /data/k0 email, /data/k1 email, "
	if rec.Code != 202 || !strings.HasPrefix(h, first) || len(h) > 4096 || !strings.HasSuffix(h, ", and 1991 more") {
		t.Fatalf("publish of 2,001 addresses: %d, a %d-byte warning %.300q…%q; want 202, the first findings, each pointer cut, and \"and 1991 more\" within 4 KB", rec.Code, len(h), h, h[max(0, len(h)-100):])
	}
	// A member name's control characters, which no header value may hold
	// (RFC 9110 §5.5: Node's fetch failed such an answer,
	// HPE_INVALID_HEADER_TOKEN, the event stored), are written escaped.
	rec = w.request("192.0.2.1", adminKey, "POST", "/v1/events", `{"tenant":"acme","type":"contact.imported","data":{"jane@example.com\u0000\u001b\r\n\u007fx":1}}`)
	h = rec.Header().Get("X-Herald-Personal-Data-Warning")
	if rec.Code != 202 || h != `/data/jane@example.com\u0000\u001b\u000d\u000a\u007fx email` {
		t.Fatalf("publish of an address in a member name with control characters: %d, warning %q; want 202 and them escaped", rec.Code, h)
	}
}

// TestEventTypeSchemaWithReferenceCycleIsRefused: a version whose schema
// applies a subschema to itself ({"$ref":"#/properties/a"} at
// /properties/a) is refused when it is added, naming the subschema, and
// nothing is stored: it used to be catalogued, and every publish whose
// data had an "a" was refused for good ("causing reference cycle"), a
// version's schema never changing.
func TestEventTypeSchemaWithReferenceCycleIsRefused(t *testing.T) {
	w := newWorld(t, nil)
	st, raw := w.call(adminKey, "POST", "/v1/event-types", `{"name":"loop.made","versions":[{"version":1,"schema":{"type":"object","properties":{"a":{"$ref":"#/properties/a"}}}}]}`)
	if st != 422 || !strings.Contains(string(raw), "body.versions[0].schema") || !strings.Contains(string(raw), "the subschema at /properties/a applies itself to the same value (a reference cycle") {
		t.Fatalf("create with a reference cycle: %d %s; want 422 at body.versions[0].schema naming /properties/a", st, raw)
	}
	if st, raw := w.call(adminKey, "GET", "/v1/event-types/loop.made", ""); st != 404 {
		t.Fatalf("after the refused create: %d %s; want 404", st, raw)
	}
}
