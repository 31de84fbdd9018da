package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Code classifies a store error. Every error a driver returns carries one
// (an *Error in its chain); Code.HTTPStatus is the one mapping from codes to
// HTTP statuses, used by the API and the inbound gateway alike.
type Code uint8

// Store error codes.
const (
	// CodeInternal: a bug in Herald, not in the request or the database: a
	// stored value that does not decode, a broken invariant (500, logged
	// as a bug). Only an error marked so (Internal) has it.
	CodeInternal Code = iota
	// CodeNotFound: the record does not exist (404).
	CodeNotFound
	// CodeConflict: the request reuses an id or idempotency key with other
	// content, or changes a record that changed meanwhile (409).
	CodeConflict
	// CodeInvalid: a parameter breaks a rule the store checks, e.g. a
	// cursor that this store did not issue (400).
	CodeInvalid
	// CodeLimit: a configured limit would be exceeded, e.g. endpoints per
	// tenant (422).
	CodeLimit
	// CodeUnavailable: the database could not be reached or the write could
	// not be committed; nothing was stored (503). A canceled or expired
	// context, and an error that carries no code (a database error a
	// driver passed on as it was), have this code too.
	CodeUnavailable
)

var codeText = [...]string{
	CodeInternal:    "internal error",
	CodeNotFound:    "not found",
	CodeConflict:    "conflict",
	CodeInvalid:     "invalid input",
	CodeLimit:       "limit reached",
	CodeUnavailable: "store unavailable",
}

// String is the code's text, e.g. "not found".
func (c Code) String() string {
	if int(c) < len(codeText) {
		return codeText[c]
	}
	return codeText[CodeInternal]
}

// HTTPStatus is the HTTP status an error of code c answers: 500, 404, 409,
// 400, 422, 503 (in the order of the constants).
func (c Code) HTTPStatus() int {
	switch c {
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeLimit:
		return http.StatusUnprocessableEntity
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Error is a classified store error. Msg, for codes a client can act on
// (conflict, invalid, limit), is the text a client is shown: it names the
// rule and never the operation that ran; Err is the cause, if any.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

// Error is Msg, the code's text and the cause, each when present, joined by
// ": ".
func (e *Error) Error() string {
	s := e.Code.String()
	if e.Msg != "" {
		s = e.Msg + ": " + s
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every error of a code match that code's sentinel (ErrNotFound,
// ErrConflict, …), so errors.Is keeps working on classified errors.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Err == nil && t.Code == e.Code
}

// The sentinels of each code: errors.Is(err, ErrNotFound) reports whether
// err has code CodeNotFound. Drivers wrap them (fmt.Errorf("…: %w",
// ErrNotFound)) or return an Error made by Errorf, Wrap or Internal.
var (
	// ErrNotFound: the record does not exist (404).
	ErrNotFound = &Error{Code: CodeNotFound}
	// ErrConflict: an id or idempotency key reused with other content, or a
	// record changed meanwhile (409).
	ErrConflict = &Error{Code: CodeConflict}
	// ErrInvalid: a parameter is malformed, e.g. a cursor that this store
	// did not issue (400).
	ErrInvalid = &Error{Code: CodeInvalid}
	// ErrLimit: a configured limit would be exceeded, e.g. endpoints per
	// tenant (422); the error's Msg names the limit.
	ErrLimit = &Error{Code: CodeLimit}
	// ErrUnavailable: the database could not be reached or the write could
	// not be committed; nothing was stored (503).
	ErrUnavailable = &Error{Code: CodeUnavailable}
	// ErrStaleCatalog: a publish's PublishParams.CatalogRevision is not the
	// event type's stored revision (the catalog changed after the caller
	// read it); nothing was stored. A conflict (409): errors.Is(err,
	// ErrConflict) holds too. The API checks the event again and retries.
	ErrStaleCatalog = &Error{Code: CodeConflict, Msg: "the event type's catalog entry changed while the event was published; publish it again"}
)

// CatalogCurrent reports whether a publish with PublishParams.CatalogRevision
// want may be stored when the catalog holds revision got for its type (0:
// not catalogued): want is nil (not checked) or *want == got.
func CatalogCurrent(want *int, got int) bool {
	return want == nil || *want == got
}

// Errorf returns an *Error of code whose Msg is fmt.Sprintf(format, args...).
// Msg is what a client is shown (Code.HTTPStatus), so it names the rule.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of code with cause err (nil when err is nil).
func Wrap(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Internal marks err as a bug (CodeInternal): a stored value that does not
// decode, a value that does not encode. Nil stays nil.
func Internal(err error) error { return Wrap(CodeInternal, err) }

// Classified reports whether err carries a code: an *Error in its chain, or
// a canceled or expired context.
func Classified(err error) bool {
	var e *Error
	return errors.As(err, &e) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// CodeOf returns the code of err: that of the first *Error in its chain;
// else CodeUnavailable (a canceled or expired context, or an error the
// driver passed on from the database unclassified: the work was not done).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnavailable
}

// Message returns what a client is shown for err: the Msg of the first
// *Error in its chain, else the text of err's code.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return CodeOf(err).String()
}
