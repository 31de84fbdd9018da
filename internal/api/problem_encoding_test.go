package api

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWriteProblemNotHTMLEscaped: the mux's problems (unknown routes,
// refused methods, bodies refused before huma) write &, < and > as they
// are, as huma's answers do, not as \u0026, \u003c, \u003e.
func TestWriteProblemNotHTMLEscaped(t *testing.T) {
	rec := httptest.NewRecorder()
	writeProblem(rec, 404, "no route GET /v1/a&b<c>")
	if got := rec.Body.String(); !strings.Contains(got, `"detail":"no route GET /v1/a&b<c>"`) {
		t.Errorf("writeProblem wrote %q; want the detail unescaped", got)
	}
}
