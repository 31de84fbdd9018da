package app_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/catalog"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

// Schemas of file.updated: v1 {file_id}, v2 {file_id, revision}, both
// closed (additionalProperties false); owner_email may carry personal data.
const (
	fileV1 = `{"type":"object","required":["file_id"],"additionalProperties":false,
		"properties":{"file_id":{"type":"string"},"note":{"type":"string"}}}`
	fileV2 = `{"type":"object","required":["file_id","revision"],"additionalProperties":false,
		"properties":{"file_id":{"type":"string"},"revision":{"type":"integer"},"note":{"type":"string"},
		"owner_email":{"type":"string","x-herald-personal-data":true}}}`
)

func (h *herald) mustCall(method, path, body string, want int) []byte {
	h.t.Helper()
	st, raw := h.call(method, path, body, nil)
	if st != want {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, st, raw, want)
	}
	return raw
}

// eventCount is the number of events a producer stored in tenant: Herald's
// own operational events (endpoint.created for the test's endpoints,
// emitted by housekeeping whenever it runs) are not counted.
func (h *herald) eventCount(tenant string) int {
	h.t.Helper()
	var out struct {
		Data []struct {
			Type string `json:"type"`
		} `json:"data"`
	}
	if st, raw := h.call("GET", "/v1/events?tenant="+tenant+"&limit=1000", nil, &out); st != 200 {
		h.t.Fatalf("list events: %d %s", st, raw)
	}
	n := 0
	for _, e := range out.Data {
		if !store.IsOperational(e.Type) {
			n++
		}
	}
	return n
}

// TestCatalogPinnedVersions: an endpoint pinned to v1 keeps receiving v1
// bytes after v2 ships while a second endpoint on v2 receives v2, both
// with the same event id, both signatures verifying in both schemes.
func TestCatalogPinnedVersions(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","description":"a file changed","resource_id":"/file_id",
		"versions":[{"version":1,"schema":`+fileV1+`,"example":{"file_id":"f_1"}}]}`, 201)
	rcv1, rcv2 := newReceiver(t, 200), newReceiver(t, 200)
	var ep1, ep2 struct {
		ID       string         `json:"id"`
		Secret   string         `json:"secret"`
		Versions map[string]int `json:"versions"`
	}
	st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcv1.URL, "event_types": []string{"file.updated"}}, &ep1)
	if st != 201 || ep1.Versions["file.updated"] != 1 {
		t.Fatalf("endpoint 1: %d %s (want pinned to the newest, 1)", st, raw)
	}
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`,"example":{"file_id":"f_1","revision":2}}`, 201)
	// Versions only grow.
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 422)
	st, raw = h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcv2.URL, "event_types": []string{"file.*"}}, &ep2)
	if st != 201 || ep2.Versions["file.updated"] != 2 {
		t.Fatalf("endpoint 2: %d %s (want pinned to the newest, 2)", st, raw)
	}

	var pub struct {
		ID       string `json:"id"`
		Version  int    `json:"version"`
		Sequence int64  `json:"sequence"`
	}
	st, raw = h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_9","revision":7},
		"data_versions":{"1":{"file_id":"f_9"}}}`, &pub)
	if st != 202 || pub.Version != 2 || pub.Sequence != 1 {
		t.Fatalf("publish: %d %s", st, raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for (len(rcv1.got()) == 0 || len(rcv2.got()) == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		rcv     *receiver
		secret  string
		version int
		data    string
	}{{rcv1, ep1.Secret, 1, `{"file_id":"f_9"}`}, {rcv2, ep2.Secret, 2, `{"file_id":"f_9","revision":7}`}} {
		got := c.rcv.got()
		if len(got) != 1 {
			t.Fatalf("v%d receiver got %d requests", c.version, len(got))
		}
		r := got[0]
		var env struct {
			ID       string          `json:"id"`
			Type     string          `json:"type"`
			Version  int             `json:"version"`
			Sequence int64           `json:"sequence"`
			Data     json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatal(err)
		}
		if env.ID != pub.ID || r.Header.Get("X-Event-Id") != pub.ID || r.Header.Get("Webhook-Id") != pub.ID {
			t.Errorf("v%d: event id %q / %q, want %q", c.version, env.ID, r.Header.Get("X-Event-Id"), pub.ID)
		}
		if env.Version != c.version || string(env.Data) != c.data || env.Type != "file.updated" {
			t.Errorf("v%d receiver got %s", c.version, r.Body)
		}
		if env.Sequence != 1 || r.Header.Get("X-Event-Sequence") != "1" {
			t.Errorf("v%d: sequence %d, header %q; want 1", c.version, env.Sequence, r.Header.Get("X-Event-Sequence"))
		}
		v := &webhook.Verifier{Secrets: []string{c.secret}}
		if err := v.VerifyHerald(r.Header.Get("X-Signature"), r.Body); err != nil {
			t.Errorf("v%d: X-Signature: %v", c.version, err)
		}
		if err := v.VerifyStandard(r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature"), r.Body); err != nil {
			t.Errorf("v%d: webhook-signature: %v", c.version, err)
		}
	}
	// The second event of the same file is number 2; another file starts at 1.
	for _, c := range []struct {
		file string
		want int64
	}{{"f_9", 2}, {"f_8", 1}} {
		st, raw = h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"`+c.file+`","revision":8},
			"data_versions":{"1":{"file_id":"`+c.file+`"}}}`, &pub)
		if st != 202 || pub.Sequence != c.want {
			t.Fatalf("publish %s: %d %s, want sequence %d", c.file, st, raw, c.want)
		}
	}
	// The event as read back is the newest version.
	var ev struct {
		Version int             `json:"version"`
		Data    json.RawMessage `json:"data"`
	}
	if st, raw := h.call("GET", "/v1/events/"+pub.ID, nil, &ev); st != 200 || ev.Version != 2 {
		t.Fatalf("get event: %d %s", st, raw)
	}
}

// TestCatalogPublishRefusals: each class of bad data answers 422 with the
// exact pointer and rule, and nothing is stored.
func TestCatalogPublishRefusals(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","resource_id":"/file_id","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	rcv := newReceiver(t, 200)
	st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcv.URL, "event_types": []string{"file.updated"}}, nil)
	if st != 201 {
		t.Fatalf("endpoint: %d %s", st, raw)
	}
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)

	v1 := `,"data_versions":{"1":{"file_id":"f_1"}}`
	for _, c := range []struct {
		name, body, want string
	}{
		{"missing field", `{"file_id":"f_1"}` + v1, "/data/revision: required"},
		{"wrong type", `{"file_id":"f_1","revision":"two"}` + v1, "/data/revision: type"},
		{"extra field", `{"file_id":"f_1","revision":2,"size":10}` + v1, "/data/size: additionalProperties"},
		{"wrong type in an older version", `{"file_id":"f_1","revision":2},"data_versions":{"1":{"file_id":3}}`, "/data_versions/1/file_id: type"},
		{"pinned v1 missing", `{"file_id":"f_1","revision":2}`, "/data_versions/1: required"},
		{"older version about another resource", `{"file_id":"f_1","revision":2},"data_versions":{"1":{"file_id":"f_2"}}`, "/data_versions/1/file_id: resource_id"},
		{"e-mail not marked personal", `{"file_id":"f_1","revision":2,"note":"ask jane.doe@example.com"}` + v1, "/data/note: personal-data: email"},
		{"phone", `{"file_id":"f_1","revision":2,"note":"+44 20 7946 0958"}` + v1, "/data/note: personal-data: phone"},
		{"card", `{"file_id":"f_1","revision":2,"note":"4111 1111 1111 1111"}` + v1, "/data/note: personal-data: payment-card"},
		{"iban", `{"file_id":"f_1","revision":2,"note":"GB82WEST12345698765432"}` + v1, "/data/note: personal-data: iban"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var prob struct {
				Detail string `json:"detail"`
				Errors []struct {
					Location string `json:"location"`
					Message  string `json:"message"`
				} `json:"errors"`
			}
			st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":`+c.body+`}`, &prob)
			if st != http.StatusUnprocessableEntity {
				t.Fatalf("publish = %d %s, want 422", st, raw)
			}
			if err := json.Unmarshal(raw, &prob); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(prob.Detail, c.want) {
				t.Fatalf("detail %q does not name %q: %s", prob.Detail, c.want, raw)
			}
			ptr, rule, _ := strings.Cut(c.want, ": ")
			if len(prob.Errors) == 0 || prob.Errors[0].Location != ptr || !strings.HasPrefix(prob.Errors[0].Message, rule) {
				t.Fatalf("errors = %+v, want location %s and rule %s", prob.Errors, ptr, rule)
			}
		})
	}
	// A version key written another way ("01") would name version 1 twice.
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2},"data_versions":{"01":{"file_id":"f_1"}}}`, nil); st != 422 || !strings.Contains(string(raw), "leading zeros") {
		t.Errorf("data_versions key \"01\": %d %s; want 422 naming the rule", st, raw)
	}
	if n := h.eventCount("acme"); n != 0 {
		t.Fatalf("%d events stored after refused publishes", n)
	}
	if len(rcv.got()) != 0 {
		t.Fatal("a refused event was delivered")
	}
	// A marked property may carry an address; the pinned version is there.
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2,"owner_email":"jane.doe@example.com"}`+v1+`}`, 202)
	// Uncatalogued types are only warned about by default.
	st, raw = h.call("POST", "/v1/events", `{"tenant":"acme","type":"user.signed_up","data":{"email":"jane.doe@example.com"}}`, nil)
	if st != 202 {
		t.Fatalf("uncatalogued publish with an address: %d %s, want 202 with a warning", st, raw)
	}
}

