package interop

import (
	"crypto/rand"
	"encoding/base64"
	"math/big"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// officialSecret is the Standard Webhooks test-vector secret; the other
// secrets are fresh for each run.
const officialSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func newSecret(t testing.TB) string {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// heraldSign signs one attempt with Herald's Signer, as the sender does.
func heraldSign(t testing.TB, msgID string, at time.Time, body []byte, secrets ...string) http.Header {
	t.Helper()
	s, err := webhook.NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	s.Sign(h, msgID, at, body)
	return h
}

// heraldVerify verifies with Herald's Verifier at the current time.
func heraldVerify(h http.Header, body []byte, secrets ...string) error {
	v := &webhook.Verifier{Secrets: secrets}
	return v.Verify(h, body)
}

// bodies are the payloads every direction is checked with: JSON as Herald
// sends it, whitespace and unicode that must not be normalized, an empty
// body, and a large one.
func bodies() map[string][]byte {
	big := make([]byte, 0, 70<<10)
	big = append(big, `{"id":"evt_big","data":"`...)
	for len(big) < 64<<10 {
		big = append(big, "abcdefghijklmnopqrstuvwxyz0123456789"...)
	}
	big = append(big, `"}`...)
	return map[string][]byte{
		"herald event": []byte(`{"id":"evt_2ZyH9q","type":"file.extraction.completed","tenant":"acme","occurred_at":"2025-01-01T00:00:00Z","data":{"file_id":"file_9","version":3}}`),
		"whitespace":   []byte("{\n  \"id\" : \"evt_1\",\t\"type\":\"a.b\"\r\n}\n"),
		"unicode":      []byte(`{"id":"evt_ü","name":"Zoë – 東京 🚀","escaped":"\u00e9"}`),
		"empty":        {},
		"64 KiB":       big,
	}
}

func randInt(t testing.TB, n int64) int64 {
	t.Helper()
	v, err := rand.Int(rand.Reader, big.NewInt(n))
	if err != nil {
		t.Fatal(err)
	}
	return v.Int64()
}

func randBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func randID(t testing.TB) string {
	return "evt_" + base64.RawURLEncoding.EncodeToString(randBytes(t, 1+int(randInt(t, 20))))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
