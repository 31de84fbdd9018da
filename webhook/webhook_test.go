package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fixed material for the tests below. testSecret is a valid two-scheme
// secret (the Standard Webhooks official test vector's).
const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecret2 = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	testMsgID   = "evt_2ZyH9q"
	testTS      = int64(1700000000)
)

var testBody = []byte(`{"id":"evt_2ZyH9q","type":"file.extraction.completed","data":{"version":3}}`)

func mustSigner(t testing.TB, secrets ...string) *Signer {
	t.Helper()
	s, err := NewSigner(secrets...)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	return s
}

func signed(t testing.TB, secrets ...string) http.Header {
	t.Helper()
	h := http.Header{}
	mustSigner(t, secrets...).Sign(h, testMsgID, time.Unix(testTS, 0), testBody)
	return h
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, SecretPrefix) || len(s) != len(SecretPrefix)+44 {
			t.Fatalf("NewSecret() = %q: want whsec_ + 44 base64 characters", s)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
		if err != nil || len(key) != 32 {
			t.Fatalf("NewSecret() = %q: key %d bytes, err %v", s, len(key), err)
		}
		if err := ValidateSecret(s); err != nil {
			t.Fatalf("ValidateSecret(NewSecret()) = %v", err)
		}
		if seen[s] {
			t.Fatalf("NewSecret repeated %q", s)
		}
		seen[s] = true
	}
}

func TestValidateSecret(t *testing.T) {
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{testSecret, true},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true}, // prefix optional (Standard Webhooks)
		{"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", true},
		{"", false},
		{"whsec_", false},
		{"whsec_test_secret", false}, // Stripe-style: fine for VerifyHerald, not base64
		{"whsec_abc", false},         // unpadded
		{"whsec_====", false},
		{"whsec_MfKQ9r8GKYqrTwjU\nPD8ILPZIo2LaLaSw", false},
		{" whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ", false},
	} {
		err := ValidateSecret(tc.secret)
		if tc.ok && err != nil {
			t.Errorf("ValidateSecret(%q) = %v, want nil", tc.secret, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("ValidateSecret(%q) = %v, want ErrInvalidSecret", tc.secret, err)
		}
		if key := strings.TrimPrefix(tc.secret, SecretPrefix); err != nil && len(key) > 4 && strings.Contains(err.Error(), key) {
			t.Errorf("ValidateSecret error %q contains the secret", err)
		}
	}
}

func TestNewSignerErrors(t *testing.T) {
	for _, secrets := range [][]string{
		nil,
		{""},
		{testSecret, "whsec_test_secret"},
		make([]string, maxEntries+1),
	} {
		if _, err := NewSigner(secrets...); !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("NewSigner(%q) = %v, want ErrInvalidSecret", secrets, err)
		}
	}
}

func TestSignHeaders(t *testing.T) {
	h := signed(t, testSecret)
	want := "t=1700000000,v1=" + SignHerald(testSecret, testTS, testBody)
	if got := h.Get("x-signature"); got != want {
		t.Errorf("X-Signature = %q, want %q", got, want)
	}
	std, err := SignStandard(testSecret, testMsgID, testTS, testBody)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("webhook-signature"); got != "v1,"+std {
		t.Errorf("webhook-signature = %q, want %q", got, "v1,"+std)
	}
	if got := h.Get("webhook-id"); got != testMsgID {
		t.Errorf("webhook-id = %q", got)
	}
	if got := h.Get("webhook-timestamp"); got != "1700000000" {
		t.Errorf("webhook-timestamp = %q", got)
	}
	// Sub-second precision is truncated; earlier values are replaced.
	mustSigner(t, testSecret).Sign(h, testMsgID, time.Unix(testTS, 999_999_999), testBody)
	if got := h.Values(HeaderSignature); len(got) != 1 || got[0] != want {
		t.Errorf("re-signed X-Signature = %q, want [%q]", got, want)
	}
	if len(h) != 4 {
		t.Errorf("Sign set %d headers, want 4: %v", len(h), h)
	}
}

