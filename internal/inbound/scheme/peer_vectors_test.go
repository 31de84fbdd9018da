package scheme

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/testutil"
	"github.com/herald-webhooks/herald/webhook"
)

// deliberateDifferences lists the peer vectors whose verdict Herald's
// gateway changes on purpose, with the error it returns instead.
var deliberateDifferences = map[string]error{
	// Stripe's libraries (stripe-go, stripe-node) only reject timestamps
	// that are too OLD, so a signature dated one hour in the future
	// verifies there. Herald refuses timestamps outside the tolerance in
	// both directions (docs/contract.md "replay window"; "Stripe's own
	// libraries accept any future timestamp, Herald does not").
	"stripe_v1/future-1h": webhook.ErrTimestampTooNew,
	// go-github's ValidatePayload falls back to the legacy SHA-1
	// X-Hub-Signature. The gateway's github scheme accepts only
	// X-Hub-Signature-256 (GitHub recommends it; the SHA-1 header exists
	// for compatibility), so a request carrying only the SHA-1 header has
	// no signature it accepts. TestPeerVectorsGitHubSHA1ViaHMAC shows the
	// same vector verifying through an explicit hmac source.
	"github/go-github-test-sha1": webhook.ErrMissingSignature,
}

// checkVerdict asserts err against the vector's expectation, or against a
// deliberate difference.
func checkVerdict(t *testing.T, name string, expectValid bool, err error) {
	t.Helper()
	if want, ok := deliberateDifferences[name]; ok {
		if !errors.Is(err, want) {
			t.Fatalf("%s: deliberate difference: got %v, want %v", name, err, want)
		}
		return
	}
	if expectValid && err != nil {
		t.Fatalf("%s: want valid, got %v", name, err)
	}
	if !expectValid {
		if err == nil {
			t.Fatalf("%s: want rejected, got nil", name)
		}
		assertRequestSentinel(t, name, err)
	}
}

func TestPeerVectorsStandardWebhooks(t *testing.T) {
	for _, vec := range testutil.LoadPeerVectors(t).Standard {
		name := "standard_webhooks_v1/" + vec.Name
		t.Run(vec.Name, func(t *testing.T) {
			sig := vec.ExpectedSignature
			if sig == "" {
				sig = vec.SignatureHeader
			}
			c := Config{Scheme: StandardWebhooks, Secrets: []string{vec.Secret}}
			// Both header spellings: webhook-* and Svix's svix-*.
			for _, names := range [][3]string{standardHeaders, svixHeaders} {
				h := http.Header{}
				h.Set(names[0], vec.MsgID)
				h.Set(names[1], strconv.FormatInt(vec.Timestamp, 10))
				h.Set(names[2], sig)
				err := Verify(c, h, []byte(vec.Body), time.Unix(vec.VerifyAt, 0))
				checkVerdict(t, name+" ("+names[0]+")", vec.ExpectValid, err)
				if vec.ExpectValid {
					key, err := DedupeKey(StandardWebhooks, "", h, []byte(vec.Body))
					if err != nil || key != vec.MsgID {
						t.Fatalf("DedupeKey = %q, %v; want %q", key, err, vec.MsgID)
					}
				}
			}
		})
	}
}

