package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEventTypeExampleNullIsNoExample: "example": null in a version (on
// create and on a new version) is taken as no example, as if the member
// were left out: the version is stored without one, and the type reads,
// and /openapi.json shows it, as one created without an example. An
// example that is not null must still be a JSON object.
func TestEventTypeExampleNullIsNoExample(t *testing.T) {
	w := newWorld(t, nil)
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"null.example","versions":[{"version":1,"schema":{"type":"object"},"example":null}]}`, 201, nil)
	w.mustCall(adminKey, "POST", "/v1/event-types/null.example/versions", `{"version":2,"schema":{"type":"object"},"example": null }`, 201, nil)
	var got struct {
		Versions []map[string]json.RawMessage `json:"versions"`
	}
	w.mustCall(adminKey, "GET", "/v1/event-types/null.example", "", 200, &got)
	if len(got.Versions) != 2 {
		t.Fatalf("versions %v; want 2", got.Versions)
	}
	for _, v := range got.Versions {
		if ex, ok := v["example"]; ok {
			t.Errorf("version %s has example %s; want none (null means no example)", v["version"], ex)
		}
	}
	_, doc := w.call(adminKey, "GET", "/openapi.json", "")
	var openapi struct {
		Webhooks map[string]json.RawMessage `json:"webhooks"`
	}
	if err := json.Unmarshal(doc, &openapi); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"null.example.v1", "null.example.v2"} {
		hook, ok := openapi.Webhooks[name]
		if !ok {
			t.Fatalf("/openapi.json has no webhook %s", name)
		}
		if strings.Contains(string(hook), `"example`) {
			t.Errorf("webhook %s shows an example: %s", name, hook)
		}
	}
	// A version's example never changes: PATCH of the type has no
	// example to clear (an unknown member, 422), and changes nothing.
	_, before := w.call(adminKey, "GET", "/v1/event-types/null.example", "")
	if st, raw := w.call(adminKey, "PATCH", "/v1/event-types/null.example", `{"example":null}`); st != 422 || !strings.Contains(string(raw), "example") {
		t.Errorf(`PATCH {"example":null}: %d %s; want 422 naming the unknown member`, st, raw)
	}
	if _, after := w.call(adminKey, "GET", "/v1/event-types/null.example", ""); string(after) != string(before) {
		t.Errorf("a refused PATCH changed the type:\n%s\n%s", before, after)
	}
	// Anything else that is not an object is still refused.
	st, raw := w.call(adminKey, "POST", "/v1/event-types/null.example/versions", `{"version":3,"schema":{"type":"object"},"example":"null"}`)
	if st != 422 || !strings.Contains(string(raw), "always a JSON object") {
		t.Errorf(`example "null" (a string): %d %s; want 422 naming the rule`, st, raw)
	}
}
