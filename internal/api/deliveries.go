package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// DeliveryOut is a delivery as the API shows it.
type DeliveryOut struct {
	ID             string     `json:"id" doc:"dlv_…"`
	EventID        string     `json:"event_id"`
	EndpointID     string     `json:"endpoint_id"`
	Tenant         string     `json:"tenant" doc:"the tenant of the event and the endpoint (an event id a producer chose is unique per tenant: GET /v1/events/{event_id}?tenant=…)"`
	EventType      string     `json:"event_type"`
	State          string     `json:"state" enum:"pending,succeeded,dead,paused"`
	Attempts       int        `json:"attempts" doc:"attempts made so far"`
	NextAttemptAt  *time.Time `json:"next_attempt_at" doc:"when the next attempt is due; null unless pending (while in_flight, when the running attempt was due)"`
	InFlight       bool       `json:"in_flight" doc:"true while a node attempts the delivery (it holds its lease); the attempt is recorded when it ends"`
	LastStatusCode int        `json:"last_status_code" doc:"HTTP status of the last attempt; 0 when none was received"`
	LastError      string     `json:"last_error" doc:"error class of the last attempt (timeout, dns, blocked, redirect, …); empty when it got an HTTP answer"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// DeliveryList is a page of deliveries.
type DeliveryList struct {
	Data       []DeliveryOut `json:"data"`
	NextCursor string        `json:"next_cursor"`
}

func deliveryOut(d store.Delivery) DeliveryOut {
	out := DeliveryOut{ID: d.ID, EventID: store.PublicEventID(d.EventID), EndpointID: d.EndpointID, Tenant: d.Tenant, EventType: d.EventType, State: string(d.State),
		Attempts: d.Attempts, LastStatusCode: d.LastStatusCode, LastError: d.LastError, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.State == store.DeliveryPending {
		t := d.NextAttemptAt
		out.NextAttemptAt = &t
		out.InFlight = d.LeaseOwner != ""
	}
	return out
}

func (s *Server) deliveryList(q listQuery, pg store.Page[store.Delivery]) DeliveryList {
	out := DeliveryList{Data: make([]DeliveryOut, len(pg.Data)), NextCursor: s.cursor(q, pg.NextCursor)}
	for i, d := range pg.Data {
		out.Data[i] = deliveryOut(d)
	}
	return out
}

// Instant is a query parameter holding an RFC 3339 date-time (§5.6), such
// as 2026-12-07T09:30:00Z or 2026-12-07T10:30:00.5+01:00; the "T" and
// "Z" may be lower case, as §5.6 allows. Anything else is refused with a
// message naming the rule (huma then answers 422 at the parameter). The
// zero value means "not given".
type Instant struct{ time.Time }

// InstantRule is the message of a refused Instant.
const InstantRule = "want an RFC 3339 date-time with its offset, such as 2026-12-07T09:30:00Z or 2026-12-07T10:30:00.5+01:00 (RFC 3339 §5.6)"

// UnmarshalText implements encoding.TextUnmarshaler, which huma uses for
// a query parameter of this type.
func (t *Instant) UnmarshalText(b []byte) error {
	s := string(b)
	// §5.6: "T" and "Z" may alternatively be lower case.
	if len(s) > 10 && s[10] == 't' {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return errors.New(InstantRule)
	}
	t.Time = v
	return nil
}

// Schema implements huma.SchemaProvider: a string, described (no
// "format": "date-time", whose check in huma refuses the lower-case "t"
// and "z" RFC 3339 allows; UnmarshalText checks the value).
func (Instant) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Description: "an RFC 3339 date-time with its offset (§5.6; \"T\" and \"Z\" may be lower case)",
		Examples: []any{"2026-12-07T09:30:00Z"}}
}

// sinceKey is a since filter as a cursor's query names it ("" for none).
func sinceKey(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// AttemptOut is one HTTP try of a delivery.
type AttemptOut struct {
	Number          int       `json:"number" doc:"1-based; also sent as X-Delivery-Attempt"`
	StartedAt       time.Time `json:"started_at"`
	DurationMS      float64   `json:"duration_ms" doc:"milliseconds from the start of the attempt to the end of the response body read"`
	StatusCode      int       `json:"status_code" doc:"0 when no HTTP answer was received"`
	Error           string    `json:"error" doc:"error class: timeout, dns, connection_refused, connection_reset, tls, blocked, redirect, network; empty for an HTTP answer"`
	ErrorDetail     string    `json:"error_detail,omitempty"`
	Location        string    `json:"location,omitempty" doc:"Location of a 3xx answer (redirects are never followed)"`
	ResponseExcerpt string    `json:"response_excerpt" doc:"at most 4 KiB of the response body"`
}

// DeliveryIDPath is the {id} of delivery routes.
type DeliveryIDPath struct {
	ID string `path:"id" maxLength:"128" doc:"delivery id (dlv_…)"`
}

func (s *Server) registerDeliveries() {
	sec := []map[string][]string{{"bearer": {}}}
	huma.Register(s.api, huma.Operation{
		OperationID: "get-delivery", Method: http.MethodGet, Path: "/v1/deliveries/{id}", Tags: []string{"deliveries"},
		Summary: "Read a delivery", Security: sec,
	}, s.getDelivery)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-delivery-attempts", Method: http.MethodGet, Path: "/v1/deliveries/{id}/attempts", Tags: []string{"deliveries"},
		Summary: "List a delivery's attempts, oldest first", Security: sec,
	}, s.listDeliveryAttempts)
}

func (s *Server) getDelivery(ctx context.Context, in *DeliveryIDPath) (*struct{ Body DeliveryOut }, error) {
	d, err := s.db(ctx).GetDelivery(ctx, in.ID)
	if err != nil {
		return nil, s.problem(err, "delivery "+Echo(in.ID))
	}
	return &struct{ Body DeliveryOut }{Body: deliveryOut(d)}, nil
}

type attemptsOut struct {
	Body struct {
		Data       []AttemptOut `json:"data"`
		NextCursor string       `json:"next_cursor"`
	}
}

func (s *Server) listDeliveryAttempts(ctx context.Context, in *DeliveryIDPath) (*attemptsOut, error) {
	as, err := s.db(ctx).ListAttempts(ctx, in.ID)
	if err != nil {
		return nil, s.problem(err, "delivery "+Echo(in.ID))
	}
	out := &attemptsOut{}
	out.Body.Data = make([]AttemptOut, len(as))
	for i, a := range as {
		out.Body.Data[i] = attemptOut(a)
	}
	return out, nil
}

func attemptOut(a store.Attempt) AttemptOut {
	return AttemptOut{Number: a.Number, StartedAt: a.StartedAt, DurationMS: float64(a.Duration.Microseconds()) / 1000,
		StatusCode: a.StatusCode, Error: a.Error, ErrorDetail: a.ErrorDetail, Location: a.Location, ResponseExcerpt: a.ResponseExcerpt}
}
