package catalog

import (
	"html"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/rangetable"
)

// Kinds of personal data the guard finds.
const (
	KindEmail = "email"
	KindPhone = "phone"
	KindCard  = "payment-card"
	KindIBAN  = "iban"
)

// Finding is personal data found in a string of the event's data: Pointer
// is the string's JSON pointer in the request body, Kind one of the kinds
// above. Decoded is "" when the string shows it as written, else how it
// had to be read for it to show (DecodedPercent, DecodedPercentRepeated,
// DecodedEntity, DecodedFormat, DecodedNFKC, those that applied joined by
// ", then ").
type Finding struct {
	Pointer string `json:"pointer"`
	Kind    string `json:"kind"`
	Decoded string `json:"decoded,omitempty"`
}

// How a string is read when an e-mail address hides its "@": percent-
// encoded ("jane%40example.com", RFC 3986 §2.1), or written with a
// compatibility character that Unicode normalisation form NFKC (UAX #15)
// maps to "@" — U+FF20 FULLWIDTH COMMERCIAL AT ("jane＠example.com") or
// U+FE6B SMALL COMMERCIAL AT — possibly with full-width letters and dots
// too.
const (
	DecodedPercent = "percent-decoded (RFC 3986 §2.1)"
	DecodedNFKC    = "NFKC-normalised (Unicode UAX #15: ＠ U+FF20 and ﹫ U+FE6B read as @)"
	// DecodedPercentRepeated: percent-decoded more than once, the "%" of
	// %40 itself encoded (%2540, as a URL put in a query parameter is).
	DecodedPercentRepeated = "percent-decoded repeatedly (RFC 3986 §2.1: %2540 read as %40, then as @)"
	// DecodedEntity: HTML character references decoded, numeric (&#64;,
	// &#x40;) and named (&commat;).
	DecodedEntity = "HTML character references decoded (HTML Living Standard §13.5: &#64;, &#x40; and &commat; read as @)"
	// DecodedFormat: invisible characters removed — format characters
	// (category Cf), the rest of Unicode's Default_Ignorable_Code_Point
	// (UAX #44: U+034F COMBINING GRAPHEME JOINER, variation selectors,
	// U+17B4…) and control characters other than white space (NUL, ESC,
	// DEL…) — which split an address without showing.
	DecodedFormat = "format and other invisible characters removed (Unicode general category Cf and Default_Ignorable_Code_Point: U+200B ZERO WIDTH SPACE, U+00AD SOFT HYPHEN, U+034F COMBINING GRAPHEME JOINER…; control characters other than white space: NUL, U+007F…; read as nothing)"
	// DecodedReplacement: U+FFFD REPLACEMENT CHARACTER removed, which a
	// lone surrogate escape ("\ud800" to "\udfff" without its other half:
	// no Unicode text, RFC 8259 §8.2) decodes to: it splits an address
	// for the patterns while receivers still read the address around it.
	DecodedReplacement = "replacement characters removed (U+FFFD, which a lone surrogate escape such as \\ud800 decodes to: no Unicode text, RFC 8259 §8.2; read as nothing)"
	// DecodedFullStops: the full stops IDNA reads as a domain's dot.
	DecodedFullStops = "ideographic full stops read as dots (IDNA, UTS #46 and RFC 3490 §3.1: 。 U+3002, ． U+FF0E and ｡ U+FF61 read as .)"
)

// EmailDomainRule says, for the published contract, which domains make an
// e-mail address (hasEmail, icannTLD).
const EmailDomainRule = "an e-mail address's domain ends in a top-level domain of the ICANN section of the Public Suffix List (com, uk, io, рф…; letters of any script): a link's logo@2x.png or key@v2.json is no address, nor a URL's userinfo (https://u@host)"

