package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/buildinfo"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// testCA is a throwaway certificate authority for TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Herald test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a certificate for 127.0.0.1 with the given serial, valid
// from an hour ago to an hour from now, and its key (mode 0600), to
// certFile and keyFile (through a rename, as renewal tools do).
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	ca.issueDated(t, serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0o600, certFile, keyFile)
}

// issueDated is issue with the certificate valid from notBefore to
// notAfter and the key file of mode keyPerm.
func (ca *testCA) issueDated(t *testing.T, serial int64, notBefore, notAfter time.Time, keyPerm os.FileMode, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "herald.test"},
		NotBefore: notBefore, NotAfter: notAfter,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomicMode(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), keyPerm)
	writeAtomic(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	writeAtomicMode(t, path, b, 0o600)
}

// writeAtomicMode writes b to path through a rename, the file of mode perm
// whatever the umask.
func writeAtomicMode(t *testing.T, path string, b []byte, perm os.FileMode) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// get makes one request on a new connection, verifying Herald's
// certificate against the CA, and returns the protocol and the serial of
// the certificate served.
func tlsGet(t *testing.T, ca *testCA, url string) (proto string, serial int64, body []byte) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return resp.Proto, resp.TLS.PeerCertificates[0].SerialNumber.Int64(), body
}

// TestTLSServesHTTP2AndReloadsCertificate: with --tls-cert/--tls-key a
// client that verifies Herald's certificate against its CA gets HTTP/2;
// when the certificate is replaced on disk the next connection gets the
// new one without a restart; a broken replacement keeps the previous
// certificate (and ReloadTLS, SIGHUP's action, reports the error); plain
// HTTP is not served on the TLS port.
func TestTLSServesHTTP2AndReloadsCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t)
	ca.issue(t, 101, certFile, keyFile)
	h := startHerald(t, func(c *app.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	base := "https://" + h.m.Addr()

	proto, serial, body := tlsGet(t, ca, base+"/healthz")
	if proto != "HTTP/2.0" || serial != 101 {
		t.Fatalf("first connection: %s, certificate %d; want HTTP/2.0, 101", proto, serial)
	}
	var health buildinfo.Info
	if err := json.Unmarshal(body, &health); err != nil || health.Version != app.Version || health.GoVersion == "" || len(health.Stores) != 2 {
		t.Fatalf("/healthz = %s (%v)", body, err)
	}

	ca.issue(t, 102, certFile, keyFile)
	if _, serial, _ = tlsGet(t, ca, base+"/healthz"); serial != 102 {
		t.Fatalf("after the files were replaced: certificate %d, want 102", serial)
	}

	// A half-written renewal (garbage certificate): still 102, and an
	// explicit reload says why.
	writeAtomic(t, certFile, []byte("not a certificate"))
	if _, serial, _ = tlsGet(t, ca, base+"/healthz"); serial != 102 {
		t.Fatalf("after a broken replacement: certificate %d, want 102 kept", serial)
	}
	if err := h.m.ReloadTLS(); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("ReloadTLS on a broken file: %v, want an error naming %s", err, certFile)
	}
	ca.issue(t, 103, certFile, keyFile)
	if err := h.m.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if _, serial, _ = tlsGet(t, ca, base+"/healthz"); serial != 103 {
		t.Fatalf("after repair: certificate %d, want 103", serial)
	}

	if resp, err := http.Get("http://" + h.m.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS port")
		}
	}
}

// TestTLSNeedsBothFiles: --tls-cert without --tls-key is refused at start.
func TestTLSNeedsBothFiles(t *testing.T) {
	t.Parallel()
	db, key := testDB(t)
	_, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: key, APIKey: testAPIKey, TLSCertFile: "x.crt"})
	if err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("err = %v, want one naming --tls-key", err)
	}
}

