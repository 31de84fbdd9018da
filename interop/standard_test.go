package interop

import (
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/herald-webhooks/herald/webhook"
)

// The peers of the Standard Webhooks scheme: the reference Go library
// (github.com/standard-webhooks/standard-webhooks/libraries v0.0.1, package
// standardwebhooks in libraries/go) and Svix's (github.com/svix/svix-webhooks
// v1.44.0, package svix in go/). Both take "whsec_<base64>" secrets, sign
// with Sign(msgID, time, payload) -> "v1,<base64>" and verify http.Header
// with their own clock and a 5-minute window in both directions. Svix reads
// svix-* headers first and falls back to webhook-*.

type stdPeer interface {
	Verify(payload []byte, headers http.Header) error
	Sign(msgID string, timestamp time.Time, payload []byte) (string, error)
}

type peerLib struct {
	name string
	new  func(secret string) (stdPeer, error)
}

func stdPeers() []peerLib {
	return []peerLib{
		{"standardwebhooks", func(s string) (stdPeer, error) { return standardwebhooks.NewWebhook(s) }},
		{"svix", func(s string) (stdPeer, error) { return svix.NewWebhook(s) }},
	}
}

func mustPeer(t testing.TB, p peerLib, secret string) stdPeer {
	t.Helper()
	wh, err := p.new(secret)
	if err != nil {
		t.Fatalf("%s.NewWebhook: %v", p.name, err)
	}
	return wh
}

// svixNames renames webhook-* headers to svix-*.
func svixNames(h http.Header) http.Header {
	return http.Header{
		"Svix-Id":        {h.Get("webhook-id")},
		"Svix-Timestamp": {h.Get("webhook-timestamp")},
		"Svix-Signature": {h.Get("webhook-signature")},
	}
}

func TestPeersVerifyHerald(t *testing.T) {
	secret := newSecret(t)
	for _, p := range stdPeers() {
		for name, body := range bodies() {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				for _, s := range []string{secret, officialSecret, strings.TrimPrefix(secret, webhook.SecretPrefix)} {
					wh := mustPeer(t, p, s)
					h := heraldSign(t, "evt_2ZyH9q", time.Now(), body, s)
					if err := wh.Verify(body, h); err != nil {
						t.Fatalf("%s rejects Herald's headers %v: %v", p.name, h, err)
					}
					if p.name == "svix" {
						if err := wh.Verify(body, svixNames(h)); err != nil {
							t.Fatalf("svix rejects Herald's signature under svix-* names: %v", err)
						}
					}
					if err := wh.Verify(append(append([]byte(nil), body...), ' '), h); err == nil {
						t.Fatalf("%s accepts a changed body", p.name)
					}
					forged := h.Clone()
					forged.Set("webhook-id", "evt_other")
					if err := wh.Verify(body, forged); err == nil {
						t.Fatalf("%s accepts a changed webhook-id", p.name)
					}
				}
			})
		}
	}
}

