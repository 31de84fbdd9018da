package interop

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v85/webhook"

	"github.com/herald-webhooks/herald/webhook"
)

// Edge cases where a verdict could differ between Herald and a peer
// library. Each row pins every implementation's verdict, so a change on
// either side shows up here; the test log marks the rows that differ
// (DISAGREEMENT). In most of them Herald is the stricter side: it rejects
// header forms a peer tolerates (a "+" before the timestamp, a second t,
// extra comma parts, more than 16 entries, a future timestamp for
// stripe-go). Two are not about strictness: stripe-go rejects a whole header
// for an unknown item holding a second "=", which Herald ignores; and when
// both webhook-* and svix-* headers are present, svix-go checks svix-* and
// Herald webhook-*. In no row does an implementation accept a MAC that does
// not match.

type verdicts map[string]bool // implementation -> accepted

func (v verdicts) String() string {
	var parts []string
	for _, k := range []string{"herald", "stripe-go", "standardwebhooks", "svix"} {
		if ok, found := v[k]; found {
			parts = append(parts, fmt.Sprintf("%s=%v", k, ok))
		}
	}
	return strings.Join(parts, " ")
}

func checkVerdicts(t *testing.T, name string, got, want verdicts) {
	t.Helper()
	for impl, w := range want {
		if g, ok := got[impl]; !ok || g != w {
			t.Errorf("%s: %s accepted=%v, want %v (all: %v)", name, impl, g, w, got)
		}
	}
	differ := false
	for _, g := range got {
		if g != got["herald"] {
			differ = true
		}
	}
	if differ {
		t.Logf("DISAGREEMENT %-58s %v", name, got)
	} else {
		t.Logf("agreement    %-58s %v", name, got)
	}
}

func TestStripeSchemeEdgeCases(t *testing.T) {
	secret := newSecret(t)
	body := bodies()["herald event"]
	now := time.Now().Unix()
	sig := func(ts int64) string { return webhook.SignHerald(secret, ts, body) }
	T := itoa(now)
	many := make([]string, 16)
	for i := range many {
		many[i] = "v1=" + strings.Repeat("0", 64)
	}

	for _, tc := range []struct {
		name   string
		header string
		want   verdicts
	}{
		{"plain", "t=" + T + ",v1=" + sig(now), verdicts{"herald": true, "stripe-go": true}},
		{"future +1h (stripe-go checks only the past)", "t=" + itoa(now+3600) + ",v1=" + sig(now+3600), verdicts{"herald": false, "stripe-go": true}},
		{"two t items, the last one signed", "t=" + itoa(now-1000) + ",t=" + T + ",v1=" + sig(now), verdicts{"herald": false, "stripe-go": true}},
		{"t with a plus sign", "t=+" + T + ",v1=" + sig(now), verdicts{"herald": false, "stripe-go": true}},
		{"17 signature entries, the last valid", "t=" + T + "," + strings.Join(many, ",") + ",v1=" + sig(now), verdicts{"herald": false, "stripe-go": true}},
		{"unknown item with a second '=' (stripe-go stricter)", "t=" + T + ",v1=" + sig(now) + ",v0=a=b", verdicts{"herald": true, "stripe-go": false}},
		{"t with a leading zero (Herald: the signed text must be the canonical decimal)", "t=0" + T + ",v1=" + sig(now), verdicts{"herald": false, "stripe-go": true}},
		{"uppercase hex", "t=" + T + ",v1=" + strings.ToUpper(sig(now)), verdicts{"herald": true, "stripe-go": true}},
		{"short v1 before the valid one", "t=" + T + ",v1=abcd,v1=" + sig(now), verdicts{"herald": true, "stripe-go": true}},
		{"v0 only", "t=" + T + ",v0=" + sig(now), verdicts{"herald": false, "stripe-go": false}},
		{"space after the comma (Herald accepts it, as Stripe's Ruby library does)", "t=" + T + ", v1=" + sig(now), verdicts{"herald": true, "stripe-go": false}},
		{"no t", "v1=" + sig(now), verdicts{"herald": false, "stripe-go": false}},
		{"6 min old", "t=" + itoa(now-360) + ",v1=" + sig(now-360), verdicts{"herald": false, "stripe-go": false}},
		{"signature of another timestamp", "t=" + T + ",v1=" + sig(now-1), verdicts{"herald": false, "stripe-go": false}},
	} {
		got := verdicts{
			"herald":    (&webhook.Verifier{Secrets: []string{secret}}).VerifyHerald(tc.header, body) == nil,
			"stripe-go": stripe.ValidatePayloadWithTolerance(body, tc.header, secret, stripe.DefaultTolerance) == nil,
		}
		checkVerdicts(t, "stripe scheme: "+tc.name, got, tc.want)
	}
}

