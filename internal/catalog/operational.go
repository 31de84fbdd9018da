package catalog

// OperationalSchemas are the JSON Schemas (2020-12) of the data of
// Herald's own operational events, by type (docs/operations.md,
// "Operational events"). Herald emits them; producers may not publish
// these types. Every payload internal/ops emits validates against its
// type's schema (TestOperationalPayloadsMatchTheirSchemas).
var OperationalSchemas = map[string]string{
	"endpoint.disabled":          endpointStateSchema,
	"endpoint.enabled":           endpointStateSchema,
	"endpoint.created":           endpointStateSchema,
	"endpoint.updated":           endpointStateSchema,
	"endpoint.deleted":           endpointStateSchema,
	"endpoint.failing":           endpointHealthSchema,
	"endpoint.recovered":         endpointHealthSchema,
	"endpoint.dead_letter_spike": deadLetterSpikeSchema,
	"delivery.dead_lettered":     deadLetteredSchema,
	"endpoint.events_suppressed": suppressedSchema,
}

const endpointStateSchema = `{
  "type": "object",
  "required": ["version", "endpoint_id", "endpoint_tenant", "url", "state", "reason", "last_status_code", "last_error"],
  "additionalProperties": false,
  "properties": {
    "version": {"const": 1},
    "endpoint_id": {"type": "string"},
    "endpoint_tenant": {"type": "string"},
    "url": {"type": "string"},
    "state": {"enum": ["enabled", "paused", "disabled"]},
    "reason": {"type": "string"},
    "last_status_code": {"type": "integer", "minimum": 0, "description": "HTTP status of the endpoint's last attempt recorded before this change, whatever its outcome (200 too); 0 when it had none (a new endpoint, a deleted endpoint's attempts gone with it) or got no answer (see last_error)"},
    "last_error": {"type": "string", "description": "error class of that attempt when it got no answer (timeout, connection_refused, …), else empty"}
  }
}`

const endpointHealthSchema = `{
  "type": "object",
  "required": ["version", "endpoint_id", "endpoint_tenant", "url", "state", "reason", "last_status_code", "last_error", "failing_after"],
  "additionalProperties": false,
  "properties": {
    "version": {"const": 1},
    "endpoint_id": {"type": "string"},
    "endpoint_tenant": {"type": "string"},
    "url": {"type": "string"},
    "state": {"enum": ["enabled", "paused", "disabled"]},
    "reason": {"type": "string"},
    "last_status_code": {"type": "integer", "minimum": 0, "description": "HTTP status of the endpoint's last attempt recorded before this event: for endpoint.failing the failure that raised it, for endpoint.recovered the success; 0 when it got no answer (see last_error)"},
    "last_error": {"type": "string", "description": "error class of that attempt when it got no answer (timeout, connection_refused, …), else empty"},
    "failing_after": {"type": "integer", "minimum": 1}
  }
}`

const deadLetterSpikeSchema = `{
  "type": "object",
  "required": ["version", "endpoint_id", "endpoint_tenant", "url", "dead_letters", "window_seconds", "threshold"],
  "additionalProperties": false,
  "properties": {
    "version": {"const": 1},
    "endpoint_id": {"type": "string"},
    "endpoint_tenant": {"type": "string"},
    "url": {"type": "string"},
    "dead_letters": {"type": "integer", "minimum": 1},
    "window_seconds": {"type": "integer", "minimum": 1},
    "threshold": {"type": "integer", "minimum": 1}
  }
}`

const deadLetteredSchema = `{
  "type": "object",
  "required": ["version", "delivery_id", "event_id", "event_type", "endpoint_id", "endpoint_tenant", "url", "attempts", "last_status_code", "last_error"],
  "additionalProperties": false,
  "properties": {
    "version": {"const": 1},
    "delivery_id": {"type": "string"},
    "event_id": {"type": "string"},
    "event_type": {"type": "string"},
    "endpoint_id": {"type": "string"},
    "endpoint_tenant": {"type": "string"},
    "url": {"type": "string"},
    "attempts": {"type": "integer", "minimum": 1},
    "last_status_code": {"type": "integer", "minimum": 0, "description": "HTTP status of the dead letter's last attempt; 0 when it got no answer (see last_error)"},
    "last_error": {"type": "string", "description": "error class of that attempt when it got no answer (timeout, connection_refused, blocked, …), else empty"}
  }
}`

const suppressedSchema = `{
  "type": "object",
  "required": ["version", "suppressed", "by_type", "since", "until", "burst", "per_minute"],
  "additionalProperties": false,
  "properties": {
    "version": {"const": 1},
    "suppressed": {"type": "integer", "minimum": 1},
    "by_type": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
    "since": {"type": "string", "format": "date-time"},
    "until": {"type": "string", "format": "date-time"},
    "burst": {"type": "integer", "minimum": 1},
    "per_minute": {"type": "integer", "minimum": 1}
  }
}`

// OperationalExamples are an example of each operational type's data
// (validated against OperationalSchemas by the tests; shown in the
// OpenAPI document's webhooks).
var OperationalExamples = map[string]string{
	"endpoint.disabled":          `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","state":"disabled","reason":"every attempt failed since 2026-01-31T09:00:00Z (last: status 500)","last_status_code":500,"last_error":""}`,
	"endpoint.enabled":           `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","state":"enabled","reason":"","last_status_code":500,"last_error":""}`,
	"endpoint.created":           `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","state":"enabled","reason":"","last_status_code":0,"last_error":""}`,
	"endpoint.updated":           `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks2","state":"enabled","reason":"","last_status_code":0,"last_error":""}`,
	"endpoint.deleted":           `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","state":"enabled","reason":"","last_status_code":200,"last_error":""}`,
	"endpoint.failing":           `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","state":"enabled","reason":"","last_status_code":0,"last_error":"timeout","failing_after":3}`,
	"endpoint.recovered":         `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","state":"enabled","reason":"","last_status_code":200,"last_error":"","failing_after":3}`,
	"endpoint.dead_letter_spike": `{"version":1,"endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","dead_letters":12,"window_seconds":900,"threshold":10}`,
	"delivery.dead_lettered":     `{"version":1,"delivery_id":"dlv_01JEXAMPLE0000000000000000","event_id":"inv-1","event_type":"invoice.paid","endpoint_id":"ep_01JEXAMPLE0000000000000000","endpoint_tenant":"acme","url":"https://acme.example/hooks","attempts":8,"last_status_code":503,"last_error":""}`,
	"endpoint.events_suppressed": `{"version":1,"suppressed":980,"by_type":{"endpoint.failing":980},"since":"2026-01-31T09:00:00Z","until":"2026-01-31T09:01:00Z","burst":20,"per_minute":10}`,
}
