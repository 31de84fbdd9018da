package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UnreadableError is the error of an endpoint row that was read but whose
// stored values do not open or decode on this node: a sealed value (its
// signing secrets, a custom header value) under an encryption key this
// node does not hold (a node not restarted with the new key, or a value
// sealed under a key no node holds any more after a rekey), or a corrupted
// value. Drivers return it, wrapping the cause, from every read of such an
// endpoint; Error is the cause's message. A claim that meets it does not
// fail: it leaves that endpoint's deliveries out (ClaimParams.Unreadable).
type UnreadableError struct {
	EndpointID string
	Tenant     string // the endpoint's tenant (the API's tenant wall)
	Err        error
	// Values names the sealed values of the row that did not open
	// ("secrets", "headers.<Name>"; sorted), when those are the only
	// trouble (OpenEndpointValues); nil when a column is not the JSON
	// Herald wrote.
	Values []string
	// Endpoint is the row without those values, when Values is not nil:
	// every other field as stored, Secrets nil when "secrets" is in
	// Values, Headers without the names in Values. The API shows it (GET)
	// and lets it be deleted or its secrets replaced; nothing signs with it.
	Endpoint Endpoint
}

func (e *UnreadableError) Error() string { return e.Err.Error() }
func (e *UnreadableError) Unwrap() error { return e.Err }

// Unreadable wraps err, the failure to decode the stored values of
// endpoint id of tenant, in an *UnreadableError (nil for nil).
func Unreadable(id, tenant string, err error) error {
	if err == nil {
		return nil
	}
	return &UnreadableError{EndpointID: id, Tenant: tenant, Err: err}
}

// UnreadableEndpoint is an endpoint a claim left out because its stored
// values do not open (ClaimParams.Unreadable).
type UnreadableEndpoint struct {
	ID, Tenant string
	// Deliveries is how many of its deliveries the claim had taken and
	// left out: pending, unleased, unchanged otherwise.
	Deliveries int
	// OldestDue is the earliest NextAttemptAt among them.
	OldestDue time.Time
	// Err says why (the *UnreadableError), joined on PostgreSQL with the
	// failure to give their leases back, if that failed (they then wait
	// for the rescue).
	Err error
}

// NoteUnreadable records in *bad (made on first use) the endpoint of err
// when err is an *UnreadableError, and returns nil; any other error it
// returns as is. Drivers call it on each endpoint row a claim reads, so
// that such an endpoint's deliveries are left out (DropUnreadable), not
// the claim.
func NoteUnreadable(bad *map[string]*UnreadableError, err error) error {
	var u *UnreadableError
	if !errors.As(err, &u) {
		return err
	}
	if *bad == nil {
		*bad = map[string]*UnreadableError{}
	}
	(*bad)[u.EndpointID] = u
	return nil
}

// DropUnreadable takes out of claims (in place, in order) the claims of
// the endpoints in bad, and returns the claims kept, the delivery ids of
// those taken out, and one UnreadableEndpoint per endpoint of bad that had
// claims, in the order their first claim came. Drivers call it from
// ClaimDeliveries when the claim met an endpoint whose values do not open
// (bad not empty), before they give back the leases of the deliveries
// taken out and report them (ClaimParams.Report).
func DropUnreadable(claims []Claim, bad map[string]*UnreadableError) (kept []Claim, dropped []string, report []UnreadableEndpoint) {
	kept = claims[:0]
	for _, c := range claims {
		u, ok := bad[c.Delivery.EndpointID]
		if !ok {
			kept = append(kept, c)
			continue
		}
		dropped = append(dropped, c.Delivery.ID)
		i := 0
		for i < len(report) && report[i].ID != c.Delivery.EndpointID {
			i++
		}
		if i == len(report) {
			report = append(report, UnreadableEndpoint{ID: c.Delivery.EndpointID, Tenant: c.Delivery.Tenant, OldestDue: c.Delivery.NextAttemptAt, Err: u})
		}
		r := &report[i]
		r.Deliveries++
		if c.Delivery.NextAttemptAt.Before(r.OldestDue) {
			r.OldestDue = c.Delivery.NextAttemptAt
		}
	}
	clear(claims[len(kept):]) // no stale copies behind the kept ones
	return kept, dropped, report
}

// Report calls p.Unreadable, when set, with each endpoint of us.
func (p ClaimParams) Report(us []UnreadableEndpoint) {
	if p.Unreadable == nil {
		return
	}
	for _, u := range us {
		p.Unreadable(u)
	}
}

