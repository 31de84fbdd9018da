package catalog

import (
	"strings"
	"testing"
)

// TestCheckRefCycles: a schema in which a subschema applies itself to the
// same value, through local $refs and in-place applicators (allOf, anyOf,
// oneOf, not, if/then/else, dependentSchemas), is refused naming the
// subschema: the validator meets the cycle only when data reaches it and
// then refuses the data, so every event carrying that member was refused
// (422, "causing reference cycle") for good, a version's schema never
// changing. Recursive schemas whose references move into the value
// (properties, items…) are accepted, and so are objects that only look
// like schemas inside const, enum, default or examples.
func TestCheckRefCycles(t *testing.T) {
	for schema, at := range map[string]string{
		`{"type":"object","properties":{"a":{"$ref":"#/properties/a"}}}`: "/properties/a",
		`{"$ref":"#"}`: "(the root)",
		`{"type":"object","$defs":{"x":{"$ref":"#/$defs/y"},"y":{"allOf":[{"$ref":"#/$defs/x"}]}},"$ref":"#/$defs/x"}`: "/$defs/x",
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"not":{"$ref":"#/properties/a"}}]}}}`:         "/properties/a",
		`{"type":"object","properties":{"a~b":{"if":{"$ref":"#/properties/a~0b"}}}}`:                                   "/properties/a~0b",
		`{"type":"object","properties":{"a b":{"oneOf":[{"$ref":"#/properties/a%20b"}]}}}`:                             "/properties/a b",
	} {
		sch, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		err = sch.CheckRefCycles()
		if err == nil || !strings.Contains(err.Error(), "reference cycle") || !strings.Contains(err.Error(), at) {
			t.Errorf("%s: %v; want a reference cycle at %s", schema, err, at)
		}
	}
	for _, schema := range []string{
		`{"type":"object"}`,
		`{"type":"object","$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
		`{"type":"object","properties":{"a":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`,
		`{"type":"object","const":{"$ref":"#"},"default":{"allOf":[{"$ref":"#"}]}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","definitions":{"x":{"id":"http://x.example/x","type":"object","properties":{"b":{"$ref":"#"}}}},"properties":{"a":{"$ref":"http://x.example/x"}}}`,
		`{"$id":"https://example.com/doc.json","type":"object","$defs":{"user":{"type":"object","properties":{"id":{"type":"string"},"manager":{"$ref":"#/$defs/user"}}}},"properties":{"owner":{"$ref":"#/$defs/user"},"editor":{"$ref":"https://example.com/doc.json#/$defs/user"},"parent":{"$ref":"#"},"tag":{"const":{"$ref":"#/not/a/ref"}}}}`,
		`{"type":"object","$defs":{"x":{"$id":"https://x.example/x","$ref":"#/$defs/y","$defs":{"y":{"type":"string"}}}},"properties":{"a":{"$ref":"https://x.example/x"}}}`,
	} {
		sch, err := Compile([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		if err := sch.CheckRefCycles(); err != nil {
			t.Errorf("%s: %v; want it accepted", schema, err)
		}
	}
}
