// Package inbound is Herald's receiving half: a gateway in front of a
// service that receives webhooks from providers (Stripe, GitHub, Shopify,
// Slack, Standard Webhooks senders, other Herald instances).
//
// POST /in/{source_id}: read the raw bytes up to the source's cap (413),
// verify the provider's signature on those bytes (401 without detail),
// extract the provider's event id as the dedupe key, and store the event
// with the key unique per source in one transaction (the same statement
// answers "duplicate"); only then answer 200. The event is then forwarded
// asynchronously to the source's destination by the delivery engine —
// retries, dead letters, replay and metrics apply — with the original body
// bytes, the provider's headers, and Herald's own signature.
package inbound

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-webhooks/herald/internal/inbound/scheme"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// Defaults of a source.
const (
	DefaultMaxBodyBytes = 1 << 20 // 1 MiB
	MaxMaxBodyBytes     = 16 << 20
	// MinMaxBodyBytes is the smallest body cap a source may set (0 being
	// the default): 1 KiB. The smallest real provider webhooks are a few
	// hundred bytes (a Slack url_verification, a GitHub ping without its
	// hook object, a Standard Webhooks test event), and a Stripe event or
	// a GitHub ping are several KiB: a smaller cap refuses nearly every
	// real event (413), and is a mistake, e.g. KiB meant and bytes given.
	MinMaxBodyBytes  = 1 << 10
	DefaultTolerance = 300 * time.Second
	// MaxToleranceSeconds is the widest replay window a source may set.
	MaxToleranceSeconds = 3600
)

// The rules of a source's integer settings, as a refusal names them: the
// API answers a value out of range, not an integer, or an integer written
// with an exponent or a fraction with the rule, located at the field.
const (
	MaxBodyBytesRule = "max_body_bytes must be an integer number of bytes from 1024 (1 KiB: real providers' webhooks do not fit in less) to 16777216 (16 MiB), or 0 for the default (1048576, 1 MiB)"
	ToleranceRule    = "tolerance_seconds must be an integer number of seconds from 1 to 3600 (1 hour), or 0 for the default (300)"
)

// SourceConfig is the verification and dedupe configuration of a source,
// stored sealed (it holds the provider's secrets).
type SourceConfig struct {
	Scheme           string             `json:"scheme"`
	Secrets          []string           `json:"secrets"`
	ToleranceSeconds int                `json:"tolerance_seconds,omitempty"`
	Dedupe           string             `json:"dedupe,omitempty"` // "" (the scheme's id), "header:Name" or "json:/pointer"
	MaxBodyBytes     int64              `json:"max_body_bytes,omitempty"`
	HMAC             *scheme.HMACConfig `json:"hmac,omitempty"`
}

// Scheme returns the verification configuration.
func (c SourceConfig) SchemeConfig() scheme.Config {
	tol := DefaultTolerance
	if c.ToleranceSeconds > 0 {
		tol = time.Duration(c.ToleranceSeconds) * time.Second
	}
	return scheme.Config{Scheme: c.Scheme, Secrets: c.Secrets, Tolerance: tol, HMAC: c.HMAC}
}

// ReplayWindowSeconds is the replay window the source applies, in seconds:
// 0 for a scheme that signs no timestamp (github, shopify, hmac without
// timestamp_header), which has none.
func (c SourceConfig) ReplayWindowSeconds() int {
	if !scheme.ReplayWindow(c.SchemeConfig()) {
		return 0
	}
	return int(c.SchemeConfig().Tolerance / time.Second)
}

