package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

const (
	mwSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	mwSecret2 = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

var mwBody = []byte(`{"id":"evt_1","type":"file.extraction.completed","tenant":"acme","data":{"file_id":"file_9","version":3}}`)

// rig is a receiver under test: the middleware around a handler that
// records its calls and answers what next says.
type rig struct {
	t      *testing.T
	srv    *httptest.Server
	store  webhook.IdempotencyStore
	calls  atomic.Int32
	mu     sync.Mutex
	errs   []error
	seen   []seenRequest
	answer func(w http.ResponseWriter, r *http.Request) // nil: 200 {"received":true}
}

type seenRequest struct {
	body, rawBody []byte
	id            string
}

func newRig(t *testing.T, cfg webhook.HandlerConfig) *rig {
	t.Helper()
	rg := &rig{t: t}
	if cfg.Verifier == nil {
		cfg.Verifier = &webhook.Verifier{Secrets: []string{mwSecret}}
	}
	if cfg.Store == nil {
		cfg.Store = webhook.NewMemoryStore()
	}
	rg.store = cfg.Store
	user := cfg.OnError
	cfg.OnError = func(r *http.Request, err error) {
		rg.mu.Lock()
		rg.errs = append(rg.errs, err)
		rg.mu.Unlock()
		if user != nil {
			user(r, err)
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.calls.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("handler: reading r.Body: %v", err)
		}
		rg.mu.Lock()
		rg.seen = append(rg.seen, seenRequest{body: body, rawBody: webhook.RawBody(r), id: webhook.EventID(r)})
		answer := rg.answer
		rg.mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"received":true}`)
	})
	rg.srv = httptest.NewServer(webhook.Middleware(cfg)(h))
	t.Cleanup(rg.srv.Close)
	return rg
}

func (rg *rig) setAnswer(f func(w http.ResponseWriter, r *http.Request)) {
	rg.mu.Lock()
	rg.answer = f
	rg.mu.Unlock()
}

func (rg *rig) lastErr() error {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if len(rg.errs) == 0 {
		return nil
	}
	return rg.errs[len(rg.errs)-1]
}

// signedRequest returns the headers of a delivery attempt signed now with
// secrets (both schemes, as Herald sends).
func signedHeaders(t *testing.T, id string, body []byte, secrets ...string) http.Header {
	t.Helper()
	if len(secrets) == 0 {
		secrets = []string{mwSecret}
	}
	s, err := webhook.NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, webhook.HeaderEventID: {id}}
	s.Sign(h, id, time.Now(), body)
	return h
}

// post sends body with headers h and returns the status and response body.
func (rg *rig) post(h http.Header, body []byte) (int, string, http.Header) {
	rg.t.Helper()
	req, err := http.NewRequest(http.MethodPost, rg.srv.URL, bytes.NewReader(body))
	if err != nil {
		rg.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := rg.srv.Client().Do(req)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (rg *rig) expect(h http.Header, body []byte, wantStatus int, wantBody string, wantCalls int32) {
	rg.t.Helper()
	status, got, _ := rg.post(h, body)
	if status != wantStatus || (wantBody != "" && got != wantBody) {
		rg.t.Fatalf("answer %d %s, want %d %s (last OnError: %v)", status, got, wantStatus, wantBody, rg.lastErr())
	}
	if n := rg.calls.Load(); n != wantCalls {
		rg.t.Fatalf("handler called %d times, want %d", n, wantCalls)
	}
}

const (
	received  = `{"received":true}`
	duplicate = `{"duplicate":true}`
	invalid   = `{"error":"invalid signature"}`
)

func TestMiddlewareValidThenDuplicate(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	h := signedHeaders(t, "evt_1", mwBody)
	rg.expect(h, mwBody, 200, received, 1)

	rg.mu.Lock()
	seen := rg.seen[0]
	rg.mu.Unlock()
	if !bytes.Equal(seen.body, mwBody) || !bytes.Equal(seen.rawBody, mwBody) {
		t.Fatalf("handler saw r.Body %q and RawBody %q, want the raw body %q", seen.body, seen.rawBody, mwBody)
	}
	if seen.id != "evt_1" {
		t.Fatalf("EventID = %q, want evt_1", seen.id)
	}

	// The same attempt again (a network-level redelivery)...
	rg.expect(h, mwBody, 200, duplicate, 1)
	// ...and a new attempt of the same event, signed at another time.
	time.Sleep(10 * time.Millisecond)
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, duplicate, 1)
	// Another event goes through.
	other := []byte(`{"id":"evt_2"}`)
	rg.expect(signedHeaders(t, "evt_2", other), other, 200, received, 2)
}

func TestMiddlewareRejectsBadSignatures(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	good := signedHeaders(t, "evt_1", mwBody)

	tampered := bytes.Replace(mwBody, []byte(`"version":3`), []byte(`"version":4`), 1)
	withHeader := func(k, v string) http.Header {
		h := good.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	old := http.Header{}
	s, _ := webhook.NewSigner(mwSecret)
	s.Sign(old, "evt_1", time.Now().Add(-10*time.Minute), mwBody)
	wrongKey := signedHeaders(t, "evt_1", mwBody, mwSecret2)

	for _, tc := range []struct {
		name    string
		h       http.Header
		body    []byte
		wantErr error
	}{
		{"tampered body", good, tampered, webhook.ErrNoMatchingSignature},
		{"tampered webhook-id", withHeader("Webhook-Id", "evt_other"), mwBody, webhook.ErrNoMatchingSignature},
		{"wrong secret", wrongKey, mwBody, webhook.ErrNoMatchingSignature},
		{"replayed 10 min later", old, mwBody, webhook.ErrTimestampTooOld},
		{"no signature", http.Header{}, mwBody, webhook.ErrMissingSignature},
		{"malformed X-Signature", withHeader("X-Signature", "t=abc,v1=00"), mwBody, webhook.ErrMalformedHeader},
		{"only the Standard Webhooks half, tampered", withHeader("X-Signature", ""), tampered, webhook.ErrNoMatchingSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, hdr := rg.post(tc.h, tc.body)
			if status != 401 || body != invalid {
				t.Fatalf("answer %d %s, want 401 %s", status, body, invalid)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if err := rg.lastErr(); !errors.Is(err, tc.wantErr) {
				t.Fatalf("OnError got %v, want %v", err, tc.wantErr)
			}
			if n := rg.calls.Load(); n != 0 {
				t.Fatalf("handler called %d times", n)
			}
		})
	}
	// The rejected attempts claimed nothing: the genuine one goes through.
	rg.expect(good, mwBody, 200, received, 1)
}

func TestMiddlewareOversize(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{MaxBodyBytes: 64})
	big := []byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", 100) + `"}`)
	h := signedHeaders(t, "evt_big", big)
	rg.expect(h, big, 413, `{"error":"payload too large"}`, 0)
	if err := rg.lastErr(); !errors.Is(err, webhook.ErrBodyTooLarge) {
		t.Fatalf("OnError got %v", err)
	}

	// Without Content-Length (chunked), the cap applies while reading.
	req, _ := http.NewRequest(http.MethodPost, rg.srv.URL, io.MultiReader(bytes.NewReader(big)))
	req.ContentLength = -1
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := rg.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || string(b) != `{"error":"payload too large"}` {
		t.Fatalf("chunked oversize: %d %s", resp.StatusCode, b)
	}

	// Exactly at the cap is fine.
	exact := []byte(`{"id":"evt_ok","pad":"` + strings.Repeat("x", 64-len(`{"id":"evt_ok","pad":""}`)) + `"}`)
	if len(exact) != 64 {
		t.Fatalf("test bug: %d bytes", len(exact))
	}
	rg.expect(signedHeaders(t, "evt_ok", exact), exact, 200, received, 1)
}

func TestMiddlewareDefaultMaxBody(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	big := bytes.Repeat([]byte("a"), webhook.DefaultMaxBodyBytes+1)
	rg.expect(signedHeaders(t, "evt_big", big), big, 413, "", 0)
}

func TestMiddlewareHandlerFailureReleases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    func(w http.ResponseWriter, r *http.Request)
		status  int
		release bool
	}{
		{"500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "db down", 500) }, 500, true},
		{"503", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }, 503, true},
		{"429", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(429) }, 429, true},
		{"408", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(408) }, 408, true},
		{"panic", func(http.ResponseWriter, *http.Request) { panic("boom") }, 500, true},
		// Herald retries other 4xx and 3xx answers (twice, then dead
		// letter) and Stripe every non-2xx: a refusal must stay one, not
		// turn into 200 {"duplicate":true} (a success) on the retry.
		{"400", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(400) }, 400, true},
		{"404", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) }, 404, true},
		{"422", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(422) }, 422, true},
		{"307", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(307) }, 307, true}, // no Location: the test client returns it as is
		{"103 then nothing", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(103) }, 200, false},
		{"202", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202) }, 202, false},
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg := newRig(t, webhook.HandlerConfig{})
			rg.setAnswer(tc.fail)
			h := signedHeaders(t, "evt_1", mwBody)
			status, _, _ := rg.post(h, mwBody)
			if status != tc.status {
				t.Fatalf("first attempt: %d, want %d", status, tc.status)
			}
			rg.setAnswer(nil)
			if tc.release {
				// The sender retries; the claim was released, so the
				// handler runs again and this time succeeds.
				rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, received, 2)
			}
			// Now (or already) completed: a duplicate.
			rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, duplicate, rg.calls.Load())
		})
	}
}