// TestCatalogSubscriptionsChecked: once the catalog has entries, an
// endpoint's event types must be catalogued (with suggestions), patterns
// must match one; --catalog strict refuses uncatalogued publishes.
func TestCatalogSubscriptionsChecked(t *testing.T) {
	h := startHerald(t, func(c *app.Config) { c.Catalog = "strict" })
	// An empty catalog checks nothing (existing users are not broken)…
	h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["anything.goes"]}`, 201)
	// …but strict mode refuses publishing what is not catalogued.
	raw := h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"i_1"}}`, 422)
	if !strings.Contains(string(raw), "not in the event catalog") {
		t.Fatalf("strict refusal: %s", raw)
	}
	h.mustCall("POST", "/v1/event-types", `{"name":"invoice.paid","versions":[{"version":1,"schema":{"type":"object","required":["invoice_id"]}}]}`, 201)
	h.mustCall("POST", "/v1/event-types", `{"name":"invoice.voided","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	raw = h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["invoice.piad"]}`, 422)
	if !strings.Contains(string(raw), "did you mean invoice.paid?") || !strings.Contains(string(raw), "body.event_types[0]") {
		t.Fatalf("misspelt subscription: %s", raw)
	}
	raw = h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["file.*"]}`, 422)
	if !strings.Contains(string(raw), "matches no catalogued event type") {
		t.Fatalf("pattern matching nothing: %s", raw)
	}
	raw = h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["invoice.paid"],"versions":{"invoice.paid":3}}`, 422)
	if !strings.Contains(string(raw), "has no version 3") {
		t.Fatalf("pin of a missing version: %s", raw)
	}
	var ep struct {
		Versions map[string]int `json:"versions"`
	}
	if st, raw := h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["invoice.*"]}`, &ep); st != 201 ||
		ep.Versions["invoice.paid"] != 1 || ep.Versions["invoice.voided"] != 1 {
		t.Fatalf("pattern subscription: %d %s", st, raw)
	}
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"invoice_id":"i_1"}}`, 202)
	// A tenant key reads the catalog but cannot change it.
	// Deprecation shows in the catalog and /contract.
	h.mustCall("POST", "/v1/event-types/invoice.voided/versions", `{"version":2,"schema":{"type":"object"}}`, 201)
	h.mustCall("PATCH", "/v1/event-types/invoice.voided", `{"deprecate":[1]}`, 200)
	var contract struct {
		EventTypes []struct {
			Name     string `json:"name"`
			Versions []struct {
				Version    int  `json:"version"`
				Deprecated bool `json:"deprecated"`
			} `json:"versions"`
		} `json:"event_types"`
	}
	if st, raw := h.call("GET", "/contract", nil, &contract); st != 200 || len(contract.EventTypes) != 2 ||
		contract.EventTypes[1].Name != "invoice.voided" || !contract.EventTypes[1].Versions[0].Deprecated {
		t.Fatalf("contract: %d %s", st, raw)
	}
}

