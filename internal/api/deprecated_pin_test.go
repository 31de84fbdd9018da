package api_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestDeprecatedPinWarns: pinning an endpoint to a deprecated event type
// version is allowed, and the create or update that sets the pins answers
// one Warning field per such pin (299 - "…", naming the type, the version
// and the newest); pins to current versions, and updates that set no pins,
// answer none. The pin is stored as asked.
func TestDeprecatedPinWarns(t *testing.T) {
	w := newWorld(t, nil)
	for _, name := range []string{"file.updated", "file.deleted"} {
		w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"`+name+`","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
		w.mustCall(adminKey, "POST", "/v1/event-types/"+name+"/versions", `{"version":2,"schema":{"type":"object"}}`, 201, nil)
		w.mustCall(adminKey, "POST", "/v1/event-types/"+name+"/versions", `{"version":3,"schema":{"type":"object"}}`, 201, nil)
	}
	w.mustCall(adminKey, "PATCH", "/v1/event-types/file.updated", `{"deprecate":[1,2]}`, 200, nil)
	w.mustCall(adminKey, "PATCH", "/v1/event-types/file.deleted", `{"deprecate":[1]}`, 200, nil)
	const v1Warning = `299 - "file.updated version 1 is deprecated (the newest is 3): the endpoint keeps receiving version 1 until its pin moves (versions)"`

	type endpoint struct {
		ID       string         `json:"id"`
		Versions map[string]int `json:"versions"`
	}
	call := func(method, path, body string, want int) (endpoint, []string) {
		t.Helper()
		rec := w.request("192.0.2.1", adminKey, method, path, body)
		if rec.Code != want {
			t.Fatalf("%s %s %s: %d %s; want %d", method, path, body, rec.Code, rec.Body, want)
		}
		var e endpoint
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		return e, rec.Result().Header.Values("Warning")
	}

	e, warn := call("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-receiver.example/files","event_types":["file.*"],"versions":{"file.updated":1}}`, 201)
	if e.Versions["file.updated"] != 1 || e.Versions["file.deleted"] != 3 {
		t.Errorf("pins %v; want file.updated 1 (as asked) and file.deleted 3 (the newest)", e.Versions)
	}
	if !slices.Equal(warn, []string{v1Warning}) {
		t.Errorf("create pinned to a deprecated version: Warning %q; want [%s]", warn, v1Warning)
	}
	if _, warn := call("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-receiver.example/new","event_types":["file.updated"]}`, 201); len(warn) != 0 {
		t.Errorf("create pinned to the newest: Warning %q; want none", warn)
	}
	// An update setting pins warns of each deprecated one, kept ones too.
	_, warn = call("PATCH", "/v1/endpoints/"+e.ID, `{"versions":{"file.deleted":1}}`, 200)
	if len(warn) != 2 || warn[0] != `299 - "file.deleted version 1 is deprecated (the newest is 3): the endpoint keeps receiving version 1 until its pin moves (versions)"` || warn[1] != v1Warning {
		t.Errorf("PATCH pinning file.deleted 1: Warning %q; want file.deleted's then file.updated's", warn)
	}
	// One that changes nothing answers the same warnings.
	if _, again := call("PATCH", "/v1/endpoints/"+e.ID, `{"versions":{"file.deleted":1}}`, 200); !slices.Equal(again, warn) {
		t.Errorf("the same PATCH again: Warning %q; want %q", again, warn)
	}
	// An update that sets no pin says nothing about them.
	if _, warn := call("PATCH", "/v1/endpoints/"+e.ID, `{"description":"files"}`, 200); len(warn) != 0 {
		t.Errorf("PATCH of the description: Warning %q; want none", warn)
	}
	// Moving every pin to a current version ends the warnings.
	e, warn = call("PATCH", "/v1/endpoints/"+e.ID, `{"versions":{"file.updated":3,"file.deleted":2}}`, 200)
	if len(warn) != 0 || e.Versions["file.updated"] != 3 || e.Versions["file.deleted"] != 2 {
		t.Errorf("PATCH to current versions: %v, Warning %q; want those pins, no warning", e.Versions, warn)
	}
	// GET never warns.
	if rec := w.request("192.0.2.1", adminKey, "GET", "/v1/endpoints/"+e.ID, ""); rec.Code != 200 || rec.Result().Header.Get("Warning") != "" {
		t.Errorf("GET: %d, Warning %q", rec.Code, rec.Result().Header.Get("Warning"))
	}
	// The OpenAPI document declares the header on create and update.
	_, doc := w.call(adminKey, "GET", "/openapi.json", "")
	var openapi struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(doc, &openapi); err != nil {
		t.Fatal(err)
	}
	if h := openapi.Paths["/v1/endpoints"]["post"].Responses["201"].Headers["Warning"]; !strings.Contains(string(h), "deprecated") {
		t.Errorf("create-endpoint's 201 declares Warning as %s", h)
	}
	if h := openapi.Paths["/v1/endpoints/{id}"]["patch"].Responses["200"].Headers["Warning"]; !strings.Contains(string(h), "deprecated") {
		t.Errorf("update-endpoint's 200 declares Warning as %s", h)
	}
}

// TestDeprecatedPinWarningsBounded: an endpoint pinned to many deprecated
// versions gets at most 10 Warning fields and one more counting the rest.
func TestDeprecatedPinWarningsBounded(t *testing.T) {
	w := newWorld(t, nil)
	var pins []string
	for i := range 12 {
		name := "many.t" + itoa(i+10)
		w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"`+name+`","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
		w.mustCall(adminKey, "POST", "/v1/event-types/"+name+"/versions", `{"version":2,"schema":{"type":"object"}}`, 201, nil)
		w.mustCall(adminKey, "PATCH", "/v1/event-types/"+name, `{"deprecate":[1]}`, 200, nil)
		pins = append(pins, `"`+name+`":1`)
	}
	rec := w.request("192.0.2.1", adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-receiver.example/many","event_types":["many.*"],"versions":{`+strings.Join(pins, ",")+`}}`)
	warn := rec.Result().Header.Values("Warning")
	if rec.Code != 201 || len(warn) != 11 || !strings.Contains(warn[0], "many.t10 version 1") || warn[10] != `299 - "and 2 more pins to deprecated versions (GET /v1/event-types)"` {
		t.Errorf("create with 12 deprecated pins: %d, Warning %q; want 10 and one counting 2 more", rec.Code, warn)
	}
}
