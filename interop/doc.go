// Package interop holds Herald's interoperability tests: they prove, byte
// for byte and in both directions, that webhook.Signer output verifies with
// the peer libraries (stripe-go, the Standard Webhooks Go library, svix-go,
// and through node/verify.mjs the standardwebhooks and svix npm packages)
// and that their signatures verify with webhook.Verifier; and that requests
// signed by the providers' libraries (also go-github and slack-go) are
// accepted by Herald's inbound gateway and tampered ones refused. The
// package has no code of its own; run ./run.sh (npm ci, then go test ./...).
package interop