// TestCatalogOpenAPIWebhooks: /openapi.json describes every event type
// version, and every operational event type, in its OpenAPI 3.1 webhooks
// section, and the document validates
// against the OpenAPI 3.1 specification schema (pb33f/libopenapi-validator).
func TestCatalogOpenAPIWebhooks(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","resource_id":"/file_id","versions":[{"version":1,"schema":`+fileV1+`,"example":{"file_id":"f_1"}}]}`, 201)
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`,"example":{"file_id":"f_1","revision":2}}`, 201)
	// invoice.paid's schema names a part of itself in $defs and refers
	// to it: receiver.ts builds a body of it (openapi-typescript made
	// $defs a required property of data when it stayed in the schema).
	h.mustCall("POST", "/v1/event-types", `{"name":"invoice.paid","versions":[{"version":1,"schema":{"type":"object","required":["invoice_id","amount"],
		"$defs":{"money":{"type":"object","required":["value","currency"],"properties":{"value":{"type":"integer"},"currency":{"type":"string"}}}},
		"properties":{"invoice_id":{"type":"string"},"amount":{"$ref":"#/$defs/money"},"refunded":{"$ref":"#/$defs/money"}}},
		"example":{"invoice_id":"in_1","amount":{"value":100,"currency":"EUR"}}}]}`, 201)
	h.mustCall("PATCH", "/v1/event-types/file.updated", `{"deprecate":[1]}`, 200)
	raw := h.mustCall("GET", "/openapi.json", "", 200)
	// .ci/openapi-types.sh generates a receiver's TypeScript types from
	// this document and compiles a receiver with them.
	if out := os.Getenv("HERALD_OPENAPI_OUT"); out != "" {
		if err := os.WriteFile(out, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Every webhook's example validates against that webhook's schema.
	var hooks struct {
		Webhooks map[string]struct {
			Post struct {
				RequestBody struct {
					Content map[string]struct {
						Schema json.RawMessage `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
				Responses map[string]struct {
					Description string `json:"description"`
				} `json:"responses"`
			} `json:"post"`
		} `json:"webhooks"`
	}
	if err := json.Unmarshal(raw, &hooks); err != nil {
		t.Fatal(err)
	}
	// Each webhook's schema is compiled where it sits in the document: it
	// may refer to components.schemas (a data schema with $defs).
	whole, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("herald:///openapi.json", whole); err != nil {
		t.Fatal(err)
	}
	for name, hook := range hooks.Webhooks {
		// The answers a receiver may give, as the retry policy reads them
		// (410 is not retried, unlike "any other answer").
		if r := hook.Post.Responses; !strings.Contains(r["410"].Description, "disabled") || !strings.Contains(r["default"].Description, "at most twice") || r["2XX"].Description == "" {
			t.Errorf("%s: responses %+v, want 2XX, 410 (endpoint disabled) and default (other 4xx at most twice)", name, r)
		}
		var body struct {
			Examples []json.RawMessage `json:"examples"`
		}
		schema := hook.Post.RequestBody.Content["application/json"].Schema
		if err := json.Unmarshal(schema, &body); err != nil || len(body.Examples) != 1 {
			t.Fatalf("%s: examples %v %s", name, err, schema)
		}
		sch, err := compiler.Compile("herald:///openapi.json#/webhooks/" + name + "/post/requestBody/content/application~1json/schema")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		example, err := jsonschema.UnmarshalJSON(strings.NewReader(string(body.Examples[0])))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(example); err != nil {
			t.Errorf("%s: example %s does not validate: %v", name, body.Examples[0], err)
		}
	}
	var doc struct {
		OpenAPI  string `json:"openapi"`
		Webhooks map[string]struct {
			Post struct {
				Deprecated  bool `json:"deprecated"`
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							Properties map[string]json.RawMessage `json:"properties"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			} `json:"post"`
		} `json:"webhooks"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") || len(doc.Webhooks) != 3+len(catalog.OperationalSchemas) || doc.Webhooks["delivery.dead_lettered"].Post.RequestBody.Content == nil || !doc.Webhooks["file.updated.v1"].Post.Deprecated {
		t.Fatalf("openapi %s, webhooks %+v", doc.OpenAPI, doc.Webhooks)
	}
	data := doc.Webhooks["file.updated.v2"].Post.RequestBody.Content["application/json"].Schema.Properties["data"]
	if !strings.Contains(string(data), `"revision"`) {
		t.Fatalf("v2's data schema: %s", data)
	}
	v := openAPIValidator(t, raw)
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("OpenAPI 3.1: %s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s %s", se.FieldPath, se.Reason)
			}
		}
	}
}

// TestCatalogOpenAPIWebhookRefs: a version's schema that refers to
// itself ("#/$defs/…", "#", its own $id) keeps its meaning once embedded in
// /openapi.json: every reference of the document resolves in the document
// (openapi-typescript refuses the whole document otherwise), the webhook's
// body schema applies the rules referred to, and a value that merely looks
// like a reference (a const) is left as it is.
func TestCatalogOpenAPIWebhookRefs(t *testing.T) {
	h := startHerald(t, nil)
	const schema = `{"$id":"https://example.com/doc.json","type":"object",
		"$defs":{"user":{"type":"object","properties":{"id":{"type":"string"},"manager":{"$ref":"#/$defs/user"}}}},
		"properties":{"owner":{"$ref":"#/$defs/user"},"editor":{"$ref":"https://example.com/doc.json#/$defs/user"},
			"parent":{"$ref":"#"},"tag":{"const":{"$ref":"#/not/a/ref"}}}}`
	h.mustCall("POST", "/v1/event-types", `{"name":"doc.shared","versions":[{"version":1,"schema":`+schema+`,"example":{"owner":{"id":"u_1"}}}]}`, 201)
	raw := h.mustCall("GET", "/openapi.json", "", 200)
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	resolve := func(ref string) any {
		cur := doc
		for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)]
		}
		return cur
	}
	refs := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if ref, ok := c.(string); ok && k == "$ref" {
					refs++
					if !strings.HasPrefix(ref, "#/") || resolve(ref) == nil {
						t.Errorf("$ref %q does not resolve in the document", ref)
					}
				}
				if k != "const" {
					walk(c)
				}
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if refs < 4 {
		t.Errorf("%d $refs in the document, want at least the schema's 4", refs)
	}
	const body = "#/webhooks/doc.shared.v1/post/requestBody/content/application~1json/schema"
	// The data schema and its $defs are components (openapi-typescript
	// makes a $defs left in a schema a required property, and cannot
	// follow a reference into a webhook's body); no $defs is left.
	if ref, _ := json.Marshal(resolve(body + "/properties/data")); string(ref) != `{"$ref":"#/components/schemas/doc.shared.v1"}` {
		t.Errorf("data: %s, want a reference to the component doc.shared.v1", ref)
	}
	if user := resolve("#/components/schemas/doc.shared.v1.user"); user == nil {
		t.Errorf("no component doc.shared.v1.user")
	}
	if strings.Contains(string(raw), `"$defs"`) {
		t.Errorf("a $defs is left in the document")
	}
	if tag, _ := json.Marshal(resolve("#/components/schemas/doc.shared.v1/properties/tag")); string(tag) != `{"const":{"$ref":"#/not/a/ref"}}` {
		t.Errorf("a const that looks like a reference: %s", tag)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("herald:///openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("herald:///openapi.json" + body)
	if err != nil {
		t.Fatal(err)
	}
	event := func(data string) any {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"id":"evt_1","type":"doc.shared","version":1,"tenant":"acme","occurred_at":"2026-01-01T00:00:00Z","data":` + data + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := sch.Validate(event(`{"owner":{"id":"u_1","manager":{"id":"u_2"}},"editor":{"id":"u_3"},"parent":{"owner":{"id":"u_4"}},"tag":{"$ref":"#/not/a/ref"}}`)); err != nil {
		t.Errorf("a valid body: %v", err)
	}
	for _, data := range []string{`{"owner":{"manager":{"id":2}}}`, `{"editor":{"id":3}}`, `{"parent":{"owner":{"id":4}}}`} {
		if err := sch.Validate(event(data)); err == nil {
			t.Errorf("data %s validates against the document's schema; the version's schema refuses it", data)
		}
	}
}

// TestCatalogOpenAPIOperationIDsUnique: OpenAPI requires every operation
// id to be unique; types whose names differ only in their separators
// (file.updated, file_updated, file-updated) get webhooks with distinct
// ids, none of them an API operation's.
func TestCatalogOpenAPIOperationIDsUnique(t *testing.T) {
	h := startHerald(t, nil)
	for _, name := range []string{"file.updated", "file_updated", "file-updated"} {
		h.mustCall("POST", "/v1/event-types", `{"name":"`+name+`","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	}
	var doc struct {
		Paths    map[string]map[string]json.RawMessage `json:"paths"`
		Webhooks map[string]map[string]json.RawMessage `json:"webhooks"`
	}
	raw := h.mustCall("GET", "/openapi.json", "", 200)
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for kind, items := range map[string]map[string]map[string]json.RawMessage{"paths": doc.Paths, "webhooks": doc.Webhooks} {
		for name, item := range items {
			for method, rawOp := range item {
				var op struct {
					OperationID string `json:"operationId"`
				}
				if json.Unmarshal(rawOp, &op) != nil || op.OperationID == "" {
					continue
				}
				where := kind + " " + name + " " + method
				if prev, dup := seen[op.OperationID]; dup {
					t.Errorf("operationId %q of %s is %s's too", op.OperationID, where, prev)
				}
				seen[op.OperationID] = where
			}
		}
	}
	if len(seen) < 3+len(catalog.OperationalSchemas) {
		t.Fatalf("%d operation ids: %v", len(seen), seen)
	}
}

// TestCatalogLeavesOwnAndUncataloguedTypesSubscribable: with a catalog,
// Herald's own event types (endpoint.*, herald.*) stay subscribable in
// either mode; in permissive mode (the default) so do uncatalogued types
// and patterns, which may be published; a close misspelling of a
// catalogued type is still refused with a suggestion.
func TestCatalogLeavesOwnAndUncataloguedTypesSubscribable(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"permissive", "strict"} {
		h := startHerald(t, func(c *app.Config) { c.Catalog = mode })
		h.mustCall("POST", "/v1/event-types", `{"name":"invoice.paid","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
		create := func(types string) (int, []byte) {
			return h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":`+types+`}`, nil)
		}
		for _, types := range []string{`["endpoint.*"]`, `["endpoint.disabled","endpoint.enabled"]`, `["herald.test"]`} {
			if st, raw := create(types); st != 201 {
				t.Errorf("%s: subscribe to %s: %d %s, want 201", mode, types, st, raw)
			}
		}
		want := 201
		if mode == "strict" {
			want = 422
		}
		for _, types := range []string{`["file.*"]`, `["file.created"]`} {
			if st, raw := create(types); st != want {
				t.Errorf("%s: subscribe to uncatalogued %s: %d %s, want %d", mode, types, st, raw, want)
			}
		}
		if st, raw := create(`["invoice.piad"]`); st != 422 || !strings.Contains(string(raw), "did you mean invoice.paid?") {
			t.Errorf("%s: misspelt subscription: %d %s, want 422 with a suggestion", mode, st, raw)
		}
	}
}

// TestCatalogUnpinnedEndpointsGetTheFirstVersion: an endpoint saved before
// a type was catalogued (here a pattern, and an empty filter) has no pin
// for it; after an incompatible v2 it still receives v1, publish requires
// v1's data for it, and an update of the endpoint pins it to 1, not 2.
func TestCatalogUnpinnedEndpointsGetTheFirstVersion(t *testing.T) {
	h := startHerald(t, nil)
	rcvP, rcvAll := newReceiver(t, 200), newReceiver(t, 200)
	var epP, epAll struct {
		ID       string         `json:"id"`
		Versions map[string]int `json:"versions"`
	}
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcvP.URL, "event_types": []string{"file.*"}}, &epP); st != 201 {
		t.Fatalf("endpoint: %d %s", st, raw)
	}
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcvAll.URL}, &epAll); st != 201 {
		t.Fatalf("endpoint: %d %s", st, raw)
	}
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)

	raw := h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2}}`, 422)
	if !strings.Contains(string(raw), "/data_versions/1: required") || !strings.Contains(string(raw), "version 1 of file.updated is received by 2 endpoints without a pin (given the type's first version) of tenant acme") {
		t.Fatalf("publish without v1 for unpinned endpoints: %s", raw)
	}
	// With one more endpoint that pins v1, the message counts each kind.
	h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"`+newReceiver(t, 200).URL+`","event_types":["file.updated"],"versions":{"file.updated":1}}`, 201)
	raw = h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2}}`, 422)
	if !strings.Contains(string(raw), "is received by 1 endpoint that pins it and 2 endpoints without a pin") {
		t.Fatalf("publish without v1 for pinned and unpinned endpoints: %s", raw)
	}
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2},"data_versions":{"1":{"file_id":"f_1"}}}`, 202)
	deadline := time.Now().Add(10 * time.Second)
	for (len(rcvP.got()) == 0 || len(rcvAll.got()) == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for name, r := range map[string]*receiver{"pattern": rcvP, "all types": rcvAll} {
		got := r.got()
		if len(got) != 1 {
			t.Fatalf("%s endpoint got %d requests", name, len(got))
		}
		var env struct {
			Version int             `json:"version"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(got[0].Body, &env); err != nil {
			t.Fatal(err)
		}
		if env.Version != 1 || string(env.Data) != `{"file_id":"f_1"}` {
			t.Errorf("%s endpoint received %s, want version 1", name, got[0].Body)
		}
	}
	// An update keeps the version it received: pinned to 1 explicitly.
	var upd struct {
		Versions map[string]int `json:"versions"`
	}
	if st, raw := h.call("PATCH", "/v1/endpoints/"+epP.ID, map[string]any{"event_types": []string{"file.*"}}, &upd); st != 200 || upd.Versions["file.updated"] != 1 {
		t.Fatalf("update: %d %s, want file.updated pinned to 1", st, raw)
	}
	// A new subscriber is pinned to the newest.
	var ep3 struct {
		Versions map[string]int `json:"versions"`
	}
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcvP.URL, "event_types": []string{"file.*"}}, &ep3); st != 201 || ep3.Versions["file.updated"] != 2 {
		t.Fatalf("new endpoint: %d %s, want pinned to 2", st, raw)
	}
}

// TestCatalogRepublishWithOtherDataVersions: the same event id with the
// same data but other data_versions is other content (409); the same
// request again is a duplicate (200).
func TestCatalogRepublishWithOtherDataVersions(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	rcv := newReceiver(t, 200)
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": rcv.URL, "event_types": []string{"file.updated"}}, nil); st != 201 {
		t.Fatalf("endpoint: %d %s", st, raw)
	}
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)
	pub := func(note string) string {
		return `{"id":"evt-1","tenant":"acme","type":"file.updated","data":{"file_id":"f_1","revision":2},"data_versions":{"1":{"file_id":"f_1","note":"` + note + `"}}}`
	}
	h.mustCall("POST", "/v1/events", pub("a"), 202)
	h.mustCall("POST", "/v1/events", pub("a"), 200)
	h.mustCall("POST", "/v1/events", pub("b"), 409)
}

// TestCatalogResourceIDCheckedAgainstSchemas: a resource_id the schema
// cannot carry, an example without it, and a schema that cannot accept an
// object are refused (422 naming the rule) and change nothing.
func TestCatalogResourceIDCheckedAgainstSchemas(t *testing.T) {
	h := startHerald(t, nil)
	for _, c := range []struct{ name, body, want string }{
		{"closed schema without the property", `{"name":"a.b","resource_id":"/nope","versions":[{"version":1,"schema":` + fileV1 + `}]}`, "closed"},
		{"object property", `{"name":"a.b","resource_id":"/f","versions":[{"version":1,"schema":{"type":"object","properties":{"f":{"type":"object"}}}}]}`, "must allow a string or a number"},
		{"example without a value", `{"name":"a.b","resource_id":"/file_id","versions":[{"version":1,"schema":` + fileV1 + `,"example":{"note":"x"}}]}`, "example must carry the resource id"},
		{"schema of a string", `{"name":"a.b","versions":[{"version":1,"schema":{"type":"string"}}]}`, "data is always a JSON object"},
	} {
		raw := h.mustCall("POST", "/v1/event-types", c.body, 422)
		if !strings.Contains(string(raw), c.want) {
			t.Errorf("%s: %s, want %q", c.name, raw, c.want)
		}
	}
	if raw := h.mustCall("GET", "/v1/event-types", "", 200); strings.Contains(string(raw), "a.b") {
		t.Fatalf("a refused type was stored: %s", raw)
	}
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","resource_id":"/file_id","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	raw := h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}}`, 422)
	if !strings.Contains(string(raw), "closed") {
		t.Errorf("version without the resource id: %s", raw)
	}
	var et struct {
		Versions []json.RawMessage `json:"versions"`
	}
	if st, raw := h.call("GET", "/v1/event-types/file.updated", nil, &et); st != 200 || len(et.Versions) != 1 {
		t.Fatalf("after a refused version: %d %s", st, raw)
	}
}

// TestCatalogExampleIsAnObject: data is always a JSON object, so an
// example that is not one is refused (422 naming the rule), even by a
// schema that accepts anything, at create and at a new version; nothing
// is stored. (null is no example: TestEventTypeExampleNullIsNoExample in
// internal/api.)
func TestCatalogExampleIsAnObject(t *testing.T) {
	h := startHerald(t, nil)
	for _, ex := range []string{`"hi"`, `[1]`, `1`, `"null"`} {
		raw := h.mustCall("POST", "/v1/event-types", `{"name":"any.thing","versions":[{"version":1,"schema":{},"example":`+ex+`}]}`, 422)
		if _, loc, msg := problemOf(t, raw); loc != "body.versions[0].example" || !strings.Contains(msg, "always a JSON object") {
			t.Errorf("example %s: %s", ex, raw)
		}
	}
	h.mustCall("GET", "/v1/event-types/any.thing", "", 404)
	h.mustCall("POST", "/v1/event-types", `{"name":"any.thing","versions":[{"version":1,"schema":{},"example":{"a":1}}]}`, 201)
	raw := h.mustCall("POST", "/v1/event-types/any.thing/versions", `{"version":2,"schema":{},"example":"hi"}`, 422)
	if _, loc, msg := problemOf(t, raw); loc != "body.example" || !strings.Contains(msg, "always a JSON object") {
		t.Errorf("a new version's example: %s", raw)
	}
	var et struct {
		Versions []json.RawMessage `json:"versions"`
	}
	if st, raw := h.call("GET", "/v1/event-types/any.thing", nil, &et); st != 200 || len(et.Versions) != 1 {
		t.Fatalf("after a refused version: %d %s", st, raw)
	}
}

// TestContractFollowsCatalogConfig: /contract's order, payload and catalog
// texts say what this server does.
func TestContractFollowsCatalogConfig(t *testing.T) {
	var c struct {
		Order   string `json:"order"`
		Payload string `json:"payload"`
		Catalog string `json:"catalog"`
	}
	h := startHerald(t, func(cfg *app.Config) { cfg.Catalog = "strict"; cfg.PersonalData = "off" })
	h.mustCall("POST", "/v1/event-types", `{"name":"invoice.paid","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	if st, raw := h.call("GET", "/contract", nil, &c); st != 200 || strings.Contains(c.Order, "sequence") ||
		!strings.HasPrefix(c.Catalog, "strict") || !strings.Contains(c.Payload, "NOT checked") {
		t.Fatalf("contract: %d %s", st, raw)
	}
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","resource_id":"/file_id","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	if st, raw := h.call("GET", "/contract", nil, &c); st != 200 || !strings.Contains(c.Order, "file.updated (resource /file_id) carry sequence") ||
		strings.Contains(c.Order, "invoice.paid") {
		t.Fatalf("contract with a numbered type: %d %s", st, raw)
	}
	h2 := startHerald(t, nil)
	if st, raw := h2.call("GET", "/contract", nil, &c); st != 200 || !strings.HasPrefix(c.Catalog, "permissive") ||
		!strings.Contains(c.Payload, "refused (422) for catalogued types and warned about") {
		t.Fatalf("default contract: %d %s", st, raw)
	}
}

// TestCatalogRefusesInconsistentChanges: the newest version cannot be
// deprecated, a version cannot be deprecated and undeprecated at once, and
// a pin needs a subscription; each answers 422 and changes nothing.
func TestCatalogRefusesInconsistentChanges(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	h.mustCall("POST", "/v1/event-types", `{"name":"invoice.paid","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	// Created again, or again in other case: 409 saying what to do.
	if raw := h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":{"type":"object"}}]}`, 409); !strings.Contains(string(raw), "already exists: add a version") {
		t.Errorf("file.updated created twice: %s", raw)
	}
	if raw := h.mustCall("POST", "/v1/event-types", `{"name":"File.Updated","versions":[{"version":1,"schema":{"type":"object"}}]}`, 409); !strings.Contains(string(raw), "only in case") {
		t.Errorf("File.Updated beside file.updated: %s", raw)
	}
	// A personal-data mark that is not a boolean would be ignored by the
	// guard: refused at create and at a new version, nothing stored.
	if raw := h.mustCall("POST", "/v1/event-types", `{"name":"user.created","versions":[{"version":1,"schema":{"type":"object","properties":{"email":{"type":"string","x-herald-personal-data":"yes"}}}}]}`, 422); !strings.Contains(string(raw), "x-herald-personal-data at /properties/email/x-herald-personal-data must be true or false") {
		t.Errorf("a mark of \"yes\" at create: %s", raw)
	}
	h.mustCall("GET", "/v1/event-types/user.created", "", 404)
	if raw := h.mustCall("POST", "/v1/event-types/invoice.paid/versions", `{"version":2,"schema":{"type":"object","x-herald-personal-data":1}}`, 422); !strings.Contains(string(raw), "must be true or false") {
		t.Errorf("a mark of 1 in a new version: %s", raw)
	}
	raw := h.mustCall("PATCH", "/v1/event-types/file.updated", `{"deprecate":[1]}`, 422)
	if !strings.Contains(string(raw), "newest version of file.updated (1) cannot be deprecated") {
		t.Errorf("deprecate the newest: %s", raw)
	}
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)
	raw = h.mustCall("PATCH", "/v1/event-types/file.updated", `{"deprecate":[1],"undeprecate":[1]}`, 422)
	if !strings.Contains(string(raw), "both in deprecate and undeprecate") {
		t.Errorf("deprecate and undeprecate: %s", raw)
	}
	var et struct {
		Versions []struct {
			Deprecated bool `json:"deprecated"`
		} `json:"versions"`
	}
	if st, raw := h.call("GET", "/v1/event-types/file.updated", nil, &et); st != 200 || et.Versions[0].Deprecated || et.Versions[1].Deprecated {
		t.Fatalf("after refused changes: %d %s", st, raw)
	}
	h.mustCall("PATCH", "/v1/event-types/file.updated", `{"deprecate":[1]}`, 200)

	raw = h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["file.updated"],"versions":{"invoice.paid":1}}`, 422)
	if !strings.Contains(string(raw), "does not subscribe to invoice.paid") {
		t.Errorf("pin without subscription: %s", raw)
	}
	var ep struct {
		ID       string         `json:"id"`
		Versions map[string]int `json:"versions"`
	}
	if st, raw := h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["file.updated"],"versions":{"file.updated":1}}`, &ep); st != 201 {
		t.Fatalf("endpoint: %d %s", st, raw)
	}
	h.mustCall("PATCH", "/v1/endpoints/"+ep.ID, `{"versions":{"invoice.paid":1}}`, 422)
	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID, nil, &ep); st != 200 || len(ep.Versions) != 1 || ep.Versions["file.updated"] != 1 {
		t.Fatalf("after a refused pin: %d %s", st, raw)
	}
}

