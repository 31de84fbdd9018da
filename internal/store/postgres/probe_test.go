package postgres

import (
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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
