// Package listen is a local webhook receiver for demos and debugging: it
// verifies the signatures of each delivery with the public webhook package,
// prints a readable block per request and answers with a scripted sequence
// of status codes, so that retries, Retry-After and dead letters can be
// watched from the receiving side. With secrets, a request whose signature
// does not verify is refused 401 {"error":"invalid signature"}, as
// webhook.Middleware refuses it, and takes no step of the script: a
// receiver must never acknowledge what it could not verify. It backs
// `herald listen`.
package listen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/herald-webhooks/herald/webhook"
)

// DefaultMaxBodyBytes is the largest request body a Receiver accepts when
// Config.MaxBodyBytes is zero; larger bodies are answered 413.
const DefaultMaxBodyBytes = 1 << 20

// maxPrintedBody caps the printed body (after JSON indentation), in bytes.
const maxPrintedBody = 2 << 10

// Config configures a Receiver.
type Config struct {
	// Secrets are the whsec_… secrets to verify with; several are allowed
	// for a rotation overlap (a signature by any of them verifies). A
	// request that does not verify (every signature scheme present must,
	// as for webhook.Verifier.Verify; none present fails) is answered 401
	// {"error":"invalid signature"} and takes no step of Statuses. With
	// none, signatures are reported as "not verified: no --secret given"
	// and every request is answered from the script.
	Secrets []string

	// Statuses is the script of statuses to answer, one per verified
	// request (every request without Secrets) in arrival order; the last
	// one repeats. Empty means 200 for every request. Each must be in
	// 100–599 (a 1xx is sent as an informational answer, after which
	// net/http completes the request with 200).
	Statuses []int

	// RetryAfter, when set, is sent as the Retry-After header of 429 and
	// 503 answers (seconds or an HTTP date).
	RetryAfter string

	// Out receives one printed block per request; nil discards.
	Out io.Writer

	// Now is the clock for arrival times and the replay window; nil means
	// time.Now.
	Now func() time.Time

	// MaxBodyBytes caps the request body; zero means DefaultMaxBodyBytes.
	// Larger bodies are answered 413 without consuming the status script.
	MaxBodyBytes int64
}

// Receiver is an http.Handler that verifies, prints and answers webhook
// deliveries as its Config says. It is safe for concurrent use: every
// request takes exactly one step of the status script, and printed blocks
// never interleave.
type Receiver struct {
	cfg      Config
	verifier *webhook.Verifier // nil without secrets

	mu    sync.Mutex // guards seen and script, and serialises writes to cfg.Out
	seen  int
	steps int // requests that consumed a step of the script
}

// bodyInvalidSignature is the answer to a request that does not verify:
// webhook.Middleware's, so that herald listen teaches what a receiver
// built on the webhook package does.
const bodyInvalidSignature = `{"error":"invalid signature"}`

