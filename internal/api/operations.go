package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// StateChangeOut answers pause, resume and enable.
type StateChangeOut struct {
	Endpoint EndpointOut `json:"endpoint"`
	Held     int         `json:"held" doc:"deliveries now held (pause)"`
	Released int         `json:"released" doc:"held deliveries released for delivery (resume, enable)"`
}

// ReplayOut answers a replay.
type ReplayOut struct {
	Replayed int `json:"replayed" doc:"deliveries moved back to pending (or held, if the endpoint is paused or disabled); 0 when there was nothing to replay"`
}

// DeadLetterCountOut is one endpoint's dead-letter count.
type DeadLetterCountOut struct {
	EndpointID string `json:"endpoint_id"`
	Tenant     string `json:"tenant"`
	Count      int    `json:"count"`
}

func (s *Server) registerOperations() {
	sec := []map[string][]string{{"bearer": {}}}

	huma.Register(s.api, huma.Operation{
		OperationID: "pause-endpoint", Method: http.MethodPost, Path: "/v1/endpoints/{id}/pause", Tags: []string{"endpoints"},
		Summary:  "Pause an endpoint: its deliveries are held (not attempted, not dead-lettered) until resumed",
		Security: sec,
	}, s.pauseEndpoint)
	for _, op := range []struct{ id, path, summary string }{
		{"resume-endpoint", "/v1/endpoints/{id}/resume", "Resume a paused endpoint: held deliveries are released (at the endpoint's rate limit and concurrency cap)"},
		{"enable-endpoint", "/v1/endpoints/{id}/enable", "Enable a disabled endpoint: held deliveries are released and endpoint.enabled is emitted"},
	} {
		huma.Register(s.api, huma.Operation{
			OperationID: op.id, Method: http.MethodPost, Path: op.path, Tags: []string{"endpoints"}, Summary: op.summary, Security: sec,
		}, s.enableEndpoint)
	}

	huma.Register(s.api, huma.Operation{
		OperationID: "replay-endpoint", Method: http.MethodPost, Path: "/v1/endpoints/{id}/replay", Tags: []string{"dead letters"},
		Summary:  "Replay an endpoint's dead letters (all, or since a time): same event ids, attempts added to the same deliveries",
		Security: sec, MaxBodyBytes: 4096,
	}, s.replayEndpoint)

	huma.Register(s.api, huma.Operation{
		OperationID: "replay-delivery", Method: http.MethodPost, Path: "/v1/deliveries/{id}/replay", Tags: []string{"dead letters"},
		Summary:  "Replay one dead letter (back to pending, same event id); a delivery that is not dead is left alone (replayed: 0)",
		Security: sec,
	}, s.replayDelivery)
	huma.Register(s.api, huma.Operation{
		OperationID: "redeliver-delivery", Method: http.MethodPost, Path: "/v1/deliveries/{id}/redeliver", Tags: []string{"deliveries"},
		Summary:  "Deliver a succeeded delivery again (explicit: the receiver will see the event id twice)",
		Security: sec,
	}, s.redeliverDelivery)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-deliveries", Method: http.MethodGet, Path: "/v1/deliveries", Tags: []string{"deliveries"},
		Summary:  "List deliveries across endpoints; ?state=dead&tenant=… is a tenant's dead-letter queue",
		Security: sec,
	}, s.listDeliveries)

	huma.Register(s.api, huma.Operation{
		OperationID: "dead-letter-counts", Method: http.MethodGet, Path: "/v1/dead-letters", Tags: []string{"dead letters"},
		Summary:  "Count dead letters per endpoint (optionally of one tenant, since a time), largest first",
		Security: sec,
	}, s.deadLetterCounts)
}

// enableEndpoint serves resume-endpoint and enable-endpoint: both release
// the held deliveries (enable also emits endpoint.enabled for a disabled
// endpoint).
func (s *Server) enableEndpoint(ctx context.Context, in *EndpointIDPath) (*struct{ Body StateChangeOut }, error) {
	return s.changeState(ctx, in.ID, store.EndpointEnabled, "")
}

func (s *Server) pauseEndpoint(ctx context.Context, in *EndpointIDPath) (*struct{ Body StateChangeOut }, error) {
	return s.changeState(ctx, in.ID, store.EndpointPaused, "paused through the API")
}

type replayEndpointBody struct {
	State     string     `json:"state" enum:"dead" doc:"what to replay: dead (the dead letters); required, so that an empty request never replays everything"`
	Since     *time.Time `json:"since,omitempty" doc:"only those dead-lettered at or after this time (RFC 3339)"`
	Until     *time.Time `json:"until,omitempty" doc:"only those dead-lettered before this time (RFC 3339); after since"`
	EventType string     `json:"event_type,omitempty" maxLength:"128" doc:"only this event type"`
}
type replayEndpointInput struct {
	EndpointIDPath
	Body replayEndpointBody
}

func (s *Server) replayEndpoint(ctx context.Context, in *replayEndpointInput) (*struct{ Body ReplayOut }, error) {
	p := store.ReplayParams{EndpointID: in.ID, States: []store.DeliveryState{store.DeliveryDead}, Now: s.cfg.Now()}
	if b := &in.Body; b != nil {
		// A name no event can have would replay nothing and answer
		// {"replayed":0} as if the filter were fine: refuse it as publish does.
		if b.EventType != "" && !store.ValidEventType(b.EventType) {
			return nil, invalid("body.event_type", store.EventTypeRule, b.EventType)
		}
		p.EventType = b.EventType
		if b.Since != nil {
			p.Since = *b.Since
		}
		if b.Until != nil {
			p.Until = *b.Until
			if b.Since != nil && !b.Until.After(*b.Since) {
				since, until := b.Since.Format(time.RFC3339Nano), b.Until.Format(time.RFC3339Nano)
				return nil, huma.Error422UnprocessableEntity("body.until ("+until+") must be after body.since ("+since+")",
					&huma.ErrorDetail{Location: "body.until", Message: "until must be after since (" + since + ")", Value: b.Until})
			}
		}
	}
	n, err := s.db(ctx).ReplayDeliveries(ctx, p)
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(in.ID))
	}
	if n > 0 {
		s.cfg.Notify()
	}
	return &struct{ Body ReplayOut }{Body: ReplayOut{Replayed: n}}, nil
}

