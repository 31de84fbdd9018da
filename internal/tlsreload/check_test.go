package tlsreload_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/tlsreload"
)

// now is the time of every check: certificates are dated from it, so
// nothing depends on the wall clock.
var now = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

// leaf returns a self-signed certificate valid from nb to na.
func leaf(t *testing.T, nb, na time.Time) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("spiffe://example.org/herald")
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(258), Subject: pkix.Name{CommonName: "herald.example.com"},
		NotBefore: nb, NotAfter: na,
		DNSNames: []string{"herald.example.com", "hooks.example.com"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.5")}, URIs: []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}
}

// keyFile writes a key file with mode perm and returns its path.
func keyFile(t *testing.T, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tls.key")
	if err := os.WriteFile(p, []byte("a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return p
}

func attr(w tlsreload.Warning, key string) string {
	for _, a := range w.Attrs {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

// TestWarnings: a certificate expired, not valid yet, or in the last days
// before its expiry (14 days, or the last sixth of a short-lived one), and
// a private key with any permission bit for its group or others (read,
// write or execute), are each warned about, with the files and dates; a
// certificate in the middle of its life with an owner-only key gets no
// warning.
func TestWarnings(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name   string
		nb, na time.Time
		perm   os.FileMode
		want   []string // a word of each warning, in order
	}{
		{"valid", now.Add(-30 * day), now.Add(60 * day), 0o600, nil},
		{"expired", now.Add(-90 * day), now.Add(-time.Second), 0o600, []string{"has expired"}},
		{"not valid yet", now.Add(time.Hour), now.Add(90 * day), 0o600, []string{"not valid yet"}},
		{"90-day certificate, 13 days left", now.Add(-77 * day), now.Add(13 * day), 0o600, []string{"expires soon"}},
		{"90-day certificate, 15 days left", now.Add(-75 * day), now.Add(15 * day), 0o600, nil},
		{"1-year certificate, 13 days left", now.Add(-352 * day), now.Add(13 * day), 0o400, []string{"expires soon"}},
		{"6-day certificate, 2 days left (renewed on time)", now.Add(-4 * day), now.Add(2 * day), 0o600, nil},
		{"6-day certificate, 20 hours left", now.Add(-6*day + 20*time.Hour), now.Add(20 * time.Hour), 0o600, []string{"expires soon"}},
		{"key readable by its group", now.Add(-30 * day), now.Add(60 * day), 0o640, []string{"open to other users"}},
		{"key readable by everyone, certificate expired", now.Add(-90 * day), now.Add(-day), 0o644, []string{"has expired", "open to other users"}},
		// Not only read bits: write or execute for the group or others is
		// as open (whoever writes the key replaces it), as ssh's 0077 mask.
		{"key writable by its group", now.Add(-30 * day), now.Add(60 * day), 0o620, []string{"open to other users"}},
		{"key writable by others", now.Add(-30 * day), now.Add(60 * day), 0o602, []string{"open to other users"}},
		{"key executable by its group", now.Add(-30 * day), now.Add(60 * day), 0o610, []string{"open to other users"}},
		{"key executable by others", now.Add(-30 * day), now.Add(60 * day), 0o601, []string{"open to other users"}},
		{"key with every owner bit only", now.Add(-30 * day), now.Add(60 * day), 0o700, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kf := keyFile(t, tc.perm)
			ws := tlsreload.Warnings(leaf(t, tc.nb, tc.na), "/etc/herald/tls.crt", kf, now)
			if len(ws) != len(tc.want) {
				t.Fatalf("%d warnings %+v, want %d (%v)", len(ws), ws, len(tc.want), tc.want)
			}
			for i, w := range ws {
				if !strings.Contains(w.Msg, tc.want[i]) {
					t.Errorf("warning %d: %q, want it to say %q", i, w.Msg, tc.want[i])
				}
				if strings.Contains(w.Msg, "key file") {
					if attr(w, "file") != kf || attr(w, "mode") != modeString(tc.perm) {
						t.Errorf("key warning attributes %v: want file=%s mode=%s", w.Attrs, kf, modeString(tc.perm))
					}
					continue
				}
				if attr(w, "cert") != "/etc/herald/tls.crt" || attr(w, "not_after") != tc.na.UTC().Format(time.RFC3339) || attr(w, "not_before") != tc.nb.UTC().Format(time.RFC3339) {
					t.Errorf("certificate warning attributes %v: want the file and both dates", w.Attrs)
				}
			}
		})
	}
}

// modeString writes a mode as ls -n and chmod take it: 0640.
func modeString(p os.FileMode) string { return fmt.Sprintf("%04o", uint32(p)) }

// TestDescribe: the attributes logged for a certificate at start and at
// each reload name its subject, every subject alternative name, its serial
// as openssl shows it and its expiry.
func TestDescribe(t *testing.T) {
	c := leaf(t, now.Add(-time.Hour), now.Add(90*24*time.Hour))
	got := map[string]string{}
	for _, a := range tlsreload.Describe(c) {
		got[a.Key] = a.Value.String()
	}
	want := map[string]string{
		"subject":   "CN=herald.example.com",
		"sans":      "herald.example.com,hooks.example.com,10.0.0.5,spiffe://example.org/herald",
		"serial":    "0102",
		"not_after": "2027-05-30T12:00:00Z",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if tlsreload.Describe(nil) != nil {
		t.Error("Describe(nil) is not empty")
	}
}

// issued returns a certificate named cn valid from nb to na, signed by
// parent's key (parent nil: by its own, a root), and its key.
func issued(t *testing.T, cn string, nb, na time.Time, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(len(cn))), Subject: pkix.Name{CommonName: cn}, NotBefore: nb, NotAfter: na,
		IsCA: ca, BasicConstraintsValid: ca}
	if ca {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		tmpl.DNSNames = []string{cn}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// chainOf returns the pair serving leaf, then intermediates, in that order
// (as a fullchain.pem lists them), with Leaf set as tls.LoadX509KeyPair
// sets it.
func chainOf(leaf *x509.Certificate, key *ecdsa.PrivateKey, rest ...*x509.Certificate) *tls.Certificate {
	c := &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, r := range rest {
		c.Certificate = append(c.Certificate, r.Raw)
	}
	return c
}

// TestWarningsCheckEveryCertificateOfTheChain: an intermediate that has
// expired, is not valid yet or expires soon breaks (or will break) the
// clients that check dates as a leaf would, so it is warned about while
// the leaf is fine, naming which certificate (kind, position in the file,
// subject) with its dates; a chain whose every certificate is valid gets
// no warning, and a certificate after the leaf that does not parse is
// named too. The leaf alone was checked: none of these was warned about.
func TestWarningsCheckEveryCertificateOfTheChain(t *testing.T) {
	const day = 24 * time.Hour
	root, rootKey := issued(t, "Test Root", now.Add(-3650*day), now.Add(3650*day), nil, nil, true)
	for _, tc := range []struct {
		name   string
		nb, na time.Time // the intermediate's
		want   string    // a word of the warning; "" for none
	}{
		{"intermediate valid", now.Add(-365 * day), now.Add(365 * day), ""},
		{"intermediate expired", now.Add(-365 * day), now.Add(-time.Hour), "has expired"},
		{"intermediate not valid yet", now.Add(time.Hour), now.Add(365 * day), "not valid yet"},
		{"intermediate expires in 13 days", now.Add(-365 * day), now.Add(13 * day), "expires soon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inter, interKey := issued(t, "Test Intermediate R9", tc.nb, tc.na, root, rootKey, true)
			leafCert, leafKey := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), inter, interKey, false)
			ws := tlsreload.Warnings(chainOf(leafCert, leafKey, inter, root), "/etc/herald/fullchain.pem", keyFile(t, 0o600), now)
			if tc.want == "" {
				if len(ws) != 0 {
					t.Fatalf("warnings %+v for a chain whose every certificate is valid", ws)
				}
				return
			}
			if len(ws) != 1 {
				t.Fatalf("%d warnings %+v, want one about the intermediate", len(ws), ws)
			}
			w := ws[0]
			if !strings.Contains(w.Msg, tc.want) || !strings.Contains(w.Msg, "chain") {
				t.Errorf("warning %q, want it to say %q of a certificate of the chain", w.Msg, tc.want)
			}
			for k, v := range map[string]string{
				"cert": "/etc/herald/fullchain.pem", "certificate": "intermediate", "position": "2 of 3", "subject": "CN=Test Intermediate R9",
				"not_before": tc.nb.UTC().Format(time.RFC3339), "not_after": tc.na.UTC().Format(time.RFC3339),
			} {
				if attr(w, k) != v {
					t.Errorf("attribute %s = %q, want %q (all: %v)", k, attr(w, k), v, w.Attrs)
				}
			}
		})
	}

	// An expired root at the end of the file is named as the root.
	oldRoot, oldRootKey := issued(t, "Old Root", now.Add(-3650*day), now.Add(-day), nil, nil, true)
	leafCert, leafKey := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), oldRoot, oldRootKey, false)
	ws := tlsreload.Warnings(chainOf(leafCert, leafKey, oldRoot), "/etc/herald/fullchain.pem", keyFile(t, 0o600), now)
	if len(ws) != 1 || attr(ws[0], "certificate") != "root" || attr(ws[0], "position") != "2 of 2" || !strings.Contains(ws[0].Msg, "has expired") {
		t.Errorf("an expired root in the chain file: warnings %+v, want one naming the root, position 2 of 2", ws)
	}
	// Its message says what it is: clients ignore a served root (they take
	// roots from their trust store), so it breaks none; it is worth removing
	// from the chain file, not an outage. It said "clients that check dates
	// refuse the chain", as for an expired intermediate.
	if len(ws) == 1 {
		for _, want := range []string{"the served root", "has expired", "clients ignore a served root", "remove it from the certificate file", "not an outage"} {
			if !strings.Contains(ws[0].Msg, want) {
				t.Errorf("the expired root's warning %q does not say %q", ws[0].Msg, want)
			}
		}
		if strings.Contains(ws[0].Msg, "refuse") {
			t.Errorf("the expired root's warning %q says clients refuse the chain; they ignore a served root", ws[0].Msg)
		}
	}
	// An expired intermediate keeps its warning: clients refuse the chain.
	expInter, expInterKey := issued(t, "Test Intermediate R9", now.Add(-365*day), now.Add(-time.Hour), root, rootKey, true)
	leafI, leafIKey := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), expInter, expInterKey, false)
	ws = tlsreload.Warnings(chainOf(leafI, leafIKey, expInter, root), "/etc/herald/fullchain.pem", keyFile(t, 0o600), now)
	if len(ws) != 1 || !strings.HasPrefix(ws[0].Msg, "a certificate of the TLS chain (not the leaf) has expired: clients that check dates refuse the chain;") {
		t.Errorf("an expired intermediate: warnings %+v, want the chain's warning (clients refuse the chain)", ws)
	}

	// Bytes after the leaf that are no certificate.
	c := chainOf(leafCert, leafKey)
	c.Certificate = append(c.Certificate, []byte("not DER"))
	ws = tlsreload.Warnings(c, "/etc/herald/fullchain.pem", keyFile(t, 0o600), now)
	if len(ws) != 1 || !strings.Contains(ws[0].Msg, "does not parse") || attr(ws[0], "position") != "2 of 2" {
		t.Errorf("a certificate that does not parse: warnings %+v, want one naming position 2 of 2", ws)
	}
}