func TestMiddlewarePanicReported(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	rg.setAnswer(func(http.ResponseWriter, *http.Request) { panic("boom") })
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 500, `{"error":"internal error"}`, 1)
	err := rg.lastErr()
	if !errors.Is(err, webhook.ErrHandlerPanic) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("OnError got %v", err)
	}
}

// failingStore fails the operations selected.
type failingStore struct {
	webhook.IdempotencyStore
	claim, complete, release bool
}

var errStoreDown = errors.New("store down")

func (s *failingStore) Claim(ctx context.Context, key string, lease time.Duration) (webhook.ClaimStatus, error) {
	if s.claim {
		return 0, errStoreDown
	}
	return s.IdempotencyStore.Claim(ctx, key, lease)
}

func (s *failingStore) Complete(ctx context.Context, key string, ttl time.Duration) error {
	if s.complete {
		return errStoreDown
	}
	return s.IdempotencyStore.Complete(ctx, key, ttl)
}

func (s *failingStore) Release(ctx context.Context, key string) error {
	if s.release {
		return errStoreDown
	}
	return s.IdempotencyStore.Release(ctx, key)
}

func TestMiddlewareStoreError(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{Store: &failingStore{IdempotencyStore: webhook.NewMemoryStore(), claim: true}})
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 503, `{"error":"temporarily unavailable"}`, 0)
	err := rg.lastErr()
	if !errors.Is(err, webhook.ErrIdempotencyStore) || !errors.Is(err, errStoreDown) {
		t.Fatalf("OnError got %v, want ErrIdempotencyStore wrapping the store's error", err)
	}
}

