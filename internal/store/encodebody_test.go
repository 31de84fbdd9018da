package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzEncodeBody checks that EncodeBody's direct path writes the bytes
// (and returns the errors) of encoding/json's (encodeBodyStd) for any
// strings, instants and data: the direct path must never change what an
// endpoint receives and verifies a signature over.
func FuzzEncodeBody(f *testing.F) {
	f.Add("evt_01", "order.placed", "acme", int64(1_700_000_000_123_456_789), []byte(`{"a":1,"b":"x y"}`))
	f.Add("a\"b", "t\u2028", "\xff", int64(-5), []byte(` {"<&>": [1e2, -0] } `))
	f.Add("x", "y", "z", int64(0), []byte(`{"a":1} x`))
	f.Add("x", "y", "z", int64(0), []byte{})
	f.Add("evt_02", "a.b", "t1", int64(1), []byte(`{"a":[1,2.5e3,"x<y\u00e9"],"b":null,"c":{"d":true}}`)) // the direct path
	f.Add("evt_03", "a.b", "t1", int64(2), []byte(`{"a":"\xff"}`))
	f.Fuzz(func(t *testing.T, id, typ, tenant string, ns int64, data []byte) {
		at := time.Unix(0, ns).In(time.FixedZone("z", -7200))
		got, err := EncodeBody(id, typ, tenant, at, data)
		want, wantErr := encodeBodyStd(id, typ, tenant, at, data)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("EncodeBody = %q (%v), encoding/json gives %q (%v)", got, err, want, wantErr)
		}
	})
}

// FuzzCompactJSON checks CompactJSON against encoding/json's json.Compact
// (the bytes, and an error exactly when it gives one), and that
// EncodeCompactBody of its result is EncodeBody of the data as given: the
// publish path compacts once and encodes without compacting again.
func FuzzCompactJSON(f *testing.F) {
	for _, d := range []string{`{"a":1}`, ` {"a" : [1, 2],` + "\n\t\r" + ` "b":"x y"} `, `{"a":"\u0020"}`, "{\"a\":1}\r", "{\"a\":1}\t", "{\"a\":1}\n", `{"a":`, `{"a":1} x`, "{\"a\":\"\xff\"}", ``, `"\t"`} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := CompactJSON(data)
		var want bytes.Buffer
		wantErr := json.Compact(&want, data)
		if (err == nil) != (wantErr == nil) || (err == nil && !bytes.Equal(got, want.Bytes())) {
			t.Fatalf("CompactJSON(%q) = %q (%v); json.Compact gives %q (%v)", data, got, err, want.Bytes(), wantErr)
		}
		if err != nil {
			return
		}
		at := time.Unix(1_700_000_000, 123).UTC()
		once, err1 := EncodeCompactBody("evt_1", "a.b", "t", at, got)
		full, err2 := EncodeBody("evt_1", "a.b", "t", at, data)
		if err1 != nil || err2 != nil || !bytes.Equal(once, full) {
			t.Fatalf("EncodeCompactBody(CompactJSON(%q)) = %q (%v); EncodeBody = %q (%v)", data, once, err1, full, err2)
		}
	})
}

// TestEncodeVersionBodiesCompacts pins what EncodeVersionBodies' docstring
// says: a compact body — what EncodeVersionedBody renders, characters
// encoding/json would HTML-escape, U+2028 and escapes included — comes back
// from DecodeVersionBodies byte for byte; whitespace between a body's
// tokens is removed (encoding/json compacts a json.RawMessage), not kept;
// a body that is not JSON is an error.
func TestEncodeVersionBodiesCompacts(t *testing.T) {
	rendered, err := EncodeVersionedBody("evt_1", "file.updated", 1, true, "acme", time.Unix(1_700_000_000, 5).UTC(), []byte(`{"note":"a<b>&c\u2028 d\u00e9","n":1.50}`))
	if err != nil {
		t.Fatal(err)
	}
	compact := map[int][]byte{1: rendered, 2: []byte(`{"a":"<&>","b":"` + "\u2028\u00e9" + `","c":1e2,"d":[true,null]}`)}
	enc, err := EncodeVersionBodies(compact)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeVersionBodies([]byte(enc))
	if err != nil {
		t.Fatal(err)
	}
	for v, b := range compact {
		if !bytes.Equal(got[v], b) {
			t.Errorf("version %d: %q came back as %q; want the same bytes", v, b, got[v])
		}
	}
	enc, err = EncodeVersionBodies(map[int][]byte{1: []byte(" {\"a\" : [1, 2],\n \"b\":\"x y\"} ")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeVersionBodies([]byte(enc)); err != nil || string(got[1]) != `{"a":[1,2],"b":"x y"}` {
		t.Errorf("a body with whitespace came back as %q (%v); want it compacted, its strings kept", got[1], err)
	}
	if _, err := EncodeVersionBodies(map[int][]byte{1: []byte(`{"a":`)}); err == nil {
		t.Error("a body that is not JSON was encoded; want an error")
	}
}
