package api_test

import (
	"testing"
	"time"
)

// TestRotateOverlapNullRefused: a rotation with "overlap_seconds": null is
// refused (422 at the field, naming the rule), not read as the member left
// out: someone rotating a leaked secret who writes null meaning "no
// overlap" must not keep the old secret signing for the default day.
// Nothing changes. The member left out (or no body, or {}) still gives the
// default overlap, 86400 seconds.
func TestRotateOverlapNullRefused(t *testing.T) {
	w := newWorld(t, nil)
	path := "/v1/endpoints/" + w.epA
	_, before := w.call(adminKey, "GET", path+"/secrets", "")
	for _, body := range []string{`{"overlap_seconds":null}`, `{ "overlap_seconds" : null }`} {
		st, raw := w.call(adminKey, "POST", path+"/rotate-secret", body)
		wantOneRefusal(t, "rotate "+body, st, raw, "body.overlap_seconds",
			"overlap_seconds must be an integer number of seconds from 0", "cannot be null", "leave it out for the default")
	}
	if _, after := w.call(adminKey, "GET", path+"/secrets", ""); string(after) != string(before) {
		t.Errorf("refused rotations changed the secrets:\n%s\nwant\n%s", after, before)
	}
	for _, body := range []string{``, `{}`} {
		var out struct {
			PreviousExpiresAt *time.Time `json:"previous_expires_at"`
		}
		w.mustCall(adminKey, "POST", path+"/rotate-secret", body, 200, &out)
		if want := w.clock().Add(86400 * time.Second); out.PreviousExpiresAt == nil || !out.PreviousExpiresAt.Equal(want) {
			t.Errorf("rotate %q: previous_expires_at %v; want %v (the default overlap)", body, out.PreviousExpiresAt, want)
		}
	}
}
