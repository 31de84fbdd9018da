// A Go receiver of Herald's webhooks: verifies, drops redeliveries, handles each event once.
// Run: HERALD_SECRET=whsec_… PORT=9000 go run .   (in a module requiring
// github.com/herald-webhooks/herald and modernc.org/sqlite)
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" driver; sqlstore takes any database/sql database

	"github.com/herald-webhooks/herald/webhook"
	"github.com/herald-webhooks/herald/webhook/sqlstore"
)

func main() {
	// The endpoint's whsec_… secret; during a rotation both, comma-separated.
	secrets := strings.Split(os.Getenv("HERALD_SECRET"), ",")
	for _, s := range secrets {
		if err := webhook.ValidateSecret(s); err != nil {
			log.Fatalf("HERALD_SECRET: %v", err)
		}
	}
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:receiver.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlstore.New(db, sqlstore.SQLite, "") // or redisstore; the memory store forgets on restart
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}

	handler := webhook.Middleware(webhook.HandlerConfig{
		Verifier: &webhook.Verifier{Secrets: secrets},
		Store:    store,
		// Why a request was refused: the sender only gets 401 {"error":"invalid signature"}.
		OnError: func(r *http.Request, err error) { log.Printf("refused: %v", err) },
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type string
			Data json.RawMessage
		}
		if err := json.Unmarshal(webhook.RawBody(r), &ev); err != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		fmt.Println("handled", webhook.EventID(r), ev.Type)
		// … handle ev; answer 5xx to have Herald retry, 2xx when done
	}))
	http.Handle("POST /hook", handler)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil))
}
