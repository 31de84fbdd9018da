package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/inbound/scheme"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

// HMACBody configures the generic "hmac" scheme.
type HMACBody struct {
	Header          string `json:"header" minLength:"1" maxLength:"128" doc:"header carrying the signature"`
	Algorithm       string `json:"algorithm,omitempty" enum:"sha256,sha1,sha512" doc:"default sha256"`
	Encoding        string `json:"encoding,omitempty" enum:"hex,base64" doc:"default hex"`
	Prefix          string `json:"prefix,omitempty" maxLength:"64" doc:"stripped before decoding, e.g. sha256=; must not start with a space (HTTP strips a header value's leading whitespace, RFC 9110 §5.5)"`
	TimestampHeader string `json:"timestamp_header,omitempty" maxLength:"128" doc:"header with unix seconds; enables the replay window"`
	Template        string `json:"template,omitempty" maxLength:"256" doc:"signed content; placeholders {body}, {timestamp}, {header:Name}; default {body}"`
}

func (h *HMACBody) config() *scheme.HMACConfig {
	if h == nil {
		return nil
	}
	return &scheme.HMACConfig{Header: h.Header, Algorithm: h.Algorithm, Encoding: h.Encoding, Prefix: h.Prefix,
		TimestampHeader: h.TimestampHeader, Template: h.Template}
}

// CreateSourceBody is the body of POST /v1/sources.
type CreateSourceBody struct {
	Name             string    `json:"name" minLength:"1" maxLength:"128" pattern:"^([^\\p{Cc}\\p{Cf}]*[^\\p{Cc}\\p{Cf}\\p{Z}][^\\p{Cc}\\p{Cf}]*)?$" patternDescription:"not blank (a character other than spaces), no control characters or invisible format characters (C0 and C1 controls, U+200B, U+FEFF, bidirectional overrides such as U+202E)"`
	Scheme           string    `json:"scheme" enum:"herald,standard-webhooks,stripe,github,shopify,slack,hmac" doc:"how the provider signs"`
	Secrets          []string  `json:"secrets" minItems:"1" maxItems:"5" doc:"the provider's signing secrets (several during a rotation); write-only"`
	ToleranceSeconds int       `json:"tolerance_seconds,omitempty" minimum:"0" maximum:"3600" doc:"replay window for schemes with a timestamp, seconds; default 300; refused for a scheme that signs none (github, shopify, hmac without timestamp_header)"`
	Dedupe           string    `json:"dedupe,omitempty" maxLength:"256" doc:"dedupe key: empty = the scheme's own (its event id; the SHA-256 of the body for github, shopify and hmac); header:<Name>; json:/<JSON pointer>"`
	DestinationURL   string    `json:"destination_url" minLength:"1" maxLength:"2048" doc:"where events are forwarded; set by operators, may be a private address but never a link-local or cloud metadata one (169.254.0.0/16, fe80::/10, fd00:ec2::254, …)"`
	MaxBodyBytes     int64     `json:"max_body_bytes,omitempty" minimum:"0" maximum:"16777216" doc:"largest accepted body in bytes: 0 (the default, 1 MiB) or 1024 (1 KiB: smaller fits no real provider's webhooks) to 16777216 (16 MiB)"`
	HMAC             *HMACBody `json:"hmac,omitempty" doc:"for scheme hmac"`
}

// HMACPatchBody is hmac in a source's PATCH: the members it gives change,
// those it leaves out are kept (as every field of the PATCH), so no member
// is required. "" sets a member to its default (none for prefix and
// timestamp_header, {body} for template); null is refused.
type HMACPatchBody struct {
	Header          *string `json:"header,omitempty" minLength:"1" maxLength:"128" doc:"header carrying the signature"`
	Algorithm       *string `json:"algorithm,omitempty" enum:"sha256,sha1,sha512," doc:"default sha256 (\"\")"`
	Encoding        *string `json:"encoding,omitempty" enum:"hex,base64," doc:"default hex (\"\")"`
	Prefix          *string `json:"prefix,omitempty" maxLength:"64" doc:"stripped before decoding, e.g. sha256=; \"\" for none; must not start with a space (HTTP strips a header value's leading whitespace, RFC 9110 §5.5)"`
	TimestampHeader *string `json:"timestamp_header,omitempty" maxLength:"128" doc:"header with unix seconds; enables the replay window; \"\" for none"`
	Template        *string `json:"template,omitempty" maxLength:"256" doc:"signed content; placeholders {body}, {timestamp}, {header:Name}; \"\" for the default {body}"`
}

