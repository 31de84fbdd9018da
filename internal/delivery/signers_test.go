package delivery

import (
	"net/http"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/webhook"
)

func TestSignersFollowActiveSecrets(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	ep := store.Endpoint{ID: "ep_1", Secrets: []store.Secret{{Value: old}}}
	var c signers
	s1, err := c.get(&ep, now)
	if err != nil {
		t.Fatal(err)
	}
	if s2, _ := c.get(&ep, now); s2 != s1 {
		t.Error("same secrets: the signer was rebuilt")
	}
	// Rotation: the new secret first, the old one until it expires.
	ep.Secrets = []store.Secret{{Value: fresh}, {Value: old, ExpiresAt: now.Add(time.Hour)}}
	rotated, _ := c.get(&ep, now)
	if rotated == s1 {
		t.Fatal("after a rotation the old signer is still used")
	}
	if again, _ := c.get(&ep, now.Add(time.Minute)); again != rotated {
		t.Error("same active secrets: the signer was rebuilt")
	}
	expired, _ := c.get(&ep, now.Add(time.Hour))
	if expired == rotated {
		t.Fatal("after the old secret expired the two-secret signer is still used")
	}
	// The signatures are those of the active secrets only.
	h := http.Header{}
	body := []byte(`{"a":1}`)
	expired.Sign(h, "evt_1", now.Add(time.Hour), body)
	want := webhook.SignHerald(fresh, now.Add(time.Hour).Unix(), body)
	if got := h.Get(webhook.HeaderSignature); got != "t="+h.Get(webhook.HeaderWebhookTimestamp)+",v1="+want {
		t.Errorf("X-Signature %q, want one entry of the fresh secret %q", got, want)
	}
	// No active secret: an error, never a signer.
	ep.Secrets = []store.Secret{{Value: old, ExpiresAt: now}}
	if _, err := c.get(&ep, now); err == nil {
		t.Error("no active secret: got a signer")
	}
}
