package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// A receiver: the middleware verifies the signature on the raw bytes,
// claims the event id and calls the handler once per event; a redelivery
// of the same event is answered 200 {"duplicate":true} without calling it,
// and a forged one 401.
func ExampleMiddleware() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // from the endpoint's "secret"

	handle := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var event struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.NewDecoder(r.Body).Decode(&event); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		fmt.Println("handling", event.ID, event.Type)
		io.WriteString(w, `{"received":true}`)
	})
	receiver := webhook.Middleware(webhook.HandlerConfig{
		Verifier: &webhook.Verifier{Secrets: []string{secret}},
		Store:    webhook.NewMemoryStore(), // sqlstore or redisstore with several processes
		OnError: func(r *http.Request, err error) {
			fmt.Println("rejected:", err) // the client only sees 401 {"error":"invalid signature"}
		},
	})(handle)
	srv := httptest.NewServer(receiver)
	defer srv.Close()

	// The sender side, as Herald does it: each attempt is signed anew.
	signer, _ := webhook.NewSigner(secret)
	deliver := func(attempt string, body []byte, id string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		signer.Sign(req.Header, id, time.Now(), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s: %d %s\n", attempt, resp.StatusCode, answer)
	}
	body := []byte(`{"id":"evt_1","type":"file.extraction.completed","data":{"file_id":"file_9","version":3}}`)
	deliver("attempt 1", body, "evt_1")
	deliver("attempt 2", body, "evt_1") // e.g. our 2xx was lost: redelivered

	forged := bytes.Replace(body, []byte("file_9"), []byte("file_6"), 1)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(forged))
	h := http.Header{}
	signer.Sign(h, "evt_1", time.Now(), body) // signed for the original body
	req.Header = h
	resp, _ := http.DefaultClient.Do(req)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("forged: %d %s\n", resp.StatusCode, answer)

	// Output:
	// handling evt_1 file.extraction.completed
	// attempt 1: 200 {"received":true}
	// attempt 2: 200 {"duplicate":true}
	// rejected: webhook: no matching signature: X-Signature
	// forged: 401 {"error":"invalid signature"}
}

// When the handler fails (any answer but 2xx, or a panic) the middleware releases
// the event id, so the sender's retry is handled again instead of being
// dropped as a duplicate.
func ExampleMiddleware_retry() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	failures := 1
	handle := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failures > 0 {
			failures--
			fmt.Println("handling", webhook.EventID(r), "failed")
			http.Error(w, `{"error":"database unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		fmt.Println("handling", webhook.EventID(r), "done")
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(webhook.Middleware(webhook.HandlerConfig{
		Verifier: &webhook.Verifier{Secrets: []string{secret}},
		Store:    webhook.NewMemoryStore(),
	})(handle))
	defer srv.Close()

	signer, _ := webhook.NewSigner(secret)
	body := []byte(`{"id":"evt_7","type":"file.deleted"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		signer.Sign(req.Header, "evt_7", time.Now(), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("attempt %d: %d\n", attempt, resp.StatusCode)
	}
	// Output:
	// handling evt_7 failed
	// attempt 1: 503
	// handling evt_7 done
	// attempt 2: 204
	// attempt 3: 200
}

// Events can arrive out of order. A receiver of thin events keeps, per
// resource, the newest version it acted on and ignores older ones.
func ExampleVersionGate() {
	gate := webhook.NewMemoryVersionGate() // sqlstore.NewVersionGate when several processes share the work
	ctx := context.Background()
	for _, v := range []int64{1, 3, 2, 3, 4} { // 2 arrives after 3; 3 twice
		fresh, err := gate.Check(ctx, "file_9", v)
		if err != nil {
			fmt.Println(err)
			return
		}
		if fresh {
			fmt.Printf("version %d: fetch file_9 and update\n", v)
		} else {
			fmt.Printf("version %d: stale, ignored\n", v)
		}
	}
	// Output:
	// version 1: fetch file_9 and update
	// version 3: fetch file_9 and update
	// version 2: stale, ignored
	// version 3: stale, ignored
	// version 4: fetch file_9 and update
}
