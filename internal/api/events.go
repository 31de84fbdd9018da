package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/catalog"
	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// publishOutput answers POST /v1/events.
type publishOutput struct {
	Status  int
	Warning string `header:"X-Herald-Personal-Data-Warning" doc:"set when the data looked like it carried personal data and the guard only warns: the JSON pointer and kind of the first 10 findings, each pointer with its control characters written \\u0000 and cut to 256 bytes, joined by \", \", then \", and N more\" for the rest"`
	Body    PublishOut
}

// tracePublish starts the server span of POST /v1/events (tracing on) as
// soon as the request is authenticated, before the JSON checks and huma's
// validation: a publish refused by any of them (400, 413, 415, 422, 403) is
// in the producer's trace with its status, like one the handler refuses.
// publishEvent adds Herald's attributes to the span in its context. A
// request refused at authentication (401, 429) makes no span.
func (s *Server) tracePublish(next http.Handler) http.Handler {
	if !s.cfg.Tracer.On() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/events" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := s.cfg.Tracer.Start(tracing.WithRemoteParent(r.Context(), r.Header.Get("Traceparent")), "POST /v1/events",
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodPost, semconv.HTTPRoute("/v1/events")))
		sw := &tracing.StatusWriter{ResponseWriter: w}
		defer func() { tracing.EndServerSpan(span, sw.Status) }()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// annotatePublishSpan adds a publish's outcome to its span: the deliveries
// and duplicate flags, and the error of a failure on Herald's side (5xx).
func annotatePublishSpan(span trace.Span, out *publishOutput, err error) {
	if out != nil {
		span.SetAttributes(tracing.AttrDeliveries.Int(out.Body.Deliveries), tracing.AttrDuplicate.Bool(out.Body.Duplicate))
	}
	var se huma.StatusError
	if err != nil && (!errors.As(err, &se) || se.GetStatus() >= 500) {
		span.RecordError(err)
	}
}

// PublishBody is the body of POST /v1/events.
type PublishBody struct {
	Tenant     string          `json:"tenant,omitempty" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"whose endpoints receive the event; default (and only allowed value for a tenant key) the key's tenant"`
	Type       string          `json:"type" minLength:"1" maxLength:"128" doc:"event type, e.g. file.extraction.completed"`
	Data       json.RawMessage `json:"data" doc:"a JSON object: thin (ids, version, links), no content or personal data"`
	ID         string          `json:"id,omitempty" maxLength:"128" doc:"your own event id (letters, digits, _ - :), unique per tenant; publishing the same id again for the same tenant returns the original event"`
	OccurredAt *time.Time      `json:"occurred_at,omitempty" doc:"RFC 3339; default now; within the years 0000–9999 once in UTC (422 otherwise: the delivered body states it in UTC)"`
	// DataVersions: for a catalogued type, the data of older versions
	// still pinned by subscribed endpoints.
	DataVersions map[string]json.RawMessage `json:"data_versions,omitempty" doc:"catalogued types: the data of older versions (\"1\": {…}) that subscribed endpoints still pin; each is validated against its version's schema and delivered to the endpoints pinning it"`
}

// EventOut is an event as the API shows it.
type EventOut struct {
	ID         string          `json:"id"`
	Tenant     string          `json:"tenant"`
	Type       string          `json:"type"`
	OccurredAt time.Time       `json:"occurred_at" doc:"in UTC; an event stored with an instant outside the years 0000–9999 (published before that rule) shows the nearer of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z"`
	Data       json.RawMessage `json:"data" doc:"the data published; for an event received through the inbound gateway (tenant src_…), the provider's whole body when it is JSON in UTF-8, else null (docs/inbound.md, \"Reading a received event\")"`
	Version    int             `json:"version,omitempty" doc:"catalogued types: the newest version, whose data this is"`
	Sequence   int64           `json:"sequence,omitempty" doc:"number of the event among its type's events about one resource (types with a resource_id)"`
	// Headers is set for inbound events only.
	Headers   map[string]string `json:"headers,omitempty" doc:"events received through the inbound gateway: the provider's headers as stored and forwarded with every attempt (docs/inbound.md, \"What the destination receives\"); absent for published events"`
	CreatedAt time.Time         `json:"created_at"`
}