func TestPeerVectorsStripe(t *testing.T) {
	for _, vec := range testutil.LoadPeerVectors(t).Stripe {
		name := "stripe_v1/" + vec.Name
		t.Run(vec.Name, func(t *testing.T) {
			header := vec.ExpectedHeader
			if header == "" {
				header = vec.Header
			}
			body := []byte(vec.Body)
			now := time.Unix(vec.VerifyAt, 0)
			h := http.Header{"Stripe-Signature": {header}}
			err := Verify(Config{Scheme: Stripe, Secrets: []string{vec.Secret}}, h, body, now)
			checkVerdict(t, name, vec.ExpectValid, err)

			// The herald scheme reads the same format from X-Signature.
			hh := http.Header{"X-Signature": {header}}
			err = Verify(Config{Scheme: Herald, Secrets: []string{vec.Secret}}, hh, body, now)
			checkVerdict(t, name, vec.ExpectValid, err)

			// A Stripe-Signature is not an X-Signature, nor the reverse.
			if err := Verify(Config{Scheme: Herald, Secrets: []string{vec.Secret}}, h, body, now); !errors.Is(err, webhook.ErrMissingSignature) {
				t.Fatalf("herald scheme with only Stripe-Signature: %v", err)
			}
			if err := Verify(Config{Scheme: Stripe, Secrets: []string{vec.Secret}}, hh, body, now); !errors.Is(err, webhook.ErrMissingSignature) {
				t.Fatalf("stripe scheme with only X-Signature: %v", err)
			}

			var event struct{ ID string }
			if json.Unmarshal(body, &event) == nil && event.ID != "" {
				key, err := DedupeKey(Stripe, "", h, body)
				if err != nil || key != event.ID {
					t.Fatalf("DedupeKey = %q, %v; want %q", key, err, event.ID)
				}
			}
		})
	}
}

func TestPeerVectorsGitHub(t *testing.T) {
	for _, vec := range testutil.LoadPeerVectors(t).GitHub {
		name := "github/" + vec.Name
		t.Run(vec.Name, func(t *testing.T) {
			h := http.Header{}
			switch {
			case len(vec.HeaderValue) > 5 && vec.HeaderValue[:5] == "sha1=":
				h.Set("X-Hub-Signature", vec.HeaderValue) // the legacy header
			default:
				h.Set("X-Hub-Signature-256", vec.HeaderValue)
			}
			// GitHub signs no timestamp: any clock will do.
			err := Verify(Config{Scheme: GitHub, Secrets: []string{vec.Secret}}, h, []byte(vec.Body), time.Unix(0, 0))
			checkVerdict(t, name, vec.ExpectValid, err)
		})
	}
}

// TestPeerVectorsGitHubSHA1ViaHMAC: the SHA-1 vector that the github scheme
// refuses on purpose verifies through a generic hmac source, so an operator
// who must accept legacy SHA-1 signatures can.
func TestPeerVectorsGitHubSHA1ViaHMAC(t *testing.T) {
	found := false
	for _, vec := range testutil.LoadPeerVectors(t).GitHub {
		if vec.Name != "go-github-test-sha1" {
			continue
		}
		found = true
		c := Config{Scheme: HMAC, Secrets: []string{vec.Secret}, HMAC: &HMACConfig{
			Header: "X-Hub-Signature", Algorithm: "sha1", Prefix: "sha1=",
		}}
		h := http.Header{"X-Hub-Signature": {vec.HeaderValue}}
		if err := Verify(c, h, []byte(vec.Body), time.Unix(0, 0)); err != nil {
			t.Fatalf("github SHA-1 vector via hmac: %v", err)
		}
		if err := Verify(c, h, []byte(vec.Body+" "), time.Unix(0, 0)); !errors.Is(err, webhook.ErrNoMatchingSignature) {
			t.Fatalf("tampered: %v", err)
		}
	}
	if !found {
		t.Fatal("vector github/go-github-test-sha1 not found")
	}
}

