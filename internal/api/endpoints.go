package api

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

// EndpointOut is an endpoint as the API shows it.
type EndpointOut struct {
	ID                 string            `json:"id" doc:"ep_…"`
	Tenant             string            `json:"tenant"`
	URL                string            `json:"url"`
	Description        string            `json:"description"`
	EventTypes         []string          `json:"event_types" doc:"filter patterns; empty = every type"`
	Versions           map[string]int    `json:"versions" doc:"the version of each catalogued event type this endpoint receives (pinned; default the newest when it subscribed)"`
	Headers            map[string]string `json:"headers" doc:"custom headers sent with every attempt; their values are credentials, so a role that may not read the endpoint's secret (viewer) sees each value as [redacted]"`
	RateLimitPerSecond int               `json:"rate_limit_per_second" doc:"0 = unlimited"`
	State              string            `json:"state" enum:"enabled,paused,disabled"`
	StateReason        string            `json:"state_reason,omitempty"`
	Kind               string            `json:"kind" enum:"tenant,source" doc:"tenant: a tenant's endpoint; source: the forwarding endpoint of an inbound source (its tenant is the source id)"`
	Secret             string            `json:"secret,omitempty" doc:"the signing secret; shown on create only (read it later with GET /v1/endpoints/{id}/secret)"`
	Circuit            *CircuitOut       `json:"circuit,omitempty" doc:"the circuit breaker as the node that answered sees it (each node keeps its own); on list and read only"`
	Unreadable         []string          `json:"unreadable,omitempty" doc:"GET /v1/endpoints/{id} and the list only: the stored values that the answering node's encryption keys do not open (sealed under a key it does not hold, or damaged): secrets, headers.<Name> (whose value is then shown as [unreadable]). Nothing is delivered to the endpoint meanwhile. Replace the secrets with POST /v1/endpoints/{id}/rotate-secret, the header values with a PATCH that sets headers (the whole set; when the secrets open), or delete the endpoint; other changes are refused (409) while such a value remains (its dead letters can still be replayed: they wait, pending, until the values are replaced)"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
}

// CircuitOut is an endpoint's circuit breaker on the node that answered
// (docs/contract.md, "Circuit breaker"): after Threshold consecutive
// transport-level failures (no answer, or 5xx) the circuit opens and no
// attempt goes out until OpenUntil; then one probe attempt decides (a
// success closes it, a failure opens it again).
type CircuitOut struct {
	State               string     `json:"state" enum:"closed,open,half_open" doc:"closed: attempts go out; open: none until open_until; half_open: the cooldown ended and the next attempt is a probe"`
	ConsecutiveFailures int        `json:"consecutive_failures" doc:"consecutive transport-level failures counted by this node"`
	Threshold           int        `json:"threshold" doc:"consecutive failures that open the circuit (herald serve --breaker-threshold)"`
	OpenUntil           *time.Time `json:"open_until,omitempty" doc:"open or half_open: when the cooldown ends (ended)"`
	Probing             bool       `json:"probing,omitempty" doc:"half_open: the probe attempt is in flight"`
}

// withCircuit adds the endpoint's circuit breaker state (Config.Circuit).
func (s *Server) withCircuit(out EndpointOut) EndpointOut {
	if s.cfg.Circuit != nil {
		c := s.cfg.Circuit(out.ID)
		out.Circuit = &c
	}
	return out
}

// RedactedHeaderValue replaces a custom header's value for a caller whose
// role may not read the endpoint's secret: receivers' credentials live in
// custom headers, and viewers never read secrets.
const RedactedHeaderValue = "[redacted]"

// endpointOut shapes an endpoint for the caller in ctx. Custom header
// values are shown only to a role the access policy lets read the
// endpoint's signing secret (the same Policy row, so one rule decides both).
func endpointOut(ctx context.Context, e store.Endpoint) EndpointOut {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	headers := make(map[string]string, len(e.Headers))
	reveal := Allowed(principal(ctx).Role, "get-endpoint-secret")
	for k, v := range e.Headers {
		if !reveal {
			v = RedactedHeaderValue
		}
		headers[k] = v
	}
	versions := e.Versions
	if versions == nil {
		versions = map[string]int{}
	}
	// Values that do not open (a list's endpoint, or GET's): named, a
	// header's value shown as [unreadable], never any content.
	for _, v := range e.Unreadable {
		if name, ok := strings.CutPrefix(v, "headers."); ok {
			headers[name] = UnreadableHeaderValue
		}
	}
	return EndpointOut{
		ID: e.ID, Tenant: e.Tenant, URL: e.URL, Description: e.Description, EventTypes: types, Versions: versions, Headers: headers,
		RateLimitPerSecond: e.RateLimitPerSecond, State: string(e.State), StateReason: e.StateReason, Kind: endpointKind(e),
		Unreadable: e.Unreadable, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
}

func endpointKind(e store.Endpoint) string {
	if e.Kind == store.EndpointKindSource {
		return "source"
	}
	return "tenant"
}

// CreateEndpointBody is the body of POST /v1/endpoints.
type CreateEndpointBody struct {
	Tenant             string            `json:"tenant,omitempty" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"owner of the endpoint: letters, digits, _ . : -, at most 128; default (and only allowed value for a tenant key) the key's tenant"`
	URL                string            `json:"url" minLength:"1" maxLength:"2048" doc:"https URL that receives the events"`
	EventTypes         []string          `json:"event_types,omitempty" maxItems:"100" doc:"filter: exact types, prefix patterns like file.*, or *; default every type. Once the event catalog has entries, names must be catalogued and patterns must match one"`
	Versions           map[string]int    `json:"versions,omitempty" doc:"pin a version per catalogued event type, e.g. {\"file.updated\": 1}; default the newest"`
	Description        string            `json:"description,omitempty" maxLength:"1024" pattern:"^[^\\x00]*$" patternDescription:"no NUL characters"`
	Headers            map[string]string `json:"headers,omitempty" doc:"custom headers sent with every attempt (at most 20; not the ones Herald sets)"`
	RateLimitPerSecond int               `json:"rate_limit_per_second,omitempty" minimum:"0" maximum:"100000" doc:"0 = unlimited"`
}

// rateLimitRule and overlapRule are the rules of an endpoint's
// rate_limit_per_second and a rotation's overlap_seconds, which a refusal
// names at the field (fieldRules), as pinRule is of a pin.
const (
	rateLimitRule = "rate_limit_per_second must be an integer number of attempts per second from 0 (unlimited) to 100000"
	// pinRule is the rule of each value of an endpoint's versions,
	// located at body.versions.<type> ("body.versions.*" in fieldRules).
	pinRule     = "a pin (versions.<event type>) must be an integer version number from 1: a version the event type has in the catalog (GET /v1/event-types/{name})"
	overlapRule = "overlap_seconds must be an integer number of seconds from 0 (the older secrets stop signing at once) to 604800 (7 days); leave it out for the default, 86400 (1 day)"
)

// UpdateEndpointBody is the body of PATCH /v1/endpoints/{id}; absent
// fields are left unchanged.
type UpdateEndpointBody struct {
	URL                *string            `json:"url,omitempty" minLength:"1" maxLength:"2048"`
	EventTypes         *[]string          `json:"event_types,omitempty" maxItems:"100"`
	Versions           *map[string]int    `json:"versions,omitempty" doc:"pins to change (others are kept; {} changes none). Changing event_types drops the pins of the types no longer subscribed"`
	Description        *string            `json:"description,omitempty" maxLength:"1024" pattern:"^[^\\x00]*$" patternDescription:"no NUL characters"`
	Headers            *map[string]string `json:"headers,omitempty"`
	RateLimitPerSecond *int               `json:"rate_limit_per_second,omitempty" minimum:"0" maximum:"100000"`
}

// reservedHeaders are set by Herald on every attempt (or by the HTTP
// client) and cannot be overridden by custom headers.
var reservedHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "User-Agent": true, "Host": true, "Connection": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true, "Keep-Alive": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Expect": true, "Content-Encoding": true,
	"X-Event-Id": true, "X-Event-Type": true, "X-Delivery-Attempt": true, "X-Signature": true,
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
}

// validateHeaders refuses every custom header that breaks a rule, each
// at body.headers.<Name> (by name, in order), joined (fieldErrors).
func validateHeaders(h map[string]string, loc string) error {
	var errs []error
	if len(h) > 20 {
		errs = append(errs, invalid(loc, "at most 20 custom headers", len(h)))
	}
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		v := h[k]
		canon := textproto.CanonicalMIMEHeaderKey(k)
		switch other, dup := seen[canon]; {
		case k == "" || !isToken(k):
			errs = append(errs, invalid(loc+"."+k, "header name must be an RFC 9110 token", k))
		case reservedHeaders[canon]:
			errs = append(errs, invalid(loc+"."+k, "header is set by Herald and cannot be overridden", k))
		case dup:
			errs = append(errs, invalid(loc+"."+k, "header names are case-insensitive: "+k+" and "+other+" are the same header", k))
		}
		if isToken(k) {
			seen[canon] = k
		}
		if len(v) > 4096 || !validFieldValue(v) {
			errs = append(errs, invalid(loc+"."+k, "header value must be at most 4096 bytes of visible characters, spaces and tabs (RFC 9110 §5.5: no CR, LF, NUL or other control characters)", nil))
		} else if strings.Trim(v, " \t") == UnreadableHeaderValue {
			// A receiver reads the value without its surrounding spaces
			// and tabs (RFC 9110 §5.5), so " [unreadable]" is the same
			// value.
			errs = append(errs, invalid(loc+"."+k, UnreadableHeaderValue+" is reserved: it stands for a stored value that does not open; give the header's value", nil))
		}
	}
	return errors.Join(errs...)
}

// validFieldValue follows RFC 9110 §5.5: visible ASCII, space, tab and
// obs-text (bytes ≥ 0x80); no control characters (including DEL).
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validateEventTypes checks filter patterns: "*", an event type, or an
// event type prefix followed by ".*". It returns them with repeats left
// out (the first of each kept, in order): a filter is a set.
func validateEventTypes(types []string, loc string) ([]string, error) {
	var errs []error
	for i, t := range types {
		if t == "*" {
			continue
		}
		if !store.ValidEventType(strings.TrimSuffix(t, ".*")) {
			errs = append(errs, invalid(loc+"["+itoa(i)+"]", "must be *, an event type (segments of letters, digits, _ or - joined by dots) or a prefix ending in .*", t))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := types[:0:0]
	for _, t := range types {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *Server) checkURL(raw, loc string) (string, error) {
	u, err := s.cfg.URLs.CheckURL(raw)
	if err != nil {
		var pe *egress.PolicyError
		if errors.As(err, &pe) {
			var echo any = raw
			if pe.Rule == egress.RuleCredentialsInQuery || pe.Rule == egress.RuleUserinfo {
				echo = nil // never repeat a secret back
			}
			return "", invalid(loc, "url rule "+pe.Rule+": "+pe.Message, echo)
		}
		return "", invalid(loc, err.Error(), raw)
	}
	return u.String(), nil
}

type EndpointIDPath struct {
	ID string `path:"id" maxLength:"128" doc:"endpoint id (ep_…)"`
}

type endpointOutput struct {
	Body EndpointOut
}

// endpointChangeOutput answers a create or an update of an endpoint.
type endpointChangeOutput struct {
	Warning []string `header:"Warning" doc:"one per pin of the endpoint to a deprecated event type version, set by a create or by an update naming event_types or versions: 299 - \"file.updated version 1 is deprecated (the newest is 2): …\" (RFC 7234 §5.5 syntax; at most 10, then one counting the rest). The pin is kept: the endpoint receives that version until it moves"`
	Body    EndpointOut
}

func (s *Server) registerEndpoints() {
	sec := []map[string][]string{{"bearer": {}}}

	huma.Register(s.api, huma.Operation{
		OperationID: "create-endpoint", Method: http.MethodPost, Path: "/v1/endpoints", Tags: []string{"endpoints"},
		Summary: "Create an endpoint", DefaultStatus: http.StatusCreated, Security: sec, MaxBodyBytes: 64 << 10,
	}, s.createEndpoint)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-endpoints", Method: http.MethodGet, Path: "/v1/endpoints", Tags: []string{"endpoints"},
		Summary: "List endpoints, newest first", Security: sec,
	}, s.listEndpoints)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-endpoint", Method: http.MethodGet, Path: "/v1/endpoints/{id}", Tags: []string{"endpoints"},
		Summary: "Read an endpoint", Security: sec,
	}, s.getEndpoint)

	huma.Register(s.api, huma.Operation{
		OperationID: "update-endpoint", Method: http.MethodPatch, Path: "/v1/endpoints/{id}", Tags: []string{"endpoints"},
		Summary: "Change an endpoint", Security: sec, MaxBodyBytes: 64 << 10,
		Description: "A field left out is kept; a field given null is refused (422 at the field, nothing changed): this is not a JSON Merge Patch (RFC 7396). Send \"\" for no description, {} for no headers, [] for every event type, 0 for no rate limit.",
	}, s.updateEndpoint)

	huma.Register(s.api, huma.Operation{
		OperationID: "delete-endpoint", Method: http.MethodDelete, Path: "/v1/endpoints/{id}", Tags: []string{"endpoints"},
		Summary: "Delete an endpoint and its deliveries (events are kept)", DefaultStatus: http.StatusNoContent, Security: sec,
	}, s.deleteEndpoint)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-endpoint-secret", Method: http.MethodGet, Path: "/v1/endpoints/{id}/secret", Tags: []string{"endpoints"},
		Summary: "Read an endpoint's current signing secret", Security: sec,
	}, s.getEndpointSecret)

	huma.Register(s.api, huma.Operation{
		OperationID: "rotate-endpoint-secret", Method: http.MethodPost, Path: "/v1/endpoints/{id}/rotate-secret", Tags: []string{"endpoints"},
		Summary:  "Rotate the signing secret; during the overlap every attempt is signed with the old and the new secret",
		Security: sec, MaxBodyBytes: 4096,
	}, s.rotateEndpointSecret)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-endpoint-secrets", Method: http.MethodGet, Path: "/v1/endpoints/{id}/secrets", Tags: []string{"endpoints"},
		Summary: "List an endpoint's active signing secrets with their expiry (values are never listed)", Security: sec,
	}, s.listEndpointSecrets)

	huma.Register(s.api, huma.Operation{
		OperationID: "revoke-endpoint-secret", Method: http.MethodDelete, Path: "/v1/endpoints/{id}/secrets/{secret_id}", Tags: []string{"endpoints"},
		Summary:       "Revoke an older secret before its overlap ends (409 for the current secret: rotate with overlap_seconds 0 instead)",
		DefaultStatus: http.StatusNoContent, Security: sec,
	}, s.revokeEndpointSecret)

	huma.Register(s.api, huma.Operation{
		OperationID: "test-endpoint", Method: http.MethodPost, Path: "/v1/endpoints/{id}/test", Tags: []string{"endpoints"},
		Summary:  "Send a signed test event (type herald.test) now and show the attempt; nothing is stored or retried",
		Security: sec,
	}, s.testEndpoint)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-endpoint-deliveries", Method: http.MethodGet, Path: "/v1/endpoints/{id}/deliveries", Tags: []string{"deliveries"},
		Summary: "List an endpoint's deliveries; ?state=dead is its dead-letter queue", Security: sec,
	}, s.listEndpointDeliveries)
}

func (s *Server) createEndpoint(ctx context.Context, in *struct{ Body CreateEndpointBody }) (*endpointChangeOutput, error) {
	b := in.Body
	// Every field is checked and every refusal listed (fieldErrors), in
	// the order of the body's members.
	var fe fieldErrors
	tenant, err := s.tenantFor(ctx, b.Tenant, "body.tenant")
	if err := fe.add(err); err != nil {
		return nil, err
	}
	if tenant == "" && err == nil {
		fe.add(invalid("body.tenant", "tenant is required (an admin key acts on every tenant: name one)", nil))
	}
	b.Tenant = tenant
	u, err := s.checkURL(b.URL, "body.url")
	fe.add(err)
	types, err := validateEventTypes(b.EventTypes, "body.event_types")
	fe.add(err)
	var pins map[string]int
	var deprecated []deprecatedPin
	if err == nil {
		// The catalog's rules, once the filter is well-formed.
		b.EventTypes = types
		pins, deprecated, err = s.checkSubscriptions(ctx, b.EventTypes, b.Versions, nil, nil)
		if err := fe.add(err); err != nil {
			return nil, err
		}
	}
	fe.add(validateHeaders(b.Headers, "body.headers"))
	if err := fe.err(b); err != nil {
		return nil, err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, huma.Error500InternalServerError("could not generate a secret")
	}
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	e, err := s.db(ctx).CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{
		ID: store.NewID("ep"), Tenant: b.Tenant, URL: u, Description: b.Description, EventTypes: b.EventTypes, Versions: pins,
		Headers: b.Headers, RateLimitPerSecond: b.RateLimitPerSecond, State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: secret, CreatedAt: now}}, CreatedAt: now, UpdatedAt: now,
	}, MaxPerTenant: s.cfg.MaxEndpointsPerTenant, Notice: true})
	if err != nil {
		return nil, s.problem(err, "endpoint")
	}
	out := endpointOut(ctx, e)
	out.Secret = secret
	return &endpointChangeOutput{Body: out, Warning: deprecationWarnings(deprecated)}, nil
}

type listOut struct {
	Body struct {
		Data       []EndpointOut `json:"data"`
		NextCursor string        `json:"next_cursor"`
	}
}
type listEndpointsInput struct {
	Tenant string `query:"tenant" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"only this tenant's endpoints"`
	Kind   string `query:"kind" enum:"tenant,source,all" doc:"tenant (default): tenants' endpoints; source: inbound sources' forwarding endpoints (admin); all: both"`
	ListQuery
}

func (s *Server) listEndpoints(ctx context.Context, in *listEndpointsInput) (*listOut, error) {
	tenant, err := s.tenantFor(ctx, in.Tenant, "query.tenant")
	if err != nil {
		return nil, err
	}
	kind := in.Kind
	if kind == "" {
		kind = "tenant"
	}
	q := query(ctx, listEndpoints, "/v1/endpoints", "tenant", tenant, "kind", kind)
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListEndpoints(ctx, store.ListEndpointsParams{Tenant: tenant, ListParams: lp,
		OnlySources: in.Kind == "source", IncludeSources: in.Kind == "all"})
	if err != nil {
		return nil, s.problem(err, "endpoints")
	}
	out := &listOut{}
	out.Body.Data = make([]EndpointOut, len(pg.Data))
	for i, e := range pg.Data {
		out.Body.Data[i] = s.withCircuit(endpointOut(ctx, e))
	}
	out.Body.NextCursor = s.cursor(q, pg.NextCursor)
	return out, nil
}

func (s *Server) getEndpoint(ctx context.Context, in *EndpointIDPath) (*endpointOutput, error) {
	e, err := s.db(ctx).GetEndpoint(ctx, in.ID)
	if u := unreadableValues(err); u != nil {
		// Its stored values do not open here: the endpoint without them,
		// each named (u.Endpoint.Unreadable), as a list shows it (the
		// tenant wall is the scoped store's, as always).
		return &endpointOutput{Body: s.withCircuit(endpointOut(ctx, u.Endpoint))}, nil
	}
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	return &endpointOutput{Body: s.withCircuit(endpointOut(ctx, e))}, nil
}

type updateEndpointInput struct {
	EndpointIDPath
	Body UpdateEndpointBody
}

// endpointNullRules say, for each member of an endpoint's PATCH, what to
// send instead of null (refuseNulls): as for a source, a PATCH changes the
// fields it gives and keeps those it leaves out, and null removes nothing.
var endpointNullRules = map[string]string{
	"url":                   "an endpoint always has a URL: leave url out to keep it",
	"event_types":           "leave event_types out to keep them, or send [] for every event type",
	"versions":              "leave versions out to keep the pins, or send {} to change none",
	"description":           `leave description out to keep it, or send "" for none`,
	"headers":               "leave headers out to keep them, or send {} for none",
	"rate_limit_per_second": "leave rate_limit_per_second out to keep it, or send 0 for no limit",
}

func (s *Server) updateEndpoint(ctx context.Context, in *updateEndpointInput) (*endpointChangeOutput, error) {
	// Every field is checked and every refusal listed (fieldErrors), in
	// the order of the body's members; nulls are refused even for an
	// endpoint that cannot be read.
	var fe fieldErrors
	fe.add(refuseNulls(sentBody(ctx), endpointNullRules))
	cur, err := s.refuseSourceEndpoint(ctx, in.ID, "change")
	if err != nil && fe.any() {
		return nil, fe.err(in.Body)
	}
	if errors.As(err, new(*store.UnreadableError)) {
		// On a node whose key is stale every endpoint's values fail to
		// open and are probably fine: answer that (503, restart with the
		// current key), not the advice to replace or recreate them.
		if serr := s.refuseStaleKey(ctx); serr != nil {
			return nil, serr
		}
	}
	// Custom header values that do not open, and nothing else: an update
	// that replaces the headers whole replaces them, as a rotation
	// replaces secrets that do not open, and only on a node that holds
	// the current key (store.UpdateEndpointParams.ReplaceUnreadable).
	replace := false
	if u := unreadableValues(err); u != nil && in.Body.Headers != nil && store.OnlyHeadersUnreadable(err) {
		if !s.holdsCurrentKey(ctx) {
			return nil, huma.Error409Conflict("endpoint " + Echo(in.ID) + "'s stored header values do not open with this node's encryption keys, and this node does not hold the current key (its key check fails): replace them through a node that holds it")
		}
		for name, v := range *in.Body.Headers {
			if v == UnreadableHeaderValue {
				return nil, invalid("body.headers."+name, UnreadableHeaderValue+" stands for a stored value that does not open: give the header's value, or leave the header out", nil)
			}
		}
		cur, err, replace = u.Endpoint, nil, true
	}
	if errors.As(err, new(*store.UnreadableError)) {
		return nil, s.problem(err, "endpoint "+Echo(in.ID)) // 409 naming the rule
	}
	if err != nil {
		return nil, err
	}
	b := in.Body
	p := store.UpdateEndpointParams{ID: in.ID, Description: b.Description, EventTypes: b.EventTypes,
		Headers: b.Headers, RateLimitPerSecond: b.RateLimitPerSecond, Now: s.cfg.Now()}
	if b.URL != nil {
		u, err := s.checkURL(*b.URL, "body.url")
		fe.add(err)
		p.URL = &u
	}
	typesOK := true
	if b.EventTypes != nil {
		types, err := validateEventTypes(*b.EventTypes, "body.event_types")
		fe.add(err)
		if typesOK = err == nil; typesOK {
			*b.EventTypes = types // p.EventTypes points here too
		}
	}
	var warnings []string // the pins to deprecated versions, when the update sets pins
	if typesOK && (b.EventTypes != nil || b.Versions != nil) {
		types := cur.EventTypes // cur: read once above, by refuseSourceEndpoint
		if b.EventTypes != nil {
			types = *b.EventTypes
		}
		var given map[string]int
		if b.Versions != nil {
			given = *b.Versions
		}
		pins, deprecated, err := s.checkSubscriptions(ctx, types, given, cur.Versions, &cur.EventTypes)
		if err := fe.add(err); err != nil {
			return nil, err
		}
		warnings = deprecationWarnings(deprecated)
		if pins != nil {
			p.Versions = &pins
		}
	}
	if b.Headers != nil {
		fe.add(validateHeaders(*b.Headers, "body.headers"))
	}
	if err := fe.err(b); err != nil {
		return nil, err
	}
	if !replace && !changes(cur, p) {
		// Nothing to change: no write, no endpoint.updated event,
		// updated_at kept (the answer is the endpoint as it is).
		return &endpointChangeOutput{Body: endpointOut(ctx, cur), Warning: warnings}, nil
	}
	// The row is written again whole, secrets and header values sealed.
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	p.Notice, p.ReplaceUnreadable = true, replace
	e, err := s.db(ctx).UpdateEndpoint(ctx, p)
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	return &endpointChangeOutput{Body: endpointOut(ctx, e), Warning: warnings}, nil
}

func (s *Server) deleteEndpoint(ctx context.Context, in *EndpointIDPath) (*struct{}, error) {
	// An endpoint whose stored values do not open is deleted all the same:
	// a delete needs none of them.
	if _, err := s.refuseSourceEndpoint(ctx, in.ID, "delete"); err != nil && !errors.As(err, new(*store.UnreadableError)) {
		return nil, err
	}
	if err := s.db(ctx).DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: in.ID, Notice: true, Now: s.cfg.Now()}); err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	return &struct{}{}, nil
}

type secretOut struct {
	Body struct {
		Secret string `json:"secret" doc:"whsec_… (the current signing secret)"`
	}
}

func (s *Server) getEndpointSecret(ctx context.Context, in *EndpointIDPath) (*secretOut, error) {
	e, err := s.db(ctx).GetEndpoint(ctx, in.ID)
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	out := &secretOut{}
	if len(e.Secrets) > 0 {
		out.Body.Secret = e.Secrets[0].Value
	}
	return out, nil
}

type rotateBody struct {
	OverlapSeconds *int `json:"overlap_seconds,omitempty" minimum:"0" maximum:"604800" doc:"how long the older secrets stay valid, in seconds (0–604800 = 7 days; 0: they stop signing at once); left out: 86400. null is refused (422)"`
}
type rotateOut struct {
	Body struct {
		Secret            string     `json:"secret" doc:"the new current secret (whsec_…)"`
		PreviousExpiresAt *time.Time `json:"previous_expires_at" doc:"until when the previous secret still signs; null when it was dropped at once"`
	}
}
type rotateEndpointSecretInput struct {
	EndpointIDPath
	Body *rotateBody `required:"false"`
}

// refuseNullOverlap refuses a rotation whose overlap_seconds is given null
// (422 at the field, naming the rule): its decoded body cannot tell it
// from the member left out, which gives the default overlap of a day, and
// someone rotating a leaked secret who writes null meaning "none" would
// keep the old secret signing for that day.
func refuseNullOverlap(raw []byte) error {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil || string(members["overlap_seconds"]) != "null" {
		return nil // no such member, or not an object: the schema has refused it
	}
	return huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Location: "body.overlap_seconds",
		Message: "overlap_seconds cannot be null: " + overlapRule})
}

func (s *Server) rotateEndpointSecret(ctx context.Context, in *rotateEndpointSecretInput) (*rotateOut, error) {
	if err := refuseNullOverlap(sentBody(ctx)); err != nil {
		return nil, err
	}
	overlap := 86400
	if in.Body != nil && in.Body.OverlapSeconds != nil {
		overlap = *in.Body.OverlapSeconds
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, huma.Error500InternalServerError("could not generate a secret")
	}
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	p := store.RotateSecretParams{ID: in.ID, Secret: secret, PreviousExpiresAt: now.Add(time.Duration(overlap) * time.Second), Now: now}
	// Stored secrets that do not open (and nothing else of the endpoint)
	// are replaced by the new one alone, but only by a node that holds the
	// current encryption key: one that lacks it would drop secrets the
	// other nodes open (store.RotateSecretParams.ReplaceUnreadable).
	if _, err := s.db(ctx).GetEndpoint(ctx, in.ID); store.OnlySecretsUnreadable(err) {
		p.ReplaceUnreadable = s.holdsCurrentKey(ctx)
		if !p.ReplaceUnreadable {
			return nil, huma.Error409Conflict("endpoint " + Echo(in.ID) + "'s stored secrets do not open with this node's encryption keys, and this node does not hold the current key (its key check fails): rotate them through a node that holds it, which replaces them")
		}
	}
	e, err := s.db(ctx).RotateSecret(ctx, p)
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	out := &rotateOut{}
	out.Body.Secret = secret
	if len(e.Secrets) > 1 {
		t := e.Secrets[1].ExpiresAt
		out.Body.PreviousExpiresAt = &t
	}
	return out, nil
}

type secretInfo struct {
	ID        string     `json:"id" doc:"sec_… (a digest of the secret; the value is never listed)"`
	Current   bool       `json:"current" doc:"true for the secret new signatures are made with"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at" doc:"when an older secret stops signing (end of its rotation overlap); null for the current secret"`
}
type secretsOut struct {
	Body struct {
		Data []secretInfo `json:"data" doc:"the secrets every attempt is signed with now, the current one first"`
	}
}

