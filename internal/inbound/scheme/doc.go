// Package scheme verifies the signatures that webhook providers put on the
// requests they send to Herald's inbound gateway, and extracts the
// provider's natural event id used to drop duplicates.
//
// Everything works on the raw request bytes exactly as received: the body is
// never parsed and re-serialised before verification, so trailing newlines,
// escaped slashes ("\/"), key order and non-ASCII text verify as signed.
//
// # Schemes
//
// A source's [Config] names one scheme:
//
//	herald             X-Signature: t=<unix>,v1=<hex>           (webhook.Verifier.VerifyHerald)
//	standard-webhooks  webhook-id/-timestamp/-signature, or svix-* (webhook.Verifier.VerifyStandard)
//	stripe             Stripe-Signature: t=<unix>,v1=<hex>      (same format and code as herald)
//	github             X-Hub-Signature-256: sha256=<hex>        (no timestamp)
//	shopify            X-Shopify-Hmac-Sha256: <base64>          (no timestamp)
//	slack              X-Slack-Signature: v0=<hex>, X-Slack-Request-Timestamp
//	hmac               generic: header, algorithm, encoding, prefix, timestamp header, template
//
// Provider documentation each scheme follows:
//
//   - Stripe, "Verify webhook signatures manually":
//     https://docs.stripe.com/webhooks#verify-manually
//   - Standard Webhooks specification, "Verifying signatures":
//     https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
//   - GitHub, "Validating webhook deliveries":
//     https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
//   - Shopify, "Verify webhooks" (HTTPS delivery, step "Validate the origin"):
//     https://shopify.dev/docs/apps/build/webhooks/subscribe/https
//   - Slack, "Verifying requests from Slack":
//     https://api.slack.com/authentication/verifying-requests-from-slack
//
// # Replay window
//
// Schemes whose signature covers a timestamp (herald, standard-webhooks,
// stripe, slack, and hmac with a timestamp header) reject a timestamp more
// than [Config.Tolerance] (default 300 s) away from the gateway's clock, in
// BOTH directions. Stripe's own libraries accept any future timestamp;
// Herald does not (see docs/contract.md, "replay window"). GitHub and Shopify sign
// no timestamp, so their requests can be replayed by anyone who captured
// one; the gateway's dedupe key is then the only defence.
//
// # Errors
//
// [Verify] returns nil or an error wrapping exactly one of the webhook
// package's sentinels — webhook.ErrMissingSignature,
// webhook.ErrMalformedHeader, webhook.ErrTimestampTooOld,
// webhook.ErrTimestampTooNew, webhook.ErrNoMatchingSignature — so the
// gateway can count reasons; it answers 401 with no detail in every case.
// A configuration that fails [Config.Validate] yields an error wrapping
// [ErrInvalidConfig] instead (the source is broken, not the request).
//
// # Safety
//
// Every MAC comparison is constant time (crypto/hmac.Equal) on decoded
// bytes. Every header value read is capped at 8 KiB, signature values must
// have the exact length of the MAC they encode, and a signature, timestamp
// or id header sent more than once is ErrMalformedHeader (a proxy and the
// gateway could otherwise disagree on which one counts). No input makes the
// package panic (fuzzed by FuzzVerify and FuzzDedupeKey).
//
// # Dedupe keys
//
// [DedupeKey] returns the scheme's natural event id, or the value a
// "header:Name" or "json:/pointer" rule selects; when it fails the gateway
// falls back to [BodyKey], the SHA-256 of the raw body.
package scheme