func TestSignHeraldHexLowercase(t *testing.T) {
	sig := SignHerald(testSecret, testTS, testBody)
	if len(sig) != 64 || strings.ToLower(sig) != sig {
		t.Errorf("SignHerald = %q, want 64 lowercase hex digits", sig)
	}
}

func TestSignStandardInvalidSecret(t *testing.T) {
	if _, err := SignStandard("whsec_test_secret", testMsgID, testTS, testBody); !errors.Is(err, ErrInvalidSecret) {
		t.Errorf("SignStandard with non-base64 secret = %v, want ErrInvalidSecret", err)
	}
}

func TestRotation(t *testing.T) {
	h := signed(t, testSecret2, testSecret) // new secret first, old still active

	xs := h.Get(HeaderSignature)
	if n := strings.Count(xs, ",v1="); n != 2 {
		t.Errorf("X-Signature %q has %d v1 entries, want 2", xs, n)
	}
	wantX := fmt.Sprintf("t=%d,v1=%s,v1=%s", testTS, SignHerald(testSecret2, testTS, testBody), SignHerald(testSecret, testTS, testBody))
	if xs != wantX {
		t.Errorf("X-Signature = %q, want %q", xs, wantX)
	}
	ws := h.Get(HeaderWebhookSignature)
	entries := strings.Split(ws, " ")
	if len(entries) != 2 {
		t.Fatalf("webhook-signature %q has %d entries, want 2", ws, len(entries))
	}
	for i, secret := range []string{testSecret2, testSecret} {
		sig, _ := SignStandard(secret, testMsgID, testTS, testBody)
		if entries[i] != "v1,"+sig {
			t.Errorf("webhook-signature entry %d = %q, want %q", i, entries[i], "v1,"+sig)
		}
	}

	now := fixedNow(testTS + 5)
	for _, secrets := range [][]string{{testSecret}, {testSecret2}, {testSecret, testSecret2}} {
		v := &Verifier{Secrets: secrets, Now: now}
		if err := v.Verify(h, testBody); err != nil {
			t.Errorf("Verifier%q.Verify = %v", secrets, err)
		}
		if err := v.VerifyHerald(xs, testBody); err != nil {
			t.Errorf("Verifier%q.VerifyHerald = %v", secrets, err)
		}
		if err := v.VerifyStandard(testMsgID, "1700000000", ws, testBody); err != nil {
			t.Errorf("Verifier%q.VerifyStandard = %v", secrets, err)
		}
	}
	other, _ := NewSecret()
	v := &Verifier{Secrets: []string{other}, Now: now}
	if err := v.Verify(h, testBody); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("third secret: Verify = %v, want ErrNoMatchingSignature", err)
	}
}

