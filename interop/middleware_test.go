package interop

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripe "github.com/stripe/stripe-go/v85/webhook"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/herald-webhooks/herald/webhook"
)

// Deliveries signed by each peer library go through Herald's receiver
// middleware: the first is handled, a re-signed redelivery is a duplicate,
// and the event id is the one the peer's scheme carries. A Stripe-signed
// delivery (X-Signature alone, which signs no id) needs AllowBodyID.
func TestMiddlewareAcceptsPeerDeliveries(t *testing.T) {
	secret := newSecret(t)
	type delivery func(t *testing.T) (http.Header, []byte)

	stdHeaders := func(prefix, id, sig string, at time.Time) http.Header {
		return http.Header{prefix + "-Id": {id}, prefix + "-Timestamp": {itoa(at.Unix())}, prefix + "-Signature": {sig}}
	}
	for _, tc := range []struct {
		name        string
		wantID      string
		allowBodyID bool
		deliver     delivery
	}{
		{"stripe-go (Stripe-Signature as X-Signature, id from the body)", "evt_stripe_1", true, func(t *testing.T) (http.Header, []byte) {
			body := []byte(`{"id":"evt_stripe_1","object":"event","type":"charge.succeeded"}`)
			p := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()})
			return http.Header{webhook.HeaderSignature: {p.Header}}, body
		}},
		{"standardwebhooks (webhook-*)", "msg_std_1", false, func(t *testing.T) (http.Header, []byte) {
			body := []byte(`{"type":"invoice.paid"}`)
			wh, _ := standardwebhooks.NewWebhook(secret)
			now := time.Now()
			sig, _ := wh.Sign("msg_std_1", now, body)
			return stdHeaders("Webhook", "msg_std_1", sig, now), body
		}},
		{"svix (svix-*)", "msg_svix_1", false, func(t *testing.T) (http.Header, []byte) {
			body := []byte(`{"type":"user.created"}`)
			wh, _ := svix.NewWebhook(secret)
			now := time.Now()
			sig, _ := wh.Sign("msg_svix_1", now, body)
			return stdHeaders("Svix", "msg_svix_1", sig, now), body
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var gotID atomic.Value
			srv := httptest.NewServer(webhook.Middleware(webhook.HandlerConfig{
				Verifier:    &webhook.Verifier{Secrets: []string{secret}},
				Store:       webhook.NewMemoryStore(),
				AllowBodyID: tc.allowBodyID,
				OnError:     func(_ *http.Request, err error) { t.Logf("OnError: %v", err) },
			})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				gotID.Store(webhook.EventID(r))
				io.WriteString(w, `{"received":true}`)
			})))
			defer srv.Close()

			post := func() (int, string) {
				h, body := tc.deliver(t)
				req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
				for k, v := range h {
					req.Header[k] = v
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if status, body := post(); status != 200 || body != `{"received":true}` {
				t.Fatalf("first delivery: %d %s", status, body)
			}
			time.Sleep(5 * time.Millisecond)
			if status, body := post(); status != 200 || body != `{"duplicate":true}` {
				t.Fatalf("redelivery: %d %s", status, body)
			}
			if calls.Load() != 1 || gotID.Load() != tc.wantID {
				t.Fatalf("handler calls %d, event id %v; want 1, %s", calls.Load(), gotID.Load(), tc.wantID)
			}
		})
	}
}
