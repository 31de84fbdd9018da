package redisstore_test

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/herald-webhooks/herald/webhook"
	"github.com/herald-webhooks/herald/webhook/redisstore"
)

// A receiver whose processes share one Redis.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// webhook.RawBody(r), webhook.EventID(r) ...
	})
	http.Handle("/webhooks/herald", webhook.Middleware(webhook.HandlerConfig{
		Verifier:  &webhook.Verifier{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		Store:     redisstore.New(client, "myapp:webhooks:"),
		Namespace: "herald:",
	})(handler))
	// http.ListenAndServe(":8080", nil)
}