// merge is the hmac setting stored (nil when there is none) with the
// members p gives changed.
func (p *HMACPatchBody) merge(stored *scheme.HMACConfig) *scheme.HMACConfig {
	var h scheme.HMACConfig
	if stored != nil {
		h = *stored
	}
	for _, m := range []struct {
		from *string
		to   *string
	}{{p.Header, &h.Header}, {p.Algorithm, &h.Algorithm}, {p.Encoding, &h.Encoding}, {p.Prefix, &h.Prefix},
		{p.TimestampHeader, &h.TimestampHeader}, {p.Template, &h.Template}} {
		if m.from != nil {
			*m.to = *m.from
		}
	}
	return &h
}

// UpdateSourceBody is the body of PATCH /v1/sources/{id}.
type UpdateSourceBody struct {
	Name             *string        `json:"name,omitempty" minLength:"1" maxLength:"128" pattern:"^([^\\p{Cc}\\p{Cf}]*[^\\p{Cc}\\p{Cf}\\p{Z}][^\\p{Cc}\\p{Cf}]*)?$" patternDescription:"not blank (a character other than spaces), no control characters or invisible format characters (C0 and C1 controls, U+200B, U+FEFF, bidirectional overrides such as U+202E)"`
	Scheme           *string        `json:"scheme,omitempty" maxLength:"64" doc:"cannot be changed: only the source's own scheme is accepted (a no-op); for another provider create a new source. The one exception: with secrets, it replaces the configuration of a source whose configuration does not open (unreadable [config]), any scheme"`
	Secrets          *[]string      `json:"secrets,omitempty" minItems:"1" maxItems:"5"`
	ToleranceSeconds *int           `json:"tolerance_seconds,omitempty" minimum:"0" maximum:"3600"`
	Dedupe           *string        `json:"dedupe,omitempty" maxLength:"256"`
	DestinationURL   *string        `json:"destination_url,omitempty" minLength:"1" maxLength:"2048"`
	MaxBodyBytes     *int64         `json:"max_body_bytes,omitempty" minimum:"0" maximum:"16777216"`
	HMAC             *HMACPatchBody `json:"hmac,omitempty" doc:"for scheme hmac: the members given change, those left out are kept"`
}

// sourceFieldRules are the rules of a source's integer settings, which a
// refusal of the schema or the decoder names at the field (fieldRules);
// SourceConfig.Validate's refusals name the same ones.
var sourceFieldRules = map[string]string{
	"body.tolerance_seconds": inbound.ToleranceRule,
	"body.max_body_bytes":    inbound.MaxBodyBytesRule,
	// huma's own list would end, on a PATCH, in the empty value that
	// means the default ("sha256, sha1, sha512, ").
	"body.hmac.algorithm": "algorithm must be sha256, sha1 or sha512 (left out: sha256)",
	"body.hmac.encoding":  "encoding must be hex or base64, how the MAC is written in the signature header (left out: hex)",
}

