package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/catalog"
	"github.com/herald-webhooks/herald/internal/store"
)

// Catalog modes (Config.CatalogMode, herald serve --catalog).
const (
	CatalogPermissive = "permissive" // uncatalogued types are published as they are (default)
	CatalogStrict     = "strict"     // publishing an uncatalogued type answers 422
)

// Personal-data modes (Config.PersonalData, herald serve --personal-data).
// The default ("") refuses for catalogued types and warns for uncatalogued
// ones.
const (
	PersonalDataRefuse = "refuse" // 422 naming the pointer and the kind
	PersonalDataWarn   = "warn"   // published; metric and X-Herald-Personal-Data-Warning header
	PersonalDataOff    = "off"    // not checked
)

// EventTypeVersionIn is one version of an event type in a request.
type EventTypeVersionIn struct {
	Version int             `json:"version" minimum:"1" doc:"1 for the first version; each new version is the newest plus one"`
	Schema  json.RawMessage `json:"schema" doc:"JSON Schema 2020-12 of the event's data (an object); $ref only inside the schema; a property marked \"x-herald-personal-data\": true may carry personal data"`
	Example json.RawMessage `json:"example,omitempty" doc:"an example of data (a JSON object); must validate against the schema and carry no unmarked personal data; null is the same as leaving it out (no example). A version's example is set when the version is added and never changed"`
}

// withoutNullExample returns v with an example of JSON null (whitespace
// around it allowed) taken as no example: "example": null reads as the
// member left out, the way APIs such as Svix's read a null optional
// member, not as an example that is not an object (which is refused).
func withoutNullExample(v EventTypeVersionIn) EventTypeVersionIn {
	if string(bytes.TrimSpace(v.Example)) == "null" {
		v.Example = nil
	}
	return v
}

// CreateEventTypeBody is the body of POST /v1/event-types.
type CreateEventTypeBody struct {
	Name        string               `json:"name" minLength:"1" maxLength:"128" doc:"event type, e.g. file.updated"`
	Description string               `json:"description,omitempty" maxLength:"1024" pattern:"^[^\\x00]*$" patternDescription:"no NUL characters"`
	ResourceID  string               `json:"resource_id,omitempty" maxLength:"256" doc:"JSON pointer (RFC 6901) into data naming the resource the event is about, e.g. /file_id: events are then numbered per resource (sequence). The value there is a non-empty string or an integer in canonical form (no fraction, exponent, leading zeros or -0; 1 and \"1\" are one resource): a publish with another is refused (422)"`
	Versions    []EventTypeVersionIn `json:"versions" minItems:"1" maxItems:"1" doc:"the first version (version 1)"`
}

// versionRule is the rule of a version number in an event type's create
// and add-version bodies, which a refusal names at the field (fieldRules).
const versionRule = "version must be an integer from 1: 1 for a type's first version, each new version the newest plus one"

// deprecateRule and undeprecateRule are the rules of the items of a PATCH's
// deprecate and undeprecate lists (fieldRules).
const (
	deprecateRule   = "deprecate lists version numbers: integers from 1"
	undeprecateRule = "undeprecate lists version numbers: integers from 1"
)

// UpdateEventTypeBody is the body of PATCH /v1/event-types/{name}.
type UpdateEventTypeBody struct {
	Description *string `json:"description,omitempty" maxLength:"1024" pattern:"^[^\\x00]*$" patternDescription:"no NUL characters"`
	Deprecate   []int   `json:"deprecate,omitempty" maxItems:"100" doc:"versions to mark deprecated (they are still delivered to endpoints that pin them); never the newest; a version may not be in both lists"`
	Undeprecate []int   `json:"undeprecate,omitempty" maxItems:"100" doc:"versions to mark current again"`
}

// EventTypeVersionOut is one version as the API shows it.
type EventTypeVersionOut struct {
	Version    int             `json:"version"`
	Schema     json.RawMessage `json:"schema"`
	Example    json.RawMessage `json:"example,omitempty"`
	Deprecated bool            `json:"deprecated"`
	CreatedAt  time.Time       `json:"created_at"`
}

// EventTypeOut is a catalogued event type.
type EventTypeOut struct {
	Name        string                `json:"name"`
	Description string                `json:"description"`
	ResourceID  string                `json:"resource_id,omitempty"`
	Versions    []EventTypeVersionOut `json:"versions" doc:"ascending; the last is the newest"`
	CreatedAt   time.Time             `json:"created_at"`
	UpdatedAt   time.Time             `json:"updated_at"`
}

