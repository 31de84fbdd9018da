package postgres

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/herald-webhooks/herald/internal/store"
)

// embeddedMigrations is the migrations directory as goose reads it.
func embeddedMigrations(t *testing.T) fs.FS {
	t.Helper()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// testProvider is a goose provider of fsys on db, as migrate makes one
// but without its lock: tests move a schema of their own to a version.
func testProvider(t *testing.T, db *sql.DB, fsys fs.FS) *goose.Provider {
	t.Helper()
	prov, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithLogger(goose.NopLogger()), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return prov
}

// mainSchemaVersion is the last migration of the release before tenancy.
const mainSchemaVersion = 2

// TestMigrateFromPreTenancySchema: a database written at the schema before
// migration 00030 migrates forward with its data intact (the PostgreSQL
// twin of the SQLite driver's test of the same name).
func TestMigrateFromPreTenancySchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newSchema(t)
	conn := rawConn(t, dbURL)
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	prov := testProvider(t, db, embeddedMigrations(t))
	if _, err := prov.UpTo(ctx, mainSchemaVersion); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	hash := sha256.Sum256([]byte("legacy-admin-key"))
	secrets, err := store.EncodeSecrets(nil, "ep_a", []store.Secret{{Value: "whsec_legacy", CreatedAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	heraldID := store.NewID("evt")
	opID := "evt_op_disabled_ep_a_123"
	body := []byte(`{"id":"inv-1","type":"invoice.paid","tenant":"acme","occurred_at":"2026-11-01T12:00:00Z","data":{}}`)
	fp := store.Fingerprint("acme", "invoice.paid", []byte(`{}`))
	for _, st := range []struct {
		q    string
		args []any
	}{
		{"INSERT INTO api_keys (hash, created_at) VALUES ($1, $2)", []any{hash[:], now}},
		{"INSERT INTO endpoints (id, tenant, url, state, state_reason, secrets, created_at, updated_at, notice, notice_at) VALUES ('ep_a', 'acme', 'https://a.example/', 'disabled', 'gone', $1, $2, $2, 'endpoint.disabled', $2)", []any{secrets, now}},
		{"INSERT INTO events (id, tenant, type, occurred_at, body, idempotency_key, fingerprint, created_at) VALUES ('inv-1', 'acme', 'invoice.paid', $1, $2, 'idem-1', $3, $1)", []any{now, body, fp}},
		{"INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at) VALUES ($1, 'acme', 'invoice.paid', $2, '{}', 'x', $2)", []any{heraldID, now}},
		{"INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at) VALUES ($1, 'acme', 'endpoint.disabled', $2, '{}', 'y', $2)", []any{opID, now}},
		{"INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, attempts, next_attempt_at, created_at, updated_at) VALUES ('dlv_1', 'inv-1', 'ep_a', 'acme', 'invoice.paid', 'dead', 1, $1, $1, $1)", []any{now}},
		{"INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at) VALUES ('dlv_2', $1, 'ep_a', 'acme', 'invoice.paid', 'pending', $2, $2, $2)", []any{heraldID, now}},
		{"INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at) VALUES ('dlv_3', $1, 'ep_a', 'acme', 'endpoint.disabled', 'succeeded', $2, $2, $2)", []any{opID, now}},
		{"INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, response_excerpt) VALUES ('dlv_1', 1, $1, 1000, 500, 'boom')", []any{now}},
	} {
		if _, err := conn.Exec(ctx, st.q, st.args...); err != nil {
			t.Fatalf("%s: %v", st.q, err)
		}
	}

	s := openStore(t, dbURL)
	k, err := s.LookupAPIKey(ctx, hash[:])
	if err != nil || k.Role != store.RoleAdmin || k.Tenant != "" || k.Kind != store.KeyKindAPIKey || k.ID == "" || !k.Usable(now) || !k.CreatedAt.Equal(now) {
		t.Fatalf("the stored key after the migration: %+v, %v; want a usable admin key with an id", k, err)
	}
	if _, err := s.GetEvent(ctx, "inv-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetEvent(inv-1) = %v; the producer id moved under its tenant", err)
	}
	// The notice not yet emitted moved to the outbox (migration 00020).
	if ns, err := s.PendingNotices(ctx, 10); err != nil || len(ns) != 1 || ns[0].Type != "endpoint.disabled" || !ns[0].At.Equal(now) ||
		ns[0].Endpoint.ID != "ep_a" || ns[0].Endpoint.Tenant != "acme" || ns[0].Endpoint.StateReason != "gone" {
		t.Fatalf("notices after the migration: %+v, %v; want ep_a's endpoint.disabled", ns, err)
	}
	ev, err := s.GetEvent(ctx, "acme~inv-1")
	if err != nil || string(ev.Body) != string(body) || ev.IdempotencyKey != "idem-1" {
		t.Fatalf("GetEvent(acme~inv-1) = %+v, %v", ev, err)
	}
	// Migration 50 (event catalog): an event published before the catalog
	// reads as an unversioned, unnumbered event with the same bytes; the
	// catalog starts empty.
	if ev.Sequence != 0 || ev.VersionBodies != nil || string(ev.BodyFor(1)) != string(body) {
		t.Fatalf("pre-catalog event after migration 50: sequence %d, version bodies %v", ev.Sequence, ev.VersionBodies)
	}
	if cat, err := s.ListEventTypes(ctx, store.ListParams{}); err != nil || len(cat.Data) != 0 || cat.NextCursor != "" {
		t.Fatalf("ListEventTypes after migration = %v, %v", cat, err)
	}
	for _, id := range []string{heraldID, opID} {
		if _, err := s.GetEvent(ctx, id); err != nil {
			t.Fatalf("Herald's id %s changed: %v", id, err)
		}
	}
	pg, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{EndpointID: "ep_a"})
	if err != nil || len(pg.Data) != 3 {
		t.Fatalf("deliveries: %+v, %v", pg.Data, err)
	}
	byID := map[string]string{}
	for _, d := range pg.Data {
		byID[d.ID] = d.EventID
	}
	if byID["dlv_1"] != "acme~inv-1" || byID["dlv_2"] != heraldID || byID["dlv_3"] != opID {
		t.Fatalf("deliveries' events after the migration: %v", byID)
	}
	if as, err := s.ListAttempts(ctx, "dlv_1"); err != nil || len(as) != 1 || as[0].ResponseExcerpt != "boom" {
		t.Fatalf("attempts: %+v, %v", as, err)
	}
	if ep, err := s.GetEndpoint(ctx, "ep_a"); err != nil || len(ep.Secrets) != 1 || ep.Secrets[0].Value != "whsec_legacy" {
		t.Fatalf("endpoint: %+v, %v", ep, err)
	}
	res, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: store.EventKey("acme", "inv-1", true), Tenant: "acme", Type: "invoice.paid",
		OccurredAt: now, Body: body, Fingerprint: fp}, Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }, IDFromClient: true})
	if err != nil || res.Created {
		t.Fatalf("republishing inv-1 of acme: %+v, %v; want the original", res, err)
	}
	// The foreign key is back: a delivery cannot name a missing event.
	if _, err := conn.Exec(ctx, "INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at) VALUES ('dlv_x', 'nope', 'ep_a', 'acme', 'a', 'pending', now(), now(), now())"); err == nil {
		t.Fatal("a delivery of a missing event was accepted: the foreign key was not restored")
	}
}

