package interop

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v89/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripe "github.com/stripe/stripe-go/v85/webhook"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/webhook"
)

// Requests signed by the providers' own libraries go through a real Herald
// inbound gateway (POST /in/{source_id}): the valid one is accepted and
// forwarded with its exact bytes, the same request again is a duplicate,
// and tampered bodies, wrong secrets and (for the schemes with a timestamp)
// timestamps 10 minutes old or 10 minutes ahead are refused with 401.
//
// Who signs: stripe-go (webhook.GenerateTestSignedPayload), the Standard
// Webhooks Go library and svix-go (Webhook.Sign). go-github and slack-go
// only verify, so their requests are built by the providers' documented
// rule and each one is first checked with the library's own verifier (it
// must accept the valid request and refuse every bad one that Herald
// refuses) before it is sent to Herald. Shopify has no Go library here:
// its requests follow Shopify's documented rule only.
//
// The library's verdict on every bad request is pinned too; the one place
// where they differ from Herald is logged as DISAGREEMENT (run with -v):
// stripe-go accepts a timestamp in the future, Herald refuses it by design,
// and go-github accepts a request signed only with the legacy SHA-1
// X-Hub-Signature, which Herald's github scheme does not.

// gwHerald is a real Herald (API, gateway and delivery engine on a
// temporary SQLite file) on a loopback port.
type gwHerald struct {
	t    *testing.T
	base string
}

const gwAPIKey = "interop-gateway-admin-key-0123456789"

