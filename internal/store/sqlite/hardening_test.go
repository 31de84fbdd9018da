package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

func testBox(t *testing.T) *secretbox.Box {
	t.Helper()
	box, err := secretbox.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// TestHeaderValuesSealedAtRest (issue 13 point 13): an endpoint's custom
// header values (receivers' credentials) are not stored in clear, read
// back in clear, and rows an earlier version stored in clear are sealed by
// SealClearHeaders.
func TestHeaderValuesSealedAtRest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	box := testBox(t)
	s, err := sqlite.Open(ctx, path, sqlite.WithSecretBox(box))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const credential = "Bearer receiver-credential-7f3a"
	ep := store.Endpoint{
		ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h", State: store.EndpointEnabled,
		Headers: map[string]string{"Authorization": credential},
		Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: base}}, CreatedAt: base, UpdatedAt: base,
	}
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := rawDB(t, path).QueryRowContext(ctx, "SELECT headers FROM endpoints WHERE id=?", ep.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "receiver-credential") || !strings.Contains(raw, `"Authorization":"enc:v1:`) {
		t.Errorf("stored headers %s: want the value sealed (enc:v1:…)", raw)
	}
	got, err := s.GetEndpoint(ctx, ep.ID)
	if err != nil || got.Headers["Authorization"] != credential {
		t.Fatalf("GetEndpoint headers %v, %v; want the clear value", got.Headers, err)
	}
	// An update seals too.
	h := map[string]string{"X-Api-Key": "second-credential-91c2"}
	if _, err := s.UpdateEndpoint(ctx, store.UpdateEndpointParams{ID: ep.ID, Headers: &h, Now: base}); err != nil {
		t.Fatal(err)
	}
	if err := rawDB(t, path).QueryRowContext(ctx, "SELECT headers FROM endpoints WHERE id=?", ep.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "second-credential") {
		t.Errorf("stored headers after update %s: want the value sealed", raw)
	}
	// A row written in clear (an earlier version) is read as is, then sealed.
	if _, err := rawDB(t, path).ExecContext(ctx, `UPDATE endpoints SET headers='{"X-Old":"old-credential-55"}' WHERE id=?`, ep.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetEndpoint(ctx, ep.ID); err != nil || got.Headers["X-Old"] != "old-credential-55" {
		t.Fatalf("clear row: %v, %v", got.Headers, err)
	}
	if n, err := s.SealClearHeaders(ctx); err != nil || n != 1 {
		t.Fatalf("SealClearHeaders = %d, %v; want 1", n, err)
	}
	if err := rawDB(t, path).QueryRowContext(ctx, "SELECT headers FROM endpoints WHERE id=?", ep.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "old-credential") {
		t.Errorf("after SealClearHeaders: %s", raw)
	}
	if got, err := s.GetEndpoint(ctx, ep.ID); err != nil || got.Headers["X-Old"] != "old-credential-55" {
		t.Fatalf("after SealClearHeaders: %v, %v", got.Headers, err)
	}
	if n, err := s.SealClearHeaders(ctx); err != nil || n != 0 {
		t.Errorf("second SealClearHeaders = %d, %v; want 0", n, err)
	}
}

// TestDataFilesPrivate (issue 13 point 13): the database, WAL and SHM files
// are created 0600 whatever the umask, existing files are made private,
// and a directory every user can write to is refused.
func TestDataFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.db")
	s := openStore(t, path)
	if _, err := s.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: store.Endpoint{
		ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h", State: store.EndpointEnabled, CreatedAt: base, UpdatedAt: base,
	}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", filepath.Base(p), info.Mode().Perm())
		}
	}
	s.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	s.Close()
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("reopened: mode %04o, want 0600", info.Mode().Perm())
	}
	open := filepath.Join(dir, "shared")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(t.Context(), filepath.Join(open, "herald.db")); err == nil {
		s.Close()
		t.Error("Open in a world-writable directory succeeded")
	} else if !strings.Contains(err.Error(), "writable by every user") {
		t.Errorf("Open in a world-writable directory: %v; want the rule named", err)
	}
	if entries, _ := os.ReadDir(open); len(entries) != 0 {
		t.Errorf("refused Open created files: %v", entries)
	}
	// A sticky directory such as /tmp is named by its mode as ls shows it.
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(t.Context(), filepath.Join(open, "herald.db")); err == nil {
		s.Close()
		t.Error("Open in a world-writable sticky directory succeeded")
	} else if !strings.Contains(err.Error(), "(mode 1777)") {
		t.Errorf("Open in a world-writable sticky directory: %v; want its mode named 1777", err)
	}
}