func TestMiddlewareCompleteError(t *testing.T) {
	// The handler's answer stands; the failure is reported. The record
	// stays in progress until its lease lapses, then a redelivery is
	// processed again (at least once).
	rg := newRig(t, webhook.HandlerConfig{Store: &failingStore{IdempotencyStore: webhook.NewMemoryStore(), complete: true}})
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, received, 1)
	if err := rg.lastErr(); !errors.Is(err, webhook.ErrIdempotencyStore) || !strings.Contains(err.Error(), "complete") {
		t.Fatalf("OnError got %v", err)
	}
}

func TestMiddlewareInProgress(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	entered := make(chan struct{})
	release := make(chan struct{})
	rg.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		w.WriteHeader(200)
	})
	done := make(chan int)
	go func() {
		status, _, _ := rg.post(signedHeaders(t, "evt_1", mwBody), mwBody)
		done <- status
	}()
	<-entered

	// The sender timed out and retries while the first delivery is still
	// being handled: not a 2xx (the first may yet fail), and not handled.
	status, body, hdr := rg.post(signedHeaders(t, "evt_1", mwBody), mwBody)
	if status != 503 || body != `{"error":"event in progress"}` || hdr.Get("Retry-After") == "" {
		t.Fatalf("redelivery during handling: %d %s Retry-After=%q", status, body, hdr.Get("Retry-After"))
	}
	if n := rg.calls.Load(); n != 1 {
		t.Fatalf("handler called %d times", n)
	}
	close(release)
	if status := <-done; status != 200 {
		t.Fatalf("first delivery: %d", status)
	}
	rg.setAnswer(nil)
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, duplicate, 1)
}

// A crash between Claim and Complete leaves an in-progress record; once
// its lease lapses the sender's retry is processed.
func TestMiddlewareLeaseLapses(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	store := webhook.NewMemoryStore()
	store.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	rg := newRig(t, webhook.HandlerConfig{Store: store, Lease: time.Minute})
	// Simulate the crashed process's claim.
	if st, err := store.Claim(context.Background(), "evt_1", time.Minute); err != nil || st != webhook.ClaimAcquired {
		t.Fatal(st, err)
	}
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 503, `{"error":"event in progress"}`, 0)
	mu.Lock()
	now = now.Add(time.Minute + time.Second)
	mu.Unlock()
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, received, 1)
}

