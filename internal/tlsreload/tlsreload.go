// Package tlsreload serves a TLS certificate from files that may be
// replaced while the server runs (certbot, cert-manager, a CA's renewal):
// each handshake checks the two files (inode, size, modification time) and
// loads them again when either changed; Reload (called on SIGHUP) forces
// it. A pair that does not load (a half-written renewal, a key that does
// not match) keeps the previous certificate in use and returns the error,
// so a bad renewal never takes the server down; the next handshake after
// the files change again retries.
package tlsreload

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
)

// Reloader holds the current certificate of a cert/key file pair. Safe for
// concurrent use.
type Reloader struct {
	certFile, keyFile string
	// OnError, if set, is told about a failed automatic reload (logs).
	OnError func(error)
	// OnReload, if set, is told about a successful automatic reload (the
	// files changed on disk), with the certificate now served (logs).
	// Reload's caller (SIGHUP) reports its own result (Certificate).
	OnReload func(*tls.Certificate)

	mu       sync.Mutex
	cert     *tls.Certificate
	certStat os.FileInfo
	keyStat  os.FileInfo
	failed   [2]os.FileInfo // the stats of a pair that did not load
}

// New loads the PEM certificate chain and key (tls.LoadX509KeyPair; every
// certificate of the chain must parse); the error names the files.
func New(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Certificate returns the certificate now served.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

// Reload loads the files now. On error the previous certificate stays.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load()
}

func (r *Reloader) load() error {
	cs, err1 := os.Stat(r.certFile)
	ks, err2 := os.Stat(r.keyFile)
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err == nil {
		err = chainParses(&cert)
	}
	if err != nil {
		r.failed = [2]os.FileInfo{cs, ks}
		return fmt.Errorf("TLS certificate %s / key %s: %w", r.certFile, r.keyFile, err)
	}
	if err1 != nil || err2 != nil {
		return fmt.Errorf("TLS certificate %s / key %s: stat failed", r.certFile, r.keyFile)
	}
	r.cert, r.certStat, r.keyStat, r.failed = &cert, cs, ks, [2]os.FileInfo{}
	return nil
}

// chainParses refuses a chain with a certificate after the leaf that does
// not parse: crypto/tls parses only the leaf and sends the rest as they
// are, and every client then fails the handshake on the bad one (found by
// a new user's review: a garbage CERTIFICATE block in the chain file was
// loaded, and a reload to such a file replaced a working certificate). A
// pair that does not load leaves the previous one served (Reload) or
// stops the start (New).
func chainParses(c *tls.Certificate) error {
	for _, cc := range Chain(c) {
		if cc.Cert == nil {
			return fmt.Errorf("certificate %d of %d in the chain file does not parse (%v): every client would fail the handshake on it; put the renewal tool's full chain in the certificate file", cc.Position, len(c.Certificate), cc.Err)
		}
	}
	return nil
}

func same(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// GetCertificate is tls.Config.GetCertificate: it reloads the files when
// they changed since the last load (and since the last failed load).
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, err1 := os.Stat(r.certFile)
	ks, err2 := os.Stat(r.keyFile)
	changed := err1 == nil && err2 == nil && !(same(cs, r.certStat) && same(ks, r.keyStat))
	if changed && !(same(cs, r.failed[0]) && same(ks, r.failed[1])) {
		if err := r.load(); err != nil {
			if r.OnError != nil {
				r.OnError(err)
			}
		} else if r.OnReload != nil {
			r.OnReload(r.cert)
		}
	}
	return r.cert, nil
}

// Config returns a server tls.Config using the reloader: TLS 1.2 or later,
// HTTP/2 and HTTP/1.1 offered by ALPN.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}
