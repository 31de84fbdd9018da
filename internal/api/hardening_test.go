package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/store"
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
		{"method no route takes", adminKey, "PATCH", "/v1/events", 405, 0},
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

// TestSourceSecretRulesAtSave (issue 13 point 9): a source secret shorter
// than 16 bytes or with leading or trailing whitespace is refused with a
// 422 naming the rule (and never the secret), and nothing is stored.
func TestSourceSecretRulesAtSave(t *testing.T) {
	w := newWorld(t, nil)
	_, list := w.call(adminKey, "GET", "/v1/sources", "")
	for _, c := range []struct{ secret, rule string }{
		{"short-secret", "shorter than 16 bytes"},
		{" leading-space-secret-0123", "leading or trailing whitespace"},
		{"trailing-newline-secret-0123\n", "leading or trailing whitespace"},
	} {
		body := `{"name":"gh","scheme":"github","secrets":[` + strconvQuote(c.secret) + `],"destination_url":"http://10.0.0.2/in"}`
		st, raw := w.call(adminKey, "POST", "/v1/sources", body)
		if st != 422 || !strings.Contains(string(raw), c.rule) || !strings.Contains(string(raw), "secrets[0]") {
			t.Errorf("secret %q: %d %s; want 422 naming secrets[0] and %q", c.secret, st, raw, c.rule)
		}
		if strings.Contains(string(raw), strings.TrimSpace(c.secret)) {
			t.Errorf("secret %q: the problem repeats the secret: %s", c.secret, raw)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); !bytes.Equal(after, list) {
		t.Errorf("refused creates changed the sources:\n%s\n%s", list, after)
	}
	var src struct{ ID string }
	if st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"gh","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"http://10.0.0.2/in"}`); st != 201 {
		t.Fatalf("a 16-byte secret: %d %s; want 201", st, raw)
	} else if err := json.Unmarshal(raw, &src); err != nil || src.ID == "" {
		t.Fatalf("created source: %s (%v)", raw, err)
	}
	// The same rules when a change (a rotation) saves secrets.
	_, before := w.call(adminKey, "GET", "/v1/sources/"+src.ID, "")
	for _, c := range []struct{ secret, rule string }{
		{"short-secret", "shorter than 16 bytes"},
		{"rotated-secret-0123 ", "leading or trailing whitespace"},
	} {
		st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"secrets":["sixteen-bytes-ok",`+strconvQuote(c.secret)+`]}`)
		if st != 422 || !strings.Contains(string(raw), c.rule) || !strings.Contains(string(raw), "secrets[1]") {
			t.Errorf("PATCH with secret %q: %d %s; want 422 naming secrets[1] and %q", c.secret, st, raw, c.rule)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+src.ID, ""); !bytes.Equal(after, before) {
		t.Errorf("refused changes changed the source:\n%s\n%s", before, after)
	}
}

// TestSourceSecretsMustBeDistinct: a source created or changed with the
// same secret twice is refused with a 422 naming the rule and the two
// indexes (never the secret), and nothing is stored or changed.
func TestSourceSecretsMustBeDistinct(t *testing.T) {
	w := newWorld(t, nil)
	const secret = "github-secret-0123456789"
	_, list := w.call(adminKey, "GET", "/v1/sources", "")
	st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"gh","scheme":"github","secrets":["`+secret+`","`+secret+`"],"destination_url":"http://10.0.0.2/in"}`)
	if st != 422 || !strings.Contains(string(raw), `"message":"the same as secrets[0]: secrets must be distinct","location":"body.secrets[1]"`) || strings.Contains(string(raw), secret) {
		t.Errorf("create with a secret twice: %d %s; want 422 naming secrets[1], secrets[0] and the rule, not the secret", st, raw)
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); !bytes.Equal(after, list) {
		t.Errorf("a refused create changed the sources:\n%s\n%s", list, after)
	}
	var src struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"gh","scheme":"github","secrets":["`+secret+`"],"destination_url":"http://10.0.0.2/in"}`, 201, &src)
	_, before := w.call(adminKey, "GET", "/v1/sources/"+src.ID, "")
	for _, secrets := range []string{
		`["` + secret + `","` + secret + `"]`,
		`["new-secret-0123456789","` + secret + `","new-secret-0123456789"]`,
	} {
		st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"name":"renamed","secrets":`+secrets+`}`)
		if st != 422 || !strings.Contains(string(raw), "secrets must be distinct") || strings.Contains(string(raw), "-0123456789") {
			t.Errorf("PATCH with secrets %s: %d %s; want 422 naming the rule, not the secret", secrets, st, raw)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+src.ID, ""); !bytes.Equal(after, before) {
		t.Errorf("refused changes changed the source:\n%s\n%s", before, after)
	}
	// Distinct secrets (a rotation) are saved.
	w.mustCall(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"secrets":["new-secret-0123456789","`+secret+`"]}`, 200, nil)
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// TestListSourceEndpoints (issue 13 point 19): inbound sources' forwarding
// endpoints are listed with ?kind=source (or all) for an admin, each
// marked kind "source"; the default lists tenants' endpoints only; a
// tenant key sees none of them.
func TestListSourceEndpoints(t *testing.T) {
	w := newWorld(t, nil)
	type page struct {
		Data []struct{ ID, Tenant, Kind string }
	}
	list := func(key, q string) page {
		var p page
		w.mustCall(key, "GET", "/v1/endpoints"+q, "", 200, &p)
		return p
	}
	def, src, all := list(adminKey, ""), list(adminKey, "?kind=source"), list(adminKey, "?kind=all")
	if len(src.Data) == 0 {
		t.Fatal("?kind=source lists nothing; the world has a source")
	}
	for _, e := range src.Data {
		if e.Kind != "source" || !strings.HasPrefix(e.Tenant, "src_") {
			t.Errorf("?kind=source listed %+v", e)
		}
	}
	for _, e := range def.Data {
		if e.Kind != "tenant" {
			t.Errorf("default list has %+v", e)
		}
	}
	if len(all.Data) != len(def.Data)+len(src.Data) {
		t.Errorf("?kind=all: %d; want %d + %d", len(all.Data), len(def.Data), len(src.Data))
	}
	manager, _ := w.newKey(store.RoleManager, "acme", "")
	if p := list(manager, "?kind=source"); len(p.Data) != 0 {
		t.Errorf("a tenant key's ?kind=source: %+v; want nothing", p.Data)
	}
	if st, raw := w.call(adminKey, "GET", "/v1/endpoints?kind=sources", ""); st != 422 {
		t.Errorf("?kind=sources: %d %s; want 422", st, raw)
	}
}

// TestWrongMethodIs405WithAllow: a path with routes for other methods
// answers 405 naming them in Allow (RFC 9110 §15.5.6); an unknown path
// stays 404.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{"PATCH", "/v1/events", 405, "GET, POST, HEAD"},
		{"PUT", "/v1/endpoints/ep_x", 405, "GET, PATCH, DELETE, HEAD"},
		{"GET", "/v1/endpoints/ep_x/pause", 405, "POST"},
		{"GET", "/v1/nowhere", 404, ""},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		rec := httptest.NewRecorder()
		w.srv.ServeHTTP(rec, req)
		if rec.Code != c.want || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q %s; want %d Allow %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), rec.Body.String(), c.want, c.allow)
		}
	}
}

// TestNamesRefuseControlCharacters: an API key's or a source's name with a
// control character (a terminal escape, a newline forging log lines) is a
// 422 naming the rule, and nothing is stored.
func TestNamesRefuseControlCharacters(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct{ path, body string }{
		{"/v1/api-keys", `{"name":"ops\u001b[31m","role":"viewer","tenant":"acme"}`},
		{"/v1/api-keys", `{"name":"ops\nforged","role":"viewer","tenant":"acme"}`},
		{"/v1/sources", `{"name":"gh\u0007","scheme":"github","secret":"0123456789abcdef0123456789abcdef"}`},
	} {
		req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		w.srv.ServeHTTP(rec, req)
		if rec.Code != 422 || !strings.Contains(rec.Body.String(), "no control characters") {
			t.Errorf("POST %s %s: %d %s; want 422 naming the rule", c.path, c.body, rec.Code, rec.Body.String())
		}
	}
}

// gatedBody is a request body whose first Read reports that reading began
// and then waits for release (a slow client holding its body open).
type gatedBody struct {
	started, release chan struct{}
	once             sync.Once
}

func (b *gatedBody) Read([]byte) (int, error) {
	b.once.Do(func() { close(b.started) })
	<-b.release
	return 0, io.EOF
}

// TestBodyReadersBounded (issue 13 point 12): at most 64 request bodies
// are read at once. With 64 slow bodies being read, a 65th request waits
// for a slot without a byte of its body read (its client gives up here:
// the request's context is done, so it is answered at once); once one of
// the 64 ends, a new request's body is read.
func TestBodyReadersBounded(t *testing.T) {
	w := newWorld(t, nil)
	const readers = 64
	post := func(ctx context.Context, body io.Reader) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/events", body)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		w.srv.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	slow := make([]*gatedBody, readers)
	finished := make([]chan struct{}, readers)
	for i := range slow {
		slow[i] = &gatedBody{started: make(chan struct{}), release: make(chan struct{})}
		finished[i] = make(chan struct{})
		wg.Go(func() {
			defer close(finished[i])
			post(context.Background(), slow[i])
		})
	}
	defer func() {
		for _, b := range slow {
			select {
			case <-b.release:
			default:
				close(b.release)
			}
		}
		wg.Wait()
	}()
	for _, b := range slow {
		<-b.started
	}
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	waiting := &countingReader{r: strings.NewReader(`{"tenant":"acme","type":"order.placed","data":{}}`)}
	post(gaveUp, waiting)
	if waiting.n != 0 {
		t.Fatalf("with %d bodies being read, a further request's body was read (%d bytes)", readers, waiting.n)
	}
	close(slow[0].release)
	<-finished[0]
	next := &countingReader{r: strings.NewReader(`{"tenant":"acme","type":"order.placed","data":{}}`)}
	if rec := post(context.Background(), next); rec.Code != 202 || next.n == 0 {
		t.Fatalf("after a slot was freed: %d %s, %d bytes read; want 202 with the body read", rec.Code, rec.Body.String(), next.n)
	}
}

// TestReplayRefusesAMalformedEventType: an endpoint replay filtered on a
// name no event can have (a space, an empty segment) answers 422 naming
// body.event_type, as publish does, instead of {"replayed":0}; a
// well-formed name is still a filter.
func TestReplayRefusesAMalformedEventType(t *testing.T) {
	w := newWorld(t, nil)
	_, before := w.call(adminKey, "GET", "/v1/deliveries/"+w.dlvA, "")
	for _, typ := range []string{"bad type", "file..created", "file.*"} {
		st, raw := w.call(adminKey, "POST", "/v1/endpoints/"+w.epA+"/replay", `{"state":"dead","event_type":`+strconvQuote(typ)+`}`)
		if st != 422 || !strings.Contains(string(raw), "body.event_type") {
			t.Errorf("replay with event_type %q: %d %s; want 422 naming body.event_type", typ, st, raw)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/deliveries/"+w.dlvA, ""); !bytes.Equal(after, before) {
		t.Errorf("a refused replay changed the delivery:\n%s\n%s", before, after)
	}
	if st, raw := w.call(adminKey, "POST", "/v1/endpoints/"+w.epA+"/replay", `{"state":"dead","event_type":"file.created"}`); st != 200 {
		t.Errorf("replay with a well-formed event_type: %d %s; want 200", st, raw)
	}
}

// TestDataVersionsOfAOneVersionType: data_versions for a type with one
// version is refused (422) saying it has no older versions, not "(1 to 0)";
// with two versions the message names the range.
func TestDataVersionsOfAOneVersionType(t *testing.T) {
	w := newWorld(t, nil)
	schema := `{"type":"object","properties":{"file_id":{"type":"string"}}}`
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+schema+`}]}`, 201, nil)
	publish := `{"tenant":"acme","type":"file.updated","data":{"file_id":"f"},"data_versions":{"1":{"file_id":"f"}}}`
	st, raw := w.call(adminKey, "POST", "/v1/events", publish)
	if st != 422 || strings.Contains(string(raw), "1 to 0") || !strings.Contains(string(raw), "has one version") {
		t.Errorf("data_versions of a one-version type: %d %s; want 422 saying it has one version", st, raw)
	}
	w.mustCall(adminKey, "POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+schema+`}`, 201, nil)
	publish = `{"tenant":"acme","type":"file.updated","data":{"file_id":"f"},"data_versions":{"2":{"file_id":"f"}}}`
	if st, raw := w.call(adminKey, "POST", "/v1/events", publish); st != 422 || !strings.Contains(string(raw), "(1 to 1)") {
		t.Errorf("data_versions naming the newest of two: %d %s; want 422 naming 1 to 1", st, raw)
	}
}

// TestUnknownQueryParametersRefused: a query parameter the operation does
// not declare (a mistyped filter) is a 422 naming it and the parameters
// the operation takes, instead of being ignored so that the read answers
// more than was asked; a write with one changes nothing; declared ones
// still work, and a role refused the operation learns nothing more.
func TestUnknownQueryParametersRefused(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v1/deliveries?endpoint_id=ep_nope", `unknown query parameter(s) endpoint_id: GET /v1/deliveries takes only`},
		{"GET", "/v1/events?since=x&state=y", `unknown query parameter(s) since, state: GET /v1/events takes only`},
		{"GET", "/v1/deliveries/dlv_x/attempts?limit=5", `unknown query parameter(s) limit: GET /v1/deliveries/{id}/attempts takes no query parameters`},
	} {
		st, raw := w.call(adminKey, c.method, c.path, "")
		if st != http.StatusUnprocessableEntity || !strings.Contains(string(raw), c.want) || !strings.Contains(string(raw), `"location":"query.`) {
			t.Errorf("%s %s: %d %s; want 422 %q", c.method, c.path, st, raw, c.want)
		}
	}
	var before struct{ Data []json.RawMessage }
	w.mustCall(adminKey, "GET", "/v1/endpoints", "", 200, &before)
	if st, raw := w.call(adminKey, "POST", "/v1/endpoints?tenant=acme", `{"tenant":"acme","url":"https://acme.example/q"}`); st != http.StatusUnprocessableEntity {
		t.Errorf("create with ?tenant=: %d %s; want 422", st, raw)
	}
	var after struct{ Data []json.RawMessage }
	w.mustCall(adminKey, "GET", "/v1/endpoints", "", 200, &after)
	if len(after.Data) != len(before.Data) {
		t.Errorf("a refused create changed the endpoints: %d -> %d", len(before.Data), len(after.Data))
	}
	w.mustCall(adminKey, "GET", "/v1/deliveries?state=dead&limit=5", "", 200, nil)
	publisher, _ := w.newKey(store.RolePublisher, "acme", "")
	if st, _ := w.call(publisher, "GET", "/v1/api-keys?bogus=1", ""); st != http.StatusForbidden {
		t.Errorf("a publisher's GET /v1/api-keys?bogus=1: %d; want 403 (the access rule first)", st)
	}
}

