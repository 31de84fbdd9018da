package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// TestVerifyHeraldCopies: the copies of an X-Signature header (a proxy may
// repeat it) verify when any of them does, whatever its place; copies
// with more than MaxHeraldCopyTimestamps timestamps are refused as
// malformed; the first failing copy's error is answered; and Verify (so
// the middleware) reads a repeated X-Signature the same way.
func TestVerifyHeraldCopies(t *testing.T) {
	const secret = "whsec_copies-test-secret"
	now := time.Unix(1_700_000_000, 0)
	v := &webhook.Verifier{Secrets: []string{secret}, Now: func() time.Time { return now }}
	body := []byte(`{"id":"evt_1"}`)
	right := "t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=" + webhook.SignHerald(secret, now.Unix(), body)
	wrongAt := func(ts int64) string { return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + strings.Repeat("ab", 32) }
	wrong := wrongAt(now.Unix())

	for _, c := range []struct {
		name   string
		values []string
		want   error // nil: verifies
	}{
		{"one right", []string{right}, nil},
		{"right after 15 wrong of its timestamp", append(repeat(wrong, 15), right), nil},
		{"right beside another timestamp", []string{wrongAt(now.Unix() - 5), right}, nil},
		{"empty copies skipped", []string{"", right, ""}, nil},
		{"three timestamps", []string{wrongAt(now.Unix() - 5), wrongAt(now.Unix() - 6), right}, webhook.ErrMalformedHeader},
		{"17 copies", repeat(right, 17), webhook.ErrMalformedHeader},
		{"none", []string{"", ""}, webhook.ErrMissingSignature},
		{"first failing copy's error: a stale one before a malformed one", []string{wrongAt(now.Unix() - 3600), "v1=zz"}, webhook.ErrTimestampTooOld},
		{"first failing copy's error: a malformed one before a stale one", []string{"v1=zz", wrongAt(now.Unix() - 3600)}, webhook.ErrMalformedHeader},
		{"wrong only", repeat(wrong, 3), webhook.ErrNoMatchingSignature},
	} {
		err := v.VerifyHeraldCopies(c.values, body)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: VerifyHeraldCopies = %v, want %v", c.name, err, c.want)
		}
		h := http.Header{}
		for _, x := range c.values {
			h.Add(webhook.HeaderSignature, x)
		}
		if c.name == "none" {
			continue // Verify: no signature of either scheme, another message
		}
		if err := v.Verify(h, body); c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
