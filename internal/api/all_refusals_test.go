package api_test

import (
	"bytes"
	"strings"
	"testing"
)

// refusalCase is a request whose body breaks several of Herald's own rules
// at once, and the locations of the errors its 422 must list, in order.
type refusalCase struct {
	name, method, path, body string
	want                     []string // locations, in the order of the body's members
	says                     []string // one text per location that its message holds
}

// checkAllRefused sends c and checks the answer is one 422 listing every
// broken rule, each at its field in c.want's order, and that the state
// read by get (before and after) did not change.
func checkAllRefused(t *testing.T, w *world, c refusalCase, get string) {
	t.Helper()
	_, before := w.call(adminKey, "GET", get, "")
	st, raw := w.call(adminKey, c.method, c.path, c.body)
	if st != 422 {
		t.Fatalf("%s = %d %s; want 422", c.name, st, raw)
	}
	errs := problemErrors(t, raw)
	var got []string
	for _, e := range errs {
		got = append(got, e.Location)
	}
	if strings.Join(got, " | ") != strings.Join(c.want, " | ") {
		t.Fatalf("%s: errors at %q; want every broken rule listed, at %q\n%s", c.name, got, c.want, raw)
	}
	for i, s := range c.says {
		if !strings.Contains(errs[i].Message, s) {
			t.Errorf("%s: error at %s says %q; want it to say %q", c.name, errs[i].Location, errs[i].Message, s)
		}
	}
	if _, after := w.call(adminKey, "GET", get, ""); !bytes.Equal(before, after) {
		t.Errorf("%s changed %s:\nbefore %s\nafter  %s", c.name, get, before, after)
	}
}

// TestEndpointRefusalsAllListed: a create or PATCH of an endpoint breaking
// several of Herald's own rules (an unsafe URL, an event type that is no
// type, a header name that is no token and one Herald sets, a pin with an
// empty catalog, a null) answers one 422 listing every refusal, each at
// its field, in the order of the body's members, and stores nothing.
func TestEndpointRefusalsAllListed(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []refusalCase{
		{name: "create: url, event type, two headers", method: "POST", path: "/v1/endpoints",
			body: `{"tenant":"acme","url":"https://127.0.0.1/hook","event_types":["order.placed","bad type!"],"headers":{"X-Signature":"v","Bad Header":"v"},"rate_limit_per_second":5}`,
			want: []string{"body.url", "body.event_types[1]", "body.headers.Bad Header", "body.headers.X-Signature"},
			says: []string{"url rule", "must be *, an event type", "RFC 9110 token", "set by Herald"}},
		{name: "create: url, pin, header value", method: "POST", path: "/v1/endpoints",
			body: `{"tenant":"acme","headers":{"X-Team":"a\u0000b"},"versions":{"order.placed":1},"url":"https://127.0.0.1/hook"}`,
			want: []string{"body.url", "body.versions", "body.headers.X-Team"},
			says: []string{"url rule", "catalog is empty", "header value"}},
		{name: "patch: url, event type, header, null", method: "PATCH", path: "/v1/endpoints/" + w.epA,
			body: `{"headers":{"Content-Type":"x"},"description":null,"event_types":["*","a..b"],"url":"https://127.0.0.1/hook"}`,
			want: []string{"body.url", "body.event_types[1]", "body.description", "body.headers.Content-Type"},
			says: []string{"url rule", "must be *, an event type", "cannot be null", "set by Herald"}},
	} {
		get := "/v1/endpoints?tenant=acme"
		if c.method == "PATCH" {
			get = c.path
		}
		checkAllRefused(t, w, c, get)
	}
}

