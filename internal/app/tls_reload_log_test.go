package app_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// TestTLSReloadOnFileChangeIsLogged: a certificate replaced on disk is
// loaded at the next handshake and the node logs it (INFO, with the files
// and the new certificate's serial), as SIGHUP's reload is logged; a
// handshake with unchanged files logs nothing more.
func TestTLSReloadOnFileChangeIsLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t)
	ca.issue(t, 201, certFile, keyFile)
	var logs testutil.SyncBuffer
	h := startHerald(t, func(c *app.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	base := "https://" + h.m.Addr()
	tlsGet(t, ca, base+"/healthz")
	const msg = `level=INFO msg="TLS certificate reloaded after its files changed"`
	if strings.Contains(logs.String(), msg) {
		t.Fatalf("a reload was logged before the files changed:\n%s", logs.String())
	}
	ca.issue(t, 202, certFile, keyFile)
	if _, serial, _ := tlsGet(t, ca, base+"/healthz"); serial != 202 {
		t.Fatalf("after the files were replaced: certificate %d, want 202", serial)
	}
	tlsGet(t, ca, base+"/healthz")
	out := logs.String()
	if n := strings.Count(out, msg); n != 1 {
		t.Fatalf("reload logged %d times, want once:\n%s", n, out)
	}
	line := out[strings.Index(out, msg):]
	line = line[:strings.IndexByte(line, '\n')]
	if !strings.Contains(line, "serial=202") || !strings.Contains(line, "cert="+certFile) {
		t.Errorf("the reload log line does not name the files and the new serial: %s", line)
	}
}
