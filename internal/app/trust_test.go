package app_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
	"github.com/herald-webhooks/herald/webhook"
)

// TestSecretRotationOverlap: during the overlap a receiver holding only the
// old secret and one holding only the new one both verify; afterwards only
// the new one does. On a fake clock (app.Config.Clock): the overlap ends
// when the clock passes it, not after a second of wall time.
func TestSecretRotationOverlap(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h := startHerald(t, func(c *app.Config) { c.Clock = clk })
	rcv := newReceiver(t, 200)
	ep := h.createEndpoint("acme", rcv.URL)
	oldSecret := ep.Secret
	var rot struct {
		Secret            string     `json:"secret"`
		PreviousExpiresAt *time.Time `json:"previous_expires_at"`
	}
	if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{"overlap_seconds":1}`, &rot); st != 200 || !strings.HasPrefix(rot.Secret, "whsec_") || rot.PreviousExpiresAt == nil {
		t.Fatalf("rotate: %d %s", st, raw)
	}
	newSecret := rot.Secret
	var cur struct{ Secret string }
	h.call("GET", "/v1/endpoints/"+ep.ID+"/secret", nil, &cur)
	if cur.Secret != newSecret {
		t.Fatalf("current secret after rotation = %q, want the new one", cur.Secret)
	}
	oldV := &webhook.Verifier{Secrets: []string{oldSecret}}
	newV := &webhook.Verifier{Secrets: []string{newSecret}}
	check := func(r received, oldOK bool) {
		t.Helper()
		for name, v := range map[string]*webhook.Verifier{"old": oldV, "new": newV} {
			want := name == "new" || oldOK
			errH := v.VerifyHerald(r.Header.Get("X-Signature"), r.Body)
			errS := v.VerifyStandard(r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature"), r.Body)
			if (errH == nil) != want || (errS == nil) != want {
				t.Fatalf("receiver with the %s secret: X-Signature err=%v, webhook-signature err=%v; want verified=%v", name, errH, errS, want)
			}
		}
	}
	p1 := h.publish("acme", "invoice.paid", `{"n":1}`)
	h.waitDelivery(p1.ID, "succeeded", 10*time.Second)
	during := rcv.got()[0]
	if n := strings.Count(during.Header.Get("X-Signature"), "v1="); n != 2 {
		t.Fatalf("X-Signature during the overlap has %d v1 entries, want 2: %s", n, during.Header.Get("X-Signature"))
	}
	check(during, true)

	if !rot.PreviousExpiresAt.Equal(clk.Now().Add(time.Second)) {
		t.Fatalf("previous secret expires at %v, want 1 s after the rotation (%v)", rot.PreviousExpiresAt, clk.Now())
	}
	clk.Advance(time.Second) // the 1 s overlap ends
	p2 := h.publish("acme", "invoice.paid", `{"n":2}`)
	h.waitDelivery(p2.ID, "succeeded", 10*time.Second)
	after := rcv.got()[1]
	if n := strings.Count(after.Header.Get("X-Signature"), "v1="); n != 1 {
		t.Fatalf("X-Signature after the overlap has %d v1 entries, want 1", n)
	}
	check(after, false)

	for _, bad := range []string{`{"overlap_seconds":-1}`, `{"overlap_seconds":604801}`, `{"overlap_seconds":"1"}`} {
		if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", bad, nil); st != 422 {
			t.Errorf("rotate with %s: %d %s, want 422", bad, st, raw)
		}
	}
	if st, _ := h.call("POST", "/v1/endpoints/ep_nope/rotate-secret", `{}`, nil); st != 404 {
		t.Errorf("rotate unknown endpoint: %d, want 404", st)
	}
}

// TestNoSecretsInClearOnDisk reads the raw database files and finds neither
// an endpoint secret, nor a custom header value (issue 13 point 13), nor
// the generated admin API key; every database file is 0600.
func TestNoSecretsInClearOnDisk(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	dir := t.TempDir()
	var stdout bytes.Buffer
	m, err := app.New(context.Background(), app.Config{
		Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(dir, "herald.db"), Dev: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: &stdout,
	})
	if err != nil {
		t.Fatal(err)
	}
	apiKey := regexp.MustCompile(`herald_key_[A-Za-z0-9_-]+`).FindString(stdout.String())
	if apiKey == "" {
		t.Fatalf("no generated API key printed: %q", stdout.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	h := &herald{t: t, base: "http://" + m.Addr(), m: m}
	// The harness sends testAPIKey; use the generated key instead.
	var secrets []string
	for range 3 {
		var ep endpointResp
		cred := "receiver-credential-" + strings.Repeat(strconv.Itoa(len(secrets)), 12)
		st, raw := h.callWithKey(apiKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook","headers":{"Authorization":"Bearer `+cred+`"}}`, &ep)
		if st != 201 {
			t.Fatalf("create: %d %s", st, raw)
		}
		secrets = append(secrets, ep.Secret, cred)
		var rot struct{ Secret string }
		h.callWithKey(apiKey, "POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", `{}`, &rot)
		secrets = append(secrets, rot.Secret)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "herald.db*"))
	var all []byte
	for _, f := range files {
		if strings.HasSuffix(f, ".key") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", filepath.Base(f), info.Mode().Perm(), err)
		}
	}
	if len(all) == 0 {
		t.Fatal("read no database bytes")
	}
	for _, s := range append(secrets, apiKey) {
		raw := strings.TrimPrefix(s, "whsec_")
		forms := []string{s, raw}
		if k, err := base64.StdEncoding.DecodeString(raw); err == nil {
			forms = append(forms, string(k))
		}
		for _, f := range forms {
			if bytes.Contains(all, []byte(f)) {
				t.Fatalf("the database files contain a secret in clear (%d bytes)", len(f))
			}
		}
	}
	info, err := os.Stat(filepath.Join(dir, "herald.db.key"))
	if err != nil {
		t.Fatalf("no key file beside the database: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, want 0600", info.Mode().Perm())
	}
}