// TestPingFailsWhenDatabaseFileDeleted (issue 13 point 14): a database
// file deleted while the store is open fails readiness.
func TestPingFailsWhenDatabaseFileDeleted(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	err := s.Ping(t.Context())
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "deleted or replaced") {
		t.Errorf("Ping after the file was deleted: %v; want ErrUnavailable naming the cause", err)
	}
	// Writes would commit to the unlinked file and be lost at the next
	// start: each is refused the same way, and nothing is stored.
	now := time.Now()
	_, err = s.PublishEvent(t.Context(), store.PublishParams{Event: store.Event{ID: "evt_1", Tenant: "t", Type: "a.b", OccurredAt: now, Body: []byte(`{}`), Fingerprint: "evt_1"},
		Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "deleted or replaced") {
		t.Errorf("publish after the file was deleted: %v; want ErrUnavailable naming the cause", err)
	}
	if _, err := s.GetEvent(t.Context(), "evt_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused publish is readable: %v", err)
	}
	_, err = s.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: store.Endpoint{ID: "ep_1", Tenant: "t", URL: "https://example.com/hooks", CreatedAt: now, UpdatedAt: now}})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("endpoint create after the file was deleted: %v; want ErrUnavailable", err)
	}
	_, err = s.CreateEventType(t.Context(), store.EventType{Name: "a.b", CreatedAt: now, UpdatedAt: now})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("event type create after the file was deleted: %v; want ErrUnavailable", err)
	}
	_, err = s.CreateAPIKey(t.Context(), store.APIKey{ID: "key_1", Kind: "api", Name: "k", Role: "admin", Hash: []byte("h"), CreatedAt: now})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("API key create after the file was deleted: %v; want ErrUnavailable", err)
	}
}

// TestPingFailsWhileStorageIsFull (issue 13 point 15): after a publish
// failed because the storage is full, Ping fails for 10 s (renewed by
// every further failure) and is tried again after 10 s without one.
func TestPingFailsWhileStorageIsFull(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := base
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "herald.db"), sqlite.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := sqlite.LimitPages(ctx, s); err != nil {
		t.Fatal(err)
	}
	publish := func() error {
		id := store.NewID("evt")
		_, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: base, Body: []byte(`{"pad":"` + strings.Repeat("x", 64<<10) + `"}`), Fingerprint: id},
			Now:   base, NewDeliveryID: func() string { return store.NewID("dlv") },
		})
		return err
	}
	if err := publish(); err == nil {
		t.Fatal("publish on a full database succeeded")
	}
	err = s.Ping(ctx)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "failed on storage") {
		t.Fatalf("Ping after a publish failed on storage: %v; want ErrUnavailable", err)
	}
	now = now.Add(9 * time.Second)
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping 9 s after the failure succeeded; want it failing for 10 s")
	}
	now = now.Add(2 * time.Second)
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping 11 s after the failure: %v; want it tried again", err)
	}
	if err := publish(); err == nil {
		t.Fatal("publish on a full database succeeded")
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping right after a second failure succeeded")
	}
}

