package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKill9DuringChunkedFanOut publishes events to more endpoints than
// --fanout-chunk, so the engine creates their deliveries chunk by chunk;
// kills the real binary with SIGKILL while fan-outs are unfinished (checked
// in the database before the restart), restarts it on the same database,
// and checks that every event ends with exactly one delivery per endpoint,
// each succeeded, and that every endpoint received every event. On SQLite,
// and on PostgreSQL when HERALD_TEST_POSTGRES_URL is set (a fresh database).
func TestKill9DuringChunkedFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the herald binary")
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		bin := filepath.Join(dir, "herald")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		dbPath := filepath.Join(dir, "herald.db")
		fanOutCrash(t, bin, "sqlite:"+dbPath, nil, func(query string) int {
			db, err := sql.Open("sqlite", dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.QueryRow(query).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
	t.Run("postgres", func(t *testing.T) {
		e := newClusterEnv(t, nil) // skips without HERALD_TEST_POSTGRES_URL
		fanOutCrash(t, e.bin, e.dbURL, []string{"HERALD_ENCRYPTION_KEY=" + e.encKey}, func(query string) int {
			var n int
			if err := e.db().QueryRow(context.Background(), query).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
}

// fanOutCrash runs the test on one store: db is --db, env is added to the
// server's environment, count runs a COUNT query on the database while
// the server is down.
func fanOutCrash(t *testing.T, bin, db string, env []string, count func(query string) int) {
	var mu sync.Mutex
	seen := map[string]int{} // "endpoint path/event id" → requests
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen[r.URL.Path+"/"+r.Header.Get("X-Event-Id")]++
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)

	const key = "fanout-crash-admin-key-0123456789abcdef"
	start := func() (*exec.Cmd, string) {
		return serveProcess(t, bin, db, key, env, "--dev", "--workers", "16",
			"--fanout-chunk", "2", "--attempt-timeout", "1s", "--lease", "3s", "--rescue-interval", "200ms",
			"--retry-schedule", "100ms,100ms,100ms,100ms")
	}
	call := func(base, method, path, body string) []byte { return adminCall(t, key, base, method, path, body) }

	cmd, base := start()
	const endpoints, events = 300, 6
	for i := range endpoints {
		call(base, "POST", "/v1/endpoints", fmt.Sprintf(`{"tenant":"acme","url":"%s/ep%d"}`, recv.URL, i))
	}
	ids := make([]string, 0, events)
	for i := range events {
		var p struct {
			ID         string
			Deliveries int
		}
		json.Unmarshal(call(base, "POST", "/v1/events", fmt.Sprintf(`{"tenant":"acme","type":"file.created","data":{"n":%d}}`, i)), &p)
		if p.Deliveries != endpoints {
			t.Fatalf("publish %d answered %d deliveries, want %d (the matching endpoints)", i, p.Deliveries, endpoints)
		}
		ids = append(ids, p.ID)
	}
	// Kill once the engine has created some chunks (more arrived than the
	// publishes' own first chunks of 2).
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 2*events+20 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// The kill must have left fan-outs unfinished, or the test proves
	// nothing.
	unfinished := count("SELECT COUNT(*) FROM fanouts")
	created := count("SELECT COUNT(*) FROM deliveries")
	if unfinished == 0 || created >= endpoints*events {
		t.Fatalf("at the kill %d fan-outs were unfinished and %d of %d deliveries created; the test proves nothing", unfinished, created, endpoints*events)
	}
	t.Logf("at the kill: %d of %d fan-outs unfinished, %d of %d deliveries created", unfinished, events, created, endpoints*events)

	_, base = start()
	deadline := time.Now().Add(90 * time.Second)
	for {
		done := 0
		for _, id := range ids {
			var ds struct {
				Data []struct {
					EndpointID string `json:"endpoint_id"`
					State      string
				}
			}
			json.Unmarshal(call(base, "GET", "/v1/events/"+id+"/deliveries?limit=1000", ""), &ds)
			per := map[string]int{}
			succeeded := 0
			for _, d := range ds.Data {
				per[d.EndpointID]++
				if d.State == "succeeded" {
					succeeded++
				}
			}
			for ep, n := range per {
				if n != 1 {
					t.Fatalf("event %s has %d deliveries to endpoint %s, want exactly 1", id, n, ep)
				}
			}
			if len(ds.Data) > endpoints {
				t.Fatalf("event %s has %d deliveries, want %d", id, len(ds.Data), endpoints)
			}
			if len(per) == endpoints && succeeded == endpoints {
				done++
			}
		}
		if done == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events fully delivered after the restart", done, events)
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		for i := range endpoints {
			if seen[fmt.Sprintf("/ep%d/%s", i, id)] == 0 {
				t.Errorf("event %s never reached endpoint ep%d", id, i)
			}
		}
	}
}