// TestSendTestEvent: POST /v1/endpoints/{id}/test sends a signed herald.test
// event now and stores nothing.
func TestSendTestEvent(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 200)
	ep := h.createEndpoint("acme", rcv.URL)
	var out struct {
		EventID string      `json:"event_id"`
		Attempt attemptResp `json:"attempt"`
	}
	if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/test", nil, &out); st != 200 || out.Attempt.StatusCode != 200 {
		t.Fatalf("test: %d %s", st, raw)
	}
	reqs := rcv.got()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Event-Type") != "herald.test" || reqs[0].Header.Get("X-Event-Id") != out.EventID {
		t.Fatalf("receiver got %d requests", len(reqs))
	}
	if err := (&webhook.Verifier{Secrets: []string{ep.Secret}}).Verify(reqs[0].Header, reqs[0].Body); err != nil {
		t.Fatalf("test event does not verify: %v", err)
	}
	if st, raw := h.call("GET", "/v1/events/"+out.EventID, nil, nil); st != 404 {
		t.Fatalf("GET the test event: %d %s; want 404", st, raw)
	}
	// The housekeeper's endpoint.created for ep is an operational event
	// and may be stored at any moment; anything else is the test event.
	var evs struct {
		Data []struct{ ID, Type string }
	}
	h.call("GET", "/v1/events", nil, &evs)
	for _, e := range evs.Data {
		if !store.IsOperational(e.Type) {
			t.Fatalf("a test event was stored: %s %s", e.ID, e.Type)
		}
	}
}

// TestKeyFileMadePrivate: a key file readable by other users (one written
// by hand under umask 022, say) opens every sealed secret of the database,
// which Herald keeps owner-only: the start takes group and other
// permissions off it, as off the database files, and warns that it was
// exposed.
func TestKeyFileMadePrivate(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.db")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + path, APIKey: testAPIKey, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := os.Chmod(path+".key", 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	m, err = app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + path, APIKey: testAPIKey, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if info, err := os.Stat(path + ".key"); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file after a start: %v, %v; want mode 0600", info.Mode().Perm(), err)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "mode_was=0644") || !strings.Contains(out, "file="+path+".key") {
		t.Fatalf("no warning naming the exposed key file and its mode:\n%s", out)
	}
}

