package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// Defaults of [HandlerConfig].
const (
	// DefaultMaxBodyBytes is the largest request body the middleware reads
	// (1 MiB); a larger one is answered 413.
	DefaultMaxBodyBytes = 1 << 20

	// DefaultDedupeTTL is how long a processed event id is remembered
	// (72 h). It should exceed the longest retry horizon of every sender:
	// Herald retries for about 35 h, Stripe for up to 3 days.
	DefaultDedupeTTL = 72 * time.Hour

	// DefaultLease is how long a claim on an event id being processed blocks
	// redeliveries of that id (5 min). If the process dies while handling an
	// event, the claim lapses after the lease and the sender's next retry is
	// processed. It should exceed the handler's longest run time: a
	// redelivery arriving after the lease while the first run is still going
	// is processed concurrently.
	DefaultLease = 5 * time.Minute

	// inProgressRetryAfter is the Retry-After (seconds) sent with the 503
	// that answers a redelivery whose first delivery is still being handled.
	inProgressRetryAfter = "30"

	// maxKeyLen caps the store key: longer event ids are replaced by
	// "sha256:" + the hex SHA-256 of the id.
	maxKeyLen = 200

	// storeTimeout bounds Complete and Release after the handler ran; they
	// run even if the client has gone away.
	storeTimeout = 10 * time.Second
)

// HeaderEventID is the header in which Herald sends the event id on every
// delivery ("X-Event-Id"), besides webhook-id. No signature covers it:
// [Middleware] never takes the event id from it.
const HeaderEventID = "X-Event-Id"

// Errors the middleware reports to [HandlerConfig.OnError], besides the
// verification errors of [Verifier.Verify] and the errors of the store.
var (
	// ErrBodyTooLarge: the body is longer than MaxBodyBytes (answered 413).
	ErrBodyTooLarge = errors.New("webhook: request body too large")
	// ErrUnsignedEventID: a request verified by X-Signature alone, with
	// HandlerConfig.AllowBodyID off (answered 400 {"error":"event id not
	// signed"}). X-Signature signs the timestamp and the body only, and
	// X-Event-Id is not signed, so nothing signed names the message: a
	// copy resent within the tolerance without the webhook-* headers and
	// under a new X-Event-Id would be handled again. Herald sends the
	// Standard Webhooks headers on every attempt; their webhook-id is
	// signed.
	ErrUnsignedEventID = errors.New("webhook: event id not signed: X-Signature signs only the timestamp and the body and X-Event-Id is not signed; " +
		"the request must carry the Standard Webhooks headers (webhook-id is signed), or set HandlerConfig.AllowBodyID for a sender whose signed body's \"id\" is the event id")
	// ErrMissingEventID: with HandlerConfig.AllowBodyID, a request verified
	// by X-Signature alone has no top-level "id" string in its JSON body
	// (answered 400); X-Event-Id alone is never used, as it is not signed.
	ErrMissingEventID = errors.New(`webhook: missing event id: no top-level "id" string in the signed body (X-Event-Id is not signed and never used alone)`)
	// ErrEventIDMismatch: with HandlerConfig.AllowBodyID, X-Event-Id
	// differs from the "id" of the signed JSON body, or was sent twice
	// (answered 400).
	ErrEventIDMismatch = errors.New("webhook: X-Event-Id does not match the signed body")
	// ErrIdempotencyStore: the store failed; wraps the store's error too.
	// A failing Claim is answered 503 and the handler is not called.
	ErrIdempotencyStore = errors.New("webhook: idempotency store failed")
	// ErrHandlerPanic: the wrapped handler panicked (answered 500 when it
	// had not written a status yet; the claim is released). The message
	// holds the panic value and the stack.
	ErrHandlerPanic = errors.New("webhook: handler panicked")
)