func TestMiddlewareEventIDSources(t *testing.T) {
	stripeBody := []byte(`{"id":"evt_stripe_1","object":"event","type":"charge.succeeded"}`)
	heraldOnly := func(body []byte, eventID string) http.Header {
		h := http.Header{}
		h.Set("X-Signature", "t="+itoa(time.Now().Unix())+",v1="+webhook.SignHerald(mwSecret, time.Now().Unix(), body))
		if eventID != "" {
			h.Set(webhook.HeaderEventID, eventID)
		}
		return h
	}
	svixOnly := func(id string, body []byte) http.Header {
		ts := time.Now().Unix()
		sig, err := webhook.SignStandard(mwSecret, id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Svix-Id": {id}, "Svix-Timestamp": {itoa(ts)}, "Svix-Signature": {"v1," + sig}}
	}

	for _, tc := range []struct {
		name        string
		allowBodyID bool
		h           http.Header
		body        []byte
		wantStatus  int
		wantBody    string
		wantID      string
		wantErr     error
	}{
		{"webhook-id wins over X-Event-Id and body", false, func() http.Header {
			h := signedHeaders(t, "msg_std", mwBody)
			h.Set(webhook.HeaderEventID, "evt_header")
			return h
		}(), mwBody, 200, received, "msg_std", nil},
		{"svix-id", false, svixOnly("msg_svix", mwBody), mwBody, 200, received, "msg_svix", nil},
		// X-Signature alone: nothing signed names the message.
		{"X-Signature alone, X-Event-Id matching the body", false, heraldOnly(mwBody, "evt_1"), mwBody, 400, `{"error":"event id not signed"}`, "", webhook.ErrUnsignedEventID},
		{"X-Signature alone, body id (Stripe)", false, heraldOnly(stripeBody, ""), stripeBody, 400, `{"error":"event id not signed"}`, "", webhook.ErrUnsignedEventID},
		{"X-Signature alone, X-Event-Id with a body without id", false, heraldOnly([]byte(`{"x":1}`), "evt_hdr"), []byte(`{"x":1}`), 400, `{"error":"event id not signed"}`, "", webhook.ErrUnsignedEventID},
		// AllowBodyID: the signed body's "id".
		{"AllowBodyID, X-Event-Id matching the body", true, heraldOnly(mwBody, "evt_1"), mwBody, 200, received, "evt_1", nil},
		{"AllowBodyID, X-Event-Id not matching the signed body", true, heraldOnly(mwBody, "evt_forged"), mwBody, 400, `{"error":"event id mismatch"}`, "", webhook.ErrEventIDMismatch},
		{"AllowBodyID, body id (Stripe)", true, heraldOnly(stripeBody, ""), stripeBody, 200, received, "evt_stripe_1", nil},
		{"AllowBodyID, X-Event-Id with a body without id", true, heraldOnly([]byte(`{"x":1}`), "evt_hdr"), []byte(`{"x":1}`), 400, `{"error":"missing event id"}`, "", webhook.ErrMissingEventID},
		{"AllowBodyID, X-Event-Id with a non-JSON body", true, heraldOnly([]byte(`hello`), "evt_plain"), []byte(`hello`), 400, `{"error":"missing event id"}`, "", webhook.ErrMissingEventID},
		{"AllowBodyID, numeric body id", true, heraldOnly([]byte(`{"id":17}`), "17"), []byte(`{"id":17}`), 400, `{"error":"missing event id"}`, "", webhook.ErrMissingEventID},
		{"AllowBodyID, no id anywhere", true, heraldOnly([]byte(`{"x":1}`), ""), []byte(`{"x":1}`), 400, `{"error":"missing event id"}`, "", webhook.ErrMissingEventID},
		{"AllowBodyID, ID is not id", true, heraldOnly([]byte(`{"ID":"evt_caps"}`), ""), []byte(`{"ID":"evt_caps"}`), 400, `{"error":"missing event id"}`, "", webhook.ErrMissingEventID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg := newRig(t, webhook.HandlerConfig{AllowBodyID: tc.allowBodyID})
			status, body, _ := rg.post(tc.h, tc.body)
			if status != tc.wantStatus || body != tc.wantBody {
				t.Fatalf("answer %d %s, want %d %s (OnError: %v)", status, body, tc.wantStatus, tc.wantBody, rg.lastErr())
			}
			if tc.wantErr != nil && !errors.Is(rg.lastErr(), tc.wantErr) {
				t.Fatalf("OnError got %v, want %v", rg.lastErr(), tc.wantErr)
			}
			if tc.wantID == "" {
				if n := rg.calls.Load(); n != 0 {
					t.Fatalf("handler called %d times, want 0", n)
				}
				return
			}
			rg.mu.Lock()
			got := rg.seen[0].id
			rg.mu.Unlock()
			if got != tc.wantID {
				t.Fatalf("EventID = %q, want %q", got, tc.wantID)
			}
			if st, err := rg.store.Claim(context.Background(), tc.wantID, time.Minute); err != nil || st != webhook.ClaimCompleted {
				t.Fatalf("store record of %q: %v, %v; want completed", tc.wantID, st, err)
			}
		})
	}
}

