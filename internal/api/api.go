// Package api is Herald's HTTP API v1 (docs/operations.md, and the OpenAPI document at /openapi.json): JSON over
// HTTP, bearer API key, RFC 9457 problem+json errors, cursor-paginated lists,
// and an OpenAPI 3.1 document generated from the handlers' types by huma.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/herald-webhooks/herald/internal/buildinfo"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	segjson "github.com/segmentio/encoding/json"
	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/tracing"
)

// URLChecker applies the endpoint URL policy (internal/egress).
type URLChecker interface {
	// CheckURL returns the parsed URL or an *egress.PolicyError naming the
	// rule that failed.
	CheckURL(raw string) (*url.URL, error)
}

// Config configures the API server.
type Config struct {
	Store store.Store
	// URLs checks endpoint URLs on create and update. Required.
	URLs URLChecker
	// Destinations checks inbound sources' destination URLs on create and
	// update: the client that forwards to them, whose relaxed policy allows
	// private addresses but never link-local or cloud-metadata ones
	// (egress.Config.AllowPrivate). Default: that policy without
	// operator ranges (http allowed, loopback and private addresses).
	Destinations URLChecker
	// AdminKeyHashes are SHA-256 hashes (HashAPIKey) of admin keys given
	// in the configuration (HERALD_API_KEY); other keys are read from the
	// store (API keys and portal sessions).
	AdminKeyHashes [][]byte
	// AuthFailureBurst and AuthFailureRate shape the per-client-address
	// token bucket spent by failed authentications: Burst failures at
	// once, then Rate per second; an address with an empty bucket gets
	// 429 with Retry-After. Defaults 20 and 1.
	AuthFailureBurst int
	AuthFailureRate  float64
	// PublicURL, when set (e.g. https://herald.example.com), is the base of
	// the URLs Herald hands out (portal sessions); default: the scheme and
	// Host the request came to.
	PublicURL string
	// Notify is called after a publish committed new deliveries.
	Notify func()
	// NotifyFanOut is called after a publish left deliveries for the
	// engine to create (store.PublishResult.FanOut); nil: none.
	NotifyFanOut func()
	// Tester sends test events (POST /v1/endpoints/{id}/test); optional.
	Tester Tester
	// Circuit, when set, reports an endpoint's circuit breaker on this
	// node (the engine's); GET /v1/endpoints and GET /v1/endpoints/{id}
	// then show it as "circuit". nil: the field is omitted.
	Circuit func(endpointID string) CircuitOut
	// Inbound, when set, serves POST /in/{source_id} (the gateway; no API
	// key: the provider's signature is the authentication).
	Inbound http.Handler
	// SourceChanged is called after a source was updated or deleted (the
	// gateway drops its cached configuration).
	SourceChanged func(id string)
	// Now tells the time; default time.Now in UTC.
	Now func() time.Time
	// MaxPayloadBytes caps the event body sent to endpoints; default 65536.
	MaxPayloadBytes int
	// MaxEndpointsPerTenant refuses creating an endpoint past this many in
	// its tenant with 422 naming the limit; 0 = no limit.
	MaxEndpointsPerTenant int
	// FanOutChunk is PublishParams.FanOutChunk for every publish: the most
	// deliveries a publish's transaction creates (0: the store's default).
	FanOutChunk int
	// Version is reported in /openapi.json and /healthz.
	Version string
	// CatalogMode is CatalogPermissive ("" too) or CatalogStrict (publishing
	// an uncatalogued event type answers 422).
	CatalogMode string
	// PersonalData is the personal-data guard's mode for every event type:
	// PersonalDataRefuse, PersonalDataWarn or PersonalDataOff; "" refuses
	// for catalogued types and warns for uncatalogued ones.
	PersonalData string
	// Contract, when set, is served at GET /contract (with the event
	// catalog added as "event_types").
	Contract any
	// Metrics, when set, is served at GET /metrics.
	Metrics *metrics.Metrics
	// Tracer, optional (nil: tracing off): the publish's server span and
	// its store commit's span (internal/tracing).
	Tracer *tracing.Tracer
	Logger *slog.Logger
	// KeyCheck, when set, is part of /readyz: it reports whether the
	// store's sealed values still open with this node's encryption key
	// (store.CheckKey on the key check value). After herald rekey moved
	// them to a key this node does not hold, it can open no endpoint's
	// secret ("wrong encryption key") and delivers nothing, so the node
	// must not be ready (publishes, which open no secret, still succeed).
	// The same result refuses the writes that would seal a value with the
	// node's stale key (refuseStaleKey: 503, StaleSealingKeyMessage).
	// Its result is kept for KeyCheckEvery (default 10 s) between runs.
	KeyCheck      func(ctx context.Context) error
	KeyCheckEvery time.Duration
	// CursorKey (32 bytes) seals the lists' next_cursor values (cursor.go).
	// Nodes sharing a database must use the same key; nil means a random
	// key per process (a restart then answers 400 to older cursors).
	CursorKey []byte
}

// Tester sends one signed test event to an endpoint now, through the
// egress policy, and returns the attempt and the test event's id.
type Tester interface {
	SendTest(ctx context.Context, ep store.Endpoint) (store.Attempt, string, error)
}

// Server serves the API.
type Server struct {
	// createTypeMu serializes event type creations (createEventType's
	// case check).
	createTypeMu sync.Mutex
	// revokeMu serializes API key revocations while no admin key is
	// configured, so keepAnAdmin's check and the revocation it allows are
	// one step in this process; atRevokeLock, when set (tests only), is
	// called before a revocation waits for it.
	revokeMu     sync.Mutex
	atRevokeLock func()
	cfg          Config
	cursors      *cursorBox
	keyCheck     *keyCheck
	ready        *readiness // /readyz's check and its last result, for herald_ready
	api          huma.API
	mux          *http.ServeMux
	handler      http.Handler
	keys         *keyring
	throttle     *throttle
	catalog      *catalogCache // the catalog entries publishes were checked against
	// sourceWarned throttles the WARN of a source whose configuration
	// does not open (problem): once a minute per source, as the ingest's.
	sourceWarned *logThrottle
	bg           sync.WaitGroup // background writes (touch); Close waits for them
}