// TestFirstExpiring: the certificate whose dates the expiry metrics
// expose is the one of the chain that expires first, an intermediate when
// it expires before the leaf, the leaf otherwise (and on a tie).
func TestFirstExpiring(t *testing.T) {
	const day = 24 * time.Hour
	root, rootKey := issued(t, "Test Root", now.Add(-3650*day), now.Add(3650*day), nil, nil, true)
	inter, interKey := issued(t, "Test Intermediate R9", now.Add(-365*day), now.Add(5*day), root, rootKey, true)
	leafCert, leafKey := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), inter, interKey, false)
	if got := tlsreload.FirstExpiring(chainOf(leafCert, leafKey, inter, root)); got == nil || !got.Equal(inter) {
		t.Errorf("FirstExpiring = %v, want the intermediate expiring in 5 days", got)
	}
	later, laterKey := issued(t, "Test Intermediate R10", now.Add(-365*day), now.Add(365*day), root, rootKey, true)
	leaf2, leaf2Key := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), later, laterKey, false)
	if got := tlsreload.FirstExpiring(chainOf(leaf2, leaf2Key, later, root)); got != leaf2 {
		t.Errorf("FirstExpiring = %v, want the leaf (it expires first)", got)
	}
	if tlsreload.FirstExpiring(nil) != nil {
		t.Error("FirstExpiring(nil) is not nil")
	}
}