func (s *Server) listEndpointSecrets(ctx context.Context, in *EndpointIDPath) (*secretsOut, error) {
	e, err := s.db(ctx).GetEndpoint(ctx, in.ID)
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	out := &secretsOut{}
	out.Body.Data = []secretInfo{}
	for i, sc := range store.ActiveSecrets(e.Secrets, s.cfg.Now()) {
		info := secretInfo{ID: store.SecretID(sc.Value), Current: i == 0 && sc.ExpiresAt.IsZero(), CreatedAt: sc.CreatedAt}
		if !sc.ExpiresAt.IsZero() {
			t := sc.ExpiresAt
			info.ExpiresAt = &t
		}
		out.Body.Data = append(out.Body.Data, info)
	}
	return out, nil
}

type revokeEndpointSecretInput struct {
	EndpointIDPath
	SecretID string `path:"secret_id" maxLength:"64" doc:"sec_… from GET /v1/endpoints/{id}/secrets"`
}

func (s *Server) revokeEndpointSecret(ctx context.Context, in *revokeEndpointSecretInput) (*struct{}, error) {
	// The secrets left are sealed again.
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	if _, err := s.db(ctx).RevokeSecret(ctx, store.RevokeSecretParams{ID: in.ID, SecretID: in.SecretID, Now: s.cfg.Now()}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if _, gerr := s.db(ctx).GetEndpoint(ctx, in.ID); gerr != nil {
				return nil, s.problem(gerr, "endpoint "+Echo(in.ID))
			}
			return nil, s.problem(err, "active secret "+Echo(in.SecretID)+" of endpoint "+Echo(in.ID))
		}
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	return &struct{}{}, nil
}

