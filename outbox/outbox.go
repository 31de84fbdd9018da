// Package outbox publishes Herald events inside an application's own
// PostgreSQL transaction: the transactional outbox.
//
// An application that shares Herald's PostgreSQL database (the database
// `herald serve --db postgres://…` runs on) calls Publish with its pgx.Tx
// next to its own writes. The event and its deliveries are written by that
// transaction, so they exist if and only if it commits: a rolled-back
// change never announces itself, and a committed one is always announced,
// even if the process dies right after the commit. On commit PostgreSQL
// sends NOTIFY herald_deliveries, which wakes the delivery workers of every
// Herald node at once.
//
// The event is stored exactly as POST /v1/events stores it: the same
// validation rules, the same delivered body {"id","type","tenant",
// "occurred_at","data"}, the same ids ("evt_…", "dlv_…"), the same fan-out
// (one delivery per matching endpoint of the tenant, held for paused or
// disabled endpoints) and the same idempotency: publishing an id or an
// Idempotency-Key again, through this package or through the API, answers
// with the original event (Result.Duplicate) and delivers nothing new;
// reusing one with other content is ErrConflict.
//
// The outbox publishes uncatalogued event types only (those POST /v1/events
// publishes as they are under `herald serve --catalog permissive`): it
// does not check a catalogued type's JSON Schema, versions, sequence
// numbers or personal data, so an event whose type is in Herald's event
// catalog, or differs from a catalogued name only in case, is refused
// (ErrInvalid, Field "Type"); publish those through the API. Nor does it
// know a node's --catalog strict or --personal-data refuse.
//
// Requirements: the transaction runs at READ COMMITTED (PostgreSQL's
// default; anything else is ErrIsolation), on a connection whose
// search_path finds Herald's tables (Herald must have started once on the
// database, which creates them). Until the transaction ends it holds a
// shared advisory lock on the event's tenant, so pausing, deleting or
// disabling one of that tenant's endpoints waits for it: keep publishing
// transactions short.
package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
)

// DefaultMaxPayloadBytes is the largest delivered body Publish accepts, the
// default of `herald serve --max-payload-bytes`.
const DefaultMaxPayloadBytes = 64 << 10

// Event is an event to publish. Tenant, Type and Data are required.
type Event struct {
	// Tenant owns the endpoints that receive the event: 1–128 letters,
	// digits, _ . : or -, not starting with src_ (in any case: inbound
	// sources' tenants).
	Tenant string
	// Type is the event type, e.g. "file.extraction.completed": segments of
	// letters, digits, _ or - joined by dots, at most 128 bytes, not
	// starting with endpoint., delivery. or herald. (in any case: Herald's
	// own events).
	Type string
	// Data is the event's data, a JSON object: thin (ids, version, links),
	// no content or personal data. A json.RawMessage or []byte is used as
	// JSON text (compacted; valid UTF-8, no member twice in one object,
	// no number beyond a 64-bit float's range);
	// any other value is encoded with encoding/json (without HTML
	// escaping) and must encode as an object.
	Data any
	// ID is your own event id (1–128 letters, digits, _ - or :, no dots);
	// default a new "evt_…" id. Publishing the same id again answers with
	// the original event.
	ID string
	// IdempotencyKey is the Idempotency-Key of POST /v1/events: per tenant,
	// the same key answers with the original event. At most 255 bytes of
	// UTF-8 without control characters; "" for none.
	IdempotencyKey string
	// OccurredAt is when it happened; default now. Stored (and delivered)
	// in UTC at microsecond precision; its year in UTC must be 0000–9999
	// (RFC 3339 writes four digits): InvalidError (Field "OccurredAt")
	// otherwise.
	OccurredAt time.Time
}

// Result tells what Publish did.
type Result struct {
	// ID is the event's id: the new event's, or the original's when
	// Duplicate.
	ID string
	// Deliveries is the number of deliveries the event fanned out to: the
	// endpoints it matched (the original's deliveries, when Duplicate).
	// Past 500 matching endpoints (store.DefaultFanOutChunk) the
	// transaction writes only the first 500; a Herald node creates the
	// rest, exactly once, after the commit (within the second: it polls).
	Deliveries int
	// Duplicate: the id or the idempotency key was used before with the
	// same content; nothing was written.
	Duplicate bool
}

