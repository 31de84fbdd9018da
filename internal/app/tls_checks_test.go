package app_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// tlsGetAt is tlsGet with the client checking the certificate's dates at
// at (the node's fake clock), not at the wall clock's time.
func tlsGetAt(t *testing.T, ca *testCA, at time.Time, url string) (serial int64, body string) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, Time: func() time.Time { return at }}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), string(b)
}

// gauge returns the value of the series named name (no labels) in a
// Prometheus text exposition, and whether it is there.
func gauge(t *testing.T, exposition, name string) (float64, bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f, true
		}
	}
	return 0, false
}

// logLine returns the first log line of logs from offset that holds msg,
// or "".
func logLine(logs string, msg string) string {
	i := strings.Index(logs, msg)
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(logs[i:], '\n')
	if j < 0 {
		return logs[i:]
	}
	return logs[i : i+j]
}

// TestTLSCertificateChecksAreLogged: the node logs the certificate it
// serves (subject, SANs, expiry) at start and at each reload, and warns,
// at its clock's time, about a certificate expired, not valid yet or
// expiring within 14 days, and about a private key file other users can
// read (naming the file and its mode); it serves the certificate all the
// same. herald_tls_certificate_expiry_timestamp_seconds follows the
// certificate served.
func TestTLSCertificateChecksAreLogged(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	clk := newFakeClock()
	now := clk.Now()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t)
	// Expired a minute ago, and a key file readable by everyone.
	expiredAt := now.Add(-time.Minute)
	ca.issueDated(t, 301, now.Add(-time.Hour), expiredAt, 0o644, certFile, keyFile)
	var logs testutil.SyncBuffer
	h := startHerald(t, func(c *app.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.Clock = clk
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	base := "https://" + h.m.Addr()
	out := logs.Take()
	if line := logLine(out, `level=INFO msg="TLS certificate loaded"`); line == "" || !strings.Contains(line, "cert="+certFile) || !strings.Contains(line, `subject=CN=herald.test`) && !strings.Contains(line, `subject="CN=herald.test"`) ||
		!strings.Contains(line, "sans=127.0.0.1") || !strings.Contains(line, "serial=012D") || !strings.Contains(line, "not_after="+expiredAt.Format(time.RFC3339)) {
		t.Errorf("the start does not log the certificate's files, subject, SANs, serial and expiry:\n%s", out)
	}
	if line := logLine(out, `level=WARN msg="the TLS certificate has expired`); line == "" || !strings.Contains(line, "cert="+certFile) ||
		!strings.Contains(line, "not_after="+expiredAt.Format(time.RFC3339)) || !strings.Contains(line, "not_before="+now.Add(-time.Hour).Format(time.RFC3339)) {
		t.Errorf("an expired certificate at start is not warned about with its file and dates:\n%s", out)
	}
	if line := logLine(out, `level=WARN msg="the TLS private key file is open to other users`); line == "" || !strings.Contains(line, "file="+keyFile) || !strings.Contains(line, "mode=0644") {
		t.Errorf("a key file readable by everyone is not warned about with its name and mode:\n%s", out)
	}
	// Served all the same (to a client whose clock says it is still valid).
	serial, metrics := tlsGetAt(t, ca, expiredAt.Add(-time.Second), base+"/metrics")
	if serial != 301 {
		t.Fatalf("served certificate %d, want 301", serial)
	}
	if v, ok := gauge(t, metrics, "herald_tls_certificate_expiry_timestamp_seconds"); !ok || v != float64(expiredAt.Unix()) {
		t.Errorf("herald_tls_certificate_expiry_timestamp_seconds = %v (present %v), want %d", v, ok, expiredAt.Unix())
	}

	// Renewed on disk, but only 10 days left of 90, the key owner-only: the
	// reload at the next handshake is logged with a warning, about the
	// certificate only.
	soon := now.Add(10 * day)
	ca.issueDated(t, 302, now.Add(-80*day), soon, 0o600, certFile, keyFile)
	if serial, _ := tlsGetAt(t, ca, now, base+"/healthz"); serial != 302 {
		t.Fatalf("after the renewal: certificate %d, want 302", serial)
	}
	out = logs.Take()
	if line := logLine(out, `msg="TLS certificate reloaded after its files changed"`); line == "" || !strings.Contains(line, "sans=127.0.0.1") || !strings.Contains(line, "not_after="+soon.Format(time.RFC3339)) {
		t.Errorf("the reload does not log the new certificate's SANs and expiry:\n%s", out)
	}
	if line := logLine(out, `level=WARN msg="the TLS certificate expires soon`); line == "" || !strings.Contains(line, "cert="+certFile) || !strings.Contains(line, "not_after="+soon.Format(time.RFC3339)) || !strings.Contains(line, "expires_in=240h0m0s") {
		t.Errorf("a certificate 10 days from its expiry is not warned about:\n%s", out)
	}
	if strings.Contains(out, "private key") || strings.Count(out, "level=WARN") != 1 {
		t.Errorf("warnings other than the expiry's after the renewal:\n%s", out)
	}
	_, metrics = tlsGetAt(t, ca, now, base+"/metrics")
	if v, _ := gauge(t, metrics, "herald_tls_certificate_expiry_timestamp_seconds"); v != float64(soon.Unix()) {
		t.Errorf("herald_tls_certificate_expiry_timestamp_seconds = %v after the reload, want %d", v, soon.Unix())
	}

	// SIGHUP with a certificate not valid for another hour (a clock behind).
	ca.issueDated(t, 303, now.Add(time.Hour), now.Add(90*day), 0o600, certFile, keyFile)
	if err := h.m.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	out = logs.Take()
	if !strings.Contains(out, `msg="TLS certificate reloaded on SIGHUP"`) || !strings.Contains(logLine(out, `level=WARN msg="the TLS certificate is not valid yet`), "not_before="+now.Add(time.Hour).Format(time.RFC3339)) {
		t.Errorf("a certificate not valid yet, loaded on SIGHUP, is not warned about:\n%s", out)
	}

	// A certificate in the middle of its life: logged, no warning.
	ca.issueDated(t, 304, now.Add(-time.Hour), now.Add(89*day), 0o600, certFile, keyFile)
	if err := h.m.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if out = logs.Take(); !strings.Contains(out, `msg="TLS certificate reloaded on SIGHUP"`) || strings.Contains(out, "level=WARN") {
		t.Errorf("a valid certificate with a private key: want the reload logged and no warning:\n%s", out)
	}
}

// issueChain writes, as a renewal tool's fullchain.pem, a leaf for
// 127.0.0.1 (serial, valid from leafNB to leafNA) signed by an
// intermediate CA "Herald test intermediate" (valid from interNB to
// interNA) that ca signed, the leaf first, and the leaf's key (0600).
func (ca *testCA) issueChain(t *testing.T, serial int64, interNB, interNA, leafNB, leafNA time.Time, certFile, keyFile string) {
	t.Helper()
	ikey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	itmpl := &x509.Certificate{SerialNumber: big.NewInt(serial + 1000), Subject: pkix.Name{CommonName: "Herald test intermediate"},
		NotBefore: interNB, NotAfter: interNA, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	ider, err := x509.CreateCertificate(rand.Reader, itmpl, ca.cert, &ikey.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	inter, _ := x509.ParseCertificate(ider)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "herald.test"}, NotBefore: leafNB, NotAfter: leafNA,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, inter, &key.PublicKey, ikey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomicMode(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	writeAtomic(t, certFile, append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ider})...))
}