// problemOf decodes a 422 (or other problem) answer's detail and first
// error.
func problemOf(t *testing.T, raw []byte) (detail, location, message string) {
	t.Helper()
	var prob struct {
		Detail string `json:"detail"`
		Errors []struct {
			Location string `json:"location"`
			Message  string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &prob); err != nil {
		t.Fatalf("problem %s: %v", raw, err)
	}
	if len(prob.Errors) == 0 {
		return prob.Detail, "", ""
	}
	return prob.Detail, prob.Errors[0].Location, prob.Errors[0].Message
}

// TestCatalogResourceIDOneSpellingPerNumber: a number is the sequence
// counter's key as written, so 1.0, 1e0, 1.00, 10e-1 and -0 would each
// start a counter of their own (receivers keep the highest sequence: a
// producer mixing encoders would lose events). They are refused (422
// naming the rule and the pointer, nothing stored); 1 and "1" share one
// counter.
func TestCatalogResourceIDOneSpellingPerNumber(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"num.changed","resource_id":"/a","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	seq := func(data string, want int64) {
		t.Helper()
		var out struct {
			Sequence int64 `json:"sequence"`
		}
		if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"num.changed","data":`+data+`}`, &out); st != 202 || out.Sequence != want {
			t.Fatalf("publish %s = %d %s; want 202 with sequence %d", data, st, raw, want)
		}
	}
	seq(`{"a":1}`, 1)
	seq(`{"a":"1"}`, 2)
	for _, data := range []string{`{"a":1.0}`, `{"a":1e0}`, `{"a":1.00}`, `{"a":10e-1}`, `{"a":-0}`, `{"a":1E+0}`} {
		st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"num.changed","data":`+data+`}`, nil)
		if st != http.StatusUnprocessableEntity {
			t.Fatalf("publish %s = %d %s; want 422", data, st, raw)
		}
		detail, loc, msg := problemOf(t, raw)
		if loc != "/data/a" || !strings.HasPrefix(msg, "resource_id: ") || !strings.Contains(msg, catalog.ResourceIDRule) || !strings.Contains(detail, "/data/a: resource_id") {
			t.Fatalf("publish %s: %s; want the pointer /data/a and the rule", data, raw)
		}
	}
	if n := h.eventCount("acme"); n != 2 {
		t.Fatalf("%d events stored, want 2 (the refused ones are not)", n)
	}
	seq(`{"a":1}`, 3)
	// The example of a version is held to the same rule.
	raw := h.mustCall("POST", "/v1/event-types/num.changed/versions", `{"version":2,"schema":{"type":"object"},"example":{"a":2.0}}`, 422)
	if _, loc, msg := problemOf(t, raw); loc != "body.example" || !strings.Contains(msg, catalog.ResourceIDRule) {
		t.Fatalf("example with 2.0: %s; want the rule", raw)
	}
}