// Limit returns the body cap in bytes.
func (c SourceConfig) Limit() int64 {
	if c.MaxBodyBytes > 0 {
		return c.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// Validate checks the configuration; errors name the rule. Each setting
// is checked and every refusal returned, joined (errors.Join) in the
// order of the settings: the scheme's configuration (its first refusal, a
// *scheme.ConfigError), then *FieldError's for tolerance_seconds,
// max_body_bytes and dedupe, so that the API lists them all at once.
func (c SourceConfig) Validate() error {
	var errs []error
	schemeErr := c.SchemeConfig().Validate()
	if schemeErr != nil {
		errs = append(errs, schemeErr)
	}
	if c.ToleranceSeconds < 0 || c.ToleranceSeconds > MaxToleranceSeconds {
		errs = append(errs, &FieldError{Field: "tolerance_seconds", Value: c.ToleranceSeconds, Err: errors.New(ToleranceRule)})
	} else if c.ToleranceSeconds != 0 && schemeErr == nil && !scheme.ReplayWindow(c.SchemeConfig()) {
		// It would be stored, shown and never applied. (Told only for a
		// scheme configuration that is valid: an invalid one signs
		// nothing yet.)
		name := c.Scheme
		if c.Scheme == scheme.HMAC {
			name += " without hmac.timestamp_header"
		}
		errs = append(errs, &FieldError{Field: "tolerance_seconds", Err: fmt.Errorf("tolerance_seconds %d: scheme %s signs no timestamp, so it has no replay window to set; leave tolerance_seconds 0", c.ToleranceSeconds, name)})
	}
	if c.MaxBodyBytes != 0 && (c.MaxBodyBytes < MinMaxBodyBytes || c.MaxBodyBytes > MaxMaxBodyBytes) {
		errs = append(errs, &FieldError{Field: "max_body_bytes", Value: c.MaxBodyBytes, Err: errors.New(MaxBodyBytesRule)})
	}
	if c.Dedupe != "" {
		if err := scheme.ValidateDedupeRule(c.Dedupe); err != nil {
			errs = append(errs, &FieldError{Field: "dedupe", Err: fmt.Errorf(`%w; an empty rule is the scheme's own (its event id; the SHA-256 of the body for github, shopify and hmac)`, err)})
		} else if strings.HasPrefix(c.Dedupe, "header:") && schemeErr == nil && bodyDedupe(c) {
			// It would be accepted and never used: see bodyDedupe.
			errs = append(errs, &FieldError{Field: "dedupe", Err: fmt.Errorf("dedupe %q: scheme %s signs no timestamp, so its requests are deduped on the signed body and a header (which no signature covers) is never used; leave dedupe empty or use a json: rule", c.Dedupe, c.Scheme)})
		}
	}
	return errors.Join(errs...)
}

// FieldError is an error of SourceConfig.Validate about one setting,
// named by its JSON field (tolerance_seconds, max_body_bytes, dedupe), so
// that the API can name it as the error's location (body.dedupe) as it
// does for the fields its schema checks. Value, when set, is the refused
// value (a number; never a secret), which the API repeats.
type FieldError struct {
	Field string
	Value any
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Config configures the gateway.
type Config struct {
	Store  store.Store
	Notify func() // wakes the delivery engine
	// NotifyFanOut tells the engine that a publish left deliveries for it
	// to create (store.PublishResult.FanOut), and FanOutChunk is the
	// deliveries a publish writes before that (herald serve
	// --fanout-chunk; 0: store.DefaultFanOutChunk), as for the API's
	// publishes.
	NotifyFanOut func()
	FanOutChunk  int
	Now          func() time.Time
	Metrics      *metrics.Metrics
	Logger       *slog.Logger
	// Tracer, optional (nil: tracing off): a server span per request.
	Tracer *tracing.Tracer
	// CacheTTL bounds how long a source's configuration is cached; default
	// 2 s (a changed secret takes effect within it).
	CacheTTL time.Duration
	// KeyCheck reports whether this node holds the store's current
	// encryption key (nil error), as /readyz checks it; nil: no check (a
	// store without encryption). It tells the two cases of a source whose
	// sealed configuration does not open apart (unreadableSource).
	KeyCheck func(context.Context) error
}

// Gateway serves POST /in/{source_id}.
type Gateway struct {
	cfg   Config
	mu    sync.Mutex
	cache map[string]cachedSource
	// forgets counts the Forget calls (mu): a configuration read that
	// started before one is not cached, since it may be the one the
	// change replaced.
	forgets uint64
	// unreadable holds the sources whose configuration did not open here
	// at their last read, each with when it was last logged (mu).
	unreadable map[string]unreadableNote
}

type cachedSource struct {
	src     store.Source
	cfg     SourceConfig
	expires time.Time
}

// New returns a gateway.
func New(cfg Config) *Gateway {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Now().UTC() }
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	if cfg.NotifyFanOut == nil {
		cfg.NotifyFanOut = func() {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 2 * time.Second
	}
	return &Gateway{cfg: cfg, cache: map[string]cachedSource{}, unreadable: map[string]unreadableNote{}}
}

// Forget drops a source from the cache (after an update or delete). A
// note that its configuration did not open is kept: the next read that
// opens it logs that it opens again, on the node whose PATCH replaced it
// as on the others (a read that finds it deleted drops the note).
//
// A read of the source under way meanwhile is not cached (forgets): it
// may have read the configuration the change replaced, which would
// otherwise keep verifying here for CacheTTL after the change.
func (g *Gateway) Forget(id string) {
	g.mu.Lock()
	delete(g.cache, id)
	g.forgets++
	g.mu.Unlock()
}

func (g *Gateway) source(ctx context.Context, id string) (store.Source, SourceConfig, error) {
	now := time.Now()
	g.mu.Lock()
	c, ok := g.cache[id]
	forgets := g.forgets
	g.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.src, c.cfg, nil
	}
	src, err := g.cfg.Store.GetSource(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			g.mu.Lock()
			delete(g.unreadable, id)
			g.mu.Unlock()
		}
		return store.Source{}, SourceConfig{}, err
	}
	var sc SourceConfig
	if err := json.Unmarshal(src.Config, &sc); err != nil {
		return store.Source{}, SourceConfig{}, store.Internal(fmt.Errorf("source %s config: %w", id, err))
	}
	g.mu.Lock()
	if g.forgets == forgets { // else a source changed while this one was read
		g.cache[id] = cachedSource{src: src, cfg: sc, expires: now.Add(g.cfg.CacheTTL)}
	}
	if _, ok := g.unreadable[id]; ok {
		delete(g.unreadable, id)
		g.cfg.Logger.InfoContext(ctx, "inbound: source's stored configuration opens again: its requests are verified", "source", id)
	}
	g.mu.Unlock()
	return src, sc, nil
}

type answer struct {
	Received  bool   `json:"received,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	ID        string `json:"id,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	encode(w, v)
}

// problem is an RFC 9457 problem of the shape the API's are (huma's
// ErrorModel, as the API's writeProblem fills it): type about:blank (the
// status says it all, RFC 9457 §4.2.1), title the status's text, status
// and detail, in that order.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	encode(w, problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}

// encode writes v as JSON without HTML escaping (&, <, > as they are, as
// the API's answers): the answers are JSON for programs, never HTML.
func encode(w http.ResponseWriter, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// storeProblem answers a store error other than the ones ServeHTTP handles
// itself (an unknown source, a duplicate): the status is the error's code's
// (store.Code.HTTPStatus, as in the API): 503 with retry as the detail for
// an outage (the provider retries), 500 for an internal error, logged as a
// bug.
func (g *Gateway) storeProblem(ctx context.Context, w http.ResponseWriter, err error, op, source, retry string) {
	code := store.CodeOf(err)
	switch code {
	case store.CodeUnavailable:
		g.cfg.Logger.ErrorContext(ctx, "inbound: "+op, "source", source, "error", err)
		writeProblem(w, code.HTTPStatus(), retry)
	case store.CodeInternal:
		g.cfg.Logger.ErrorContext(ctx, "bug: inbound: "+op, "source", source, "error", err)
		writeProblem(w, code.HTTPStatus(), "internal error (logged)")
	default:
		g.cfg.Logger.ErrorContext(ctx, "inbound: "+op, "source", source, "error", err)
		writeProblem(w, code.HTTPStatus(), store.Message(err))
	}
}

// ServeHTTP handles POST /in/{source_id}.
//
// With tracing on, the request is one server span (verify, dedupe, store)
// whose parent is the provider's traceparent, if any; the span's context is
// stored with the event, so the forwarding attempt joins the trace. Off,
// the provider's traceparent itself is stored.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Another method is answered before any span: the span is named and
	// attributed as the POST it is not.
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, http.StatusMethodNotAllowed, "inbound webhooks are POSTed")
		return
	}
	traceparent := ""
	if sc, ok := tracing.ParseTraceParent(r.Header.Get("Traceparent")); ok {
		traceparent = tracing.FormatTraceParent(sc)
	}
	var span trace.Span
	if g.cfg.Tracer.On() {
		ctx, sp := g.cfg.Tracer.Start(tracing.WithRemoteParent(r.Context(), traceparent), "POST /in/{source_id}",
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodPost, semconv.HTTPRoute("/in/{source_id}"), tracing.AttrSourceID.String(r.PathValue("source_id"))))
		sw := &tracing.StatusWriter{ResponseWriter: w}
		defer func() { tracing.EndServerSpan(sp, sw.Status) }() // the status answered, error.type for a refusal
		span, r, w = sp, r.WithContext(ctx), sw
		traceparent = tracing.FormatTraceParent(sp.SpanContext())
	}
	id := r.PathValue("source_id")
	src, sc, err := g.source(r.Context(), id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			g.result(span, "unknown_source")
			writeProblem(w, http.StatusNotFound, "no such source")
			return
		}
		if u := (*store.UnreadableSourceError)(nil); errors.As(err, &u) {
			g.result(span, "unreadable")
			g.unreadableSource(r.Context(), w, id, u)
			return
		}
		g.result(span, "error")
		g.storeProblem(r.Context(), w, err, "read source", id, "temporarily unavailable; retry")
		return
	}
	limit := sc.Limit()
	gzipped, ok := contentEncoding(r.Header)
	if !ok {
		g.result(span, "unsupported_encoding")
		w.Header().Set("Accept-Encoding", "gzip")
		writeProblem(w, http.StatusUnsupportedMediaType, "unsupported Content-Encoding: only gzip (or none) is accepted")
		return
	}
	body, err := readBody(w, r, limit, gzipped)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.Is(err, errBadGzip) {
			g.result(span, "bad_request")
			writeProblem(w, http.StatusBadRequest, "the body is not valid gzip")
			return
		}
		if errors.As(err, &mbe) {
			g.result(span, "too_large")
			writeProblem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit))
			return
		}
		g.result(span, "bad_request")
		writeProblem(w, http.StatusBadRequest, "could not read the body")
		return
	}
	now := g.cfg.Now()
	if err := scheme.Verify(sc.SchemeConfig(), r.Header, body, now); err != nil {
		// No detail that helps an attacker; the reason goes to the log.
		g.result(span, "unauthorized")
		g.cfg.Logger.InfoContext(r.Context(), "inbound: signature refused", "source", id, "reason", err)
		writeProblem(w, http.StatusUnauthorized, "invalid signature")
		return
	}
	if challenge, ok := slackChallenge(sc.Scheme, body); ok {
		// Slack's URL verification: a handshake to answer, not an event
		// to store or forward (Slack, "Events API":
		// https://api.slack.com/apis/events-api#handshake).
		g.result(span, "challenge")
		writeJSON(w, http.StatusOK, map[string]string{"challenge": challenge})
		return
	}
	key, err := scheme.DedupeKey(sc.Scheme, sc.Dedupe, r.Header, body)
	if err != nil || key == "" || bodyDedupe(sc) {
		key = scheme.BodyKey(body)
	}
	typ := eventType(sc.Scheme, r.Header, body)
	headers := forwardHeaders(r.Header)
	evID := store.NewID("evt")
	res, err := g.cfg.Store.PublishEvent(r.Context(), store.PublishParams{
		Event: store.Event{ID: evID, Tenant: src.ID, Type: typ, OccurredAt: now, Body: body, IdempotencyKey: key,
			Fingerprint: store.Fingerprint(src.ID, typ, body), Headers: headers, TraceParent: traceparent},
		Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }, FanOutChunk: g.cfg.FanOutChunk,
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		// The same provider event id with other bytes: still the same
		// event to the provider. Never an error, or it retries forever.
		g.result(span, "duplicate")
		writeJSON(w, http.StatusOK, answer{Duplicate: true})
		return
	case err != nil:
		g.result(span, "error")
		g.storeProblem(r.Context(), w, err, "store event", id, "could not store the event; retry")
		return
	case !res.Created:
		g.result(span, "duplicate")
		writeJSON(w, http.StatusOK, answer{Duplicate: true, ID: res.Event.ID})
		return
	}
	g.result(span, "accepted")
	if res.Pending > res.HandedOff { // handed-off deliveries need no claim
		g.cfg.Notify()
	}
	if res.FanOut {
		g.cfg.NotifyFanOut()
	}
	writeJSON(w, http.StatusOK, answer{Received: true, ID: res.Event.ID})
}