// SourceOut is a source as the API shows it (secrets are write-only).
type SourceOut struct {
	ID                  string    `json:"id" doc:"src_…"`
	Name                string    `json:"name"`
	Scheme              string    `json:"scheme"`
	Secrets             int       `json:"secrets" doc:"number of secrets configured (their values are never shown)"`
	ToleranceSeconds    int       `json:"tolerance_seconds" doc:"the replay window applied, seconds; 0 for a scheme that signs no timestamp (github, shopify, hmac without timestamp_header), which has none"`
	Dedupe              string    `json:"dedupe"`
	MaxBodyBytes        int64     `json:"max_body_bytes"`
	DestinationURL      string    `json:"destination_url"`
	EndpointID          string    `json:"endpoint_id" doc:"the forwarding endpoint: its deliveries, dead letters and replay are under /v1/endpoints/{endpoint_id}"`
	EndpointState       string    `json:"endpoint_state" enum:"enabled,paused,disabled" doc:"the forwarding endpoint's state: disabled (a 410 from the destination, or failing past --disable-after) or paused holds new forwards while the provider is still answered 200; POST /v1/endpoints/{endpoint_id}/enable (or /resume) releases them"`
	EndpointStateReason string    `json:"endpoint_state_reason,omitempty" doc:"why the forwarding endpoint's state last changed (its state_reason), e.g. the endpoint answered 410 Gone"`
	EndpointUnreadable  []string  `json:"endpoint_unreadable,omitempty" doc:"the forwarding endpoint's stored values that the answering node's encryption keys do not open (its unreadable: secrets, headers.<Name>): what the source accepts waits unforwarded until they are replaced (POST /v1/endpoints/{endpoint_id}/rotate-secret: a new forwarding secret, for the destination) or open again"`
	IngestPath          string    `json:"ingest_path" doc:"POST provider webhooks here: /in/{id}"`
	HMAC                *HMACBody `json:"hmac,omitempty"`
	Unreadable          []string  `json:"unreadable,omitempty" doc:"GET /v1/sources/{id} and the list only: the stored values that the answering node's encryption keys do not open (sealed under a key it does not hold, or damaged): config, the source's sealed configuration (its provider signing secrets with the scheme, tolerance, dedupe rule, body cap and hmac settings), which is then shown empty (scheme \"\", secrets 0), never any of its content. The gateway refuses the provider's requests meanwhile (503: nothing can be verified). Replace it with a PATCH /v1/sources/{id} that gives scheme and secrets (and any other setting; the rest take their defaults) on a node that holds the current key, or delete the source; other changes are refused (409). Its forwarding endpoint, sealed at the same time, may need its secrets replaced too (endpoint_unreadable)"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
}

// checkDestination accepts an absolute http(s) URL without userinfo,
// fragment or a credential in the query (the rule of endpoint URLs:
// secrets in URLs end up in logs; send them as headers), that the client
// forwarding to destinations accepts (Config.Destinations, the URL rules
// it applies again before each attempt). The SSRF policy of tenants'
// endpoints does not apply: operators set destinations, typically private
// services. But a link-local or cloud-metadata address (169.254.169.254,
// fe80::/10, fd00:ec2::254, …) is refused as it is for every endpoint
// (url rule blocked_address). The submitted URL is never echoed back in the
// error (it may hold a secret).
func (s *Server) checkDestination(raw, loc string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || strings.ContainsAny(raw, " \t\r\n\\"):
		return "", invalid(loc, "destination_url must be an absolute http(s) URL", nil)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid(loc, "destination_url scheme must be http or https", nil)
	case u.Host == "" || u.Hostname() == "":
		return "", invalid(loc, "destination_url needs a host", nil)
	case u.User != nil:
		return "", invalid(loc, "destination_url must not contain userinfo (user:password@): a source's forwards authenticate with their signature (its forwarding endpoint's secret)", nil)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", invalid(loc, "destination_url must not contain a fragment", nil)
	}
	if name, found := egress.CredentialInQuery(u.RawQuery); found {
		return "", invalid(loc, "url rule "+egress.RuleCredentialsInQuery+": destination_url must not carry a credential in its query (parameter "+name+"); secrets in URLs end up in logs", nil)
	}
	if _, err := s.cfg.Destinations.CheckURL(raw); err != nil {
		var pe *egress.PolicyError
		if errors.As(err, &pe) {
			return "", invalid(loc, "url rule "+pe.Rule+": "+pe.Message, nil)
		}
		return "", invalid(loc, "destination_url: "+err.Error(), nil)
	}
	return u.String(), nil
}

func (s *Server) sourceOut(ctx context.Context, src store.Source) (SourceOut, error) {
	out := SourceOut{ID: src.ID, Name: src.Name, EndpointID: src.EndpointID, IngestPath: "/in/" + src.ID,
		Unreadable: src.Unreadable, CreatedAt: src.CreatedAt, UpdatedAt: src.UpdatedAt}
	if len(src.Unreadable) == 0 {
		// Otherwise its configuration did not open on this node: shown
		// empty, named in Unreadable, never any of its content.
		var sc inbound.SourceConfig
		if err := json.Unmarshal(src.Config, &sc); err != nil {
			return SourceOut{}, huma.Error500InternalServerError("source configuration unreadable")
		}
		out.Scheme, out.Secrets, out.ToleranceSeconds = sc.Scheme, len(sc.Secrets), sc.ReplayWindowSeconds()
		out.Dedupe, out.MaxBodyBytes = sc.Dedupe, sc.Limit()
		if h := sc.HMAC; h != nil {
			out.HMAC = &HMACBody{Header: h.Header, Algorithm: h.Algorithm, Encoding: h.Encoding, Prefix: h.Prefix, TimestampHeader: h.TimestampHeader, Template: h.Template}
		}
	}
	// An endpoint whose sealed values do not open on this node still has
	// its URL and state (the error carries the rest of the row).
	ep, err := s.db(ctx).GetEndpoint(ctx, src.EndpointID)
	if u := unreadableValues(err); u != nil {
		ep, err = u.Endpoint, nil
		out.EndpointUnreadable = u.Values
	}
	if err == nil {
		out.DestinationURL = ep.URL
		out.EndpointState, out.EndpointStateReason = string(ep.State), ep.StateReason
	}
	return out, nil
}

// validateSourceConfig refuses every setting of sc that breaks a rule,
// each located at its setting (sourceConfigRefusal), joined (fieldErrors).
func validateSourceConfig(sc inbound.SourceConfig) error {
	var errs []error
	for _, err := range []error{sc.Validate(), scheme.CheckSecretsAtSave(sc.Scheme, sc.Secrets), scheme.CheckHMACAtSave(sc.HMAC)} {
		for _, e := range joined(err) {
			errs = append(errs, sourceConfigRefusal(e))
		}
	}
	return errors.Join(errs...)
}

// joined is the errors err joins (errors.Join, at any depth), or err
// alone; none for nil.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range j.Unwrap() {
			all = append(all, joined(e)...)
		}
		return all
	}
	return []error{err}
}

// sourceConfigRefusal is the 422 of a refused source configuration,
// located as the schema's checks locate theirs: at the setting it names
// (body.dedupe: the rule, which names the setting, and the refused value
// when it is a number), the secret (body.secrets[1]: 0-based, huma's
// convention for array items) or the hmac setting (body.hmac.template),
// with scheme.ConfigError's rule as the message (its field is the
// location, as in huma's own refusals); at body when it names none.
func sourceConfigRefusal(err error) error {
	if fe := (*inbound.FieldError)(nil); errors.As(err, &fe) {
		return invalid("body."+fe.Field, err.Error(), fe.Value)
	}
	if ce := (*scheme.ConfigError)(nil); errors.As(err, &ce) && ce.Field != "" {
		return invalid("body."+ce.Field, ce.Rule, nil)
	}
	return invalid("body", err.Error(), nil)
}

// SourceList is a page of sources.
type SourceList struct {
	Data       []SourceOut `json:"data"`
	NextCursor string      `json:"next_cursor"`
}

// SourceIDPath is the {id} of source routes.
type SourceIDPath struct {
	ID string `path:"id" maxLength:"128" doc:"source id (src_…)"`
}

func (s *Server) registerSources() {
	sec := []map[string][]string{{"bearer": {}}}

	huma.Register(s.api, huma.Operation{
		OperationID: "create-source", Method: http.MethodPost, Path: "/v1/sources", Tags: []string{"sources"},
		Summary: "Create an inbound source: verify a provider's webhooks and forward them to a destination", DefaultStatus: http.StatusCreated,
		Security: sec, MaxBodyBytes: 64 << 10,
	}, s.createSource)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-sources", Method: http.MethodGet, Path: "/v1/sources", Tags: []string{"sources"},
		Summary: "List inbound sources, newest first", Security: sec,
	}, s.listSources)

	huma.Register(s.api, huma.Operation{
		OperationID: "get-source", Method: http.MethodGet, Path: "/v1/sources/{id}", Tags: []string{"sources"},
		Summary: "Read a source", Security: sec,
	}, s.getSource)

	huma.Register(s.api, huma.Operation{
		OperationID: "update-source", Method: http.MethodPatch, Path: "/v1/sources/{id}", Tags: []string{"sources"},
		Summary:     "Change a source (e.g. rotate the provider's secrets: send the new and the old one)",
		Description: "A PATCH that changes nothing ({}, the values the source has) answers 200 with the source as it is: nothing is written and updated_at stays. A field left out is kept, hmac's members included (a PATCH of hmac changes the members it gives); a field given null is refused (422 at the field, nothing changed): this is not a JSON Merge Patch (RFC 7396), and every field of a source has a value (send 0 or \"\" for a setting's default).",
		Security:    sec, MaxBodyBytes: 64 << 10,
	}, s.updateSource)

	huma.Register(s.api, huma.Operation{
		OperationID: "delete-source", Method: http.MethodDelete, Path: "/v1/sources/{id}", Tags: []string{"sources"},
		Summary: "Delete a source, its forwarding endpoint and its pending deliveries", DefaultStatus: http.StatusNoContent, Security: sec,
	}, s.deleteSource)
}

type sourceOutput struct{ Body SourceOut }

func (s *Server) createSource(ctx context.Context, in *struct{ Body CreateSourceBody }) (*sourceOutput, error) {
	b := in.Body
	// Every setting is checked and every refusal listed (fieldErrors), in
	// the order of the body's members.
	var fe fieldErrors
	dest, err := s.checkDestination(b.DestinationURL, "body.destination_url")
	fe.add(err)
	sc := inbound.SourceConfig{Scheme: b.Scheme, Secrets: b.Secrets, ToleranceSeconds: b.ToleranceSeconds, Dedupe: b.Dedupe,
		MaxBodyBytes: b.MaxBodyBytes, HMAC: b.HMAC.config()}
	fe.add(validateSourceConfig(sc))
	if err := fe.err(b); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(sc)
	secret, err := webhook.NewSecret()
	if err != nil {
		return nil, huma.Error500InternalServerError("could not generate a secret")
	}
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	id := store.NewID("src")
	src, err := s.db(ctx).CreateSource(ctx, store.CreateSourceParams{
		Source: store.Source{ID: id, Name: b.Name, Config: raw, CreatedAt: now, UpdatedAt: now},
		Endpoint: store.Endpoint{ID: store.NewID("ep"), URL: dest, Description: "forwarding endpoint of source " + id,
			State: store.EndpointEnabled, Secrets: []store.Secret{{Value: secret, CreatedAt: now}}, CreatedAt: now, UpdatedAt: now},
	})
	if err != nil {
		return nil, s.problem(err, "source")
	}
	out, err := s.sourceOut(ctx, src)
	if err != nil {
		return nil, err
	}
	return &sourceOutput{Body: out}, nil
}

type sourceListOut struct {
	Body SourceList
}

func (s *Server) listSources(ctx context.Context, in *struct{ ListQuery }) (*sourceListOut, error) {
	q := query(ctx, listSources, "/v1/sources")
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListSources(ctx, lp)
	if err != nil {
		return nil, s.problem(err, "sources")
	}
	out := &sourceListOut{}
	out.Body.Data = make([]SourceOut, 0, len(pg.Data))
	for _, src := range pg.Data {
		o, err := s.sourceOut(ctx, src)
		if err != nil {
			return nil, err
		}
		out.Body.Data = append(out.Body.Data, o)
	}
	out.Body.NextCursor = s.cursor(q, pg.NextCursor)
	return out, nil
}

func (s *Server) getSource(ctx context.Context, in *SourceIDPath) (*sourceOutput, error) {
	src, err := s.db(ctx).GetSource(ctx, in.ID)
	if u := (*store.UnreadableSourceError)(nil); errors.As(err, &u) {
		// Its configuration does not open here: the source without it,
		// named (Unreadable), as a list shows it.
		src, err = u.Source, nil
	}
	if err != nil {
		return nil, s.problem(err, "source "+Echo(in.ID))
	}
	out, err := s.sourceOut(ctx, src)
	if err != nil {
		return nil, err
	}
	return &sourceOutput{Body: out}, nil
}

type updateSourceInput struct {
	SourceIDPath
	Body UpdateSourceBody
}

// sourceNullRules say, for each member of a source's PATCH, what to send
// instead of null (refuseNulls): every field of a source has a value, so
// none can be removed.
var sourceNullRules = map[string]string{
	"name":              "a source always has a name: leave name out to keep it",
	"scheme":            "a source always has its scheme: leave scheme out to keep it",
	"secrets":           "a source always has 1 to 5 secrets: leave secrets out to keep them, or send the new list",
	"destination_url":   "a source always forwards to a destination: leave destination_url out to keep it",
	"hmac":              "leave hmac out to keep it (scheme hmac always has one; the other schemes take none)",
	"tolerance_seconds": "leave tolerance_seconds out to keep it, or send 0 for the default (300)",
	"max_body_bytes":    "leave max_body_bytes out to keep it, or send 0 for the default (1048576, 1 MiB)",
	"dedupe":            `leave dedupe out to keep it, or send "" for the scheme's own rule (its event id; the SHA-256 of the body for github, shopify and hmac)`,
}