func TestHeraldVerifiesPeers(t *testing.T) {
	secret := newSecret(t)
	for _, p := range stdPeers() {
		for name, body := range bodies() {
			t.Run(p.name+"/"+name, func(t *testing.T) {
				for _, s := range []string{secret, officialSecret} {
					wh := mustPeer(t, p, s)
					now := time.Now()
					sig, err := wh.Sign("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, body)
					if err != nil {
						t.Fatal(err)
					}
					h := http.Header{
						"Webhook-Id":        {"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"},
						"Webhook-Timestamp": {itoa(now.Unix())},
						"Webhook-Signature": {sig},
					}
					if err := heraldVerify(h, body, s); err != nil {
						t.Fatalf("Herald rejects %s's signature %q: %v", p.name, sig, err)
					}
					if err := heraldVerify(svixNames(h), body, s); err != nil {
						t.Fatalf("Herald rejects %s's signature under svix-* names: %v", p.name, err)
					}
					if err := heraldVerify(h, append(append([]byte(nil), body...), 'x'), s); err == nil {
						t.Fatal("Herald accepts a changed body")
					}
				}
			})
		}
	}
}

// Byte-for-byte: for random bodies (any bytes), ids, timestamps and
// secrets, every implementation produces the same webhook-signature.
func TestStandardByteForByte(t *testing.T) {
	for i := 0; i < 300; i++ {
		secret := newSecret(t)
		body := randBytes(t, int(randInt(t, 2048)))
		id := randID(t)
		ts := time.Unix(randInt(t, 1<<40), 0)
		ours, err := webhook.SignStandard(secret, id, ts.Unix(), body)
		if err != nil {
			t.Fatal(err)
		}
		h := heraldSign(t, id, ts, body, secret)
		if got := h.Get("webhook-signature"); got != "v1,"+ours {
			t.Fatalf("case %d: Signer %q, SignStandard v1,%s", i, got, ours)
		}
		for _, p := range stdPeers() {
			theirs, err := mustPeer(t, p, secret).Sign(id, ts, body)
			if err != nil {
				t.Fatal(err)
			}
			if theirs != "v1,"+ours {
				t.Fatalf("case %d: %s signs %q, Herald v1,%s", i, p.name, theirs, ours)
			}
		}
	}
}

// Rotation: Herald signs with two secrets (two space-separated v1 entries);
// each peer holding either secret verifies. Peer signatures with either
// secret verify with Herald holding both.
func TestStandardRotation(t *testing.T) {
	oldSecret, newSecretV := newSecret(t), newSecret(t)
	body := bodies()["herald event"]
	h := heraldSign(t, "evt_rot", time.Now(), body, newSecretV, oldSecret)
	if n := len(strings.Fields(h.Get("webhook-signature"))); n != 2 {
		t.Fatalf("rotation header has %d entries", n)
	}
	for _, p := range stdPeers() {
		for name, s := range map[string]string{"old": oldSecret, "new": newSecretV} {
			wh := mustPeer(t, p, s)
			if err := wh.Verify(body, h); err != nil {
				t.Errorf("%s holding the %s secret rejects Herald's rotation headers: %v", p.name, name, err)
			}
			now := time.Now()
			sig, err := wh.Sign("evt_rot", now, body)
			if err != nil {
				t.Fatal(err)
			}
			ph := http.Header{"Webhook-Id": {"evt_rot"}, "Webhook-Timestamp": {itoa(now.Unix())}, "Webhook-Signature": {sig}}
			if err := heraldVerify(ph, body, newSecretV, oldSecret); err != nil {
				t.Errorf("Herald holding both secrets rejects %s signing with the %s one: %v", p.name, name, err)
			}
		}
		if err := mustPeer(t, p, newSecret(t)).Verify(body, h); err == nil {
			t.Errorf("%s accepts a third secret", p.name)
		}
	}
}

// The replay window agrees: both directions, 5 minutes.
func TestStandardReplayWindow(t *testing.T) {
	secret := newSecret(t)
	body := bodies()["herald event"]
	for _, tc := range []struct {
		name  string
		shift time.Duration
		ok    bool
	}{
		{"6 min old", -6 * time.Minute, false},
		{"4 min old", -4 * time.Minute, true},
		{"4 min ahead", 4 * time.Minute, true},
		{"6 min ahead", 6 * time.Minute, false},
	} {
		h := heraldSign(t, "evt_1", time.Now().Add(tc.shift), body, secret)
		if err := heraldVerify(h, body, secret); (err == nil) != tc.ok {
			t.Errorf("%s: Herald verdict %v, want ok=%v", tc.name, err, tc.ok)
		}
		for _, p := range stdPeers() {
			if err := mustPeer(t, p, secret).Verify(body, h); (err == nil) != tc.ok {
				t.Errorf("%s: %s verdict %v, want ok=%v", tc.name, p.name, err, tc.ok)
			}
		}
	}
}