// A source whose sealed configuration (its provider signing secrets) does
// not open on this node: sealed under a key this node does not hold, or
// damaged. Nothing of a request to it can be verified, so nothing is
// stored: the provider's retries are the event's only copy. As the
// delivery engine keeps such an endpoint's deliveries pending rather than
// failing them, the gateway answers 503 with Retry-After, which every
// provider retries (a 4xx would blame the request, which is not at fault):
//
//   - on a node whose key check fails (it lacks the current key: a
//     rolling deploy, a node not restarted after herald rekey) the nodes
//     that hold the key verify the retry, or this one once restarted with
//     it: Retry-After unreadableRetryStale;
//   - on a node that holds the current key no node opens it (sealed under
//     a key none holds any more, or damaged): the retries are accepted
//     once an operator replaces the source's configuration (PATCH
//     /v1/sources/{id} with scheme and secrets) or rekeys with the lost key
//     as a previous one; until then they are refused the same way, at
//     Retry-After unreadableRetryLost (the delivery engine's longest skip).
//
// Each such request is counted as herald_inbound_requests_total{result=
// "unreadable"} (HeraldSourceValuesDoNotOpen alerts on it), and a WARN
// names the source at most once per unreadableLogEvery per source; the key
// check runs with it, not on every request.
const (
	unreadableLogEvery   = time.Minute
	unreadableRetryStale = 10 * time.Second
	unreadableRetryLost  = time.Minute
)