// TestCatalogCaseVariantPublishRefused: a type differing only in case
// from a catalogued one would be published as another, uncatalogued type
// (no schema, version, sequence or personal-data refusal). It is refused
// (422 naming the catalogued type) in the default permissive mode, also
// on a node that had published the variant before the type was catalogued
// (its catalog cache knew it as uncatalogued).
func TestCatalogCaseVariantPublishRefused(t *testing.T) {
	h := startHerald(t, nil) // --catalog permissive
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"File.updated","data":{"file_id":"f_0"}}`, 202)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	for _, typ := range []string{"File.updated", "FILE.UPDATED", "file.Updated"} {
		st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"`+typ+`","data":{"file_id":"f_1","size":3,"note":"jane.doe@example.com"}}`, nil)
		if st != http.StatusUnprocessableEntity {
			t.Fatalf("publish %s = %d %s; want 422", typ, st, raw)
		}
		_, loc, msg := problemOf(t, raw)
		if loc != "body.type" || !strings.Contains(msg, typ+" differs from catalogued file.updated only in case") {
			t.Fatalf("publish %s: %s; want body.type naming file.updated", typ, raw)
		}
	}
	if n := h.eventCount("acme"); n != 1 {
		t.Fatalf("%d events stored, want 1 (the variant published before the catalog entry)", n)
	}
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"file.updated","data":{"file_id":"f_1"}}`, 202)
}

// TestCatalogRetryAfterCatalogChange: a publish accepted earlier and
// retried (same id, or same Idempotency-Key; same type and data) after the
// catalog changed — a schema added for its type, a new version making
// data_versions required — answers 200 with the original event, as an
// idempotent retry does; other content under the id keeps its 409 (or
// the catalog's 422 when invalid), and a new event is validated.
func TestCatalogRetryAfterCatalogChange(t *testing.T) {
	h := startHerald(t, nil)
	pub := func(body string, want int, hdr ...string) publishRespDup {
		t.Helper()
		var out publishRespDup
		if st, raw := h.call("POST", "/v1/events", body, &out, hdr...); st != want {
			t.Fatalf("publish %s = %d %s; want %d", body, st, raw, want)
		}
		return out
	}
	l1 := `{"id":"L1","tenant":"acme","type":"later.cat","data":{"y":1}}`
	orig := pub(l1, 202)
	byKey := `{"tenant":"acme","type":"later.cat","data":{"y":1}}`
	origK := pub(byKey, 202, "Idempotency-Key", "K1")
	h.mustCall("POST", "/v1/event-types", `{"name":"later.cat","versions":[{"version":1,"schema":{"type":"object","required":["x"]}}]}`, 201)

	if d := pub(l1, 200); !d.Duplicate || d.ID != "L1" || d.ID != orig.ID || string(d.Data) != `{"y":1}` || d.Deliveries != orig.Deliveries {
		t.Fatalf("retry by id after the schema: %+v; want the original, duplicate", d)
	}
	if d := pub(byKey, 200, "Idempotency-Key", "K1"); !d.Duplicate || d.ID != origK.ID {
		t.Fatalf("retry by key after the schema: %+v; want the original %s", d, origK.ID)
	}
	h.mustCall("POST", "/v1/events", `{"id":"L1","tenant":"acme","type":"later.cat","data":{"x":1}}`, 409)
	raw := h.mustCall("POST", "/v1/events", `{"id":"L1","tenant":"acme","type":"later.cat","data":{"y":2}}`, 422)
	if !strings.Contains(string(raw), "/data/x: required") {
		t.Fatalf("other invalid content under L1: %s", raw)
	}
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"later.cat","data":{"y":1}}`, 422)
	if st, raw := h.call("POST", "/v1/events", byKey, nil, "Idempotency-Key", "K2"); st != 422 {
		t.Fatalf("the same body under a new key: %d %s; want 422", st, raw)
	}
	h.mustCall("POST", "/v1/events", `{"id":"L2","tenant":"acme","type":"later.cat","data":{"y":1}}`, 422)
	if n := h.eventCount("acme"); n != 2 {
		t.Fatalf("%d events stored, want the 2 originals", n)
	}

	// A new version: an endpoint pinning 1 makes data_versions required.
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	h.mustCall("POST", "/v1/endpoints", `{"tenant":"acme","url":"`+newReceiver(t, 200).URL+`","event_types":["file.updated"]}`, 201)
	f1 := `{"id":"F1","tenant":"acme","type":"file.updated","data":{"file_id":"f_1"}}`
	pub(f1, 202)
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)
	if d := pub(f1, 200); !d.Duplicate || d.ID != "F1" {
		t.Fatalf("retry after version 2: %+v; want the original, duplicate", d)
	}
	raw = h.mustCall("POST", "/v1/events", `{"id":"F2","tenant":"acme","type":"file.updated","data":{"file_id":"f_1"}}`, 422)
	if !strings.Contains(string(raw), "/data_versions/1: required") {
		t.Fatalf("a new event after version 2: %s", raw)
	}
}