// HiddenEmailReadings says, for the published contract, how the guard
// reads a string for an e-mail address whose "@" is hidden (hiddenEmail).
const HiddenEmailReadings = "an e-mail address is also found with its @ percent-encoded (%40) or encoded again (%2540), read percent-decoded (RFC 3986 §2.1); " +
	"as an HTML character reference (&#64;, &#x40;, &commat;), read with its references decoded (HTML Living Standard §13.5); " +
	"split by invisible characters (U+200B zero-width space, U+00AD soft hyphen, any of Unicode general category Cf or Default_Ignorable_Code_Point such as U+034F combining grapheme joiner, a control character other than white space such as NUL), read with them removed; " +
	"split by U+FFFD replacement characters, which a lone surrogate escape (\\ud800 to \\udfff without its pair) decodes to, read with them removed; " +
	"or as a full-width ＠ U+FF20 or small ﹫ U+FE6B, read NFKC-normalised (Unicode UAX #15); " +
	"the readings are applied in rounds (at most 4) and the finding names them; " +
	"then a domain's dot written as an ideographic full stop (。 U+3002, ． U+FF0E, ｡ U+FF61) is read as a dot, as IDNA does (UTS #46, RFC 3490 §3.1)"

// Found says what was found and, for data found only once the string was
// decoded, the rule that decoded it: "email found", or "email found once
// percent-decoded (RFC 3986 §2.1)".
func (f Finding) Found() string {
	if f.Decoded == "" {
		return f.Kind + " found"
	}
	return f.Kind + " found once " + f.Decoded
}

// ScanPersonalData checks every string, number and member name of data
// (JSON) for e-mail addresses, phone numbers, payment card numbers
// (Luhn-valid, with a card network's prefix and length) and IBANs (ISO
// 13616 country length and mod-97 checksum). A value whose schema in
// schema (nil: none) is marked "x-herald-personal-data": true is not looked
// into, nor is its member name: the mark counts on a property, on
// additionalProperties or items, through a local $ref ("#/$defs/…"), and on
// any branch of allOf, anyOf or oneOf. prefix is put before each pointer
// ("/data"). Findings are sorted by pointer.
func ScanPersonalData(data []byte, schema *Schema, prefix string) []Finding {
	var v any
	// segmentio's parser: encoding/json's decoder was most of the scan's
	// time once the patterns ran only where they can match. Strings may
	// share data's memory: they are only read here.
	if _, err := segjson.Parse(data, &v, segjson.UseNumber|segjson.DontCopyString); err != nil {
		return nil
	}
	var raw any
	if schema != nil {
		raw = schema.raw
	}
	var out []Finding
	path := make([]string, 1, 8)
	path[0] = prefix
	scanValue(v, raw, raw, path, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Pointer < out[j].Pointer })
	return out
}

// maxRefDepth bounds the $ref and allOf/anyOf/oneOf a mark is looked for
// through (a schema may refer to itself).
const maxRefDepth = 16

// marked reports whether schema s (within root) carries the personal-data
// mark, itself or through a local $ref or a branch of allOf/anyOf/oneOf.
func marked(s, root any) bool { return markedDepth(s, root, 0) }

func markedDepth(s, root any, depth int) bool {
	m, ok := s.(map[string]any)
	if !ok || depth > maxRefDepth {
		return false
	}
	if m[PersonalDataKeyword] == true {
		return true
	}
	if ref, ok := m["$ref"].(string); ok && markedDepth(resolveRef(ref, root), root, depth+1) {
		return true
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		branches, _ := m[kw].([]any)
		for _, b := range branches {
			if markedDepth(b, root, depth+1) {
				return true
			}
		}
	}
	return false
}

// resolveRef returns the schema a local JSON pointer reference ("#/$defs/x")
// names in root, nil for any other (Herald's schemas may not refer outside
// themselves: schema.go).
func resolveRef(ref string, root any) any {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	cur := root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	return cur
}

// child returns the schema of s's member key (index: of an array item):
// its property, else additionalProperties; items for an array. A local
// $ref on s is followed first.
func child(s, root any, key string, index bool) any {
	m, ok := s.(map[string]any)
	for depth := 0; ok && depth < maxRefDepth; depth++ {
		ref, isRef := m["$ref"].(string)
		if !isRef {
			break
		}
		m, ok = resolveRef(ref, root).(map[string]any)
	}
	if !ok {
		return nil
	}
	if index {
		if it, ok := m["items"]; ok {
			return it
		}
		return nil
	}
	if props, ok := m["properties"].(map[string]any); ok {
		if c, ok := props[key]; ok {
			return c
		}
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		return ap
	}
	return nil
}