// TestFirstExpiringLeavesOutASelfSignedRoot: a root the chain file holds
// after the intermediates is sent, but clients ignore it (they build the
// path to a root of their own trust store), so its expiry breaks no
// client. It drove the expiry metrics (and so HeraldTLSCertificateExpired)
// when it expired first; the first to expire among the leaf and the
// intermediates does now, and a leaf issued by itself still counts.
func TestFirstExpiringLeavesOutASelfSignedRoot(t *testing.T) {
	const day = 24 * time.Hour
	root, rootKey := issued(t, "Test Root", now.Add(-3650*day), now.Add(-day), nil, nil, true)
	inter, interKey := issued(t, "Test Intermediate R9", now.Add(-365*day), now.Add(365*day), root, rootKey, true)
	leafCert, leafKey := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), inter, interKey, false)
	if got := tlsreload.FirstExpiring(chainOf(leafCert, leafKey, inter, root)); got == nil || !got.Equal(leafCert) {
		t.Errorf("FirstExpiring = %s, want the leaf (the expired root is not one clients use)", subjectOf(got))
	}
	soon, soonKey := issued(t, "Test Intermediate R10", now.Add(-365*day), now.Add(5*day), root, rootKey, true)
	leaf2, leaf2Key := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), soon, soonKey, false)
	if got := tlsreload.FirstExpiring(chainOf(leaf2, leaf2Key, soon, root)); got == nil || !got.Equal(soon) {
		t.Errorf("FirstExpiring = %s, want the intermediate expiring in 5 days", subjectOf(got))
	}
	self, selfKey := issued(t, "herald.internal", now.Add(-10*day), now.Add(-day), nil, nil, false)
	if got := tlsreload.FirstExpiring(chainOf(self, selfKey)); got == nil || !got.Equal(self) {
		t.Errorf("FirstExpiring = %s, want the self-signed leaf", subjectOf(got))
	}
}

