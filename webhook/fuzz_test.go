package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var sentinels = []error{ErrMissingSignature, ErrMalformedHeader, ErrTimestampTooOld, ErrTimestampTooNew, ErrNoMatchingSignature, ErrInvalidSecret}

// assertOneSentinel checks the package promise that every error wraps
// exactly one sentinel.
func assertOneSentinel(t *testing.T, what string, err error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s: error %v wraps %d sentinels, want 1", what, err, n)
	}
}

func FuzzParseSignatureHeader(f *testing.F) {
	hexA := strings.Repeat("ab", 32)
	for _, seed := range []string{
		"",
		"t=1700000000,v1=" + hexA,
		"t=1700000000,v1=" + strings.ToUpper(hexA) + ",v1=" + hexA,
		"t=1700000000,v0=deadbeef,v1=" + hexA + ",x=1",
		"t=1700000000,v0=" + hexA,
		"t=-1,v1=" + hexA,
		"t=+1,v1=" + hexA,
		"t=99999999999999999999,v1=" + hexA,
		"t=1,t=2,v1=" + hexA,
		"v1=" + hexA,
		"t=1,v1=" + hexA + ",",
		"t=1,,v1=" + hexA,
		"t=1,v1=zz",
		"t=1,=",
		"t=1,v1=" + hexA + "=",
		"t=1" + strings.Repeat(",v1="+hexA, 17),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ts, sigs, err := ParseSignatureHeader(v)
		if err != nil {
			assertOneSentinel(t, "ParseSignatureHeader", err)
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v is not ErrMalformedHeader", err)
			}
			if ts != 0 || sigs != nil {
				t.Fatalf("error with results %d, %x", ts, sigs)
			}
			return
		}
		if len(v) > maxHeaderLen {
			t.Fatalf("accepted a %d-byte header", len(v))
		}
		if ts < 0 {
			t.Fatalf("negative timestamp %d", ts)
		}
		if len(sigs) == 0 || len(sigs) > maxEntries {
			t.Fatalf("%d signatures", len(sigs))
		}
		for _, sig := range sigs {
			if len(sig) != 32 {
				t.Fatalf("signature of %d bytes", len(sig))
			}
			// Each signature came from a v1 item of the header.
			if h := hex.EncodeToString(sig); !strings.Contains(strings.ToLower(v), "v1="+h) {
				t.Fatalf("signature %s not in header %q", h, v)
			}
		}
		// Re-formatting what was parsed parses to the same thing.
		var b strings.Builder
		b.WriteString("t=" + strconv.FormatInt(ts, 10))
		for _, sig := range sigs {
			b.WriteString(",v1=" + hex.EncodeToString(sig))
		}
		ts2, sigs2, err := ParseSignatureHeader(b.String())
		if err != nil || ts2 != ts || len(sigs2) != len(sigs) {
			t.Fatalf("re-parse of %q: %d, %d sigs, %v", b.String(), ts2, len(sigs2), err)
		}
	})
}

func FuzzParseStandardSignatures(f *testing.F) {
	b64 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xab}, 32))
	for _, seed := range []string{
		"",
		" ",
		"v1," + b64,
		"v1," + b64 + " v1," + b64,
		"v1a,AAAA v1," + b64,
		"v2," + b64,
		"v1,",
		"v1",
		"v1,,",
		"v1," + b64 + "," + b64,
		"v1," + strings.TrimRight(b64, "="),
		"v1," + b64[:42] + "x=",
		"v1," + b64[:20] + "\n" + b64[20:],
		"  v1," + b64 + "  ",
		strings.Repeat("v1,"+b64+" ", 17),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sigs, err := ParseStandardSignatures(v)
		if err != nil {
			assertOneSentinel(t, "ParseStandardSignatures", err)
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v is not ErrMalformedHeader", err)
			}
			if sigs != nil {
				t.Fatalf("error with results %x", sigs)
			}
			return
		}
		if len(v) > maxHeaderLen {
			t.Fatalf("accepted a %d-byte header", len(v))
		}
		if len(sigs) == 0 || len(sigs) > maxEntries {
			t.Fatalf("%d signatures", len(sigs))
		}
		for _, sig := range sigs {
			if len(sig) != 32 {
				t.Fatalf("signature of %d bytes", len(sig))
			}
			// Only the canonical encoding is accepted, so the decoded
			// signature re-encodes to text that is in the header.
			if e := "v1," + base64.StdEncoding.EncodeToString(sig); !strings.Contains(v, e) {
				t.Fatalf("signature %s not in header %q", e, v)
			}
		}
	})
}

