package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestHoistDataSchema: a data schema that names parts of itself ($defs,
// definitions, at any depth) or refers to itself is moved to
// components.schemas with those parts, under names OpenAPI allows and no
// other component has; every reference into it is rewritten to the same
// place; and, embedded in a document, it accepts and refuses the same
// values as the schema alone.
func TestHoistDataSchema(t *testing.T) {
	const schema = `{"$id":"https://example.com/inv.json","type":"object","required":["amount"],
		"$defs":{
			"money":{"type":"object","required":["value"],"properties":{"value":{"type":"integer","minimum":0},"currency":{"$ref":"#/$defs/money/$defs/code"}},
				"$defs":{"code":{"type":"string","pattern":"^[A-Z]{3}$"}}},
			"line item":{"type":"object","properties":{"price":{"$ref":"https://example.com/inv.json#/$defs/money"},"sub":{"$ref":"#/$defs/line%20item"}}},
			"line_item":{"type":"string"},
			"a/b":{"type":"boolean"}},
		"definitions":{"old":{"type":"null"}},
		"properties":{
			"amount":{"$ref":"#/$defs/money"},
			"value_only":{"$ref":"#/$defs/money/properties/value"},
			"items":{"type":"array","items":{"$ref":"#/$defs/line%20item"}},
			"other":{"$ref":"#/$defs/line_item"},
			"flag":{"$ref":"#/$defs/a~1b"},
			"legacy":{"$ref":"#/definitions/old"},
			"again":{"$ref":"#"},
			"named":{"$ref":"#money"},
			"tag":{"const":{"$ref":"#/$defs/money"}}}}`
	// A component already named as the first def would be.
	original, doc := hoistForTest(t, schema, "inv.v1", map[string]any{"inv.v1.money": map[string]any{"type": "string"}})
	embedded := doc["x"]

	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{"inv.v1", "inv.v1.money_2", "inv.v1.money_2.code", "inv.v1.line_item", "inv.v1.line_item_2", "inv.v1.a_b", "inv.v1.old"} {
		if schemas[name] == nil {
			t.Errorf("no component %q", name)
		}
	}
	if got, _ := json.Marshal(embedded); string(got) != `{"$ref":"#/components/schemas/inv.v1"}` {
		t.Errorf("embedded: %s", got)
	}
	raw, _ := json.Marshal(doc)
	for _, want := range []string{
		`"amount":{"$ref":"#/components/schemas/inv.v1.money_2"}`,
		`"value_only":{"$ref":"#/components/schemas/inv.v1.money_2/properties/value"}`,
		`"currency":{"$ref":"#/components/schemas/inv.v1.money_2.code"}`,
		`"again":{"$ref":"#/components/schemas/inv.v1"}`,
		`"named":{"$ref":"#money"}`,                // an anchor: left
		`"tag":{"const":{"$ref":"#/$defs/money"}}`, // a value: left
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("document lacks %s:\n%s", want, raw)
		}
	}
	if strings.Contains(string(raw), `"$defs":`) || strings.Contains(string(raw), `"definitions":`) {
		t.Errorf("a $defs or definitions is left:\n%s", raw)
	}

	// The same values pass and fail, the schema alone and embedded (the
	// anchor "#money" names nothing in either: the property is left out).
	delete(original["properties"].(map[string]any), "named")
	delete(schemas["inv.v1"].(map[string]any)["properties"].(map[string]any), "named")
	sameVerdicts(t, original, doc,
		`{"amount":{"value":1,"currency":"EUR"}}`,
		`{"amount":{"value":1,"currency":"eur"}}`,
		`{"amount":{"value":-1}}`,
		`{"amount":{"value":1},"value_only":-2}`,
		`{"amount":{"value":1},"items":[{"price":{"value":2},"sub":{"price":{"value":"x"}}}]}`,
		`{"amount":{"value":1},"items":[{"price":{"value":2},"sub":{"price":{"value":3}}}]}`,
		`{"amount":{"value":1},"other":"s","flag":true,"legacy":null}`,
		`{"amount":{"value":1},"flag":"no"}`,
		`{"amount":{"value":1},"legacy":1}`,
		`{"amount":{"value":1},"again":{"amount":{"value":-5}}}`,
		`{"amount":{"value":1},"again":{"amount":{"value":5}}}`,
		`{}`,
	)
}