// TestRepeatedQueryParametersRefused: a query parameter given twice is a
// 422 naming it on every route, never its first value used silently (a
// tenant key's ?tenant=acme&tenant=globex, an admin's
// ?tenant=globex&tenant=acme read one tenant; ?type=a&type=b filtered by
// a only). Nothing in the API's query is repeatable.
func TestRepeatedQueryParametersRefused(t *testing.T) {
	w := newWorld(t, nil)
	viewer, _ := w.newKey(store.RoleViewer, "acme", "")
	for _, c := range []struct{ key, path, name string }{
		{viewer, "/v1/endpoints?tenant=acme&tenant=globex", "tenant"},
		{adminKey, "/v1/endpoints?tenant=globex&tenant=acme", "tenant"},
		{adminKey, "/v1/events?type=a&type=b", "type"},
		{adminKey, "/v1/events?type=a&type=a", "type"},
		{adminKey, "/v1/deliveries?limit=5&state=dead&limit=6", "limit"},
		{adminKey, "/v1/endpoints/ep_x/stats?window=1h&window=7d", "window"},
		{viewer, "/v1/events?tenant=acme&tenant=", "tenant"},
	} {
		st, raw := w.call(c.key, "GET", c.path, "")
		want := "query parameter " + c.name + " given 2 times"
		if st != http.StatusUnprocessableEntity || !strings.Contains(string(raw), want) || !strings.Contains(string(raw), `"location":"query.`+c.name+`"`) {
			t.Errorf("GET %s: %d %s; want 422 %q", c.path, st, raw, want)
		}
	}
	// Access first: a role that may not call the operation learns nothing.
	publisher, _ := w.newKey(store.RolePublisher, "acme", "")
	if st, _ := w.call(publisher, "GET", "/v1/api-keys?limit=1&limit=2", ""); st != http.StatusForbidden {
		t.Errorf("a publisher's repeated query on GET /v1/api-keys: %d; want 403", st)
	}
	w.mustCall(adminKey, "GET", "/v1/events?type=a&limit=5", "", 200, nil)
}

