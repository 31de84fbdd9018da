package tlsreload

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// ExpiringWithin is how long before its expiry a certificate is warned
// about at each load: 14 days. ACME clients renew far earlier (certbot and
// cert-manager when 30 days are left of a 90-day certificate, Caddy at a
// third of the lifetime), so a certificate inside the window is one whose
// renewal has been failing for about two weeks, with two weeks left to
// fix it. A certificate issued for less than six times the window (84
// days: 6-day and 45-day ACME certificates) is warned about in the last
// sixth of its lifetime instead (a day for a 6-day certificate), so one
// renewed on time is never warned about.
const ExpiringWithin = 14 * 24 * time.Hour

// expiringWithin is the warning window of a certificate valid from
// notBefore to notAfter (see ExpiringWithin).
func expiringWithin(notBefore, notAfter time.Time) time.Duration {
	return min(ExpiringWithin, notAfter.Sub(notBefore)/6)
}

// keyFileOthers are the permission bits of a private key file that let
// users other than its owner at it: every group and other bit (read, write,
// execute), as OpenSSH refuses a private key with any of 0077 set.
const keyFileOthers os.FileMode = 0o077

// A Warning is something wrong with a certificate pair that is served all
// the same: a log message and its attributes.
type Warning struct {
	Msg   string
	Attrs []slog.Attr
}

// Warnings returns what an operator should hear about the pair c, loaded
// from certFile and keyFile, at now: each certificate of the chain (Chain:
// the leaf, and every intermediate, or root, the certificate file holds
// after it) expired, not valid yet or expiring within its window
// (ExpiringWithin), or not parseable, each warning naming the certificate
// (attributes certificate, position and subject); and a key file with any
// permission for its group or others (read, write or execute:
// keyFileOthers). An intermediate counts as the leaf does: a client that
// checks dates refuses the chain whichever certificate of it is outside
// its validity. The pair is served anyway: a server that refused an
// expired certificate at start or reload would turn a missed renewal (a
// warning to the clients that check dates) into an outage for every
// client, and a renewal loads without a restart. An expired self-signed
// root (SelfSignedRoot) is warned about for what it is: clients ignore a
// served root, so it is no outage, only worth removing from the file.
func Warnings(c *tls.Certificate, certFile, keyFile string, now time.Time) []Warning {
	var ws []Warning
	chain := Chain(c)
	for _, cc := range chain {
		which := []slog.Attr{slog.String("cert", certFile), slog.String("certificate", cc.Kind),
			slog.String("position", fmt.Sprintf("%d of %d", cc.Position, len(chain)))}
		if cc.Cert == nil {
			ws = append(ws, Warning{"a certificate of the TLS chain file does not parse: clients that need it cannot build the chain; put the renewal tool's full chain in the certificate file",
				append(which, slog.String("error", cc.Err.Error()))})
			continue
		}
		nb, na := cc.Cert.NotBefore, cc.Cert.NotAfter
		dates := append(which, slog.String("subject", cc.Cert.Subject.String()),
			slog.String("not_before", nb.UTC().Format(time.RFC3339)), slog.String("not_after", na.UTC().Format(time.RFC3339)),
			slog.String("now", now.UTC().Format(time.RFC3339)))
		leaf := cc.Position == 1
		switch {
		case now.After(na) && leaf:
			ws = append(ws, Warning{"the TLS certificate has expired: clients that check dates refuse it; it is served anyway until renewed files are in place (they are read at the next handshake or on SIGHUP)", dates})
		case now.After(na) && cc.SelfSignedRoot():
			ws = append(ws, Warning{"the served root of the TLS chain (not the leaf) has expired: clients ignore a served root (they use the roots of their own trust store), so this breaks none of them and is not an outage; it is worth removing from the chain file: remove it from the certificate file (read at the next handshake or on SIGHUP)", dates})
		case now.After(na):
			ws = append(ws, Warning{"a certificate of the TLS chain (not the leaf) has expired: clients that check dates refuse the chain; it is served anyway until the certificate file holds the CA's current chain (the renewal tool's full chain; read at the next handshake or on SIGHUP)", dates})
		case now.Before(nb) && leaf:
			ws = append(ws, Warning{"the TLS certificate is not valid yet (is this machine's clock right?): clients that check dates refuse it until not_before; it is served anyway", dates})
		case now.Before(nb):
			ws = append(ws, Warning{"a certificate of the TLS chain (not the leaf) is not valid yet (is this machine's clock right?): clients that check dates refuse the chain until its not_before; it is served anyway", dates})
		case na.Sub(now) < expiringWithin(nb, na) && leaf:
			ws = append(ws, Warning{"the TLS certificate expires soon and was not renewed: check the renewal (certbot, cert-manager, …); renewed files are read at the next handshake or on SIGHUP",
				append(dates, slog.String("expires_in", na.Sub(now).Round(time.Minute).String()))})
		case na.Sub(now) < expiringWithin(nb, na):
			ws = append(ws, Warning{"a certificate of the TLS chain (not the leaf) expires soon: put the CA's current chain in the certificate file (the renewal tool's full chain); it is read at the next handshake or on SIGHUP",
				append(dates, slog.String("expires_in", na.Sub(now).Round(time.Minute).String()))})
		}
	}
	// The key lets whoever reads it impersonate this server, and whoever
	// writes it replace it: as the database's key file, owner-only. Any
	// permission bit for the group or others counts (read, write or
	// execute: the 0077 mask OpenSSH applies to private keys), not only
	// read. Herald does not change its mode (the file is the renewal
	// tool's, which would set it back), it says so.
	if info, err := os.Stat(keyFile); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&keyFileOthers != 0 {
		ws = append(ws, Warning{"the TLS private key file is open to other users: its group or others have permissions on it (whoever reads it can impersonate this server, whoever writes it can replace it); make it private (owner only: chmod 600), and if they are not trusted, replace the key and its certificate",
			[]slog.Attr{slog.String("file", keyFile), slog.String("mode", fmt.Sprintf("%04o", uint32(info.Mode().Perm())))}})
	}
	return ws
}

