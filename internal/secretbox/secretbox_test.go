package secretbox

import (
	"crypto/rand"
	"errors"
	"testing"
)

func newBox(t *testing.T) *Box {
	k := make([]byte, KeySize)
	rand.Read(k)
	b, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeyringOpensCurrentAndPrevious: a Keyring seals with its current key
// only and opens values of the current or a previous key; other keys and
// other contexts fail with ErrDecrypt.
func TestKeyringOpensCurrentAndPrevious(t *testing.T) {
	t.Parallel()
	oldB, newB, other := newBox(t), newBox(t), newBox(t)
	ring := NewKeyring(newB, oldB)
	fromOld, _ := oldB.Seal([]byte("a"), []byte("ep_1"))
	fromNew, _ := ring.Seal([]byte("b"), []byte("ep_1"))
	if pt, err := ring.Open(fromOld, []byte("ep_1")); err != nil || string(pt) != "a" {
		t.Fatalf("previous key: %q, %v", pt, err)
	}
	if pt, err := newB.Open(fromNew, []byte("ep_1")); err != nil || string(pt) != "b" {
		t.Fatalf("the keyring did not seal with the current key: %q, %v", pt, err)
	}
	if _, err := oldB.Open(fromNew, []byte("ep_1")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("sealed with the previous key too: %v", err)
	}
	fromOther, _ := other.Seal([]byte("c"), []byte("ep_1"))
	if _, err := ring.Open(fromOther, []byte("ep_1")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("unknown key: %v, want ErrDecrypt", err)
	}
	if _, err := ring.Open(fromOld, []byte("ep_2")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other context: %v, want ErrDecrypt", err)
	}
}