func TestStandardSchemeEdgeCases(t *testing.T) {
	secret := newSecret(t)
	body := bodies()["herald event"]
	now := time.Now().Unix()
	T := itoa(now)
	const id = "msg_1"
	sigOf := func(id string, ts int64) string {
		s, err := webhook.SignStandard(secret, id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := sigOf(id, now)
	raw, _ := base64.StdEncoding.DecodeString(good)
	// Non-canonical: the last base64 character with non-zero padding bits
	// decodes (leniently) to the same 32 bytes.
	nonCanon := good[:42] + string(nextB64(good[42])) + "="
	hexSig := hex.EncodeToString(raw)
	many := strings.Repeat("v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" ", 16)

	hdr := func(id, ts, sig string) http.Header {
		return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
	}
	mixed := func(webhookSig, svixSig string) http.Header {
		h := hdr(id, T, webhookSig)
		h.Set("Svix-Id", id)
		h.Set("Svix-Timestamp", T)
		h.Set("Svix-Signature", svixSig)
		return h
	}
	bad := base64.StdEncoding.EncodeToString(make([]byte, 32))

	for _, tc := range []struct {
		name string
		h    http.Header
		want verdicts
	}{
		{"plain", hdr(id, T, "v1,"+good), verdicts{"herald": true, "standardwebhooks": true, "svix": true}},
		{"timestamp with a plus sign", hdr(id, "+"+T, "v1,"+good), verdicts{"herald": false, "standardwebhooks": true, "svix": true}},
		{"entry with a third comma part", hdr(id, T, "v1,"+good+",x"), verdicts{"herald": false, "standardwebhooks": true, "svix": true}},
		{"17 entries, the last valid", hdr(id, T, many+"v1,"+good), verdicts{"herald": false, "standardwebhooks": true, "svix": true}},
		{"valid webhook-*, invalid svix-*", mixed("v1,"+good, "v1,"+bad), verdicts{"herald": true, "standardwebhooks": true, "svix": false}},
		{"invalid webhook-*, valid svix-*", mixed("v1,"+bad, "v1,"+good), verdicts{"herald": false, "standardwebhooks": false, "svix": true}},
		{"timestamp with a leading zero (Herald: not the canonical decimal)", hdr(id, "0"+T, "v1,"+good), verdicts{"herald": false, "standardwebhooks": true, "svix": true}},
		{"non-canonical base64", hdr(id, T, "v1,"+nonCanon), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
		{"unpadded base64", hdr(id, T, "v1,"+strings.TrimRight(good, "=")), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
		{"hex instead of base64", hdr(id, T, "v1,"+hexSig), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
		{"v1a entry only", hdr(id, T, "v1a,"+good), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
		{"double space between entries", hdr(id, T, "v1,"+bad+"  v1,"+good), verdicts{"herald": true, "standardwebhooks": true, "svix": true}},
		{"timestamp with trailing letters", hdr(id, T+"abc", "v1,"+good), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
		{"id changed", hdr("msg_2", T, "v1,"+good), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
		{"6 min ahead", hdr(id, itoa(now+360), "v1,"+sigOf(id, now+360)), verdicts{"herald": false, "standardwebhooks": false, "svix": false}},
	} {
		got := verdicts{"herald": heraldVerify(tc.h, body, secret) == nil}
		for _, p := range stdPeers() {
			got[p.name] = mustPeer(t, p, secret).Verify(body, tc.h) == nil
		}
		checkVerdicts(t, "standard scheme: "+tc.name, got, tc.want)
	}
}

// nextB64 returns the base64 character whose value differs from c's in the
// lowest bit. The 43rd character of a 32-byte encoding carries 4 data bits
// and 2 padding bits, so flipping its lowest bit gives a non-canonical
// encoding of the same bytes.
func nextB64(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(alphabet, c)
	return alphabet[i^1]
}