// HandlerConfig configures [Middleware].
type HandlerConfig struct {
	// Verifier checks the signature (both schemes, every secret in it).
	// Required.
	Verifier *Verifier

	// Store remembers event ids. Required; [NewMemoryStore] for a single
	// process, sqlstore or redisstore when several processes share the work.
	Store IdempotencyStore

	// Namespace is prepended to every event id to form the store key, e.g.
	// "stripe:" so that ids of different senders sharing a store cannot
	// collide. Optional.
	Namespace string

	// MaxBodyBytes caps the request body in bytes; zero or negative means
	// DefaultMaxBodyBytes (1 MiB). A larger body is answered 413.
	MaxBodyBytes int64

	// TTL is how long a completed event id is remembered; zero or negative
	// means DefaultDedupeTTL (72 h).
	TTL time.Duration

	// Lease is how long a claim on an event id being handled lasts; zero or
	// negative means DefaultLease (5 min).
	Lease time.Duration

	// AllowBodyID lets a request signed with X-Signature alone (no
	// webhook-* or svix-* headers) through, with the top-level "id" string
	// of its signed JSON body as the event id (X-Event-Id, if sent, must
	// equal it). Off (the default), such a request is refused 400 with
	// [ErrUnsignedEventID]. X-Signature signs only the timestamp and the
	// body, so turn it on only for a sender whose every signed body carries
	// its own message id there and that also sends nothing else signed
	// with the same secret: Stripe's events, Herald's own events (their
	// "id" is the webhook-id). Never for Herald's inbound forwards: their
	// body is the provider's, without an "id" or with the provider's,
	// while their webhook-id is Herald's evt_…, so a copy stripped of the
	// webhook-* headers would be claimed under another key and handled
	// twice (docs/inbound.md).
	AllowBodyID bool

	// OnError, if set, is called with the real reason of every request
	// refused with an error status (401 bad signature, 413 oversize body,
	// 400 unsigned, missing or mismatched event id, 503 store failure) and
	// of every failure after the handler ran (store Complete/Release
	// errors, handler panics). Duplicates (200 {"duplicate":true}) and events still in
	// progress elsewhere (503 with Retry-After) are normal outcomes, not
	// errors: they are not reported here. Use it for logging; the client
	// only gets a fixed message. It may be called concurrently and must not
	// write to the response.
	OnError func(r *http.Request, err error)
}

// Fixed response bodies; none says more than the status code.
const (
	bodyInvalidSignature = `{"error":"invalid signature"}`
	bodyTooLarge         = `{"error":"payload too large"}`
	bodyUnreadable       = `{"error":"unreadable body"}`
	bodyMissingID        = `{"error":"missing event id"}`
	bodyIDMismatch       = `{"error":"event id mismatch"}`
	bodyUnsignedID       = `{"error":"event id not signed"}`
	bodyUnavailable      = `{"error":"temporarily unavailable"}`
	bodyInProgress       = `{"error":"event in progress"}`
	bodyInternal         = `{"error":"internal error"}`
	bodyDuplicate        = `{"duplicate":true}`
)