func TestReplayWindow(t *testing.T) {
	h := signed(t, testSecret)
	for _, tc := range []struct {
		name      string
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"same second", time.Unix(testTS, 0), 0, nil},
		{"exactly 300 s old", time.Unix(testTS+300, 0), 0, nil},
		// The clock is truncated to seconds (as npm standardwebhooks and
		// Stripe's libraries do), so 300.9 s is still 300 s.
		{"300.9 s old", time.Unix(testTS+300, 900_000_000), 0, nil},
		{"301 s old", time.Unix(testTS+301, 0), 0, ErrTimestampTooOld},
		{"exactly 300 s early", time.Unix(testTS-300, 0), 0, nil},
		{"301 s early", time.Unix(testTS-301, 0), 0, ErrTimestampTooNew},
		// Herald deliberately differs from Stripe's libraries here (they
		// accept any future timestamp): see docs/contract.md "replay window" and
		// peer vector stripe_v1/future-1h.
		{"one hour early", time.Unix(testTS-3600, 0), 0, ErrTimestampTooNew},
		{"custom tolerance ok", time.Unix(testTS+10, 0), 10 * time.Second, nil},
		{"custom tolerance old", time.Unix(testTS+11, 0), 10 * time.Second, ErrTimestampTooOld},
		{"sub-second tolerance rounds down", time.Unix(testTS+2, 0), 1500 * time.Millisecond, ErrTimestampTooOld},
		{"negative tolerance means default", time.Unix(testTS+300, 0), -time.Second, nil},
		{"clock before 1970", time.Unix(-1<<40, 0), 0, ErrTimestampTooNew},
		{"far future clock", time.Unix(1<<40, 0), 0, ErrTimestampTooOld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{Secrets: []string{testSecret}, Tolerance: tc.tolerance, Now: func() time.Time { return tc.now }}
			if err := v.Verify(h, testBody); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	// Nil Now uses the real clock.
	h = http.Header{}
	mustSigner(t, testSecret).Sign(h, testMsgID, time.Now(), testBody)
	if err := (&Verifier{Secrets: []string{testSecret}}).Verify(h, testBody); err != nil {
		t.Errorf("Verify with time.Now: %v", err)
	}
}

func TestTimestampExtremes(t *testing.T) {
	v := &Verifier{Secrets: []string{testSecret}, Now: fixedNow(testTS)}
	maxTS := strconv.FormatInt(1<<63-1, 10)
	for _, tc := range []struct {
		header string
		want   error
	}{
		{"t=" + maxTS + ",v1=" + strings.Repeat("0", 64), ErrTimestampTooNew},
		{"t=0,v1=" + strings.Repeat("0", 64), ErrTimestampTooOld},
		{"t=9223372036854775808,v1=" + strings.Repeat("0", 64), ErrMalformedHeader},
		{"t=00000000000000000001,v1=" + strings.Repeat("0", 64), ErrMalformedHeader},
	} {
		if err := v.VerifyHerald(tc.header, testBody); !errors.Is(err, tc.want) {
			t.Errorf("VerifyHerald(%.40q…) = %v, want %v", tc.header, err, tc.want)
		}
	}
	// A leading zero is refused (issue 13 point 9): the signed string is
	// the timestamp's exact text, and Herald recomputes it from the number.
	hdr := "t=0" + strconv.FormatInt(testTS, 10) + ",v1=" + SignHerald(testSecret, testTS, testBody)
	if err := v.VerifyHerald(hdr, testBody); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("leading zero: %v; want ErrMalformedHeader", err)
	}
}

