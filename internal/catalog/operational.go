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
    "last_status_code": {"type": "integer", "minimum": 0},
    "last_error": {"type": "string"}
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
    "last_status_code": {"type": "integer", "minimum": 0},
    "last_error": {"type": "string"},
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
    "last_status_code": {"type": "integer", "minimum": 0},
    "last_error": {"type": "string"}
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