// Errors returned by Publish. Match them with errors.Is.
var (
	// ErrInvalid: the event breaks a rule of POST /v1/events (the API's
	// 422); the error is an *InvalidError naming the field.
	ErrInvalid = errors.New("invalid event")
	// ErrTooLarge: the delivered body would exceed the payload cap (the
	// API's 413). Such an error also matches ErrInvalid.
	ErrTooLarge = errors.New("event too large")
	// ErrConflict: the id or the idempotency key was already used for an
	// event with another tenant, type or data (the API's 409).
	ErrConflict = errors.New("id or idempotency key already used with other content")
	// ErrIsolation: the transaction does not run at READ COMMITTED.
	ErrIsolation = postgres.ErrIsolation
)

// InvalidError is a validation failure: Field is the Event field, Rule the
// rule it breaks (the same wording as the API's problem details).
type InvalidError struct {
	Field    string
	Rule     string
	tooLarge bool
}

func (e *InvalidError) Error() string { return "outbox: invalid " + e.Field + ": " + e.Rule }

// Is makes an *InvalidError match ErrInvalid (and ErrTooLarge for an event
// over the payload cap).
func (e *InvalidError) Is(target error) bool {
	return target == ErrInvalid || (e.tooLarge && target == ErrTooLarge)
}

type conflictError struct{ msg string }

func (e *conflictError) Error() string        { return "outbox: " + e.msg }
func (e *conflictError) Is(target error) bool { return target == ErrConflict }

// Publisher publishes with settings other than the defaults. The zero
// value is what Publish uses.
type Publisher struct {
	// MaxPayloadBytes caps the delivered body (the nodes' --max-payload-
	// bytes); default DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// Now tells the time (the default OccurredAt, and when the deliveries
	// are due); default time.Now.
	Now func() time.Time
}

// Publish stores ev and its deliveries on tx with the default settings;
// see Publisher.Publish.
func Publish(ctx context.Context, tx pgx.Tx, ev Event) (Result, error) {
	return Publisher{}.Publish(ctx, tx, ev)
}

// Publish validates ev, then stores it and its deliveries on tx: they
// exist if and only if tx commits, and Herald's nodes are woken when it
// does.
//
// A validation error (ErrInvalid, ErrTooLarge) is returned before anything
// is sent on tx, but for an event type in Herald's event catalog (an
// *InvalidError for Field "Type", found by a read on tx); ErrIsolation,
// that one, ErrConflict and a duplicate leave tx as it was, usable. Any other error comes from the database (errors.As finds a
// *pgconn.PgError) or ctx, and leaves tx aborted: roll it back.
func (p Publisher) Publish(ctx context.Context, tx pgx.Tx, ev Event) (Result, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	t := now().UTC()
	params, err := p.prepare(ev, t)
	if err != nil {
		return Result{}, err
	}
	if tx == nil {
		return Result{}, errors.New("outbox: nil transaction")
	}
	res, err := postgres.PublishTx(ctx, tx, params)
	if err != nil {
		if errors.Is(err, store.ErrStaleCatalog) {
			return Result{}, &InvalidError{Field: "Type", Rule: catalogRule(ev.Type)}
		}
		if errors.Is(err, store.ErrConflict) {
			return Result{}, &conflictError{store.Message(err)}
		}
		return Result{}, fmt.Errorf("outbox: %w", err)
	}
	return Result{ID: store.PublicEventID(res.Event.ID), Deliveries: res.Deliveries, Duplicate: !res.Created}, nil
}

// Validate checks ev against the rules of POST /v1/events (and the default
// payload cap) without publishing it.
func Validate(ev Event) error {
	_, err := Publisher{}.prepare(ev, time.Now().UTC())
	return err
}

