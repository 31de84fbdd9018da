package store

// The refusals a client may be shown (Code.HTTPStatus, Message) that every
// driver returns, written once here so that their text is the same on every
// driver and names the rule, never the operation that ran. The conformance
// suite compares each driver's Message with these.

// Exists is the conflict of a record created with an id or name already
// taken; what names the record, e.g. "endpoint ep_…".
func Exists(what string) error { return Errorf(CodeConflict, "%s already exists", what) }

// EventTypeExists is the conflict of CreateEventType with a name the
// catalog has.
func EventTypeExists(name string) error {
	return Errorf(CodeConflict, "event type %s already exists: add a version to it (POST /v1/event-types/%s/versions)", name, name)
}

// EventTypeChanged is the conflict of UpdateEventType from a revision that
// is no longer the stored one.
func EventTypeChanged(name string, revision int) error {
	return Errorf(CodeConflict, "event type %s changed meanwhile (revision %d is not the stored one)", name, revision)
}

// BadCursor is the error of a list cursor this store did not issue
// (ListParams.Cursor).
func BadCursor(cursor string) error {
	return Errorf(CodeInvalid, "cursor %q was not issued by this store", cursor)
}

// BadEndpointState is the error of SetEndpointState to a state that is not
// one of an endpoint's three.
func BadEndpointState(st EndpointState) error {
	return Errorf(CodeInvalid, "endpoint state %q is not %s, %s or %s", st, EndpointEnabled, EndpointPaused, EndpointDisabled)
}

// BadReplayTarget is the error of a replay that names both or neither of a
// delivery and an endpoint (ReplayParams).
func BadReplayTarget() error {
	return Errorf(CodeInvalid, "a replay names exactly one of a delivery and an endpoint")
}

// NotReplayable is the error of a replay of deliveries in state st
// (ReplayParams.States).
func NotReplayable(st DeliveryState) error {
	return Errorf(CodeInvalid, "only dead or succeeded deliveries can be replayed, not %q", st)
}
