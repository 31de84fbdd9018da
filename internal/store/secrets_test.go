package store

import (
	"errors"
	"testing"
	"time"
)

var r0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func values(ss []Secret) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Value)
	}
	return out
}

// Issue 13, point 8: S1→S2 with a day of overlap, then S2→S3 with none:
// only S3 signs (S1 was kept, S2 dropped). A rotation with overlap N
// leaves no older secret valid for more than N.
func TestRotationOverlapBoundsEveryOlderSecret(t *testing.T) {
	ss := []Secret{{Value: "S1", CreatedAt: r0}}
	ss = RotatedSecrets(ss, RotateSecretParams{Secret: "S2", PreviousExpiresAt: r0.Add(24 * time.Hour), Now: r0})
	if got := values(ss); len(got) != 2 || got[0] != "S2" || got[1] != "S1" {
		t.Fatalf("after S1→S2 (overlap 1 day): %q, want [S2 S1]", got)
	}
	now := r0.Add(time.Hour)
	emergency := RotatedSecrets(ss, RotateSecretParams{Secret: "S3", PreviousExpiresAt: now, Now: now})
	if got := values(emergency); len(got) != 1 || got[0] != "S3" {
		t.Errorf("after S2→S3 (overlap 0): %q, want [S3]", got)
	}
	short := RotatedSecrets(ss, RotateSecretParams{Secret: "S3", PreviousExpiresAt: now.Add(time.Minute), Now: now})
	if got := values(short); len(got) != 3 {
		t.Fatalf("after S2→S3 (overlap 1 min): %q, want [S3 S2 S1]", got)
	}
	for _, s := range short[1:] {
		if !s.ExpiresAt.Equal(now.Add(time.Minute)) {
			t.Errorf("%s expires at %v, want %v (the new overlap bounds it)", s.Value, s.ExpiresAt, now.Add(time.Minute))
		}
	}
	// An older secret expiring sooner than the new overlap keeps its expiry.
	long := RotatedSecrets(ss, RotateSecretParams{Secret: "S3", PreviousExpiresAt: now.Add(48 * time.Hour), Now: now})
	if got := long[2]; got.Value != "S1" || !got.ExpiresAt.Equal(r0.Add(24*time.Hour)) {
		t.Errorf("S1 after a 2-day overlap: %+v, want its own expiry %v", got, r0.Add(24*time.Hour))
	}
}

func TestRevokedSecrets(t *testing.T) {
	ss := []Secret{{Value: "S3", CreatedAt: r0}, {Value: "S2", ExpiresAt: r0.Add(time.Hour)}, {Value: "S1", ExpiresAt: r0.Add(time.Minute)}}
	got, err := RevokedSecrets(ss, SecretID("S2"), r0)
	if err != nil || len(got) != 2 || got[0].Value != "S3" || got[1].Value != "S1" {
		t.Errorf("revoke S2: %q, %v; want [S3 S1]", values(got), err)
	}
	if len(ss) != 3 || ss[1].Value != "S2" {
		t.Errorf("RevokedSecrets changed its input: %q", values(ss))
	}
	if _, err := RevokedSecrets(ss, SecretID("S3"), r0); !errors.Is(err, ErrCurrentSecret) || !errors.Is(err, ErrConflict) {
		t.Errorf("revoke the current secret: %v, want ErrCurrentSecret (a conflict)", err)
	}
	if _, err := RevokedSecrets(ss, SecretID("S1"), r0.Add(2*time.Minute)); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke an expired secret: %v, want ErrNotFound", err)
	}
	if _, err := RevokedSecrets(ss, "sec_nope", r0); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke an unknown id: %v, want ErrNotFound", err)
	}
	if id := SecretID("S1"); len(id) != 20 || id == SecretID("S2") {
		t.Errorf("SecretID = %q", id)
	}
}