// refuseNulls refuses a PATCH body whose members given null are in rules
// (422, one error per member, located at it, saying what to send
// instead). Herald's PATCH changes the members it gives and keeps those it
// leaves out; it is not a JSON Merge Patch (RFC 7396 §2, where null
// removes a member), so null is no value to change to, and taking it for
// "left out" would answer 200 to a request that meant a change.
func refuseNulls(raw []byte, rules map[string]string) error {
	errs := nullRefusals(raw, rules, "")
	if len(errs) == 0 {
		return nil
	}
	return huma.Error422UnprocessableEntity("validation failed", errs...)
}

// nullRefusals are refuseNulls' errors for the object raw, whose members
// are located at body.<at><name>.
func nullRefusals(raw []byte, rules map[string]string, at string) []error {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil // not an object: the schema has refused it
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(members)) {
		rule, ok := rules[name]
		if !ok || string(members[name]) != "null" {
			continue
		}
		errs = append(errs, &huma.ErrorDetail{Location: "body." + at + name,
			Message: at + name + " cannot be null: a PATCH changes the fields it gives and keeps those it leaves out (null removes nothing: this is not a JSON Merge Patch, RFC 7396); " + rule})
	}
	return errs
}

// hmacNullRules say, for each member of hmac in a source's PATCH, what to
// send instead of null (refuseHMACNulls).
var hmacNullRules = map[string]string{
	"header":           "an hmac source always has a signature header: leave hmac.header out to keep it",
	"algorithm":        `leave hmac.algorithm out to keep it, or send "" for the default (sha256)`,
	"encoding":         `leave hmac.encoding out to keep it, or send "" for the default (hex)`,
	"prefix":           `leave hmac.prefix out to keep it, or send "" for none`,
	"timestamp_header": `leave hmac.timestamp_header out to keep it, or send "" for none`,
	"template":         `leave hmac.template out to keep it, or send "" for the default ({body})`,
}