// TestBackupUnderLoadAndRestore: `herald backup` (sqlite.Backup) copies a
// live SQLite database while four publishers keep publishing and the
// engine delivers; restoring the copy (with the key check) gives a
// database holding every event acknowledged (202) before the backup
// started. A restore with another key is refused and writes nothing.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	sqliteOnly(t)
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "herald.db")
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer recv.Close()
	h := startHerald(t, func(c *app.Config) { c.DB = "sqlite:" + dbPath })
	h.createEndpoint("acme", recv.URL+"/hook")

	var (
		mu    sync.Mutex
		acked []string
	)
	ackedNow := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), acked...) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var p publishResp
				st, _ := h.call("POST", "/v1/events", `{"tenant":"acme","type":"load.tick","data":{"w":1}}`, &p)
				if st == http.StatusAccepted {
					mu.Lock()
					acked = append(acked, p.ID)
					mu.Unlock()
				}
			}
		}()
	}
	waitFor := func(n int) {
		for len(ackedNow()) < n {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(200)
	before := ackedNow() // acknowledged before the backup started
	backup := filepath.Join(dir, "backup.db")
	if _, err := sqlite.Backup(t.Context(), dbPath, backup); err != nil {
		t.Fatalf("backup under load: %v", err)
	}
	waitFor(len(before) + 100) // publishing went on through the backup
	close(stop)
	wg.Wait()

	key, err := os.ReadFile(dbPath + ".key")
	if err != nil {
		t.Fatal(err)
	}
	rawKey, err := secretbox.ParseKey(string(key))
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(rawKey)

	// Wrong key: refused, nothing written.
	other := make([]byte, secretbox.KeySize)
	rand.Read(other)
	wrongBox, _ := secretbox.New(other)
	wrongTarget := filepath.Join(dir, "wrong.db")
	if err := sqlite.Restore(t.Context(), backup, wrongTarget, wrongBox); !errors.Is(err, store.ErrWrongKey) {
		t.Fatalf("restore with another key: %v, want ErrWrongKey", err)
	}
	if _, err := os.Stat(wrongTarget); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s behind (%v)", wrongTarget, err)
	}

	restored := filepath.Join(dir, "restored.db")
	if err := sqlite.Restore(t.Context(), backup, restored, box); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := sqlite.Restore(t.Context(), backup, restored, box); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("restore over an existing database: %v, want refusal", err)
	}
	st, err := sqlite.Open(t.Context(), restored, sqlite.WithSecretBox(box))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.CheckKey(t.Context(), st, box); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, id := range before {
		if _, err := st.GetEvent(t.Context(), id); err != nil {
			missing++
			if missing < 5 {
				t.Errorf("acknowledged event %s missing from the restored backup: %v", id, err)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events missing", missing, len(before))
	}
	eps, err := st.ListEndpoints(t.Context(), store.ListEndpointsParams{Tenant: "acme"})
	if err != nil || len(eps.Data) != 1 || len(eps.Data[0].Secrets) == 0 {
		t.Fatalf("restored endpoint with its (decrypted) secret: %+v, %v", eps, err)
	}
}

// TestTrustedProxyClientAddress: behind a trusted proxy (--trusted-proxy
// 127.0.0.0/8) the authentication throttle counts the client of
// X-Forwarded-For, so one client exhausting its bucket does not lock out
// another behind the same proxy; without --trusted-proxy the header is
// ignored and every request counts against the proxy's address.
func TestTrustedProxyClientAddress(t *testing.T) {
	t.Parallel()
	exhaust := func(h *herald, client string) (sawThrottle bool) {
		for i := 0; i < 40; i++ {
			if st, _ := h.callWithKey("wrong-key", "GET", "/v1/endpoints", nil, nil, "X-Forwarded-For", client); st == http.StatusTooManyRequests {
				return true
			}
		}
		return false
	}
	trusted := startHerald(t, func(c *app.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	if !exhaust(trusted, "198.51.100.1") {
		t.Fatal("40 failed authentications from one client were never throttled")
	}
	if st, _ := trusted.callWithKey("wrong-key", "GET", "/v1/endpoints", nil, nil, "X-Forwarded-For", "198.51.100.2"); st != http.StatusUnauthorized {
		t.Fatalf("another client behind the trusted proxy: %d, want 401 (its own bucket)", st)
	}
	if st, _ := trusted.callWithKey("wrong-key", "GET", "/v1/endpoints", nil, nil, "X-Forwarded-For", "198.51.100.1"); st != http.StatusTooManyRequests {
		t.Fatalf("the throttled client again: %d, want 429", st)
	}

	plain := startHerald(t, nil)
	if !exhaust(plain, "198.51.100.1") {
		t.Fatal("never throttled")
	}
	if st, _ := plain.callWithKey("wrong-key", "GET", "/v1/endpoints", nil, nil, "X-Forwarded-For", "198.51.100.2"); st != http.StatusTooManyRequests {
		t.Fatalf("without --trusted-proxy a forged X-Forwarded-For escaped the throttle: %d, want 429", st)
	}
}

// TestSealedColumnsListsEveryEncryptedColumn: after creating what Herald
// encrypts at rest (an endpoint with custom headers, an inbound source),
// every text value of every table of the SQLite database that is sealed
// ("enc:v1:…") is in a column of store.SealedColumns, so `herald rekey`
// cannot miss one: a new encrypted column fails this test until it is
// listed there.
func TestSealedColumnsListsEveryEncryptedColumn(t *testing.T) {
	sqliteOnly(t)
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	h := startHerald(t, func(c *app.Config) { c.DB = "sqlite:" + dbPath })
	if st, raw := h.call("POST", "/v1/endpoints", map[string]any{"tenant": "acme", "url": "https://example.com/hook", "headers": map[string]string{"X-Custom": "value-1"}}, nil); st != http.StatusCreated {
		t.Fatalf("create endpoint: %d %s", st, raw)
	}
	h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"s3cr3t-github-provider"}, "destination_url": "https://example.com/in"})
	h.stop()

	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	listed := map[string]bool{}
	for _, c := range store.SealedColumns {
		listed[c.Table+"."+c.Column] = true
	}
	tables, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		tables.Scan(&n)
		names = append(names, n)
	}
	tables.Close()
	found := map[string]bool{}
	for _, table := range names {
		cols, err := db.Query("SELECT name FROM pragma_table_info(?)", table)
		if err != nil {
			t.Fatal(err)
		}
		var colNames []string
		for cols.Next() {
			var n string
			cols.Scan(&n)
			colNames = append(colNames, n)
		}
		cols.Close()
		for _, col := range colNames {
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM "` + table + `" WHERE typeof("` + col + `") = 'text' AND "` + col + `" LIKE 'enc:v1:%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				found[table+"."+col] = true
				if !listed[table+"."+col] {
					t.Errorf("%s.%s holds sealed values but is not in store.SealedColumns: herald rekey would leave them under the old key", table, col)
				}
			}
		}
	}
	for _, want := range []string{"endpoints.secrets", "sources.config"} {
		if !found[want] {
			t.Errorf("no sealed value found in %s (the scan is not seeing what it should)", want)
		}
	}
}
