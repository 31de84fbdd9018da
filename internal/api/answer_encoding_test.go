package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// FuzzPublishAnswerEncoding checks that the publish answer's encoder
// (segmentio's, marshalCompact) writes the bytes of huma's default
// (encoding/json) for any strings and any well-formed data once
// store.CompactJSON has compacted it, as the publish handler does: HTML
// characters, U+2028, invalid UTF-8, numbers of every form, whitespace.
func FuzzPublishAnswerEncoding(f *testing.F) {
	f.Add("acme", "order.placed", []byte(`{"a":1}`), int64(1_700_000_000), int64(5), int16(60))
	f.Add("<b>&", "x\u2028y", []byte(` { "html" : "<&>" , "n" : [1e21, -0, 0.000001, 1E+2] } `), int64(-62167219200), int64(0), int16(0))
	f.Add("\xff\xfe", "\x00\x1f", []byte(`{"s":"\u2029\ud800 a\tb","t":true,"u":null}`), int64(253402300799), int64(999999999), int16(-90))
	f.Fuzz(func(t *testing.T, tenant, typ string, data []byte, sec, nsec int64, offsetMinutes int16) {
		occurred := time.Unix(sec, nsec).In(time.FixedZone("z", int(offsetMinutes)*60))
		if !store.ValidOccurredAt(occurred) {
			return // refused before any answer (TestAPIBadInput)
		}
		occurred = occurred.UTC() // answers state the stored instant, in UTC
		compact, err := store.CompactJSON(data)
		if err != nil {
			if json.Valid(data) {
				t.Fatalf("CompactJSON refused well-formed %q: %v", data, err)
			}
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, data); err != nil || !bytes.Equal(compact, want.Bytes()) {
			t.Fatalf("CompactJSON(%q) = %q, json.Compact gives %q (%v)", data, compact, want.Bytes(), err)
		}
		v := PublishOut{EventOut: EventOut{ID: "evt_1", Tenant: tenant, Type: typ, OccurredAt: occurred,
			Data: compact, Version: 2, Sequence: 7, CreatedAt: time.Unix(2, 0).UTC()}, Deliveries: 3}
		var fast, std bytes.Buffer
		errFast := marshalCompact(&fast, v)
		errStd := huma.DefaultJSONFormat.Marshal(&std, v)
		if (errFast == nil) != (errStd == nil) || !bytes.Equal(fast.Bytes(), std.Bytes()) {
			t.Fatalf("encoders differ:\n fast %q (%v)\n std  %q (%v)", fast.Bytes(), errFast, std.Bytes(), errStd)
		}
	})
}

// TestVerifiedAnswerPanicsOnADifference checks that the suites' check can
// fail: raw JSON that is not compact is written differently (segmentio
// does not compact it), and marshalVerified panics.
func TestVerifiedAnswerPanicsOnADifference(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "differs from encoding/json") {
			t.Fatalf("recovered %v, want the encoders' difference", r)
		}
	}()
	_ = marshalVerified(&bytes.Buffer{}, PublishOut{EventOut: EventOut{Data: json.RawMessage(`{ "a": 1 }`)}})
}
