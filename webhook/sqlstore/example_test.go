package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/herald-webhooks/herald/webhook"
	"github.com/herald-webhooks/herald/webhook/sqlstore"
)

// A store shared by every process of a receiver, on SQLite (PostgreSQL:
// sql.Open("pgx", url) and sqlstore.Postgres).
func Example() {
	dir, _ := os.MkdirTemp("", "sqlstore-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "receiver.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()

	store, err := sqlstore.New(db, sqlstore.SQLite, "") // table herald_idempotency
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.CreateTable(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// What the middleware does for each delivery of evt_1:
	st, _ := store.Claim(ctx, "evt_1", 5*time.Minute)
	fmt.Println("first delivery:", st)
	_ = store.Complete(ctx, "evt_1", 72*time.Hour) // the handler answered 2xx
	st, _ = store.Claim(ctx, "evt_1", 5*time.Minute)
	fmt.Println("redelivery:", st)

	// Now and then, e.g. hourly:
	if _, err := store.DeleteExpired(ctx); err != nil {
		fmt.Println(err)
	}

	// In a server:
	_ = webhook.Middleware(webhook.HandlerConfig{
		Verifier: &webhook.Verifier{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		Store:    store,
	})(http.NotFoundHandler())
	// Output:
	// first delivery: acquired
	// redelivery: completed
}

// The version gate advanced in the same transaction as the work it guards:
// if the work fails the transaction rolls back and the sender's retry of
// the event is still fresh.
func ExampleVersionGate_CheckTx() {
	dir, _ := os.MkdirTemp("", "sqlstore-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "receiver.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()
	gate, _ := sqlstore.NewVersionGate(db, sqlstore.SQLite, "")
	_ = gate.CreateTable(ctx)
	_, _ = db.Exec(`CREATE TABLE files (id TEXT PRIMARY KEY, state TEXT)`)

	apply := func(fileID string, version int64, state string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		fresh, err := gate.CheckTx(ctx, tx, fileID, version)
		if err != nil {
			return err
		}
		if !fresh {
			fmt.Printf("%s v%d: stale\n", fileID, version)
			return nil
		}
		// Thin event: fetch the current state from the sender's API here.
		if _, err := tx.Exec(`INSERT INTO files (id, state) VALUES (?, ?)
			ON CONFLICT (id) DO UPDATE SET state = excluded.state`, fileID, state); err != nil {
			return err
		}
		fmt.Printf("%s v%d: applied %s\n", fileID, version, state)
		return tx.Commit()
	}
	_ = apply("file_9", 2, "extracted")
	_ = apply("file_9", 1, "uploaded") // arrived late
	// Output:
	// file_9 v2: applied extracted
	// file_9 v1: stale
}