// unreadableNote is what the gateway remembers of a source whose
// configuration did not open: when it last logged it and whether this
// node's key check failed then.
type unreadableNote struct {
	logged time.Time
	stale  bool
}

// unreadableSource answers a request to source id, whose configuration
// does not open here (u): see above.
func (g *Gateway) unreadableSource(ctx context.Context, w http.ResponseWriter, id string, u *store.UnreadableSourceError) {
	now := g.cfg.Now()
	g.mu.Lock()
	note, known := g.unreadable[id]
	due := !known || now.Sub(note.logged) >= unreadableLogEvery
	if due {
		// Claimed before the check, so concurrent requests log once.
		note.logged = now
		g.unreadable[id] = note
	}
	g.mu.Unlock()
	if due {
		var kerr error
		if g.cfg.KeyCheck != nil {
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			kerr = g.cfg.KeyCheck(kctx)
			cancel()
		}
		note.stale = kerr != nil
		g.mu.Lock()
		g.unreadable[id] = note
		g.mu.Unlock()
		if note.stale {
			g.cfg.Logger.WarnContext(ctx, "inbound: source's stored configuration does not open with this node's encryption keys, and this node's key check fails: its requests are refused (503) here until this node is restarted with the current key; nodes holding it verify them",
				"source", id, "error", u, "key_check", kerr)
		} else {
			g.cfg.Logger.WarnContext(ctx, "inbound: source's stored configuration does not open with this node's encryption keys (sealed under a key no node holds, or damaged): its requests are refused (503, the provider retries) until its configuration is replaced (PATCH /v1/sources/{id} with scheme and secrets) or the lost key is given to herald rekey",
				"source", id, "error", u)
		}
	}
	after, detail := unreadableRetryLost, "this source cannot verify requests now; retry later"
	if note.stale {
		after, detail = unreadableRetryStale, "this node cannot verify requests for this source now; retry"
	}
	w.Header().Set("Retry-After", fmt.Sprint(int(after/time.Second)))
	writeProblem(w, http.StatusServiceUnavailable, detail)
}

