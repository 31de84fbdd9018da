package postgres

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/store"
)

// TestRefusesNewerSchema: a database migrated by a newer binary (a version
// above this binary's last migration in goose's table) is refused at Open
// with store.ErrSchemaTooNew naming both versions, and nothing is changed;
// SchemaStatus reports both versions.
func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newSchema(t)
	st, err := Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	status, err := SchemaStatus(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if status.Database != status.Binary || len(status.Pending) != 0 {
		t.Fatalf("after Open: %+v, want database = binary, nothing pending", status)
	}
	known := status.Binary
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, dbURL)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema: %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{"9999", "up to " + itoa(known)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not name %q", err, want)
		}
	}
	status, err = SchemaStatus(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if status.Database != 9999 || status.Binary != known {
		t.Fatalf("status %+v, want database 9999, binary %d", status, known)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
