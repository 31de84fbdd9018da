package catalog

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestScanNoFalsePositives is a property test: strings that are thin
// payload material — ids, UUIDs, ISO timestamps, epoch seconds and
// milliseconds, URLs without e-mails, version numbers, hashes — are never
// taken for personal data, over many random draws.
func TestScanNoFalsePositives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alnum = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghijklmnopqrstuvwxyz"
	word := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	gens := map[string]func() string{
		"prefixed id": func() string {
			return []string{"evt_", "ep_", "f_", "inv_", "cus_"}[rng.IntN(5)] + word(8+rng.IntN(20), alnum)
		},
		"uuid":     func() string { return uuid.Must(uuid.NewRandomFromReader(rngReader{rng})).String() },
		"upper id": func() string { return word(10+rng.IntN(20), "ABCDEFGHJKMNPQRSTVWXYZ0123456789") },
		"iso time": func() string { return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC().Format(time.RFC3339Nano) },
		"epoch s":  func() string { return fmt.Sprint(rng.Int64N(4e9)) },
		"epoch ms": func() string { return fmt.Sprint(1e12 + rng.Int64N(1e12)) },
		"version":  func() string { return fmt.Sprintf("%d.%d.%d", rng.IntN(100), rng.IntN(100), rng.IntN(1000)) },
		"url": func() string {
			return "https://files.example.com/v1/files/" + word(12, alnum) + "?rev=" + fmt.Sprint(rng.IntN(1e6))
		},
		"url userinfo": func() string { return "https://" + word(6, "abcdefgh") + "@git.example.com/repo/" + word(8, alnum) },
		"hex hash":     func() string { return word(64, "0123456789abcdef") },
		"date":         func() string { return time.Unix(rng.Int64N(4e9), 0).UTC().Format("2006-01-02") },
		"amount":       func() string { return fmt.Sprintf("%d.%02d EUR", rng.IntN(1e6), rng.IntN(100)) },
	}
	for name, gen := range gens {
		for range 2000 {
			s := gen()
			data, _ := json.Marshal(map[string]any{"value": s, "nested": []any{s}})
			if f := ScanPersonalData(data, nil, "/data"); len(f) > 0 {
				t.Fatalf("%s %q taken for personal data: %+v", name, s, f)
			}
		}
	}
}

type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.IntN(256))
	}
	return len(p), nil
}

