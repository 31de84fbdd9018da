package catalog

import (
	"strings"
	"testing"
)

// TestCheckResourceID: a resource_id must be possible under the schema
// when the schema says enough to tell.
func TestCheckResourceID(t *testing.T) {
	for _, c := range []struct {
		name, schema, ptr, want string // want "" = accepted
	}{
		{"declared string", `{"type":"object","properties":{"file_id":{"type":"string"}},"additionalProperties":false}`, "/file_id", ""},
		{"declared integer", `{"type":"object","properties":{"n":{"type":["integer","null"]}}}`, "/n", ""},
		{"open object, undeclared", `{"type":"object"}`, "/file_id", ""},
		{"nested", `{"type":"object","properties":{"file":{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}}}`, "/file/id", ""},
		{"closed without it", `{"type":"object","properties":{"file_id":{"type":"string"}},"additionalProperties":false}`, "/nope", "closed"},
		{"closed nested", `{"type":"object","properties":{"file":{"type":"object","additionalProperties":false}}}`, "/file/id", "closed"},
		{"object type", `{"type":"object","properties":{"file":{"type":"object"}}}`, "/file", "must allow a string or a number"},
		{"array type", `{"type":"object","properties":{"ids":{"type":"array"}}}`, "/ids", "must allow a string or a number"},
		{"false schema", `{"type":"object","properties":{"x":false}}`, "/x", "forbids"},
		// ResourceValue steps through objects only: a step into an array
		// or a string could never find a resource id.
		{"through an array", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"string"}}}}`, "/items/0", "the property /items has type [array], not an object"},
		{"through a string", `{"type":"object","properties":{"id":{"type":"string"}}}`, "/id/x", "the property /id has type [string], not an object"},
		{"through a nullable object", `{"type":"object","properties":{"file":{"type":["object","null"]}}}`, "/file/id", ""},
	} {
		sch, err := Compile([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = sch.CheckResourceID(c.ptr)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestAcceptsObject: event data is an object; a schema that cannot accept
// one is refused.
func TestAcceptsObject(t *testing.T) {
	for schema, ok := range map[string]bool{`{"type":"object"}`: true, `{}`: true, `{"type":["object","null"]}`: true,
		`{"type":"string"}`: false, `{"type":["array","integer"]}`: false} {
		sch, err := Compile([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.AcceptsObject(); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", schema, err, ok)
		}
	}
}

// TestResourceValueOneSpellingPerNumber: a resource id's number is the
// sequence counter's key as written, so only the canonical spelling of an
// integer is accepted (ResourceIDRule); 1 and "1" give one value.
func TestResourceValueOneSpellingPerNumber(t *testing.T) {
	for data, want := range map[string]string{ // want "" = refused
		`{"a":1}`: "1", `{"a":"1"}`: "1", `{"a":0}`: "0", `{"a":-7}`: "-7", `{"a":"1.0"}`: "1.0",
		`{"a":12345678901234567890123}`: "12345678901234567890123",
		`{"a":1.0}`:                     "", `{"a":1e0}`: "", `{"a":1.00}`: "", `{"a":10e-1}`: "", `{"a":1E0}`: "", `{"a":-0}`: "",
		`{"a":0.5}`: "", `{"a":-0.0}`: "", `{"a":true}`: "", `{"a":""}`: "",
	} {
		got, err := ResourceValue([]byte(data), "/a")
		switch {
		case want != "" && (err != nil || got != want):
			t.Errorf("%s: %q, %v; want %q", data, got, err, want)
		case want == "" && err == nil:
			t.Errorf("%s: accepted as %q; want refused", data, got)
		case want == "" && strings.Contains(data, `"a":`) && !strings.Contains(data, `""`) && !strings.Contains(err.Error(), ResourceIDRule):
			t.Errorf("%s: %v does not name the rule", data, err)
		}
	}
}

// TestResourceValueLoneSurrogate: a string written with a lone surrogate
// escape decodes to U+FFFD, so "\ud800", "\udc00" and "\ufffd" would
// share one counter: it is refused naming the rule; a pair, U+FFFD itself
// and an escaped backslash before "ud800" are text.
func TestResourceValueLoneSurrogate(t *testing.T) {
	for data, want := range map[string]string{ // want "" = refused
		`{"a":"\ud800"}`: "", `{"a":"\udc00"}`: "", `{"a":"x\ud800y"}`: "", `{"a":"\ud800\u0041"}`: "",
		`{"a":"\udc00\ud800"}`: "", `{"a":"\ufffd\ud83d"}`: "", `{"b":{"a":"\ud800"}}`: "",
		`{"a":"\ud83d\ude00"}`: "\U0001F600", `{"a":"\ufffd"}`: "\ufffd", `{"a":"` + "\ufffd" + `"}`: "\ufffd",
		`{"a":"\\ud800\ufffd"}`: `\ud800` + "\ufffd", `{"a":"\ud83d\ude00\ufffd"}`: "\U0001F600\ufffd",
	} {
		ptr := "/a"
		if strings.HasPrefix(data, `{"b"`) {
			ptr = "/b/a"
		}
		got, err := ResourceValue([]byte(data), ptr)
		switch {
		case want != "" && (err != nil || got != want):
			t.Errorf("%s: %q, %v; want %q", data, got, err, want)
		case want == "" && err == nil:
			t.Errorf("%s: accepted as %q; want refused", data, got)
		case want == "" && (!strings.Contains(err.Error(), "lone surrogate") || !strings.Contains(err.Error(), "RFC 8259")):
			t.Errorf("%s: %v does not name the rule", data, err)
		}
	}
}