// TestWrongEncryptionKeyRefusesToStart: a database written with one key
// does not start with another (or with its key file lost), instead of
// failing every delivery later.
func TestWrongEncryptionKeyRefusesToStart(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "herald.db")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(key string) (*app.Main, error) {
		return app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: db, APIKey: testAPIKey, Dev: true, EncryptionKey: key, Logger: quiet})
	}
	m, err := start("")
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := os.Remove(filepath.Join(dir, "herald.db.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := start(""); err == nil || !strings.Contains(err.Error(), "encryption key does not match") {
		t.Fatalf("start with the key file lost: err = %v, want a refusal naming the key", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "herald.db.key")); !os.IsNotExist(err) {
		t.Fatalf("a wrong key file was left behind: %v", err)
	}
	other := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	if _, err := start(other); err == nil || !strings.Contains(err.Error(), "HERALD_ENCRYPTION_KEY") {
		t.Fatalf("start with another HERALD_ENCRYPTION_KEY: err = %v, want a refusal", err)
	}
	if _, err := start("not base64!"); err == nil || !strings.Contains(err.Error(), "base64 of 32 bytes") {
		t.Fatalf("malformed key: err = %v", err)
	}
}

// TestAnotherApplicationsDatabaseRefused: --db naming another
// application's SQLite database is refused at start, and the start leaves
// nothing behind: no key file beside it (a later start would take that key
// for the database's).
func TestAnotherApplicationsDatabaseRefused(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE users (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + path, APIKey: testAPIKey, Dev: true, Logger: quiet})
	if err == nil {
		m.Close()
		t.Fatal("Herald started on another application's database")
	}
	if !strings.Contains(err.Error(), "not a Herald one") {
		t.Fatalf("start: %v, want a refusal naming the rule", err)
	}
	if _, err := os.Stat(path + ".key"); !os.IsNotExist(err) {
		t.Fatalf("a key file was left beside the refused database: %v", err)
	}
}

