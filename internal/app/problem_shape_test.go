package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// problemMembers returns the member names of a JSON object in the order
// they were written, and the object decoded.
func problemMembers(t *testing.T, raw []byte) ([]string, map[string]any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not a JSON object (%v)", raw, err)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		names = append(names, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return names, m
}

// TestGatewayProblemsHaveTheAPIsShape: the inbound gateway's problems
// (404 unknown source, 405 not a POST, 401 bad signature, 413 body too
// large, 400 bad gzip) are RFC 9457 problems of the shape the API's own
// answers have (its 401 for a request without a key): type (about:blank),
// title (the status's text), status and detail, in that order, with
// Content-Type application/problem+json; the details are the gateway's.
func TestGatewayProblemsHaveTheAPIsShape(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"s3cr3t-github-provider"}, "destination_url": "https://example.com/in",
		"max_body_bytes": 1024})
	do := func(method, path string, hdr http.Header, body []byte) (int, string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, h.base+path, bytes.NewReader(body))
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), raw
	}
	// The API's shape: its answer to a request without a key.
	st, ct, raw := do("GET", "/v1/endpoints", nil, nil)
	apiNames, apiProblem := problemMembers(t, raw)
	if st != 401 || ct != "application/problem+json" || !slices.Equal(apiNames, []string{"type", "title", "status", "detail"}) || apiProblem["type"] != "about:blank" {
		t.Fatalf("the API's 401: %d %s %s; want a problem with type about:blank, title, status, detail", st, ct, raw)
	}
	gh := http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"push"}, "X-Github-Delivery": {"d-1"}}
	for _, c := range []struct {
		name, method, path string
		hdr                http.Header
		body               []byte
		status             int
		detail             string
	}{
		{"unknown source", "POST", "/in/src_nope", gh, []byte(`{}`), 404, "no such source"},
		{"not a POST", "GET", src.IngestPath, nil, nil, 405, "inbound webhooks are POSTed"},
		{"bad signature", "POST", src.IngestPath, http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"push"}, "X-Github-Delivery": {"d-1"}, "X-Hub-Signature-256": {"sha256=00"}}, []byte(`{}`), 401, "invalid signature"},
		{"too large", "POST", src.IngestPath, gh, []byte(`{"a":"` + strings.Repeat("x", 2048) + `"}`), 413, "body larger than 1024 bytes"},
		{"bad gzip", "POST", src.IngestPath, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, []byte("not gzip"), 400, "the body is not valid gzip"},
	} {
		st, ct, raw := do(c.method, c.path, c.hdr, c.body)
		names, p := problemMembers(t, raw)
		if st != c.status || ct != "application/problem+json" {
			t.Errorf("%s: %d %s %s; want %d application/problem+json", c.name, st, ct, raw, c.status)
			continue
		}
		if !slices.Equal(names, apiNames) {
			t.Errorf("%s: members %v (%s); want the API's %v", c.name, names, raw, apiNames)
		}
		if p["type"] != "about:blank" || p["title"] != http.StatusText(c.status) || p["status"] != float64(c.status) || p["detail"] != c.detail {
			t.Errorf("%s: %s; want type about:blank, title %q, status %d, detail %q", c.name, raw, http.StatusText(c.status), c.status, c.detail)
		}
	}
}
