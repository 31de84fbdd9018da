package store

import (
	"bytes"
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
