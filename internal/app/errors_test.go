package app_test

import (
	"database/sql"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/testutil"
)

// TestStoredValueThatDoesNotDecodeIs500: a stored value the driver cannot
// decode is a bug, not an outage: the API and the inbound gateway answer
// 500 (not 503, which tells clients to retry) and log it as a bug.
func TestStoredValueThatDoesNotDecodeIs500(t *testing.T) {
	sqliteOnly(t)
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	logs := &testutil.SyncBuffer{}
	h := startHerald(t, func(c *app.Config) {
		c.DB = "sqlite:" + dbPath
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ep := h.createEndpoint("acme", "https://example.com/hook")
	src := h.createSource(map[string]any{"name": "gh", "scheme": "github", "secrets": []string{"s3cr3t-github-provider"}, "destination_url": "https://example.com/in"})

	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE endpoints SET event_types = 'not json' WHERE id = ?", ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE sources SET config = 'not json' WHERE id = ?", src.ID); err != nil {
		t.Fatal(err)
	}

	if st, raw := h.call("GET", "/v1/endpoints/"+ep.ID, nil, nil); st != http.StatusInternalServerError {
		t.Errorf("GET an endpoint whose event_types do not decode: %d %s, want 500", st, raw)
	}
	resp, err := http.Post(h.base+src.IngestPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("POST to a source whose config does not decode: %d, want 500", resp.StatusCode)
	}
	out := logs.String()
	if strings.Count(out, "bug: ") < 2 || !strings.Contains(out, "event_types") || !strings.Contains(out, "config") {
		t.Errorf("want both logged as bugs naming the value, got:\n%s", out)
	}
}
