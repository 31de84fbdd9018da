package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestErrorCodes: every code's status, sentinel match and client message,
// however the error is wrapped.
func TestErrorCodes(t *testing.T) {
	cases := []struct {
		err      error
		code     store.Code
		sentinel error
		status   int
		message  string
	}{
		{fmt.Errorf("get endpoint ep_1: %w", store.ErrNotFound), store.CodeNotFound, store.ErrNotFound, http.StatusNotFound, "not found"},
		{fmt.Errorf("publish: %w", store.Errorf(store.CodeConflict, "event id %s already exists", "e1")), store.CodeConflict, store.ErrConflict, http.StatusConflict, "event id e1 already exists"},
		{fmt.Errorf("list: %w", store.Errorf(store.CodeInvalid, "cursor %q", "x")), store.CodeInvalid, store.ErrInvalid, http.StatusBadRequest, `cursor "x"`},
		{store.Errorf(store.CodeLimit, "tenant a already has 2 endpoints"), store.CodeLimit, store.ErrLimit, http.StatusUnprocessableEntity, "tenant a already has 2 endpoints"},
		{fmt.Errorf("claim: %w: %w", store.ErrUnavailable, errors.New("disk I/O error")), store.CodeUnavailable, store.ErrUnavailable, http.StatusServiceUnavailable, "store unavailable"},
		{store.Internal(errors.New("endpoint x headers: bad JSON")), store.CodeInternal, nil, http.StatusInternalServerError, "internal error"},
		{errors.New("unclassified driver error"), store.CodeUnavailable, nil, http.StatusServiceUnavailable, "store unavailable"},
		{fmt.Errorf("claim: %w", context.Canceled), store.CodeUnavailable, nil, http.StatusServiceUnavailable, "store unavailable"},
	}
	sentinels := []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, store.ErrLimit, store.ErrUnavailable}
	for _, c := range cases {
		if got := store.CodeOf(c.err); got != c.code {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.code)
		}
		if got := store.CodeOf(c.err).HTTPStatus(); got != c.status {
			t.Errorf("status of %v = %d, want %d", c.err, got, c.status)
		}
		if got := store.Message(c.err); got != c.message {
			t.Errorf("Message(%v) = %q, want %q", c.err, got, c.message)
		}
		for _, s := range sentinels {
			if got := errors.Is(c.err, s); got != (s == c.sentinel) {
				t.Errorf("errors.Is(%v, %v) = %v", c.err, s, got)
			}
		}
	}
	if store.Classified(errors.New("x")) || !store.Classified(store.Internal(errors.New("x"))) || !store.Classified(context.DeadlineExceeded) {
		t.Error("Classified: only *Error chains and context errors carry a code")
	}
	if err := store.Errorf(store.CodeConflict, "api key k exists"); err.Error() != "api key k exists: conflict" {
		t.Errorf("Error() = %q", err.Error())
	}
}