// result counts a request's result and records it on its span (when
// tracing is on): herald.result, and an error status for "error" and
// "unreadable".
func (g *Gateway) result(span trace.Span, result string) {
	g.cfg.Metrics.Inbound(result)
	if span != nil {
		span.SetAttributes(tracing.AttrResult.String(result))
		if result == "error" || result == "unreadable" {
			span.SetStatus(codes.Error, result)
		}
	}
}

// bodyDedupe reports whether a source's events are deduped on their body
// rather than on an id header: a scheme with no signed timestamp
// (scheme.ReplayWindow false) signs only the body, so a captured body
// replayed with a new, unsigned delivery-id header would otherwise be a
// new event forever. A json: rule reads the key from the signed body and
// stays. The body key is kept as long as the event (retention), which is
// the dedupe horizon; docs/inbound.md states the residual risk.
func bodyDedupe(sc SourceConfig) bool {
	return !scheme.ReplayWindow(sc.SchemeConfig()) && !strings.HasPrefix(sc.Dedupe, "json:")
}

// contentEncoding reads the request's Content-Encoding (RFC 9110 §8.4):
// gzipped when it is gzip (or x-gzip); ok is false for any other coding or
// a list of several (Herald answers 415 rather than store bytes it cannot
// verify or forward as the provider meant).
func contentEncoding(h http.Header) (gzipped, ok bool) {
	var codings []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return false, true
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return true, true
	}
	return false, false
}