func startGatewayHerald(t *testing.T) *gwHerald {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m, err := app.New(ctx, app.Config{
		Addr:   "127.0.0.1:0",
		DB:     "sqlite:" + filepath.Join(t.TempDir(), "h.db"),
		APIKey: gwAPIKey,
		Dev:    true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		cancel()
		t.Fatalf("app.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &gwHerald{t: t, base: "http://" + m.Addr()}
}

// api calls Herald's HTTP API with the admin key; out may be nil.
func (h *gwHerald) api(method, path string, in, out any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+gwAPIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

type gwSource struct {
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
	IngestPath string `json:"ingest_path"`
}

func (h *gwHerald) createSource(scheme, secret, destination string) gwSource {
	h.t.Helper()
	var s gwSource
	st, raw := h.api("POST", "/v1/sources", map[string]any{
		"name": scheme, "scheme": scheme, "secrets": []string{secret}, "destination_url": destination,
	}, &s)
	if st != http.StatusCreated || s.ID == "" || s.IngestPath != "/in/"+s.ID || s.EndpointID == "" {
		h.t.Fatalf("create %s source: %d %s", scheme, st, raw)
	}
	return s
}

// storedEvents counts the events Herald stored for a source: one delivery
// each to the source's forwarding endpoint (their tenant, the source id, is
// internal and cannot be named in a list filter).
func (h *gwHerald) storedEvents(src gwSource) int {
	h.t.Helper()
	var page struct{ Data []json.RawMessage }
	if st, raw := h.api("GET", "/v1/endpoints/"+src.EndpointID+"/deliveries?limit=100", nil, &page); st != 200 {
		h.t.Fatalf("list events: %d %s", st, raw)
	}
	return len(page.Data)
}

// forwardSecret is the secret Herald signs a source's forwards with.
func (h *gwHerald) forwardSecret(src gwSource) string {
	h.t.Helper()
	var out struct{ Secret string }
	if st, raw := h.api("GET", "/v1/endpoints/"+src.EndpointID+"/secret", nil, &out); st != 200 || out.Secret == "" {
		h.t.Fatalf("endpoint secret: %d %s", st, raw)
	}
	return out.Secret
}

type gwAnswer struct {
	Received  bool   `json:"received"`
	Duplicate bool   `json:"duplicate"`
	ID        string `json:"id"`
}

// ingest POSTs a provider's request to the gateway, as the provider would
// (no API key), and returns the status and the raw answer.
func (h *gwHerald) ingest(src gwSource, hdr http.Header, body []byte) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.base+src.IngestPath, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = append([]string(nil), vs...)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", src.IngestPath, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// gwForward is one request Herald forwarded to a destination.
type gwForward struct {
	path   string
	header http.Header
	body   []byte
}

// gwDestination is the loopback service behind the gateway; it answers
// 200 to everything and records what it got.
type gwDestination struct {
	*httptest.Server
	mu  sync.Mutex
	got []gwForward
}

func newGatewayDestination(t *testing.T) *gwDestination {
	d := &gwDestination{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.got = append(d.got, gwForward{path: r.URL.Path, header: r.Header.Clone(), body: b})
		d.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(d.Close)
	return d
}

// forwardsOf returns the forwards of Herald event id.
func (d *gwDestination) forwardsOf(eventID string) []gwForward {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []gwForward
	for _, f := range d.got {
		if f.header.Get(webhook.HeaderEventID) == eventID {
			out = append(out, f)
		}
	}
	return out
}

// gwRequest is a provider's request: headers and raw body.
type gwRequest struct {
	header http.Header
	body   []byte
}

// gwCase is one provider library against one Herald source.
type gwCase struct {
	name   string // the library that signs (or vouches)
	scheme string // Herald's scheme
	// secret is the provider secret configured on the source; wrongSecret
	// is another secret of the same shape.
	secret, wrongSecret string
	body                []byte
	timestamped         bool
	// sign builds the provider's request for body, signed with secret at
	// time at.
	sign func(t *testing.T, secret string, at time.Time, body []byte) gwRequest
	// verify is the library's own verdict on a request with the source's
	// secret (nil: no library verifies this scheme here).
	verify func(r gwRequest, secret string) error
	// libAcceptsFuture: the library accepts a timestamp 10 minutes ahead
	// (Herald never does).
	libAcceptsFuture bool
	// extra are more requests with pinned verdicts (Herald always 401).
	extra func(t *testing.T, secret string, body []byte) []gwExtra
}

type gwExtra struct {
	name      string
	req       gwRequest
	libAccept bool                                   // the library's verdict
	verify    func(r gwRequest, secret string) error // the library's check, when not the case's
}

func hmacSum(newHash func() hash.Hash, key string, parts ...[]byte) []byte {
	m := hmac.New(newHash, []byte(key))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// gwBody is a provider's JSON body as it arrives on the wire: escaped
// slashes, non-ASCII text (raw and \u-escaped) and a trailing newline, none
// of which survive a re-serialisation.
func gwBody(json string) []byte { return []byte(json + "\n") }

// tamperings are bodies that differ from body in bytes but (mostly) not in
// JSON meaning, as a gateway that re-serialised would produce.
func tamperings(t *testing.T, body []byte) []gwTampered {
	t.Helper()
	out := []gwTampered{
		{"trailing newline dropped", bytes.TrimSuffix(body, []byte("\n"))},
		{"escaped slashes unescaped", bytes.ReplaceAll(body, []byte(`\/`), []byte(`/`))},
		{"non-ASCII changed", bytes.Replace(body, []byte("ë"), []byte("e"), 1)},
		{"space appended", append(append([]byte(nil), body...), ' ')},
	}
	for _, tb := range out {
		if bytes.Equal(tb.body, body) {
			t.Fatalf("tampering %q left the body unchanged", tb.name)
		}
	}
	return out
}

type gwTampered struct {
	name string
	body []byte
}

func gatewayCases(t *testing.T) []gwCase {
	stripeSecret := "whsec_" + hex.EncodeToString(randBytes(t, 16))
	stdSecret := newSecret(t)
	githubSecret := "gh-" + hex.EncodeToString(randBytes(t, 12))
	slackSecret := hex.EncodeToString(randBytes(t, 16))
	shopifySecret := hex.EncodeToString(randBytes(t, 16))

	stdSign := func(lib string, prefix string) func(t *testing.T, secret string, at time.Time, body []byte) gwRequest {
		return func(t *testing.T, secret string, at time.Time, body []byte) gwRequest {
			t.Helper()
			var (
				sig string
				err error
				id  = "msg_" + lib + "_2ZyH9q"
			)
			if lib == "svix" {
				wh, e := svix.NewWebhook(secret)
				if e != nil {
					t.Fatal(e)
				}
				sig, err = wh.Sign(id, at, body)
			} else {
				wh, e := standardwebhooks.NewWebhook(secret)
				if e != nil {
					t.Fatal(e)
				}
				sig, err = wh.Sign(id, at, body)
			}
			if err != nil {
				t.Fatalf("%s Sign: %v", lib, err)
			}
			return gwRequest{header: http.Header{
				"Content-Type":        {"application/json"},
				prefix + "-Id":        {id},
				prefix + "-Timestamp": {itoa(at.Unix())},
				prefix + "-Signature": {sig},
			}, body: body}
		}
	}
	stdVerify := func(lib string) func(r gwRequest, secret string) error {
		return func(r gwRequest, secret string) error {
			if lib == "svix" {
				wh, err := svix.NewWebhook(secret)
				if err != nil {
					return err
				}
				return wh.Verify(r.body, r.header)
			}
			wh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				return err
			}
			return wh.Verify(r.body, r.header)
		}
	}
	stdBody := func(lib string) []byte {
		return gwBody(`{"type":"invoice.paid","timestamp":"2025-01-01T00:00:00Z","data":{"invoice":"in_1","customer":"Zoë – 東京 🚀","escaped":"caf\u00e9","url":"https:\/\/example.com\/invoices\/in_1","lib":"` + lib + `"}}`)
	}

	githubRequest := func(secret, delivery string, body []byte) gwRequest {
		// GitHub's documented rule: X-Hub-Signature-256 = "sha256=" + hex
		// HMAC-SHA256(secret, body); it also sends the legacy SHA-1 header.
		return gwRequest{header: http.Header{
			"Content-Type":        {"application/json"},
			"User-Agent":          {"GitHub-Hookshot/044aadd"},
			"X-Github-Event":      {"push"},
			"X-Github-Delivery":   {delivery},
			"X-Github-Hook-Id":    {"292430182"},
			"X-Hub-Signature":     {"sha1=" + hex.EncodeToString(hmacSum(sha1.New, secret, body))},
			"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(hmacSum(sha256.New, secret, body))},
		}, body: body}
	}

	return []gwCase{
		{
			name: "stripe-go", scheme: "stripe", timestamped: true, libAcceptsFuture: true,
			secret: stripeSecret, wrongSecret: "whsec_" + hex.EncodeToString(randBytes(t, 16)),
			body: gwBody(`{"id":"evt_1QhQf2LkdIwHu7ix","object":"event","api_version":"2024-06-20","created":1736934000,"data":{"object":{"id":"in_1","object":"invoice","customer_name":"Zoë – 東京 🚀","description":"caf\u00e9","hosted_invoice_url":"https:\/\/invoice.stripe.com\/i\/acct_1"}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"invoice.paid"}`),
			sign: func(t *testing.T, secret string, at time.Time, body []byte) gwRequest {
				p := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
				return gwRequest{header: http.Header{
					"Content-Type":     {"application/json; charset=utf-8"},
					"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
					"Stripe-Signature": {p.Header},
				}, body: body}
			},
			verify: func(r gwRequest, secret string) error {
				return stripe.ValidatePayload(r.body, r.header.Get("Stripe-Signature"), secret)
			},
		},
		{
			name: "standardwebhooks", scheme: "standard-webhooks", timestamped: true,
			secret: stdSecret, wrongSecret: newSecret(t), body: stdBody("standardwebhooks"),
			sign: stdSign("standardwebhooks", "Webhook"), verify: stdVerify("standardwebhooks"),
		},
		{
			name: "svix", scheme: "standard-webhooks", timestamped: true,
			secret: stdSecret, wrongSecret: newSecret(t), body: stdBody("svix"),
			sign: stdSign("svix", "Svix"), verify: stdVerify("svix"),
		},
		{
			name: "go-github", scheme: "github",
			secret: githubSecret, wrongSecret: "gh-" + hex.EncodeToString(randBytes(t, 12)),
			body: gwBody(`{"ref":"refs\/heads\/main","repository":{"full_name":"octo\/hello","html_url":"https:\/\/github.com\/octo\/hello"},"head_commit":{"message":"Zoë: 東京 🚀 caf\u00e9"},"pusher":{"name":"octo"}}`),
			sign: func(t *testing.T, secret string, _ time.Time, body []byte) gwRequest {
				return githubRequest(secret, "a3f1c5e0-7b1e-11ef-8d2b-6f0c4e1b2a90", body)
			},
			verify: func(r gwRequest, secret string) error {
				payload, err := github.ValidatePayloadFromBody(r.header.Get("Content-Type"), bytes.NewReader(r.body), r.header.Get(github.SHA256SignatureHeader), []byte(secret))
				if err != nil {
					return err
				}
				if !bytes.Equal(payload, r.body) {
					return errors.New("go-github returned other bytes than the body")
				}
				// The legacy header GitHub sends alongside is right too.
				return github.ValidateSignature(r.header.Get(github.SHA1SignatureHeader), r.body, []byte(secret))
			},
			extra: func(t *testing.T, secret string, body []byte) []gwExtra {
				// Only the legacy SHA-1 header: go-github's ValidatePayload
				// falls back to it; Herald's github scheme requires SHA-256.
				r := githubRequest(secret, "b4e2d6f1-7b1e-11ef-8d2b-6f0c4e1b2a90", body)
				r.header.Del(github.SHA256SignatureHeader)
				return []gwExtra{{name: "SHA-1 X-Hub-Signature only", req: r, libAccept: true, verify: func(r gwRequest, secret string) error {
					req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(r.body))
					req.Header = r.header.Clone()
					_, err := github.ValidatePayload(req, []byte(secret))
					return err
				}}}
			},
		},
		{
			name: "slack-go", scheme: "slack", timestamped: true,
			secret: slackSecret, wrongSecret: hex.EncodeToString(randBytes(t, 16)),
			body: gwBody(`{"token":"XXYYZZ","team_id":"T0001","api_app_id":"A0001","event":{"type":"app_mention","user":"U0001","text":"<@U0002> Zoë – 東京 🚀 caf\u00e9 <https:\/\/example.com\/a\/b>","ts":"1736934000.000100","channel":"C0001"},"type":"event_callback","event_id":"Ev08MFMKH6","event_time":1736934000}`),
			sign: func(t *testing.T, secret string, at time.Time, body []byte) gwRequest {
				// Slack's documented rule: "v0=" + hex HMAC-SHA256(secret,
				// "v0:" + X-Slack-Request-Timestamp + ":" + body).
				ts := itoa(at.Unix())
				return gwRequest{header: http.Header{
					"Content-Type":              {"application/json"},
					"User-Agent":                {"Slackbot 1.0 (+https://api.slack.com/robots)"},
					"X-Slack-Request-Timestamp": {ts},
					"X-Slack-Signature":         {"v0=" + hex.EncodeToString(hmacSum(sha256.New, secret, []byte("v0:"+ts+":"), body))},
				}, body: body}
			},
			verify: func(r gwRequest, secret string) error {
				sv, err := slack.NewSecretsVerifier(r.header, secret)
				if err != nil {
					return err
				}
				if _, err := sv.Write(r.body); err != nil {
					return err
				}
				return sv.Ensure()
			},
		},
		{
			name: "shopify (documented rule, no library)", scheme: "shopify",
			secret: shopifySecret, wrongSecret: hex.EncodeToString(randBytes(t, 16)),
			body: gwBody(`{"id":820982911946154508,"email":"zoë@example.com","note":"東京 🚀 caf\u00e9","order_status_url":"https:\/\/shop.example\/orders\/1","line_items":[]}`),
			sign: func(t *testing.T, secret string, at time.Time, body []byte) gwRequest {
				// Shopify's documented rule: base64 HMAC-SHA256(secret, body).
				return gwRequest{header: http.Header{
					"Content-Type":           {"application/json"},
					"X-Shopify-Topic":        {"orders/create"},
					"X-Shopify-Shop-Domain":  {"shop.myshopify.com"},
					"X-Shopify-Api-Version":  {"2025-01"},
					"X-Shopify-Webhook-Id":   {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
					"X-Shopify-Triggered-At": {at.UTC().Format(time.RFC3339Nano)},
					"X-Shopify-Hmac-Sha256":  {base64.StdEncoding.EncodeToString(hmacSum(sha256.New, secret, body))},
				}, body: body}
			},
		},
	}
}

// TestGatewayAcceptsProviderLibraries is the test described at the top of
// this file.
func TestGatewayAcceptsProviderLibraries(t *testing.T) {
	h := startGatewayHerald(t)
	dest := newGatewayDestination(t)
	sources := map[string]gwSource{}
	cases := gatewayCases(t)
	for _, c := range cases {
		if _, ok := sources[c.scheme]; !ok {
			sources[c.scheme] = h.createSource(c.scheme, c.secret, dest.URL+"/"+c.scheme)
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := sources[c.scheme]
			now := time.Now()
			valid := c.sign(t, c.secret, now, c.body)
			if c.verify != nil {
				if err := c.verify(valid, c.secret); err != nil {
					t.Fatalf("%s refuses its own valid request: %v", c.name, err)
				}
			}

			// Refused requests first: nothing of them may be stored.
			type bad struct {
				name      string
				req       gwRequest
				libAccept bool
				verify    func(r gwRequest, secret string) error
			}
			var bads []bad
			for _, tb := range tamperings(t, c.body) {
				bads = append(bads, bad{"tampered body: " + tb.name, gwRequest{valid.header, tb.body}, false, nil})
			}
			bads = append(bads, bad{"wrong secret", c.sign(t, c.wrongSecret, now, c.body), false, nil})
			if c.timestamped {
				bads = append(bads,
					bad{"timestamp 10 minutes old", c.sign(t, c.secret, now.Add(-10*time.Minute), c.body), false, nil},
					bad{"timestamp 10 minutes ahead", c.sign(t, c.secret, now.Add(10*time.Minute), c.body), c.libAcceptsFuture, nil})
			}
			if c.extra != nil {
				for _, e := range c.extra(t, c.secret, c.body) {
					bads = append(bads, bad(e))
				}
			}
			before := h.storedEvents(src)
			for _, b := range bads {
				verify := c.verify
				if b.verify != nil {
					verify = b.verify
				}
				if verify != nil {
					err := verify(b.req, c.secret)
					if (err == nil) != b.libAccept {
						t.Errorf("%s: %s accepted=%v (err %v), want %v", b.name, c.name, err == nil, err, b.libAccept)
					}
					if err == nil {
						t.Logf("DISAGREEMENT %-42s %s accepts, Herald refuses", b.name+":", c.name)
					} else {
						t.Logf("agreement    %-42s %s refuses (%v)", b.name+":", c.name, err)
					}
				}
				if st, resp := h.ingest(src, b.req.header, b.req.body); st != http.StatusUnauthorized {
					t.Errorf("%s: Herald answered %d %s, want 401", b.name, st, resp)
				} else if strings.Contains(resp, "secret") || strings.Contains(resp, "timestamp") {
					t.Errorf("%s: the 401 gives detail away: %s", b.name, resp)
				}
			}
			if n := h.storedEvents(src); n != before {
				t.Fatalf("refused requests stored %d events", n-before)
			}

			// The valid request: accepted once, forwarded with the exact bytes.
			st, resp := h.ingest(src, valid.header, valid.body)
			var first gwAnswer
			if st != http.StatusOK || json.Unmarshal([]byte(resp), &first) != nil || !first.Received || first.Duplicate || !strings.HasPrefix(first.ID, "evt_") {
				t.Fatalf("valid request: %d %s, want 200 {\"received\":true,\"id\":\"evt_…\"}", st, resp)
			}
			again := func(what string, r gwRequest) {
				t.Helper()
				st, resp := h.ingest(src, r.header, r.body)
				var a gwAnswer
				if st != http.StatusOK || json.Unmarshal([]byte(resp), &a) != nil || !a.Duplicate || a.Received || (a.ID != "" && a.ID != first.ID) {
					t.Errorf("%s: %d %s, want 200 {\"duplicate\":true}", what, st, resp)
				}
			}
			again("the same request again", valid)
			if c.timestamped {
				// A provider's retry is signed anew: another timestamp, so other
				// signature bytes, but the same event id.
				resigned := c.sign(t, c.secret, now.Add(-30*time.Second), c.body)
				if c.verify != nil {
					if err := c.verify(resigned, c.secret); err != nil {
						t.Fatalf("%s refuses the re-signed retry: %v", c.name, err)
					}
				}
				again("a retry signed anew", resigned)
			}
			if n := h.storedEvents(src); n != before+1 {
				t.Fatalf("%d events stored, want exactly 1", n-before)
			}

			var fwd []gwForward
			for deadline := time.Now().Add(15 * time.Second); len(fwd) == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				fwd = dest.forwardsOf(first.ID)
			}
			if len(fwd) == 0 {
				t.Fatalf("event %s never reached the destination", first.ID)
			}
			time.Sleep(200 * time.Millisecond) // a second forward would show up here
			if fwd = dest.forwardsOf(first.ID); len(fwd) != 1 {
				t.Fatalf("destination got %d forwards of %s, want 1", len(fwd), first.ID)
			}
			f := fwd[0]
			if f.path != "/"+c.scheme {
				t.Errorf("forwarded to %s, want /%s", f.path, c.scheme)
			}
			if !bytes.Equal(f.body, c.body) {
				t.Errorf("destination got other bytes:\n got %q\nwant %q", f.body, c.body)
			}
			// The forward carries Herald's own signature.
			v := &webhook.Verifier{Secrets: []string{h.forwardSecret(src)}}
			if err := v.VerifyHerald(f.header.Get(webhook.HeaderSignature), f.body); err != nil {
				t.Errorf("the forward is not signed by Herald: %v", err)
			}
			// And the library still vouches for the provider's headers as
			// forwarded with the body (those Herald renames excepted:
			// webhook-* and svix-* travel as X-Original-*, so a receiver's
			// library checks Herald's own signature instead).
			if c.verify != nil && c.name != "standardwebhooks" && c.name != "svix" {
				if err := c.verify(gwRequest{f.header, f.body}, c.secret); err != nil {
					t.Errorf("%s refuses the forwarded request: %v", c.name, err)
				}
			}
		})
	}
}
