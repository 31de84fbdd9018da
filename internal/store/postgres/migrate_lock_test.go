package postgres

import (
	"context"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// A migration that replaces deliveries' indexes (92) waits for a long
// transaction on deliveries (a pg_dump, a report) without making every
// other statement on the table queue behind it: with a plain DROP INDEX
// every node's publishes, claims and reads of deliveries waited until the
// long transaction ended, with no sign anywhere.
func TestIndexMigrationDoesNotQueueTheTableBehindALongReader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newSchema(t)
	conn := rawConn(t, dbURL)
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	prov := testProvider(t, db, embeddedMigrations(t))
	if _, err := prov.UpTo(ctx, 91); err != nil {
		t.Fatal(err)
	}
	reader := rawConn(t, dbURL)
	tx, err := reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM deliveries"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := prov.UpTo(context.WithoutCancel(ctx), 92)
		done <- err
	}()
	// While the migration waits for the reader, another session reads and
	// writes deliveries within a second.
	other := rawConn(t, dbURL)
	if _, err := other.Exec(ctx, "SET statement_timeout = '1s'"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the migration ended (%v) while a transaction that read deliveries was open", err)
		default:
		}
		if _, err := other.Exec(ctx, "SELECT count(*) FROM deliveries WHERE state = 'dead'"); err != nil {
			t.Fatalf("a read of deliveries while the migration waits: %v", err)
		}
		if _, err := other.Exec(ctx, "UPDATE deliveries SET attempts = attempts WHERE id = 'none'"); err != nil {
			t.Fatalf("a write of deliveries while the migration waits: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("migration 92 after the reader ended: %v", err)
	}
	var n int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname IN ('deliveries_succeeded', 'deliveries_dead', 'deliveries_paused') AND i.indisvalid AND c.relnamespace = current_schema()::regnamespace`).Scan(&n); err != nil || n != 3 {
		t.Errorf("valid state indexes after the migration: %d (%v), want 3", n, err)
	}
}

// A migration that sets its own lock_timeout and gives up waiting behind
// a long transaction is run again until the transaction ends, and then
// applied.
func TestMigrationWaitingForALockIsRunAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newSchema(t)
	conn := rawConn(t, dbURL)
	db := stdlib.OpenDB(*conn.Config())
	defer db.Close()
	sub := embeddedMigrations(t)
	fsys := fstest.MapFS{}
	entries, err := fs.ReadDir(sub, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(sub, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		fsys[e.Name()] = &fstest.MapFile{Data: b}
	}
	if _, err := testProvider(t, db, fsys).Up(ctx); err != nil {
		t.Fatal(err)
	}
	fsys["09999_alter.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nSET LOCAL lock_timeout = '100ms';\nALTER TABLE endpoints ADD COLUMN scratch integer;\n-- +goose Down\nALTER TABLE endpoints DROP COLUMN scratch;\n")}
	prov := testProvider(t, db, fsys)
	reader := rawConn(t, dbURL)
	tx, err := reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM endpoints"); err != nil {
		t.Fatal(err)
	}
	retried := make(chan error, 100)
	done := make(chan error, 1)
	go func() {
		done <- upWaitingForLocks(context.WithoutCancel(ctx), prov, 10*time.Millisecond, func(err error) { retried <- err })
	}()
	for range 3 { // it gives up and runs again, and the table stays usable meanwhile
		select {
		case <-retried:
		case err := <-done:
			t.Fatalf("the migration ended (%v) while a transaction held its table", err)
		}
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM endpoints"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after the transaction ended: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT scratch FROM endpoints"); err != nil {
		t.Errorf("the migration was not applied: %v", err)
	}
}