// refuseHMACNulls refuses, as refuseNulls refuses a top-level one, a
// member of hmac given null in a source's PATCH (422 at body.hmac.<member>):
// its decoded body cannot tell it from a member left out, which is kept.
func refuseHMACNulls(raw []byte) error {
	var body struct {
		HMAC json.RawMessage `json:"hmac"`
	}
	if json.Unmarshal(raw, &body) != nil || len(body.HMAC) == 0 {
		return nil
	}
	errs := nullRefusals(body.HMAC, hmacNullRules, "hmac.")
	if len(errs) == 0 {
		return nil
	}
	return huma.Error422UnprocessableEntity("validation failed", errs...)
}

func (s *Server) updateSource(ctx context.Context, in *updateSourceInput) (*sourceOutput, error) {
	// Every field is checked and every refusal listed (fieldErrors), in
	// the order of the body's members; nulls are refused whatever the
	// source.
	var fe fieldErrors
	fe.add(refuseNulls(sentBody(ctx), sourceNullRules))
	fe.add(refuseHMACNulls(sentBody(ctx)))
	src, err := s.db(ctx).GetSource(ctx, in.ID)
	if err != nil && fe.any() {
		return nil, fe.err(in.Body)
	}
	if u := (*store.UnreadableSourceError)(nil); errors.As(err, &u) {
		return s.replaceSourceConfig(ctx, in, u)
	}
	if err != nil {
		return nil, s.problem(err, "source "+Echo(in.ID))
	}
	var sc, was inbound.SourceConfig
	if json.Unmarshal(src.Config, &sc) != nil || json.Unmarshal(src.Config, &was) != nil {
		return nil, huma.Error500InternalServerError("source configuration unreadable")
	}
	b := in.Body
	if b.Scheme != nil && *b.Scheme != sc.Scheme {
		// The secrets, dedupe rule and ingest URL belong to one
		// provider's signing scheme: changing it in place would verify
		// the next requests with the wrong rules. (The other fields are
		// not checked against a scheme the source does not have.)
		fe.add(invalid("body.scheme", fmt.Sprintf("a source's scheme cannot be changed (this one is %s): create a new source for another scheme", sc.Scheme), *b.Scheme))
		return nil, fe.err(b)
	}
	if b.Secrets != nil {
		sc.Secrets = *b.Secrets
	}
	b.applySettings(&sc)
	if b.HMAC != nil {
		// Merged, not replaced: the members left out are kept, as every
		// field a PATCH leaves out is.
		sc.HMAC = b.HMAC.merge(sc.HMAC)
	}
	// (Only for a scheme configuration that is valid: an invalid one, a
	// template that does not parse, takes no timestamp away; it is
	// refused for what it is.)
	if b.ToleranceSeconds == nil && sc.SchemeConfig().Validate() == nil && !scheme.ReplayWindow(sc.SchemeConfig()) {
		if sc.ToleranceSeconds != 0 && scheme.ReplayWindow(was.SchemeConfig()) {
			// The PATCH takes away the signed timestamp (hmac's
			// timestamp_header) of a source with a tolerance it leaves
			// out: never dropped silently.
			fe.add(invalid("body.hmac.timestamp_header", fmt.Sprintf("without hmac.timestamp_header the source signs no timestamp and has no replay window, but its tolerance_seconds is %d: send \"tolerance_seconds\":0 with it to drop the tolerance too, or keep the timestamp header", sc.ToleranceSeconds), nil))
		}
		// A tolerance stored before such a source was refused one: it
		// never applied. (Refused above, it is not refused again at
		// tolerance_seconds, which the PATCH leaves out.)
		sc.ToleranceSeconds = 0
	}
	p, err := s.sourceUpdate(in.ID, b, sc, &fe)
	if err != nil {
		return nil, err
	}
	changed, err := s.sourceChanges(ctx, src, was, *p.Config, p)
	if err != nil {
		return nil, err
	}
	if !changed {
		// Nothing to change ({}, the values it has): no write, updated_at
		// kept, no change announced to the gateways (the answer is the
		// source as it is), as for an endpoint or an event type.
		out, err := s.sourceOut(ctx, src)
		if err != nil {
			return nil, err
		}
		return &sourceOutput{Body: out}, nil
	}
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	return s.writeSource(ctx, p)
}

