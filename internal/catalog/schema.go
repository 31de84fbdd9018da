// Package catalog holds the rules of the event catalog (docs/contract.md,
// "Event types and versions"): JSON Schema 2020-12 compilation and
// validation of event data (github.com/santhosh-tekuri/jsonschema/v6), the
// personal-data guard that keeps payloads thin, name suggestions for
// misspelt subscriptions, and the OpenAPI 3.1 "webhooks" section that
// describes every event type version.
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// PersonalDataKeyword marks a schema property whose strings may carry
// personal data: the guard does not look inside it.
const PersonalDataKeyword = "x-herald-personal-data"

// Schema is a compiled schema of one event type version, with its source.
type Schema struct {
	compiled *jsonschema.Schema
	raw      any // the schema as decoded, walked by the personal-data guard
}

// noLoader refuses every $ref outside the schema itself: a schema may not
// make Herald read files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: only references inside the schema are allowed", url)
}

// Compile compiles a JSON Schema (draft 2020-12 unless "$schema" names
// another draft) given as JSON. The schema must be a JSON object; $refs may
// only point inside it. The error names the rule that failed.
func Compile(schemaJSON []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("schema must be a JSON object (JSON Schema 2020-12)")
	}
	if d, ok := obj["$schema"].(string); ok && !knownDraft(d) {
		return nil, fmt.Errorf("$schema %q is not a supported draft: 2020-12 (the default), 2019-09, draft-07, draft-06 or draft-04, as https://json-schema.org/draft/2020-12/schema", d)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "herald:///schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", strings.ReplaceAll(err.Error(), loc, "schema"))
	}
	return &Schema{compiled: sch, raw: doc}, nil
}

// knownDraft reports whether a "$schema" value names a draft the
// validator implements (its meta-schema URL, http or https, with an empty
// fragment or none); any other value would be read as a reference to load
// and refused with a confusing "only references inside the schema".
func knownDraft(url string) bool {
	u := strings.TrimSuffix(url, "#")
	u, ok := strings.CutPrefix(u, "https://")
	if !ok {
		u, _ = strings.CutPrefix(u, "http://")
	}
	switch u {
	case "json-schema.org/schema", "json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema":
		return true
	}
	return false
}

// CheckMarks refuses a schema whose PersonalDataKeyword marks are not
// booleans, naming the first by its JSON pointer (RFC 6901): the guard
// honours only true, so a mark such as "yes" would be stored and silently
// ignored. It is checked when a schema is saved (an event type created or
// given a version), not when a stored one is compiled, so schemas saved
// before the rule keep working.
func (s *Schema) CheckMarks() error {
	if ptr, ok := badPersonalDataMark(s.raw, ""); !ok {
		return fmt.Errorf("%s at %s must be true or false", PersonalDataKeyword, ptr)
	}
	return nil
}

// badPersonalDataMark walks a decoded schema for a PersonalDataKeyword
// whose value is neither a boolean nor an object (an object there is a
// subschema of a property that happens to bear the name, under
// "properties"). It returns the JSON pointer (RFC 6901) of the first bad
// mark and false; the guard honours only true, so a mark such as "yes"
// would otherwise be stored and silently ignored.
func badPersonalDataMark(v any, ptr string) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			child := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if k == PersonalDataKeyword {
				switch v[k].(type) {
				case bool, map[string]any:
				default:
					return child, false
				}
			}
			if p, ok := badPersonalDataMark(v[k], child); !ok {
				return p, false
			}
		}
	case []any:
		for i, e := range v {
			if p, ok := badPersonalDataMark(e, fmt.Sprintf("%s/%d", ptr, i)); !ok {
				return p, false
			}
		}
	}
	return "", true
}

