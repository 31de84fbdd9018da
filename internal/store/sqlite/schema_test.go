package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
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

// TestRefusesAnotherApplicationsDatabase: --db pointing at an existing
// SQLite database of another application (tables, but neither goose's
// version table nor Herald's meta table) is refused at Open, naming the
// file, and the file is left exactly as it was: Herald's tables are not
// migrated into it and its journal mode is not changed.
func TestRefusesAnotherApplicationsDatabase(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]string{
		"rollback journal": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('a')",
		// A table named meta is no sign of Herald (found by review: it
		// passed, and the migration failed halfway into the file), and a
		// WAL database's check creates no -wal or -shm file.
		"WAL, with a meta table": "PRAGMA journal_mode=WAL; CREATE TABLE meta (k TEXT); CREATE TABLE users (id INTEGER PRIMARY KEY); INSERT INTO users DEFAULT VALUES",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "app.db")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(setup); err != nil {
				t.Fatal(err)
			}
			db.Close() // the last connection: the WAL is merged and its files removed
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			st, err := sqlite.Open(t.Context(), path)
			if err == nil {
				st.Close()
				t.Fatal("Open adopted another application's database")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a Herald one") {
				t.Fatalf("Open: %v, want a refusal naming the file", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("the refused database file was changed")
			}
			for _, side := range []string{"-wal", "-shm"} {
				if _, err := os.Stat(path + side); !os.IsNotExist(err) {
					t.Errorf("a %s file was created beside the refused database: %v", side, err)
				}
			}
		})
	}
}
