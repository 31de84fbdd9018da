package inbound

import (
	"net/http/httptest"
	"testing"
)

// TestAnswersNotHTMLEscaped: the gateway's JSON answers and problems write
// &, < and > as they are (as the API's answers and the CLI do), not as
// \u0026, \u003c, \u003e (encoding/json's default, meant for HTML pages):
// a Slack challenge or a detail reads as it was.
func TestAnswersNotHTMLEscaped(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, map[string]string{"challenge": "a&b<c>"})
	if got := rec.Body.String(); got != `{"challenge":"a&b<c>"}`+"\n" {
		t.Errorf("writeJSON wrote %q; want the challenge unescaped", got)
	}
	rec = httptest.NewRecorder()
	writeProblem(rec, 400, "a & <b>")
	if got, want := rec.Body.String(), `{"type":"about:blank","title":"Bad Request","status":400,"detail":"a & <b>"}`+"\n"; got != want {
		t.Errorf("writeProblem wrote %q; want %q (the API's shape, the detail unescaped)", got, want)
	}
}
