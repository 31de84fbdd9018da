package api_test

import (
	"strings"
	"testing"
)

// TestBlankNamesRefused: a name of a source or an API key made only of
// spaces (ASCII or Unicode: U+00A0, U+3000) is refused with 422 naming the
// rule and the field, on create and on PATCH, and nothing changes; a name
// with spaces around a visible character is accepted as it is. (Event type
// names are refused with spaces by their own rule; descriptions may be
// empty or blank on purpose.)
func TestBlankNamesRefused(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/sources", "")
	_, keysBefore := w.call(adminKey, "GET", "/v1/api-keys", "")
	// Blank: spaces, or only invisible format characters (a zero-width
	// space, a byte-order mark); and names with a C1 control (U+009B is
	// the terminals' escape-sequence introducer) or a bidirectional
	// override, which a list or a terminal would show as something else.
	for _, name := range []string{`""`, `" "`, `"   "`, `"\u00a0"`, `" \u3000 "`, `"\u0085"`, `"\u200b"`, `"\ufeff"`, `" \u2060 "`, `"a\u009bb"`, `"a\u0085b"`, `"\u202egnp.exe"`, `"inv\u2066oice"`} {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/sources", `{"name":` + name + `,"scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.3/in"}`},
			{"PATCH", "/v1/sources/" + w.srcID, `{"name":` + name + `}`},
			{"POST", "/v1/api-keys", `{"name":` + name + `,"role":"admin"}`},
		} {
			st, got := w.call(adminKey, c.method, c.path, c.body)
			if st != 422 || !strings.Contains(string(got), `"location":"body.name"`) || (name != `""` && !strings.Contains(string(got), "not blank")) {
				t.Errorf("%s %s name %s = %d %s; want 422 at body.name naming the not-blank rule", c.method, c.path, name, st, got)
			}
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); string(after) != string(before) {
		t.Errorf("refused names changed the sources:\n%s\nwant\n%s", after, before)
	}
	if _, after := w.call(adminKey, "GET", "/v1/api-keys", ""); string(after) != string(keysBefore) {
		t.Errorf("refused names changed the keys:\n%s\nwant\n%s", after, keysBefore)
	}
	var src struct {
		Name string `json:"name"`
	}
	w.mustCall(adminKey, "PATCH", "/v1/sources/"+w.srcID, `{"name":" stripe live "}`, 200, &src)
	if src.Name != " stripe live " {
		t.Errorf("name with spaces around it stored as %q", src.Name)
	}
	w.mustCall(adminKey, "PATCH", "/v1/sources/"+w.srcID, `{"name":"Zahlungen – Café ✓ 支払い"}`, 200, &src)
	if src.Name != "Zahlungen – Café ✓ 支払い" {
		t.Errorf("a name of letters and symbols stored as %q", src.Name)
	}
}