// New returns a Receiver for cfg. It rejects a secret that is empty or
// not a whsec_ secret ([webhook.ValidateSecret]), a status outside 100–599
// and a negative MaxBodyBytes.
func New(cfg Config) (*Receiver, error) {
	for i, s := range cfg.Secrets {
		// Herald's secrets are whsec_ and base64: one that is not (a
		// placeholder left unpasted, a truncated copy) could never verify
		// the webhook-signature of a delivery, so it is refused here rather
		// than reported as NOT VERIFIED on every delivery.
		if err := webhook.ValidateSecret(s); err != nil {
			return nil, fmt.Errorf("listen: secret %d: %w", i+1, err)
		}
	}
	for _, st := range cfg.Statuses {
		if st < 100 || st > 599 {
			return nil, fmt.Errorf("listen: status %d is outside 100–599", st)
		}
	}
	switch {
	case cfg.MaxBodyBytes < 0:
		return nil, fmt.Errorf("listen: MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	case cfg.MaxBodyBytes == 0:
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Secrets = append([]string(nil), cfg.Secrets...)
	cfg.Statuses = append([]int(nil), cfg.Statuses...)
	r := &Receiver{cfg: cfg}
	if len(cfg.Secrets) > 0 {
		r.verifier = &webhook.Verifier{Secrets: cfg.Secrets, Now: cfg.Now}
	}
	return r, nil
}

// Count returns the number of requests seen so far, including those
// answered 413.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// ServeHTTP verifies, prints and answers one request.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	arrived := r.cfg.Now()
	body, readErr := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes))

	var b strings.Builder
	fmt.Fprintf(&b, "── %s  %s %s\n", arrived.UTC().Format("2006-01-02T15:04:05.000Z07:00"), req.Method, req.URL.RequestURI())
	for _, h := range []string{"X-Event-Id", "X-Event-Type", "X-Delivery-Attempt"} {
		v := req.Header.Get(h)
		if v == "" {
			v = "-"
		}
		field(&b, h, v)
	}

	var status int
	refused := false // the signature did not verify
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(readErr, &tooLarge):
		status = http.StatusRequestEntityTooLarge
		field(&b, "answered", fmt.Sprintf("%d %s (body larger than %d bytes)", status, http.StatusText(status), r.cfg.MaxBodyBytes))
		r.mu.Lock()
		r.seen++
		r.mu.Unlock()
	case readErr != nil:
		status = http.StatusBadRequest
		field(&b, "answered", fmt.Sprintf("%d %s (reading the body: %v)", status, http.StatusText(status), readErr))
		r.mu.Lock()
		r.seen++
		r.mu.Unlock()
	default:
		lines, verr := r.verify(req.Header, body)
		for _, line := range lines {
			field(&b, line[0], line[1])
		}
		if verr != nil {
			// Refused as webhook.Middleware refuses it (401, whatever the
			// reason): acknowledging it would tell the sender it was
			// delivered. The script is kept for verified requests.
			refused = true
			status = http.StatusUnauthorized
			r.mu.Lock()
			r.seen++
			r.mu.Unlock()
			field(&b, "answered", fmt.Sprintf("%d %s (invalid signature: %s; the --status script was not advanced)",
				status, http.StatusText(status), reason(verr)))
		} else {
			status = r.next()
			answer := fmt.Sprintf("%d %s", status, http.StatusText(status))
			if r.cfg.RetryAfter != "" && retryAfterStatus(status) {
				answer += " (Retry-After: " + r.cfg.RetryAfter + ")"
			}
			field(&b, "answered", answer)
		}
		printBody(&b, body)
	}
	b.WriteByte('\n')
	// Print before answering, so that the block is out when the sender
	// sees the answer.
	r.mu.Lock()
	_, _ = io.WriteString(r.cfg.Out, b.String())
	r.mu.Unlock()

	if refused {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, bodyInvalidSignature)
		return
	}
	if r.cfg.RetryAfter != "" && retryAfterStatus(status) {
		w.Header().Set("Retry-After", r.cfg.RetryAfter)
	}
	if bodyAllowed(status) {
		w.Header().Set("Content-Type", "application/json")
	}
	if status == http.StatusRequestEntityTooLarge {
		w.Header().Set("Connection", "close") // the rest of the body is not read
	}
	w.WriteHeader(status)
	if bodyAllowed(status) {
		if status >= 200 && status < 300 {
			_, _ = io.WriteString(w, `{"received":true}`)
		} else {
			_, _ = io.WriteString(w, `{"error":"scripted status"}`)
		}
	}
}

// next counts a request and returns its scripted status.
func (r *Receiver) next() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	i := r.steps
	r.steps++
	switch n := len(r.cfg.Statuses); {
	case n == 0:
		return http.StatusOK
	case i >= n:
		return r.cfg.Statuses[n-1]
	default:
		return r.cfg.Statuses[i]
	}
}