// PublishOut answers a publish.
type PublishOut struct {
	EventOut
	Deliveries int  `json:"deliveries" doc:"number of deliveries the event fanned out to: the endpoints it matched when published. Past --fanout-chunk (500) endpoints only the first chunk exists when this answer is sent; the engine creates the rest within moments, each exactly once"`
	Duplicate  bool `json:"duplicate" doc:"true when the id or Idempotency-Key was seen before: this is the original event and nothing new was delivered"`
}

// envelope is the body sent to endpoints: the same bytes on every attempt.
type envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Version    int             `json:"version,omitempty"`
	Sequence   int64           `json:"sequence,omitempty"`
	Tenant     string          `json:"tenant"`
	OccurredAt string          `json:"occurred_at"`
	Data       json.RawMessage `json:"data"`
}

func eventOut(e store.Event) EventOut {
	if strings.HasPrefix(e.Tenant, store.InternalTenantPrefix) {
		return inboundEventOut(e)
	}
	var env envelope
	_ = json.Unmarshal(e.Body, &env)
	// A stored occurred_at outside the years 0000–9999 (an event published
	// before the rule) is shown clamped: encoding it failed the answer.
	return EventOut{ID: store.PublicEventID(e.ID), Tenant: e.Tenant, Type: e.Type, OccurredAt: store.ShownOccurredAt(e.OccurredAt), Data: env.Data, Version: env.Version, Sequence: env.Sequence, CreatedAt: e.CreatedAt}
}

// inboundEventOut shows an event the inbound gateway received (its tenant
// is a source's): its body is the provider's bytes as received, not
// Herald's envelope, so data is that whole body when it is JSON in UTF-8
// (a Stripe body's own "data" member is not the event's data; a leading
// UTF-8 byte order mark is not shown, RFC 8259 §8.1: inbound.JSONText),
// and null otherwise (a form-encoded body: the contract has no form for
// raw bytes yet); headers are the provider's as stored.
func inboundEventOut(e store.Event) EventOut {
	out := EventOut{ID: store.PublicEventID(e.ID), Tenant: e.Tenant, Type: e.Type, OccurredAt: store.ShownOccurredAt(e.OccurredAt), CreatedAt: e.CreatedAt}
	if body := inbound.JSONText(e.Body); utf8.Valid(body) && json.Valid(body) {
		out.Data = json.RawMessage(body)
	}
	if len(e.Headers) > 0 {
		out.Headers = e.Headers
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func (s *Server) registerEvents() {
	sec := []map[string][]string{{"bearer": {}}}

	huma.Register(s.api, huma.Operation{
		OperationID: "publish-event", Method: http.MethodPost, Path: "/v1/events", Tags: []string{"events"},
		Summary:       "Publish an event to the tenant's subscribed endpoints",
		Description:   "Answers 202 with the new event, or 200 with the original when the id or Idempotency-Key was used before with the same type and data; 409 when it was used with other content.",
		DefaultStatus: http.StatusAccepted, Security: sec, MaxBodyBytes: int64(s.cfg.MaxPayloadBytes) + publishEnvelopeBytes,
		Errors: []int{http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable},
	}, s.publishEvent)
	// huma declares one success status (202); the duplicate's 200 has the
	// same body and header.
	pub := s.api.OpenAPI().Paths["/v1/events"].Post
	dup := *pub.Responses[strconv.Itoa(http.StatusAccepted)]
	dup.Description = "Duplicate: the id or Idempotency-Key was used before with the same type and data (also after the catalog changed); the original event, \"duplicate\": true, nothing new delivered"
	pub.Responses[strconv.Itoa(http.StatusOK)] = &dup
	declareDefaultError(pub)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-events", Method: http.MethodGet, Path: "/v1/events", Tags: []string{"events"},
		Summary: "List events, newest first", Security: sec,
	}, s.listEvents)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-event", Method: http.MethodGet, Path: "/v1/events/{id}", Tags: []string{"events"},
		Summary: "Read an event", Security: sec,
	}, s.getEvent)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-event-deliveries", Method: http.MethodGet, Path: "/v1/events/{id}/deliveries", Tags: []string{"deliveries"},
		Summary: "List the deliveries of an event (one per endpoint)", Security: sec,
	}, s.listEventDeliveries)
}

