package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

var dot = []byte{'.'}

// SignHerald returns the Herald/Stripe v1 signature for one message: the
// lowercase hex HMAC-SHA256, keyed with the bytes of secret as given
// (including any "whsec_" prefix), over "<timestamp>.<body>" where timestamp
// is unix seconds in decimal. The X-Signature header value is
// "t=<timestamp>,v1=<result>". Rule: Stripe, "Verify webhook signatures
// manually" (https://docs.stripe.com/webhooks).
//
// SignHerald does not validate secret; an empty secret yields a MAC anyone
// can compute. Check secrets with [ValidateSecret] or use [NewSigner].
func SignHerald(secret string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	var ts [20]byte
	mac.Write(strconv.AppendInt(ts[:0], timestamp, 10))
	mac.Write(dot)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// SignStandard returns the Standard Webhooks v1 signature for one message:
// the standard (padded) base64 HMAC-SHA256 over "<msgID>.<timestamp>.<body>"
// (timestamp in unix seconds, decimal), keyed with the base64-decoded part of
// secret after "whsec_" (a secret without the prefix is decoded whole). The
// result has no "v1," prefix; the webhook-signature header entry is
// "v1,<result>". Rule: Standard Webhooks spec, "Signature scheme"
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
//
// The error wraps [ErrInvalidSecret] when secret fails [ValidateSecret].
func SignStandard(secret string, msgID string, timestamp int64, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	var ts [20]byte
	mac.Write([]byte(msgID))
	mac.Write(dot)
	mac.Write(strconv.AppendInt(ts[:0], timestamp, 10))
	mac.Write(dot)
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Signer signs delivery attempts with every active secret of an endpoint,
// in both schemes at once. Keys are derived once in [NewSigner]; a Signer is
// immutable and safe for concurrent use. Create a new Signer when the set
// of active secrets changes (rotation).
type Signer struct {
	heraldKeys   [][]byte
	standardKeys [][]byte
	pool         sync.Pool // *signState
}

// signState is per-goroutine scratch space: keyed HMAC states that are
// Reset between uses instead of re-keyed, and buffers, so that Sign
// allocates only the header values it returns.
type signState struct {
	herald   []hash.Hash
	standard []hash.Hash
	ts       [20]byte
	sum      [sha256.Size]byte
	enc      [64]byte // hex (64) or base64 (44) of sum
	prefix   []byte   // "<msgID>.<t>."
}

// NewSigner returns a Signer for the given secrets, in the order their
// signatures will appear in the headers (put the newest first). Each secret
// must pass [ValidateSecret], because a Signer always signs with both
// schemes; secrets from [NewSecret] always do.
//
// The error wraps [ErrInvalidSecret] when no secret is given or one is
// invalid (the message names its position, never its value).
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secrets", ErrInvalidSecret)
	}
	if len(secrets) > maxEntries {
		return nil, fmt.Errorf("%w: more than %d secrets (verifiers reject more signature entries)", ErrInvalidSecret, maxEntries)
	}
	s := &Signer{
		heraldKeys:   make([][]byte, len(secrets)),
		standardKeys: make([][]byte, len(secrets)),
	}
	for i, secret := range secrets {
		key, err := standardKey(secret)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		s.heraldKeys[i] = []byte(secret)
		s.standardKeys[i] = key
	}
	s.pool.New = func() any {
		st := &signState{
			herald:   make([]hash.Hash, len(s.heraldKeys)),
			standard: make([]hash.Hash, len(s.standardKeys)),
		}
		for i := range s.heraldKeys {
			st.herald[i] = hmac.New(sha256.New, s.heraldKeys[i])
			st.standard[i] = hmac.New(sha256.New, s.standardKeys[i])
		}
		return st
	}
	return s, nil
}

// Sign sets the signature headers of one delivery attempt on h (which must
// be non-nil), replacing earlier values:
//
//	X-Signature:       t=<t>,v1=<hex>[,v1=<hex>...]   (Herald/Stripe scheme)
//	Webhook-Id:        <msgID>
//	Webhook-Timestamp: <t>
//	Webhook-Signature: v1,<base64>[ v1,<base64>...]   (Standard Webhooks)
//
// with one v1 entry per secret, in the order given to [NewSigner]. t is the
// time of the attempt (not of the event), truncated to unix seconds; it must
// not be before 1970. msgID is the event id (stable across attempts) and
// must be a valid header value. body must be exactly the bytes sent.
func (s *Signer) Sign(h http.Header, msgID string, t time.Time, body []byte) {
	st := s.pool.Get().(*signState)
	defer s.pool.Put(st)

	ts := strconv.AppendInt(st.ts[:0], t.Unix(), 10)
	n := len(s.heraldKeys)

	// X-Signature: "t=" ts (",v1=" 64 hex)*n
	var hb strings.Builder
	hb.Grow(2 + len(ts) + n*(4+hex.EncodedLen(sha256.Size)))
	hb.WriteString("t=")
	hb.Write(ts)
	for _, mac := range st.herald {
		mac.Reset()
		mac.Write(ts)
		mac.Write(dot)
		mac.Write(body)
		hex.Encode(st.enc[:], mac.Sum(st.sum[:0]))
		hb.WriteString(",v1=")
		hb.Write(st.enc[:hex.EncodedLen(sha256.Size)])
	}
	heraldHeader := hb.String()

	// Webhook-Signature: "v1," 44 base64 (" v1," 44 base64)*(n-1)
	st.prefix = append(append(append(append(st.prefix[:0], msgID...), '.'), ts...), '.')
	const b64Len = 44 // base64.StdEncoding.EncodedLen(sha256.Size)
	var sb strings.Builder
	sb.Grow(n*(3+b64Len) + n - 1)
	for i, mac := range st.standard {
		mac.Reset()
		mac.Write(st.prefix)
		mac.Write(body)
		base64.StdEncoding.Encode(st.enc[:], mac.Sum(st.sum[:0]))
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.Write(st.enc[:b64Len])
	}

	// One backing array for the four header value slices.
	vals := make([]string, 4)
	vals[0] = heraldHeader
	vals[1] = msgID
	vals[2] = heraldHeader[2 : 2+len(ts)] // the timestamp, without another allocation
	vals[3] = sb.String()
	h[HeaderSignature] = vals[0:1:1]
	h[HeaderWebhookID] = vals[1:2:2]
	h[HeaderWebhookTimestamp] = vals[2:3:3]
	h[HeaderWebhookSignature] = vals[3:4:4]
}
