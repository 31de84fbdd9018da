package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/herald-webhooks/herald/internal/catalog"
	"github.com/herald-webhooks/herald/internal/store"
)

// compactObject compacts raw, which must be a JSON object.
func compactObject(raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// contractWithCatalog is the configured contract with the event catalog
// added: "event_types", each with its versions and their deprecation.
func (s *Server) contractWithCatalog(ctx context.Context) (any, error) {
	cat, err := s.publicCatalog(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(s.cfg.Contract)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return s.cfg.Contract, nil //nolint:nilerr // a contract that is not an object is served as it is
	}
	list := make([]contractEventType, 0, len(cat)) // documented by documentProbes
	for _, t := range cat {
		e := contractEventType{Name: t.Name, Description: t.Description, ResourceID: t.ResourceID}
		for _, v := range t.Versions {
			e.Versions = append(e.Versions, contractEventVersion{v.Version, v.Deprecated})
			e.Newest = v.Version
		}
		list = append(list, e)
	}
	doc["event_types"] = list
	var sequenced []string
	for _, t := range cat {
		if t.ResourceID != "" {
			sequenced = append(sequenced, t.Name+" (resource "+t.ResourceID+")")
		}
	}
	if _, ok := doc["order"]; ok {
		doc["order"] = OrderText(sequenced)
	}
	return doc, nil
}

// withWebhooks serves GET /openapi.json with the OpenAPI 3.1 "webhooks"
// section filled from the event catalog: one webhook per event type
// version ("file.updated.v2"), whose request body is the delivered
// envelope with the version's schema as data, so receivers can generate
// types with standard tools. Everything else goes to next.
func (s *Server) withWebhooks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi.json" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		doc, err := s.OpenAPIWithWebhooks(r.Context())
		if err != nil {
			writeProblem(w, http.StatusServiceUnavailable, "the store is unavailable; retry later")
			return
		}
		w.Header().Set("Content-Type", "application/openapi+json")
		_, _ = w.Write(doc)
	})
}

// OpenAPIWithWebhooks renders the OpenAPI document with the catalog's
// webhooks (see withWebhooks).
func (s *Server) OpenAPIWithWebhooks(ctx context.Context) ([]byte, error) {
	cat, err := s.publicCatalog(ctx)
	if err != nil {
		return nil, err
	}
	base, err := json.Marshal(s.api.OpenAPI())
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, err
	}
	hooks := map[string]any{}
	comps := newSchemaComponents(doc)
	for _, t := range cat {
		for _, v := range t.Versions {
			hooks[webhookName(t, v)] = webhookItem(t, v, comps)
		}
	}
	comps.addTo(doc)
	for typ, schema := range catalog.OperationalSchemas {
		hooks[typ] = operationalWebhookItem(typ, schema, catalog.OperationalExamples[typ])
	}
	doc["webhooks"] = hooks
	return json.Marshal(doc)
}

// operationalWebhookItem describes one of Herald's operational event types
// (catalog.OperationalSchemas): the envelope has no version (data carries
// "version":1).
func operationalWebhookItem(typ, schema, example string) map[string]any {
	var data, ex any
	if err := json.Unmarshal([]byte(schema), &data); err != nil {
		data = map[string]any{"type": "object"}
	}
	body := map[string]any{"type": "object", "required": []string{"id", "type", "tenant", "occurred_at", "data"}, "properties": map[string]any{
		"id":          map[string]any{"type": "string"},
		"type":        map[string]any{"type": "string", "const": typ},
		"tenant":      map[string]any{"type": "string", "description": "the endpoint's tenant, or the operator tenant (--operator-tenant)"},
		"occurred_at": map[string]any{"type": "string", "format": "date-time"},
		"data":        data,
	}}
	if json.Unmarshal([]byte(example), &ex) == nil {
		body["examples"] = []any{map[string]any{"id": "evt_op_example", "type": typ, "tenant": "acme", "occurred_at": "2026-01-31T09:00:00Z", "data": ex}}
	}
	return map[string]any{"post": map[string]any{
		"operationId": "operational-" + strings.NewReplacer(".", "-", "_", "-").Replace(typ),
		"summary":     typ + " (operational event)",
		"description": "Herald's own event, sent to endpoints that subscribe to it (docs/contract.md, \"Operational events\"). Signed like every event.",
		"tags":        []string{"webhooks"},
		"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": body}}},
		"responses":   webhookResponses,
	}}
}

