package testutil

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// PeerVector is one signature made by a peer library
// (webhook/testdata/peer-vectors.json); it holds the fields of every
// section, each section uses a subset.
type PeerVector struct {
	Name        string `json:"name"`
	Note        string `json:"note"`
	Secret      string `json:"secret"`
	MsgID       string `json:"msg_id"`
	Body        string `json:"body"`
	Timestamp   int64  `json:"timestamp"`
	VerifyAt    int64  `json:"verify_at"`
	ExpectValid bool   `json:"expect_valid"`

	SignedContent string `json:"signed_content"`

	// standard_webhooks_v1
	ExpectedSignature string `json:"expected_signature"`
	SignatureHeader   string `json:"signature_header"`
	// stripe_v1
	ExpectedHeader string `json:"expected_header"`
	Header         string `json:"header"`
	// github
	HeaderValue string `json:"header_value"`
	// slack_v0
	XSlackSignature string `json:"x_slack_signature"`
	// shopify
	XShopifyHmacSHA256 string `json:"x_shopify_hmac_sha256"`
	// twilio
	AuthToken        string            `json:"auth_token"`
	URL              string            `json:"url"`
	Params           map[string]string `json:"params"`
	XTwilioSignature string            `json:"x_twilio_signature"`
}

// PeerVectors are the sections of the peer vectors file.
type PeerVectors struct {
	Standard []PeerVector `json:"standard_webhooks_v1"`
	Stripe   []PeerVector `json:"stripe_v1"`
	GitHub   []PeerVector `json:"github"`
	Slack    []PeerVector `json:"slack_v0"`
	Shopify  []PeerVector `json:"shopify"`
	Twilio   []PeerVector `json:"twilio"`
}

// PeerVectorsPath is the file of signatures made by peer libraries
// (Stripe's, Standard Webhooks', Svix's and others'): the outbound signer
// (webhook) and the inbound gateway's schemes (internal/inbound/scheme)
// must agree with them byte for byte.
func PeerVectorsPath() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "webhook", "testdata", "peer-vectors.json")
}

// LoadPeerVectors reads PeerVectorsPath; a file that is missing, does not
// parse or has an empty section fails the test (not a skip: the vectors
// are the interoperability contract).
func LoadPeerVectors(t testing.TB) PeerVectors {
	t.Helper()
	p := PeerVectorsPath()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("peer vectors not readable: %v", err)
	}
	var pv PeerVectors
	if err := json.Unmarshal(raw, &pv); err != nil {
		t.Fatalf("parsing %s: %v", p, err)
	}
	for name, n := range map[string]int{
		"standard_webhooks_v1": len(pv.Standard), "stripe_v1": len(pv.Stripe), "github": len(pv.GitHub),
		"slack_v0": len(pv.Slack), "shopify": len(pv.Shopify), "twilio": len(pv.Twilio),
	} {
		if n == 0 {
			t.Fatalf("%s: section %s is empty", p, name)
		}
	}
	return pv
}
