package postgres

import (
	"errors"
	"net/url"
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
	// The database answered: the refusal is not an outage.
	if errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), "unavailable") {
		t.Errorf("message %q calls a newer schema an unavailable store", err)
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

// TestSchemaStatusWithoutSchema: a search_path naming no existing schema is
// an error for SchemaStatus, as it is for Open (it reported version 0 and
// every migration pending, which serve would not apply: it refuses).
func TestSchemaStatusWithoutSchema(t *testing.T) {
	t.Parallel()
	u := scratchURL(t, url.Values{"search_path": {scratchName()}}) // never created
	_, err := Open(t.Context(), u.String())
	if err == nil || !strings.Contains(err.Error(), "no schema of the search_path exists") {
		t.Fatalf("Open: %v, want the missing schema named", err)
	}
	if st, err := SchemaStatus(t.Context(), u.String()); err == nil || !strings.Contains(err.Error(), "no schema of the search_path exists") {
		t.Fatalf("SchemaStatus: %+v, %v; want the missing schema named", st, err)
	}
}

// TestMissingSchemaIsAConfigurationError: Open (what serve runs) on a
// search_path naming no existing schema says what migrate status says,
// naming the search_path and to create the schema or fix search_path, and
// it is not an unavailable store: the database answered. It said "store
// unavailable: no schema of the search_path exists", which read as an
// outage to wait out.
func TestMissingSchemaIsAConfigurationError(t *testing.T) {
	t.Parallel()
	name := scratchName()
	u := scratchURL(t, url.Values{"search_path": {name}}) // never created
	_, err := Open(t.Context(), u.String())
	if err == nil || errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("Open: %v; want a configuration error, not an unavailable store", err)
	}
	_, serr := SchemaStatus(t.Context(), u.String())
	for _, e := range []error{err, serr} {
		for _, want := range []string{"no schema of the search_path exists", name, "CREATE SCHEMA", "fix search_path"} {
			if e == nil || !strings.Contains(e.Error(), want) {
				t.Errorf("%v: want it to say %q", e, want)
			}
		}
	}
}