type publishRespDup struct {
	ID         string          `json:"id"`
	Data       json.RawMessage `json:"data"`
	Deliveries int             `json:"deliveries"`
	Duplicate  bool            `json:"duplicate"`
}

// TestCatalogUnsubscribingDropsPins: a pin of a type the endpoint no
// longer subscribes to is dropped, so subscribing again pins the newest
// version, as for a new endpoint, instead of bringing back the old
// (deprecated) pin. {"versions":{}} changes no pin (PATCH versions names
// the pins to change; others are kept).
func TestCatalogUnsubscribingDropsPins(t *testing.T) {
	h := startHerald(t, nil)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	h.mustCall("POST", "/v1/event-types", `{"name":"file.created","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	type ep struct {
		ID         string         `json:"id"`
		EventTypes []string       `json:"event_types"`
		Versions   map[string]int `json:"versions"`
	}
	var e ep
	if st, raw := h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/x","event_types":["file.updated","file.created"],"versions":{"file.updated":1}}`, &e); st != 201 {
		t.Fatalf("endpoint: %d %s", st, raw)
	}
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)
	h.mustCall("PATCH", "/v1/event-types/file.updated", `{"deprecate":[1]}`, 200)
	patch := func(body string, want map[string]int) {
		t.Helper()
		var got ep
		if st, raw := h.call("PATCH", "/v1/endpoints/"+e.ID, body, &got); st != 200 || !maps.Equal(got.Versions, want) {
			t.Fatalf("PATCH %s = %d %s; want versions %v", body, st, raw, want)
		}
		var read ep
		if st, raw := h.call("GET", "/v1/endpoints/"+e.ID, nil, &read); st != 200 || !maps.Equal(read.Versions, want) {
			t.Fatalf("after PATCH %s: GET = %d %s; want versions %v", body, st, raw, want)
		}
	}
	patch(`{"versions":{}}`, map[string]int{"file.updated": 1, "file.created": 1})
	patch(`{"event_types":["zzz.qqq","file.created"]}`, map[string]int{"file.created": 1})
	patch(`{"event_types":["zzz.qqq","file.created","file.updated"]}`, map[string]int{"file.created": 1, "file.updated": 2})
	var fresh ep
	if st, raw := h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/y","event_types":["file.updated"]}`, &fresh); st != 201 || fresh.Versions["file.updated"] != 2 {
		t.Fatalf("new endpoint: %d %s; want file.updated pinned to 2", st, raw)
	}
	// A pattern still matching keeps the pin.
	patch(`{"event_types":["file.*"]}`, map[string]int{"file.created": 1, "file.updated": 2})
}

