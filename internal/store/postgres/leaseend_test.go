package postgres

import (
	"testing"
	"time"
)

// TestLeaseEndIsUniqueWithinASecond: lease ends asked for at one reading
// (a clock standing still, or one microsecond) come out one microsecond
// apart, as stored; one asked for a later reading is taken as it is; a
// clock set back by more than a second is followed, not outrun.
func TestLeaseEndIsUniqueWithinASecond(t *testing.T) {
	s := &Store{}
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 123456789, time.UTC)
	want := []time.Time{ts(t0), ts(t0).Add(time.Microsecond), ts(t0).Add(2 * time.Microsecond)}
	for i, w := range want {
		if got := s.leaseEnd(t0); !got.Equal(w) {
			t.Errorf("leaseEnd #%d at one reading = %v, want %v", i+1, got, w)
		}
	}
	if later := t0.Add(time.Millisecond); !s.leaseEnd(later).Equal(ts(later)) {
		t.Errorf("a later reading was moved: %v", s.leaseEnd(later))
	}
	if back := t0.Add(-2 * time.Second); !s.leaseEnd(back).Equal(ts(back)) {
		t.Errorf("a clock set back by 2 s: lease end %v, want %v", s.leaseEnd(back), ts(back))
	}
}
