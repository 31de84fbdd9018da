package webhook

import (
	"context"
	"testing"
)

// TestSequenceFeedsVersionGate: Herald's sequence numbers, read from the
// signed body, are versions the gate accepts: in order they pass, a stale
// or repeated one does not.
func TestSequenceFeedsVersionGate(t *testing.T) {
	g := NewMemoryVersionGate()
	for _, c := range []struct {
		body  string
		fresh bool
	}{
		{`{"id":"evt_1","type":"file.updated","version":2,"sequence":1,"tenant":"acme","data":{"file_id":"f_1"}}`, true},
		{`{"id":"evt_3","type":"file.updated","version":2,"sequence":3,"tenant":"acme","data":{"file_id":"f_1"}}`, true},
		{`{"id":"evt_2","type":"file.updated","version":2,"sequence":2,"tenant":"acme","data":{"file_id":"f_1"}}`, false},
		{`{"id":"evt_3","type":"file.updated","version":2,"sequence":3,"tenant":"acme","data":{"file_id":"f_1"}}`, false},
	} {
		seq, ok := Sequence([]byte(c.body))
		if !ok {
			t.Fatalf("no sequence in %s", c.body)
		}
		fresh, err := g.Check(context.Background(), "f_1", seq)
		if err != nil || fresh != c.fresh {
			t.Fatalf("sequence %d: fresh %v %v, want %v", seq, fresh, err, c.fresh)
		}
	}
	if _, ok := Sequence([]byte(`{"id":"evt_1","data":{"sequence":4}}`)); ok {
		t.Fatal("a sequence inside data was taken for the envelope's")
	}
}
