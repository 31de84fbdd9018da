package interop

import (
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v85/webhook"

	"github.com/herald-webhooks/herald/webhook"
)

// stripe-go v85 (github.com/stripe/stripe-go/v85/webhook) is the peer for
// the Herald/Stripe scheme. The Stripe-Signature header value is Herald's
// X-Signature value. ValidatePayloadWithTolerance checks the signature and
// that the timestamp is at most the tolerance old (not that it is not in the
// future); it does not look at the payload, whereas ConstructEvent* parse it
// as a Stripe event and check its api_version unless told not to.

// stripeStyleSecret is a Stripe-style secret: any string works for this
// scheme, which uses the secret's bytes as the key (no base64).
const stripeStyleSecret = "whsec_test_secret"

func TestStripeVerifiesHerald(t *testing.T) {
	secret := newSecret(t)
	for name, body := range bodies() {
		t.Run(name, func(t *testing.T) {
			for _, s := range []string{secret, officialSecret} {
				h := heraldSign(t, "evt_1", time.Now(), body, s)
				header := h.Get(webhook.HeaderSignature)
				if err := stripe.ValidatePayloadWithTolerance(body, header, s, stripe.DefaultTolerance); err != nil {
					t.Fatalf("stripe-go rejects Herald's X-Signature %q: %v", header, err)
				}
				if err := stripe.ValidatePayload(body, header, s); err != nil {
					t.Fatalf("stripe-go ValidatePayload: %v", err)
				}
				// And a wrong secret or a changed body is rejected there too.
				if err := stripe.ValidatePayloadWithTolerance(append(body, ' '), header, s, stripe.DefaultTolerance); err == nil {
					t.Fatal("stripe-go accepts a changed body")
				}
				if err := stripe.ValidatePayloadWithTolerance(body, header, newSecret(t), stripe.DefaultTolerance); err == nil {
					t.Fatal("stripe-go accepts another secret")
				}
			}
		})
	}

	// Herald's scheme with a Stripe-style (non-base64) secret, via SignHerald.
	body := bodies()["herald event"]
	ts := time.Now().Unix()
	header := "t=" + itoa(ts) + ",v1=" + webhook.SignHerald(stripeStyleSecret, ts, body)
	if err := stripe.ValidatePayload(body, header, stripeStyleSecret); err != nil {
		t.Fatalf("stripe-go rejects SignHerald with a Stripe-style secret: %v", err)
	}
}

// A whole Stripe event signed by Herald goes through ConstructEventWithOptions.
func TestStripeConstructEventFromHerald(t *testing.T) {
	secret := newSecret(t)
	body := []byte(`{"id":"evt_1NfzLw2eZvKYlo2C","object":"event","api_version":"2020-08-27","created":1700000000,"type":"charge.succeeded","data":{"object":{"id":"ch_1","object":"charge"}}}`)
	h := heraldSign(t, "evt_1NfzLw2eZvKYlo2C", time.Now(), body, secret)
	ev, err := stripe.ConstructEventWithOptions(body, h.Get(webhook.HeaderSignature), secret, stripe.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		t.Fatalf("ConstructEventWithOptions: %v", err)
	}
	if ev.ID != "evt_1NfzLw2eZvKYlo2C" || string(ev.Type) != "charge.succeeded" {
		t.Fatalf("event %q %q", ev.ID, ev.Type)
	}
}

func TestHeraldVerifiesStripe(t *testing.T) {
	for name, body := range bodies() {
		t.Run(name, func(t *testing.T) {
			for _, s := range []string{newSecret(t), officialSecret, stripeStyleSecret} {
				p := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: s, Timestamp: time.Now()})
				v := &webhook.Verifier{Secrets: []string{s}}
				if err := v.VerifyHerald(p.Header, body); err != nil {
					t.Fatalf("Herald rejects stripe-go's header %q: %v", p.Header, err)
				}
				if err := v.Verify(http.Header{webhook.HeaderSignature: {p.Header}}, body); err != nil {
					t.Fatalf("Herald Verify rejects stripe-go's header: %v", err)
				}
				if err := v.VerifyHerald(p.Header, append(append([]byte(nil), body...), 'x')); err == nil {
					t.Fatal("Herald accepts a changed body")
				}
			}
		})
	}
}