// FuzzVerify signs arbitrary messages and checks that verification of the
// result always succeeds (and fails once the body changes), and that
// verifying arbitrary header values never panics and always fails with
// exactly one sentinel error.
func FuzzVerify(f *testing.F) {
	good := http.Header{}
	s, _ := NewSigner(testSecret)
	s.Sign(good, testMsgID, time.Unix(testTS, 0), testBody)
	f.Add([]byte("key"), testMsgID, testTS, testBody,
		good.Get(HeaderSignature), good.Get(HeaderWebhookID), good.Get(HeaderWebhookTimestamp), good.Get(HeaderWebhookSignature))
	f.Add([]byte{}, "", int64(0), []byte{}, "", "", "", "")
	f.Add([]byte{0}, "msg.with.dots", int64(-1), []byte("\x00\xff"), "t=1,v1=00", "id", "1", "v1,AAAA")
	f.Add(bytes.Repeat([]byte{7}, 100), "evt_\u00e9", int64(1<<62), []byte(strings.Repeat("{}", 600)),
		"t=1700000000,v1="+strings.Repeat("0", 64), "evt", "99999999999999999999", "v1a,x v2,y")
	f.Fuzz(func(t *testing.T, keySeed []byte, msgID string, ts int64, body []byte, xsig, wid, wts, wsig string) {
		// Normalize the inputs into a valid signing request.
		if len(keySeed) == 0 {
			keySeed = []byte{0}
		}
		if len(keySeed) > 64 {
			keySeed = keySeed[:64]
		}
		secret := SecretPrefix + base64.StdEncoding.EncodeToString(keySeed)
		if msgID == "" {
			msgID = "evt_0"
		}
		if len(msgID) > 256 {
			msgID = msgID[:256]
		}
		ts &= 1<<40 - 1 // 1970 … year 36812: representable by time.Time
		now := fixedNow(ts)

		signer, err := NewSigner(secret, testSecret)
		if err != nil {
			t.Fatalf("NewSigner(%q): %v", secret, err)
		}
		h := http.Header{}
		signer.Sign(h, msgID, time.Unix(ts, 0), body)
		for _, secrets := range [][]string{{secret}, {testSecret}, {testSecret2, secret}} {
			v := &Verifier{Secrets: secrets, Now: now}
			if err := v.Verify(h, body); err != nil {
				t.Fatalf("round trip with %d secrets: %v (headers %q)", len(secrets), err, h)
			}
		}
		v := &Verifier{Secrets: []string{secret}, Now: now}
		tampered := append(append([]byte(nil), body...), '!')
		if err := v.Verify(h, tampered); !errors.Is(err, ErrNoMatchingSignature) {
			t.Fatalf("tampered body: %v, want ErrNoMatchingSignature", err)
		}

		// Arbitrary header values: no panic, one sentinel on failure.
		for _, hdr := range []http.Header{
			{HeaderSignature: {xsig}},
			{HeaderWebhookID: {wid}, HeaderWebhookTimestamp: {wts}, HeaderWebhookSignature: {wsig}},
			{"Svix-Id": {wid}, "Svix-Timestamp": {wts}, "Svix-Signature": {wsig}},
			{HeaderSignature: {xsig}, HeaderWebhookID: {wid}, HeaderWebhookTimestamp: {wts}, HeaderWebhookSignature: {wsig}},
		} {
			if err := v.Verify(hdr, body); err != nil {
				assertOneSentinel(t, "Verify", err)
			}
		}
		if err := v.VerifyHerald(xsig, body); err != nil {
			assertOneSentinel(t, "VerifyHerald", err)
		}
		if err := v.VerifyStandard(wid, wts, wsig, body); err != nil {
			assertOneSentinel(t, "VerifyStandard", err)
		}
	})
}
