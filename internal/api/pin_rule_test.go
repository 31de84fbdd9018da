package api_test

import "testing"

// TestPinNotIntegerNamesItsRule: an endpoint's pin (a value of the map
// versions, located at body.versions.<event type>, dots included) that is
// no integer (1.5, "1") answers, on a create and on a PATCH, one error at
// the pin naming Herald's rule, as every other integer field does, not
// huma's generic "expected integer"; nothing is stored.
func TestPinNotIntegerNamesItsRule(t *testing.T) {
	w := newWorld(t, nil)
	for _, v := range []string{`1.5`, `"1"`, `true`} {
		for _, req := range []struct{ method, path, body, get string }{
			{"POST", "/v1/endpoints", `{"tenant":"acme","url":"https://pins.example/hook","versions":{"file.updated":` + v + `}}`, "/v1/endpoints?tenant=acme"},
			{"PATCH", "/v1/endpoints/" + w.epA, `{"versions":{"file.updated":` + v + `}}`, "/v1/endpoints/" + w.epA},
		} {
			_, before := w.call(adminKey, "GET", req.get, "")
			st, raw := w.call(adminKey, req.method, req.path, req.body)
			wantOneRefusal(t, req.method+" "+req.body, st, raw, "body.versions.file.updated", "a pin (versions.<event type>) must be an integer version number from 1")
			if _, after := w.call(adminKey, "GET", req.get, ""); string(after) != string(before) {
				t.Errorf("%s %s changed %s", req.method, req.body, req.get)
			}
		}
	}
}