// TestHoistDataSchemaLeavesPlainSchemas: a data schema without $defs,
// definitions or references into itself stays where it is, unchanged.
func TestHoistDataSchemaLeavesPlainSchemas(t *testing.T) {
	const schema = `{"type":"object","properties":{"id":{"type":"string"},"ext":{"$ref":"https://example.com/other.json"},"tag":{"const":{"$ref":"#"}}}}`
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{}
	comps := newSchemaComponents(doc)
	got, _ := json.Marshal(hoistDataSchema(m, "plain.v1", "", comps))
	comps.addTo(doc)
	var want any
	_ = json.Unmarshal([]byte(schema), &want)
	if w, _ := json.Marshal(want); string(got) != string(w) {
		t.Errorf("got %s, want %s", got, w)
	}
	if len(doc) != 0 {
		t.Errorf("document changed: %v", doc)
	}
}

// hoistForTest reads schema twice: as given (original), and hoisted as
// webhook name's data schema (its $id taken out, as webhookItem does)
// into doc, whose components.schemas start with existing, under "x".
func hoistForTest(t *testing.T, schema, name string, existing map[string]any) (original, doc map[string]any) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &original); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	id, _ := m["$id"].(string)
	delete(m, "$id")
	doc = map[string]any{}
	if existing != nil {
		doc["components"] = map[string]any{"schemas": existing}
	}
	comps := newSchemaComponents(doc)
	doc["x"] = hoistDataSchema(m, name, id, comps)
	comps.addTo(doc)
	return original, doc
}

// sameVerdicts checks that each of values (JSON) is valid against the
// schema original alone exactly when it is against doc's "x".
func sameVerdicts(t *testing.T, original, doc map[string]any, values ...string) {
	t.Helper()
	alone := compileAt(t, original, "")
	inDoc := compileAt(t, doc, "#/x")
	for _, v := range values {
		val, err := jsonschema.UnmarshalJSON(strings.NewReader(v))
		if err != nil {
			t.Fatal(err)
		}
		if a, b := alone.Validate(val) == nil, inDoc.Validate(val) == nil; a != b {
			t.Errorf("%s: valid alone %v, embedded %v", v, a, b)
		}
	}
}