// TestDeletedDatabaseDetected (issue 13 point 14): a database file deleted
// while Herald runs fails /readyz, and the next start refuses to create an
// empty database beside the existing key file, naming the reason.
func TestDeletedDatabaseDetected(t *testing.T) {
	t.Parallel()
	sqliteOnly(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.db")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() (*app.Main, error) {
		return app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + path, APIKey: testAPIKey, Dev: true, Logger: quiet})
	}
	m, err := start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	h := &herald{t: t, base: "http://" + m.Addr(), m: m}
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 200 {
		t.Fatalf("readyz: %d %s", st, raw)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(f)
	}
	if st, raw := h.call("GET", "/readyz", nil, nil); st != 503 {
		t.Errorf("readyz after the database file was deleted: %d %s; want 503", st, raw)
	}
	// A write would go to the unlinked file and be lost at the next start:
	// it is refused with a 503 (the cause is logged and /readyz names it)
	// instead of answered 202 or 201.
	if st, raw := h.call("POST", "/v1/events", `{"tenant":"acme","type":"invoice.paid","data":{"n":1}}`, nil); st != 503 || !strings.Contains(string(raw), "retry later") {
		t.Errorf("publish after the database file was deleted: %d %s; want 503", st, raw)
	}
	if st, raw := h.call("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://127.0.0.1:9/hooks"}`, nil); st != 503 || !strings.Contains(string(raw), "retry later") {
		t.Errorf("endpoint create after the database file was deleted: %d %s; want 503", st, raw)
	}
	cancel()
	<-done
	// The running node may have opened a new pooled connection after the
	// deletion, and SQLite creates a missing file when it opens one: an
	// empty herald.db. Start from none, to see whether the refused start
	// creates one.
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(f)
	}
	if _, err := start(); err == nil || !strings.Contains(err.Error(), "missing or empty but its key file") {
		t.Fatalf("start without the database beside its key file: %v; want a refusal", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the refused start created a database: %v", err)
	}
}

// TestRotationWithoutOverlapKeepsOnlyTheNewSecret (issue 13, point 8):
// S1→S2 with a day of overlap, then S2→S3 with none (a leaked secret):
// the next delivery is signed with S3 alone, and GET …/secrets lists S3
// alone. A secret kept by an overlap can be revoked early; the current one
// cannot.
func TestRotationWithoutOverlapKeepsOnlyTheNewSecret(t *testing.T) {
	t.Parallel()
	h := startHerald(t, nil)
	rcv := newReceiver(t, 200)
	ep := h.createEndpoint("acme", rcv.URL)
	type secretInfo struct {
		ID        string     `json:"id"`
		Current   bool       `json:"current"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	list := func() []secretInfo {
		t.Helper()
		var out struct{ Data []secretInfo }
		if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID+"/secrets", nil, &out); st != 200 {
			t.Fatalf("list secrets: %d %s", st, raw)
		}
		if raw, _ := json.Marshal(out); strings.Contains(string(raw), "whsec_") {
			t.Fatalf("the secrets list shows a secret's value: %s", raw)
		}
		return out.Data
	}
	rotate := func(overlap int) string {
		t.Helper()
		var rot struct{ Secret string }
		if st, raw := h.call("POST", "/v1/endpoints/"+ep.ID+"/rotate-secret", map[string]int{"overlap_seconds": overlap}, &rot); st != 200 {
			t.Fatalf("rotate: %d %s", st, raw)
		}
		return rot.Secret
	}
	rotate(86400)
	if got := list(); len(got) != 2 || !got[0].Current || got[0].ExpiresAt != nil || got[1].Current || got[1].ExpiresAt == nil {
		t.Fatalf("secrets after S1→S2 with a day of overlap: %+v, want S2 current and S1 expiring", got)
	}
	s3 := rotate(0)
	if got := list(); len(got) != 1 || !got[0].Current {
		t.Fatalf("secrets after S2→S3 without overlap: %+v, want S3 alone", got)
	}
	p := h.publish("acme", "invoice.paid", `{"n":1}`)
	h.waitDelivery(p.ID, "succeeded", 10*time.Second)
	r := rcv.got()[0]
	if n := strings.Count(r.Header.Get("X-Signature"), "v1="); n != 1 {
		t.Fatalf("X-Signature after an emergency rotation has %d v1 entries, want 1 (S3's): %s", n, r.Header.Get("X-Signature"))
	}
	if err := (&webhook.Verifier{Secrets: []string{s3}}).VerifyHerald(r.Header.Get("X-Signature"), r.Body); err != nil {
		t.Fatalf("the delivery does not verify with S3: %v", err)
	}

	// Revoking early: S3 kept for an hour by the next rotation goes now.
	rotate(3600)
	got := list()
	if len(got) != 2 {
		t.Fatalf("secrets after S3→S4: %+v, want 2", got)
	}
	if st, raw := h.call("DELETE", "/v1/endpoints/"+ep.ID+"/secrets/"+got[0].ID, nil, nil); st != 409 || !strings.Contains(string(raw), "rotate") {
		t.Errorf("revoke the current secret: %d %s, want 409 saying to rotate", st, raw)
	}
	if st, raw := h.call("DELETE", "/v1/endpoints/"+ep.ID+"/secrets/"+got[1].ID, nil, nil); st != 204 {
		t.Fatalf("revoke S3: %d %s", st, raw)
	}
	if after := list(); len(after) != 1 || after[0].ID != got[0].ID {
		t.Errorf("secrets after revoking S3: %+v, want S4 alone", after)
	}
	if st, _ := h.call("DELETE", "/v1/endpoints/"+ep.ID+"/secrets/"+got[1].ID, nil, nil); st != 404 {
		t.Errorf("revoke S3 again: %d, want 404", st)
	}
	if st, _ := h.call("DELETE", "/v1/endpoints/ep_nope/secrets/"+got[1].ID, nil, nil); st != 404 {
		t.Errorf("revoke on an unknown endpoint: %d, want 404", st)
	}
}