// With AllowBodyID, a copy of one of Herald's own events stripped of the
// webhook-* headers is keyed on the body's "id", which is the webhook-id
// the delivery was claimed under: a duplicate.
func TestMiddlewareAllowBodyIDHeraldEventCopyIsDuplicate(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{AllowBodyID: true})
	h := signedHeaders(t, "evt_1", mwBody)
	rg.expect(h, mwBody, 200, received, 1)
	for _, k := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
		h.Del(k)
	}
	rg.expect(h, mwBody, 200, duplicate, 1)
	h.Del(webhook.HeaderEventID)
	rg.expect(h, mwBody, 200, duplicate, 1)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestMiddlewareNamespaceAndLongIDs(t *testing.T) {
	store := &recordingStore{IdempotencyStore: webhook.NewMemoryStore()}
	a := newRig(t, webhook.HandlerConfig{Store: store, Namespace: "a:"})
	b := newRig(t, webhook.HandlerConfig{Store: store, Namespace: "b:"})
	a.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, received, 1)
	b.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, received, 1)
	a.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, duplicate, 1)

	long := "evt_" + strings.Repeat("z", 300)
	a.expect(signedHeaders(t, long, mwBody), mwBody, 200, received, 2)
	a.expect(signedHeaders(t, long, mwBody), mwBody, 200, duplicate, 2)

	keys := store.keys()
	want := []string{"a:evt_1", "b:evt_1", "a:evt_1", "a:sha256:"}
	for i, w := range want {
		if i >= len(keys) || !strings.HasPrefix(keys[i], w) {
			t.Fatalf("claimed keys %q, want prefixes %q", keys, want)
		}
	}
	if k := keys[3]; len(k) != len("a:sha256:")+64 {
		t.Fatalf("long id key %q", k)
	}
}

type recordingStore struct {
	webhook.IdempotencyStore
	mu      sync.Mutex
	claimed []string
}

func (s *recordingStore) Claim(ctx context.Context, key string, lease time.Duration) (webhook.ClaimStatus, error) {
	s.mu.Lock()
	s.claimed = append(s.claimed, key)
	s.mu.Unlock()
	return s.IdempotencyStore.Claim(ctx, key, lease)
}

func (s *recordingStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.claimed...)
}

func TestMiddlewareRotation(t *testing.T) {
	// The receiver holds both secrets during the overlap; the sender signs
	// with the old one, the new one, or both.
	rg := newRig(t, webhook.HandlerConfig{Verifier: &webhook.Verifier{Secrets: []string{mwSecret2, mwSecret}}})
	for i, secrets := range [][]string{{mwSecret}, {mwSecret2}, {mwSecret2, mwSecret}} {
		id := "evt_rot_" + itoa(int64(i))
		body := []byte(`{"id":"` + id + `"}`)
		rg.expect(signedHeaders(t, id, body, secrets...), body, 200, received, int32(i+1))
	}
}

func TestMiddlewareMisconfiguredVerifier(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{Verifier: &webhook.Verifier{}})
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 500, `{"error":"internal error"}`, 0)
	if !errors.Is(rg.lastErr(), webhook.ErrInvalidSecret) {
		t.Fatalf("OnError got %v", rg.lastErr())
	}
}

