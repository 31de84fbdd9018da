package api_test

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingReader counts the bytes a handler read from a request body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestBodiesReadOnlyAfterRoutingAndAuthentication (issue 13 point 12): a
// body is not read for an unknown path, a method no route takes, or a
// missing key; a deeply nested body is refused after its first bytes, not
// after reading 1 MiB.
func TestBodiesReadOnlyAfterRoutingAndAuthentication(t *testing.T) {
	w := newWorld(t, nil)
	big := strings.Repeat("[", 1<<20)
	for _, c := range []struct {
		name, key, method, path string
		want                    int
		maxRead                 int
	}{
		{"unknown path", "", "POST", "/nowhere", 404, 0},
		{"unknown path with a key", adminKey, "POST", "/v1/nowhere", 404, 0},
		{"unknown /v1/ path without a key", "", "POST", "/v1/nowhere", 401, 0},
		{"route without a key", "", "POST", "/v1/events", 401, 0},
		{"method no route takes", adminKey, "PATCH", "/v1/events", 404, 0},
		{"nesting bomb on a route", adminKey, "POST", "/v1/events", 400, 64 << 10},
	} {
		body := &countingReader{r: strings.NewReader(big)}
		req := httptest.NewRequest(c.method, c.path, body)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		w.srv.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d %s; want %d", c.name, rec.Code, rec.Body.String(), c.want)
		}
		if body.n > c.maxRead {
			t.Errorf("%s: read %d bytes of the body; want at most %d", c.name, body.n, c.maxRead)
		}
	}
	// A nesting bomb's problem names the rule.
	req := httptest.NewRequest("POST", "/v1/events", bytes.NewReader([]byte(big)))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	rec := httptest.NewRecorder()
	w.srv.ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), "nested deeper than 64") {
		t.Errorf("nesting bomb: %s; want the rule named", rec.Body.String())
	}
}
