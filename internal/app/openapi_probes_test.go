package app_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestProbesAndContractInOpenAPI: GET /healthz, GET /readyz and GET
// /contract are in /openapi.json like every other route (operation ids
// get-health, get-readiness, get-contract; public: no security
// requirement, no API key), and their real answers, taken without a key,
// are what the document declares (an OpenAPI 3.1 validator on the
// answers; the document itself stays valid OpenAPI 3.1).
func TestProbesAndContractInOpenAPI(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"invoice.paid","resource_id":"/invoice_id","versions":[{"version":1,"schema":{"type":"object","properties":{"invoice_id":{"type":"string"}}}}]}`, 201)
	raw := h.mustCall("GET", "/openapi.json", "", 200)
	v := openAPIValidator(t, raw)
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("/openapi.json is not valid OpenAPI 3.1: %s: %s", e.Message, e.Reason)
		}
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string                 `json:"operationId"`
			Security    *[]map[string][]string `json:"security"`
			Responses   map[string]any         `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]struct {
		id        string
		responses []string
	}{
		"/healthz":  {"get-health", []string{"200"}},
		"/readyz":   {"get-readiness", []string{"200", "503"}},
		"/contract": {"get-contract", []string{"200", "503"}},
	} {
		op, ok := doc.Paths[path]["get"]
		if !ok {
			t.Errorf("GET %s is not in /openapi.json", path)
			continue
		}
		if op.OperationID != want.id {
			t.Errorf("GET %s: operation id %q, want %q", path, op.OperationID, want.id)
		}
		if op.Security != nil && len(*op.Security) > 0 {
			t.Errorf("GET %s: security %v, want none (a public route)", path, *op.Security)
		}
		for _, code := range want.responses {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("GET %s: no %s response declared", path, code)
			}
		}
		req, err := http.NewRequest("GET", h.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("GET %s without a key: %d, want 200", path, resp.StatusCode)
		}
		vreq, _ := http.NewRequest("GET", path, nil)
		if ok, verrs := v.ValidateHttpResponse(vreq, resp); !ok {
			for _, e := range verrs {
				t.Errorf("GET %s: the answer is not as /openapi.json declares: %s: %s", path, e.Message, e.Reason)
			}
		}
		resp.Body.Close()
	}
}