func (s *Server) replayDelivery(ctx context.Context, in *DeliveryIDPath) (*struct{ Body ReplayOut }, error) {
	return s.replayOne(ctx, in.ID, store.DeliveryDead)
}

func (s *Server) redeliverDelivery(ctx context.Context, in *DeliveryIDPath) (*struct{ Body ReplayOut }, error) {
	return s.replayOne(ctx, in.ID, store.DeliverySucceeded)
}

type listDeliveriesInput struct {
	Tenant    string  `query:"tenant" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"only this tenant's (letters, digits, _ . : -, at most 128)"`
	State     string  `query:"state" enum:"pending,succeeded,dead,paused"`
	EventType string  `query:"event_type" maxLength:"128"`
	Since     Instant `query:"since" doc:"only deliveries last changed at or after this time (RFC 3339)"`
	ListQuery
}

func (s *Server) listDeliveries(ctx context.Context, in *listDeliveriesInput) (*deliveriesOut, error) {
	tenant, err := s.tenantFor(ctx, in.Tenant, "query.tenant")
	if err != nil {
		return nil, err
	}
	if err := checkTypeFilter("query.event_type", in.EventType); err != nil {
		return nil, err
	}
	q := query(ctx, listDeliveries, "/v1/deliveries", "tenant", tenant, "state", in.State, "event_type", in.EventType, "since", sinceKey(in.Since.Time))
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListDeliveries(ctx, store.ListDeliveriesParams{Tenant: tenant, State: store.DeliveryState(in.State),
		EventType: in.EventType, Since: in.Since.Time, ListParams: lp})
	if err != nil {
		return nil, s.problem(err, "deliveries")
	}
	return &deliveriesOut{Body: s.deliveryList(q, pg)}, nil
}

type countsOut struct {
	Body struct {
		Data []DeadLetterCountOut `json:"data"`
	}
}
type deadLetterCountsInput struct {
	Tenant string  `query:"tenant" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"only this tenant's (letters, digits, _ . : -, at most 128)"`
	Since  Instant `query:"since"`
}

func (s *Server) deadLetterCounts(ctx context.Context, in *deadLetterCountsInput) (*countsOut, error) {
	tenant, err := s.tenantFor(ctx, in.Tenant, "query.tenant")
	if err != nil {
		return nil, err
	}
	cs, err := s.db(ctx).DeadLetterCounts(ctx, tenant, in.Since.Time)
	if err != nil {
		return nil, s.problem(err, "dead letters")
	}
	out := &countsOut{}
	out.Body.Data = make([]DeadLetterCountOut, len(cs))
	for i, c := range cs {
		out.Body.Data[i] = DeadLetterCountOut{EndpointID: c.EndpointID, Tenant: c.Tenant, Count: c.Count}
	}
	return out, nil
}

// changeState moves endpoint id to state to (pause, resume, enable) and
// answers the endpoint with the deliveries held or released. It needs none
// of the endpoint's sealed values: one whose values do not open here
// changes state too, answered as GET shows it (without them, named in
// unreadable).
func (s *Server) changeState(ctx context.Context, id string, to store.EndpointState, reason string) (*struct{ Body StateChangeOut }, error) {
	cur, err := s.db(ctx).GetEndpoint(ctx, id)
	if u := (*store.UnreadableError)(nil); errors.As(err, &u) && u.Values != nil {
		cur, err = u.Endpoint, nil // the tenant wall applied: the scoped store answered it
	}
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(id))
	}
	if to == store.EndpointPaused && cur.State == store.EndpointDisabled {
		return nil, huma.Error409Conflict("endpoint " + id + " is disabled (" + cur.StateReason + "); enable it (POST /v1/endpoints/" + id + "/enable) rather than pausing it")
	}
	notice := ""
	if to == store.EndpointEnabled && cur.State == store.EndpointDisabled {
		notice = "endpoint.enabled"
	}
	e, moved, err := s.db(ctx).SetEndpointState(ctx, store.SetEndpointStateParams{ID: id, State: to, Reason: reason, Notice: notice, Now: s.cfg.Now()})
	if err != nil {
		return nil, s.problem(err, "endpoint "+Echo(id))
	}
	out := &struct{ Body StateChangeOut }{Body: StateChangeOut{Endpoint: endpointOut(ctx, e)}}
	if to == store.EndpointEnabled {
		out.Body.Released = moved
		s.cfg.Notify()
	} else {
		out.Body.Held = moved
	}
	return out, nil
}

// replayOne moves delivery id back to pending when it is in state.
func (s *Server) replayOne(ctx context.Context, id string, state store.DeliveryState) (*struct{ Body ReplayOut }, error) {
	n, err := s.db(ctx).ReplayDeliveries(ctx, store.ReplayParams{DeliveryID: id, States: []store.DeliveryState{state}, Now: s.cfg.Now()})
	if err != nil {
		return nil, s.problem(err, "delivery "+Echo(id))
	}
	if n > 0 {
		s.cfg.Notify()
	}
	return &struct{ Body ReplayOut }{Body: ReplayOut{Replayed: n}}, nil
}
