package webhook

import (
	"context"
	"testing"
	"time"
)

// Expired records are dropped from the map, so memory is bounded by the
// records of the last TTL.
func TestMemoryStoreSweeps(t *testing.T) {
	now := time.Unix(1700000000, 0)
	s := NewMemoryStore()
	s.Now = func() time.Time { return now }
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Claim(ctx, k, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(ctx, "c", time.Hour); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * sweepInterval)
	if _, err := s.Claim(ctx, "d", time.Second); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	n := len(s.records)
	s.mu.Unlock()
	if n != 2 { // c (completed, 1 h) and d
		t.Fatalf("%d records after the sweep, want 2", n)
	}
}

func TestClaimStatusString(t *testing.T) {
	for st, want := range map[ClaimStatus]string{
		ClaimAcquired: "acquired", ClaimInProgress: "in progress", ClaimCompleted: "completed", 0: "ClaimStatus(0)",
	} {
		if got := st.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(st), got, want)
		}
	}
}
