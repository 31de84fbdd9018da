package store

import "testing"

// TestFingerprintVersions: data_versions are part of an event's content,
// and an event without them keeps the fingerprint it was stored with.
func TestFingerprintVersions(t *testing.T) {
	data := []byte(`{"file_id":"f_1","revision":2}`)
	old := Fingerprint("acme", "file.updated", data)
	if got := FingerprintVersions("acme", "file.updated", data, nil); got != old {
		t.Fatalf("without data_versions: %s, want the old fingerprint %s", got, old)
	}
	a := FingerprintVersions("acme", "file.updated", data, map[int][]byte{1: []byte(`{"file_id":"f_1"}`)})
	b := FingerprintVersions("acme", "file.updated", data, map[int][]byte{1: []byte(`{"file_id":"f_2"}`)})
	c := FingerprintVersions("acme", "file.updated", data, map[int][]byte{2: []byte(`{"file_id":"f_1"}`)})
	if a == old || a == b || a == c || b == c {
		t.Fatalf("data_versions not covered: %s %s %s %s", old, a, b, c)
	}
	if a != FingerprintVersions("acme", "file.updated", data, map[int][]byte{1: []byte(`{"file_id":"f_1"}`)}) {
		t.Fatal("not deterministic")
	}
}