// TestBadInput covers every class of bad input with the exact sentinel.
func TestBadInput(t *testing.T) {
	good := signed(t, testSecret)
	goodX := good.Get(HeaderSignature)
	goodHex := SignHerald(testSecret, testTS, testBody)
	goodStd := good.Get(HeaderWebhookSignature)
	ts := strconv.FormatInt(testTS, 10)
	now := fixedNow(testTS)
	okV := &Verifier{Secrets: []string{testSecret}, Now: now}

	with := func(mod func(h http.Header)) http.Header {
		h := good.Clone()
		mod(h)
		return h
	}
	herald := func(v string) http.Header { return http.Header{HeaderSignature: {v}} }
	standard := func(id, ts, sig string) http.Header {
		return http.Header{HeaderWebhookID: {id}, HeaderWebhookTimestamp: {ts}, HeaderWebhookSignature: {sig}}
	}
	manyV1 := "t=" + ts + strings.Repeat(",v1="+goodHex, maxEntries+1)
	manyStd := strings.TrimSpace(strings.Repeat(strings.SplitN(goodStd, " ", 2)[0]+" ", maxEntries+1))

	for _, tc := range []struct {
		name string
		v    *Verifier
		h    http.Header
		body []byte
		want error
	}{
		// Missing.
		{"no headers", okV, http.Header{}, testBody, ErrMissingSignature},
		{"empty X-Signature only", okV, herald(""), testBody, ErrMissingSignature},
		{"webhook-signature missing", okV, with(func(h http.Header) { h.Del(HeaderSignature); h.Del(HeaderWebhookSignature) }), testBody, ErrMissingSignature},
		{"webhook-id missing", okV, with(func(h http.Header) { h.Del(HeaderSignature); h.Del(HeaderWebhookID) }), testBody, ErrMissingSignature},
		{"webhook-timestamp missing", okV, with(func(h http.Header) { h.Del(HeaderWebhookTimestamp) }), testBody, ErrMissingSignature},

		// Malformed t.
		{"no t", okV, herald("v1=" + goodHex), testBody, ErrMalformedHeader},
		{"empty t", okV, herald("t=,v1=" + goodHex), testBody, ErrMalformedHeader},
		{"signed t", okV, herald("t=+" + ts + ",v1=" + goodHex), testBody, ErrMalformedHeader},
		{"negative t", okV, herald("t=-" + ts + ",v1=" + goodHex), testBody, ErrMalformedHeader},
		// Optional whitespace around "," and "=" (issue 13 point 9).
		{"t with space", okV, herald("t= " + ts + ",v1=" + goodHex), testBody, nil},
		{"spaces around , and =", okV, herald("t = " + ts + " , v1 =\t" + goodHex + " "), testBody, nil},
		{"t with a leading zero", okV, herald("t=0" + ts + ",v1=" + goodHex), testBody, ErrMalformedHeader},
		{"fractional t", okV, herald("t=" + ts + ".5,v1=" + goodHex), testBody, ErrMalformedHeader},
		{"t overflows int64", okV, herald("t=99999999999999999999,v1=" + goodHex), testBody, ErrMalformedHeader},
		{"duplicate t", okV, herald("t=" + ts + ",t=" + ts + ",v1=" + goodHex), testBody, ErrMalformedHeader},
		{"item without =", okV, herald(goodX + ",junk"), testBody, ErrMalformedHeader},
		{"trailing comma", okV, herald(goodX + ","), testBody, ErrMalformedHeader},
		{"webhook-timestamp not digits", okV, with(func(h http.Header) { h.Del(HeaderSignature); h.Set(HeaderWebhookTimestamp, "1.7e9") }), testBody, ErrMalformedHeader},
		{"webhook-timestamp signed", okV, standard(testMsgID, "+"+ts, goodStd), testBody, ErrMalformedHeader},

		// No v1.
		{"only v0", okV, herald("t=" + ts + ",v0=" + goodHex), testBody, ErrMalformedHeader},
		{"only t", okV, herald("t=" + ts), testBody, ErrMalformedHeader},
		{"standard only v2", okV, standard(testMsgID, ts, "v2,"+strings.TrimPrefix(goodStd, "v1,")), testBody, ErrMalformedHeader},
		{"standard only spaces", okV, standard(testMsgID, ts, "   "), testBody, ErrMalformedHeader},
		{"standard v1 empty", okV, standard(testMsgID, ts, "v1,"), testBody, ErrMalformedHeader},

		// Bad encodings.
		{"bad hex", okV, herald("t=" + ts + ",v1=" + strings.Repeat("zz", 32)), testBody, ErrMalformedHeader},
		{"short hex", okV, herald("t=" + ts + ",v1=" + goodHex[:62]), testBody, ErrMalformedHeader},
		{"bad base64", okV, standard(testMsgID, ts, "v1,"+strings.Repeat("!", 44)), testBody, ErrMalformedHeader},
		{"base64url", okV, standard(testMsgID, ts, "v1,"+strings.NewReplacer("+", "-", "/", "_").Replace(strings.TrimPrefix(goodStd, "v1,"))+"-"), testBody, ErrMalformedHeader},
		{"non-canonical base64", okV, standard(testMsgID, ts, nonCanonical(strings.TrimPrefix(goodStd, "v1,"))), testBody, ErrMalformedHeader},

		// Replay window.
		{"too old", &Verifier{Secrets: []string{testSecret}, Now: fixedNow(testTS + 301)}, good, testBody, ErrTimestampTooOld},
		{"too new", &Verifier{Secrets: []string{testSecret}, Now: fixedNow(testTS - 301)}, good, testBody, ErrTimestampTooNew},

		// Wrong secret or content.
		{"wrong secret", &Verifier{Secrets: []string{testSecret2}, Now: now}, good, testBody, ErrNoMatchingSignature},
		{"tampered body", okV, good, append([]byte(nil), append(testBody, ' ')...), ErrNoMatchingSignature},
		{"tampered id", okV, with(func(h http.Header) { h.Del(HeaderSignature); h.Set(HeaderWebhookID, "evt_other") }), testBody, ErrNoMatchingSignature},
		{"Herald ok, standard tampered", okV, with(func(h http.Header) { h.Set(HeaderWebhookID, "evt_other") }), testBody, ErrNoMatchingSignature},
		{"standard ok, Herald wrong", okV, with(func(h http.Header) { h.Set(HeaderSignature, "t="+ts+",v1="+strings.Repeat("ab", 32)) }), testBody, ErrNoMatchingSignature},
		{"uppercase version", okV, herald("t=" + ts + ",V1=" + goodHex), testBody, ErrMalformedHeader},

		// Secrets.
		{"empty secret list", &Verifier{Now: now}, good, testBody, ErrInvalidSecret},
		{"empty secret", &Verifier{Secrets: []string{""}, Now: now}, herald(goodX), testBody, ErrInvalidSecret},
		{"non-base64 secret on standard scheme", &Verifier{Secrets: []string{testSecret, "whsec_test_secret"}, Now: now}, good, testBody, ErrInvalidSecret},

		// Limits.
		{"too many v1 entries", okV, herald(manyV1), testBody, ErrMalformedHeader},
		{"too many standard entries", okV, standard(testMsgID, ts, manyStd), testBody, ErrMalformedHeader},
		{"X-Signature too long", okV, herald(goodX + ",x=" + strings.Repeat("a", maxHeaderLen)), testBody, ErrMalformedHeader},
		{"webhook-signature too long", okV, standard(testMsgID, ts, goodStd+strings.Repeat(" ", maxHeaderLen)), testBody, ErrMalformedHeader},
		{"webhook-id too long", okV, standard(strings.Repeat("a", maxHeaderLen+1), ts, goodStd), testBody, ErrMalformedHeader},
		// A signature header sent several times is a list of candidates
		// (issue 13 point 9).
		{"X-Signature twice", okV, with(func(h http.Header) { h.Add(HeaderSignature, goodX) }), testBody, nil},
		{"X-Signature: a bad candidate, then the good one", okV, with(func(h http.Header) {
			h[HeaderSignature] = []string{"t=" + ts + ",v1=" + strings.Repeat("0", 64), goodX}
		}), testBody, nil},
		{"X-Signature: two bad candidates", okV, with(func(h http.Header) {
			h[HeaderSignature] = []string{"t=" + ts + ",v1=" + strings.Repeat("0", 64), "t=" + ts + ",v1=" + strings.Repeat("1", 64)}
		}), testBody, ErrNoMatchingSignature},
		{"webhook-signature twice", okV, with(func(h http.Header) { h.Add(HeaderWebhookSignature, goodStd) }), testBody, nil},
		{"webhook-signature: a bad value, then the good one", okV, with(func(h http.Header) {
			h[HeaderWebhookSignature] = []string{"v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", goodStd}
		}), testBody, nil},
		{"webhook-timestamp twice", okV, with(func(h http.Header) { h.Add(HeaderWebhookTimestamp, ts) }), testBody, ErrMalformedHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Verify(tc.h, tc.body)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			for _, sentinel := range []error{ErrMissingSignature, ErrMalformedHeader, ErrTimestampTooOld, ErrTimestampTooNew, ErrNoMatchingSignature, ErrInvalidSecret} {
				if sentinel != tc.want && errors.Is(err, sentinel) {
					t.Errorf("Verify = %v also matches %v", err, sentinel)
				}
			}
			assertNoLeak(t, err)
		})
	}
}

