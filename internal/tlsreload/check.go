package tlsreload

import (
	"crypto/tls"
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
// from certFile and keyFile, at now: a certificate expired, not valid yet
// or expiring within its window (ExpiringWithin), and a key file with
// any permission for its group or others (read, write or execute:
// keyFileOthers). The pair is served anyway: a server that refused an
// expired certificate at start or reload would turn a missed renewal (a
// warning to the clients that check dates) into an outage for every
// client, and a renewal loads without a restart.
func Warnings(c *tls.Certificate, certFile, keyFile string, now time.Time) []Warning {
	var ws []Warning
	if c != nil && c.Leaf != nil {
		nb, na := c.Leaf.NotBefore, c.Leaf.NotAfter
		dates := []slog.Attr{slog.String("cert", certFile), slog.String("subject", c.Leaf.Subject.String()),
			slog.String("not_before", nb.UTC().Format(time.RFC3339)), slog.String("not_after", na.UTC().Format(time.RFC3339)),
			slog.String("now", now.UTC().Format(time.RFC3339))}
		switch {
		case now.After(na):
			ws = append(ws, Warning{"the TLS certificate has expired: clients that check dates refuse it; it is served anyway until renewed files are in place (they are read at the next handshake or on SIGHUP)", dates})
		case now.Before(nb):
			ws = append(ws, Warning{"the TLS certificate is not valid yet (is this machine's clock right?): clients that check dates refuse it until not_before; it is served anyway", dates})
		case na.Sub(now) < expiringWithin(nb, na):
			ws = append(ws, Warning{"the TLS certificate expires soon and was not renewed: check the renewal (certbot, cert-manager, …); renewed files are read at the next handshake or on SIGHUP",
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
