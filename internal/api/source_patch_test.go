package api_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
)

// TestSourcePatchWithoutChange: a PATCH of a source that changes nothing —
// {}, or the name, scheme, secrets, tolerance and destination it has, the
// defaults' values included —
// answers 200 with the source as it is: nothing is written (updated_at
// and its forwarding endpoint's updated_at stay) and no change is
// announced to the gateway (Config.SourceChanged), as for an endpoint or
// an event type. A PATCH that changes a value writes it and announces it.
func TestSourcePatchWithoutChange(t *testing.T) {
	var announced atomic.Int64
	w := newWorld(t, func(c *api.Config) { c.SourceChanged = func(string) { announced.Add(1) } })
	type source struct {
		Name       string    `json:"name"`
		EndpointID string    `json:"endpoint_id"`
		UpdatedAt  time.Time `json:"updated_at"`
	}
	type endpoint struct {
		UpdatedAt time.Time `json:"updated_at"`
	}
	var before source
	_, raw := w.call(adminKey, "GET", "/v1/sources/"+w.srcID, "")
	w.mustCall(adminKey, "GET", "/v1/sources/"+w.srcID, "", 200, &before)
	var epBefore endpoint
	w.mustCall(adminKey, "GET", "/v1/endpoints/"+before.EndpointID, "", 200, &epBefore)
	w.advance(time.Minute)
	for _, body := range []string{
		`{}`,
		`{"name":"stripe"}`,
		`{"scheme":"stripe","secrets":["whsec_provider_0123"],"tolerance_seconds":0}`,
		`{"destination_url":"http://10.0.0.1/in"}`,
		`{"name":"stripe","dedupe":"","destination_url":"http://10.0.0.1/in","max_body_bytes":0}`,
		// The values GET shows for the defaults (stored as 0).
		`{"tolerance_seconds":300,"max_body_bytes":1048576}`,
	} {
		st, got := w.call(adminKey, "PATCH", "/v1/sources/"+w.srcID, body)
		if st != 200 || string(got) != string(raw) {
			t.Errorf("PATCH %s = %d %s; want 200 with the source as it was:\n%s", body, st, got, raw)
		}
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+w.srcID, ""); string(after) != string(raw) {
		t.Errorf("after PATCHes that change nothing the source reads\n%s\nwant as before\n%s", after, raw)
	}
	var epAfter endpoint
	w.mustCall(adminKey, "GET", "/v1/endpoints/"+before.EndpointID, "", 200, &epAfter)
	if !epAfter.UpdatedAt.Equal(epBefore.UpdatedAt) {
		t.Errorf("the forwarding endpoint's updated_at moved from %v to %v", epBefore.UpdatedAt, epAfter.UpdatedAt)
	}
	if n := announced.Load(); n != 0 {
		t.Errorf("SourceChanged called %d times for PATCHes that change nothing; want none", n)
	}

	// A change is written and announced.
	var changed source
	w.mustCall(adminKey, "PATCH", "/v1/sources/"+w.srcID, `{"name":"stripe live"}`, 200, &changed)
	if changed.Name != "stripe live" || !changed.UpdatedAt.Equal(w.clock()) {
		t.Errorf("PATCH of the name: %+v; want the new name, updated_at %v", changed, w.clock())
	}
	if n := announced.Load(); n != 1 {
		t.Errorf("SourceChanged called %d times for one change; want once", n)
	}
}