// sourceChanges reports whether update p, whose configuration is raw,
// would change source src, whose configuration decodes to was: its name,
// its configuration as it applies (a tolerance that never applies, which
// an update drops, is no difference, nor 0 and the default it stands for)
// or its destination (its forwarding endpoint's
// URL, read only when p names one).
func (s *Server) sourceChanges(ctx context.Context, src store.Source, was inbound.SourceConfig, raw []byte, p store.UpdateSourceParams) (bool, error) {
	if p.Name != nil && *p.Name != src.Name {
		return true, nil
	}
	var now inbound.SourceConfig
	if err := json.Unmarshal(raw, &now); err != nil {
		return true, nil // not comparable: let the update decide
	}
	// Compared as they apply, as GET shows them: a tolerance that never
	// applies is none, 0 is the default tolerance or body cap (sending
	// back the 300 or 1048576 a source with 0 shows changes nothing).
	effective := func(c inbound.SourceConfig) []byte {
		c.ToleranceSeconds, c.MaxBodyBytes = c.ReplayWindowSeconds(), c.Limit()
		b, _ := json.Marshal(c)
		return b
	}
	if !bytes.Equal(effective(was), effective(now)) {
		return true, nil
	}
	if p.DestinationURL == nil {
		return false, nil
	}
	ep, err := s.db(ctx).GetEndpoint(ctx, src.EndpointID)
	if err != nil {
		return false, s.problem(err, "the forwarding endpoint of source "+Echo(src.ID))
	}
	return *p.DestinationURL != ep.URL, nil
}