// TestTenantPatternsAgree: every tenant in the API (query parameters and
// request body members named tenant) carries api.TenantPattern, the rule
// api.ValidTenant (and serve's --operator-tenant) applies, so the struct
// tags that write it out cannot drift from it.
func TestTenantPatternsAgree(t *testing.T) {
	w := newWorld(t, nil)
	doc := w.srv.OpenAPI()
	seen := 0
	for path, item := range doc.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op == nil {
				continue
			}
			for _, p := range op.Parameters {
				if p.Name == "tenant" {
					seen++
					if p.Schema == nil || p.Schema.Pattern != api.TenantPattern || p.Schema.PatternDescription != api.TenantPatternDescription {
						t.Errorf("%s %s ?tenant: pattern %v, want %s described as %q", op.Method, path, p.Schema, api.TenantPattern, api.TenantPatternDescription)
					}
				}
			}
		}
	}
	for name, sc := range doc.Components.Schemas.Map() {
		if p, ok := sc.Properties["tenant"]; ok {
			seen++
			if p.Pattern != "" && (p.Pattern != api.TenantPattern || p.PatternDescription != api.TenantPatternDescription) {
				t.Errorf("schema %s: tenant pattern %q (%q), want %s described as %q", name, p.Pattern, p.PatternDescription, api.TenantPattern, api.TenantPatternDescription)
			}
		}
	}
	if seen < 8 {
		t.Fatalf("found %d tenant parameters and members; the walk is broken", seen)
	}
	for name, want := range map[string]bool{"acme": true, "a.b:c_d-1": true, "": false, "a b": false, strings.Repeat("x", 129): false} {
		if api.ValidTenant(name) != want {
			t.Errorf("ValidTenant(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestProblemsTruncateEchoedInput: a problem repeats at most 256 bytes of
// any input it echoes (an id, a value, a name), cut with an ellipsis, so a
// 100,000-character id does not come back as a 100 KB answer.
func TestProblemsTruncateEchoedInput(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/endpoints/ep_" + strings.Repeat("a", 100000), "", 0},
		{"GET", "/v1/endpoints/ep_" + strings.Repeat("a", 5000), "", 0},
		{"GET", "/v1/events/" + strings.Repeat("é", 3000), "", 0},
		{"POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/` + strings.Repeat("p", 5000) + `"}`, 0},
		{"POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/","description":"x","` + strings.Repeat("k", 5000) + `":1}`, 0},
		{"POST", "/v1/events", `{"tenant":"acme","type":"a.b","data":{},"id":"` + strings.Repeat("i", 5000) + `"}`, 0},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		if st < 400 || st >= 500 {
			t.Errorf("%s %.60s…: %d, want a 4xx problem", c.method, c.path, st)
			continue
		}
		if len(raw) > 2048 {
			t.Errorf("%s %.60s… (%d bytes of input): a %d-byte problem %.300s…; want the echoed input cut to 256 bytes", c.method, c.path, len(c.path)+len(c.body), len(raw), raw)
		}
		if !utf8.Valid(raw) || !strings.Contains(string(raw), "…") {
			t.Errorf("%s %.60s…: %s; want valid UTF-8 with an ellipsis where the input was cut", c.method, c.path, raw)
		}
	}
	// A short id is echoed whole.
	if st, raw := w.call(adminKey, "GET", "/v1/endpoints/ep_"+strings.Repeat("b", 200), ""); st != 404 && st != 422 || !strings.Contains(string(raw), strings.Repeat("b", 200)) {
		t.Errorf("a 203-character id: %d %s; want it named whole", st, raw)
	}
}

// TestAPIKeyBodyErrors: the key list shows an admin key's tenant as "",
// so creating an admin key with "tenant":"" is accepted (as null and an
// absent tenant are); a tenant role with "" is told it needs a tenant, a
// malformed tenant gets the tenant rule in words; an empty name gets one
// error; a PATCH naming an endpoint's tenant is told a tenant cannot be
// changed. A refused create stores no key.
func TestAPIKeyBodyErrors(t *testing.T) {
	w := newWorld(t, nil)
	type problem struct {
		Detail string
		Errors []struct{ Message, Location string }
	}
	countKeys := func() int {
		var l struct{ Data []json.RawMessage }
		w.mustCall(adminKey, "GET", "/v1/api-keys?limit=1000", "", 200, &l)
		return len(l.Data)
	}
	for _, body := range []string{`{"name":"x","role":"admin","tenant":""}`, `{"name":"y","role":"admin","tenant":null}`, `{"name":"z","role":"admin"}`} {
		var k struct{ Tenant *string }
		w.mustCall(adminKey, "POST", "/v1/api-keys", body, 201, &k)
		if k.Tenant == nil || *k.Tenant != "" {
			t.Errorf("POST %s: tenant %v, want \"\"", body, k.Tenant)
		}
	}
	before := countKeys()
	for _, c := range []struct{ method, path, body, location, want string }{
		{"POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":""}`, "body.tenant", "role viewer needs a tenant"},
		{"POST", "/v1/api-keys", `{"name":"v","role":"viewer","tenant":"a b"}`, "body.tenant", "1–128 letters, digits, _ . : or -"},
		{"POST", "/v1/api-keys", `{"name":"v","role":"admin","tenant":"a b"}`, "body.tenant", "an admin key has no tenant"},
		{"POST", "/v1/api-keys", `{"name":"v","role":"admin","tenant":"acme"}`, "body.tenant", "an admin key has no tenant"},
		{"POST", "/v1/api-keys", `{"name":"","role":"admin"}`, "body.name", "expected length >= 1"},
		{"POST", "/v1/api-keys", `{"name":"a\u0001b","role":"admin"}`, "body.name", "no control characters"},
		{"PATCH", "/v1/endpoints/" + w.epA, `{"tenant":"globex"}`, "body.tenant", "a tenant cannot be changed"},
		{"POST", "/v1/sources", `{"name":"","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.3/in"}`, "body.name", "expected length >= 1"},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		var p problem
		_ = json.Unmarshal(raw, &p)
		if st != http.StatusUnprocessableEntity || len(p.Errors) != 1 || p.Errors[0].Location != c.location || !strings.Contains(p.Errors[0].Message, c.want) {
			t.Errorf("%s %s %s: %d %s; want 422 with one error at %s saying %q", c.method, c.path, c.body, st, raw, c.location, c.want)
		}
	}
	if after := countKeys(); after != before {
		t.Errorf("refused creates changed the keys: %d → %d", before, after)
	}
}

// TestEventTypeFiltersAreSets: an endpoint's event_types is a set: a
// filter given twice is kept once (the first, in order), on create and on
// change.
func TestEventTypeFiltersAreSets(t *testing.T) {
	w := newWorld(t, nil)
	var ep struct {
		ID         string
		EventTypes []string `json:"event_types"`
	}
	w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-receiver.example/sets","event_types":["x.y","a.*","x.y","*","a.*"]}`, 201, &ep)
	if !slices.Equal(ep.EventTypes, []string{"x.y", "a.*", "*"}) {
		t.Fatalf("created with event_types %q, want [x.y a.* *]", ep.EventTypes)
	}
	w.mustCall(adminKey, "PATCH", "/v1/endpoints/"+ep.ID, `{"event_types":["b.c","b.c"]}`, 200, &ep)
	if !slices.Equal(ep.EventTypes, []string{"b.c"}) {
		t.Fatalf("changed to event_types %q, want [b.c]", ep.EventTypes)
	}
	w.mustCall(adminKey, "GET", "/v1/endpoints/"+ep.ID, "", 200, &ep)
	if !slices.Equal(ep.EventTypes, []string{"b.c"}) {
		t.Fatalf("stored event_types %q, want [b.c]", ep.EventTypes)
	}
}

// TestProblemsBoundEchoedInputHoweverSpelled: the 256-byte cap holds for
// each piece of input, not each word of it (a name "x y y …" is one piece),
// and a problem lists at most 10 errors then one saying how many more, so
// a request of thousands of unknown names answers a few KB.
func TestProblemsBoundEchoedInputHoweverSpelled(t *testing.T) {
	w := newWorld(t, nil)
	var many strings.Builder
	for i := range 8000 {
		if i > 0 {
			many.WriteByte('&')
		}
		fmt.Fprintf(&many, "p%d=1", i)
	}
	for _, c := range []struct {
		name, method, path, body string
		unit                     string // the repeated piece of the input
	}{
		{"query name with spaces", "GET", "/v1/endpoints?x" + strings.Repeat("+y", 20000), "", " y"},
		{"member name with spaces", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/","` + strings.Repeat("k ", 5000) + `":1}`, "k "},
		{"path id with spaces", "GET", "/v1/endpoints/ep_a" + strings.Repeat("%20a", 5000), "", " a"},
		{"value with spaces", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme.example/` + strings.Repeat("p ", 5000) + `"}`, "p "},
		{"8,000 unknown names", "GET", "/v1/endpoints?" + many.String(), "", ""},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		if st < 400 || st >= 500 {
			t.Errorf("%s: %d, want a 4xx problem", c.name, st)
			continue
		}
		if len(raw) > 4096 {
			t.Errorf("%s: a %d-byte problem %.300s…; want a few KB at most", c.name, len(raw), raw)
		}
		var p struct {
			Detail string `json:"detail"`
			Errors []struct {
				Message, Location string
				Value             any
			} `json:"errors"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("%s: %v: %.300s", c.name, err, raw)
		}
		if len(p.Errors) > 11 {
			t.Errorf("%s: %d errors listed; want at most 10 and one saying how many more", c.name, len(p.Errors))
		}
		fields := []string{p.Detail}
		for _, e := range p.Errors {
			v, _ := e.Value.(string)
			fields = append(fields, e.Message, e.Location, v)
		}
		for _, f := range fields {
			if c.unit != "" && strings.Count(f, c.unit)*len(c.unit) > 256 {
				t.Errorf("%s: %d bytes of the input echoed in one field %.300s…; want at most 256", c.name, strings.Count(f, c.unit)*len(c.unit), f)
			}
		}
		if c.unit == "" && (len(p.Errors) != 11 || !strings.Contains(p.Errors[10].Message, "7990 more")) {
			t.Errorf("%s: %d errors, last %+v; want 10 and one saying 7990 more", c.name, len(p.Errors), p.Errors[len(p.Errors)-1])
		}
	}
}

// TestIntegerOutOfRangeNamesTheField: a number the operation's schema
// lets through that no int holds (a version, a deprecation, a pin) answers
// 422 located at the field (huma's location: body.versions[0].version)
// naming the range, never the decoder's Go type names,
// and changes nothing.
func TestIntegerOutOfRangeNamesTheField(t *testing.T) {
	w := newWorld(t, nil)
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
	const big = "99999999999999999999"
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/v1/event-types", `{"name":"file.created","versions":[{"version":` + big + `,"schema":{"type":"object"}}]}`, "body.versions[0].version"},
		{"POST", "/v1/event-types/file.updated/versions", `{"version":` + big + `,"schema":{"type":"object"}}`, "body.version"},
		{"PATCH", "/v1/event-types/file.updated", `{"description":"changed","deprecate":[-` + big + `]}`, "body.deprecate[0]"},
		{"PATCH", "/v1/endpoints/" + w.epA, `{"description":"changed","versions":{"file.updated":` + big + `}}`, "body.versions.file.updated"},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		if st != 422 || !strings.Contains(string(raw), `"location":"`+c.field+`"`) || !strings.Contains(string(raw), `"message":"expected an integer from -9223372036854775808 to 9223372036854775807`) ||
			strings.Contains(string(raw), "Go struct") || strings.Contains(string(raw), "api.") {
			t.Errorf("%s %s %s: %d %s; want 422 naming %s and the range", c.method, c.path, c.body, st, raw, c.field)
		}
	}
	for _, path := range []string{"/v1/event-types/file.updated", "/v1/endpoints/" + w.epA} {
		if _, raw := w.call(adminKey, "GET", path, ""); strings.Contains(string(raw), "changed") {
			t.Errorf("%s changed by a refused request: %s", path, raw)
		}
	}
	w.mustCall(adminKey, "GET", "/v1/event-types/file.created", "", 404, nil)
}

// TestEventTypeTimesOneInstant: an event type's created_at and its first
// version's are one instant, shown alike (microseconds, as stored), and
// the answer to a change says what a later read says.
func TestEventTypeTimesOneInstant(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	w := newWorld(t, func(c *api.Config) { c.Now = func() time.Time { return now } })
	var created, added, read struct {
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
		Versions  []struct {
			CreatedAt string `json:"created_at"`
		} `json:"versions"`
	}
	check := func(what string, body []byte, out any) {
		t.Helper()
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %s: %v", what, body, err)
		}
	}
	_, raw := w.call(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":{"type":"object"}}]}`)
	check("create", raw, &created)
	if created.CreatedAt != "2026-03-01T09:00:00.123456Z" || created.Versions[0].CreatedAt != created.CreatedAt {
		t.Errorf("created_at %s, version 1's %s; want both 2026-03-01T09:00:00.123456Z", created.CreatedAt, created.Versions[0].CreatedAt)
	}
	now = now.Add(time.Second)
	_, raw = w.call(adminKey, "POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":{"type":"object"}}`)
	check("add-version", raw, &added)
	_, raw = w.call(adminKey, "GET", "/v1/event-types/file.updated", "")
	check("get", raw, &read)
	if added.UpdatedAt != "2026-03-01T09:00:01.123456Z" || added.Versions[1].CreatedAt != added.UpdatedAt || !reflect.DeepEqual(added, read) {
		t.Errorf("after add-version %+v, read %+v", added, read)
	}
}

// TestIntegerWithAFractionIsNotOutOfRange: JSON Schema's integer takes
// 1.0 and 1e0, which huma's validation lets through, but Go's decoder
// refuses them for an int field. The 422 must not claim that such a
// value, in range, is outside the range: it says how to write it.
func TestIntegerWithAFractionIsNotOutOfRange(t *testing.T) {
	w := newWorld(t, nil)
	for _, v := range []string{"1.0", "1e0"} {
		st, raw := w.call(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":`+v+`,"schema":{"type":"object"}}]}`)
		if st != 422 || !strings.Contains(string(raw), `"location":"body.versions[0].version"`) || !strings.Contains(string(raw), "expected an integer") || !strings.Contains(string(raw), "without a fraction or exponent") {
			t.Errorf("version %s: %d %s; want 422 saying an integer is written without a fraction or exponent", v, st, raw)
		}
	}
}

// TestSourceStandardWebhooksSecretWithAndWithoutPrefix: a standard-webhooks
// source's "whsec_X" and "X" are one key, so giving both (create or
// PATCH) is refused as secrets that are not distinct, naming why and never
// the secret; nothing is stored or changed.
func TestSourceStandardWebhooksSecretWithAndWithoutPrefix(t *testing.T) {
	w := newWorld(t, nil)
	const x = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	_, list := w.call(adminKey, "GET", "/v1/sources", "")
	st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"svix","scheme":"standard-webhooks","secrets":["whsec_`+x+`","`+x+`"],"destination_url":"http://10.0.0.2/in"}`)
	if st != 422 || !strings.Contains(string(raw), `"message":"the same as secrets[0]: secrets must be distinct (a standard-webhooks secret is the same key with or without whsec_)","location":"body.secrets[1]"`) || strings.Contains(string(raw), x) {
		t.Errorf("create with whsec_X and X: %d %s; want 422 naming the rule, not the secret", st, raw)
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources", ""); !bytes.Equal(after, list) {
		t.Errorf("a refused create changed the sources:\n%s\n%s", list, after)
	}
	var src struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"svix","scheme":"standard-webhooks","secrets":["whsec_`+x+`"],"destination_url":"http://10.0.0.2/in"}`, 201, &src)
	_, before := w.call(adminKey, "GET", "/v1/sources/"+src.ID, "")
	if st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"secrets":["`+x+`","whsec_`+x+`"]}`); st != 422 || !strings.Contains(string(raw), "with or without whsec_") {
		t.Errorf("PATCH with X and whsec_X: %d %s; want 422", st, raw)
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+src.ID, ""); !bytes.Equal(after, before) {
		t.Errorf("a refused PATCH changed the source:\n%s\n%s", before, after)
	}
	// Two base64 texts of one key (the last character differing only in
	// the bits the padding leaves unused, RFC 4648 §3.5) are one key too.
	const canon, other = "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=", "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6t="
	if st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"secrets":["whsec_`+canon+`","`+other+`"]}`); st != 422 ||
		!strings.Contains(string(raw), `"message":"the same as secrets[0]: secrets must be distinct (a standard-webhooks secret is its base64-decoded key, and these two decode to the same bytes)","location":"body.secrets[1]"`) ||
		strings.Contains(string(raw), "q6ur") {
		t.Errorf("PATCH with two encodings of one key: %d %s; want 422 naming the rule, not the secret", st, raw)
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+src.ID, ""); !bytes.Equal(after, before) {
		t.Errorf("a refused PATCH changed the source:\n%s\n%s", before, after)
	}
}