// TestTLSChainIntermediateIsChecked: a chain file whose leaf is valid for
// months but whose intermediate expired a minute ago breaks every client
// that checks dates as an expired leaf would. The node warns at start,
// naming the intermediate (its kind, position in the file and subject)
// and its dates, and herald_tls_certificate_expiry_timestamp_seconds
// (with …_not_before_…) shows the intermediate's dates, the chain's first
// expiry, so HeraldTLSCertificateExpired fires. Only the leaf was checked
// before: no warning, and the leaf's expiry months away.
func TestTLSChainIntermediateIsChecked(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	now := clk.Now()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t)
	interNB, interNA := now.Add(-30*time.Minute), now.Add(-time.Minute)
	ca.issueChain(t, 401, interNB, interNA, now.Add(-30*time.Minute), now.Add(80*24*time.Hour), certFile, keyFile)
	var logs testutil.SyncBuffer
	h := startHerald(t, func(c *app.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.Clock = clk
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	out := logs.Take()
	line := logLine(out, `level=WARN msg="a certificate of the TLS chain (not the leaf) has expired`)
	for _, want := range []string{"cert=" + certFile, "certificate=intermediate", `position="2 of 2"`, `subject="CN=Herald test intermediate"`,
		"not_before=" + interNB.Format(time.RFC3339), "not_after=" + interNA.Format(time.RFC3339)} {
		if !strings.Contains(line, want) {
			t.Errorf("the expired intermediate's warning does not hold %s:\n%s", want, out)
		}
	}
	if strings.Count(out, `level=WARN msg="the TLS`)+strings.Count(out, `level=WARN msg="a certificate of the TLS`) != 1 {
		t.Errorf("want exactly one TLS warning, the intermediate's (the leaf is valid, the key private):\n%s", out)
	}
	// A client whose clock is two minutes behind still accepts the chain.
	serial, metrics := tlsGetAt(t, ca, now.Add(-2*time.Minute), "https://"+h.m.Addr()+"/metrics")
	if serial != 401 {
		t.Fatalf("served certificate %d, want 401", serial)
	}
	if v, ok := gauge(t, metrics, "herald_tls_certificate_expiry_timestamp_seconds"); !ok || v != float64(interNA.Unix()) {
		t.Errorf("herald_tls_certificate_expiry_timestamp_seconds = %v (present %v), want the intermediate's expiry %d", v, ok, interNA.Unix())
	}
	if v, ok := gauge(t, metrics, "herald_tls_certificate_not_before_timestamp_seconds"); !ok || v != float64(interNB.Unix()) {
		t.Errorf("herald_tls_certificate_not_before_timestamp_seconds = %v (present %v), want the intermediate's %d", v, ok, interNB.Unix())
	}
}

// TestTLSNotBeforeIsTheLatestOfTheChain: a leaf not valid for 30 minutes
// behind an intermediate that expires first (in 10 days) is refused by
// every client that checks dates. herald_tls_certificate_expiry_… shows
// the intermediate's expiry (the first), and
// herald_tls_certificate_not_before_… the leaf's start (the latest), so
// HeraldTLSCertificateExpired (max(not_before) > time()) fires; the
// lifetime metric stays the intermediate's own, for the warning window of
// HeraldTLSCertificateExpiringSoon. Before, the not-before metric was the
// intermediate's (the first to expire), in the past: no alert.
func TestTLSNotBeforeIsTheLatestOfTheChain(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	now := clk.Now()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t)
	interNB, interNA := now.Add(-365*24*time.Hour), now.Add(10*24*time.Hour)
	leafNB, leafNA := now.Add(30*time.Minute), now.Add(80*24*time.Hour)
	ca.issueChain(t, 501, interNB, interNA, leafNB, leafNA, certFile, keyFile)
	h := startHerald(t, func(c *app.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.Clock = clk
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	// A client whose clock is 45 minutes ahead (the test CA is valid for an hour) accepts it.
	_, metrics := tlsGetAt(t, ca, now.Add(45*time.Minute), "https://"+h.m.Addr()+"/metrics")
	if v, ok := gauge(t, metrics, "herald_tls_certificate_expiry_timestamp_seconds"); !ok || v != float64(interNA.Unix()) {
		t.Errorf("herald_tls_certificate_expiry_timestamp_seconds = %v (present %v), want the intermediate's expiry %d", v, ok, interNA.Unix())
	}
	if v, ok := gauge(t, metrics, "herald_tls_certificate_not_before_timestamp_seconds"); !ok || v != float64(leafNB.Unix()) {
		t.Errorf("herald_tls_certificate_not_before_timestamp_seconds = %v (present %v), want the leaf's %d (the latest not_before)", v, ok, leafNB.Unix())
	}
	if v, ok := gauge(t, metrics, "herald_tls_certificate_lifetime_seconds"); !ok || v != interNA.Sub(interNB).Seconds() {
		t.Errorf("herald_tls_certificate_lifetime_seconds = %v (present %v), want the intermediate's lifetime %v", v, ok, interNA.Sub(interNB).Seconds())
	}
}