// TestScanFindsPersonalData: each kind is found (card and IBAN only with a
// valid checksum), and a marked property is not looked into.
func TestScanFindsPersonalData(t *testing.T) {
	for _, c := range []struct {
		s, kind string
	}{
		{"jane.doe@example.com", KindEmail},
		{"write to Jane <jane+tag@mail.example.co.uk>", KindEmail},
		{"+44 20 7946 0958", KindPhone},
		{"call +1 (415) 555-2671 now", KindPhone},
		{"(415) 555-2671", KindPhone},
		{"4111 1111 1111 1111", KindCard},
		{"5500-0000-0000-0004", KindCard},
		{"378282246310005", KindCard},
		{"GB82 WEST 1234 5698 7654 32", KindIBAN},
		{"DE89370400440532013000", KindIBAN},
		{"4111 1111 1111 1112", ""},    // fails Luhn
		{"GB82WEST12345698765431", ""}, // fails mod 97
		{"https://user@example.com/x", ""},
	} {
		data, _ := json.Marshal(map[string]string{"v": c.s})
		f := ScanPersonalData(data, nil, "/data")
		got := ""
		if len(f) > 0 {
			got = f[0].Kind
			if f[0].Pointer != "/data/v" {
				t.Errorf("%q: pointer %s", c.s, f[0].Pointer)
			}
		}
		if got != c.kind {
			t.Errorf("%q: found %q, want %q", c.s, got, c.kind)
		}
	}
	sch, err := Compile([]byte(`{"type":"object","properties":{"owner":{"type":"object","properties":{"email":{"type":"string","x-herald-personal-data":true}}},
		"list":{"type":"array","items":{"type":"string","x-herald-personal-data":true}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"owner":{"email":"a.b@example.com","note":"c@example.org"},"list":["d@example.net"],"other":"e@example.io"}`)
	f := ScanPersonalData(data, sch, "/data")
	if len(f) != 2 || f[0].Pointer != "/data/other" || f[1].Pointer != "/data/owner/note" {
		t.Fatalf("findings %+v, want /data/other and /data/owner/note only", f)
	}
}

func TestSuggest(t *testing.T) {
	got := Suggest("invoice.piad", []string{"invoice.paid", "invoice.voided", "file.updated"})
	if len(got) == 0 || got[0] != "invoice.paid" {
		t.Fatalf("Suggest = %v", got)
	}
	if got := Suggest("zzz", []string{"invoice.paid"}); len(got) != 0 {
		t.Fatalf("Suggest(zzz) = %v", got)
	}
}

func TestValidateNamesPointerAndRule(t *testing.T) {
	sch, err := Compile([]byte(`{"type":"object","required":["file_id"],"additionalProperties":false,"properties":{"file_id":{"type":"string"},"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for data, want := range map[string]string{
		`{}`:                      "/data/file_id: required",
		`{"file_id":1}`:           "/data/file_id: type",
		`{"file_id":"a","x":1}`:   "/data/x: additionalProperties",
		`{"file_id":"a","n":1.5}`: "/data/n: type",
	} {
		v, err := sch.Validate([]byte(data), "/data")
		if err != nil || len(v) != 1 || v[0].Pointer+": "+v[0].Rule != want {
			t.Errorf("%s: %+v %v, want %s", data, v, err, want)
		}
	}
	if _, err := Compile([]byte(`{"$ref":"file:///etc/passwd"}`)); err == nil {
		t.Error("a $ref outside the schema compiled")
	}
}

// personalKindPatterns is personalKind without its prefilters: every
// pattern run on every string (the guard before the prefilters), the
// e-mail pattern also on the string percent-decoded and NFKC-normalised.
func personalKindPatterns(s string) string {
	for i, loc := range emailRe.FindAllStringIndex(s, -1) {
		if (i > 0 || !afterSchemeSlashes(s, loc[0])) && icannTLD(s[loc[0]:loc[1]]) {
			return KindEmail
		}
	}
	if hiddenEmail(s) != "" { // every string, whatever its characters
		return KindEmail
	}
	if m := phoneIntlRe.FindString(s); m != "" {
		if n := countDigits(m); n >= 8 && n <= 15 {
			return KindPhone
		}
	}
	if phoneNARe.MatchString(strings.TrimSpace(s)) {
		return KindPhone
	}
	for _, m := range cardRe.FindAllStringSubmatch(s, -1) {
		if isCard(digitsOf(m[1])) {
			return KindCard
		}
	}
	for _, m := range ibanRe.FindAllStringSubmatch(s, -1) {
		if isIBAN(strings.ReplaceAll(m[1], " ", "")) {
			return KindIBAN
		}
	}
	return ""
}

// TestPrefiltersChangeNoAnswer: the prefilters only skip patterns that
// cannot match: over random strings built from the characters the patterns
// look at, and strings around real findings, personalKind answers what
// running every pattern answers.
func TestPrefiltersChangeNoAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789012345678901234567890123456789 -.()+@/~GBDEXa.bc_%\xef\xbc\xa0&#;x\xe2\x80\x8b\xc2\xad\x00\xcd\x8f\xe3\x80\x82"
	seeds := []string{"jane.doe@example.com", "+44 20 7946 0958", "(415) 555-2671", "4111 1111 1111 1111",
		"378282246310005", "GB82 WEST 1234 5698 7654 32", "DE89370400440532013000", "https://u@example.com/x",
		"jane.doe%40example.com", "jane.doe\uff20example.com", "jane%EF%BC%A0example.com", "https://u%40@example.com/x",
		"jane.doe%2540example.com", "jane.doe&#64;example.com", "jane.doe&#x40;example.com", "jane.doe&commat;example.com",
		"https://cdn.example.com/logo@2x.png", "logo%402x.png", "jane@example.co.uk",
		"jane\u200b@example.com", "jane\u00ad@example.com", "jane%E2%80%8B%40example.com", "jane&#8203;@example.com",
		"contact //jane@example.com", "ssh://git@example.com/r", "jane@bücher.de", "jane@example.xn--p1ai",
		"jane\x00@example.com", "jane\u034f@example.com", "jane@example\u3002com", "jane@example\uff61com"}
	kinds := map[string]int{}
	for i := range 200000 {
		var s string
		if i%2 == 0 {
			b := make([]byte, rng.IntN(40))
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			s = string(b)
		} else {
			seed := []byte(seeds[rng.IntN(len(seeds))])
			if rng.IntN(2) == 0 { // change one character
				seed[rng.IntN(len(seed))] = alphabet[rng.IntN(len(alphabet))]
			}
			s = string(seed)
		}
		got, _ := personalKind(s)
		want := personalKindPatterns(s)
		if got != want {
			t.Fatalf("%q: personalKind %q, the patterns %q", s, got, want)
		}
		kinds[want]++
	}
	for _, k := range []string{"", KindEmail, KindPhone, KindCard, KindIBAN} {
		if kinds[k] == 0 {
			t.Errorf("no draw of kind %q: the test does not exercise it", k)
		}
	}
}

// BenchmarkScanPersonalData scans the data of `herald bench publish`'s
// events (an id of 400 characters, an amount, a currency, a URL).
func BenchmarkScanPersonalData(b *testing.B) {
	data := []byte(`{"order_id":"ord_` + strings.Repeat("x", 400) + `","amount":1299,"currency":"eur","links":{"self":"https://example.com/o/1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if f := ScanPersonalData(data, nil, "/data"); len(f) > 0 {
			b.Fatal(f)
		}
	}
}

// TestScanMemberNamesAndNumbers: a member name is a string of the data and
// a card number sent as a JSON number is one all the same; both are found
// unless their schema is marked.
func TestScanMemberNamesAndNumbers(t *testing.T) {
	data := []byte(`{"bob@example.com":true,"n":4111111111111111,"ts":1700000000000,"count":42,"m/x":{"alice@example.org":1},"n2":4111111111111111.0,"n3":4.111111111111111e15,"amount":12.5,"big":1e300}`)
	var got []string
	for _, f := range ScanPersonalData(data, nil, "/data") {
		got = append(got, f.Pointer+" "+f.Kind)
	}
	want := []string{"/data/bob@example.com email", "/data/m~1x/alice@example.org email", "/data/n payment-card", "/data/n2 payment-card", "/data/n3 payment-card"}
	if !slices.Equal(got, want) {
		t.Errorf("findings %q, want %q", got, want)
	}
	sch, err := Compile([]byte(`{"type":"object","additionalProperties":{"x-herald-personal-data":true},"properties":{"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f := ScanPersonalData([]byte(`{"bob@example.com":true}`), sch, "/data"); len(f) != 0 {
		t.Errorf("a member under marked additionalProperties: %v", f)
	}
}

// TestScanMarkThroughSchemaKeywords: the mark counts through a local $ref,
// additionalProperties, items and a branch of anyOf/oneOf/allOf, as a
// producer writes it in a real schema.
func TestScanMarkThroughSchemaKeywords(t *testing.T) {
	for name, schema := range map[string]string{
		"$ref":                 `{"type":"object","properties":{"owner":{"$ref":"#/$defs/pii"}},"$defs":{"pii":{"type":"string","x-herald-personal-data":true}}}`,
		"additionalProperties": `{"type":"object","additionalProperties":{"type":"string","x-herald-personal-data":true}}`,
		"anyOf":                `{"type":"object","properties":{"owner":{"anyOf":[{"type":"string","x-herald-personal-data":true},{"type":"null"}]}}}`,
		"allOf":                `{"type":"object","properties":{"owner":{"allOf":[{"$ref":"#/$defs/pii"}]}},"$defs":{"pii":{"x-herald-personal-data":true}}}`,
		"$ref to an object":    `{"$ref":"#/$defs/root","$defs":{"root":{"type":"object","properties":{"owner":{"type":"string","x-herald-personal-data":true}}}}}`,
	} {
		sch, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f := ScanPersonalData([]byte(`{"owner":"bob@example.com"}`), sch, "/data"); len(f) != 0 {
			t.Errorf("%s: the marked property was scanned: %v", name, f)
		}
	}
	// An unmarked sibling is still scanned.
	sch, _ := Compile([]byte(`{"type":"object","properties":{"owner":{"$ref":"#/$defs/pii"},"note":{"type":"string"}},"$defs":{"pii":{"x-herald-personal-data":true}}}`))
	if f := ScanPersonalData([]byte(`{"owner":"bob@example.com","note":"mail carol@example.net"}`), sch, "/data"); len(f) != 1 || f[0].Pointer != "/data/note" {
		t.Errorf("findings %v, want only /data/note", f)
	}
	// A schema that refers to itself does not loop.
	self, err := Compile([]byte(`{"$defs":{"a":{"$ref":"#/$defs/a"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a"}}}`))
	if err == nil {
		if f := ScanPersonalData([]byte(`{"x":"bob@example.com"}`), self, "/data"); len(f) != 1 {
			t.Errorf("self-referring schema: findings %v, want the one address", f)
		}
	}
}

// TestPersonalDataMarkMustBeBoolean: the guard honours only true, so a
// mark of another type ("yes", 1, null) is refused when a schema is
// saved (CheckMarks), naming the keyword and where it is; a property that
// merely bears the keyword's name keeps its subschema.
func TestPersonalDataMarkMustBeBoolean(t *testing.T) {
	for _, tc := range []struct {
		schema, want string // want "" = compiles
	}{
		{`{"type":"object","properties":{"email":{"type":"string","x-herald-personal-data":true}}}`, ""},
		{`{"type":"object","properties":{"email":{"type":"string","x-herald-personal-data":false}}}`, ""},
		{`{"type":"object","properties":{"x-herald-personal-data":{"type":"string"}}}`, ""},
		{`{"type":"object","properties":{"email":{"type":"string","x-herald-personal-data":"yes"}}}`, "x-herald-personal-data at /properties/email/x-herald-personal-data must be true or false"},
		{`{"type":"object","prefixItems":[{"x-herald-personal-data":1}]}`, "at /prefixItems/0/x-herald-personal-data"},
		{`{"x-herald-personal-data":null}`, "at /x-herald-personal-data must be"},
		{`{"$defs":{"a/b":{"x-herald-personal-data":"true"}}}`, "at /$defs/a~1b/x-herald-personal-data"},
	} {
		sch, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: does not compile: %v", tc.schema, err)
			continue
		}
		err = sch.CheckMarks()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it compiled", tc.schema, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.schema, err, tc.want)
		}
	}
}

// TestSchemaDraftNamed: a "$schema" naming a draft the validator
// implements compiles as that draft (http or https, with or without the
// empty fragment); any other, such as draft-03, is refused naming the
// drafts supported, not as a reference Herald will not load.
func TestSchemaDraftNamed(t *testing.T) {
	for _, d := range []string{"https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-04/schema", "https://json-schema.org/draft/2019-09/schema"} {
		if _, err := Compile([]byte(`{"$schema":"` + d + `","type":"object"}`)); err != nil {
			t.Errorf("$schema %s: %v", d, err)
		}
	}
	for _, d := range []string{"http://json-schema.org/draft-03/schema#", "https://example.com/my-meta", "json-schema.org/draft-07/schema#frag"} {
		_, err := Compile([]byte(`{"$schema":"` + d + `","type":"object"}`))
		if err == nil || !strings.Contains(err.Error(), "not a supported draft") || !strings.Contains(err.Error(), "2020-12") {
			t.Errorf("$schema %s: %v, want an error naming the supported drafts", d, err)
		}
	}
}

// TestScanFindsHiddenAtSigns: an e-mail address whose "@" is written
// percent-encoded (%40, RFC 3986 §2.1) or as a compatibility character
// that NFKC maps to "@" (＠ U+FF20, ﹫ U+FE6B; full-width letters and dots
// too) is found, in a value or a member name, and the finding says how
// the string was read; one found as written says nothing more. Strings
// that decode to no address are not taken for one.
func TestScanFindsHiddenAtSigns(t *testing.T) {
	both := DecodedPercent + ", then " + DecodedNFKC
	for _, c := range []struct{ s, decoded string }{
		{"jane.doe%40example.com", DecodedPercent},
		{"mailto:jane.doe%40Example.COM", DecodedPercent},
		{"https://app.example.com/invite?to=jane%2Edoe%40example%2Ecom&x=1", DecodedPercent},
		{"jane.doe\uff20example.com", DecodedNFKC},
		{"jane.doe\ufe6bexample.com", DecodedNFKC},
		{"\uff4a\uff41\uff4e\uff45\uff20\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff0e\uff43\uff4f\uff4d", DecodedNFKC}, // all full-width
		{"jane@\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com", ""},                                                       // an ASCII @, a full-width domain: letters of any script, found as written
		{"jane.doe%EF%BC%A0example.com", both},                                                                            // ＠ percent-encoded
		{"jane.doe@example.com", ""},
	} {
		for _, data := range []string{`{"v":` + quote(c.s) + `}`, `{` + quote(c.s) + `:true}`} {
			f := ScanPersonalData([]byte(data), nil, "/data")
			if len(f) != 1 || f[0].Kind != KindEmail || f[0].Decoded != c.decoded {
				t.Errorf("%s: %+v; want one email, decoded %q", data, f, c.decoded)
			}
		}
	}
	for _, s := range []string{
		"100%25 done", "50% off, 20%40 later", "%40", "user%40localhost", "a%4", "%zz@", "jane\uff20", "\uff20example.com",
		"https://user%40@git.example.com/repo", "price\uff1a\uff11\uff10\uff10", "caf\u00e9 @ noon",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%q taken for personal data: %+v", s, f)
		}
	}
	f := Finding{Kind: KindEmail, Decoded: DecodedPercent}
	if got := f.Found(); got != "email found once percent-decoded (RFC 3986 §2.1)" {
		t.Errorf("Found() = %q", got)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestScanFindsEncodedAgainAndEntityAtSigns: an "@" percent-encoded twice
// (%2540: the "%" of %40 encoded again, as a URL put in a query parameter
// is) or written as an HTML character reference (&#64;, &#x40;,
// &commat;, HTML Living Standard §13.5) is found, and the finding names
// the readings; strings that read as no address are not taken for one.
func TestScanFindsEncodedAgainAndEntityAtSigns(t *testing.T) {
	for _, c := range []struct{ s, decoded string }{
		{"jane.doe%2540example.com", DecodedPercentRepeated},
		{"https://app.example.com/r?next=%2Finvite%3Fto%3Djane%252540example.com", DecodedPercentRepeated}, // three times
		{"jane.doe&#64;example.com", DecodedEntity},
		{"jane.doe&#064;example.com", DecodedEntity},
		{"jane.doe&#x40;example.com", DecodedEntity},
		{"jane.doe&#X40;example.com", DecodedEntity},
		{"jane.doe&commat;example.com", DecodedEntity},
		{"jane&#46;doe&#64;example&#46;com", DecodedEntity},
		{"jane.doe&amp;#64;example.com", DecodedEntity},                                // &amp; read first, then &#64;
		{"jane.doe&#37;40example.com", DecodedEntity + ", then " + DecodedPercent},     // an entity for "%"
		{"jane.doe%26%2364%3Bexample.com", DecodedPercent + ", then " + DecodedEntity}, // &#64; percent-encoded
		{"jane.doe&#xFF20;example.com", DecodedEntity + ", then " + DecodedNFKC},
	} {
		for _, data := range []string{`{"v":` + quote(c.s) + `}`, `{` + quote(c.s) + `:true}`} {
			f := ScanPersonalData([]byte(data), nil, "/data")
			if len(f) != 1 || f[0].Kind != KindEmail || f[0].Decoded != c.decoded {
				t.Errorf("%s: %+v; want one email, decoded %q", data, f, c.decoded)
			}
		}
	}
	for _, s := range []string{
		"100%2525 done", "%2540", "user%2540localhost", "Tom &amp; Jerry", "&#64;", "a&#64;b", "&commat;example.com",
		"jane&#64", "AT&T", "&#x;", "&#99999999999;", "R&D &#38; QA",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%q taken for personal data: %+v", s, f)
		}
	}
}

// TestScanThinLinksWithAtAreNotEmails: a thin link's "@" before a file
// name ("logo@2x.png", a version "key@v2.json"), as written or hidden the
// ways an address's "@" is, is no e-mail address: its domain's last label
// is not a top-level domain on the ICANN section of the Public Suffix
// List. Real addresses, as written or hidden, are still found.
func TestScanThinLinksWithAtAreNotEmails(t *testing.T) {
	for _, s := range []string{
		"https://cdn.example.com/img/logo@2x.png", "icon@2x.png", "logo%402x.png", "s3://bucket/key%40v2.json",
		"logo&#64;2x.png", "logo\uff202x.png", "logo%25402x.PNG", "assets/app@1.2.3.tar.gz",
		"https://user@git.example.com/r", "ssh://git@example.com/org/repo", "logo@2x.ящик-нет",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%q taken for personal data: %+v", s, f)
		}
	}
	for _, s := range []string{
		"jane@example.com", "jane@example.co.uk", "a@b.io", "user@sub.example.museum", "JANE@EXAMPLE.COM",
		"jane%40example.com", "jane%2540example.com", "jane&#64;example.com", "jane\uff20example.com",
		"logo@2x.png, write to jane@example.com", "https://u@example.com/x and bob@example.org",
		// Internationalised domains (IDNA, RFC 5890) and local parts (RFC
		// 6531), written in Unicode or punycode, percent-encoded too.
		"jane@bücher.de", "jane@пример.рф", "jane@example.中国", "jane@example.xn--p1ai", "jane@xn--bcher-kva.xn--p1ai",
		"jane%40b%C3%BCcher.de", "jörg@example.de",
		// "//" before an address that does not start a URL's authority
		// ("scheme://user@host") hides nothing.
		"contact //jane@example.com", "a//jane@example.com", "//jane%40example.com", "https://x.io/redirect?to=//jane@example.com",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 1 || f[0].Kind != KindEmail {
			t.Errorf("%q: %+v, want one email", s, f)
		}
	}
}

// BenchmarkScanThinLinks scans data whose links carry an "@" that is no
// address (retina image names, versioned keys): each is a match of the
// e-mail pattern, so it measures what checking a match's domain costs.
func BenchmarkScanThinLinks(b *testing.B) {
	data := []byte(`{"id":"f_123","logo":"https://cdn.example.com/img/logo@2x.png","icon":"icon@3x.png","key":"s3://bucket/key%40v2.json","by":"https://u@git.example.com/r"}`)
	b.ReportAllocs()
	for b.Loop() {
		if f := ScanPersonalData(data, nil, "/data"); len(f) > 3 {
			b.Fatal(f)
		}
	}
}

// TestScanFindsFormatCharacters: an e-mail address split by invisible
// format characters (Unicode general category Cf: U+200B ZERO WIDTH
// SPACE, U+00AD SOFT HYPHEN, U+2060 WORD JOINER…), written as such, as
// character references or percent-encoded, is found once they are
// removed, and the finding names that reading after the others; strings
// that still read as no address are not taken for one.
func TestScanFindsFormatCharacters(t *testing.T) {
	for _, c := range []struct{ s, decoded string }{
		{"jane\u200b@example.com", DecodedFormat},
		{"jane\u00ad@example.com", DecodedFormat},
		{"ja\u2060ne@exam\u200bple.com", DecodedFormat},
		{"jane&#8203;@example.com", DecodedEntity + ", then " + DecodedFormat},
		{"jane%E2%80%8B%40example.com", DecodedPercent + ", then " + DecodedFormat},
		{"jane\u200b\uff20example.com", DecodedFormat + ", then " + DecodedNFKC},
	} {
		for _, data := range []string{`{"v":` + quote(c.s) + `}`, `{` + quote(c.s) + `:true}`} {
			f := ScanPersonalData([]byte(data), nil, "/data")
			if len(f) != 1 || f[0].Kind != KindEmail || f[0].Decoded != c.decoded {
				t.Errorf("%s: %+v; want one email, decoded %q", data, f, c.decoded)
			}
		}
	}
	for _, s := range []string{
		"\u200b", "caf\u00e9\u200b @ noon", "logo\u200b@2x.png", "a\u00adb", "%E2%80%8B", "\ufeffhello", "x\u200d\U0001F600", "\xe2\x80",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%q taken for personal data: %+v", s, f)
		}
	}
}

// TestScanFindsReplacementCharacters: a lone surrogate escape ("\ud800"
// to "\udfff" without its other half: no Unicode text, RFC 8259 §8.2)
// decodes to U+FFFD REPLACEMENT CHARACTER, so "jane\ud800@example.com"
// reached receivers, who read the address around the escape, while the
// guard read "jane\ufffd@example.com", no address for its patterns. Such
// characters, escaped or written, are removed by a reading of their own,
// which the finding names; text with them and no address is not taken
// for one.
func TestScanFindsReplacementCharacters(t *testing.T) {
	for _, c := range []struct{ s, decoded string }{
		{`jane\ud800@example.com`, DecodedReplacement},
		{`jane@exa\udc00mple.com`, DecodedReplacement},
		{`ja\udfffne\udbff@example.com`, DecodedReplacement},
		{`jane\ufffd@example.com`, DecodedReplacement},
		{"jane\ufffd@example.com", DecodedReplacement},
		{`ja\u200bne\ud800@example.com`, DecodedFormat + ", then " + DecodedReplacement},
		{`jane\ud800%40example.com`, DecodedPercent + ", then " + DecodedReplacement},
	} {
		for _, data := range []string{`{"v":"` + c.s + `"}`, `{"` + c.s + `":true}`} {
			f := ScanPersonalData([]byte(data), nil, "/data")
			if len(f) != 1 || f[0].Kind != KindEmail || f[0].Decoded != c.decoded {
				t.Errorf("%s: %+v; want one email, decoded %q", data, f, c.decoded)
			}
		}
	}
	for _, s := range []string{`\ud800`, `\ufffd`, `caf\ud800 @ noon`, `logo\ud800@2x.png`, `\ud83d\ude00`} {
		if f := ScanPersonalData([]byte(`{"v":"`+s+`"}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%s taken for personal data: %+v", s, f)
		}
	}
}

// TestScanFindsIdeographicFullStops: IDNA maps U+3002 IDEOGRAPHIC FULL
// STOP, U+FF0E FULLWIDTH FULL STOP and U+FF61 HALFWIDTH IDEOGRAPHIC FULL
// STOP to "." (UTS #46; RFC 3490 §3.1 takes them for label separators), so
// "jane@example。com" is an address, also with its "@" hidden; the
// finding names the reading. Text with such a stop and no address is not
// taken for one.
func TestScanFindsIdeographicFullStops(t *testing.T) {
	for _, c := range []struct{ s, decoded string }{
		{"jane@example\u3002com", DecodedFullStops},
		{"jane@example\uff61com", DecodedFullStops},
		{"jane@mail\u3002example\u3002co\u3002uk", DecodedFullStops},
		{"jane%40example\u3002com", DecodedPercent + ", then " + DecodedFullStops},
		{"jane@example%E3%80%82com", DecodedPercent + ", then " + DecodedFullStops},
		{"jane@example\uff0ecom", DecodedNFKC},                          // NFKC reads U+FF0E as "." already
		{"\uff4a\uff41\uff4e\uff45@example\u3002com", DecodedFullStops}, // full-width letters are letters
		{"jane\uff20example\uff61com", DecodedFullStops + ", then " + DecodedNFKC},
	} {
		for _, data := range []string{`{"v":` + quote(c.s) + `}`, `{` + quote(c.s) + `:true}`} {
			f := ScanPersonalData([]byte(data), nil, "/data")
			if len(f) != 1 || f[0].Kind != KindEmail || f[0].Decoded != c.decoded {
				t.Errorf("%s: %+v; want one email, decoded %q", data, f, c.decoded)
			}
		}
	}
	for _, s := range []string{
		"\u4fa1\u683c\u306f100\u5186\u3067\u3059\u3002\u4ee5\u4e0a", "logo@2x\u3002png", "logo@2x\uff61png", "@\u3002com", "jane@\u3002com",
		"\u30e1\u30fc\u30eb\u306f@\u306e\u5f8c\u3002",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%q taken for personal data: %+v", s, f)
		}
	}
}

// TestScanFindsDefaultIgnorablesAndControls: an address split by a
// character Unicode says to ignore when not supported (Default_Ignorable_
// Code_Point, UAX #44: U+034F COMBINING GRAPHEME JOINER, a category Mn
// mark, Hangul fillers, variation selectors, tags…), or by a control
// character that is no white space (NUL, U+007F…), is found once they are
// removed. White space is not removed (it separates words), and text with
// such characters and no address is not taken for one.
func TestScanFindsDefaultIgnorablesAndControls(t *testing.T) {
	for _, s := range []string{
		"jane\u034f@example.com", "jane@exa\u034fmple.com",
		"jane\x00@example.com", "ja\x00ne@exam\x00ple.com", "jane\x7f@example.com", "jane\u0080@example.com", "jane\x1b@example.com",
		"jane\u17b4@example.com", // (the Hangul fillers U+115F, U+3164, U+FFA0 are letters: found as written)
		"jane\u180b@example.com", "jane\ufe0f@example.com", "jane\U000E0100@example.com", "jane\U000E0041@example.com",
		"jane\ufff0@example.com", "jane\U0001BCA0@example.com", "jane\U0001D173@example.com",
		"jane%CD%8F%40example.com", "jane%00%40example.com", "jane&#847;@example.com",
	} {
		for _, data := range []string{`{"v":` + quote(s) + `}`, `{` + quote(s) + `:true}`} {
			f := ScanPersonalData([]byte(data), nil, "/data")
			if len(f) != 1 || f[0].Kind != KindEmail || !strings.HasSuffix(f[0].Decoded, DecodedFormat) {
				t.Errorf("%s: %+v; want one email, decoded ending %q", data, f, DecodedFormat)
			}
		}
	}
	for _, s := range []string{
		"jane\n@example.com", "jane\t@example.com", "jane\r\n@example.com", "jane\u0085@example.com", "jane\u00a0@example.com",
		"\x00", "a\x00b", "logo\x00@2x.png", "logo\u034f@2x.png", "caf\u00e9\u034f @ noon", "\u2764\ufe0f", "\u1100\u1161\u115f",
		"line one\nline two @ noon",
	} {
		if f := ScanPersonalData([]byte(`{"v":`+quote(s)+`}`), nil, "/data"); len(f) != 0 {
			t.Errorf("%q taken for personal data: %+v", s, f)
		}
	}
}

// TestInvisibleCoversDefaultIgnorable: every Default_Ignorable_Code_Point
// of Unicode 15.0 (DerivedCoreProperties.txt, the version of Go's unicode
// tables) is removed by the invisible-characters reading, and white space
// is not.
func TestInvisibleCoversDefaultIgnorable(t *testing.T) {
	dicp := [][2]rune{
		{0x00AD, 0x00AD}, {0x034F, 0x034F}, {0x061C, 0x061C}, {0x115F, 0x1160}, {0x17B4, 0x17B5}, {0x180B, 0x180F},
		{0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x206F}, {0x3164, 0x3164}, {0xFE00, 0xFE0F}, {0xFEFF, 0xFEFF},
		{0xFFA0, 0xFFA0}, {0xFFF0, 0xFFF8}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF},
	}
	for _, r := range dicp {
		for c := r[0]; c <= r[1]; c++ {
			if removeFormat("a"+string(c)+"b") != "ab" {
				t.Errorf("%U (Default_Ignorable_Code_Point) not removed", c)
			}
		}
	}
	for _, c := range []rune{'\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x2028, 0x3000} {
		if removeFormat("a"+string(c)+"b") == "ab" {
			t.Errorf("%U (white space) removed", c)
		}
	}
}

// TestInvisibleByte: the prefilter's one comparison is "a control byte
// (below 0x20, or DEL) or a byte from 0x80", for every byte.
func TestInvisibleByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		if invisibleByte(byte(c)) != (c < 0x20 || c >= 0x7f) {
			t.Errorf("invisibleByte(%#x) = %v", c, invisibleByte(byte(c)))
		}
	}
}
