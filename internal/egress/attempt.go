package egress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Request is one delivery attempt to send.
type Request struct {
	// URL is the endpoint URL; it must pass CheckURL.
	URL string
	// Header holds the complete headers to send (signature, event id,
	// custom endpoint headers, …). It is not modified, but it may be sent
	// as is: the caller must not change it until Do returns. The client
	// adds Content-Type: application/json and User-Agent where absent (on
	// a copy); a Content-Type given is sent as is (an inbound source's
	// forward keeps the provider's, a form body's included).
	Header http.Header
	// Body is the request body, the same bytes on every attempt.
	Body []byte
}

// Result is what one attempt produced. Do fills it completely; the attempt
// failed when ErrorClass is non-empty, even if StatusCode is set (the
// response headers arrived but the body could not be read in time).
type Result struct {
	// StatusCode is the HTTP status code, 0 when no response arrived.
	StatusCode int
	// Location is the Location header of a 3xx answer (never followed),
	// "" otherwise; at most MaxURLLength bytes of valid UTF-8.
	Location string
	// RetryAfter is the raw Retry-After header ("" if absent), at most 64
	// bytes of valid UTF-8; see retry.ParseRetryAfter.
	RetryAfter string
	// Excerpt is the first ExcerptBytes of the response body, cut on a
	// UTF-8 boundary. It is always valid UTF-8 without NUL bytes, at most
	// ExcerptBytes long: invalid sequences and NUL are replaced by U+FFFD
	// (so any store, PostgreSQL text included, can keep it as text).
	Excerpt string
	// BodyBytes is how many body bytes were read, at most
	// MaxResponseBytes.
	BodyBytes int64
	// Truncated reports that the body was longer than MaxResponseBytes;
	// the rest was not read.
	Truncated bool
	// Duration is the time from the start of the attempt to the end of the
	// body read (or to the failure).
	Duration time.Duration
	// ErrorClass is "" for a complete HTTP response, else one of the
	// Class* constants: "timeout", "dns", "connection_refused",
	// "connection_reset", "tls", "blocked", "network", "canceled".
	ErrorClass string
	// ErrorDetail is a short, safe, human-readable description of the
	// failure ("" when ErrorClass is ""). It never contains resolved IP
	// addresses or raw system error text; for "blocked" it is always
	// "destination address is not allowed by the egress policy" or names
	// the URL rule that failed.
	ErrorDetail string
}

// Do sends one POST attempt of r and reads the answer. It never returns a Go
// error: every failure is classified into Result.ErrorClass and
// Result.ErrorDetail. The URL is checked with CheckURL first (the
// configuration may have changed since the endpoint was created); a URL
// that fails is reported as "blocked" without any connection attempt.
//
// The attempt is bounded by Config.Timeout and by ctx. If ctx is canceled
// the result has ErrorClass "canceled".
func (c *Client) Do(ctx context.Context, r Request) Result {
	start := time.Now()
	if _, err := c.CheckURL(r.URL); err != nil {
		res := Result{ErrorClass: ClassBlocked, ErrorDetail: blockedDetail}
		var pe *PolicyError
		if errors.As(err, &pe) && pe.Rule != RuleBlockedAddress {
			res.ErrorDetail = clip("endpoint URL refused by the egress policy (" + pe.Rule + "): " + pe.Message)
		}
		res.Duration = time.Since(start)
		return res
	}
	return c.send(ctx, start, r)
}

// send performs the HTTP exchange; r.URL has been checked by the caller.
func (c *Client) send(ctx context.Context, start time.Time, r Request) (res Result) {
	defer func() { res.Duration = time.Since(start) }()

	// A caller's deadline within the timeout already bounds the attempt
	// (the engine sets one per attempt): no second timer then.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > c.cfg.Timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		res.ErrorClass, res.ErrorDetail = ClassBlocked, "endpoint URL cannot be parsed"
		return res
	}
	if len(r.Header["Content-Type"]) == 1 && r.Header.Get("User-Agent") != "" {
		// Nothing to add: send the caller's header as is, without a copy
		// (a copy of the dozen headers of an attempt was ~0.7 KB, 4 % of
		// the bytes a drain allocated per delivery).
		req.Header = r.Header
	} else {
		if r.Header != nil {
			req.Header = r.Header.Clone()
		}
		if len(req.Header["Content-Type"]) == 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", c.cfg.UserAgent)
		}
	}

	// The transport itself, not an http.Client: a Client would only add
	// redirect handling, which must never happen here (SSRF: 3xx answers
	// are reported with their Location, not followed), and it copies every
	// request's headers to be ready for a redirect (9 % of the bytes a
	// drain allocated).
	resp, err := c.transport.RoundTrip(req)
	if err != nil {
		res.ErrorClass, res.ErrorDetail = classify(ctx, err, c.cfg.Timeout)
		return res
	}
	defer resp.Body.Close() // unread data is not drained: the connection is closed instead

	res.StatusCode = resp.StatusCode
	// Header values may hold any bytes: store them as bounded, valid text.
	res.RetryAfter = excerpt([]byte(resp.Header.Get("Retry-After")), false, maxRetryAfterLen)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		res.Location = excerpt([]byte(resp.Header.Get("Location")), false, MaxURLLength)
	}

	// Read at most MaxResponseBytes (+1 byte to detect truncation).
	limit := c.cfg.MaxResponseBytes + 1
	if limit < 0 { // MaxResponseBytes == math.MaxInt64
		limit = c.cfg.MaxResponseBytes
	}
	lr := io.LimitReader(resp.Body, limit)
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	buf := *bp
	n, err := io.ReadFull(lr, buf)
	total := int64(n)
	full := err == nil
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	if full {
		var rest int64
		rest, err = io.Copy(io.Discard, lr)
		total += rest
	}
	if total > c.cfg.MaxResponseBytes {
		total, res.Truncated = c.cfg.MaxResponseBytes, true
	}
	res.BodyBytes = total
	res.Excerpt = excerpt(buf[:n], full, c.cfg.ExcerptBytes)
	if err != nil {
		res.ErrorClass, res.ErrorDetail = classify(ctx, err, c.cfg.Timeout)
	}
	return res
}

// excerpt turns the first bytes of a body into safe text: a rune cut by the
// buffer end is dropped (when cut is true), invalid UTF-8 and NUL become
// U+FFFD, and the result is at most limit bytes long (replacement characters
// are 3 bytes wide, so a binary body may lose its tail).
func excerpt(b []byte, cut bool, limit int) string {
	if cut {
		// Drop a trailing incomplete rune (at most utf8.UTFMax-1 bytes).
		for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(limit)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == 0 {
			r = utf8.RuneError
		}
		if sb.Len()+utf8.RuneLen(r) > limit {
			break
		}
		sb.WriteRune(r)
		b = b[size:]
	}
	return sb.String()
}

func clip(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	s = s[:maxDetail]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