// verify returns one (label, result) line per signature scheme present in
// h, or a single line when none is, and the first failure (nil when every
// scheme present verified, and always without secrets). Each scheme is
// checked by webhook.Verifier.Verify on its own headers, so that a
// repeated header gets the middleware's verdict: a signature header sent
// several times is a list of candidates, an id or timestamp sent twice is
// malformed; as for Verify on the whole request, every scheme present must
// verify, and a request with none fails.
func (r *Receiver) verify(h http.Header, body []byte) ([][2]string, error) {
	var lines [][2]string
	var first error
	add := func(label string, err error) {
		lines = append(lines, [2]string{label, r.result(err)})
		if first == nil {
			first = err
		}
	}
	if present(h, webhook.HeaderSignature) {
		add("X-Signature", r.check(h, body, webhook.HeaderSignature))
	}

	sets := [][4]string{
		{"webhook-signature", webhook.HeaderWebhookID, webhook.HeaderWebhookTimestamp, webhook.HeaderWebhookSignature},
		{"svix-signature", "Svix-Id", "Svix-Timestamp", "Svix-Signature"},
	}
	for _, set := range sets {
		if !present(h, set[1:]...) {
			continue
		}
		add(set[0], r.check(h, body, set[1:]...))
		break // svix-* headers count only when webhook-* are absent, as in webhook.Verifier.Verify
	}

	if len(lines) == 0 {
		if r.verifier == nil {
			return [][2]string{{"signature", "none (not verified: no --secret given)"}}, nil
		}
		add("signature", r.verifier.Verify(h, body))
	}
	return lines, first
}

// present reports whether any of the headers names has a non-empty value
// or is sent more than once.
func present(h http.Header, names ...string) bool {
	for _, name := range names {
		vs := h.Values(name)
		if len(vs) > 1 {
			return true
		}
		for _, v := range vs {
			if v != "" {
				return true
			}
		}
	}
	return false
}

// check verifies body against the headers names of h alone (one scheme):
// nil without secrets (nothing is checked).
func (r *Receiver) check(h http.Header, body []byte, names ...string) error {
	if r.verifier == nil {
		return nil
	}
	only := http.Header{}
	for _, name := range names {
		if vs := h.Values(name); len(vs) > 0 {
			only[name] = vs
		}
	}
	return r.verifier.Verify(only, body)
}

// result renders a verification outcome.
func (r *Receiver) result(err error) string {
	switch {
	case r.verifier == nil && err == nil:
		return "not verified: no --secret given"
	case err == nil:
		return "verified"
	default:
		return "NOT VERIFIED: " + reason(err)
	}
}

// reason renders why a verification failed, without the package prefix.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), "webhook: ")
}

func field(b *strings.Builder, label, value string) {
	fmt.Fprintf(b, "   %-19s %s\n", label+":", value)
}

// printBody appends the body: indented when it is JSON, raw otherwise
// (quoted when it is not UTF-8 text or holds control characters, which a
// terminal would act on), cut at maxPrintedBody bytes.
func printBody(b *strings.Builder, body []byte) {
	if len(body) == 0 {
		field(b, "body", "(empty)")
		return
	}
	kind := "raw"
	var text []byte
	var buf bytes.Buffer
	switch {
	case !printable(body):
		kind, text = "quoted", []byte(strconv.Quote(string(body)))
	case json.Valid(body) && json.Indent(&buf, body, "     ", "  ") == nil:
		kind, text = "JSON", buf.Bytes()
	case utf8.Valid(body):
		text = body
	default:
		kind, text = "binary, quoted", []byte(strconv.Quote(string(body)))
	}
	field(b, "body", fmt.Sprintf("%d bytes, %s", len(body), kind))
	cut := 0
	if len(text) > maxPrintedBody {
		n := maxPrintedBody
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		cut, text = len(text)-n, text[:n]
	}
	if kind == "raw" {
		text = bytes.ReplaceAll(text, []byte("\n"), []byte("\n     "))
	}
	b.WriteString("     ")
	b.Write(text)
	b.WriteByte('\n')
	if cut > 0 {
		fmt.Fprintf(b, "     … (%d more bytes not shown)\n", cut)
	}
}

// printable reports whether body, when it is UTF-8, holds no control
// character (C0, DEL or C1) other than tab, line feed and carriage return.
// Invalid UTF-8 is left to the "binary, quoted" case.
func printable(body []byte) bool {
	for _, c := range string(body) {
		if unicode.IsControl(c) && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func retryAfterStatus(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// bodyAllowed reports whether an answer with status may carry a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