// TestEveryWriteRefusedOnceDatabaseFileDeleted: once the database file was
// deleted (or replaced), SQLite would commit every write to the unlinked
// file, lost at the next start. Every write is refused with
// store.ErrUnavailable naming the cause, whoever makes it — the API's
// changes, and the engine's and the housekeeper's own writes (claims,
// completions, rescues, fan-out chunks, notices, purges, key touches,
// rekeys): nothing is acknowledged, nor attempted, that is not on disk.
func TestEveryWriteRefusedOnceDatabaseFileDeleted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	box := testBox(t)
	s, err := sqlite.Open(ctx, path, sqlite.WithSecretBox(box))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := base
	var eps []store.Endpoint
	for range 3 {
		e := store.Endpoint{ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h", State: store.EndpointEnabled,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}
		got, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: e, Notice: true})
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, got)
	}
	publish := func(chunk int) store.Event {
		t.Helper()
		id := store.NewID("evt")
		res, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "a.b", OccurredAt: now, Body: []byte(`{}`), Fingerprint: id},
			Now:   now, NewDeliveryID: func() string { return store.NewID("dlv") }, FanOutChunk: chunk})
		if err != nil {
			t.Fatal(err)
		}
		return res.Event
	}
	publish(0)
	publish(1) // one delivery now, the rest left to ContinueFanOut
	claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 2, Lease: time.Second, Now: now})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}
	notices, err := s.PendingNotices(ctx, 10)
	if err != nil || len(notices) == 0 {
		t.Fatalf("notices: %v, %v", notices, err)
	}
	key, err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_1", Kind: "api", Name: "k", Role: "admin", Hash: []byte("h"), CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	et, err := s.CreateEventType(ctx, store.EventType{Name: "a.b", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	src, err := s.CreateSource(ctx, store.CreateSourceParams{
		Source:   store.Source{ID: "src_1", Name: "gh", Config: []byte(`{}`), CreatedAt: now, UpdatedAt: now},
		Endpoint: store.Endpoint{ID: store.NewID("ep"), Tenant: "src_1", Kind: "source", URL: "https://example.com/in", State: store.EndpointEnabled, CreatedAt: now, UpdatedAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := s.SealedValues(ctx, store.SealedColumns[0], "", 1)
	if err != nil || len(secrets) != 1 {
		t.Fatalf("sealed values: %v, %v", secrets, err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	url := "https://example.com/other"
	name := "renamed"
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"ClaimDeliveries", func() error {
			_, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Now: later})
			return err
		}},
		{"CompleteDeliveries", func() error {
			c := claims[0]
			return s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: c.Delivery.ID, EndpointID: c.Delivery.EndpointID, Owner: "w",
				LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliveryDead, Now: now, Attempt: store.Attempt{StartedAt: now, StatusCode: 500}}})
		}},
		{"RescueExpiredLeases", func() error { _, err := s.RescueExpiredLeases(ctx, later); return err }},
		{"ContinueFanOut", func() error { _, err := s.ContinueFanOut(ctx, store.FanOutParams{Chunk: 1, Now: now}); return err }},
		{"PublishEvent", func() error {
			_, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: "evt_x", Tenant: "acme", Type: "a.b", OccurredAt: now, Body: []byte(`{}`), Fingerprint: "evt_x"},
				Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }})
			return err
		}},
		{"CreateEndpoint", func() error {
			_, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: "ep_x", Tenant: "acme", URL: url, CreatedAt: now, UpdatedAt: now}})
			return err
		}},
		{"UpdateEndpoint", func() error {
			_, err := s.UpdateEndpoint(ctx, store.UpdateEndpointParams{ID: eps[0].ID, URL: &url, Now: later})
			return err
		}},
		{"DeleteEndpoint", func() error { return s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: eps[2].ID, Now: later}) }},
		{"SetEndpointState", func() error {
			_, _, err := s.SetEndpointState(ctx, store.SetEndpointStateParams{ID: eps[0].ID, State: store.EndpointPaused, Now: later})
			return err
		}},
		{"ReplayDeliveries", func() error {
			_, err := s.ReplayDeliveries(ctx, store.ReplayParams{EndpointID: eps[0].ID, Now: later})
			return err
		}},
		{"PostponeEndpointDeliveries", func() error { _, err := s.PostponeEndpointDeliveries(ctx, eps[0].ID, later); return err }},
		{"MoveEndpointDeliveries", func() error {
			_, err := s.MoveEndpointDeliveries(ctx, store.MoveParams{EndpointID: eps[0].ID, DueTo: later, At: later})
			return err
		}},
		{"RotateSecret", func() error {
			_, err := s.RotateSecret(ctx, store.RotateSecretParams{ID: eps[0].ID, Secret: "whsec_y", Now: later})
			return err
		}},
		{"RevokeSecret", func() error {
			_, err := s.RevokeSecret(ctx, store.RevokeSecretParams{ID: eps[0].ID, SecretID: "x", Now: later})
			return err
		}},
		{"ClearNotices", func() error { return s.ClearNotices(ctx, []int64{notices[0].ID}) }},
		{"ClaimSpikeAlert", func() error { _, err := s.ClaimSpikeAlert(ctx, eps[0].ID, now, later); return err }},
		{"Purge", func() error {
			_, err := s.Purge(ctx, store.PurgeParams{EventsBefore: later.Add(time.Hour)})
			return err
		}},
		{"CreateAPIKey", func() error {
			_, err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_2", Kind: "api", Name: "k", Role: "admin", Hash: []byte("h2"), CreatedAt: now})
			return err
		}},
		{"TouchAPIKeys", func() error { return s.TouchAPIKeys(ctx, map[string]time.Time{key.ID: later}) }},
		{"RevokeAPIKey", func() error { return s.RevokeAPIKey(ctx, "api", key.ID, later) }},
		{"CreateEventType", func() error {
			_, err := s.CreateEventType(ctx, store.EventType{Name: "c.d", CreatedAt: now, UpdatedAt: now})
			return err
		}},
		{"UpdateEventType", func() error { et.Description = "changed"; _, err := s.UpdateEventType(ctx, et); return err }},
		{"CreateSource", func() error {
			_, err := s.CreateSource(ctx, store.CreateSourceParams{
				Source:   store.Source{ID: "src_2", Name: "gh2", Config: []byte(`{}`), CreatedAt: now, UpdatedAt: now},
				Endpoint: store.Endpoint{ID: "ep_src2", Tenant: "src_2", Kind: "source", URL: url, State: store.EndpointEnabled, CreatedAt: now, UpdatedAt: now}})
			return err
		}},
		{"UpdateSource", func() error {
			_, err := s.UpdateSource(ctx, store.UpdateSourceParams{ID: src.ID, Name: &name, Now: later})
			return err
		}},
		{"DeleteSource", func() error { return s.DeleteSource(ctx, src.ID) }},
		{"EnsureMeta", func() error { _, err := s.EnsureMeta(ctx, "some_key", "v"); return err }},
		{"ReplaceSealed", func() error {
			_, err := s.ReplaceSealed(ctx, store.SealedColumns[0], secrets[0].Key, secrets[0].Value, secrets[0].Value)
			return err
		}},
		{"SealClearHeaders", func() error { _, err := s.SealClearHeaders(ctx); return err }},
		{"Ping", func() error { return s.Ping(ctx) }},
	} {
		err := w.write()
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "deleted or replaced") {
			t.Errorf("%s after the database file was deleted: %v; want ErrUnavailable naming the cause", w.name, err)
		}
	}
}