func eventTypeOut(t store.EventType) EventTypeOut {
	out := EventTypeOut{Name: t.Name, Description: t.Description, ResourceID: t.ResourceID, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Versions: make([]EventTypeVersionOut, len(t.Versions))}
	for i, v := range t.Versions {
		out.Versions[i] = EventTypeVersionOut{Version: v.Version, Schema: v.Schema, Example: v.Example, Deprecated: v.Deprecated, CreatedAt: v.CreatedAt}
	}
	return out
}

// checkVersion compiles a version's schema and checks its example (schema
// and personal-data guard); loc is the version's location in the body.
// The schema must accept an object, and with a resourceID (the type's
// resource_id pointer, "" when none) the schema must allow a string or
// number there (catalog.Schema.CheckResourceID) and the example carry one.
// An example is a JSON object, as data always is.
func checkVersion(v EventTypeVersionIn, loc, resourceID string) (*catalog.Schema, error) {
	sch, err := catalog.Compile(v.Schema)
	if err == nil {
		err = sch.CheckMarks()
	}
	if err == nil {
		err = sch.CheckRefCycles()
	}
	if err != nil {
		return nil, invalid(loc+".schema", err.Error(), nil)
	}
	if err := sch.AcceptsObject(); err != nil {
		return nil, invalid(loc+".schema", err.Error(), nil)
	}
	if len(v.Example) > 0 {
		if _, err := compactObject(v.Example); err != nil {
			// A schema may accept more than objects ({} does), but data
			// never is anything else: such an example could not be sent.
			return nil, invalid(loc+".example", "the example is an event's data, which is always a JSON object", nil)
		}
	}
	if resourceID != "" {
		if err := sch.CheckResourceID(resourceID); err != nil {
			return nil, invalid(loc+".schema", err.Error(), resourceID)
		}
		if len(v.Example) > 0 {
			if _, err := catalog.ResourceValue(v.Example, resourceID); err != nil {
				return nil, invalid(loc+".example", "the example must carry the resource id (resource_id "+resourceID+"): "+err.Error(), nil)
			}
		}
	}
	if len(v.Example) > 0 {
		viol, err := sch.Validate(v.Example, "")
		if err != nil {
			return nil, invalid(loc+".example", "example must be valid JSON", nil)
		}
		if len(viol) > 0 {
			return nil, invalid(loc+".example", "example does not validate against the schema: "+viol[0].String(), nil)
		}
		if f := catalog.ScanPersonalData(v.Example, sch, ""); len(f) > 0 {
			return nil, invalid(loc+".example", "example carries personal data at "+f[0].Pointer+" ("+f[0].Found()+") in a property not marked \"x-herald-personal-data\": true", nil)
		}
	}
	return sch, nil
}

func (s *Server) registerEventTypes() {
	sec := []map[string][]string{{"bearer": {}}}

	huma.Register(s.api, huma.Operation{
		OperationID: "create-event-type", Method: http.MethodPost, Path: "/v1/event-types", Tags: []string{"event types"},
		Summary: "Catalogue an event type with its first version", DefaultStatus: http.StatusCreated, Security: sec, MaxBodyBytes: 256 << 10,
		Errors: []int{http.StatusConflict},
	}, s.createEventType)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-event-types", Method: http.MethodGet, Path: "/v1/event-types", Tags: []string{"event types"},
		Summary: "List the event catalog, by name, a page at a time", Security: sec,
	}, s.listEventTypes)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-event-type", Method: http.MethodGet, Path: "/v1/event-types/{name}", Tags: []string{"event types"},
		Summary: "Read an event type and its versions", Security: sec,
	}, s.getEventType)

	huma.Register(s.api, huma.Operation{
		OperationID: "add-event-type-version", Method: http.MethodPost, Path: "/v1/event-types/{name}/versions", Tags: []string{"event types"},
		Summary:       "Add a version (the newest plus one) to an event type",
		Description:   "Incompatible payload changes ship as a new version. Endpoints keep the version they pinned; publishers then supply the older versions' data in data_versions.",
		DefaultStatus: http.StatusCreated, Security: sec, MaxBodyBytes: 256 << 10, Errors: []int{http.StatusConflict},
	}, s.addEventTypeVersion)

	huma.Register(s.api, huma.Operation{
		OperationID: "update-event-type", Method: http.MethodPatch, Path: "/v1/event-types/{name}", Tags: []string{"event types"},
		Summary:     "Change an event type's description or mark versions deprecated",
		Description: "A PATCH that changes nothing ({}, the description the type has, versions already so marked) answers 200 with the type as it is: nothing is written and updated_at stays.",
		Security:    sec, MaxBodyBytes: 16 << 10,
		Errors: []int{http.StatusConflict},
	}, s.updateEventType)

	paths := s.api.OpenAPI().Paths
	for _, op := range []*huma.Operation{paths["/v1/event-types"].Post, paths["/v1/event-types/{name}/versions"].Post, paths["/v1/event-types/{name}"].Patch} {
		declareDefaultError(op)
	}
}

