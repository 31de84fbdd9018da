package outbox_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-webhooks/herald/outbox"
)

// placeOrder stores an order and announces it in one transaction: the
// order.placed event exists if and only if the order does.
func placeOrder(ctx context.Context, db *pgxpool.Pool, orderID string, cents int) (outbox.Result, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return outbox.Result{}, err
	}
	defer tx.Rollback(ctx) // a no-op after Commit

	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, cents) VALUES ($1, $2)", orderID, cents); err != nil {
		return outbox.Result{}, err
	}
	res, err := outbox.Publish(ctx, tx, outbox.Event{
		Tenant: "acme",
		Type:   "order.placed",
		// Thin: ids and a version; receivers fetch the rest.
		Data: map[string]any{"order_id": orderID, "total_cents": cents, "version": 1},
		// A retry of this function publishes nothing twice.
		IdempotencyKey: "order.placed/" + orderID,
	})
	if err != nil {
		return outbox.Result{}, err
	}
	return res, tx.Commit(ctx)
}

// The application shares the database of `herald serve --db postgres://…`
// (DATABASE_URL here). Herald's nodes deliver the event once the
// transaction commits; had it rolled back, nothing would be delivered.
func Example() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	res, err := placeOrder(ctx, db, "ord_1001", 4200)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("event %s: %d deliveries\n", res.ID, res.Deliveries)
}
