package scheme

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Errors of JSON pointer parsing and lookup (wrapped with context).
var (
	errBadPointer = errors.New("not an RFC 6901 JSON pointer")
	errNotJSON    = errors.New("body is not valid JSON")
	errNotFound   = errors.New("no value at JSON pointer")
	errDuplicate  = errors.New("duplicate object member on the JSON pointer's path")
)

// parsePointer splits an RFC 6901 JSON pointer into its unescaped reference
// tokens: "" is the whole document, otherwise every token is preceded by
// "/", and in a token "~1" stands for "/" and "~0" for "~"; any other "~"
// is an error (RFC 6901 sections 3 and 4).
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("%w: %q does not start with \"/\"", errBadPointer, p)
	}
	raw := strings.Split(p[1:], "/")
	tokens := make([]string, len(raw))
	for i, t := range raw {
		if strings.IndexByte(t, '~') < 0 {
			tokens[i] = t
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("%w: %q has a \"~\" not followed by 0 or 1", errBadPointer, p)
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		tokens[i] = b.String()
	}
	return tokens, nil
}

// lookupJSON returns the raw bytes of the value that tokens designate in
// doc, which must be one valid JSON text. Object members are matched by
// their unescaped names; a name that occurs twice in an object on the path
// is an error (RFC 8259 leaves the meaning of duplicates undefined, and the
// destination might read the other one). Array elements are addressed by
// decimal indexes without leading zeros; "-" designates no element.
func lookupJSON(doc []byte, tokens []string) ([]byte, error) {
	if !json.Valid(doc) {
		return nil, errNotJSON
	}
	i := skipSpace(doc, 0)
	for depth, tok := range tokens {
		if i >= len(doc) {
			return nil, errNotFound
		}
		var err error
		switch doc[i] {
		case '{':
			i, err = findMember(doc, i, tok)
		case '[':
			i, err = findElement(doc, i, tok)
		default:
			err = errNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("%w (token %d %q)", err, depth+1, tok)
		}
	}
	end := skipValue(doc, i)
	return doc[i:end], nil
}

// findMember returns the start of the value of member name in the object
// starting at doc[i] ('{').
func findMember(doc []byte, i int, name string) (int, error) {
	found := -1
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return 0, errNotFound
	}
	for i < len(doc) {
		keyStart := i
		i = skipString(doc, i)
		key := doc[keyStart:i]
		i = skipSpace(doc, i)
		i = skipSpace(doc, i+1) // ':'
		valStart := i
		i = skipValue(doc, i)
		if memberNameIs(key, name) {
			if found >= 0 {
				return 0, errDuplicate
			}
			found = valStart
		}
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != ',' {
			break // '}'
		}
		i = skipSpace(doc, i+1)
	}
	if found < 0 {
		return 0, errNotFound
	}
	return found, nil
}

// findElement returns the start of element tok (a decimal index) of the
// array starting at doc[i] ('[').
func findElement(doc []byte, i int, tok string) (int, error) {
	n, ok := arrayIndex(tok)
	if !ok {
		return 0, errNotFound
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return 0, errNotFound
	}
	for k := 0; i < len(doc); k++ {
		if k == n {
			return i, nil
		}
		i = skipSpace(doc, skipValue(doc, i))
		if i >= len(doc) || doc[i] != ',' {
			break // ']'
		}
		i = skipSpace(doc, i+1)
	}
	return 0, errNotFound
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a
// leading zero, small enough to be an int.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
		n = n*10 + int(tok[i]-'0')
	}
	return n, true
}

// memberNameIs reports whether the raw JSON string key (quotes included)
// names name once unescaped. A name that is not valid UTF-8 matches
// nothing (decoders disagree on what it means).
func memberNameIs(key []byte, name string) bool {
	if len(key) < 2 || !utf8.Valid(key) {
		return false
	}
	inner := key[1 : len(key)-1]
	if !containsByte(inner, '\\') {
		return string(inner) == name
	}
	var s string
	if json.Unmarshal(key, &s) != nil {
		return false
	}
	return s == name
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// scalarText turns the raw JSON value at a pointer into a key: a string's
// unescaped text (which must be valid UTF-8, so that two different ids
// never decode to the same replacement characters) or a number's literal
// text as sent (no float conversion). Other types are an error.
func scalarText(raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", errNotFound
	}
	switch c := raw[0]; {
	case c == '"':
		if !utf8.Valid(raw) {
			return "", errors.New("string at JSON pointer is not valid UTF-8")
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errNotJSON
		}
		return s, nil
	case c == '-' || ('0' <= c && c <= '9'):
		return string(raw), nil
	default:
		return "", fmt.Errorf("value at JSON pointer is not a string or number but %s", jsonKind(c))
	}
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 'n':
		return "null"
	default:
		return "a boolean"
	}
}

// The scanners below walk a document already checked by json.Valid; they
// never index past the end even if it were not.

func skipSpace(doc []byte, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at doc[i] ('"').
func skipString(doc []byte, i int) int {
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(doc)
}

// skipValue returns the index after the value starting at doc[i].
func skipValue(doc []byte, i int) int {
	if i >= len(doc) {
		return len(doc)
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				i = skipString(doc, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(doc)
	default: // number, true, false, null
		for i < len(doc) {
			switch doc[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}