type typeOutput struct{ Body EventTypeOut }

// NamePath is the {name} of /v1/event-types/{name}.
type NamePath struct {
	Name string `path:"name" maxLength:"128" doc:"event type name"`
}

func (s *Server) createEventType(ctx context.Context, in *struct{ Body CreateEventTypeBody }) (*typeOutput, error) {
	b := in.Body
	// Every field is checked and every refusal listed (fieldErrors), in
	// the order of the body's members.
	var fe fieldErrors
	switch {
	case !store.ValidEventType(b.Name):
		fe.add(invalid("body.name", store.EventTypeRule, b.Name))
	case ReservedEventType(b.Name):
		fe.add(invalid("body.name", "event types starting with endpoint., delivery. or herald. (in any case) are reserved for Herald's own events", b.Name))
	}
	resourceID := b.ResourceID
	if resourceID != "" && !catalog.ValidPointer(resourceID) {
		fe.add(invalid("body.resource_id", "resource_id must be a JSON pointer (RFC 6901) into data, e.g. /file_id", resourceID))
		resourceID = "" // the version is checked without it
	}
	v := withoutNullExample(b.Versions[0])
	if v.Version != 1 {
		fe.add(invalid("body.versions[0].version", "the first version is 1", v.Version))
	}
	_, err := checkVersion(v, "body.versions[0]", resourceID)
	fe.add(err)
	if err := fe.err(b); err != nil {
		return nil, err
	}
	// Names are compared exactly everywhere (publish, subscriptions), so
	// two that differ only in case would be two types easily confused. The
	// check and the create run one at a time on this node (on PostgreSQL
	// two nodes creating case variants at the same instant can still both
	// succeed).
	s.createTypeMu.Lock()
	defer s.createTypeMu.Unlock()
	variant, err := s.db(ctx).EventTypeCaseVariant(ctx, b.Name)
	if err != nil {
		return nil, s.problem(err, "event types")
	}
	if variant != "" {
		return nil, huma.Error409Conflict("event type " + b.Name + " differs from the catalogued " + variant + " only in case: use " + variant + " (add a version to it) or another name")
	}
	now := s.cfg.Now().Truncate(time.Microsecond) // stored at microsecond precision: the answer says the same
	t, err := s.db(ctx).CreateEventType(ctx, store.EventType{Name: b.Name, Description: b.Description, ResourceID: b.ResourceID,
		Versions:  []store.EventTypeVersion{{Version: 1, Schema: v.Schema, Example: v.Example, CreatedAt: now}},
		CreatedAt: now, UpdatedAt: now})
	s.catalog.forget(b.Name) // saves this node's next publish a stale answer
	if err != nil {
		return nil, s.problem(err, "event type "+Echo(b.Name))
	}
	return &typeOutput{Body: eventTypeOut(t)}, nil
}

type eventTypesOut struct {
	Body struct {
		Data       []EventTypeOut `json:"data"`
		NextCursor string         `json:"next_cursor"`
	}
}

