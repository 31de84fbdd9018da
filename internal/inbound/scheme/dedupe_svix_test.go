package scheme

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// TestStandardDedupeKeyIsTheVerifiedID: the natural key of a
// standard-webhooks request is the id the signature covered. A request
// verified with its svix-* headers (the webhook-* set is used only when one
// of its headers is non-empty) keys on svix-id even when it also carries an
// empty webhook-id: keyed otherwise (an empty webhook-id has no key, and
// the gateway falls back to the body's SHA-256), a captured svix request
// replayed within the tolerance with "Webhook-Id:" added is stored and
// forwarded a second time.
func TestStandardDedupeKeyIsTheVerifiedID(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"user.created"}`)
	sig, err := webhook.SignStandard(secret, "msg_svix", now.Unix(), body)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Scheme: StandardWebhooks, Secrets: []string{secret}}
	for _, tc := range []struct {
		name  string
		extra http.Header
	}{
		{"svix alone", nil},
		{"svix with an empty webhook-id", http.Header{"Webhook-Id": {""}}},
		{"svix with empty webhook-* headers", http.Header{"Webhook-Id": {""}, "Webhook-Timestamp": {""}, "Webhook-Signature": {""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Svix-Id": {"msg_svix"}, "Svix-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Svix-Signature": {"v1," + sig}}
			for k, vs := range tc.extra {
				h[k] = vs
			}
			if err := Verify(c, h, body, now); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got, err := DedupeKey(StandardWebhooks, "", h, body)
			if err != nil || got != "msg_svix" {
				t.Fatalf("DedupeKey = %q, %v; want the verified svix-id %q", got, err, "msg_svix")
			}
		})
	}
}