// prepare validates ev and renders what POST /v1/events stores for it.
func (p Publisher) prepare(ev Event, now time.Time) (store.PublishParams, error) {
	maxBytes := p.MaxPayloadBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxPayloadBytes
	}
	if !store.ValidTenant(ev.Tenant) {
		return store.PublishParams{}, &InvalidError{Field: "Tenant", Rule: "tenant: " + store.TenantRule}
	}
	if store.IsInternalTenant(ev.Tenant) {
		return store.PublishParams{}, &InvalidError{Field: "Tenant", Rule: store.InternalTenantRule}
	}
	if !store.ValidEventType(ev.Type) {
		return store.PublishParams{}, &InvalidError{Field: "Type", Rule: store.EventTypeRule}
	}
	if store.ReservedEventType(ev.Type) {
		return store.PublishParams{}, &InvalidError{Field: "Type", Rule: store.ReservedEventTypeRule}
	}
	data, err := encodeData(ev.Data)
	if err != nil {
		return store.PublishParams{}, err
	}
	if ev.ID != "" && !store.ValidEventID(ev.ID) {
		return store.PublishParams{}, &InvalidError{Field: "ID", Rule: "id: 1–128 letters, digits, _ - or : (no dots: the id is part of the signed content \"<id>.<t>.<body>\")"}
	}
	if store.HeraldEventID(ev.ID) {
		return store.PublishParams{}, &InvalidError{Field: "ID", Rule: store.HeraldEventIDRule}
	}
	if !store.ValidIdempotencyKey(ev.IdempotencyKey) {
		return store.PublishParams{}, &InvalidError{Field: "IdempotencyKey", Rule: store.IdempotencyKeyRule}
	}
	id := ev.ID
	if id == "" {
		id = store.NewID("evt")
	}
	occurred := now
	if !ev.OccurredAt.IsZero() {
		if !store.ValidOccurredAt(ev.OccurredAt) {
			return store.PublishParams{}, &InvalidError{Field: "OccurredAt", Rule: store.OccurredAtRule}
		}
		occurred = ev.OccurredAt.UTC()
	}
	// Stored at microsecond precision: the delivered body says the same.
	occurred = occurred.Truncate(time.Microsecond)
	body, err := store.EncodeBody(id, ev.Type, ev.Tenant, occurred, data)
	if err != nil {
		return store.PublishParams{}, fmt.Errorf("outbox: encode the event: %w", err)
	}
	if len(body) > maxBytes {
		return store.PublishParams{}, &InvalidError{Field: "Data", tooLarge: true,
			Rule: fmt.Sprintf("event too large: the delivered body would be %d bytes; the limit is %d bytes (send ids and links, not content)", len(body), maxBytes)}
	}
	uncatalogued := 0
	return store.PublishParams{
		Event: store.Event{ID: store.EventKey(ev.Tenant, id, ev.ID != ""), Tenant: ev.Tenant, Type: ev.Type, OccurredAt: occurred, Body: body,
			IdempotencyKey: ev.IdempotencyKey, Fingerprint: store.Fingerprint(ev.Tenant, ev.Type, data)},
		Now:           now,
		NewDeliveryID: func() string { return store.NewID("dlv") },
		IDFromClient:  ev.ID != "",
		// The outbox checks no schema, version, sequence or personal data:
		// the store refuses the event (ErrStaleCatalog) if its type, or a
		// name differing from it only in case, is in the catalog.
		CatalogRevision: &uncatalogued,
	}, nil
}

// catalogRule is the refusal of an event whose type is catalogued.
func catalogRule(typ string) string {
	return "event type " + typ + " is in the event catalog (or differs from a catalogued name only in case): " +
		"the outbox publishes uncatalogued types only, since it does not check a catalogued type's schema, " +
		"versions (data_versions), sequence numbers or personal data; publish it through POST /v1/events"
}

// encodeData returns the data as compact JSON text, or an *InvalidError.
func encodeData(v any) ([]byte, error) {
	var raw []byte
	switch d := v.(type) {
	case nil:
		return nil, &InvalidError{Field: "Data", Rule: "data must be a JSON object"}
	case json.RawMessage:
		raw = d
	case []byte:
		raw = d
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the data arrives as the producer wrote it
		if err := enc.Encode(v); err != nil {
			return nil, &InvalidError{Field: "Data", Rule: "data must encode as JSON: " + err.Error()}
		}
		raw = buf.Bytes()
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, &InvalidError{Field: "Data", Rule: "data must be a JSON object"}
	}
	if err := wellFormed(raw); err != nil {
		return nil, &InvalidError{Field: "Data", Rule: "data must be valid JSON: " + err.Error()}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, &InvalidError{Field: "Data", Rule: "data must be valid JSON"}
	}
	return compact.Bytes(), nil
}

// wellFormed applies the API's request-body rules to data: valid UTF-8,
// one JSON value, no member name twice in one object, nesting at most 64
// deep counting the request body's own object (data at most 63), no
// number beyond a 64-bit float's range.
func wellFormed(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walk(dec, 2); err != nil { // data is one level below the request body (depth 1)
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the object")
	}
	return nil
}

func walk(dec *json.Decoder, depth int) error {
	if depth > 64 {
		return errors.New("nested deeper than 64 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := k.(string)
			if seen[name] {
				return fmt.Errorf("member %q appears twice in one object", name)
			}
			seen[name] = true
			if err := walk(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if err := walk(dec, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	if n, ok := tok.(json.Number); ok {
		if _, err := strconv.ParseFloat(string(n), 64); errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("number %.40s is out of range: JSON numbers must fit a 64-bit float (RFC 8259 §6); send a larger one as a string", n)
		}
	}
	return nil
}