// listEventTypes pages the catalog by name (every type with all its
// versions), 50 types by default (limit up to 1,000): an unpaged answer
// would grow with every type and version catalogued.
func (s *Server) listEventTypes(ctx context.Context, in *ListQuery) (*eventTypesOut, error) {
	q := sharedQuery(listEventTypes, "/v1/event-types") // the same catalog for every key
	lp, err := s.page(*in, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListEventTypes(ctx, lp)
	if err != nil {
		return nil, s.problem(err, "event types")
	}
	out := &eventTypesOut{}
	out.Body.Data = make([]EventTypeOut, len(pg.Data))
	for i, t := range pg.Data {
		out.Body.Data[i] = eventTypeOut(t)
	}
	out.Body.NextCursor = s.cursor(q, pg.NextCursor)
	return out, nil
}

func (s *Server) getEventType(ctx context.Context, in *NamePath) (*typeOutput, error) {
	t, err := s.db(ctx).GetEventType(ctx, in.Name)
	if err != nil {
		return nil, s.problem(err, "event type "+Echo(in.Name))
	}
	return &typeOutput{Body: eventTypeOut(t)}, nil
}

type addEventTypeVersionInput struct {
	NamePath
	Body EventTypeVersionIn
}

func (s *Server) addEventTypeVersion(ctx context.Context, in *addEventTypeVersionInput) (*typeOutput, error) {
	in.Body = withoutNullExample(in.Body)
	t, err := s.db(ctx).GetEventType(ctx, in.Name)
	if err != nil {
		return nil, s.problem(err, "event type "+Echo(in.Name))
	}
	newest, _ := t.Newest()
	if in.Body.Version != newest.Version+1 {
		return nil, invalid("body.version", fmt.Sprintf("versions only grow: the next version of %s is %d", t.Name, newest.Version+1), in.Body.Version)
	}
	if _, err := checkVersion(in.Body, "body", t.ResourceID); err != nil {
		return nil, err
	}
	now := s.cfg.Now().Truncate(time.Microsecond)
	t.Versions = append(t.Versions, store.EventTypeVersion{Version: in.Body.Version, Schema: in.Body.Schema, Example: in.Body.Example, CreatedAt: now})
	t.UpdatedAt = now
	t, err = s.db(ctx).UpdateEventType(ctx, t)
	s.catalog.forget(in.Name)
	if err != nil {
		return nil, s.problem(err, "event type "+Echo(in.Name))
	}
	return &typeOutput{Body: eventTypeOut(t)}, nil
}

type updateEventTypeInput struct {
	NamePath
	Body UpdateEventTypeBody
}

func (s *Server) updateEventType(ctx context.Context, in *updateEventTypeInput) (*typeOutput, error) {
	t, err := s.db(ctx).GetEventType(ctx, in.Name)
	if err != nil {
		return nil, s.problem(err, "event type "+Echo(in.Name))
	}
	before := t
	before.Versions = slices.Clone(t.Versions)
	if in.Body.Description != nil {
		t.Description = *in.Body.Description
	}
	// Every item is checked and every refusal listed (fieldErrors), in
	// the order of the body's members.
	var fe fieldErrors
	mark := func(vs []int, loc string, dep bool) {
		for i, v := range vs {
			found := false
			for j := range t.Versions {
				if t.Versions[j].Version == v {
					t.Versions[j].Deprecated, found = dep, true
				}
			}
			if !found {
				fe.add(invalid(loc+"["+itoa(i)+"]", fmt.Sprintf("%s has no version %d", t.Name, v), v))
			}
		}
	}
	for i, v := range in.Body.Undeprecate {
		if slices.Contains(in.Body.Deprecate, v) {
			fe.add(invalid("body.undeprecate["+itoa(i)+"]", fmt.Sprintf("version %d is both in deprecate and undeprecate: give it in one of them", v), v))
		}
	}
	if newest, ok := t.Newest(); ok {
		for i, v := range in.Body.Deprecate {
			if v == newest.Version {
				fe.add(invalid("body.deprecate["+itoa(i)+"]", fmt.Sprintf("the newest version of %s (%d) cannot be deprecated: publishers send it in data and new subscribers are pinned to it; add a version first", t.Name, v), v))
			}
		}
	}
	mark(in.Body.Deprecate, "body.deprecate", true)
	mark(in.Body.Undeprecate, "body.undeprecate", false)
	if err := fe.err(in.Body); err != nil {
		return nil, err
	}
	if t.Description == before.Description && slices.EqualFunc(t.Versions, before.Versions, func(a, b store.EventTypeVersion) bool { return a.Deprecated == b.Deprecated }) {
		// Nothing to change ({}, the description it has, versions already
		// so marked): no write, updated_at kept (the answer is the type
		// as it is), as for an endpoint.
		return &typeOutput{Body: eventTypeOut(before)}, nil
	}
	t.UpdatedAt = s.cfg.Now().Truncate(time.Microsecond)
	t, err = s.db(ctx).UpdateEventType(ctx, t)
	s.catalog.forget(in.Name)
	if err != nil {
		return nil, s.problem(err, "event type "+Echo(in.Name))
	}
	return &typeOutput{Body: eventTypeOut(t)}, nil
}

// deprecatedPin is a pin of an endpoint to a deprecated version of an
// event type (the endpoint keeps receiving that version; docs/contract.md,
// "Versions and pinning", step 6).
type deprecatedPin struct {
	Type            string
	Version, Newest int
}

// maxDeprecationWarnings bounds the Warning fields of one answer; one
// more says how many pins it leaves out.
const maxDeprecationWarnings = 10

// deprecationWarnings renders pins as Warning field values (RFC 7234
// §5.5: warn-code 299 "Miscellaneous Persistent Warning", no warn-agent
// "-", a quoted warn-text; RFC 9111 §5.5 obsoletes the field for caches,
// and Kubernetes answers a request using a deprecated API with it the
// same way): one per pin, at most maxDeprecationWarnings and then one
// counting the rest, in the order given. Event type names need no
// escaping in a quoted-string (store.ValidEventType).
func deprecationWarnings(pins []deprecatedPin) []string {
	var out []string
	for i, p := range pins {
		if i == maxDeprecationWarnings {
			out = append(out, fmt.Sprintf(`299 - "and %d more pins to deprecated versions (GET /v1/event-types)"`, len(pins)-i))
			break
		}
		out = append(out, fmt.Sprintf(`299 - "%s version %d is deprecated (the newest is %d): the endpoint keeps receiving version %d until its pin moves (versions)"`,
			p.Type, p.Version, p.Newest, p.Version))
	}
	return out
}

// checkSubscriptions applies the catalog to an endpoint's filter and pins
// (docs/contract.md, "Versions and pinning"). With an empty catalog
// anything goes (pins must then be empty). Otherwise every exact type must
// be catalogued (422 with the closest names), every pattern must match a
// catalogued type, every pin must name a catalogued type and one of its
// versions, and each catalogued type the filter matches that has no pin
// is pinned to its newest version — except a type the endpoint's previous
// filter prevTypes already matched (an update of an endpoint older than the
// type): it keeps receiving what it received, the first version
// (store.Endpoint.VersionOf). prev are the endpoint's current pins, kept
// (unless pins changes them) for the types the filter still matches; the
// pins of types it no longer matches are dropped. prevTypes is nil on
// create. deprecated lists the resulting pins to a deprecated version, by
// type name: they are allowed, and the caller is warned of them
// (deprecationWarnings).
func (s *Server) checkSubscriptions(ctx context.Context, types []string, pins, prev map[string]int, prevTypes *[]string) (_ map[string]int, deprecated []deprecatedPin, _ error) {
	cat, err := store.AllEventTypes(ctx, s.db(ctx))
	if err != nil {
		return nil, nil, s.problem(err, "event types")
	}
	out, err := subscriptions(cat, s.cfg.CatalogMode == CatalogStrict, types, pins, prev, prevTypes)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range cat { // by name
		v, ok := t.Version(out[t.Name])
		if newest, _ := t.Newest(); ok && v.Deprecated {
			deprecated = append(deprecated, deprecatedPin{Type: t.Name, Version: v.Version, Newest: newest.Version})
		}
	}
	return out, deprecated, nil
}

// subscriptions is checkSubscriptions' rule, on the catalog cat (by name).
func subscriptions(cat []store.EventType, strict bool, types []string, pins, prev map[string]int, prevTypes *[]string) (map[string]int, error) {
	byName := make(map[string]store.EventType, len(cat))
	names := make([]string, 0, len(cat))
	for _, t := range cat {
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	if len(cat) == 0 {
		if len(pins) > 0 {
			return nil, invalid("body.versions", "the event catalog is empty: there is no version to pin", nil)
		}
		return nil, nil
	}
	var errs []error // every refusal, each at its field (fieldErrors)
	for i, p := range types {
		switch {
		case p == "*", ReservedEventType(p):
			// Herald's own operational and test events are never in the
			// catalog; subscribing to them is always allowed.
		case strings.HasSuffix(p, ".*"):
			// Permissive mode publishes uncatalogued types, so a pattern
			// may be for them.
			if strict && !matchesAny([]string{p}, names) {
				errs = append(errs, invalid("body.event_types["+itoa(i)+"]", "pattern "+p+" matches no catalogued event type (GET /v1/event-types)", p))
			}
		default:
			if _, ok := byName[p]; !ok {
				// A close catalogued name is a typo in either mode; an
				// uncatalogued type is refused only in strict mode.
				sug := catalog.Suggest(p, names)
				if len(sug) > 0 {
					errs = append(errs, invalid("body.event_types["+itoa(i)+"]", "unknown event type "+p+": did you mean "+strings.Join(sug, " or ")+"?", p))
				} else if strict {
					errs = append(errs, invalid("body.event_types["+itoa(i)+"]", "unknown event type "+p+": not in the event catalog (GET /v1/event-types) and the server runs with --catalog strict", p))
				}
			}
		}
	}
	// Pins are kept for the catalogued types the new filter still
	// matches: a pin of a type no longer subscribed would come back, stale,
	// with a later subscription, which is pinned afresh (to the newest).
	out := map[string]int{}
	for name, v := range prev {
		if _, ok := byName[name]; ok && store.MatchEventType(types, name) {
			out[name] = v
		}
	}
	keys := make([]string, 0, len(pins))
	for k := range pins {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		v := pins[name]
		t, ok := byName[name]
		if !ok {
			errs = append(errs, invalid("body.versions."+name, "unknown event type "+name+": not in the event catalog", name))
			continue
		}
		if !store.MatchEventType(types, name) {
			errs = append(errs, invalid("body.versions."+name, "the endpoint does not subscribe to "+name+" (event_types): a pin needs a subscription", name))
			continue
		}
		if _, ok := t.Version(v); !ok {
			newest, _ := t.Newest()
			errs = append(errs, invalid("body.versions."+name, fmt.Sprintf("%s has no version %d (versions 1 to %d)", name, v, newest.Version), v))
			continue
		}
		out[name] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, t := range cat {
		if _, pinned := out[t.Name]; pinned || !(len(types) == 0 || store.MatchEventType(types, t.Name)) {
			continue
		}
		if prevTypes != nil && store.MatchEventType(*prevTypes, t.Name) {
			out[t.Name] = store.FirstVersion
			continue
		}
		newest, _ := t.Newest()
		out[t.Name] = newest.Version
	}
	return out, nil
}

func matchesAny(patterns, names []string) bool {
	for _, n := range names {
		if store.MatchEventType(patterns, n) {
			return true
		}
	}
	return false
}

// catalogPublish is what the catalog decides about one publish.
type catalogPublish struct {
	catalogued bool
	revision   int            // the catalog entry checked against (0: uncatalogued): store.PublishParams.CatalogRevision
	cached     bool           // that entry came from s.catalog (not read for this check)
	version    int            // the newest version (0: uncatalogued)
	older      map[int][]byte // compact data of the older versions supplied
	seqKey     string         // store.PublishParams.SequenceKey
	warnings   []catalog.Finding
	// refused: the personal data the check refused the publish for; the
	// caller counts it once the refusal is answered (not for a refusal by
	// a cached entry that is checked again, nor for a retry answered as
	// the duplicate of an event accepted earlier).
	refused []catalog.Finding
}

// problemOf answers 422 with one error per violation: location the JSON
// pointer in the request body, message the rule.
func problemOf(summary string, viol []catalog.Violation) error {
	errs := make([]error, len(viol))
	parts := make([]string, len(viol))
	for i, v := range viol {
		errs[i] = &huma.ErrorDetail{Location: v.Pointer, Message: v.Rule + ": " + v.Message}
		parts[i] = v.Pointer + ": " + v.Rule
	}
	return huma.NewError(http.StatusUnprocessableEntity, summary+": "+strings.Join(parts, "; "), errs...)
}

// checkPublish validates a publish against the catalog (docs/contract.md,
// "Event types and versions"): the data against the newest version's
// schema, data_versions against theirs, the versions pinned by the
// tenant's subscribed endpoints present, and no personal data outside
// marked properties. Nothing is stored when it answers an error.
//
// The catalog entry comes from s.catalog (fresh: read it anew); the
// publish passes cp.revision to the store, which refuses it
// (store.ErrStaleCatalog) if the entry changed meanwhile.
func (s *Server) checkPublish(ctx context.Context, tenant, typ string, data []byte, dataVersions map[string]json.RawMessage, fresh bool) (catalogPublish, error) {
	var cp catalogPublish
	t, found, cached, err := s.catalog.eventType(ctx, s.db(ctx), typ, fresh)
	cp.cached = cached
	if err == nil && !found && t.Name != "" {
		// Names are compared exactly, so this would be another,
		// uncatalogued type: no schema, version, sequence or personal-data
		// refusal. Creating it is refused (409); publishing it too, in
		// either catalog mode.
		return cp, invalid("body.type", "event type "+typ+" differs from catalogued "+t.Name+" only in case: publish "+t.Name+" (names are compared exactly)", typ)
	}
	if err == nil && !found {
		if s.cfg.CatalogMode == CatalogStrict {
			return cp, invalid("body.type", "event type "+typ+" is not in the event catalog and the server runs with --catalog strict (POST /v1/event-types first)", typ)
		}
		if len(dataVersions) > 0 {
			return cp, invalid("body.data_versions", "data_versions needs a catalogued event type; "+typ+" is not in the catalog", nil)
		}
		if mode := s.personalDataMode(false); mode != PersonalDataOff {
			cp.warnings = catalog.ScanPersonalData(data, nil, "/data")
			if mode == PersonalDataRefuse && len(cp.warnings) > 0 {
				cp.refused = cp.warnings
				return cp, personalDataProblem(typ, cp.warnings)
			}
		}
		return cp, nil
	}
	if err != nil {
		return cp, s.problem(err, "event type "+Echo(typ))
	}
	newest, ok := t.Newest()
	if !ok {
		return cp, huma.Error500InternalServerError("event type " + typ + " has no version")
	}
	cp.catalogued, cp.version, cp.revision = true, newest.Version, t.Revision
	type check struct {
		v      store.EventTypeVersion
		data   []byte
		prefix string
	}
	checks := []check{{newest, data, "/data"}}
	cp.older = map[int][]byte{}
	for k, raw := range dataVersions {
		n, err := strconv.Atoi(k)
		if err == nil && strconv.Itoa(n) != k {
			// "01" or "+1" would name version 1 a second way.
			return cp, invalid("body.data_versions."+k, "a version is written in decimal without a sign or leading zeros (\""+strconv.Itoa(n)+"\")", k)
		}
		v, ok := t.Version(n)
		if err != nil || !ok || n == newest.Version {
			if newest.Version == 1 {
				// "(1 to 0)" named a range with nothing in it.
				return cp, invalid("body.data_versions."+k, fmt.Sprintf("%s has one version, which goes in data: data_versions names older versions and it has none; leave data_versions out", typ), k)
			}
			return cp, invalid("body.data_versions."+k, fmt.Sprintf("data_versions names the older versions of %s (1 to %d); the newest goes in data", typ, newest.Version-1), k)
		}
		var buf strings.Builder
		if c, err := compactObject(raw); err != nil {
			return cp, invalid("body.data_versions."+k, "must be a JSON object", nil)
		} else {
			buf.Write(c)
		}
		cp.older[n] = []byte(buf.String())
		checks = append(checks, check{v, cp.older[n], "/data_versions/" + k})
	}
	// Every version a subscribed endpoint receives must be supplied.
	need, err := s.pinnedVersions(ctx, tenant, typ)
	if err != nil {
		return cp, err
	}
	var missing []catalog.Violation
	for v, n := range need {
		if _, ok := cp.older[v]; !ok && v != newest.Version {
			missing = append(missing, catalog.Violation{Pointer: "/data_versions/" + strconv.Itoa(v), Rule: "required",
				Message: fmt.Sprintf("version %d of %s is received by %s of tenant %s: supply its data", v, typ, n, tenant)})
		}
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i].Pointer < missing[j].Pointer })
		return cp, problemOf("a version that subscribed endpoints receive is missing", missing)
	}
	mode := s.personalDataMode(true)
	for _, c := range checks {
		sch, err := catalog.Compile(c.v.Schema)
		if err != nil {
			return cp, huma.Error500InternalServerError("the stored schema of " + typ + " does not compile")
		}
		viol, err := sch.Validate(c.data, c.prefix)
		if err != nil {
			return cp, invalid("body"+strings.ReplaceAll(c.prefix, "/", "."), "must be valid JSON", nil)
		}
		if len(viol) > 0 {
			return cp, problemOf(fmt.Sprintf("data does not match %s version %d", typ, c.v.Version), viol)
		}
		if mode != PersonalDataOff {
			f := catalog.ScanPersonalData(c.data, sch, c.prefix)
			if mode == PersonalDataRefuse && len(f) > 0 {
				cp.refused = f
				return cp, personalDataProblem(typ, f)
			}
			cp.warnings = append(cp.warnings, f...)
		}
	}
	if t.ResourceID != "" {
		rid, err := catalog.ResourceValue(data, t.ResourceID)
		if err != nil {
			return cp, problemOf("no usable resource id in the data of "+typ, []catalog.Violation{{Pointer: "/data" + t.ResourceID, Rule: "resource_id", Message: err.Error()}})
		}
		// Every version is about the same resource: the sequence is counted
		// for data's resource id and delivered with each version's bytes.
		vs := make([]int, 0, len(cp.older))
		for v := range cp.older {
			vs = append(vs, v)
		}
		sort.Ints(vs)
		for _, v := range vs {
			ptr := "/data_versions/" + strconv.Itoa(v) + t.ResourceID
			orid, err := catalog.ResourceValue(cp.older[v], t.ResourceID)
			if err != nil {
				return cp, problemOf("no usable resource id in the data of "+typ+" version "+strconv.Itoa(v), []catalog.Violation{{Pointer: ptr, Rule: "resource_id", Message: err.Error()}})
			}
			if orid != rid {
				return cp, problemOf("data_versions names another resource than data", []catalog.Violation{{Pointer: ptr, Rule: "resource_id",
					Message: fmt.Sprintf("every version of an event is about one resource: %q here, %q at /data%s", orid, rid, t.ResourceID)}})
			}
		}
		cp.seqKey = store.SequenceKeyOf(tenant, typ, rid)
	}
	return cp, nil
}