func compileAt(t *testing.T, doc any, frag string) *jsonschema.Schema {
	t.Helper()
	raw, _ := json.Marshal(doc)
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("herald:///doc.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("herald:///doc.json" + frag)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHoistDataSchemaRelativeIDRefsAndAnchors: a reference into the
// schema written relative to its $id ("inv.json#/$defs/money",
// "./inv.json") or by a plain-name anchor the schema defines ($anchor, or
// a $dynamicAnchor named by a $ref) is rewritten like "#/$defs/money":
// the document keeps no $id, so "inv.json#…" would name a file beside the
// document, and every $anchor it keeps is one name for the whole document
// (two versions with the same anchor would clash). openapi-typescript
// (7.x) stopped on either ("Can't resolve $ref", "Error parsing $ref:
// #money"), generating no types at all.
func TestHoistDataSchemaRelativeIDRefsAndAnchors(t *testing.T) {
	const schema = `{"$id":"https://example.com/s/inv.json","type":"object",
		"$defs":{"money":{"$anchor":"money","type":"integer","minimum":0},"code":{"type":"string","maxLength":3}},
		"properties":{
			"a":{"$ref":"inv.json#/$defs/code"},
			"b":{"$ref":"./inv.json#/$defs/money"},
			"c":{"$ref":"#money"},
			"d":{"$ref":"inv.json#money"},
			"e":{"$ref":"inv.json"},
			"f":{"$anchor":"here","type":"boolean"},
			"g":{"$ref":"#here"},
			"h":{"$ref":"other.json#/$defs/code"},
			"i":{"$ref":"#nowhere"}}}`
	original, doc := hoistForTest(t, schema, "inv.v1", nil)
	raw, _ := json.Marshal(doc)
	for _, want := range []string{
		`"a":{"$ref":"#/components/schemas/inv.v1.code"}`,
		`"b":{"$ref":"#/components/schemas/inv.v1.money"}`,
		`"c":{"$ref":"#/components/schemas/inv.v1.money"}`,
		`"d":{"$ref":"#/components/schemas/inv.v1.money"}`,
		`"e":{"$ref":"#/components/schemas/inv.v1"}`,
		`"g":{"$ref":"#/components/schemas/inv.v1/properties/f"}`,
		`"h":{"$ref":"other.json#/$defs/code"}`, // another resource: left
		`"i":{"$ref":"#nowhere"}`,               // no such anchor: left
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("document lacks %s:\n%s", want, raw)
		}
	}
	if strings.Contains(string(raw), `"$anchor"`) {
		t.Errorf("an $anchor is left:\n%s", raw)
	}

	// The same values pass and fail, alone and embedded (without the
	// references to nothing).
	for _, p := range []string{"h", "i"} {
		delete(original["properties"].(map[string]any), p)
		delete(doc["components"].(map[string]any)["schemas"].(map[string]any)["inv.v1"].(map[string]any)["properties"].(map[string]any), p)
	}
	sameVerdicts(t, original, doc,
		`{"a":"abc","b":1,"c":2,"d":3,"g":true}`,
		`{"a":"abcd"}`, `{"b":-1}`, `{"c":-1}`, `{"d":-1}`, `{"g":1}`,
		`{"e":{"a":"abcd"}}`, `{"e":{"a":"abc"}}`,
	)
}

// TestHoistDataSchemaEmbeddedResources: a subschema with its own $id is a
// resource of its own, against which the references inside it resolve:
// "#/properties/z" inside it names its own property z, not the data
// schema's, and "b.json" names a $defs entry whose $id is b.json. Such
// references were rewritten to the data schema's root (a place that
// does not exist, or another) or left pointing at a file beside the
// document; now they go to the same place as when Herald validates, and
// no $id is left.
func TestHoistDataSchemaEmbeddedResources(t *testing.T) {
	const schema = `{"$id":"https://example.com/a.json","type":"object",
		"$defs":{"b":{"$id":"b.json","type":"string","maxLength":2,"$defs":{"n":{"$anchor":"n","type":"integer"}}}},
		"properties":{
			"x":{"$ref":"b.json"},
			"w":{"$ref":"b.json#n"},
			"v":{"$ref":"https://example.com/b.json#/$defs/n"},
			"c":{"$id":"https://example.com/c.json","type":"object","properties":{"y":{"$ref":"#/properties/z"},"z":{"type":"integer"},"top":{"$ref":"a.json#/properties/x"}}}}}`
	original, doc := hoistForTest(t, schema, "a.v1", nil)
	raw, _ := json.Marshal(doc)
	for _, want := range []string{
		`"x":{"$ref":"#/components/schemas/a.v1.b"}`,
		`"w":{"$ref":"#/components/schemas/a.v1.b.n"}`,
		`"v":{"$ref":"#/components/schemas/a.v1.b.n"}`,
		`"y":{"$ref":"#/components/schemas/a.v1/properties/c/properties/z"}`,
		`"top":{"$ref":"#/components/schemas/a.v1/properties/x"}`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("document lacks %s:\n%s", want, raw)
		}
	}
	if strings.Contains(string(raw), `"$id"`) || strings.Contains(string(raw), `"$anchor"`) {
		t.Errorf("an $id or $anchor is left:\n%s", raw)
	}
	sameVerdicts(t, original, doc,
		`{"x":"ab","w":1,"v":2,"c":{"y":1,"z":2,"top":"ab"}}`,
		`{"x":"abc"}`, `{"w":"s"}`, `{"v":"s"}`, `{"c":{"y":"s"}}`, `{"c":{"top":"abc"}}`,
	)
}