// webhookResponses are the answers a receiver may give, as the retry
// policy reads them (docs/contract.md, "what is retried").
var webhookResponses = map[string]any{
	"2XX":     map[string]any{"description": "received: the delivery succeeded"},
	"410":     map[string]any{"description": "gone: no retry, the delivery is dead-lettered and the endpoint disabled"},
	"429":     map[string]any{"description": "retried, not before Retry-After (capped at 24 h)"},
	"503":     map[string]any{"description": "retried, not before Retry-After when given (capped at 24 h)"},
	"default": map[string]any{"description": "5xx, 408 and no answer (network error, timeout): retried on the schedule; other 4xx and 3xx: retried at most twice, then dead-lettered (3xx is never followed)"},
}

// webhookName is the name of an event type version's webhook in the
// OpenAPI document ("file.updated.v2"), unique since type names are.
func webhookName(t store.EventType, v store.EventTypeVersion) string {
	return t.Name + ".v" + strconv.Itoa(v.Version)
}

// webhookItem describes version v of event type t; a data schema that
// names or refers to parts of itself goes to comps (hoistDataSchema).
func webhookItem(t store.EventType, v store.EventTypeVersion, comps *schemaComponents) map[string]any {
	var data any
	if err := json.Unmarshal(v.Schema, &data); err != nil {
		data = map[string]any{"type": "object"}
	}
	if m, ok := data.(map[string]any); ok {
		id, _ := m["$id"].(string)
		delete(m, "$schema") // the document's dialect (JSON Schema 2020-12) applies
		delete(m, "$id")
		data = hoistDataSchema(m, webhookName(t, v), id, comps)
	}
	props := map[string]any{
		"id":          map[string]any{"type": "string", "description": "event id: the same for every version and attempt"},
		"type":        map[string]any{"type": "string", "const": t.Name},
		"version":     map[string]any{"type": "integer", "const": v.Version},
		"tenant":      map[string]any{"type": "string"},
		"occurred_at": map[string]any{"type": "string", "format": "date-time"},
		"data":        data,
	}
	required := []string{"id", "type", "version", "tenant", "occurred_at", "data"}
	if t.ResourceID != "" {
		props["sequence"] = map[string]any{"type": "integer", "minimum": 1, "description": "number of the event among its type's events about the resource " + t.ResourceID + ": strictly increasing in commit order, no gaps"}
		required = append(required, "sequence")
	}
	body := map[string]any{"type": "object", "properties": props, "required": required}
	if len(v.Example) > 0 {
		var ex any
		if json.Unmarshal(v.Example, &ex) == nil {
			// The example is a whole delivered body: it validates against
			// this webhook's schema (sequence included when required).
			example := map[string]any{"id": "evt_01JEXAMPLE0000000000000000", "type": t.Name, "version": v.Version,
				"tenant": "acme", "occurred_at": "2026-01-01T00:00:00Z", "data": ex}
			if t.ResourceID != "" {
				example["sequence"] = 1
			}
			body["examples"] = []any{example}
		}
	}
	desc := t.Description
	if desc == "" {
		desc = "Event " + t.Name
	}
	op := map[string]any{
		// The webhook's name: unique, as OpenAPI requires of operation
		// ids ("file-updated-v1" was file_updated's too).
		"operationId": webhookName(t, v),
		"summary":     t.Name + " version " + strconv.Itoa(v.Version),
		"description": desc + ". Signed with X-Signature and Standard Webhooks headers (docs/contract.md).",
		"tags":        []string{"webhooks"},
		"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": body}}},
		"responses":   webhookResponses,
	}
	if v.Deprecated {
		op["deprecated"] = true
	}
	return map[string]any{"post": op}
}

// Keywords whose values are schemas, or arrays or maps of schemas (JSON
// Schema 2020-12 and the earlier drafts Herald honours): rewriteRefs and
// hoistDataSchema walk only these, never values such as const, enum, default or examples.
var (
	schemaKeywords = map[string]bool{"additionalProperties": true, "items": true, "additionalItems": true, "contains": true,
		"not": true, "if": true, "then": true, "else": true, "propertyNames": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true, "allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
	schemaMapKeywords = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true, "dependencies": true}
)

// OrderText is the contract's "order" promise given the catalogued event
// types that declare a resource_id (their events carry "sequence" and
// X-Event-Sequence; docs/contract.md, "Sequence numbers").
func OrderText(sequenced []string) string {
	const none = "not guaranteed; Herald adds no version: when order matters, put your own in data (e.g. data.version) and keep the newest, or fetch current state"
	if len(sequenced) == 0 {
		return none
	}
	return "not guaranteed; events of " + strings.Join(sequenced, ", ") + " carry sequence (body) and X-Event-Sequence: per (tenant, type, resource id; " + catalog.ResourceIDRule + "), strictly increasing in commit order without gaps — keep the highest seen. Other types: " + none
}