// Describe returns the log attributes of the certificate c: its subject,
// subject alternative names (DNS names, IP addresses, URIs and e-mail
// addresses, comma-separated), serial (hexadecimal bytes, a leading zero
// kept, as `openssl x509 -serial` shows it) and expiry.
func Describe(c *tls.Certificate) []slog.Attr {
	if c == nil || c.Leaf == nil {
		return nil
	}
	l := c.Leaf
	var sans []string
	sans = append(sans, l.DNSNames...)
	for _, ip := range l.IPAddresses {
		sans = append(sans, ip.String())
	}
	for _, u := range l.URIs {
		sans = append(sans, u.String())
	}
	sans = append(sans, l.EmailAddresses...)
	return []slog.Attr{slog.String("subject", l.Subject.String()), slog.String("sans", strings.Join(sans, ",")),
		slog.String("serial", fmt.Sprintf("%X", l.SerialNumber.Bytes())), slog.String("not_after", l.NotAfter.UTC().Format(time.RFC3339))}
}

// A ChainCertificate is one certificate of the chain a pair serves, as its
// certificate file lists it.
type ChainCertificate struct {
	// Position is its place in the file, from 1 (the leaf).
	Position int
	// Kind is "leaf" (position 1), "root" (a later certificate issued by
	// itself: a file may hold its CA's root) or "intermediate".
	Kind string
	// Cert is the certificate; nil when it does not parse (Err says why).
	Cert *x509.Certificate
	Err  error
}

// Chain returns every certificate of c in the order of its certificate
// file: the leaf (c.Leaf, which tls.LoadX509KeyPair sets, else parsed
// here), then each certificate after it, parsed here (crypto/tls parses
// only the leaf, and sends the rest as they are). Nil for a nil c.
func Chain(c *tls.Certificate) []ChainCertificate {
	if c == nil {
		return nil
	}
	out := make([]ChainCertificate, 0, len(c.Certificate))
	for i, der := range c.Certificate {
		cc := ChainCertificate{Position: i + 1, Kind: "intermediate"}
		if i == 0 && c.Leaf != nil {
			cc.Cert = c.Leaf
		} else {
			cc.Cert, cc.Err = x509.ParseCertificate(der)
		}
		switch {
		case i == 0:
			cc.Kind = "leaf"
		case cc.Cert != nil && bytes.Equal(cc.Cert.RawSubject, cc.Cert.RawIssuer):
			cc.Kind = "root"
		}
		out = append(out, cc)
	}
	return out
}

// FirstExpiring returns the certificate of c's chain (Chain) that expires
// first, the leaf on a tie, among the leaf and the intermediates: the
// chain served stops working for clients that check dates at its
// NotAfter, whichever of them it is. A self-signed root after the leaf is
// left out (SelfSignedRoot): clients ignore a served root and build the
// path to one of their own trust store, so its expiry breaks none of them
// (Warnings still names it). The metrics
// herald_tls_certificate_expiry_timestamp_seconds and
// herald_tls_certificate_lifetime_seconds expose its expiry and lifetime
// (internal/app); the not-before metric is LatestNotBefore's.
// Certificates that do not parse are left out; nil when none parses (or c
// is nil).
func FirstExpiring(c *tls.Certificate) *x509.Certificate {
	var first *x509.Certificate
	for _, cc := range Chain(c) {
		if cc.Cert == nil || cc.SelfSignedRoot() {
			continue
		}
		if first == nil || cc.Cert.NotAfter.Before(first.NotAfter) {
			first = cc.Cert
		}
	}
	return first
}

// LatestNotBefore returns the certificate of c's chain (Chain) whose
// NotBefore is the latest, the leaf on a tie, among the leaf and the
// intermediates: clients that check dates refuse the chain until then,
// whichever of them it is (a leaf not valid yet behind an intermediate that
// expires first included). A self-signed root is left out as for
// FirstExpiring. The metric
// herald_tls_certificate_not_before_timestamp_seconds exposes its
// NotBefore (internal/app). Nil when none parses (or c is nil).
func LatestNotBefore(c *tls.Certificate) *x509.Certificate {
	var latest *x509.Certificate
	for _, cc := range Chain(c) {
		if cc.Cert == nil || cc.SelfSignedRoot() {
			continue
		}
		if latest == nil || cc.Cert.NotBefore.After(latest.NotBefore) {
			latest = cc.Cert
		}
	}
	return latest
}

// SelfSignedRoot reports whether cc is a root after the leaf (Kind
// "root") whose signature its own key verifies: a self-signed CA
// certificate, which clients take from their trust store, never from the
// chain served. A leaf is never one, even when it signs itself.
func (cc ChainCertificate) SelfSignedRoot() bool {
	return cc.Kind == "root" && cc.Cert != nil && cc.Cert.CheckSignatureFrom(cc.Cert) == nil
}