type testOut struct {
	Body struct {
		EventID string     `json:"event_id" doc:"id of the test event (type herald.test); nothing is stored"`
		Attempt AttemptOut `json:"attempt"`
	}
}

func (s *Server) testEndpoint(ctx context.Context, in *EndpointIDPath) (*testOut, error) {
	if s.cfg.Tester == nil {
		return nil, huma.Error501NotImplemented("test events are not available")
	}
	e, err := s.db(ctx).GetEndpoint(ctx, in.ID)
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	if _, err := s.checkURL(e.URL, "endpoint.url"); err != nil {
		return nil, err
	}
	a, id, err := s.cfg.Tester.SendTest(ctx, e)
	if err != nil {
		return nil, huma.Error500InternalServerError("could not send the test event")
	}
	out := &testOut{}
	out.Body.EventID = id
	out.Body.Attempt = attemptOut(a)
	return out, nil
}

// deliveriesOut answers the delivery lists (of an endpoint, of every endpoint).
type deliveriesOut struct {
	Body DeliveryList
}
type listEndpointDeliveriesInput struct {
	EndpointIDPath
	State     string  `query:"state" enum:"pending,succeeded,dead,paused" doc:"only deliveries in this state"`
	EventType string  `query:"event_type" maxLength:"128" doc:"only this event type"`
	Since     Instant `query:"since" doc:"only deliveries last changed at or after this time (RFC 3339), e.g. dead-lettered since"`
	ListQuery
}

