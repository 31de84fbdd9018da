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
	// 202 = 0xCA: the serial as `openssl x509 -serial` shows it.
	if !strings.Contains(line, "serial=CA") || !strings.Contains(line, "cert="+certFile) || !strings.Contains(line, "not_after=") {
		t.Errorf("the reload log line does not name the files, the new serial in hexadecimal and its expiry: %s", line)
	}
	// SIGHUP's reload (Main.ReloadTLS) is logged alike.
	ca.issue(t, 203, certFile, keyFile)
	if err := h.m.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	const hup = `level=INFO msg="TLS certificate reloaded on SIGHUP"`
	out = logs.String()
	if i := strings.Index(out, hup); i < 0 {
		t.Errorf("SIGHUP's reload was not logged:\n%s", out)
	} else if line := out[i : i+strings.IndexByte(out[i:], '\n')]; !strings.Contains(line, "serial=CB") || !strings.Contains(line, "cert="+certFile) || !strings.Contains(line, "not_after=") {
		t.Errorf("SIGHUP's reload log line does not name the files, the serial and the expiry: %s", line)
	}
	// 258 = 0x0102: whole bytes, the leading zero kept, as openssl shows it.
	ca.issue(t, 258, certFile, keyFile)
	if err := h.m.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "serial=0102 ") {
		t.Errorf("serial 258 not logged as 0102:\n%s", out)
	}
}

// TestSIGHUPWithoutTLS: without TLS, SIGHUP's reload says there is nothing
// to reload, never that a certificate was reloaded.
func TestSIGHUPWithoutTLS(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	h := startHerald(t, func(c *app.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	if err := h.m.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, "no TLS configured") || strings.Contains(out, "certificate reloaded") {
		t.Errorf("SIGHUP without TLS logged:\n%s", out)
	}
}

// TestShutdownIsLogged: a stop is logged when it begins and when it has
// finished, so an operator can tell a clean stop from a crash in the logs.
func TestShutdownIsLogged(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	h := startHerald(t, func(c *app.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	h.stop()
	out := logs.String()
	begin, end := strings.Index(out, `msg="herald stopping`), strings.Index(out, `msg="herald stopped`)
	if begin < 0 || end < begin {
		t.Errorf("a stop was not logged as begun and then finished:\n%s", out)
	}
}
