package api

import (
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/buildinfo"
)

// healthAnswer is GET /healthz's answer: always "ok" while the process
// serves, with the build's fields (the same as `herald version --json`).
type healthAnswer struct {
	Status string `json:"status" enum:"ok" doc:"always ok: the process serves HTTP (liveness; readiness is GET /readyz)"`
	buildinfo.Info
}

// readyAnswer is GET /readyz's answer when the node is ready.
type readyAnswer struct {
	Status string `json:"status" enum:"ready"`
}

// contractEventType is one entry of GET /contract's event_types: a
// catalogued event type and its versions.
type contractEventType struct {
	Name        string                 `json:"name"`
	Description string                 `json:"description"`
	ResourceID  string                 `json:"resource_id,omitempty" doc:"JSON pointer into data whose value numbers the type's events (sequence)"`
	Newest      int                    `json:"newest_version"`
	Versions    []contractEventVersion `json:"versions"`
}

// contractEventVersion is one version of a contractEventType.
type contractEventVersion struct {
	Version    int  `json:"version"`
	Deprecated bool `json:"deprecated"`
}

// documentProbes adds GET /healthz, GET /readyz and, when a contract is
// configured, GET /contract to the OpenAPI document. They stay plain
// handlers of the mux (registerHealth): outside /v1/, without a key, and
// answered exactly as before (a huma operation would add its middleware
// and its own encoding); the document only describes them, as it does
// every other route. Their Policy rows are public.
func (s *Server) documentProbes() {
	oapi := s.api.OpenAPI()
	reg := oapi.Components.Schemas
	problem := &huma.MediaType{Schema: reg.Schema(reflect.TypeFor[huma.ErrorModel](), true, "ErrorModel")}
	jsonOf := func(t reflect.Type) map[string]*huma.MediaType {
		return map[string]*huma.MediaType{"application/json": {Schema: reg.Schema(t, true, "")}}
	}
	oapi.AddOperation(&huma.Operation{
		OperationID: "get-health", Method: http.MethodGet, Path: "/healthz", Tags: []string{"health"},
		Summary:     "Liveness: the process serves HTTP, with its version and build",
		Description: "Answers 200 while the process serves, whatever the store's state (use GET /readyz to take a node out of rotation).",
		Responses: map[string]*huma.Response{
			"200": {Description: "The process serves.", Content: jsonOf(reflect.TypeFor[healthAnswer]())},
		},
	})
	oapi.AddOperation(&huma.Operation{
		OperationID: "get-readiness", Method: http.MethodGet, Path: "/readyz", Tags: []string{"health"},
		Summary: "Readiness: the store can commit within 2 s and its sealed values open with this node's encryption key",
		Description: "A load balancer's health check. 503 while the store cannot commit (herald_not_ready{reason=\"store\"}) " +
			"or the store's encrypted values do not open with this node's key after herald rekey (reason encryption_key). " +
			"While the store cannot commit, every publish to the node fails too; after a rekey to a key it lacks, the node still stores publishes but delivers nothing.",
		Responses: map[string]*huma.Response{
			"200": {Description: "Ready.", Content: jsonOf(reflect.TypeFor[readyAnswer]())},
			"503": {Description: `Not ready: detail "the store is not ready" "the store's encrypted values do not open with this node's encryption key (rekeyed?)", or, for a node whose current key herald rekey retired (the key variables swapped), "this node's current encryption key (HERALD_ENCRYPTION_KEY) was retired by herald rekey …".`,
				Content: map[string]*huma.MediaType{"application/problem+json": problem}},
		},
	})
	if s.cfg.Contract == nil {
		return
	}
	oapi.AddOperation(&huma.Operation{
		OperationID: "get-contract", Method: http.MethodGet, Path: "/contract", Tags: []string{"contract"},
		Summary:     "The webhook contract in force: signatures, retries, timeouts, URLs, and the event catalog",
		Description: "Generated from the running configuration (docs/contract.md explains each promise), with the event catalog's types, versions and deprecations in event_types.",
		Responses: map[string]*huma.Response{
			"200": {Description: "The contract, as indented JSON.", Content: map[string]*huma.MediaType{"application/json": {Schema: s.contractSchema(reg)}}},
			"503": {Description: "The store could not be read (the event catalog is part of the answer).",
				Content: map[string]*huma.MediaType{"application/problem+json": problem}},
		},
	})
}

// contractSchema is the schema of GET /contract's answer: the configured
// contract's (from its Go type, when it is a struct) with event_types
// added, as contractWithCatalog serves it; any other contract is
// described as an object with event_types.
func (s *Server) contractSchema(reg huma.Registry) *huma.Schema {
	types := reg.Schema(reflect.TypeFor[[]contractEventType](), true, "")
	t := reflect.TypeOf(s.cfg.Contract)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	sc := &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true, Properties: map[string]*huma.Schema{}}
	if t.Kind() == reflect.Struct {
		// SchemaFromType registers nested structs (Retries) but not t
		// itself, so the component below is the one schema of the answer.
		sc = huma.SchemaFromType(reg, t)
	}
	sc.Properties["event_types"] = types
	sc.Required = append(sc.Required, "event_types")
	const name = "Contract"
	if _, taken := reg.Map()[name]; !taken {
		reg.Map()[name] = sc
		return &huma.Schema{Ref: "#/components/schemas/" + name}
	}
	return sc
}