func (s *Server) listEndpointDeliveries(ctx context.Context, in *listEndpointDeliveriesInput) (*deliveriesOut, error) {
	if err := checkTypeFilter("query.event_type", in.EventType); err != nil {
		return nil, err
	}
	q := query(ctx, listDeliveries, "/v1/endpoints/{id}/deliveries", "endpoint", in.ID, "state", in.State, "event_type", in.EventType, "since", sinceKey(in.Since.Time))
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	if err := s.endpointExists(ctx, in.ID); err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListDeliveries(ctx, store.ListDeliveriesParams{EndpointID: in.ID, State: store.DeliveryState(in.State),
		EventType: in.EventType, Since: in.Since.Time, ListParams: lp})
	if err != nil {
		return nil, s.problem(err, "deliveries")
	}
	return &deliveriesOut{Body: s.deliveryList(q, pg)}, nil
}

// endpointExists answers a read that needs none of the endpoint's stored
// values (its stats, its deliveries): nil for an endpoint the caller may
// see, also one whose values do not open on this node (the tenant wall of
// the tenant-scoped store has been applied to it by then: scope.go), else
// the problem (404 for an unknown id or another tenant's).
func (s *Server) endpointExists(ctx context.Context, id string) error {
	_, err := s.db(ctx).GetEndpoint(ctx, id)
	if err == nil || errors.As(err, new(*store.UnreadableError)) {
		return nil
	}
	return s.problem(err, "endpoint "+Echo(id))
}

