package postgres

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestPingFailsWhenTheStoreCannotWrite (issue 13 point 15): a server that
// answers but refuses writes (here default_transaction_read_only, as on a
// read-only standby) fails the readiness probe.
func TestPingFailsWhenTheStoreCannotWrite(t *testing.T) {
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	if _, err := s.EnsureMeta(t.Context(), store.KeyCheckMeta, "probe-test"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ro := &Store{pool: pool}
	if err := pool.Ping(t.Context()); err != nil {
		t.Fatalf("the read-only pool does not answer: %v", err)
	}
	if err := ro.Ping(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping on a read-only server: %v; want ErrUnavailable", err)
	}
}

// TestHeaderValuesSealedAtRestPostgres (issue 13 point 13): the PostgreSQL
// driver seals endpoint header values like the SQLite driver, on create
// and update, and SealClearHeaders seals rows stored in clear.
func TestHeaderValuesSealedAtRestPostgres(t *testing.T) {
	dbURL := newSchema(t)
	box, err := secretbox.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dbURL, WithSecretBox(box))
	ctx := t.Context()
	ep := store.Endpoint{ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h", State: store.EndpointEnabled,
		Headers: map[string]string{"Authorization": "Bearer pg-credential-1"}, CreatedAt: base, UpdatedAt: base}
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	raw := func() string {
		var v string
		if err := s.pool.QueryRow(ctx, "SELECT headers::text FROM endpoints WHERE id=$1", ep.ID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := raw(); strings.Contains(v, "pg-credential") || !strings.Contains(v, "enc:v1:") {
		t.Errorf("stored headers %s; want sealed values", v)
	}
	h := map[string]string{"X-Key": "pg-credential-2"}
	got, err := s.UpdateEndpoint(ctx, store.UpdateEndpointParams{ID: ep.ID, Headers: &h, Now: base})
	if err != nil || got.Headers["X-Key"] != "pg-credential-2" {
		t.Fatalf("update: %v, %v", got.Headers, err)
	}
	if v := raw(); strings.Contains(v, "pg-credential") {
		t.Errorf("stored headers after update %s", v)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE endpoints SET headers='{"X-Old":"pg-credential-3"}' WHERE id=$1`, ep.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SealClearHeaders(ctx); err != nil || n != 1 {
		t.Fatalf("SealClearHeaders = %d, %v; want 1", n, err)
	}
	if v := raw(); strings.Contains(v, "pg-credential") {
		t.Errorf("after SealClearHeaders: %s", v)
	}
	if e, err := s.GetEndpoint(ctx, ep.ID); err != nil || e.Headers["X-Old"] != "pg-credential-3" {
		t.Fatalf("read back: %v, %v", e.Headers, err)
	}
}