// declareDefaultError gives an operation registered with a list of errors
// (huma.Operation.Errors, which then declares no "default" response) the
// "default" problem response every other operation has, so the statuses
// any operation may answer — 400, 401, 403, 415, 429 — stay declared.
func declareDefaultError(op *huma.Operation) {
	for _, r := range op.Responses {
		if mt := r.Content["application/problem+json"]; mt != nil {
			op.Responses["default"] = &huma.Response{Description: "Error", Content: map[string]*huma.MediaType{"application/problem+json": mt}}
			return
		}
	}
}

type publishIn struct {
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"255" doc:"retry-safe publishing: the same key (per tenant) with the same type and data returns the original event; with other content, 409. At most 255 bytes of UTF-8 without control characters (422 otherwise)"`
	TraceParent    string `header:"traceparent" doc:"W3C Trace Context (00-<trace id>-<parent id>-<flags>): stored with the event; every attempt's own traceparent belongs to this trace, so the receivers' spans join it. An invalid value (of any length) is ignored, never refused, as the recommendation asks"`
	Body           PublishBody
}

// Resolve refuses an Idempotency-Key given more than once (huma reads the
// first and would ignore the rest, so a retry sending only another of them
// would publish the event again), as a repeated query parameter is.
//
// The request's header is read directly (the server stores header names
// canonical): a callback through huma's EachHeader cost two allocations
// per publish.
func (in *publishIn) Resolve(ctx huma.Context) []error {
	r, _ := humago.Unwrap(ctx)
	if n := len(r.Header["Idempotency-Key"]); n > 1 {
		return []error{&huma.ErrorDetail{Location: "header.Idempotency-Key",
			Message: fmt.Sprintf("header Idempotency-Key given %d times: it takes one value", n)}}
	}
	return nil
}

func (s *Server) publishEvent(ctx context.Context, in *publishIn) (out *publishOutput, err error) {
	// The traceparent stored with the event: this publish's span with
	// tracing on, else the producer's own (normalised), else none.
	traceparent := ""
	if sc, ok := tracing.ParseTraceParent(in.TraceParent); ok {
		traceparent = tracing.FormatTraceParent(sc)
	}
	var span trace.Span
	if s.cfg.Tracer.On() {
		// The span tracePublish started, a child of the producer's.
		if sp := trace.SpanFromContext(ctx); sp.SpanContext().IsValid() {
			span = sp
			traceparent = tracing.FormatTraceParent(span.SpanContext())
			defer func() { annotatePublishSpan(span, out, err) }()
		}
	}
	b := in.Body
	// Every field is checked and every refusal listed (fieldErrors), in
	// the order of the body's members, then the Idempotency-Key header.
	var fe fieldErrors
	tenant, err := s.tenantFor(ctx, b.Tenant, "body.tenant")
	if err := fe.add(err); err != nil {
		return nil, err
	}
	if tenant == "" && err == nil {
		fe.add(invalid("body.tenant", "tenant is required (an admin key acts on every tenant: name one)", nil))
	}
	b.Tenant = tenant
	// The outbox's rule too: a tab or bytes that are not UTF-8 would make
	// a key the outbox cannot repeat, or one PostgreSQL refuses to store.
	if !store.ValidIdempotencyKey(in.IdempotencyKey) {
		fe.add(invalid("header.Idempotency-Key", store.IdempotencyKeyRule, in.IdempotencyKey))
	}
	switch {
	case !store.ValidEventType(b.Type):
		fe.add(invalid("body.type", store.EventTypeRule, b.Type))
	case ReservedEventType(b.Type):
		// Reserved in any case: a receiver that folds case must not
		// take "Endpoint.disabled" for Herald's own event.
		fe.add(invalid("body.type", store.ReservedEventTypeRule, b.Type))
	}
	data := bytes.TrimSpace(b.Data)
	var compact []byte
	if len(data) == 0 || data[0] != '{' {
		fe.add(invalid("body.data", "data must be a JSON object", nil))
	} else if compact, err = store.CompactJSON(data); err != nil {
		fe.add(invalid("body.data", "data must be valid JSON", nil))
	}
	// No dots: the Standard Webhooks signed content is "<id>.<t>.<body>".
	switch {
	case b.ID != "" && !store.ValidEventID(b.ID):
		fe.add(invalid("body.id", "id: 1–128 letters, digits, _ - or : (no dots: the id is part of the signed content \"<id>.<t>.<body>\")", b.ID))
	case store.HeraldEventID(b.ID):
		fe.add(invalid("body.id", store.HeraldEventIDRule, b.ID))
	}
	if b.OccurredAt != nil && !store.ValidOccurredAt(*b.OccurredAt) {
		fe.add(invalid("body.occurred_at", store.OccurredAtRule, b.OccurredAt.Format(time.RFC3339Nano)))
	}
	if fe.any() {
		return nil, fe.err(b)
	}
	now := s.cfg.Now()
	id := b.ID
	if id == "" {
		id = store.NewID("evt")
	}
	occurred := now
	if b.OccurredAt != nil {
		occurred = b.OccurredAt.UTC()
	}
	// Stored at microsecond precision: the delivered body says the same.
	occurred = occurred.Truncate(time.Microsecond)
	// The catalog check reads s.catalog; the store refuses a publish
	// checked against an entry that changed meanwhile
	// (store.ErrStaleCatalog), and it is checked again, afresh.
	d := publishDraft{id: id, tenant: b.Tenant, typ: b.Type, clientID: b.ID != "", occurred: occurred, now: now,
		data: compact, idempotencyKey: in.IdempotencyKey, traceparent: traceparent, span: span}
	var (
		cp  catalogPublish
		res store.PublishResult
	)
	for attempt := 0; ; attempt++ {
		cp, err = s.checkPublish(ctx, b.Tenant, b.Type, compact, b.DataVersions, attempt > 0)
		if err != nil && cp.cached && attempt < catalogAttempts-1 {
			// Refused by a cached entry: the catalog may have changed
			// (through another node); refuse only after a fresh read.
			continue
		}
		if err != nil {
			// A retry of a publish accepted before the catalog changed
			// gets the original, not the new rule's refusal.
			refusal := err
			var repeat bool
			if res, repeat, err = s.repeatOf(ctx, d, b.DataVersions, refusal); !repeat {
				if err == refusal {
					s.countRefused(cp.refused)
				}
				return nil, err
			}
			cp = catalogPublish{}
			break
		}
		var refused error
		res, refused, err = s.storeEvent(ctx, d, cp)
		if refused != nil {
			return nil, refused
		}
		if errors.Is(err, store.ErrStaleCatalog) && attempt < catalogAttempts-1 {
			// The catalog changed since s.catalog read it (through this node
			// or another): check the event again against a fresh read.
			s.catalog.forget(b.Type)
			continue
		}
		break
	}
	if err != nil {
		return nil, s.problem(err, "event")
	}
	out = &publishOutput{Status: http.StatusAccepted, Body: PublishOut{Deliveries: res.Deliveries}}
	if res.Created {
		// The stored body is the one encoded above: its data is compact.
		e := res.Event
		out.Body.EventOut = EventOut{ID: id, Tenant: e.Tenant, Type: e.Type, OccurredAt: e.OccurredAt, Data: compact, Version: cp.version, Sequence: e.Sequence, CreatedAt: e.CreatedAt}
	} else {
		out.Body.EventOut = eventOut(res.Event) // the original event
	}
	if len(cp.warnings) > 0 {
		out.Warning = personalDataWarning(cp.warnings)
	}
	if !res.Created {
		out.Status = http.StatusOK
		out.Body.Duplicate = true
	} else {
		s.cfg.Metrics.EventPublished()
		for _, f := range cp.warnings {
			s.cfg.Metrics.PersonalData(f.Kind, "warned")
		}
		if res.Pending > res.HandedOff {
			// Held deliveries need no worker, handed-off ones no claim.
			s.cfg.Notify()
		}
		if res.FanOut {
			s.cfg.NotifyFanOut()
		}
	}
	return out, nil
}

// repeatOf answers a publish its catalog check refused (refusal) when it
// repeats an event published earlier: the same id or Idempotency-Key in
// the tenant with the same type, data and data_versions (the fingerprint
// store.FingerprintVersions), found by store.PublishedEvent. The catalog
// may have changed since the original was accepted (a schema added, a
// version now required in data_versions); its retry gets the original
// (repeat true: 200, duplicate), as an idempotent retry does, never the
// new rule's 422 (docs/contract.md, "Event types and versions"). Otherwise
// the refusal stands: a publish with neither an id nor a key, one that
// repeats nothing, or one with other content (a new event, checked by the
// catalog as any). A refusal not on the content (not a 422) stands as it
// is; a store error is err.
func (s *Server) repeatOf(ctx context.Context, d publishDraft, dataVersions map[string]json.RawMessage, refusal error) (res store.PublishResult, repeat bool, err error) {
	var se huma.StatusError
	if !d.clientID && d.idempotencyKey == "" || !errors.As(refusal, &se) || se.GetStatus() != http.StatusUnprocessableEntity {
		return res, false, refusal
	}
	// The fingerprint as the original's publish computed it: data_versions
	// compacted under their version numbers. Keys or values it would have
	// refused cannot repeat a stored event.
	var older map[int][]byte
	for k, raw := range dataVersions {
		n, err := strconv.Atoi(k)
		if err != nil || strconv.Itoa(n) != k {
			return res, false, refusal
		}
		c, err := compactObject(raw)
		if err != nil {
			return res, false, refusal
		}
		if older == nil {
			older = map[int][]byte{}
		}
		older[n] = c
	}
	res, err = s.db(ctx).PublishedEvent(ctx, store.PublishParams{
		Event: store.Event{ID: store.EventKey(d.tenant, d.id, d.clientID), Tenant: d.tenant, Type: d.typ,
			IdempotencyKey: d.idempotencyKey, Fingerprint: store.FingerprintVersions(d.tenant, d.typ, d.data, older)},
		IDFromClient: d.clientID})
	switch {
	case err == nil:
		return res, true, nil
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		return res, false, refusal
	}
	return res, false, s.problem(err, "event")
}

// publishDraft is what a publish stores, decided before the catalog check.
type publishDraft struct {
	id, tenant, typ string
	clientID        bool // the producer chose id
	occurred, now   time.Time
	data            []byte // compact JSON
	idempotencyKey  string
	traceparent     string
	span            trace.Span // the publish's, nil with tracing off
}

// storeEvent encodes d's bodies for the catalog entry cp was checked
// against and stores the event (a "store publish" span with tracing on).
// refused is a 413 (a body over --max-payload-bytes) or a 500 (the body
// could not be encoded), nothing stored; err is the store's
// (store.ErrStaleCatalog when cp's entry changed meanwhile).
func (s *Server) storeEvent(ctx context.Context, d publishDraft, cp catalogPublish) (res store.PublishResult, refused, err error) {
	tooLarge := func(body []byte) error {
		if len(body) > s.cfg.MaxPayloadBytes {
			return huma.Error413RequestEntityTooLarge("event too large: the delivered body would be " + itoa(len(body)) +
				" bytes; the limit is " + itoa(s.cfg.MaxPayloadBytes) + " bytes (send ids and links, not content)")
		}
		return nil
	}
	var (
		body  []byte
		older map[int][]byte
	)
	if cp.catalogued {
		body, err = store.EncodeVersionedBody(d.id, d.typ, cp.version, cp.seqKey != "", d.tenant, d.occurred, d.data)
		for v, data := range cp.older {
			if err != nil {
				break
			}
			var ob []byte
			if ob, err = store.EncodeVersionedBody(d.id, d.typ, v, cp.seqKey != "", d.tenant, d.occurred, data); err == nil {
				if older == nil {
					older = map[int][]byte{}
				}
				older[v] = ob
				if err := tooLarge(ob); err != nil {
					return res, err, nil
				}
			}
		}
	} else {
		body, err = store.EncodeCompactBody(d.id, d.typ, d.tenant, d.occurred, d.data) // d.data: CompactJSON's
	}
	if err != nil {
		return res, huma.Error500InternalServerError("could not encode the event"), nil
	}
	if err := tooLarge(body); err != nil {
		return res, err, nil
	}
	sctx := ctx
	var sspan trace.Span
	if d.span != nil {
		d.span.SetAttributes(tracing.AttrTenant.String(d.tenant), tracing.AttrEventType.String(d.typ), tracing.AttrEventID.String(d.id))
		sctx, sspan = s.cfg.Tracer.Start(ctx, "store publish", trace.WithSpanKind(trace.SpanKindInternal))
	}
	res, err = s.db(sctx).PublishEvent(sctx, store.PublishParams{
		Event: store.Event{ID: store.EventKey(d.tenant, d.id, d.clientID), Tenant: d.tenant, Type: d.typ, OccurredAt: d.occurred, Body: body,
			VersionBodies: older, IdempotencyKey: d.idempotencyKey, Fingerprint: store.FingerprintVersions(d.tenant, d.typ, d.data, cp.older),
			TraceParent: d.traceparent},
		Now: d.now, NewDeliveryID: func() string { return store.NewID("dlv") }, IDFromClient: d.clientID, SequenceKey: cp.seqKey,
		FanOutChunk: s.cfg.FanOutChunk, CatalogRevision: &cp.revision,
	})
	if sspan != nil {
		if err != nil {
			sspan.SetStatus(codes.Error, err.Error())
		}
		sspan.End()
	}
	return res, nil, err
}

type eventsOut struct {
	Body struct {
		Data       []EventOut `json:"data"`
		NextCursor string     `json:"next_cursor"`
	}
}

// checkTypeFilter refuses (422 at loc) a list's filter naming an event type
// no event can have: it would answer an empty list, as if the filter were
// fine and nothing matched.
func checkTypeFilter(loc, typ string) error {
	if typ != "" && !store.ValidEventType(typ) {
		return invalid(loc, store.EventTypeRule, typ)
	}
	return nil
}

type listEventsInput struct {
	Tenant string `query:"tenant" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"only this tenant's (letters, digits, _ . : -, at most 128)"`
	Type   string `query:"type" maxLength:"128"`
	ListQuery
}

func (s *Server) listEvents(ctx context.Context, in *listEventsInput) (*eventsOut, error) {
	tenant, err := s.tenantFor(ctx, in.Tenant, "query.tenant")
	if err != nil {
		return nil, err
	}
	if err := checkTypeFilter("query.type", in.Type); err != nil {
		return nil, err
	}
	q := query(ctx, listEvents, "/v1/events", "tenant", tenant, "type", in.Type)
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListEvents(ctx, store.ListEventsParams{Tenant: tenant, Type: in.Type, ListParams: lp})
	if err != nil {
		return nil, s.problem(err, "events")
	}
	out := &eventsOut{}
	out.Body.Data = make([]EventOut, len(pg.Data))
	for i, e := range pg.Data {
		out.Body.Data[i] = eventOut(e)
	}
	out.Body.NextCursor = s.cursor(q, pg.NextCursor)
	return out, nil
}

// EventIDPath is the {id} of /v1/events/{id}.
type EventIDPath struct {
	ID     string `path:"id" maxLength:"128" doc:"event id: Herald's (evt_…) or the producer's"`
	Tenant string `query:"tenant" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"the event's tenant: needed by an admin key to read an event by a producer-chosen id (unique per tenant only); a tenant key reads its own tenant's"`
}

func (s *Server) getEvent(ctx context.Context, in *EventIDPath) (*struct{ Body EventOut }, error) {
	e, err := s.findEvent(ctx, in.ID, in.Tenant)
	if err != nil {
		return nil, err
	}
	return &struct{ Body EventOut }{Body: eventOut(e)}, nil
}

type listEventDeliveriesInput struct {
	EventIDPath
	ListQuery
}

func (s *Server) listEventDeliveries(ctx context.Context, in *listEventDeliveriesInput) (*struct{ Body DeliveryList }, error) {
	e, err := s.findEvent(ctx, in.ID, in.Tenant)
	if err != nil {
		return nil, err
	}
	q := query(ctx, listDeliveries, "/v1/events/{id}/deliveries", "event", e.ID)
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListDeliveries(ctx, store.ListDeliveriesParams{EventID: e.ID, ListParams: lp})
	if err != nil {
		return nil, s.problem(err, "deliveries")
	}
	return &struct{ Body DeliveryList }{Body: s.deliveryList(q, pg)}, nil
}

// findEvent reads an event by the id the API shows. Herald's own ids
// ("evt_…") are unique everywhere; a producer-chosen id is unique per
// tenant (store.EventKey), so it is looked up in the principal's tenant, or
// for an admin in the tenant it names (?tenant=). An admin who names no
// tenant finds only Herald's ids: the answer is never a guess between
// tenants.
func (s *Server) findEvent(ctx context.Context, id, named string) (store.Event, error) {
	tenant, err := s.tenantFor(ctx, named, "query.tenant")
	if err != nil {
		return store.Event{}, err
	}
	db := s.db(ctx)
	if tenant != "" {
		e, err := db.GetEvent(ctx, store.EventKey(tenant, id, true))
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return e, s.problem(err, "event "+Echo(id))
		}
	}
	e, err := db.GetEvent(ctx, id)
	if err == nil && (tenant != "" && e.Tenant != tenant || store.PublicEventID(e.ID) != id) {
		err = store.ErrNotFound
	}
	if err == nil {
		return e, nil
	}
	if errors.Is(err, store.ErrNotFound) && tenant == "" {
		return store.Event{}, huma.Error404NotFound("event " + id + " not found (an id chosen by a producer is unique per tenant only: add ?tenant=<tenant>)")
	}
	return e, s.problem(err, "event "+Echo(id))
}

// ReservedEventType reports whether typ (an event type or a filter
// pattern) is in the namespaces Herald keeps for its own events:
// store.ReservedEventType, which outbox.Publish applies too.
func ReservedEventType(typ string) bool { return store.ReservedEventType(typ) }

// personalDataWarning is the X-Herald-Personal-Data-Warning of a publish
// the guard warned about: "<pointer> <kind>" of the first maxProblemErrors
// findings (data's by pointer, then data_versions'), each pointer cut by
// Echo once its control characters are escaped (headerSafe), joined by ", ",
// then ", and N more" for the rest. Bounded like a problem (a few KB at
// most): the header of data with thousands of addresses was tens of KB,
// past the 16 KB of response headers that Node's fetch and many proxies
// accept, which failed the request of a publish that was stored.
func personalDataWarning(findings []catalog.Finding) string {
	shown := findings[:min(len(findings), maxProblemErrors)]
	parts := make([]string, len(shown))
	for i, f := range shown {
		parts[i] = Echo(headerSafe(f.Pointer)) + " " + f.Kind
	}
	s := strings.Join(parts, ", ")
	if more := len(findings) - len(shown); more > 0 {
		s += fmt.Sprintf(", and %d more", more)
	}
	return s
}

// headerSafe writes the control characters of s (C0 and DEL, which no
// header value may hold, RFC 9110 §5.5: Node's fetch fails an answer with
// one) as JSON writes them, \u0000; a member name of the data may hold
// any. Other characters are kept.
func headerSafe(s string) string {
	control := func(r rune) bool { return r < 0x20 || r == 0x7f }
	if !strings.ContainsFunc(s, control) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if control(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