func (s *Server) deleteSource(ctx context.Context, in *SourceIDPath) (*struct{}, error) {
	if err := s.db(ctx).DeleteSource(ctx, in.ID); err != nil {
		return nil, s.problem(err, "source "+Echo(in.ID))
	}
	s.cfg.SourceChanged(in.ID)
	return &struct{}{}, nil
}

// applySettings sets in sc the settings b gives (tolerance, dedupe rule,
// body cap); those it leaves out keep sc's.
func (b UpdateSourceBody) applySettings(sc *inbound.SourceConfig) {
	if b.ToleranceSeconds != nil {
		sc.ToleranceSeconds = *b.ToleranceSeconds
	}
	if b.Dedupe != nil {
		sc.Dedupe = *b.Dedupe
	}
	if b.MaxBodyBytes != nil {
		sc.MaxBodyBytes = *b.MaxBodyBytes
	}
}

// sourceUpdate is the store's update of source id by b with the
// configuration sc once validated (422 naming the rule), stored as its
// JSON: its name, and its destination once checked (422 naming the rule).
func (s *Server) sourceUpdate(id string, b UpdateSourceBody, sc inbound.SourceConfig, fe *fieldErrors) (store.UpdateSourceParams, error) {
	fe.add(validateSourceConfig(sc))
	raw, _ := json.Marshal(sc)
	p := store.UpdateSourceParams{ID: id, Name: b.Name, Config: &raw, Now: s.cfg.Now()}
	if b.DestinationURL != nil {
		dest, err := s.checkDestination(*b.DestinationURL, "body.destination_url")
		fe.add(err)
		p.DestinationURL = &dest
	}
	return p, fe.err(b)
}

