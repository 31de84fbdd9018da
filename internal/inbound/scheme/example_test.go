package scheme_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/herald-webhooks/herald/internal/inbound/scheme"
	"github.com/herald-webhooks/herald/webhook"
)

// A GitHub source: verify the raw body, then key the event by its
// X-GitHub-Delivery, falling back to the body's hash.
func Example() {
	cfg := scheme.Config{Scheme: scheme.GitHub, Secrets: []string{"new secret", "old secret"}}
	if err := cfg.Validate(); err != nil {
		panic(err) // the API answers 422 with err's message
	}

	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}` + "\n")
	m := hmac.New(sha256.New, []byte("old secret"))
	m.Write(body)
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")

	if err := scheme.Verify(cfg, h, body, time.Now()); err != nil {
		fmt.Println("401:", errors.Is(err, webhook.ErrNoMatchingSignature))
		return
	}
	key, err := scheme.DedupeKey(cfg.Scheme, "", h, body)
	if err != nil {
		key = scheme.BodyKey(body)
	}
	fmt.Println("verified; key", key)

	// The same request with one byte changed.
	body[0] = ' '
	err = scheme.Verify(cfg, h, body, time.Now())
	fmt.Println("tampered:", errors.Is(err, webhook.ErrNoMatchingSignature))
	// Output:
	// verified; key 72d3162e-cc78-11e3-81ab-4c9367dc0958
	// tampered: true
}