// TestSourceRefusalsAllListed: a create or PATCH of a source breaking
// several of Herald's own rules (a short secret, a dedupe rule that is no
// JSON pointer, a destination that is no http(s) URL, an hmac prefix
// starting with a space) answers one 422 listing every refusal, each at
// its field, in the order of the body's members, and stores nothing.
func TestSourceRefusalsAllListed(t *testing.T) {
	w := newWorld(t, nil)
	var src struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"generic","scheme":"hmac","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.2/in","hmac":{"header":"X-Sig","prefix":"sha256="}}`, 201, &src)
	var signed struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"signed","scheme":"hmac","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.2/in","tolerance_seconds":300,"hmac":{"header":"X-Sig","timestamp_header":"X-Ts","template":"{timestamp}.{body}"}}`, 201, &signed)
	for _, c := range []refusalCase{
		// A template that does not parse takes no timestamp header away:
		// it alone is refused, with the dedupe rule.
		{name: "patch: dedupe, hmac template of a source with a tolerance", method: "PATCH", path: "/v1/sources/" + signed.ID,
			body: `{"dedupe":"json:no-slash","hmac":{"template":"{timestamp}.{body}{nope}"}}`,
			want: []string{"body.dedupe", "body.hmac.template"},
			says: []string{"dedupe", "unknown placeholder"}},
		{name: "create: dedupe, destination, hmac prefix", method: "POST", path: "/v1/sources",
			body: `{"name":"x","scheme":"hmac","secrets":["source-secret-0123456789"],"hmac":{"header":"X-Sig","prefix":" sha256="},"destination_url":"ftp://10.0.0.3/in","dedupe":"json:no-slash"}`,
			want: []string{"body.dedupe", "body.destination_url", "body.hmac.prefix"},
			says: []string{"dedupe", "destination_url", "starts with a space"}},
		{name: "create: secret, dedupe, body cap", method: "POST", path: "/v1/sources",
			body: `{"name":"x","scheme":"stripe","secrets":["short"],"dedupe":"json:no-slash","destination_url":"http://10.0.0.3/in","max_body_bytes":100}`,
			want: []string{"body.secrets[0]", "body.dedupe", "body.max_body_bytes"},
			says: []string{"shorter than", "dedupe", "max_body_bytes"}},
		{name: "create: dedupe, hmac header and template", method: "POST", path: "/v1/sources",
			body: `{"name":"x","scheme":"hmac","secrets":["source-secret-0123456789"],"dedupe":"json:no-slash","destination_url":"http://10.0.0.3/in","hmac":{"header":"X Sig","template":"{body}{nope}"}}`,
			want: []string{"body.dedupe", "body.hmac.header", "body.hmac.template"},
			says: []string{"dedupe", "not a valid header name", "unknown placeholder"}},
		{name: "patch: dedupe, hmac prefix", method: "PATCH", path: "/v1/sources/" + src.ID,
			body: `{"hmac":{"prefix":" sha256="},"dedupe":"json:no-slash"}`,
			want: []string{"body.dedupe", "body.hmac.prefix"},
			says: []string{"dedupe", "starts with a space"}},
		{name: "patch: null, destination, hmac template", method: "PATCH", path: "/v1/sources/" + src.ID,
			body: `{"name":null,"destination_url":"http://user:pw@10.0.0.3/in","hmac":{"template":"{nope}"}}`,
			want: []string{"body.name", "body.destination_url", "body.hmac.template"},
			says: []string{"cannot be null", "userinfo", "placeholder"}},
	} {
		get := "/v1/sources"
		if c.method == "PATCH" {
			get = c.path
		}
		checkAllRefused(t, w, c, get)
	}
}

// TestEventTypeAndPublishRefusalsAllListed: an event type's create and a
// publish breaking several of Herald's own rules answer one 422 listing
// every refusal, each at its field, in the order of the body's members
// (a publish's Idempotency-Key header last), and store nothing.
func TestEventTypeAndPublishRefusalsAllListed(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []refusalCase{
		{name: "event type: name, resource_id, version", method: "POST", path: "/v1/event-types",
			body: `{"versions":[{"version":2,"schema":{"type":"object"}}],"resource_id":"file_id","name":"herald.mine"}`,
			want: []string{"body.name", "body.resource_id", "body.versions[0].version"},
			says: []string{"reserved", "JSON pointer", "the first version is 1"}},
		{name: "event type: name, example", method: "POST", path: "/v1/event-types",
			body: `{"name":"bad name","versions":[{"version":1,"schema":{"type":"object"},"example":[1]}]}`,
			want: []string{"body.name", "body.versions[0].example"},
			says: []string{"", "always a JSON object"}},
	} {
		checkAllRefused(t, w, c, "/v1/event-types")
	}
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
	checkAllRefused(t, w, refusalCase{name: "event type PATCH: newest deprecated, no such version, in both lists", method: "PATCH", path: "/v1/event-types/file.updated",
		body: `{"undeprecate":[1],"deprecate":[1,7]}`,
		want: []string{"body.deprecate[0]", "body.deprecate[1]", "body.undeprecate[0]"},
		says: []string{"cannot be deprecated", "has no version 7", "both in deprecate and undeprecate"}}, "/v1/event-types/file.updated")
	for _, c := range []refusalCase{
		{name: "publish: type, data, id", method: "POST", path: "/v1/events",
			body: `{"tenant":"acme","id":"has.dots","data":[1],"type":"endpoint.disabled"}`,
			want: []string{"body.type", "body.data", "body.id"},
			says: []string{"", "JSON object", "no dots"}},
		{name: "publish: tenant, type, occurred_at", method: "POST", path: "/v1/events",
			body: `{"type":"bad type","data":{},"occurred_at":"0000-01-01T00:00:00+01:00"}`,
			want: []string{"body.tenant", "body.type", "body.occurred_at"},
			says: []string{"tenant is required", "", ""}},
	} {
		checkAllRefused(t, w, c, "/v1/events?tenant=acme")
	}
}

// TestAPIKeyRefusalsAllListed: an API key's create with a tenant role but
// no tenant and an expiry in the past answers both refusals, each at its
// field, and creates no key.
func TestAPIKeyRefusalsAllListed(t *testing.T) {
	w := newWorld(t, nil)
	checkAllRefused(t, w, refusalCase{name: "api key: tenant, expires_at", method: "POST", path: "/v1/api-keys",
		body: `{"expires_at":"2001-01-01T00:00:00Z","role":"publisher","name":"billing"}`,
		want: []string{"body.tenant", "body.expires_at"},
		says: []string{"needs a tenant", "in the future"}}, "/v1/api-keys")
}
