package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestEventTypesCreateReadsSchemaFile: "herald event-types create" sends
// the schema and example files as JSON, with the resource pointer.
func TestEventTypesCreateReadsSchemaFile(t *testing.T) {
	dir := t.TempDir()
	schema, example := filepath.Join(dir, "v1.json"), filepath.Join(dir, "ex.json")
	os.WriteFile(schema, []byte(`{"type":"object","required":["file_id"]}`), 0o600)
	os.WriteFile(example, []byte(`{"file_id":"f_1"}`), 0o600)
	srv, last := fakeAPI(t, 201, "application/json", `{"name":"file.updated"}`)
	if _, _, err := execHerald(t, "", "event-types", "create", "file.updated", "--server", srv.URL, "--api-key", "k",
		"--schema", schema, "--example", example, "--resource-id", "/file_id", "--description", "a file changed"); err != nil {
		t.Fatal(err)
	}
	r := last()
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "file.updated", "description": "a file changed", "resource_id": "/file_id",
		"versions": []any{map[string]any{"version": float64(1), "schema": map[string]any{"type": "object", "required": []any{"file_id"}},
			"example": map[string]any{"file_id": "f_1"}}}}
	if r.method != "POST" || r.path != "/v1/event-types" || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %s %s", r.method, r.path, r.body)
	}
}

// TestEventTypesVersionAndDeprecate: add-version and deprecate reach
// their routes; a bad schema file is refused before any request.
func TestEventTypesVersionAndDeprecate(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "v2.json")
	os.WriteFile(schema, []byte(`{"type":"object"}`), 0o600)
	srv, last := fakeAPI(t, 201, "application/json", `{}`)
	if _, _, err := execHerald(t, "", "event-types", "add-version", "file.updated", "2", "--server", srv.URL, "--api-key", "k", "--schema", schema); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.method != "POST" || r.path != "/v1/event-types/file.updated/versions" || string(r.body) != `{"schema":{"type":"object"},"version":2}` {
		t.Fatalf("%s %s %s", r.method, r.path, r.body)
	}
	srv2, last2 := fakeAPI(t, 200, "application/json", `{}`)
	if _, _, err := execHerald(t, "", "event-types", "deprecate", "file.updated", "1", "--server", srv2.URL, "--api-key", "k"); err != nil {
		t.Fatal(err)
	}
	if r := last2(); r.method != "PATCH" || r.path != "/v1/event-types/file.updated" || string(r.body) != `{"deprecate":[1]}` {
		t.Fatalf("%s %s %s", r.method, r.path, r.body)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{not json`), 0o600)
	if _, _, err := execHerald(t, "", "event-types", "add-version", "file.updated", "3", "--server", srv.URL, "--api-key", "k", "--schema", bad); err == nil {
		t.Fatal("a schema file that is not JSON was sent")
	}
}