var errBadGzip = errors.New("invalid gzip body")

// readBody reads the body up to limit bytes; a gzip body is inflated, and
// both the compressed and the inflated bytes are held to limit (an
// *http.MaxBytesError past it), so a small bomb cannot grow past the cap.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, gzipped bool) ([]byte, error) {
	in := http.MaxBytesReader(w, r.Body, limit)
	if !gzipped {
		return io.ReadAll(in)
	}
	zr, err := gzip.NewReader(in)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errBadGzip, err)
	}
	// Every member of a multi-member body, as RFC 1952 §2.2 allows; bytes
	// after the last member that are not another member are an error.
	body, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errBadGzip, err)
	}
	if int64(len(body)) > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return body, nil
}

// dropHeaders are never forwarded: hop-by-hop and connection-specific
// headers, credentials meant for the gateway, proxies' additions, and
// Herald's own headers (which the forward sets itself).
var dropHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Te": true,
	"Trailer": true, "Upgrade": true, "Proxy-Authorization": true, "Proxy-Connection": true, "Authorization": true,
	"Cookie": true, "Accept-Encoding": true, "Expect": true, "Forwarded": true, "X-Forwarded-For": true,
	"X-Forwarded-Host": true, "X-Forwarded-Proto": true, "X-Real-Ip": true, "User-Agent": true,
	"X-Event-Id": true, "X-Event-Type": true, "X-Delivery-Attempt": true,
	"Content-Encoding": true, // the body is stored and forwarded inflated
}

// renamed reports whether a provider header (canonical name) travels as
// X-Original-<name>: X-Signature and every webhook-* header, the names
// Herald signs its forward with (the Standard Webhooks spec's headers all
// share the prefix, so a receiver could take any of them for Herald's),
// and every svix-* header: receivers' Svix libraries read svix-* before
// webhook-*, so a provider's svix-signature passed on would be checked
// against the forwarding endpoint's secret and fail.
func renamed(k string) bool {
	return k == "X-Signature" || strings.HasPrefix(k, "Webhook-") || strings.HasPrefix(k, "Svix-")
}

// originalPrefix is the prefix of a renamed provider header's name.
const originalPrefix = "X-Original-"