func TestPeerVectorsSlack(t *testing.T) {
	for _, vec := range testutil.LoadPeerVectors(t).Slack {
		name := "slack_v0/" + vec.Name
		t.Run(vec.Name, func(t *testing.T) {
			ts := strconv.FormatInt(vec.Timestamp, 10)
			if want := "v0:" + ts + ":" + vec.Body; vec.SignedContent != "" && vec.SignedContent != want {
				t.Fatalf("signed content: vector %q, ours %q", vec.SignedContent, want)
			}
			h := http.Header{
				"X-Slack-Signature":         {vec.XSlackSignature},
				"X-Slack-Request-Timestamp": {ts},
			}
			err := Verify(Config{Scheme: Slack, Secrets: []string{vec.Secret}}, h, []byte(vec.Body), time.Unix(vec.VerifyAt, 0))
			checkVerdict(t, name, vec.ExpectValid, err)

			if vec.ExpectValid {
				var ev struct {
					EventID string `json:"event_id"`
				}
				if json.Unmarshal([]byte(vec.Body), &ev) == nil && ev.EventID != "" {
					key, err := DedupeKey(Slack, "", h, []byte(vec.Body))
					if err != nil || key != ev.EventID {
						t.Fatalf("DedupeKey = %q, %v; want %q", key, err, ev.EventID)
					}
				}
				// The same request, past the window in either direction.
				tol := int64(DefaultTolerance / time.Second)
				if err := Verify(Config{Scheme: Slack, Secrets: []string{vec.Secret}}, h, []byte(vec.Body), time.Unix(vec.Timestamp+tol+1, 0)); !errors.Is(err, webhook.ErrTimestampTooOld) {
					t.Fatalf("old: %v", err)
				}
				if err := Verify(Config{Scheme: Slack, Secrets: []string{vec.Secret}}, h, []byte(vec.Body), time.Unix(vec.Timestamp-tol-1, 0)); !errors.Is(err, webhook.ErrTimestampTooNew) {
					t.Fatalf("future: %v", err)
				}
			}
		})
	}
}

func TestPeerVectorsShopify(t *testing.T) {
	for _, vec := range testutil.LoadPeerVectors(t).Shopify {
		name := "shopify/" + vec.Name
		t.Run(vec.Name, func(t *testing.T) {
			h := http.Header{"X-Shopify-Hmac-Sha256": {vec.XShopifyHmacSHA256}}
			err := Verify(Config{Scheme: Shopify, Secrets: []string{vec.Secret}}, h, []byte(vec.Body), time.Unix(0, 0))
			checkVerdict(t, name, vec.ExpectValid, err)
		})
	}
}

// TestPeerVectorsTwilioDoesNotFit documents why Twilio cannot be a generic
// hmac source. Twilio's X-Twilio-Signature is base64 HMAC-SHA1 over the
// full URL Twilio requested followed by every form parameter's name and
// value sorted by name, concatenated without separators. The primitive
// (HMAC-SHA1, base64) is supported, but the signed content is neither the
// raw body nor headers: it needs the public URL (which a gateway behind a
// proxy does not see) and the form parameters decoded and re-ordered — a
// re-serialisation of the body, which this package never does. Supporting
// Twilio needs a dedicated scheme with the public URL in its configuration.
func TestPeerVectorsTwilioDoesNotFit(t *testing.T) {
	for _, vec := range testutil.LoadPeerVectors(t).Twilio {
		t.Run(vec.Name, func(t *testing.T) {
			// The vector is what its rule says (so the conclusion rests on
			// the right reading of it).
			names := make([]string, 0, len(vec.Params))
			for k := range vec.Params {
				names = append(names, k)
			}
			sort.Strings(names)
			content := vec.URL
			form := url.Values{}
			for _, k := range names {
				content += k + vec.Params[k]
				form.Set(k, vec.Params[k])
			}
			mac := hmac.New(sha1.New, []byte(vec.AuthToken))
			mac.Write([]byte(content))
			if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != vec.XTwilioSignature {
				t.Fatalf("twilio rule reproduces %q, vector has %q", got, vec.XTwilioSignature)
			}

			// The closest generic source — same header, algorithm and
			// encoding over the raw form body — does not verify it.
			c := Config{Scheme: HMAC, Secrets: []string{vec.AuthToken}, HMAC: &HMACConfig{
				Header: "X-Twilio-Signature", Algorithm: "sha1", Encoding: "base64",
			}}
			h := http.Header{"X-Twilio-Signature": {vec.XTwilioSignature}}
			err := Verify(c, h, []byte(form.Encode()), time.Unix(0, 0))
			if !errors.Is(err, webhook.ErrNoMatchingSignature) {
				t.Fatalf("generic hmac over the raw form body: %v, want ErrNoMatchingSignature (twilio does not fit)", err)
			}
		})
	}
}
