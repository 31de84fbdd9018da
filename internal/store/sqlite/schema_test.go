package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// TestRefusesNewerSchema: a database migrated by a newer binary (a version
// above this binary's last migration in goose's table) is refused at Open
// with store.ErrSchemaTooNew naming both versions; SchemaStatus reports
// them without migrating.
func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	status, err := sqlite.SchemaStatus(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if status.Database != status.Binary || len(status.Pending) != 0 {
		t.Fatalf("after Open: %+v, want database = binary, nothing pending", status)
	}
	known := status.Binary
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(ctx, path)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema: %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{"9999", "up to " + strconv.FormatInt(known, 10)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not name %q", err, want)
		}
	}
	status, err = sqlite.SchemaStatus(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if status.Database != 9999 || status.Binary != known {
		t.Fatalf("status %+v, want database 9999, binary %d", status, known)
	}
}
