package postgres

import (
	"strings"
	"testing"
)

// TestCatalogReadsUseIndexes: the catalog reads of a publish — the check
// in its transaction (catalogCheckSQL in a group commit, catalogRevisionSQL
// in PublishTx) and the API's case-variant lookup on a cache miss
// (caseVariantSQL) — find names by the folded name on
// event_types_lower_name (catalogRevisionSQL first by the primary key), for a catalogued name and for one that is
// not, with custom and generic plans: never a scan of event_types, whose
// cost grows with the catalog (5.6 ms per publish at 20,000 types).
func TestCatalogReadsUseIndexes(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	openStore(t, dbURL)
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	if _, err := conn.Exec(ctx, `INSERT INTO event_types (name, versions, revision, created_at, updated_at)
		SELECT 'type' || i || '.updated', '[]', 1, now(), now() FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE event_types"); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"check":    "PREPARE q_check (text[]) AS " + catalogCheckSQL,
		"revision": "PREPARE q_revision (text) AS SELECT " + catalogRevisionSQL,
		"variant":  "PREPARE q_variant (text) AS " + caseVariantSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("PREPARE %s: %v", name, err)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"type7.updated", "Type7.Updated", "zz.unknown"} {
			for what, q := range map[string]string{
				"catalogCheckSQL":    "EXECUTE q_check ('{" + strings.ToLower(name) + "}')",
				"catalogRevisionSQL": "EXECUTE q_revision ('" + name + "')",
				"caseVariantSQL":     "EXECUTE q_variant ('" + name + "')",
			} {
				plan := explainAnalyze(t, conn, q)
				if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index Cond: (lower(name)") {
					t.Errorf("%s for %s, %s: scans event_types, or not on the folded name's index:\n%s", what, name, mode, plan)
				}
			}
		}
	}
}