// Violation is one rule a value breaks: Pointer is the JSON pointer (RFC
// 6901) of the value in the request body ("/data/file_id"), Rule the JSON
// Schema keyword ("required", "type", "additionalProperties", …) or the
// guard's kind ("personal-data: email"), Message a sentence.
type Violation struct {
	Pointer string `json:"pointer"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// String is "pointer: rule (message)", e.g. "/data/file_id: required".
func (v Violation) String() string {
	if v.Message == "" {
		return v.Pointer + ": " + v.Rule
	}
	return v.Pointer + ": " + v.Rule + " (" + v.Message + ")"
}

var printer = message.NewPrinter(language.English)

// Validate checks data (JSON) against the schema and returns every
// violation, sorted by pointer; prefix is put before each pointer
// ("/data"). None means valid.
func (s *Schema) Validate(data []byte, prefix string) ([]Violation, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var out []Violation
	collect(ve, prefix, &out)
	slices.SortFunc(out, func(a, b Violation) int { return strings.Compare(a.Pointer+a.Rule, b.Pointer+b.Rule) })
	return slices.Compact(out), nil
}

func pointer(prefix string, loc []string, extra ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, t := range append(slices.Clone(loc), extra...) {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

func collect(e *jsonschema.ValidationError, prefix string, out *[]Violation) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, prefix, out)
		}
		return
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, Violation{Pointer: pointer(prefix, e.InstanceLocation, m), Rule: "required", Message: "missing property"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, Violation{Pointer: pointer(prefix, e.InstanceLocation, p), Rule: "additionalProperties", Message: "property not allowed by the schema"})
		}
	default:
		rule := "schema"
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			rule = kp[0]
		}
		*out = append(*out, Violation{Pointer: pointer(prefix, e.InstanceLocation), Rule: rule, Message: e.ErrorKind.LocalizedString(printer)})
	}
}

// ResourceIDRule is the rule a resource id's value follows
// (docs/contract.md, "Sequence numbers"). Its number is the counter's key
// as written, so one number written two ways (1, 1.0, 1e0) would count two
// resources: only one way is accepted.
const ResourceIDRule = "a resource id is a non-empty string, or an integer written in canonical form (no fraction, exponent, leading zeros or -0): 1 and \"1\" are one resource"

// ResourceValue reads the resource id the pointer names in data: a
// non-empty string, or an integer in canonical form (ResourceIDRule), as
// written; 1 and "1" give the same value. The error says why there is none
// (a number such as 1.0, 1e0 or 01 names ResourceIDRule).
func ResourceValue(data []byte, ptr string) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if ptr == "" || ptr[0] != '/' {
		return "", fmt.Errorf("resource_id %q is not a JSON pointer", ptr)
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("no value at %s", ptr)
		}
		if v, ok = m[tok]; !ok {
			return "", fmt.Errorf("no value at %s", ptr)
		}
	}
	switch x := v.(type) {
	case string:
		if x == "" {
			return "", fmt.Errorf("the value at %s is empty", ptr)
		}
		if strings.ContainsRune(x, utf8.RuneError) && loneSurrogateAt(data, ptr) {
			// Decoded to U+FFFD, "\ud800" and "\udc00" would share
			// "\ufffd"'s counter.
			return "", fmt.Errorf("the string at %s holds a lone surrogate escape (\\ud800 to \\udfff without its pair), which is no Unicode text (RFC 8259 §8.2, I-JSON RFC 7493 §2.1): %s", ptr, ResourceIDRule)
		}
		return x, nil
	case json.Number:
		if !canonicalInteger(x.String()) {
			return "", fmt.Errorf("the value at %s is %s: %s", ptr, x, ResourceIDRule)
		}
		return x.String(), nil
	}
	return "", fmt.Errorf("the value at %s must be a string or an integer: %s", ptr, ResourceIDRule)
}

// loneSurrogateAt reports whether the string the pointer ptr names in
// data (valid JSON, the pointer resolved already) is written with a \u
// escape of a UTF-16 surrogate not followed or preceded by its other half.
// Only asked for a string holding U+FFFD, which such an escape decodes to.
func loneSurrogateAt(data []byte, ptr string) bool {
	raw := json.RawMessage(data)
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return false
		}
		raw = m[tok]
	}
	hex4 := func(i int) rune {
		if i+4 > len(raw) {
			return -1
		}
		n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r := hex4(i + 1)
		i += 4
		switch {
		case 0xD800 <= r && r < 0xDC00:
			if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(i + 3); 0xDC00 <= lo && lo < 0xE000 {
					i += 6
					continue
				}
			}
			return true
		case 0xDC00 <= r && r < 0xE000:
			return true
		}
	}
	return false
}

// canonicalInteger reports whether n (a JSON number as written) is an
// integer in its one canonical form: an optional minus sign and digits
// without a leading zero; "0", never "-0".
func canonicalInteger(n string) bool {
	digits := strings.TrimPrefix(n, "-")
	if digits == "" || digits[0] == '0' && (len(digits) > 1 || len(digits) < len(n)) {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// ValidPointer reports whether p is a JSON pointer (RFC 6901) to a member
// of data: "/" followed by tokens, "~" only as "~0" or "~1".
func ValidPointer(p string) bool {
	if len(p) < 2 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}

// declaredTypes returns the JSON types a schema node declares with "type"
// (a string or an array of strings); nil when it declares none.
func declaredTypes(node map[string]any) []string {
	switch t := node["type"].(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// AcceptsObject checks that the schema's root can accept a JSON object:
// an event's data is always an object (docs/contract.md, "body"). A root
// "type" without "object" ({"type":"string"}) is refused; the error names
// the rule.
func (s *Schema) AcceptsObject() error {
	root, _ := s.raw.(map[string]any)
	if ts := declaredTypes(root); ts != nil && !slices.Contains(ts, "object") {
		return fmt.Errorf("data is always a JSON object: the schema's type %v does not accept one (use \"type\":\"object\")", ts)
	}
	return nil
}

// CheckResourceID checks a resource_id pointer (RFC 6901) against the
// schema, as far as the schema says (docs/contract.md, "Sequence
// numbers"): each step must go through an object (a property declared an
// array or a string has no member to step to) and be a property the
// schema declares, unless the
// object there is open (no "additionalProperties": false), and the
// property's declared type must allow a string or a number (not only an
// object, array, boolean or null). A schema that says nothing about the
// path passes. The error names the rule.
func (s *Schema) CheckResourceID(ptr string) error {
	if !ValidPointer(ptr) || ptr == "" {
		return fmt.Errorf("resource_id %q is not a JSON pointer", ptr)
	}
	node, _ := s.raw.(map[string]any)
	path := ""
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if ts := declaredTypes(node); path != "" && ts != nil && !slices.Contains(ts, "object") {
			// ResourceValue steps through objects only: no publish
			// could carry a resource id there.
			return fmt.Errorf("resource_id %s: the property %s has type %v, not an object, so it has no member %q (a resource id is reached through objects only)", ptr, path, ts, tok)
		}
		path += "/" + tok
		props, _ := node["properties"].(map[string]any)
		next, ok := props[tok].(map[string]any)
		if !ok {
			if props[tok] == false {
				return fmt.Errorf("resource_id %s: the schema forbids the property %s (false schema)", ptr, path)
			}
			if node["additionalProperties"] == false || node["unevaluatedProperties"] == false {
				return fmt.Errorf("resource_id %s: the schema is closed (additionalProperties: false) and does not declare the property %s", ptr, path)
			}
			return nil // open object: the schema does not say
		}
		node = next
	}
	if ts := declaredTypes(node); ts != nil && !slices.ContainsFunc(ts, func(t string) bool { return t == "string" || t == "number" || t == "integer" }) {
		return fmt.Errorf("resource_id %s: the property's type %v must allow a string or a number (a resource id is not an object or an array)", ptr, ts)
	}
	return nil
}