// TestLatestNotBefore: the certificate whose start the not-before metric
// exposes is the one of the chain that starts last, among the leaf and
// the intermediates: a leaf not valid yet behind an intermediate that
// expires first (FirstExpiring's) included, and never a self-signed root,
// even one issued later.
func TestLatestNotBefore(t *testing.T) {
	const day = 24 * time.Hour
	root, rootKey := issued(t, "Test Root", now.Add(-3650*day), now.Add(3650*day), nil, nil, true)
	inter, interKey := issued(t, "Test Intermediate R9", now.Add(-365*day), now.Add(5*day), root, rootKey, true)
	leafCert, leafKey := issued(t, "herald.example.com", now.Add(time.Hour), now.Add(80*day), inter, interKey, false)
	c := chainOf(leafCert, leafKey, inter, root)
	if got := tlsreload.FirstExpiring(c); got == nil || !got.Equal(inter) {
		t.Errorf("FirstExpiring = %s, want the intermediate expiring in 5 days", subjectOf(got))
	}
	if got := tlsreload.LatestNotBefore(c); got == nil || !got.Equal(leafCert) {
		t.Errorf("LatestNotBefore = %s, want the leaf (valid from an hour on)", subjectOf(got))
	}
	newRoot, newRootKey := issued(t, "Test Root 2", now.Add(2*day), now.Add(3650*day), nil, nil, true)
	inter2, inter2Key := issued(t, "Test Intermediate R10", now.Add(day), now.Add(365*day), newRoot, newRootKey, true)
	leaf2, leaf2Key := issued(t, "herald.example.com", now.Add(-10*day), now.Add(80*day), inter2, inter2Key, false)
	if got := tlsreload.LatestNotBefore(chainOf(leaf2, leaf2Key, inter2, newRoot)); got == nil || !got.Equal(inter2) {
		t.Errorf("LatestNotBefore = %s, want the intermediate (valid from tomorrow; the root is left out)", subjectOf(got))
	}
	if tlsreload.LatestNotBefore(nil) != nil {
		t.Error("LatestNotBefore(nil) is not nil")
	}
}

func subjectOf(c *x509.Certificate) string {
	if c == nil {
		return "nil"
	}
	return c.Subject.String()
}

// TestChainThatDoesNotParseIsNotLoaded: a CERTIFICATE block after the
// leaf that is no certificate made every client fail the handshake, yet
// the pair loaded, at start and at a reload over a working certificate
// (found by a new user's review). It does not load now: New refuses,
// naming the position, and a reload to it keeps the previous certificate.
func TestChainThatDoesNotParseIsNotLoaded(t *testing.T) {
	const day = 24 * time.Hour
	root, rootKey := issued(t, "Test Root", now.Add(-3650*day), now.Add(3650*day), nil, nil, true)
	leafCert, leafKey := issued(t, "herald.example.com", time.Now().Add(-day), time.Now().Add(80*day), root, rootKey, false)
	dir := t.TempDir()
	certFile, keyPath := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "tls.key")
	kder, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	good := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafCert.Raw})
	bad := append(append([]byte{}, good...), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER at all")})...)
	bad = append(bad, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})...)

	if err := os.WriteFile(certFile, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsreload.New(certFile, keyPath); err == nil || !strings.Contains(err.Error(), "certificate 2 of 3") || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("New with a chain whose second certificate does not parse: %v; want a refusal naming certificate 2 of 3", err)
	}

	if err := os.WriteFile(certFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := tlsreload.New(certFile, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Certificate()
	if err := os.WriteFile(certFile, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("Reload to a chain that does not parse: %v; want an error", err)
	}
	if r.Certificate() != before {
		t.Fatal("a reload to a chain that does not parse replaced the certificate served")
	}
}