// TestPublishAnswersAreDeclared: every answer POST /v1/events gives — the
// new event (202), a duplicate (200, by Idempotency-Key or repeated id),
// and its refusals (400, 401, 403, 409, 413, 415, 422) — is declared by
// /openapi.json, checked by an OpenAPI 3.1 validator on the real answers;
// so are the event-type routes' refusals beyond their declared 409.
func TestPublishAnswersAreDeclared(t *testing.T) {
	h := startHerald(t, func(c *app.Config) { c.MaxPayloadBytes = 1024 })
	raw := h.mustCall("GET", "/openapi.json", "", 200)
	v := openAPIValidator(t, raw)
	var k struct{ Key string }
	if st, raw := h.call("POST", "/v1/api-keys", map[string]any{"name": "p", "role": "publisher", "tenant": "acme"}, &k); st != 201 {
		t.Fatalf("create key: %d %s", st, raw)
	}
	check := func(what, key, method, path, contentType, body string, want int, hdr ...string) {
		t.Helper()
		req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", contentType)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != want {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d %s; want %d", what, resp.StatusCode, b, want)
		}
		// The validator reads the request's body again.
		vreq, _ := http.NewRequest(method, path, strings.NewReader(body))
		vreq.Header = req.Header
		if ok, verrs := v.ValidateHttpResponse(vreq, resp); !ok {
			for _, e := range verrs {
				t.Errorf("%s (%d): not as /openapi.json declares: %s: %s", what, want, e.Message, e.Reason)
			}
		}
	}
	const js = "application/json"
	ev := `{"id":"D1","tenant":"acme","type":"order.placed","data":{"n":1}}`
	check("new event", testAPIKey, "POST", "/v1/events", js, ev, 202)
	check("duplicate by id", testAPIKey, "POST", "/v1/events", js, ev, 200)
	check("new event with a key", testAPIKey, "POST", "/v1/events", js, `{"tenant":"acme","type":"order.placed","data":{"n":2}}`, 202, "Idempotency-Key", "K1")
	check("duplicate by key", testAPIKey, "POST", "/v1/events", js, `{"tenant":"acme","type":"order.placed","data":{"n":2}}`, 200, "Idempotency-Key", "K1")
	check("other content under the id", testAPIKey, "POST", "/v1/events", js, `{"id":"D1","tenant":"acme","type":"order.placed","data":{"n":3}}`, 409)
	check("malformed JSON", testAPIKey, "POST", "/v1/events", js, `{"tenant":`, 400)
	check("unknown key", "nope", "POST", "/v1/events", js, ev, 401)
	check("another tenant", k.Key, "POST", "/v1/events", js, `{"tenant":"globex","type":"order.placed","data":{"n":1}}`, 403)
	check("not JSON", testAPIKey, "POST", "/v1/events", "text/plain", ev, 415)
	check("data not an object", testAPIKey, "POST", "/v1/events", js, `{"tenant":"acme","type":"order.placed","data":[1]}`, 422)
	check("too large", testAPIKey, "POST", "/v1/events", js, `{"tenant":"acme","type":"order.placed","data":{"s":"`+strings.Repeat("x", 1100)+`"}}`, 413)
	et := `{"name":"order.placed","versions":[{"version":1,"schema":{"type":"object"}}]}`
	check("event type", testAPIKey, "POST", "/v1/event-types", js, et, 201)
	check("event type again", testAPIKey, "POST", "/v1/event-types", js, et, 409)
	check("event type, malformed", testAPIKey, "POST", "/v1/event-types", js, `{"name":`, 400)
	check("event type, by a publisher", k.Key, "POST", "/v1/event-types", js, et, 403)
	check("version, by a publisher", k.Key, "POST", "/v1/event-types/order.placed/versions", js, `{"version":2,"schema":{"type":"object"}}`, 403)
	check("deprecate, malformed", testAPIKey, "PATCH", "/v1/event-types/order.placed", js, `{"deprecate":`, 400)
}

