package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBodylessOperationsRefuseABody: an operation that takes no request
// body (pause, resume, enable, test, replay or redeliver one delivery)
// refused a malformed body (400) but read a well-formed one with members
// as no body and acted: {"state":"dead"} or {"event_type":"x"} sent to
// POST /v1/deliveries/{id}/replay or /test replayed or tested as if the
// members meant something, where every other operation answers an
// unknown member with 422 and changes nothing. Such a body is now 422 at
// body, naming the rule; none, or {}, is still taken. The operations are
// read from /openapi.json, so one added later is held to the rule too.
func TestBodylessOperationsRefuseABody(t *testing.T) {
	w := newWorld(t, nil)
	st, raw := w.call("", "GET", "/openapi.json", "")
	if st != 200 {
		t.Fatalf("openapi.json: %d", st)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"/v1/endpoints/": w.epA, "/v1/deliveries/": w.dlvA}
	seen := 0
	for path, methods := range doc.Paths {
		for method, opRaw := range methods {
			if method != "post" && method != "patch" && method != "put" {
				continue
			}
			var op struct {
				RequestBody json.RawMessage `json:"requestBody"`
			}
			if err := json.Unmarshal(opRaw, &op); err != nil {
				t.Fatal(err)
			}
			if op.RequestBody != nil {
				continue
			}
			var concrete, read string
			for prefix, id := range ids {
				if strings.HasPrefix(path, prefix+"{id}") {
					concrete = strings.Replace(path, "{id}", id, 1)
					read = prefix + id
				}
			}
			if concrete == "" {
				t.Errorf("%s %s takes no body: give this test an id for it", method, path)
				continue
			}
			seen++
			m := strings.ToUpper(method)
			_, before := w.call(adminKey, "GET", read, "")
			for _, body := range []string{`{"state":"dead"}`, `{"x":1}`, `[]`, `"x"`, `null`} {
				st, raw := w.call(adminKey, m, concrete, body)
				wantOneRefusal(t, m+" "+path+" "+body, st, raw, "body", "takes no request body")
			}
			if _, after := w.call(adminKey, "GET", read, ""); string(after) != string(before) {
				t.Errorf("%s %s with a refused body changed %s:\n%s\nwant\n%s", m, path, read, after, before)
			}
			for _, body := range []string{"", "{}", " { } "} {
				if st, raw := w.call(adminKey, m, concrete, body); st >= 400 {
					t.Errorf("%s %s with body %q: %d %s, want it taken", m, path, body, st, raw)
				}
			}
		}
	}
	if seen < 6 {
		t.Fatalf("operations without a body checked: %d, want at least 6 (pause, resume, enable, test, replay, redeliver)", seen)
	}
}