// refuseSourceEndpoint answers 409 when id is an inbound source's
// forwarding endpoint (its tenant is the source's internal tenant): the
// source owns its URL and lifetime, so changing or deleting it here would
// make the gateway accept provider events and forward them nowhere. The
// source's own routes do it (PATCH or DELETE /v1/sources/{id}). An
// endpoint whose stored values do not open is checked by its tenant too,
// and its *store.UnreadableError is then returned as is (not a problem
// yet), for the caller to decide: a delete needs none of those values.
func (s *Server) refuseSourceEndpoint(ctx context.Context, id, verb string) (store.Endpoint, error) {
	e, err := s.db(ctx).GetEndpoint(ctx, id)
	tenant := e.Tenant
	if u := (*store.UnreadableError)(nil); errors.As(err, &u) {
		tenant = u.Tenant
	} else if err != nil {
		return e, s.problem(err, "endpoint "+Echo(id))
	}
	if IsInternalTenant(tenant) {
		route := "PATCH /v1/sources/" + tenant // its destination_url
		if verb == "delete" {
			route = "DELETE /v1/sources/" + tenant + ", which deletes this endpoint with it"
		}
		return e, huma.Error409Conflict("endpoint " + id + " forwards inbound source " + tenant + "'s events: " + verb + " it through the source (" + route + ")")
	}
	return e, err
}

