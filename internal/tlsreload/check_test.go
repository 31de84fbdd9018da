package tlsreload_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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