// Middleware returns a receiver middleware: it lets a webhook through to
// the wrapped handler only once per event id, and only if it is signed by
// one of the Verifier's secrets. Step by step, for every request:
//
//  1. Read the raw body, at most MaxBodyBytes: a larger body (by
//     Content-Length or by counting) is answered 413
//     {"error":"payload too large"}; a read error 400.
//  2. Verify it with [Verifier.Verify] (X-Signature and/or webhook-* or
//     svix-* headers, within the replay window). Any failure is answered
//     401 {"error":"invalid signature"}, whatever the reason (log it with
//     OnError); ErrInvalidSecret, a receiver misconfiguration, is 500.
//  3. Find the event id, from signed content only: webhook-id, else
//     svix-id (both covered by the Standard Webhooks signature, so the id
//     cannot be altered; Herald sends webhook-id on every attempt). A
//     request verified by X-Signature alone is refused 400 {"error":"event
//     id not signed"} ([ErrUnsignedEventID]): that signature covers only
//     the timestamp and the body, and X-Event-Id is not signed, so a copy
//     resent under new X-Event-Ids would be handled each time. With
//     AllowBodyID it is let through instead, keyed on the top-level "id"
//     string of the signed JSON body (Stripe's events); X-Event-Id, if
//     sent, must equal it ([ErrEventIDMismatch]), and no such "id" is
//     [ErrMissingEventID]: both 400.
//  4. Claim Namespace + id in the Store for Lease. A store error is
//     answered 503 {"error":"temporarily unavailable"}; an id already
//     completed is answered 200 {"duplicate":true}; an id whose first
//     delivery is still being handled is answered 503 with Retry-After: 30
//     {"error":"event in progress"}, so the sender retries later (answering
//     2xx would lose the event if that first delivery then fails). The
//     handler is not called in any of these cases.
//  5. Call the handler with r.Body holding the same raw bytes; they are
//     also available as [RawBody](r), and the id as [EventID](r).
//  6. If the handler answered 2xx (or wrote nothing, which net/http sends
//     as 200), Complete the claim for TTL. Otherwise (3xx, 4xx, 5xx) or if
//     it panicked, Release the claim, so the sender's retry reaches the
//     handler again and gets its own answer: senders retry non-2xx answers
//     (Herald: 5xx, 408 and 429 on its schedule, other 4xx and 3xx twice,
//     then dead letter; Stripe and Standard Webhooks: every non-2xx), and
//     a retry answered 200 {"duplicate":true} would mark a refused event
//     delivered. A panic is recovered and answered 500
//     {"error":"internal error"} if nothing was written yet
//     (http.ErrAbortHandler is re-panicked after the release).
//
// Every answer of the middleware itself is JSON with Content-Type
// application/json. Middleware panics if cfg.Verifier or cfg.Store is nil.
//
// References: the Standard Webhooks spec, "Webhook headers" (webhook-id is
// the unique message identifier, the same on every retry of a message) and
// "Verifying signatures"
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md);
// Stripe's webhook best practices, "Handle duplicate events" and "Quickly
// return a 2xx response" (https://docs.stripe.com/webhooks#best-practices).
func Middleware(cfg HandlerConfig) func(http.Handler) http.Handler {
	if cfg.Verifier == nil {
		panic("webhook.Middleware: HandlerConfig.Verifier is nil")
	}
	if cfg.Store == nil {
		panic("webhook.Middleware: HandlerConfig.Store is nil")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultDedupeTTL
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	return func(next http.Handler) http.Handler {
		return &receiver{cfg: cfg, next: next}
	}
}

type receiver struct {
	cfg  HandlerConfig
	next http.Handler
}

func (h *receiver) onError(r *http.Request, err error) {
	if h.cfg.OnError != nil {
		h.cfg.OnError(r, err)
	}
}

func (h *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// 1. Raw body with a size cap.
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		h.onError(r, err)
		if errors.Is(err, ErrBodyTooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, bodyTooLarge)
		} else {
			writeJSON(w, http.StatusBadRequest, bodyUnreadable)
		}
		return
	}

	// 2. Signature.
	if err := h.cfg.Verifier.Verify(r.Header, body); err != nil {
		h.onError(r, err)
		if errors.Is(err, ErrInvalidSecret) {
			writeJSON(w, http.StatusInternalServerError, bodyInternal)
		} else {
			writeJSON(w, http.StatusUnauthorized, bodyInvalidSignature)
		}
		return
	}

	// 3. Event id.
	id, err := signedEventID(r.Header, body, h.cfg.AllowBodyID)
	if err != nil {
		h.onError(r, err)
		switch {
		case errors.Is(err, ErrUnsignedEventID):
			writeJSON(w, http.StatusBadRequest, bodyUnsignedID)
		case errors.Is(err, ErrEventIDMismatch):
			writeJSON(w, http.StatusBadRequest, bodyIDMismatch)
		default:
			writeJSON(w, http.StatusBadRequest, bodyMissingID)
		}
		return
	}
	key := storeKey(h.cfg.Namespace, id)

	// 4. Claim.
	status, err := h.cfg.Store.Claim(r.Context(), key, h.cfg.Lease)
	if err != nil {
		h.onError(r, fmt.Errorf("%w: claim: %w", ErrIdempotencyStore, err))
		writeJSON(w, http.StatusServiceUnavailable, bodyUnavailable)
		return
	}
	switch status {
	case ClaimAcquired:
	case ClaimCompleted:
		writeJSON(w, http.StatusOK, bodyDuplicate)
		return
	case ClaimInProgress:
		w.Header().Set("Retry-After", inProgressRetryAfter)
		writeJSON(w, http.StatusServiceUnavailable, bodyInProgress)
		return
	default:
		h.onError(r, fmt.Errorf("%w: claim returned %v", ErrIdempotencyStore, status))
		writeJSON(w, http.StatusServiceUnavailable, bodyUnavailable)
		return
	}

	// 5. Handler, with the raw body restored.
	r2 := r.WithContext(context.WithValue(r.Context(), infoKey{}, &requestInfo{body: body, id: id}))
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	sw := &statusWriter{ResponseWriter: w}
	panicVal, panicked := serve(h.next, sw, r2)

	// 6. Keep or give back the claim, even if the client has gone away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
	defer cancel()
	switch {
	case panicked:
		h.onError(r, fmt.Errorf("%w: %v\n%s", ErrHandlerPanic, panicVal.value, panicVal.stack))
		if err := h.cfg.Store.Release(ctx, key); err != nil {
			h.onError(r, fmt.Errorf("%w: release: %w", ErrIdempotencyStore, err))
		}
		if panicVal.value == http.ErrAbortHandler {
			panic(http.ErrAbortHandler)
		}
		if sw.status == 0 {
			writeJSON(w, http.StatusInternalServerError, bodyInternal)
		}
	case !succeeded(sw.status):
		if err := h.cfg.Store.Release(ctx, key); err != nil {
			h.onError(r, fmt.Errorf("%w: release: %w", ErrIdempotencyStore, err))
		}
	default:
		if err := h.cfg.Store.Complete(ctx, key, h.cfg.TTL); err != nil {
			h.onError(r, fmt.Errorf("%w: complete: %w", ErrIdempotencyStore, err))
		}
	}
}