// nonCanonical flips the unused low bits of the last base64 digit before
// the padding: the same 32 bytes under lenient decoding, but a string the
// Standard Webhooks libraries (which compare strings) would reject.
func nonCanonical(b64 string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(alphabet, b64[42])
	return "v1," + b64[:42] + string(alphabet[i|1]) + b64[43:]
}

// assertNoLeak fails if err mentions a secret or an expected signature.
func assertNoLeak(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, secret := range []string{testSecret, testSecret2} {
		std, _ := SignStandard(secret, testMsgID, testTS, testBody)
		for _, s := range []string{secret, strings.TrimPrefix(secret, SecretPrefix), SignHerald(secret, testTS, testBody), std} {
			if strings.Contains(msg, s) {
				t.Errorf("error %q leaks %q", msg, s)
			}
		}
	}
}

func TestSvixHeaderNames(t *testing.T) {
	good := signed(t, testSecret)
	h := http.Header{
		"Svix-Id":        good[HeaderWebhookID],
		"Svix-Timestamp": good[HeaderWebhookTimestamp],
		"Svix-Signature": good[HeaderWebhookSignature],
	}
	v := &Verifier{Secrets: []string{testSecret}, Now: fixedNow(testTS)}
	if err := v.Verify(h, testBody); err != nil {
		t.Fatalf("svix-* headers: %v", err)
	}
	// webhook-* win when present, even if the svix-* ones would verify.
	h.Set(HeaderWebhookID, "evt_other")
	h.Set(HeaderWebhookTimestamp, good.Get(HeaderWebhookTimestamp))
	h.Set(HeaderWebhookSignature, good.Get(HeaderWebhookSignature))
	if err := v.Verify(h, testBody); !errors.Is(err, ErrNoMatchingSignature) {
		t.Fatalf("webhook-* preferred over svix-*: Verify = %v, want ErrNoMatchingSignature", err)
	}
}