// OpenEndpointValues opens into e the sealed values of its row, as both
// drivers read an endpoint: headers, the stored headers object (each value
// sealed, or clear if written before values were sealed), into e.Headers,
// and secrets, the stored secrets column, into e.Secrets. Every value is
// tried: when some do not open with box (sealed under a key it does not
// hold, or damaged) it returns an *UnreadableError naming each in Values,
// with Endpoint e without them; e then holds the values that opened.
func OpenEndpointValues(box SecretBox, e *Endpoint, headers map[string]string, secrets string) error {
	var (
		values []string
		errs   joinedErrors
	)
	if headers != nil {
		e.Headers = make(map[string]string, len(headers))
		for name, v := range headers {
			b, err := OpenBytes(box, HeaderContext(e.ID, name), v)
			if err != nil {
				values = append(values, "headers."+name)
				errs = append(errs, fmt.Errorf("header %s: %w", name, err))
				continue
			}
			e.Headers[name] = string(b)
		}
	}
	ss, err := DecodeSecrets(box, e.ID, secrets)
	if err != nil {
		values = append(values, "secrets")
		errs = append(errs, err)
	} else {
		e.Secrets = ss
	}
	if len(values) == 0 {
		return nil
	}
	slices.Sort(values)
	without := *e
	without.Unreadable = values
	return &UnreadableError{EndpointID: e.ID, Tenant: e.Tenant, Err: fmt.Errorf("endpoint %s: %w", e.ID, errs), Values: values, Endpoint: without}
}

// Listed is the endpoint a list shows for a row read with err: the row
// when err is nil; when its sealed values do not open (an
// *UnreadableError with Values), the endpoint without them, each named in
// Endpoint.Unreadable, and no error; any other error as is. Drivers call
// it on each row of ListEndpoints.
func Listed(e Endpoint, err error) (Endpoint, error) {
	if err == nil {
		return e, nil
	}
	if u := (*UnreadableError)(nil); errors.As(err, &u) && u.Values != nil {
		return u.Endpoint, nil
	}
	return e, err
}

// joinedErrors is errors.Join on one line ("; " between them).
type joinedErrors []error

func (j joinedErrors) Error() string {
	msgs := make([]string, len(j))
	for i, err := range j {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (j joinedErrors) Unwrap() []error { return j }

// OnlySecretsUnreadable reports whether err is an *UnreadableError whose
// only trouble is the endpoint's secrets: the rest of the row decoded and
// opened (so replacing the secrets makes it readable again).
func OnlySecretsUnreadable(err error) bool {
	var u *UnreadableError
	return errors.As(err, &u) && slices.Equal(u.Values, []string{"secrets"})
}

// OnlyHeadersUnreadable reports whether err is an *UnreadableError whose
// only trouble is custom header values: the rest of the row, its secrets
// too, decoded and opened (so replacing the headers whole makes it
// readable again: UpdateEndpointParams.ReplaceUnreadable).
func OnlyHeadersUnreadable(err error) bool {
	var u *UnreadableError
	if !errors.As(err, &u) || len(u.Values) == 0 {
		return false
	}
	for _, v := range u.Values {
		if !strings.HasPrefix(v, "headers.") {
			return false
		}
	}
	return true
}

// SourceConfigValue names, in Source.Unreadable, a source's sealed
// configuration (the provider's signing secrets with the scheme, replay
// window, dedupe rule, body cap and hmac settings: one sealed value).
const SourceConfigValue = "config"

// UnreadableSourceError is the error of a source row that was read but
// whose sealed configuration does not open on this node: sealed under an
// encryption key this node does not hold (a node not restarted with the
// new key, a value sealed within a stale node's key-check cache after a
// rekey, or a database restored under another key), or corrupted. Drivers
// return it, wrapping the cause, from every read of such a source; Error
// is the cause's message.
type UnreadableSourceError struct {
	SourceID string
	Err      error
	// Source is the row without its configuration: every other field as
	// stored, Config nil, Unreadable naming SourceConfigValue. The API
	// shows it and lets it be deleted or its configuration replaced
	// whole; nothing verifies with it.
	Source Source
}

func (e *UnreadableSourceError) Error() string { return e.Err.Error() }
func (e *UnreadableSourceError) Unwrap() error { return e.Err }

// UnreadableSource wraps err, the failure to open the sealed configuration
// of src (read otherwise), in an *UnreadableSourceError whose Source is src
// without it.
func UnreadableSource(src Source, err error) error {
	src.Config = nil
	src.Unreadable = []string{SourceConfigValue}
	return &UnreadableSourceError{SourceID: src.ID, Err: fmt.Errorf("source %s config: %w", src.ID, err), Source: src}
}

// SourceError is err as a driver returns it from a read of a source:
// its *UnreadableSourceError itself when it has one (not wrapped as an
// unavailable store: nothing a retry ends), else err as is.
func SourceError(err error) error {
	if u := (*UnreadableSourceError)(nil); errors.As(err, &u) {
		return u
	}
	return err
}

// ListedSource is the source a list shows for a row read with err: the row
// when err is nil; when its sealed configuration does not open (an
// *UnreadableSourceError), the source without it, named in
// Source.Unreadable, and no error; any other error as is. Drivers call it
// on each row of ListSources, so that one such source never fails the
// list.
func ListedSource(src Source, err error) (Source, error) {
	if u := (*UnreadableSourceError)(nil); errors.As(err, &u) {
		return u.Source, nil
	}
	return src, err
}