func personalDataProblem(typ string, f []catalog.Finding) error {
	viol := make([]catalog.Violation, len(f))
	for i, x := range f {
		viol[i] = catalog.Violation{Pointer: x.Pointer, Rule: "personal-data", Message: x.Found() + "; events are thin (ids, links), or mark the property \"x-herald-personal-data\": true in the schema"}
	}
	for i := range viol {
		viol[i].Rule = "personal-data: " + f[i].Kind
	}
	return problemOf("personal data in an event of "+typ, viol)
}

// countRefused counts a refused publish's personal data
// (catalogPublish.refused), once per publish.
func (s *Server) countRefused(f []catalog.Finding) {
	for _, x := range f {
		s.cfg.Metrics.PersonalData(x.Kind, "refused")
	}
}

func (s *Server) personalDataMode(catalogued bool) string {
	if s.cfg.PersonalData != "" {
		return s.cfg.PersonalData
	}
	if catalogued {
		return PersonalDataRefuse
	}
	return PersonalDataWarn
}

// receivers counts the endpoints that receive one version of a type: those
// that pin it and those without a pin, which get the type's first version
// (store.Endpoint.VersionOf).
type receivers struct{ pinned, unpinned int }

// String is "2 endpoints that pin it and 1 without a pin (given the first
// version)", leaving out a zero part.
func (r receivers) String() string {
	plural := func(n int) string {
		if n == 1 {
			return "1 endpoint"
		}
		return strconv.Itoa(n) + " endpoints"
	}
	var parts []string
	if r.pinned > 0 {
		verb := "pin"
		if r.pinned == 1 {
			verb = "pins"
		}
		parts = append(parts, plural(r.pinned)+" that "+verb+" it")
	}
	if r.unpinned > 0 {
		parts = append(parts, plural(r.unpinned)+" without a pin (given the type's first version)")
	}
	return strings.Join(parts, " and ")
}

// pinnedVersions counts, per version of typ, the tenant's endpoints whose
// filter matches typ and that receive that version (their pin, else the
// first version: store.Endpoint.VersionOf, the rule delivery uses).
func (s *Server) pinnedVersions(ctx context.Context, tenant, typ string) (map[int]receivers, error) {
	out := map[int]receivers{}
	lp := store.ListParams{Limit: 1000}
	for {
		pg, err := s.db(ctx).ListEndpoints(ctx, store.ListEndpointsParams{Tenant: tenant, ListParams: lp})
		if err != nil {
			return nil, s.problem(err, "endpoints")
		}
		for _, e := range pg.Data {
			if store.MatchEventType(e.EventTypes, typ) {
				r := out[e.VersionOf(typ)]
				if e.Versions[typ] > 0 {
					r.pinned++
				} else {
					r.unpinned++
				}
				out[e.VersionOf(typ)] = r
			}
		}
		if pg.NextCursor == "" {
			return out, nil
		}
		lp.Cursor = pg.NextCursor
	}
}