// reserved reports whether a provider header may not travel under its own
// name, given k canonical and hop the fields Connection names: a name
// Herald drops or renames, or one a renamed header takes
// (X-Original-X-Signature, X-Original-Webhook-Id: the renamed provider
// header wins, so a provider's own header of that name is dropped). A name
// with underscores is read with each "_" as "-" (X_Event_Id as X-Event-Id):
// receivers that map headers to HTTP_* variables (CGI, RFC 3875 §4.1.18;
// PHP, Rack, WSGI) read both as HTTP_X_EVENT_ID, so such a spelling of a
// reserved name is dropped as nginx drops underscore headers by default.
func reserved(k string, hop map[string]bool) bool {
	if dropHeaders[k] || hop[k] {
		return true
	}
	if strings.Contains(k, "_") {
		if d := textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-")); dropHeaders[d] || hop[d] || renamed(d) || taken(d) {
			return true
		}
	}
	return taken(k)
}

// taken reports whether k (canonical) is the name a renamed provider header
// travels under (X-Original-<renamed name>).
func taken(k string) bool {
	rest, ok := strings.CutPrefix(k, originalPrefix)
	return ok && renamed(rest)
}

// Limits of the provider headers a forward carries (docs/inbound.md).
const (
	maxForwardHeaders     = 64
	maxForwardHeaderBytes = 4096
)

// forwardHeaders keeps the provider's headers: at most maxForwardHeaders,
// each value (repeated fields joined with ", ", RFC 9110 §5.3) with its
// bytes that are not UTF-8 replaced (validUTF8) and then at most
// maxForwardHeaderBytes, a longer one left out. Content-Type is one media
// type, not a list (RFC 9110 §8.3): sent several times, it is forwarded
// once with its first value, the one net/http's Header.Get reads (joined,
// it would be a value no receiver parses; refused, the provider would
// retry the same request until it gave up). When there are more, the
// same ones are kept for the same request: Content-Type and the headers of
// a known provider (providerHeader) first, then the rest in name order.
// The fields the request's Connection header names are hop-by-hop (RFC
// 9110 §7.6.1) and dropped with it. A provider header named like a renamed
// one (X-Original-X-Signature), or spelled with underscores for a name
// Herald drops, sets or renames (X_Event_Id), is dropped (reserved).
func forwardHeaders(h http.Header) map[string]string {
	hop := connectionOptions(h)
	names := make([]string, 0, len(h))
	for k, vs := range h {
		if k = textproto.CanonicalMIMEHeaderKey(k); !reserved(k, hop) && len(vs) > 0 {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if pa, pb := providerHeader(a), providerHeader(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	out := make(map[string]string, min(len(names), maxForwardHeaders))
	for _, k := range names {
		if len(out) >= maxForwardHeaders {
			break
		}
		v := strings.Join(h.Values(k), ", ")
		if k == "Content-Type" {
			v = h.Get(k)
		}
		v = validUTF8(v)
		if len(v) > maxForwardHeaderBytes {
			continue
		}
		if renamed(k) {
			k = originalPrefix + k
		}
		out[k] = v
	}
	return out
}

// validUTF8 returns v with every byte that is not part of a UTF-8
// encoded character replaced by U+FFFD, one replacement per byte, as
// encoding/json writes such a string. net/http accepts any byte from 0x80
// in a header value (obs-text, RFC 9110 §5.5), but the store keeps an
// event's headers as JSON text, which holds UTF-8 only (RFC 8259 §8.1):
// normalised here, before the event is built, the publish's answer, the
// stored event (GET /v1/events/{id}) and every attempt — handed off from
// the publish or claimed from the store — carry the same value. A value
// that is UTF-8 is returned as it is.
func validUTF8(v string) string {
	if utf8.ValidString(v) {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) + 8)
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(v[i : i+size])
		}
		i += size
	}
	return b.String()
}

// connectionOptions returns the field names (canonical) that the
// Connection header's comma-separated options name, every Connection field
// line included: RFC 9110 §7.6.1 makes them hop-by-hop, so a proxy removes
// them before forwarding, as net/http/httputil's ReverseProxy does.
func connectionOptions(h http.Header) map[string]bool {
	var hop map[string]bool
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if hop == nil {
					hop = map[string]bool{}
				}
				hop[textproto.CanonicalMIMEHeaderKey(name)] = true
			}
		}
	}
	return hop
}

