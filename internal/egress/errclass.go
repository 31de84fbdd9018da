package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Error classes reported in Result.ErrorClass. Every non-empty class is a
// failed attempt that the retry policy retries.
const (
	// ClassTimeout: the attempt deadline (Config.Timeout, or the caller's
	// context deadline) expired before the response body was read, or a
	// network operation timed out.
	ClassTimeout = "timeout"
	// ClassDNS: the host name could not be resolved.
	ClassDNS = "dns"
	// ClassConnectionRefused: the destination refused the TCP connection.
	ClassConnectionRefused = "connection_refused"
	// ClassConnectionReset: the connection was reset or closed by the
	// destination before a complete response was read.
	ClassConnectionReset = "connection_reset"
	// ClassTLS: the TLS handshake failed (untrusted, expired or mismatched
	// certificate, protocol mismatch, alert from the server, plain HTTP on
	// an https port, …).
	ClassTLS = "tls"
	// ClassBlocked: the egress policy refused the destination: a dialed
	// address is in a denied range, or the URL no longer passes CheckURL
	// (e.g. --allow-http was turned off). No connection was made.
	ClassBlocked = "blocked"
	// ClassNetwork: any other transport failure (unreachable network,
	// malformed HTTP response, …).
	ClassNetwork = "network"
	// ClassCanceled: the caller's context was canceled (e.g. Herald is
	// shutting down). The attempt says nothing about the endpoint and
	// should not count against it.
	ClassCanceled = "canceled"
)

// blockedDetail is the only text ever reported for ClassBlocked: it must
// not reveal resolved addresses or system error text.
const blockedDetail = "destination address is not allowed by the egress policy"

// classify maps a transport or body-read error to an error class and a safe
// detail. ctx is the attempt context.
func classify(ctx context.Context, err error, timeout time.Duration) (class, detail string) {
	switch {
	case isBlocked(err):
		return ClassBlocked, blockedDetail
	case errors.Is(err, context.Canceled) || errors.Is(context.Cause(ctx), context.Canceled):
		return ClassCanceled, "attempt canceled before it completed"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ClassTimeout, "no complete response within the attempt timeout (" + timeout.String() + ")"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		switch {
		case dnsErr.IsNotFound:
			return ClassDNS, "DNS lookup failed: no such host"
		case dnsErr.IsTimeout:
			return ClassDNS, "DNS lookup timed out"
		}
		return ClassDNS, "DNS lookup failed"
	}
	if d, ok := tlsDetail(err); ok {
		return ClassTLS, d
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnectionRefused, "connection refused by the destination"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return ClassConnectionReset, "connection reset by the destination"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassConnectionReset, "connection closed by the destination before a complete response"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout, "network operation timed out"
	}
	switch {
	case errors.Is(err, syscall.ENETUNREACH):
		return ClassNetwork, "network unreachable"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return ClassNetwork, "host unreachable"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return ClassNetwork, "network error during " + op.Op
	}
	return ClassNetwork, "transport error (malformed or unexpected HTTP response)"
}

func isBlocked(err error) bool {
	return errors.Is(err, ssrf.ErrProhibitedIP) ||
		errors.Is(err, ssrf.ErrProhibitedPort) ||
		errors.Is(err, ssrf.ErrProhibitedNetwork) ||
		errors.Is(err, ssrf.ErrInvalidHostPort)
}

// tlsDetail recognises TLS handshake failures.
func tlsDetail(err error) (string, bool) {
	var (
		unknownAuth x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalid     x509.CertificateInvalidError
		roots       x509.SystemRootsError
		verify      *tls.CertificateVerificationError
		record      tls.RecordHeaderError
		alert       tls.AlertError
		ech         *tls.ECHRejectionError
		op          *net.OpError
	)
	switch {
	case errors.As(err, &unknownAuth):
		return "TLS: certificate signed by an unknown authority", true
	case errors.As(err, &hostname):
		return "TLS: certificate is not valid for the endpoint host name", true
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return "TLS: certificate has expired or is not yet valid", true
		}
		return "TLS: certificate is invalid", true
	case errors.As(err, &roots):
		return "TLS: system root certificates unavailable", true
	case errors.As(err, &verify):
		return "TLS: certificate verification failed", true
	case errors.Is(err, http.ErrSchemeMismatch):
		return "TLS: the destination answered plain HTTP on an https URL", true
	case errors.As(err, &record):
		return "TLS: the destination did not answer with TLS", true
	case errors.As(err, &alert):
		return "TLS: handshake failed: " + alert.Error(), true
	case errors.As(err, &ech):
		return "TLS: encrypted client hello rejected", true
	case errors.As(err, &op) && op.Op == "remote error":
		// the server sent a TLS alert; op.Err is crypto/tls's alert text
		return clip("TLS: alert from the destination: " + op.Err.Error()), true
	case strings.Contains(err.Error(), "tls: "):
		return "TLS: handshake failed", true
	}
	return "", false
}
