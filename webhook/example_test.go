package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// The sender signs every attempt with each active secret of the endpoint.
// Real secrets come from webhook.NewSecret.
func ExampleSigner_Sign() {
	signer, err := webhook.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"evt_1","type":"file.extraction.completed"}`)
	req, _ := http.NewRequest(http.MethodPost, "https://example.com/hooks", nil)
	signer.Sign(req.Header, "evt_1", time.Unix(1700000000, 0), body)

	for _, k := range []string{"X-Signature", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
		fmt.Printf("%s: %s\n", k, req.Header.Get(k))
	}
	// Output:
	// X-Signature: t=1700000000,v1=37c77e3d9825bfc924bfd401fcfafbfe2b6dacf5fc090326d00408340bea01dd
	// Webhook-Id: evt_1
	// Webhook-Timestamp: 1700000000
	// Webhook-Signature: v1,BJvyriAbf0+epdvJXrr95/Uo41Ee4pu1w0uI9egjjvs=
}

// A receiver verifies the raw body before parsing it. During a rotation
// overlap it lists both secrets.
func ExampleVerifier_Verify() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"id":"evt_1","type":"file.extraction.completed"}`)
	h := http.Header{}
	signer, _ := webhook.NewSigner(secret)
	signer.Sign(h, "evt_1", time.Unix(1700000000, 0), body)

	v := &webhook.Verifier{
		Secrets: []string{secret},
		// Tests pin the clock; production leaves Now nil (time.Now).
		Now: func() time.Time { return time.Unix(1700000042, 0) },
	}
	fmt.Println("genuine:", v.Verify(h, body))

	err := v.Verify(h, []byte(`{"id":"evt_1","type":"file.deleted"}`))
	fmt.Println("tampered:", errors.Is(err, webhook.ErrNoMatchingSignature))

	v.Now = func() time.Time { return time.Unix(1700000000+301, 0) }
	err = v.Verify(h, body)
	fmt.Println("replayed:", errors.Is(err, webhook.ErrTimestampTooOld))

	err = v.Verify(http.Header{}, body)
	fmt.Println("unsigned:", errors.Is(err, webhook.ErrMissingSignature))
	// Output:
	// genuine: <nil>
	// tampered: true
	// replayed: true
	// unsigned: true
}