// replaceSourceConfig answers a PATCH of source in.ID, whose sealed
// configuration does not open on this node (u), as an update of an
// endpoint whose values do not open is answered: on a node whose key is
// stale every source fails to open and is probably fine, so the answer is
// that (503, restart it with the current key), never the advice to
// replace or recreate it; on a node that holds the current key, a PATCH
// that gives scheme and secrets replaces the configuration whole (every
// setting it leaves out takes its default: none of the old ones can be
// read), and any other PATCH is refused (409) naming the source and the
// ways out, nothing changed.
func (s *Server) replaceSourceConfig(ctx context.Context, in *updateSourceInput, u *store.UnreadableSourceError) (*sourceOutput, error) {
	if err := s.refuseStaleKey(ctx); err != nil {
		return nil, err
	}
	b := in.Body
	if b.Scheme == nil || b.Secrets == nil {
		return nil, s.problem(u, "source "+Echo(in.ID)) // 409 naming the rule and the ways out
	}
	if !s.holdsCurrentKey(ctx) {
		return nil, huma.Error409Conflict("source " + Echo(in.ID) + "'s stored configuration does not open with this node's encryption keys, and this node does not hold the current key (its key check fails): replace it through a node that holds it")
	}
	sc := inbound.SourceConfig{Scheme: *b.Scheme, Secrets: *b.Secrets}
	if b.HMAC != nil {
		sc.HMAC = b.HMAC.merge(nil) // none of the old settings can be read
	}
	b.applySettings(&sc)
	var fe fieldErrors
	p, err := s.sourceUpdate(in.ID, b, sc, &fe)
	if err != nil {
		return nil, err
	}
	return s.writeSource(ctx, p)
}

// writeSource stores the update p of a source, tells this node's gateway
// (Config.SourceChanged) and answers the source as stored.
func (s *Server) writeSource(ctx context.Context, p store.UpdateSourceParams) (*sourceOutput, error) {
	src, err := s.db(ctx).UpdateSource(ctx, p)
	if err != nil {
		return nil, s.problem(err, "source "+Echo(p.ID))
	}
	s.cfg.SourceChanged(p.ID)
	out, err := s.sourceOut(ctx, src)
	if err != nil {
		return nil, err
	}
	return &sourceOutput{Body: out}, nil
}
