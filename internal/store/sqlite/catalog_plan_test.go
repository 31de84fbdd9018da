package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// TestCatalogReadsUseIndexes: a publish's catalog check in its
// transaction (catalogRevisionSQL) and the API's case-variant lookup on a
// cache miss (caseVariantSQL) find a name differing only in case on the
// index event_types_name_nocase, never by a scan of event_types, whose
// cost grows with the catalog.
func TestCatalogReadsUseIndexes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	db := rawDB(t, path)
	if _, err := db.ExecContext(t.Context(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		INSERT INTO event_types (name, versions, revision, created_at, updated_at) SELECT 'type' || i || '.updated', '[]', 1, 0, 0 FROM n`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	for what, q := range map[string]string{"catalogRevisionSQL": sqlite.CatalogRevisionSQL, "caseVariantSQL": sqlite.CaseVariantSQL} {
		plan := queryPlan(t, db, q, "Type7.Updated")
		if strings.Contains(plan, "SCAN event_types") || !strings.Contains(plan, "event_types_name_nocase") {
			t.Errorf("%s scans event_types, or not on event_types_name_nocase:\n%s", what, plan)
		}
	}
}
