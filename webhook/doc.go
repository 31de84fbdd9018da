// Package webhook signs, verifies and receives Herald webhook deliveries.
//
// Herald's sender signs every delivery attempt with this package and
// receivers verify with the same code, so both sides agree byte for byte.
// Two schemes are supported, and Herald sends both on every attempt.
//
// # Herald scheme (Stripe-compatible)
//
// One header:
//
//	X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>...]
//
// The MAC is HMAC-SHA256 over the bytes "<t>.<raw body>" where <t> is the
// timestamp in decimal without leading zeros (a verifier re-formats the
// parsed value, as Stripe's libraries do). The HMAC key is the
// secret string's bytes as shown, including the "whsec_" prefix (no base64
// decoding). During a secret rotation every active secret contributes one
// v1 entry. Entries with other keys (v0, ...) are ignored. This is the scheme
// of Stripe's "Verify webhook signatures manually" documentation
// (https://docs.stripe.com/webhooks), so Stripe's libraries
// verify Herald deliveries and this package verifies Stripe's.
//
// # Standard Webhooks scheme (Svix-compatible)
//
// Three headers, as in the Standard Webhooks specification
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
//
//	webhook-id:        <message id>          (Herald: the event id, evt_…)
//	webhook-timestamp: <unix seconds>
//	webhook-signature: v1,<base64 HMAC-SHA256>[ v1,<base64>...]
//
// The MAC is HMAC-SHA256 over "<id>.<timestamp>.<raw body>" (timestamp in
// decimal without leading zeros) with the key
// base64-decoded from the part of the secret after "whsec_" (a secret
// without the prefix is decoded whole). Entries with other versions (v1a,
// v2, ...) are ignored. Verification also accepts Svix's header names
// svix-id, svix-timestamp and svix-signature when the webhook-* headers are
// absent.
//
// # Replay window
//
// A [Verifier] rejects a timestamp that is more than its tolerance
// (default [DefaultTolerance], 300 s) away from its clock in either
// direction: ErrTimestampTooOld for the past, ErrTimestampTooNew for the
// future. The clock is truncated to whole seconds, so a message exactly
// 300 s old is accepted. Note that Stripe's own libraries accept any future
// timestamp; Herald deliberately does not.
//
// # Secrets
//
// [NewSecret] returns "whsec_" + standard base64 of 32 random bytes, usable
// by both schemes. Secrets that are not base64 (such as some Stripe
// secrets) can still be used to verify the Herald/Stripe scheme, but not to
// create a [Signer], which always signs with both schemes.
//
// # Receiving webhooks
//
// [Middleware] turns an http.Handler into a receiver that keeps the
// promises of the contract on the receiving side:
//
//	store := webhook.NewMemoryStore() // tests only: forgets on restart, and Herald retries for ~35 h; use sqlstore or redisstore
//	h := webhook.Middleware(webhook.HandlerConfig{
//		Verifier: &webhook.Verifier{Secrets: []string{newSecret, oldSecret}},
//		Store:    store,
//		OnError:  func(r *http.Request, err error) { log.Print(err) },
//	})(handler)
//
// It reads the raw body (at most 1 MiB by default; 413 beyond), verifies
// it with either scheme (401 {"error":"invalid signature"} with no detail;
// the reason goes to OnError), claims the event id atomically in an
// [IdempotencyStore] and calls the handler once per event id, with the
// raw body in r.Body and in [RawBody]. A redelivery of an event already
// handled is answered 200 {"duplicate":true} without calling the handler.
// If the handler fails (any answer but 2xx, or a panic) the claim is
// released, so the sender's retry is handled; a claim whose process died
// lapses after a lease (5 min by default), and a redelivery arriving while
// the first delivery is still being handled is answered 503 with
// Retry-After. The
// event id comes from signed content only: the webhook-id (or svix-id),
// which the Standard Webhooks signature covers and which stays the same on
// every retry of one message (Standard Webhooks spec, "Webhook headers").
// A request signed with X-Signature alone is refused 400
// ([ErrUnsignedEventID]): that signature covers the timestamp and the body,
// not X-Event-Id, so a copy resent within the replay window under new
// X-Event-Ids would be handled each time. Herald sends both schemes on
// every attempt, inbound forwards included, so its deliveries always pass.
// [HandlerConfig].AllowBodyID accepts X-Signature alone for senders whose
// signed body's "id" is the message id (Stripe, "Handle duplicate events",
// https://docs.stripe.com/webhooks#best-practices); never for Herald's
// inbound forwards, whose body is the provider's.
//
// Stores: [MemoryStore] here; package sqlstore (SQLite and PostgreSQL, one
// INSERT ... ON CONFLICT per claim) and package redisstore (SET NX PX) for
// receivers running as several processes. redisstore is a module of its own
// (go get github.com/herald-webhooks/herald/webhook/redisstore), so a
// receiver that imports only webhook gets no Redis client among its
// dependencies; webhook itself imports the standard library only. Package
// storetest checks other implementations.
//
// Events may also arrive out of order: a [VersionGate] keeps, per resource
// id, the newest version acted on (the event's sequence, see [Sequence], or
// a version its producer put in data) and reports older or equal versions
// as stale ([NewMemoryVersionGate]; sqlstore.VersionGate, whose CheckTx
// advances the gate in the caller's transaction).
//
// # Safety
//
// All signature comparisons are constant time ([crypto/hmac.Equal]).
// Header values longer than 8 KiB or with more than 16 signature entries are
// rejected with ErrMalformedHeader before any MAC is computed. Error messages
// never contain a secret or an expected signature.
package webhook