func TestMiddlewareNilConfigPanics(t *testing.T) {
	for name, cfg := range map[string]webhook.HandlerConfig{
		"nil Verifier": {Store: webhook.NewMemoryStore()},
		"nil Store":    {Verifier: &webhook.Verifier{Secrets: []string{mwSecret}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			webhook.Middleware(cfg)
		}()
	}
}

func TestRawBodyOutsideMiddleware(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	if webhook.RawBody(r) != nil || webhook.EventID(r) != "" {
		t.Fatal("RawBody/EventID of a request that did not pass the middleware must be empty")
	}
}

// TestMiddlewareConcurrentRedeliveries sends one event many times at once:
// the handler runs exactly once; the others get a duplicate or in-progress
// answer.
func TestMiddlewareConcurrentRedeliveries(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	rg.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(200)
	})
	h := signedHeaders(t, "evt_1", mwBody)
	var wg sync.WaitGroup
	var ok, dup, busy, other atomic.Int32
	for range 20 {
		wg.Go(func() {
			status, body, _ := rg.post(h, mwBody)
			switch {
			case status == 200 && body == duplicate:
				dup.Add(1)
			case status == 200:
				ok.Add(1)
			case status == 503:
				busy.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	if rg.calls.Load() != 1 || ok.Load() != 1 || other.Load() != 0 || dup.Load()+busy.Load() != 19 {
		t.Fatalf("handler calls %d; answers: handled %d, duplicate %d, in progress %d, other %d", rg.calls.Load(), ok.Load(), dup.Load(), busy.Load(), other.Load())
	}
}

// A handler that streams (asserting http.Flusher) still works and its
// status is recorded.
func TestMiddlewareFlusher(t *testing.T) {
	rg := newRig(t, webhook.HandlerConfig{})
	rg.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			t.Error("ResponseWriter is not an http.Flusher")
			return
		}
		io.WriteString(w, "part")
		f.Flush()
	})
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, "part", 1)
	rg.setAnswer(nil)
	rg.expect(signedHeaders(t, "evt_1", mwBody), mwBody, 200, duplicate, 1)
}

// An inbound forward from Herald's gateway carries the provider's own body
// (no "id", or the provider's one) signed with both schemes, webhook-id =
// X-Event-Id = Herald's evt_… id. X-Signature signs only the timestamp and
// the body: a copy resent within the tolerance without the webhook-*
// headers, under any X-Event-Id (a new one each time, or the body's "id"),
// must never reach the handler again; Herald's own retries (a fresh
// timestamp each, the same id) still are duplicates.
func TestMiddlewareForwardCopiesWithoutWebhookHeadersRefused(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"GitHub body, no id", []byte(`{"action":"opened","number":7}`)},
		{"Stripe body, its own id", []byte(`{"id":"evt_1Stripe","object":"event","type":"invoice.paid"}`)},
		{"non-JSON body", []byte(`payload=%7B%22type%22%3A%22block_actions%22%7D`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := now
			rg := newRig(t, webhook.HandlerConfig{Verifier: &webhook.Verifier{Secrets: []string{mwSecret}, Now: func() time.Time { return clock }}})
			signer, err := webhook.NewSigner(mwSecret)
			if err != nil {
				t.Fatal(err)
			}
			forward := func(at time.Time) http.Header {
				h := http.Header{webhook.HeaderEventID: {"evt_herald_1"}}
				signer.Sign(h, "evt_herald_1", at, tc.body)
				return h
			}
			first := forward(now)
			rg.expect(first, tc.body, 200, received, 1)
			clock = now.Add(40 * time.Second)
			rg.expect(forward(clock), tc.body, 200, duplicate, 1) // Herald's retry

			var ids []string
			for i := range 3 {
				ids = append(ids, "evt_copy_"+itoa(int64(i)))
			}
			ids = append(ids, "evt_1Stripe", "evt_herald_1", "")
			for _, id := range ids {
				copied := first.Clone()
				for _, k := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
					copied.Del(k)
				}
				copied.Del(webhook.HeaderEventID)
				if id != "" {
					copied.Set(webhook.HeaderEventID, id)
				}
				status, body, _ := rg.post(copied, tc.body)
				if status == 200 || rg.calls.Load() != 1 {
					t.Fatalf("copy with X-Event-Id %q: %d %s, handler called %d times; want it refused, handled once", id, status, body, rg.calls.Load())
				}
				if status != 400 || body != `{"error":"event id not signed"}` || !errors.Is(rg.lastErr(), webhook.ErrUnsignedEventID) {
					t.Fatalf("copy with X-Event-Id %q: %d %s (OnError %v), want 400 event id not signed, ErrUnsignedEventID", id, status, body, rg.lastErr())
				}
			}
		})
	}
}