func TestParseSignatureHeader(t *testing.T) {
	a, b := strings.Repeat("ab", 32), strings.Repeat("CD", 32)
	ts, sigs, err := ParseSignatureHeader("t=42,v0=dead,v1=" + a + ",x=1,v1=" + b + ",v1=nothex")
	if err != nil || ts != 42 || len(sigs) != 2 || sigs[0][0] != 0xab || sigs[1][0] != 0xcd {
		t.Fatalf("ParseSignatureHeader = %d, %x, %v", ts, sigs, err)
	}
}

func TestParseStandardSignatures(t *testing.T) {
	a := base64.StdEncoding.EncodeToString(make([]byte, 32))
	sigs, err := ParseStandardSignatures("v1a,AAAA  v1," + a + " v2," + a + " junk v1,bad v1," + a)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("ParseStandardSignatures = %x, %v", sigs, err)
	}
	if _, err := ParseStandardSignatures(""); !errors.Is(err, ErrMalformedHeader) {
		t.Fatalf("empty: %v", err)
	}
}

// TestSignerConcurrent signs from many goroutines (run with -race) and
// checks that every result is the deterministic one.
func TestSignerConcurrent(t *testing.T) {
	s := mustSigner(t, testSecret, testSecret2)
	want := http.Header{}
	s.Sign(want, testMsgID, time.Unix(testTS, 0), testBody)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				h := http.Header{}
				id := fmt.Sprintf("evt_%d_%d", g, i)
				s.Sign(h, id, time.Unix(testTS, 0), testBody)
				std, _ := SignStandard(testSecret, id, testTS, testBody)
				if h.Get(HeaderSignature) != want.Get(HeaderSignature) || !strings.HasPrefix(h.Get(HeaderWebhookSignature), "v1,"+std+" v1,") {
					errs <- fmt.Sprintf("goroutine %d iteration %d: wrong signature", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func BenchmarkSignerSign(b *testing.B) {
	s := mustSigner(b, testSecret)
	body := []byte(strings.Repeat("x", 1024))
	h := http.Header{}
	now := time.Unix(testTS, 0)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s.Sign(h, testMsgID, now, body)
	}
}

func BenchmarkVerifierVerify(b *testing.B) {
	body := []byte(strings.Repeat("x", 1024))
	h := http.Header{}
	mustSigner(b, testSecret).Sign(h, testMsgID, time.Unix(testTS, 0), body)
	v := &Verifier{Secrets: []string{testSecret}, Now: fixedNow(testTS)}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(h, body); err != nil {
			b.Fatal(err)
		}
	}
}