// TestReplayRefusalsSayWhatToSend: POST /v1/endpoints/{id}/replay without
// a body answers 400 saying what to send ({"state":"dead"}), not only
// "request body is required"; and a window whose until is not after its
// since names both values, not only until's. Another operation's missing
// body names the operation to look up.
func TestReplayRefusalsSayWhatToSend(t *testing.T) {
	w := newWorld(t, nil)
	st, raw := w.call(adminKey, "POST", "/v1/endpoints/"+w.epA+"/replay", "")
	if st != 400 || !strings.Contains(string(raw), "request body is required") || !strings.Contains(string(raw), `{\"state\":\"dead\"}`) {
		t.Errorf("replay without a body: %d %s; want 400 saying to send {\"state\":\"dead\"}", st, raw)
	}
	since, until := "2026-01-31T10:00:00Z", "2026-01-31T09:00:00Z"
	st, raw = w.call(adminKey, "POST", "/v1/endpoints/"+w.epA+"/replay", `{"state":"dead","since":"`+since+`","until":"`+until+`"}`)
	if st != 422 || !strings.Contains(string(raw), since) || !strings.Contains(string(raw), until) {
		t.Errorf("replay with until before since: %d %s; want 422 naming both %s and %s", st, raw, since, until)
	}
	st, raw = w.call(adminKey, "POST", "/v1/endpoints", "")
	if st != 400 || !strings.Contains(string(raw), "create-endpoint") {
		t.Errorf("create an endpoint without a body: %d %s; want 400 naming the operation", st, raw)
	}
}