// New builds the API and registers every route.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.URLs == nil {
		return nil, errors.New("api: Config.Store and Config.URLs are required")
	}
	if cfg.Destinations == nil {
		eg, err := egress.New(egress.Config{AllowHTTP: true, AllowLoopback: true, AllowPrivate: true})
		if err != nil {
			return nil, err
		}
		cfg.Destinations = eg
	}
	if cfg.AuthFailureBurst <= 0 {
		cfg.AuthFailureBurst = 20
	}
	if cfg.AuthFailureRate <= 0 {
		cfg.AuthFailureRate = 1
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Now().UTC() }
	}
	if cfg.NotifyFanOut == nil {
		cfg.NotifyFanOut = func() {}
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	if cfg.SourceChanged == nil {
		cfg.SourceChanged = func(string) {}
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.KeyCheckEvery <= 0 {
		cfg.KeyCheckEvery = defaultKeyCheckEvery
	}
	cursors, err := newCursorBox(cfg.CursorKey)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	hc := huma.DefaultConfig("Herald API", cfg.Version)
	hc.CreateHooks = nil // no "$schema" fields or Link headers in responses
	hc.DocsPath = ""     // the console serves /docs from embedded assets (internal/console)
	hc.Formats = map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat}
	hc.OpenAPI.Info.Description = "Herald webhook platform API v1. Errors are RFC 9457 application/problem+json."
	hc.OpenAPI.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "Authorization: Bearer <api key>"},
	}
	// checkJSON has already read every body; huma's own 5 s body-read
	// deadline would otherwise stay on the connection and cancel a request
	// whose store call takes longer (answered as if the client had gone).
	// It also applies each operation's MaxBodyBytes, so that a 413 names
	// the route's limit and its rule (bodyLimits).
	limits := bodyLimits{}
	ops := map[string]string{}    // mux pattern to operation id, for checkJSON's 422s
	bodyless := map[string]bool{} // mux patterns of the operations that take no body
	hc.OpenAPI.OnAddOperation = append(hc.OpenAPI.OnAddOperation, func(_ *huma.OpenAPI, op *huma.Operation) {
		op.BodyReadTimeout = -1
		ops[strings.ToUpper(op.Method)+" "+op.Path] = op.OperationID
		if op.RequestBody == nil {
			bodyless[strings.ToUpper(op.Method)+" "+op.Path] = true
		}
		if op.MaxBodyBytes > 0 {
			limits[strings.ToUpper(op.Method)+" "+op.Path] = op.MaxBodyBytes
		}
	})
	api := humago.New(mux, hc)
	s := &Server{cfg: cfg, cursors: cursors, api: api, mux: mux,
		keyCheck:     &keyCheck{check: cfg.KeyCheck, every: cfg.KeyCheckEvery, now: cfg.Now},
		keys:         &keyring{admin: cfg.AdminKeyHashes, cache: map[[32]byte]cachedKey{}, touched: map[string]time.Time{}},
		throttle:     &throttle{rate: rate.Limit(cfg.AuthFailureRate), burst: cfg.AuthFailureBurst, buckets: map[string]*rate.Limiter{}},
		catalog:      newCatalogCache(),
		sourceWarned: &logThrottle{every: time.Minute, last: map[string]time.Time{}},
	}
	api.UseMiddleware(s.authorize, s.checkQuery)
	s.registerEndpoints()
	s.registerStats()
	s.registerEvents()
	s.registerDeliveries()
	s.registerOperations()
	s.registerSources()
	s.registerKeys()
	s.registerEventTypes()
	s.documentProbes()
	if err := s.applyPolicy(); err != nil {
		return nil, err
	}
	if cfg.Inbound != nil {
		mux.Handle("/in/{source_id}", cfg.Inbound)
	}
	s.ready = &readiness{check: s.checkReady, now: cfg.Now, log: cfg.Logger}
	cfg.Metrics.SetReady(s.ready.current)
	s.registerHealth()
	s.handler = s.authenticate(s.withWebhooks(s.tracePublish(checkJSON(mux, limits, ops, bodyless, s.bodyRule))))
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close waits for the writes the API started in the background (an API
// key's last use, at most 5 s each) to end. Call it once the HTTP server
// has stopped and before the store is closed, so none of them runs
// against a closed store.
func (s *Server) Close() { s.bg.Wait() }

// OpenAPI returns the generated OpenAPI document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// maxRequestBytes bounds any request body before the per-route limits.
const maxRequestBytes = 1 << 20

// publishEnvelopeBytes is what a publish's request may carry beyond its
// event's delivered body (--max-payload-bytes): the request's own members
// and data_versions.
const publishEnvelopeBytes = 16 << 10

// MaxPayloadBytes is the largest --max-payload-bytes a publish request can
// carry: a request body is at most 1 MiB, 16 KiB of it for the envelope.
const MaxPayloadBytes = maxRequestBytes - publishEnvelopeBytes

// maxBodyReaders bounds how many request bodies are being read at once:
// a body is buffered while it arrives (a slow client can keep it there),
// so at most maxBodyReaders × maxRequestBytes (64 MiB) is spent on bodies
// being read whatever the number of clients; further requests wait for a
// slot (or their context) with nothing read. A body read in full gives its
// slot back before the route handles it.
const maxBodyReaders = 64

// maxNesting is the deepest JSON nesting a request body may have.
const maxNesting = 64

// bodyLimits maps an operation's mux pattern ("POST /v1/events") to its
// largest request body in bytes (huma.Operation.MaxBodyBytes).
type bodyLimits map[string]int64

// bodyRule says why the body limit of the operation at pattern is what it
// is, for the 413's detail ("" for a plain limit).
func (s *Server) bodyRule(pattern string) string {
	if pattern == "POST /v1/events" {
		return fmt.Sprintf("the event's delivered body may be at most %d bytes (--max-payload-bytes), plus %d KiB for the request's envelope and data_versions; send ids and links, not content", s.cfg.MaxPayloadBytes, publishEnvelopeBytes>>10)
	}
	return ""
}

// checkJSON answers 400 for a request body that is not well-formed JSON
// (RFC 8259), before huma validates it against the schema (which answers
// 422 for missing, mistyped or unknown fields). Bodies over 1 MiB, or over
// their operation's limit in limits, get 413 naming the limit and rule's
// explanation of it. A number too large for a 64-bit float (1e400),
// which no decoder can read, is answered 422 at its field (body.<member>…)
// naming the field's rule where it has one (fieldRules of ops[pattern],
// the operation's id), as an integer out of range is, every such number
// listed.
//
// It runs after authenticate and reads a body only for a request a route
// of the API will take (a /v1/ operation matched by method and path): an
// unknown path, a wrong method or a missing key is answered without
// reading a byte of the body. While reading, the nesting depth is checked
// chunk by chunk, so a body of a million "[" is refused after 65 bytes.
//
// An operation that takes no body (bodyless: pause, test, replay of one
// delivery…) takes none, or an empty object; any other well-formed body
// is 422 at body, as an unknown member is for the operations that take
// one, and nothing is done (huma would not read it, and the operation
// would act as if its members meant nothing).
func checkJSON(mux *http.ServeMux, limits bodyLimits, ops map[string]string, bodyless map[string]bool, rule func(pattern string) string) http.Handler {
	slots := make(chan struct{}, maxBodyReaders)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The inbound gateway reads providers' raw bytes itself (any
		// content type, its own size cap); other non-API paths take no
		// JSON body.
		if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodDelete || !strings.HasPrefix(r.URL.Path, "/v1/") {
			mux.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		if pattern == "" || pattern == "/" {
			// No operation takes this method and path: 404 or 405 from
			// the mux, the body unread.
			mux.ServeHTTP(w, r)
			return
		}
		select {
		case slots <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		body, err := readJSONBody(http.MaxBytesReader(w, r.Body, maxRequestBytes), r.ContentLength)
		<-slots
		if err != nil {
			var mbe *http.MaxBytesError
			var de depthError
			switch {
			case errors.As(err, &mbe):
				detail := fmt.Sprintf("request body larger than %d bytes", maxRequestBytes)
				if limit := limits[pattern]; limit > 0 {
					detail += fmt.Sprintf("; %s takes at most %d bytes", pattern, limit)
					if why := rule(pattern); why != "" {
						detail += ": " + why
					}
				}
				writeProblem(w, http.StatusRequestEntityTooLarge, detail)
			case errors.As(err, &de):
				writeProblem(w, http.StatusBadRequest, "malformed JSON: "+de.Error())
			default:
				writeProblem(w, http.StatusBadRequest, "could not read the request body")
			}
			return
		}
		if limit := limits[pattern]; limit > 0 && int64(len(body)) > limit {
			detail := fmt.Sprintf("request body is %d bytes; %s takes at most %d bytes", len(body), pattern, limit)
			if why := rule(pattern); why != "" {
				detail += ": " + why
			}
			writeProblem(w, http.StatusRequestEntityTooLarge, detail)
			return
		}
		if len(bytes.TrimSpace(body)) > 0 {
			if err := wellFormedJSON(body); err != nil {
				if oor := (*outOfRange)(nil); errors.As(err, &oor) {
					writeRefusals(w, oor.refusals(ops[pattern]))
					return
				}
				writeProblem(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
				return
			}
			if bodyless[pattern] && !emptyObject(body) {
				writeRefusals(w, []error{&huma.ErrorDetail{Location: "body",
					Message: pattern + " takes no request body: send none, or {}"}})
				return
			}
		}
		// Media types are case-insensitive (RFC 9110 §8.3.1). A JSON body
		// sent without a type, or with curl's default form type, is taken
		// as the JSON it is.
		switch ct := strings.ToLower(r.Header.Get("Content-Type")); {
		case len(bytes.TrimSpace(body)) > 0 && (ct == "" || ct == "application/x-www-form-urlencoded"):
			r.Header.Set("Content-Type", "application/json")
		case ct != "":
			r.Header.Set("Content-Type", ct)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPatch || keepsSentBody[ops[pattern]] {
			r = r.WithContext(context.WithValue(r.Context(), sentBodyKey{}, body))
		}
		mux.ServeHTTP(w, r)
	})
}

// emptyObject reports whether the well-formed JSON b is an object without
// members ({}, spaces allowed).
func emptyObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

// sentBodyKey is the context key of a request's body as sent, which
// checkJSON keeps for sentBody: a PATCH's, and that of an operation in
// keepsSentBody.
type sentBodyKey struct{}

// keepsSentBody are the operations, besides every PATCH, whose handler
// reads the body as sent (sentBody): a rotation, whose overlap_seconds
// given null is refused rather than read as left out (the default).
var keepsSentBody = map[string]bool{"rotate-endpoint-secret": true}

// sentBody is the body of the request ctx serves, as sent, for a PATCH
// or an operation in keepsSentBody: its handler tells a member given null
// from one left out with it (its decoded body cannot: both leave a
// pointer nil). nil for other requests.
func sentBody(ctx context.Context) []byte {
	b, _ := ctx.Value(sentBodyKey{}).([]byte)
	return b
}

// depthError is a body nested deeper than maxNesting, found while reading.
type depthError struct{}

func (depthError) Error() string { return fmt.Sprintf("nested deeper than %d levels", maxNesting) }

// readJSONBody reads r, tracking JSON nesting (outside strings) as it
// goes; it stops with depthError as soon as the depth passes maxNesting.
// sizeHint (the request's Content-Length, or ≤ 0) sizes the first buffer,
// at most 64 KiB: the body is read into the slice it returns, with no
// 32 KiB staging buffer per request (allocating and clearing one was a
// tenth of a publish's API CPU).
func readJSONBody(r io.Reader, sizeHint int64) ([]byte, error) {
	var (
		depth    int
		inString bool
		escaped  bool
	)
	size := 512
	if sizeHint > 0 {
		size = int(min(sizeHint+1, 64<<10)) // +1: room to read the EOF without growing
	}
	body := make([]byte, 0, size)
	for {
		if len(body) == cap(body) {
			body = append(body, 0)[:len(body)]
		}
		n, err := r.Read(body[len(body):cap(body)])
		for _, c := range body[len(body) : len(body)+n] {
			switch {
			case escaped:
				escaped = false
			case inString:
				switch c {
				case '\\':
					escaped = true
				case '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '[' || c == '{':
				depth++
				if depth > maxNesting {
					return nil, depthError{}
				}
			case c == ']' || c == '}':
				depth--
			}
		}
		body = body[:len(body)+n]
		if err == io.EOF {
			return body, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// wellFormedJSON checks a request body: valid UTF-8 (RFC 8259 §8.1), one
// JSON value, nesting at most 64 deep, and no object with the same member
// name twice (RFC 8259 §4 leaves duplicates' meaning undefined; accepting
// them lets two readers of one request disagree).
func wellFormedJSON(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	if bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) {
		return errors.New("the body starts with a byte-order mark")
	}
	if !segjson.Valid(body) { // the same grammar as encoding/json (FuzzWellFormedJSON), faster
		// Decode to get the position and reason of the first error.
		var v any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return err
		}
		return errors.New("data after the top-level value")
	}
	return duplicateMembers(body)
}

// outOfRange is the numbers of a body too large for a 64-bit float,
// which duplicateMembers finds: valid JSON (RFC 8259's grammar has no
// limit) that no decoder reads, so that huma's would refuse the whole body
// at "body"; checkJSON answers each at its field instead.
type outOfRange struct {
	locations, numbers []string
}

func (e *outOfRange) Error() string {
	return fmt.Sprintf("number %.40s is out of range: JSON numbers must fit a 64-bit float (RFC 8259 §6); send a larger one as a string", e.numbers[0])
}

// refusals are e's numbers as refusals of operation op, each at its field:
// the field's rule where fieldRules has one (as locateFieldRefusal names a
// decoder's refusal of an integer out of range), else the float range.
func (e *outOfRange) refusals(op string) []error {
	errs := make([]error, len(e.numbers))
	for i, n := range e.numbers {
		d := &huma.ErrorDetail{Location: "body", Message: e.locations[i] + ": " + fmt.Sprintf("number %.40s is out of range: JSON numbers must fit a 64-bit float (RFC 8259 §6); send a larger one as a string", n)}
		locateFieldRefusal(op, d)
		errs[i] = d
	}
	return errs
}

// writeRefusals answers 422 listing errs (huma.ErrorDetail's), built by
// huma.NewError as every problem is (secrets dropped, echoes cut, at most
// maxProblemErrors listed).
func writeRefusals(w http.ResponseWriter, errs []error) {
	m := huma.NewError(http.StatusUnprocessableEntity, "validation failed", errs...)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // &, <, > as they are, as huma's answers write them
	_ = enc.Encode(m)
}

// duplicateMembers scans valid JSON once, without decoding values, for an
// object that names a member twice, nesting deeper than 64, or numbers
// too large for a 64-bit float (an *outOfRange listing each with its
// location, unless the body has one of the other faults). (A token
// decoder did the same at several times the cost: this runs on every
// request body.)
func duplicateMembers(b []byte) error {
	type frame struct {
		object    bool
		expectKey bool
		keys      []string            // the first members: a linear search is cheapest
		many      map[string]struct{} // then a set, so a huge object stays linear
		key       string              // an object's member being read
		index     int                 // an array's item being read
	}
	var stack []frame
	var oor *outOfRange
	// location is huma's location of the value being read:
	// body.<member>[<index>]….
	location := func() string {
		loc := "body"
		for _, f := range stack {
			if f.object {
				loc += "." + f.key
			} else {
				loc += "[" + strconv.Itoa(f.index) + "]"
			}
		}
		return loc
	}
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if len(stack) >= 64 {
				return errors.New("nested deeper than 64 levels")
			}
			stack = append(stack, frame{object: b[i] == '{', expectKey: b[i] == '{'})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := len(stack) - 1; top >= 0 && stack[top].object {
				stack[top].expectKey = true
			} else if top >= 0 {
				stack[top].index++
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i
			exp := false
			for ; j < len(b) && bytes.IndexByte([]byte("0123456789+-.eE"), b[j]) >= 0; j++ {
				exp = exp || b[j] == 'e' || b[j] == 'E'
			}
			// Only an exponent or more than 308 digits can leave float64's
			// range (about 1.8e308).
			if exp || j-i > 308 {
				if _, err := strconv.ParseFloat(string(b[i:j]), 64); errors.Is(err, strconv.ErrRange) {
					if oor == nil {
						oor = &outOfRange{}
					}
					oor.locations = append(oor.locations, location())
					oor.numbers = append(oor.numbers, string(b[i:j]))
				}
			}
			i = j - 1
		case '"':
			j := i + 1
			escaped := false
			for ; j < len(b); j++ {
				if b[j] == '\\' {
					escaped = true
					j++
					continue
				}
				if b[j] == '"' {
					break
				}
			}
			if top := len(stack) - 1; top >= 0 && stack[top].object && stack[top].expectKey {
				key := string(b[i+1 : j])
				if escaped {
					var k string
					if err := json.Unmarshal(b[i:j+1], &k); err == nil {
						key = k
					}
				}
				f := &stack[top]
				dup := false
				if f.many != nil {
					_, dup = f.many[key]
					f.many[key] = struct{}{}
				} else {
					for _, seen := range f.keys {
						if seen == key {
							dup = true
							break
						}
					}
					f.keys = append(f.keys, key)
					if len(f.keys) > 16 {
						f.many = make(map[string]struct{}, 64)
						for _, k := range f.keys {
							f.many[k] = struct{}{}
						}
						f.keys = nil
					}
				}
				if dup {
					return fmt.Errorf("member %q appears twice in one object", key)
				}
				f.expectKey, f.key = false, key
			}
			i = j
		}
	}
	if oor != nil {
		return oor
	}
	return nil
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	detail = cutEchoes(detail, maxDetail)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // &, <, > as they are, as huma's answers write them
	_ = enc.Encode(huma.ErrorModel{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}

// logThrottle tells whether a log line about a key (a source's id) is due:
// at most once per every per key.
type logThrottle struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time
}

// due reports whether the line about key is due at now, and if so
// records it as logged.
func (l *logThrottle) due(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.last[key]; ok && now.Sub(last) < l.every {
		return false
	}
	if len(l.last) >= 1024 {
		// Bounded: the keys whose line is due again are forgotten.
		for k, t := range l.last {
			if now.Sub(t) >= l.every {
				delete(l.last, k)
			}
		}
	}
	l.last[key] = now
	return true
}

// problem maps store errors to HTTP problems: the status is the error's
// code's (store.Code.HTTPStatus, shared with the inbound gateway); the
// detail is what for not found, the store's message (store.Message, which
// names the rule) for conflict, invalid and limit. An outage (503) is
// logged as an error, an internal error (500: a bug, e.g. a stored value
// that does not decode) as a bug.
func (s *Server) problem(err error, what string) error {
	if u := (*store.UnreadableError)(nil); errors.As(err, &u) && u.Values != nil {
		// Not the store being away (503) nor a bug (500): values of this
		// endpoint do not open with this node's keys. 409 naming the rule
		// and the ways out; the values' names only, never their contents.
		s.cfg.Logger.Warn("endpoint's stored values do not open with this node's encryption keys", "endpoint", u.EndpointID, "values", u.Values, "error", err, "op", what)
		way := "delete the endpoint (DELETE /v1/endpoints/{id}) and create it again"
		switch {
		case store.OnlySecretsUnreadable(err):
			way = "replace the secrets with POST /v1/endpoints/{id}/rotate-secret, or delete the endpoint"
		case store.OnlyHeadersUnreadable(err):
			way = "replace the custom headers whole with PATCH /v1/endpoints/{id} with \"headers\" naming every header and its value, or delete the endpoint"
		}
		if s.nodeKeyStale() {
			// Every value looks unreadable on a node whose own key is
			// stale, and is probably fine: replacing or deleting the
			// endpoint is the wrong way out (a new user's review).
			way = "this node's own key is older than the database's (GET /readyz answers 503), so the values are probably fine: restart this node with the current key (HERALD_ENCRYPTION_KEY, or the database's key file), or use a node that holds it; do not replace or delete the endpoint for this"
		}
		// Named by the endpoint's id, not what: a list meets it too (the
		// scoped store lists a tenant's own endpoints only).
		return huma.NewError(http.StatusConflict, "endpoint "+Echo(u.EndpointID)+" has stored values that this node's encryption keys do not open ("+strings.Join(u.Values, ", ")+
			"; sealed under a key this node does not hold, or damaged), so it cannot be used or changed here: GET /v1/endpoints/{id} shows it without them; "+way)
	}
	if u := (*store.UnreadableSourceError)(nil); errors.As(err, &u) {
		// A source's sealed configuration that this node's keys do not
		// open: not an outage a retry ends (503) nor a bug (500). 409
		// naming the source and the ways out (the callers have answered a
		// node whose own key is stale already: refuseStaleKey).
		if s.sourceWarned.due(u.SourceID, s.cfg.Now()) {
			s.cfg.Logger.Warn("source's stored configuration does not open with this node's encryption keys", "source", u.SourceID, "error", err, "op", what)
		}
		return huma.NewError(http.StatusConflict, "source "+Echo(u.SourceID)+" has a stored configuration that this node's encryption keys do not open (its provider signing secrets and settings; sealed under a key this node does not hold, or damaged), so it cannot be used or changed here: GET /v1/sources/{id} shows it without it; replace it with PATCH /v1/sources/{id} giving \"scheme\" and \"secrets\" (and any other setting) anew, or delete the source (DELETE /v1/sources/{id}) and create it again")
	}
	if errors.Is(err, secretbox.ErrDecrypt) {
		// Another sealed value that this node's keys do not open: not an
		// outage a retry ends (503) but a key.
		s.cfg.Logger.Warn("stored values do not open with this node's encryption keys", "error", err, "op", what)
		return huma.NewError(http.StatusConflict, what+" has stored values that this node's encryption keys do not open (sealed under a key this node does not hold, or damaged)")
	}
	code := store.CodeOf(err)
	status := code.HTTPStatus()
	switch code {
	case store.CodeNotFound:
		return huma.NewError(status, what+" not found")
	case store.CodeInvalid, store.CodeConflict, store.CodeLimit:
		return huma.NewError(status, store.Message(err))
	case store.CodeUnavailable:
		s.cfg.Logger.Error("store error", "error", err, "op", what)
		return huma.NewError(status, "the store is unavailable; retry later (a publish: retry with the same id or Idempotency-Key, it will not be stored twice)")
	default:
		s.cfg.Logger.Error("bug: internal store error", "error", err, "op", what)
		return huma.NewError(status, "internal error (logged); please report it")
	}
}

// secretFields name the request fields whose values an error never
// repeats (a 422 must not echo a submitted secret back: error bodies end
// up in logs and support tickets).
var secretFields = map[string]bool{"secret": true, "secrets": true, "key": true, "token": true, "password": true,
	"headers": true, "destination_url": true, "hmac": true}

func init() {
	// Schema limits are float64 in huma, and %v writes 16777216 as
	// 1.6777216e+07: "expected number <= 1.6777216e+07" is no rule a
	// client can read. Write every number in plain decimal.
	huma.ErrorFormatter = func(format string, a ...any) string {
		for i, v := range a {
			if f, ok := v.(float64); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
				a[i] = strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
		return fmt.Sprintf(format, a...)
	}
	// huma builds the problem of a request its schema or decoder refused
	// here, with the operation at hand: such refusals are located at their
	// field and name Herald's rule where it has one (locateFieldRefusal).
	huma.NewErrorWithContext = func(ctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		var op string
		if ctx != nil && ctx.Operation() != nil {
			op = ctx.Operation().OperationID
		}
		if status == http.StatusBadRequest && msg == "request body is required" {
			// huma's refusal of an empty body: say what to send.
			if hint := requiredBodyHints[op]; hint != "" {
				msg += ": " + hint
			} else if op != "" {
				msg += ": send the JSON body of operation " + op + " (see /openapi.json)"
			}
		}
		kept := errs[:0:0]
		said := map[[2]string]bool{}
		for _, e := range errs {
			if d, ok := e.(*huma.ErrorDetail); ok && d != nil {
				locateFieldRefusal(op, d)
				// A value the schema refuses twice (1.5 for a minimum of
				// 60: not an integer, below the minimum) is one refusal
				// of the field's rule.
				if said[[2]string{d.Location, d.Message}] {
					continue
				}
				said[[2]string{d.Location, d.Message}] = true
			}
			kept = append(kept, e)
		}
		return huma.NewError(status, msg, kept...)
	}
	base := huma.NewError
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		if status == http.StatusUnsupportedMediaType {
			msg = "request bodies are JSON: send Content-Type: application/json"
		}
		for _, e := range errs {
			d, ok := e.(*huma.ErrorDetail)
			if !ok || d == nil {
				continue
			}
			if secretLocation(d.Location, d.Value) {
				d.Value = nil
			}
			if d.Location == "body.tenant" && d.Message == "unexpected property" {
				// PATCH /v1/endpoints/{id} {"tenant":…}: say why.
				d.Message = "unexpected property: a tenant cannot be changed or named here (an endpoint's tenant is set when it is created; create one in the other tenant instead)"
			}
			d.Message, d.Location = cutEchoes(d.Message, maxErrorMessage), cutLocation(d.Location)
			if v, ok := d.Value.(string); ok {
				d.Value = Echo(v)
			}
		}
		se := base(status, cutEchoes(msg, maxDetail), listErrors(errs)...)
		if em, ok := se.(*huma.ErrorModel); ok && em.Type == "" {
			// As writeProblem's and the inbound gateway's problems:
			// every problem names its type (RFC 9457 §3.1.1: about:blank,
			// the status alone says what happened).
			em.Type = "about:blank"
		}
		return se
	}
}

// requiredBodyHints say, for an operation whose body is required, what to
// send when it came empty (huma's "request body is required").
var requiredBodyHints = map[string]string{
	"replay-endpoint": `send {"state":"dead"} to replay the endpoint's dead letters (optionally with "since", "until" (RFC 3339) and "event_type" to replay fewer); the body is required so that an empty request never replays everything`,
}

// maxProblemErrors bounds the errors a problem lists: the rest are counted
// in one more entry, so 8,000 unknown query parameters do not answer
// 8,000 entries.
const maxProblemErrors = 10

// maxDetail and maxErrorMessage bound a problem's detail and each error's
// message whatever they echo: with maxProblemErrors and echoMax, a problem
// stays within a few KB whatever the request.
const (
	maxDetail       = 1024
	maxErrorMessage = 512
)

// listErrors keeps the first maxProblemErrors of errs and one entry saying
// how many more there are.
func listErrors(errs []error) []error {
	if len(errs) <= maxProblemErrors {
		return errs
	}
	more := len(errs) - maxProblemErrors
	return append(errs[:maxProblemErrors:maxProblemErrors], &huma.ErrorDetail{
		Message: fmt.Sprintf("%d more errors not listed (a problem lists at most %d)", more, maxProblemErrors)})
}

// listEchoes joins the first maxProblemErrors of names, each cut by Echo,
// and says how many more there are.
func listEchoes(names []string) string {
	shown := names
	if len(shown) > maxProblemErrors {
		shown = shown[:maxProblemErrors]
	}
	cut := make([]string, len(shown))
	for i, n := range shown {
		cut[i] = Echo(n)
	}
	s := strings.Join(cut, ", ")
	if more := len(names) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// echoMax bounds how much of one piece of a client's input (an id, a
// name, a value, a location) a problem repeats: longer ones are cut to
// echoMax bytes and an ellipsis, so a 100,000-character id does not come
// back as a 100 KB answer (nor fill logs and support tickets).
const echoMax = 256

// Echo cuts one piece of a client's input to echoMax bytes, at a character
// boundary, plus "…", for a message that repeats it (the console's pages
// use it too). Call it on the piece itself: input may hold spaces or
// quotes, so a message cannot be split back into its pieces.
func Echo(s string) string { return cutAt(s, echoMax) }

// cutAt cuts s to n bytes, at a character boundary, plus "…".
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// cutLocation cuts an error's location ("body.<member>…", "query.<name>",
// "path.<id>"): everything after the first dot is the client's input, cut
// as one piece by Echo.
func cutLocation(loc string) string {
	i := strings.IndexByte(loc, '.')
	if i < 0 {
		return Echo(loc)
	}
	return loc[:i+1] + Echo(loc[i+1:])
}

// cutEchoes is the safety net for a message built with its input already
// cut (Echo): each Go-quoted string (%q) and each other space-separated
// word is cut to echoMax bytes, and the whole message to max bytes.
func cutEchoes(s string, max int) string {
	if len(s) <= echoMax {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		if s[0] == ' ' {
			b.WriteByte(' ')
			s = s[1:]
			continue
		}
		if s[0] == '"' {
			if q, err := strconv.QuotedPrefix(s); err == nil {
				s = s[len(q):]
				if u, _ := strconv.Unquote(q); len(u) > echoMax {
					q = strconv.Quote(Echo(u))
				}
				b.WriteString(q)
				continue
			}
		}
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			i = len(s)
		}
		b.WriteString(Echo(s[:i]))
		s = s[i:]
	}
	return cutAt(b.String(), max)
}

// secretLocation reports whether an error at location (e.g.
// "body.secrets[0]", "body.headers.Authorization") with value may repeat a
// secret: a field in secretFields, anywhere in the path, a URL with a
// query or userinfo, or an object or array (the validator reports an
// unknown or missing property with the whole enclosing object as value,
// which may hold headers or secrets; repeating it tells the client nothing).
func secretLocation(location string, value any) bool {
	if location == "body" {
		return true // the whole request body (e.g. with a wrong Content-Type)
	}
	switch value.(type) {
	case map[string]any, []any:
		return true
	}
	for _, part := range strings.FieldsFunc(location, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
		if secretFields[strings.ToLower(part)] {
			return true
		}
	}
	if v, ok := value.(string); ok && strings.HasSuffix(location, "url") && strings.ContainsAny(v, "?@") {
		return true
	}
	return false
}

// invalid is a 422 naming the field (location) and the rule that failed.
func invalid(location, rule string, value any) error {
	return huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Location: location, Message: rule, Value: value})
}

// fieldErrors collects Herald's own refusals of a request body's fields
// (invalid, and validators that return several joined by errors.Join), so
// that a body breaking several of Herald's rules is answered once with all
// of them, each located at its field, as huma's schema checks answer
// theirs: a client fixes its request in one round trip, not one per error.
// A handler checks every field, adds each check's error, and answers err
// before it writes anything: nothing is changed when any rule is broken.
type fieldErrors struct {
	details []*huma.ErrorDetail
}

// add collects err's refusals of fields (a 422 naming them, or several
// joined). Any other error (a 403, the store being away) is returned, to
// be answered as it is at once; nil otherwise.
func (f *fieldErrors) add(err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if other := f.add(e); other != nil {
				return other
			}
		}
		return nil
	}
	if d, ok := err.(*huma.ErrorDetail); ok {
		f.details = append(f.details, d)
		return nil
	}
	var m *huma.ErrorModel
	if errors.As(err, &m) && m.Status == http.StatusUnprocessableEntity && len(m.Errors) > 0 {
		f.details = append(f.details, m.Errors...)
		return nil
	}
	return err
}

// any reports whether a refusal was collected.
func (f *fieldErrors) any() bool { return len(f.details) > 0 }

// err is nil when nothing was refused, else one 422 listing every refusal
// in the order of body's members (a request body type: its fields' JSON
// names, as the OpenAPI document lists them), the refusals of one member
// in the order they were added (a map's keys sorted by the validator).
func (f *fieldErrors) err(body any) error {
	if len(f.details) == 0 {
		return nil
	}
	order := memberOrder(reflect.TypeOf(body))
	rank := func(loc string) int {
		name, _ := strings.CutPrefix(loc, "body.")
		if i := strings.IndexAny(name, ".["); i >= 0 {
			name = name[:i]
		}
		if r, ok := order[name]; ok {
			return r
		}
		return len(order) // "body" itself, or a member not declared: last
	}
	slices.SortStableFunc(f.details, func(a, b *huma.ErrorDetail) int { return rank(a.Location) - rank(b.Location) })
	errs := make([]error, len(f.details))
	for i, d := range f.details {
		errs[i] = d
	}
	return huma.Error422UnprocessableEntity("validation failed", errs...)
}

// memberOrder maps each JSON member of struct type t (pointers followed)
// to its position in t.
func memberOrder(t reflect.Type) map[string]int {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	order := map[string]int{}
	if t == nil || t.Kind() != reflect.Struct {
		return order
	}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		order[name] = i
	}
	return order
}

// ListQuery is the pagination of every list route.
type ListQuery struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50" doc:"page size, 1–1000"`
	Cursor string `query:"cursor" maxLength:"300" doc:"next_cursor of the previous page, with the same path and filters (400 otherwise: cursor belongs to a different query); limit may change"`
}

func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// checkReady is the readiness check of GET /readyz and herald_ready: the
// store must commit (Store.Ping), then the store's sealed values must open
// with this node's key (the key check, kept for KeyCheckEvery). It returns
// "" when the node is ready, else the reason (metrics.NotReadyStore or
// metrics.NotReadyEncryptionKey) and the error. readiness.probe logs a
// result that changes the node's readiness, so a node that nothing probes
// but a scrape still logs why it is not ready, and one probed every second
// does not log it every second.
func (s *Server) checkReady(ctx context.Context) (string, error) {
	if err := s.cfg.Store.Ping(ctx); err != nil {
		return metrics.NotReadyStore, err
	}
	switch err := s.keyCheck.result(ctx); {
	case err == nil:
	case errors.Is(err, store.ErrWrongKey):
		return metrics.NotReadyEncryptionKey, err
	default: // the store failed or was too slow while the key was checked
		return metrics.NotReadyStore, err
	}
	return "", nil
}

func (s *Server) registerHealth() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(healthAnswer{"ok", buildinfo.Get()})
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		switch reason, err := s.ready.probe(ctx); reason { // probe logged a change of readiness, with its cause
		case metrics.NotReadyStore:
			writeProblem(w, http.StatusServiceUnavailable, "the store is not ready")
			return
		case metrics.NotReadyEncryptionKey:
			if errors.Is(err, store.ErrRetiredKey) {
				writeProblem(w, http.StatusServiceUnavailable, NotReadyRetiredKeyMessage)
			} else {
				writeProblem(w, http.StatusServiceUnavailable, NotReadyWrongKeyMessage)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"status":"ready"}`)
	})
	// Anything no route matches gets a problem, not text/plain: 405 with
	// Allow (RFC 9110 §15.5.6) when the path has routes for other methods,
	// 404 otherwise.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowedMethods(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeProblem(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.Join(allow, ", "))
			return
		}
		writeProblem(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path+"; see /openapi.json")
	})
	if s.cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", s.cfg.Metrics.Handler())
	}
	if s.cfg.Contract != nil {
		s.mux.HandleFunc("GET /contract", func(w http.ResponseWriter, r *http.Request) {
			doc, err := s.contractWithCatalog(r.Context())
			if err != nil {
				writeProblem(w, http.StatusServiceUnavailable, "the store is unavailable; retry later")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(doc)
		})
	}
}

// jsonFormat is huma's JSON format with segmentio/encoding's decoder, a
// drop-in for encoding/json's that is faster on the two decodes huma makes
// of every body (into any for schema validation, then into the input
// struct); bodies reach it after checkJSON, so only well-formed JSON does.
// The publish answer is encoded with segmentio's encoder too: encoding/json
// re-scans its data byte by byte to compact it (7 % of Herald's CPU in
// `herald bench publish`, docs/BENCHMARKS.md), while segmentio's copies it
// after one validating pass. Segmentio does not compact raw JSON, so only
// an answer whose raw JSON is compact by construction may take that path
// (PublishOut: its data is store.CompactJSON's or a stored body's, which
// store.EncodeBody compacted); every other answer is encoding/json's,
// without HTML escaping, as huma's default. VerifyAnswerEncoding makes the
// test suites check that both give the same bytes for every publish answer.
var jsonFormat = huma.Format{
	Marshal: func(w io.Writer, v any) error {
		a, ok := v.(PublishOut)
		if !ok {
			return huma.DefaultJSONFormat.Marshal(w, v)
		}
		if verifyAnswers.Load() {
			return marshalVerified(w, a)
		}
		return marshalCompact(w, a)
	},
	Unmarshal: unmarshalBody,
}

// unmarshalBody decodes a request body, which huma has validated against
// the operation's schema, with segmentio's decoder. A number the schema
// lets through that its Go field cannot hold (a version or pin beyond an
// int, or written 1.0) is answered naming the field and the range, not the decoder's text
// naming Go types ("overflows into Go struct field
// api.UpdateEventTypeBody[]int…").
func unmarshalBody(data []byte, v any) error {
	if p, ok := v.(*any); ok {
		// huma's validation pass: the value is only read, and its strings
		// may share one copy of the body (huma's buffer goes back to its
		// pool before a validation error naming a value is written).
		r, err := segjson.Parse(bytes.Clone(data), p, segjson.DontCopyString)
		if len(r) != 0 && err == nil {
			return segjson.Unmarshal(data, p) // trailing bytes: its error
		}
		return err
	}
	err := segjson.Unmarshal(data, v)
	if err == nil && holdsNegativeZero(data) {
		return negativeZero(data, reflect.TypeOf(v))
	}
	var te *segjson.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return err
	}
	loc := "body"
	if te.Field != "" {
		loc = fieldLocation(data, te.Field)
	}
	// The decoder also refuses an integer written with a fraction or an
	// exponent (1.0, 1e0), which JSON Schema's integer (huma's validation)
	// accepts: the message covers both causes, never calling such a
	// value, in range, out of it.
	switch k := te.Type.Kind(); {
	case k >= reflect.Int && k <= reflect.Int64:
		low := int64(-1) << (te.Type.Bits() - 1)
		return decodeRefusal(loc, fmt.Sprintf("expected an integer from %d to %d%s", low, ^low, integerForm))
	case k >= reflect.Uint && k <= reflect.Uint64:
		return decodeRefusal(loc, fmt.Sprintf("expected an integer from 0 to %d%s", uint64(1)<<te.Type.Bits()-1, integerForm))
	}
	return decodeRefusal(loc, fmt.Sprintf("expected a JSON value that fits %s", te.Type.Kind()))
}

// holdsNegativeZero reports whether data may hold the JSON number -0: a
// "-0" after a ':', ',' or '[' (whitespace between) and before no digit,
// fraction or exponent. It is false for "-05:00" in a timestamp, "ord-0"
// in an id or -0.5, so that a publish's body, where such text is common,
// is not walked again (negativeZero) on its way to the store.
func holdsNegativeZero(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("-0"))
		if j < 0 {
			return false
		}
		j += i
		i = j + 2
		if i < len(data) {
			if c := data[i]; c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' {
				continue
			}
		}
		k := j - 1
		for k >= 0 && (data[k] == ' ' || data[k] == '\t' || data[k] == '\n' || data[k] == '\r') {
			k--
		}
		if k >= 0 && (data[k] == ':' || data[k] == ',' || data[k] == '[') {
			return true
		}
	}
}

// negativeZero refuses, as unmarshalBody refuses 0.0 and 0e0, an integer
// field of data (decoded into a t) written -0: a second spelling of 0,
// which Go's decoder takes as 0 (one spelling per value: plain digits). A
// -0 in a field that is not an integer (a float, a string's text, an
// object's free-form value) is left alone.
func negativeZero(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		loc   string
		t     reflect.Type
		array bool
		index int
		key   string // the member whose value comes next (objects)
	}
	var stack []*frame
	// at is the location and type of the value about to be read.
	at := func() (string, reflect.Type) {
		if len(stack) == 0 {
			return "body", t
		}
		f := stack[len(stack)-1]
		if f.array {
			return fmt.Sprintf("%s[%d]", f.loc, f.index), elemType(f.t, "")
		}
		return f.loc + "." + f.key, elemType(f.t, f.key)
	}
	// done moves past the value just read.
	done := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.array {
			f.index++
		} else {
			f.key = ""
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or what the decoder has accepted
		}
		if len(stack) > 0 {
			if f := stack[len(stack)-1]; !f.array && f.key == "" {
				if k, ok := tok.(string); ok {
					f.key = k
					continue
				}
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				loc, ty := at()
				stack = append(stack, &frame{loc: loc, t: ty, array: v == '['})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case json.Number:
			if v == "-0" {
				loc, ty := at()
				for ty != nil && ty.Kind() == reflect.Pointer {
					ty = ty.Elem()
				}
				if ty != nil && opaque(ty) {
					ty = nil
				}
				switch k := kindOf(ty); {
				case k >= reflect.Int && k <= reflect.Int64:
					low := int64(-1) << (ty.Bits() - 1)
					return decodeRefusal(loc, fmt.Sprintf("expected an integer from %d to %d%s", low, ^low, integerForm))
				case k >= reflect.Uint && k <= reflect.Uint64:
					return decodeRefusal(loc, fmt.Sprintf("expected an integer from 0 to %d%s", uint64(1)<<ty.Bits()-1, integerForm))
				}
			}
			done()
		default:
			done()
		}
	}
}

func kindOf(t reflect.Type) reflect.Kind {
	if t == nil {
		return reflect.Invalid
	}
	return t.Kind()
}

// opaque reports whether a value of type t is decoded whole by its own
// rules, not member by member: raw JSON (json.RawMessage, an event's
// data), bytes, or a type with its own UnmarshalJSON. Nothing inside it is
// an integer field of the request.
func opaque(t reflect.Type) bool {
	if (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() == reflect.Uint8 {
		return true
	}
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// elemType is the Go type of member key (an object) or of an item (an
// array, key "") of a value of type t; nil when it is not known.
func elemType(t reflect.Type, key string) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || opaque(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return t.Elem()
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if name == key && name != "-" {
				return f.Type
			}
		}
	}
	return nil
}

// fieldRules are Herald's rules of the integer fields of request bodies,
// by operation id and location (locateFieldRefusal): the range with its
// unit, which huma's generic messages ("expected number >= 0", "expected
// integer") do not say.
var fieldRules = map[string]map[string]string{
	"create-source":          sourceFieldRules,
	"update-source":          sourceFieldRules,
	"create-endpoint":        {"body.rate_limit_per_second": rateLimitRule, "body.versions.*": pinRule},
	"update-endpoint":        {"body.rate_limit_per_second": rateLimitRule, "body.versions.*": pinRule},
	"rotate-endpoint-secret": {"body.overlap_seconds": overlapRule},
	"create-portal-session":  {"body.ttl_seconds": portalTTLRule},
	"create-event-type":      {"body.versions[].version": versionRule},
	"add-event-type-version": {"body.version": versionRule},
	"update-event-type":      {"body.deprecate[]": deprecateRule, "body.undeprecate[]": undeprecateRule},
}

// fieldRule is the rule in fieldRules of operation op for the field at
// location: keyed by the location with array indexes left out
// (ruleLocation), or, for a value of a map (an endpoint's versions, whose
// members are event type names, dots included), by the map's location
// and ".*", which stands for any member name.
func fieldRule(op, location string) (string, bool) {
	rules := fieldRules[op]
	loc := ruleLocation(location)
	if rule, ok := rules[loc]; ok {
		return rule, true
	}
	for key, rule := range rules {
		if m, ok := strings.CutSuffix(key, "*"); ok && len(loc) > len(m) && strings.HasPrefix(loc, m) {
			return rule, true
		}
	}
	return "", false
}

// ruleLocation is location as fieldRules keys it: an array item's index
// left out (body.versions[0].version is body.versions[].version).
func ruleLocation(location string) string {
	if !strings.Contains(location, "[") {
		return location
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(location, '[')
		j := strings.IndexByte(location[i+1:], ']')
		if i < 0 || j < 0 {
			b.WriteString(location)
			return b.String()
		}
		b.WriteString(location[:i+1])
		location = location[i+1+j:]
	}
}

// integerForm is how Herald's API takes an integer: in plain digits. JSON
// has one number type (RFC 8259 §6) and JSON Schema's integer is any
// number whose fraction is zero, so 1e3 and 1000.0 pass the schema; Go's
// decoder refuses them, and so does Herald, for every integer field (one
// spelling per value: nothing reads 1e3 as 1000 in one place and refuses
// it in another).
const integerForm = "; an integer is written in plain digits, without a fraction or exponent (1000, not 1e3 or 1000.0)"

// decodeRefusal is unmarshalBody's refusal of the value at loc
// (body.<field>…). huma reports it at location "body" with this error's
// text as the message; locateFieldRefusal moves it back to loc.
func decodeRefusal(loc, msg string) error { return errors.New(loc + ": " + msg) }

// locateFieldRefusal rewrites, in place, one refusal of huma's schema or
// decoder in operation op: a decodeRefusal (at "body") is moved to its
// field, and a refusal at a field with a rule in fieldRules says that rule
// instead of huma's generic message ("expected number >= 0"), the value
// kept. Herald's own refusals (invalid) never pass here.
func locateFieldRefusal(op string, d *huma.ErrorDetail) {
	decoded := false
	if d.Location == "body" && strings.HasPrefix(d.Message, "body.") {
		if loc, msg, ok := strings.Cut(d.Message, ": "); ok && !strings.ContainsAny(loc, " \"") {
			d.Location, d.Message, d.Value = loc, msg, nil
			decoded = true
		}
	}
	rule, ok := fieldRule(op, d.Location)
	if !ok {
		return
	}
	if decoded {
		if unbounded[rule] {
			// The decoder's refusal may be of a value past any int (its
			// message names that range), which such a rule would call
			// valid.
			return
		}
		rule += integerForm
	}
	d.Message = rule
}

// unbounded are the rules of fieldRules whose field's schema sets no
// maximum: the decoder refuses a value there for its spelling (1e0) or for
// being past any int, so its own message, which says both, is kept.
var unbounded = map[string]bool{versionRule: true, deprecateRule: true, undeprecateRule: true, pinRule: true}

// fieldLocation turns the decoder's path of a field (segmentio's
// "versions.0.version", members and array indexes alike joined by dots)
// into huma's location of it (body.versions[0].version: an array item in
// brackets, 0-based, as huma's schema refusals name it), following data
// to tell an index from a member name (which may hold dots). A path data
// does not follow is kept as it is.
func fieldLocation(data []byte, path string) string {
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return "body." + path
	}
	loc := "body"
	for rest := path; rest != ""; {
		switch v := doc.(type) {
		case []any:
			tok, after, _ := strings.Cut(rest, ".")
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return "body." + path
			}
			loc += "[" + tok + "]"
			doc, rest = v[i], after
		case map[string]any:
			// The longest member name that the path starts with.
			best := -1
			for name := range v {
				if (rest == name || strings.HasPrefix(rest, name+".")) && len(name) > best {
					best = len(name)
				}
			}
			if best < 0 {
				return "body." + path
			}
			name := rest[:best]
			loc += "." + name
			doc, rest = v[name], strings.TrimPrefix(rest[best:], ".")
		default:
			return "body." + path
		}
	}
	return loc
}

// marshalCompact encodes v as huma's default encoder does (no HTML
// escaping, a final newline) provided every raw JSON value in v is
// compact.
func marshalCompact(w io.Writer, v any) error {
	enc := segjson.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

var verifyAnswers atomic.Bool

// VerifyAnswerEncoding is for tests: from then on every answer
// marshalCompact encodes is also encoded with huma's default encoder
// (encoding/json), and one whose bytes or error differ panics, naming both.
func VerifyAnswerEncoding() { verifyAnswers.Store(true) }

func marshalVerified(w io.Writer, v any) error {
	var fast, std bytes.Buffer
	errFast := marshalCompact(&fast, v)
	errStd := huma.DefaultJSONFormat.Marshal(&std, v)
	if (errFast == nil) != (errStd == nil) || !bytes.Equal(fast.Bytes(), std.Bytes()) {
		panic(fmt.Sprintf("api: the answer encoder differs from encoding/json for %T:\n fast %q (%v)\n std  %q (%v)", v, fast.Bytes(), errFast, std.Bytes(), errStd))
	}
	if errFast != nil {
		return errFast
	}
	_, err := w.Write(fast.Bytes())
	return err
}

// allowedMethods lists the methods with a route for r's path (none when
// only the catch-all matches it).
func (s *Server) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 && slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	return allow
}