// UnreadableHeaderValue stands for a custom header value that the
// answering node's encryption keys do not open (EndpointOut.Unreadable).
const UnreadableHeaderValue = "[unreadable]"

// unreadableValues returns err's *store.UnreadableError when the trouble
// is stored values that do not open (the rest of the endpoint read), else
// nil.
func unreadableValues(err error) *store.UnreadableError {
	if u := (*store.UnreadableError)(nil); errors.As(err, &u) && u.Values != nil {
		return u
	}
	return nil
}

// holdsCurrentKey reports whether this node's encryption key opens the
// store's key check value (Config.KeyCheck; true without one: a store
// without encryption).
func (s *Server) holdsCurrentKey(ctx context.Context) bool {
	return s.cfg.KeyCheck == nil || s.cfg.KeyCheck(ctx) == nil
}

// changes reports whether applying p to cur would change any field (an
// empty list and a missing one are the same).
func changes(cur store.Endpoint, p store.UpdateEndpointParams) bool {
	return (p.URL != nil && *p.URL != cur.URL) ||
		(p.Description != nil && *p.Description != cur.Description) ||
		(p.EventTypes != nil && !slices.Equal(*p.EventTypes, cur.EventTypes) && len(*p.EventTypes)+len(cur.EventTypes) > 0) ||
		(p.Versions != nil && !maps.Equal(*p.Versions, cur.Versions)) ||
		(p.Headers != nil && !maps.Equal(*p.Headers, cur.Headers)) ||
		(p.RateLimitPerSecond != nil && *p.RateLimitPerSecond != cur.RateLimitPerSecond)
}