// pointerEscaper escapes a member name in a JSON pointer (RFC 6901 §3).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// scanValue walks v with its schema s. path holds the pointer's segments
// (escaped); the pointer string is built only for a finding.
func scanValue(v, s, root any, path []string, out *[]Finding) {
	if marked(s, root) {
		return
	}
	switch x := v.(type) {
	case string:
		if k, dec := personalKind(x); k != "" {
			*out = append(*out, Finding{Pointer: strings.Join(path, "/"), Kind: k, Decoded: dec})
		}
	case segjson.Number:
		// A card number sent as a JSON number is one all the same, also
		// written with a fraction or an exponent (4.111111111111111e15).
		k, _ := personalKind(string(x))
		if k == "" && strings.ContainsAny(string(x), ".eE") {
			if f, err := strconv.ParseFloat(string(x), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1e19 {
				k, _ = personalKind(strconv.FormatFloat(math.Abs(f), 'f', 0, 64))
			}
		}
		if k != "" {
			*out = append(*out, Finding{Pointer: strings.Join(path, "/"), Kind: k})
		}
	case map[string]any:
		for name, c := range x {
			k := name
			if strings.ContainsAny(k, "~/") {
				k = pointerEscaper.Replace(k)
			}
			cs := child(s, root, name, false)
			// A member name is a string of the data too ({"bob@…": true}).
			if kind, dec := personalKind(name); kind != "" && !marked(cs, root) {
				*out = append(*out, Finding{Pointer: strings.Join(append(path, k), "/"), Kind: kind, Decoded: dec})
			}
			scanValue(c, cs, root, append(path, k), out)
		}
	case []any:
		cs := child(s, root, "", true)
		for i, c := range x {
			scanValue(c, cs, root, append(path, itoa(i)), out)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}

var (
	// An addr-spec's common shape (RFC 5322 §3.4.1, dot-atom local part
	// without "/", so a URL's "//user@host" is seen as such),
	// with a domain of at least two labels and an alphabetic top label
	// (which hasEmail then requires to be a real top-level domain).
	// Letters and digits of any script in the local part (RFC 6531) and
	// the domain's labels (IDNA, RFC 5890), the top label letters or
	// punycode ("xn--p1ai"); icannTLD then checks that label.
	emailRe = regexp.MustCompile(`[\p{L}\p{N}!#$%&'*+=?^_{|}~-]+(?:\.[\p{L}\p{N}!#$%&'*+=?^_{|}~-]+)*@(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+(?:[xX][nN]--[A-Za-z0-9-]*[A-Za-z0-9]|\p{L}{2,})`)
	// International (E.164, ITU-T: "+" and 8–15 digits, separators allowed)
	// or a whole string in the North American format "(555) 123-4567".
	phoneIntlRe = regexp.MustCompile(`(?:^|[^\w+])\+[1-9][0-9 ().-]{6,20}[0-9]`)
	phoneNARe   = regexp.MustCompile(`^\(?[2-9][0-9]{2}\)?[ .-][0-9]{3}[ .-][0-9]{4}$`)
	// Card numbers: 13–19 digits, optionally in groups split by one space
	// or dash, not part of a longer run of letters or digits.
	cardRe = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.-])([0-9]{4}(?:[ -]?[0-9]{2,4}){2,4}[0-9]{0,3})(?:$|[^A-Za-z0-9_.-])`)
	ibanRe = regexp.MustCompile(`(?:^|[^A-Za-z0-9])([A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{1,4}){3,9})(?:$|[^A-Za-z0-9])`)
)

// personalKind names the kind of personal data in s ("" for none) and,
// for an e-mail address found only once s was decoded, how (Finding.Decoded;
// hiddenEmail). Each pattern runs only when s has what any match needs (an
// "@"; a "+" and 8 digits; exactly 10 digits; 13 digits; two capitals and
// two digits in a row; for a hidden "@", a "%", a "&", a control byte or
// a byte from 0x80): most strings of an event are ids, times and amounts, and running
// the five patterns on each was most of a publish's CPU (profile in
// docs/BENCHMARKS.md). The answers are the patterns' own.
func personalKind(s string) (kind, decoded string) {
	digits, at, plus, hidden := 0, false, false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '@':
			at = true
		case c == '+':
			plus = true
		case c == '%', c == '&', invisibleByte(c):
			hidden = true
		}
	}
	if at && hasEmail(s) {
		return KindEmail, ""
	}
	if hidden {
		if dec := hiddenEmail(s); dec != "" {
			return KindEmail, dec
		}
	}
	if plus && digits >= 8 {
		if m := phoneIntlRe.FindString(s); m != "" {
			if n := countDigits(m); n >= 8 && n <= 15 {
				return KindPhone, ""
			}
		}
	}
	if digits == 10 && phoneNARe.MatchString(strings.TrimSpace(s)) {
		return KindPhone, ""
	}
	if digits >= 13 {
		for _, m := range cardRe.FindAllStringSubmatch(s, -1) {
			if isCard(digitsOf(m[1])) {
				return KindCard, ""
			}
		}
	}
	if digits >= 2 && ibanStart(s) {
		for _, m := range ibanRe.FindAllStringSubmatch(s, -1) {
			if isIBAN(strings.ReplaceAll(m[1], " ", "")) {
				return KindIBAN, ""
			}
		}
	}
	return "", ""
}

// hasEmail reports whether s holds an e-mail address as written: a match
// of emailRe whose domain ends in a top-level domain (icannTLD), so that a
// link's "logo@2x.png" or "key@v2.json" is not taken for one.
func hasEmail(s string) bool {
	for off, first := 0, true; off < len(s); first = false {
		loc := emailRe.FindStringIndex(s[off:])
		if loc == nil {
			return false
		}
		start, end := off+loc[0], off+loc[1]
		off = end
		// user@host in a URL's authority is userinfo, not an address: the
		// first match right after a scheme's "://" ("https://u@host",
		// "ssh://git@host") is passed over (the rest of s is still looked
		// at); a "//" anywhere else hides nothing.
		if first && afterSchemeSlashes(s, start) {
			continue
		}
		if icannTLD(s[start:end]) {
			return true
		}
	}
	return false
}

// afterSchemeSlashes reports whether s[:i] ends with a URL scheme and
// "://" (RFC 3986 §3.1: a letter, then letters, digits, "+", "-", "."), the
// scheme at the start of s or after a byte that cannot be in one.
func afterSchemeSlashes(s string, i int) bool {
	if i < 3 || s[i-3:i] != "://" {
		return false
	}
	j := i - 3 // the scheme ends before j
	k := j
	for k > 0 && schemeByte(s[k-1]) {
		k--
	}
	for k < j && !isASCIILetter(s[k]) { // a scheme starts with a letter
		k++
	}
	return k < j
}

func schemeByte(c byte) bool {
	return isASCIILetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// icannTLD reports whether the last label of m, a match of emailRe, is a
// top-level domain in the ICANN section of the Public Suffix List (com,
// uk, io, museum, рф as xn--p1ai…): "png", "json" or "gz" are file
// extensions, not domains. A label in Unicode is looked up in its
// punycode form (IDNA, RFC 5891). It runs only on a match of the pattern,
// never on every string.
func icannTLD(m string) bool {
	tld := strings.ToLower(m[strings.LastIndexByte(m, '.')+1:])
	if a, err := idna.Lookup.ToASCII(tld); err == nil {
		tld = a
	}
	_, icann := publicsuffix.PublicSuffix(tld)
	return icann
}

// maxDecodeRounds bounds how many times hiddenEmail decodes a string
// (%25252540 is four rounds of percent-decoding).
const maxDecodeRounds = 4

// hiddenEmail looks for an e-mail address whose "@" (or more) is written
// so that the pattern does not see it: percent-encoded, once or again
// (%40, %2540), as an HTML character reference (&#64;, &#x40;, &commat;),
// or as a compatibility character (U+FF20, U+FE6B), or whose domain's dot
// is an ideographic full stop (U+3002, U+FF0E, U+FF61). s is read in rounds,
// each percent-decoding it (every valid %XX; an invalid one is left as it
// is) when it has a "%", then decoding its character references
// (html.UnescapeString) when it has a "&", then removing its format
// characters (invisible: Cf, Default_Ignorable_Code_Point, controls but
// white space) when it may have one, then removing its U+FFFD replacement
// characters (a lone surrogate escape's reading) when it has one, until a
// round changes nothing, an
// address shows, or maxDecodeRounds; then, when it has an "@" (or U+FF20
// or U+FE6B) and other non-ASCII characters, with its ideographic full
// stops read as "." when NFKC would leave one, and NFKC-normalised
// (full-width letters or dots). It returns how s was read
// when that shows an address (the readings in order joined by ", then ":
// DecodedPercent or, for more than one percent-decoding in a row,
// DecodedPercentRepeated; DecodedEntity; DecodedFormat; DecodedReplacement;
// DecodedFullStops;
// DecodedNFKC), else "".
func hiddenEmail(s string) string {
	var steps []string
	step := func(name string) {
		switch n := len(steps); {
		case n > 0 && steps[n-1] == name && name == DecodedPercent:
			steps[n-1] = DecodedPercentRepeated
		case n > 0 && (steps[n-1] == name || steps[n-1] == DecodedPercentRepeated && name == DecodedPercent):
		default:
			steps = append(steps, name)
		}
	}
	found := func() bool { return strings.IndexByte(s, '@') >= 0 && hasEmail(s) }
	// Each reading in turn, only where s has what it decodes; a round that
	// changes nothing ends the loop.
	readings := [...]struct {
		name   string
		may    func(string) bool
		decode func(string) string
	}{
		{DecodedPercent, func(s string) bool { return strings.IndexByte(s, '%') >= 0 }, percentDecode},
		{DecodedEntity, func(s string) bool { return strings.IndexByte(s, '&') >= 0 }, html.UnescapeString},
		{DecodedFormat, hasInvisibleByte, removeFormat},
		{DecodedReplacement, func(s string) bool { return strings.Contains(s, "\uFFFD") }, func(s string) string { return strings.ReplaceAll(s, "\uFFFD", "") }},
	}
	for round := 0; round < maxDecodeRounds; round++ {
		changed := false
		for _, r := range readings {
			if !r.may(s) {
				continue
			}
			if d := r.decode(s); d != s {
				s, changed = d, true
				step(r.name)
				if found() {
					return strings.Join(steps, ", then ")
				}
			}
		}
		if !changed {
			break
		}
	}
	if !hasHighByte(s) {
		return ""
	}
	if strings.IndexByte(s, '@') < 0 && !strings.Contains(s, "\uFF20") && !strings.Contains(s, "\uFE6B") {
		return ""
	}
	n := norm.NFKC.String(s)
	// NFKC reads U+FF0E as "." but U+FF61 as U+3002, and leaves U+3002 as
	// it is: when that leaves an ideographic full stop, they are first all
	// read as a domain's dot, as IDNA maps them (UTS #46; RFC 3490 §3.1
	// takes them for label separators).
	if strings.ContainsAny(n, ideographicStops) {
		s = fullStops.Replace(s)
		step(DecodedFullStops)
		if found() {
			return strings.Join(steps, ", then ")
		}
		n = norm.NFKC.String(s)
	}
	if n != s {
		s = n
		step(DecodedNFKC)
		if found() {
			return strings.Join(steps, ", then ")
		}
	}
	return ""
}

// ideographicStops are the full stops IDNA maps to "." (UTS #46 table;
// RFC 3490 §3.1): U+3002 IDEOGRAPHIC FULL STOP, U+FF0E FULLWIDTH FULL STOP
// and U+FF61 HALFWIDTH IDEOGRAPHIC FULL STOP.
const ideographicStops = "\u3002\uFF0E\uFF61"

var fullStops = strings.NewReplacer("\u3002", ".", "\uFF0E", ".", "\uFF61", ".")

// invisible is what removeFormat removes: format characters (general
// category Cf), the other code points Unicode makes Default_Ignorable_
// Code_Point (UAX #44, DerivedCoreProperties.txt: Cf, Variation_Selector
// and Other_Default_Ignorable_Code_Point such as U+034F COMBINING
// GRAPHEME JOINER, less white space and a few Cf that show), and control
// characters (Cc) other than white space: NUL, ESC, DEL, C1 controls but
// not TAB, LF, CR or NEL, which separate words. Removing them joins only
// what they split without showing.
var invisible = rangetable.Merge(
	unicode.Cf,
	unicode.Other_Default_Ignorable_Code_Point,
	unicode.Variation_Selector,
	&unicode.RangeTable{
		R16: []unicode.Range16{
			{Lo: 0x00, Hi: 0x08, Stride: 1},
			{Lo: 0x0e, Hi: 0x1f, Stride: 1},
			{Lo: 0x7f, Hi: 0x84, Stride: 1},
			{Lo: 0x86, Hi: 0x9f, Stride: 1},
		},
		LatinOffset: 4,
	},
)

// invisibleByte reports whether c is a control byte (below 0x20, or DEL)
// or a byte from 0x80, in one comparison: c-0x20 wraps around below 0x20.
func invisibleByte(c byte) bool { return c-0x20 >= 0x7f-0x20 }

// hasInvisibleByte reports whether s may have a character of invisible:
// a control byte or a byte from 0x80.
func hasInvisibleByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if invisibleByte(s[i]) {
			return true
		}
	}
	return false
}

// removeFormat returns s without its invisible characters (format
// characters, the rest of Default_Ignorable_Code_Point, and control
// characters other than white space: invisible); bytes that are not UTF-8
// are kept as they are. s itself is returned when it has none.
func removeFormat(s string) string {
	var b strings.Builder
	kept := 0 // s[kept:i] is yet to be written to b
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (n > 1 || r < 0x20 || r == 0x7f) && unicode.Is(invisible, r) {
			if b.Cap() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[kept:i])
			kept = i + n
		}
		i += n
	}
	if kept == 0 {
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

// percentDecode decodes every %XX of s (RFC 3986 §2.1, hex digits of
// either case) and leaves a "%" not followed by two hex digits as it is.
func percentDecode(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func hasHighByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// ibanStart reports whether s has two capital letters followed by two
// digits, the start of every IBAN.
func ibanStart(s string) bool {
	for i := 0; i+4 <= len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' && s[i+1] >= 'A' && s[i+1] <= 'Z' &&
			s[i+2] >= '0' && s[i+2] <= '9' && s[i+3] >= '0' && s[i+3] <= '9' {
			return true
		}
	}
	return false
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// luhn is the Luhn (ISO/IEC 7812-1 annex B) check.
func luhn(d string) bool {
	sum := 0
	for i := 0; i < len(d); i++ {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// isCard: a card network's issuer prefix and length (Visa, Mastercard,
// American Express, Discover, JCB, Diners Club, UnionPay, Maestro) and the
// Luhn check. The prefix requirement keeps epoch milliseconds and numeric
// ids (which pass Luhn one time in ten) from being taken for cards.
func isCard(d string) bool {
	n := len(d)
	if n < 13 || n > 19 || !luhn(d) {
		return false
	}
	p2, p4 := atoiPrefix(d, 2), atoiPrefix(d, 4)
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p4 == 6011, p2 == 65, atoiPrefix(d, 3) >= 644 && atoiPrefix(d, 3) <= 649: // Discover
		return n >= 16
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16
	case p2 == 36 || p2 == 38 || (atoiPrefix(d, 3) >= 300 && atoiPrefix(d, 3) <= 305): // Diners Club
		return n >= 14
	case p2 == 62: // UnionPay
		return n >= 16
	case p2 == 50 || (p2 >= 56 && p2 <= 69): // Maestro
		return n >= 13
	}
	return false
}

func atoiPrefix(d string, k int) int {
	n := 0
	for i := 0; i < k && i < len(d); i++ {
		n = n*10 + int(d[i]-'0')
	}
	return n
}

// ibanLengths is the IBAN length per country (ISO 13616 registry, SWIFT).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// isIBAN: the country's length and the ISO 7064 mod 97-10 check.
func isIBAN(s string) bool {
	if n, ok := ibanLengths[s[:2]]; !ok || n != len(s) {
		return false
	}
	r := s[4:] + s[:4]
	mod := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c >= '0' && c <= '9':
			mod = (mod*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			mod = (mod*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return mod == 1
}