// TestMigrateOutOfOrderBlock: a database at version 30 that lacks the
// migrations 20–24 (written by a build of another line of work) gets them
// at the next start; its pending notice moves to the outbox. (That build
// predates 71 and 82, which change the notices table 20 creates: they are missing
// too.)
func TestMigrateOutOfOrderBlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newSchema(t)
	conn := rawConn(t, dbURL)
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	sub := embeddedMigrations(t)
	entries, err := fs.ReadDir(sub, ".")
	if err != nil {
		t.Fatal(err)
	}
	without := fstest.MapFS{}
	for _, e := range entries {
		if v := e.Name()[:5]; v >= "00020" && v <= "00024" || v == "00071" || v == "00082" {
			continue
		}
		b, err := fs.ReadFile(sub, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		without[e.Name()] = &fstest.MapFile{Data: b}
	}
	if _, err := testProvider(t, db, without).Up(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	if _, err := conn.Exec(ctx, `INSERT INTO endpoints (id, tenant, url, state, secrets, created_at, updated_at, notice, notice_at)
		VALUES ('ep_a', 'acme', 'https://a.example/', 'enabled', '[]', $1, $1, 'endpoint.enabled', $1)`, now); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dbURL)
	if ns, err := s.PendingNotices(ctx, 10); err != nil || len(ns) != 1 || ns[0].Type != "endpoint.enabled" || ns[0].Endpoint.ID != "ep_a" {
		t.Fatalf("notices after the migration: %+v, %v; want ep_a's endpoint.enabled", ns, err)
	}
}
