package store

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// EventType is an entry of the event catalog (docs/contract.md, "Event
// types and versions"): a named type with its versions, each a JSON Schema
// (2020-12) of the event's data. Versions only grow.
type EventType struct {
	Name        string // e.g. "file.updated"
	Description string
	// ResourceID is a JSON pointer (RFC 6901) into data naming the
	// resource the event is about ("/file_id"); "" when events of the
	// type are not numbered (no sequence).
	ResourceID string
	Versions   []EventTypeVersion // ascending by Version, 1, 2, 3…
	Revision   int                // incremented by every change (optimistic concurrency)
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// EventTypeVersion is one version of an event type.
type EventTypeVersion struct {
	Version    int             `json:"version"`
	Schema     json.RawMessage `json:"schema"`
	Example    json.RawMessage `json:"example,omitempty"`
	Deprecated bool            `json:"deprecated,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
}

// Newest returns the newest version; ok is false for a type without one.
func (t EventType) Newest() (EventTypeVersion, bool) {
	if len(t.Versions) == 0 {
		return EventTypeVersion{}, false
	}
	return t.Versions[len(t.Versions)-1], true
}

// Version returns version v; ok is false when the type has no such version.
func (t EventType) Version(v int) (EventTypeVersion, bool) {
	for _, x := range t.Versions {
		if x.Version == v {
			return x, true
		}
	}
	return EventTypeVersion{}, false
}

// SequenceKeyOf is the counter key of PublishParams.SequenceKey: the
// tenant, the event type and the resource id as a JSON array (unambiguous
// whatever the resource id holds, and valid text for every database).
func SequenceKeyOf(tenant, eventType, resourceID string) string {
	b, _ := json.Marshal([]string{tenant, eventType, resourceID})
	return string(b)
}

// SequencePlaceholder is how EncodeVersionedBody writes the sequence of an
// event that gets one before the driver knows it: SetSequence replaces it.
const SequencePlaceholder = `,"sequence":0,`

// SetSequence writes n into a body encoded by EncodeVersionedBody with a
// sequence (its first SequencePlaceholder, which comes before data, and so
// before any producer-chosen bytes). A body without it is returned as it is.
func SetSequence(body []byte, n int64) []byte {
	i := bytes.Index(body, []byte(SequencePlaceholder))
	if i < 0 {
		return body
	}
	out := make([]byte, 0, len(body)+20)
	out = append(out, body[:i]...)
	out = append(out, `,"sequence":`...)
	out = strconv.AppendInt(out, n, 10)
	out = append(out, ',')
	return append(out, body[i+len(SequencePlaceholder):]...)
}

// SequenceHeader is the header that carries an event's sequence number.
const SequenceHeader = "X-Event-Sequence"

// EncodeVersionedBody renders the delivered body of a catalogued event:
// {"id","type","version","sequence"?,"tenant","occurred_at","data"}, with
// "sequence":0 as a placeholder when sequenced is true (SetSequence).
func EncodeVersionedBody(id, typ string, version int, sequenced bool, tenant string, occurredAt time.Time, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	type env struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		Version    int             `json:"version"`
		Sequence   *int64          `json:"sequence,omitempty"`
		Tenant     string          `json:"tenant"`
		OccurredAt string          `json:"occurred_at"`
		Data       json.RawMessage `json:"data"`
	}
	var zero int64
	e := env{ID: id, Type: typ, Version: version, Tenant: tenant, OccurredAt: occurredAt.UTC().Format(time.RFC3339Nano), Data: data}
	if sequenced {
		e.Sequence = &zero
	}
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EncodeVersionBodies encodes VersionBodies as stored: a JSON object of
// version → body ({"1":{…},"2":{…}}, versions in ascending order), "" for
// none. Each body is embedded as encoding/json embeds a json.RawMessage:
// compacted, i.e. insignificant whitespace between its tokens removed and
// nothing else changed (no HTML or U+2028/U+2029 escaping, strings and
// numbers as written). So DecodeVersionBodies gives back exactly the bytes
// of a compact body, such as every body EncodeVersionedBody renders, and a
// body with whitespace between tokens compacted. A body that is not one
// JSON value is an error (encoding/json's *json.MarshalerError).
func EncodeVersionBodies(m map[int][]byte) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	raw := make(map[string]json.RawMessage, len(m))
	for v, b := range m {
		raw[strconv.Itoa(v)] = b
	}
	// No HTML escaping: a compact body's bytes must come back exactly.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(raw); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// DecodeVersionBodies reverses EncodeVersionBodies.
func DecodeVersionBodies(s []byte) (map[int][]byte, error) {
	if len(s) == 0 {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(s, &raw); err != nil {
		return nil, err
	}
	out := make(map[int][]byte, len(raw))
	for k, b := range raw {
		v, err := strconv.Atoi(k)
		if err != nil {
			return nil, err
		}
		out[v] = []byte(b)
	}
	return out, nil
}

// NumberEvent returns ev with sequence number n: in its bodies
// (SetSequence), its Sequence and its X-Event-Sequence header. ev's maps
// are copied, not changed.
func NumberEvent(ev Event, n int64) Event {
	ev.Sequence = n
	ev.Body = SetSequence(ev.Body, n)
	if len(ev.VersionBodies) > 0 {
		vb := make(map[int][]byte, len(ev.VersionBodies))
		for v, b := range ev.VersionBodies {
			vb[v] = SetSequence(b, n)
		}
		ev.VersionBodies = vb
	}
	h := make(map[string]string, len(ev.Headers)+1)
	for k, v := range ev.Headers {
		h[k] = v
	}
	h[SequenceHeader] = strconv.FormatInt(n, 10)
	ev.Headers = h
	return ev
}