// succeeded reports whether a handler's status tells the sender the event
// was taken: 2xx, or 0 (nothing written, which net/http sends as 200).
// Every other answer is retried by the sender (the Herald contract,
// docs/contract.md, "what is retried": other 4xx and 3xx twice; Stripe and
// the Standard Webhooks spec: any non-2xx), so its claim must be released.
func succeeded(status int) bool {
	return status == 0 || (status >= 200 && status < 300)
}

type panicInfo struct {
	value any
	stack []byte
}

// serve runs the handler and recovers a panic.
func serve(next http.Handler, w http.ResponseWriter, r *http.Request) (p panicInfo, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			p = panicInfo{value: v, stack: debug.Stack()}
			panicked = true
		}
	}()
	next.ServeHTTP(w, r)
	return p, false
}

// readBody reads the whole body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: Content-Length %d, limit %d bytes", ErrBodyTooLarge, r.ContentLength, limit)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, nil
	}
	n := 512
	if r.ContentLength > 0 {
		n = int(r.ContentLength) + 1 // +1: ReadAll needs room to see EOF
	}
	buf := bytes.NewBuffer(make([]byte, 0, n))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
		}
		return nil, fmt.Errorf("webhook: reading request body: %w", err)
	}
	return buf.Bytes(), nil
}

// signedEventID returns the event id of a verified request, taken from
// signed content only (see step 3 of [Middleware]): the dedupe key of one
// message must be the same whichever of its headers a copy keeps, or a copy
// is claimed under another key and handled again.
func signedEventID(h http.Header, body []byte, allowBodyID bool) (string, error) {
	// Verify used the webhook-* set when any of it was present, else the
	// svix-* set; either way the id it verified is non-empty and signed.
	if h.Get(HeaderWebhookID) != "" || h.Get(HeaderWebhookTimestamp) != "" || h.Get(HeaderWebhookSignature) != "" {
		return h.Get(HeaderWebhookID), nil
	}
	if id := h.Get(headerSvixID); id != "" {
		return id, nil
	}
	// X-Signature alone: it covers the timestamp and the body, not the
	// headers.
	if !allowBodyID {
		return "", ErrUnsignedEventID
	}
	hdrs := h[HeaderEventID]
	if len(hdrs) > 1 {
		return "", fmt.Errorf("%w: %s sent %d times", ErrEventIDMismatch, HeaderEventID, len(hdrs))
	}
	bodyID, _ := jsonID(body)
	switch {
	case bodyID == "":
		return "", ErrMissingEventID
	case len(hdrs) == 1 && hdrs[0] != bodyID:
		return "", ErrEventIDMismatch
	}
	return bodyID, nil
}

// jsonID returns the top-level "id" member of a JSON object body when it is
// a string. The key must be exactly "id" (encoding/json would also match
// "ID"); with duplicate keys the last wins, as in encoding/json.
func jsonID(body []byte) (string, bool) {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return "", false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return "", false
	}
	raw, ok := members["id"]
	if !ok {
		return "", false
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return "", false
	}
	return id, true
}

// storeKey forms the store key of an event id.
func storeKey(namespace, id string) string {
	if len(namespace)+len(id) <= maxKeyLen {
		return namespace + id
	}
	sum := sha256.Sum256([]byte(id))
	return namespace + "sha256:" + hex.EncodeToString(sum[:])
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // the client may be gone; nothing to do
}

type infoKey struct{}

type requestInfo struct {
	body []byte
	id   string
}

// RawBody returns the exact request body that [Middleware] verified (the
// same bytes are in r.Body when the handler starts), or nil when r did not
// pass through the middleware. The slice is shared: do not modify it.
func RawBody(r *http.Request) []byte {
	if info, ok := r.Context().Value(infoKey{}).(*requestInfo); ok {
		return info.body
	}
	return nil
}

// EventID returns the event id that [Middleware] claimed for r (without the
// Namespace), or "" when r did not pass through the middleware.
func EventID(r *http.Request) string {
	if info, ok := r.Context().Value(infoKey{}).(*requestInfo); ok {
		return info.id
	}
	return ""
}

// statusWriter records the status the handler sent.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until a final (>= 200) status is sent
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets handlers that assert http.Flusher stream through.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