// openAPIValidator is an OpenAPI 3.1 validator of the document raw.
func openAPIValidator(t *testing.T, raw []byte) validator.Validator {
	t.Helper()
	d, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	return v
}

// TestCatalogPersonalDataRefusalsCountedOnce: a publish refused for
// personal data adds its findings to
// herald_events_personal_data_total{action="refused"} once, though a
// refusal by the cached catalog entry is checked again afresh before it is
// answered; a retry answered as the duplicate of an event accepted before
// the catalog changed is not a refusal and counts nothing.
func TestCatalogPersonalDataRefusalsCountedOnce(t *testing.T) {
	h := startHerald(t, nil)
	refused := func() float64 {
		t.Helper()
		_, body := h.call("GET", "/metrics", nil, nil)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		n := 0.0
		for _, m := range fams["herald_events_personal_data_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == "refused" {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	h.mustCall("POST", "/v1/event-types", `{"name":"pd.checked","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	for i := 1; i <= 3; i++ {
		h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"pd.checked","data":{"contact":"jane.doe@example.com"}}`, 422)
		if n := refused(); n != float64(i) {
			t.Fatalf("after %d refused publishes with one e-mail each: refused=%v; want %d", i, n, i)
		}
	}
	// Accepted uncatalogued (personal data warned), then catalogued: the
	// retry is answered 200 with the original, nothing refused.
	ev := `{"id":"P1","tenant":"acme","type":"pd.later","data":{"contact":"jane.doe@example.com"}}`
	h.mustCall("POST", "/v1/events", ev, 202)
	h.mustCall("POST", "/v1/event-types", `{"name":"pd.later","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201)
	for range 2 {
		h.mustCall("POST", "/v1/events", ev, 200)
	}
	if n := refused(); n != 3 {
		t.Fatalf("after 2 retries answered as duplicates: refused=%v; want 3 (unchanged)", n)
	}
}

// TestCatalogPatchWithoutChangeKeepsUpdatedAt: PATCH /v1/event-types/{name}
// with nothing to change — {}, the description the type has, a version
// already deprecated (or current) — answers 200 with the type as it is:
// updated_at is not moved (it was, to the time of the request), and a
// later GET shows the same. A real change moves it. Run on PostgreSQL too
// (HERALD_TEST_E2E_DB=postgres).
func TestCatalogPatchWithoutChangeKeepsUpdatedAt(t *testing.T) {
	clk := newFakeClock()
	h := startHerald(t, func(c *app.Config) { c.Clock = clk })
	h.mustCall("POST", "/v1/event-types", `{"name":"file.updated","description":"a file changed","versions":[{"version":1,"schema":`+fileV1+`}]}`, 201)
	clk.Advance(time.Hour)
	h.mustCall("POST", "/v1/event-types/file.updated/versions", `{"version":2,"schema":`+fileV2+`}`, 201)
	clk.Advance(time.Hour)
	h.mustCall("PATCH", "/v1/event-types/file.updated", `{"deprecate":[1]}`, 200)
	var want struct {
		Description string    `json:"description"`
		UpdatedAt   time.Time `json:"updated_at"`
		Versions    []struct {
			Deprecated bool `json:"deprecated"`
		} `json:"versions"`
	}
	if st, raw := h.call("GET", "/v1/event-types/file.updated", nil, &want); st != 200 || !want.UpdatedAt.Equal(clk.Now().Truncate(time.Microsecond)) {
		t.Fatalf("GET after deprecating: %d %s; want updated_at %v", st, raw, clk.Now())
	}
	for _, body := range []string{`{}`, `{"description":"a file changed"}`, `{"deprecate":[1]}`, `{"undeprecate":[2]}`, `{"deprecate":[],"undeprecate":[]}`} {
		clk.Advance(time.Hour)
		patched := h.mustCall("PATCH", "/v1/event-types/file.updated", body, 200)
		read := h.mustCall("GET", "/v1/event-types/file.updated", "", 200)
		if string(patched) != string(read) {
			t.Errorf("PATCH %s answered %s; GET then answers %s", body, patched, read)
		}
		var got struct {
			UpdatedAt time.Time `json:"updated_at"`
		}
		if err := json.Unmarshal(read, &got); err != nil || !got.UpdatedAt.Equal(want.UpdatedAt) {
			t.Errorf("PATCH %s, which changes nothing, moved updated_at from %v: %s", body, want.UpdatedAt, read)
		}
	}
	clk.Advance(time.Hour)
	var changed struct {
		Description string    `json:"description"`
		UpdatedAt   time.Time `json:"updated_at"`
	}
	if st, raw := h.call("PATCH", "/v1/event-types/file.updated", `{"description":"a file's content changed"}`, &changed); st != 200 ||
		changed.Description != "a file's content changed" || !changed.UpdatedAt.Equal(clk.Now().Truncate(time.Microsecond)) {
		t.Fatalf("PATCH of the description: %d %s; want updated_at %v", st, raw, clk.Now())
	}
}

// TestPersonalDataOffStillChecksExamples: --personal-data off stops the
// guard on published data only; a version's example, which the catalog
// and /openapi.json show to every reader, is still refused for unmarked
// personal data, and /contract says so.
func TestPersonalDataOffStillChecksExamples(t *testing.T) {
	h := startHerald(t, func(cfg *app.Config) { cfg.PersonalData = "off" })
	st, raw := h.call("POST", "/v1/event-types", `{"name":"contact.added","versions":[{"version":1,"schema":{"type":"object"},"example":{"owner":"jane@example.com"}}]}`, nil)
	if st != 422 || !strings.Contains(string(raw), "example carries personal data at /owner") {
		t.Fatalf("example with an address under off: %d %s; want 422", st, raw)
	}
	h.mustCall("POST", "/v1/event-types", `{"name":"contact.added","versions":[{"version":1,"schema":{"type":"object"},"example":{"owner":"c_1"}}]}`, 201)
	h.mustCall("POST", "/v1/events", `{"tenant":"acme","type":"contact.added","data":{"owner":"jane@example.com"}}`, 202)
	var c struct {
		Payload string `json:"payload"`
	}
	if st, raw := h.call("GET", "/contract", nil, &c); st != 200 || !strings.Contains(c.Payload, "examples are still checked") {
		t.Errorf("contract under off: %d %s; want it to say examples are still checked", st, raw)
	}
}
