package inbound_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
)

// eventStore is an errStore that records the event published.
type eventStore struct {
	errStore
	ev *store.Event
}

func (s eventStore) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	*s.ev = p.Event
	return s.errStore.PublishEvent(ctx, p)
}

// TestJSONBodyWithByteOrderMark: a JSON body that starts with a UTF-8 byte
// order mark (EF BB BF), which RFC 8259 §8.1 lets a parser ignore, is read
// without it: the event is named after its "type", and Slack's
// url_verification challenge is answered. The signature is verified over
// the bytes as received, BOM included, and the event stores those bytes
// unchanged (they are what is forwarded and what the provider signed).
func TestJSONBodyWithByteOrderMark(t *testing.T) {
	const secret = "whsec_bom_0123456789"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sign := func(msg string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(msg))
		return hex.EncodeToString(m.Sum(nil))
	}
	serve := func(sch string, body []byte, hdr http.Header) (*httptest.ResponseRecorder, store.Event) {
		var ev store.Event
		cfg := fmt.Appendf(nil, `{"scheme":%q,"secrets":[%q]}`, sch, secret)
		g := inbound.New(inbound.Config{Store: eventStore{errStore{source: store.Source{Config: cfg}}, &ev}, Now: func() time.Time { return now }})
		mux := http.NewServeMux()
		mux.Handle("/in/{source_id}", g)
		req := httptest.NewRequest("POST", "/in/src_bom", bytes.NewReader(body))
		req.Header = hdr
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w, ev
	}
	unix := strconv.FormatInt(now.Unix(), 10)

	body := []byte("\xef\xbb\xbf{\"id\":\"evt_bom\",\"type\":\"invoice.paid\"}")
	w, ev := serve("stripe", body, http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=" + unix + ",v1=" + sign(unix+"."+string(body))}})
	if w.Code != 200 || ev.Type != "stripe.invoice.paid" || !bytes.Equal(ev.Body, body) {
		t.Errorf("stripe with a BOM: %d %s, stored type %q body %q; want 200, stripe.invoice.paid and the bytes received", w.Code, w.Body, ev.Type, ev.Body)
	}
	// Signed without the BOM, sent with it: the bytes received are what is
	// verified, so this is refused.
	w, _ = serve("stripe", body, http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=" + unix + ",v1=" + sign(unix+"."+string(body[3:]))}})
	if w.Code != 401 {
		t.Errorf("signed without the BOM, sent with it: %d %s; want 401", w.Code, w.Body)
	}

	body = []byte("\xef\xbb\xbf{\"token\":\"t\",\"challenge\":\"ch4ll3nge\",\"type\":\"url_verification\"}")
	w, _ = serve("slack", body, http.Header{"Content-Type": {"application/json"}, "X-Slack-Request-Timestamp": {unix}, "X-Slack-Signature": {"v0=" + sign("v0:"+unix+":"+string(body))}})
	if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`"challenge":"ch4ll3nge"`)) {
		t.Errorf("slack url_verification with a BOM: %d %s; want 200 with the challenge", w.Code, w.Body)
	}
}