// providerHeader reports whether k (canonical) is Content-Type or a header
// of a provider Herald knows (signatures, ids, event types, timestamps).
func providerHeader(k string) bool {
	if k == "Content-Type" || k == "X-Signature" || k == "X-Hub-Signature" || k == "X-Hub-Signature-256" {
		return true
	}
	for _, p := range []string{"Stripe-", "X-Github-", "X-Shopify-", "X-Slack-", "Webhook-", "Svix-"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// eventType names an inbound event after the provider's own type when it
// is cheap to find (Stripe/Standard Webhooks/Herald JSON "type", GitHub
// X-GitHub-Event, Shopify X-Shopify-Topic, Slack event.type), as
// "<scheme>.<type>"; otherwise "<scheme>.event".
//
// A Herald sender's type is read from its signed envelope's top-level
// "type" (store.EncodeBody), never from X-Event-Type: X-Signature covers
// only the timestamp and the body, so anyone replaying a signed delivery
// could otherwise change its type by editing that header. A header that
// disagrees with the body is ignored, not refused (as Stripe's and Svix's
// libraries take the type from the verified payload): the body is what
// the sender signed, and refusing would only have an honest sender retry.
func eventType(sch string, h http.Header, body []byte) string {
	var t string
	switch sch {
	case "github":
		t = h.Get("X-GitHub-Event")
	case "shopify":
		t = h.Get("X-Shopify-Topic")
	default: // stripe, standard-webhooks, herald, hmac; slack below
		var probe struct {
			Type  string `json:"type"`
			Event struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		body := JSONText(body)
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) && json.Unmarshal(body, &probe) == nil {
			t = probe.Type
			if sch == "slack" && probe.Event.Type != "" {
				t = probe.Event.Type
			}
		}
	}
	t = sanitizeType(t)
	prefix := strings.ReplaceAll(sch, "-", "_")
	if t == "" {
		return prefix + ".event"
	}
	return prefix + "." + t
}

// sanitizeType maps a provider's type to Herald's event type alphabet
// (letters, digits, _ - and dots), at most 100 bytes: / and : become dots,
// and a run of any other bytes (spaces, tabs, non-ASCII letters) one _, so
// "push x" and "pushx" stay two types.
func sanitizeType(t string) string {
	var b strings.Builder
	gap := false // other bytes met since the last one written
	for i := 0; i < len(t) && b.Len() < 100; i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			if gap && b.Len() > 0 && !strings.HasSuffix(b.String(), ".") {
				b.WriteByte('_')
			}
			gap = false
			b.WriteByte(c)
		case c == '.' || c == '/' || c == ':':
			gap = false
			if b.Len() > 0 && !strings.HasSuffix(b.String(), ".") {
				b.WriteByte('.')
			}
		default:
			gap = true
		}
	}
	return strings.Trim(b.String(), ".")
}

// utf8BOM is the UTF-8 byte order mark (U+FEFF encoded).
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// JSONText returns a received body as JSON is read from it: without one
// leading UTF-8 byte order mark, which RFC 8259 §8.1 forbids senders to
// add but lets a parser ignore (as most providers' libraries do). It is a
// view of body, which stays as received: the signature is verified over
// those bytes, and they are what is stored and forwarded.
func JSONText(body []byte) []byte {
	return bytes.TrimPrefix(body, utf8BOM)
}

// slackChallenge returns the challenge of a verified Slack
// "url_verification" request ({"type":"url_verification","challenge":…}),
// which Slack expects echoed back before it sends events to the URL.
func slackChallenge(sch string, body []byte) (string, bool) {
	body = JSONText(body)
	if sch != scheme.Slack || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return "", false
	}
	var probe struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &probe) != nil || probe.Type != "url_verification" || probe.Challenge == "" {
		return "", false
	}
	return probe.Challenge, true
}
