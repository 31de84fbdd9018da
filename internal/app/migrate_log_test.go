package app_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A node that migrates a PostgreSQL database says so, with the versions,
// before it starts and how long it took after: its start may wait for a
// migration (behind a long transaction, for up to 5 minutes), and "watch
// its logs" (docs/production.md, "Upgrades") showed nothing until it
// served. A node starting on a migrated database says nothing of it.
func TestPostgresMigrationIsLogged(t *testing.T) {
	db := pgDatabase(t)
	key := newKey(t)
	start := func() string {
		var logs syncBuffer
		m, err := app.New(t.Context(), app.Config{Addr: "127.0.0.1:0", DB: db, EncryptionKey: key, APIKey: testAPIKey,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		return logs.String()
	}
	first := start()
	if !strings.Contains(first, `msg="migrating the database`) || !strings.Contains(first, "pending=") || !strings.Contains(first, `msg="database migrated"`) {
		t.Errorf("a start on an empty database logged no migration:\n%s", first)
	}
	if again := start(); strings.Contains(again, "migrat") {
		t.Errorf("a start on a migrated database logged a migration:\n%s", again)
	}
}