// Byte-for-byte: for random bodies (any bytes), timestamps and secrets the
// two implementations produce the same MAC and the same header.
func TestStripeByteForByte(t *testing.T) {
	for i := 0; i < 300; i++ {
		secret := newSecret(t)
		body := randBytes(t, int(randInt(t, 2048)))
		ts := time.Unix(randInt(t, 1<<40), 0)
		want := hex.EncodeToString(stripe.ComputeSignature(ts, body, secret))
		if got := webhook.SignHerald(secret, ts.Unix(), body); got != want {
			t.Fatalf("case %d: SignHerald %s, stripe-go ComputeSignature %s", i, got, want)
		}
		p := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts})
		h := heraldSign(t, "evt_x", ts, body, secret)
		if got := h.Get(webhook.HeaderSignature); got != p.Header {
			t.Fatalf("case %d: Signer X-Signature %q, stripe-go header %q", i, got, p.Header)
		}
	}
}

// Rotation: Herald signs with two secrets (one v1 entry each); stripe-go
// holding either secret verifies. stripe-go signatures made with either
// secret verify with Herald holding both.
func TestStripeRotation(t *testing.T) {
	oldSecret, newSecretV := newSecret(t), newSecret(t)
	body := bodies()["herald event"]
	h := heraldSign(t, "evt_rot", time.Now(), body, newSecretV, oldSecret)
	header := h.Get(webhook.HeaderSignature)
	for name, s := range map[string]string{"old": oldSecret, "new": newSecretV} {
		if err := stripe.ValidatePayloadWithTolerance(body, header, s, stripe.DefaultTolerance); err != nil {
			t.Errorf("stripe-go holding the %s secret rejects Herald's rotation header: %v", name, err)
		}
		p := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: s, Timestamp: time.Now()})
		if err := heraldVerify(http.Header{webhook.HeaderSignature: {p.Header}}, body, newSecretV, oldSecret); err != nil {
			t.Errorf("Herald holding both secrets rejects stripe-go signing with the %s one: %v", name, err)
		}
	}
	if err := stripe.ValidatePayloadWithTolerance(body, header, newSecret(t), stripe.DefaultTolerance); err == nil {
		t.Error("stripe-go accepts a third secret")
	}
	// A Stripe-made rotation header (two v1 entries) verifies with Herald
	// holding either secret.
	now := time.Now()
	two := "t=" + itoa(now.Unix()) +
		",v1=" + hex.EncodeToString(stripe.ComputeSignature(now, body, newSecretV)) +
		",v1=" + hex.EncodeToString(stripe.ComputeSignature(now, body, oldSecret))
	for name, s := range map[string]string{"old": oldSecret, "new": newSecretV} {
		if err := heraldVerify(http.Header{webhook.HeaderSignature: {two}}, body, s); err != nil {
			t.Errorf("Herald holding the %s secret rejects a two-entry Stripe header: %v", name, err)
		}
	}
}

// The replay window agrees where both check: too old is rejected by both.
func TestStripeReplayWindow(t *testing.T) {
	secret := newSecret(t)
	body := bodies()["herald event"]
	old := heraldSign(t, "evt_old", time.Now().Add(-6*time.Minute), body, secret).Get(webhook.HeaderSignature)
	if err := stripe.ValidatePayloadWithTolerance(body, old, secret, stripe.DefaultTolerance); err == nil {
		t.Error("stripe-go accepts a 6-minute-old signature")
	}
	if err := heraldVerify(http.Header{webhook.HeaderSignature: {old}}, body, secret); err == nil {
		t.Error("Herald accepts a 6-minute-old signature")
	}
	recent := heraldSign(t, "evt_recent", time.Now().Add(-4*time.Minute), body, secret).Get(webhook.HeaderSignature)
	if err := stripe.ValidatePayloadWithTolerance(body, recent, secret, stripe.DefaultTolerance); err != nil {
		t.Errorf("stripe-go rejects a 4-minute-old signature: %v", err)
	}
	if err := heraldVerify(http.Header{webhook.HeaderSignature: {recent}}, body, secret); err != nil {
		t.Errorf("Herald rejects a 4-minute-old signature: %v", err)
	}
}
