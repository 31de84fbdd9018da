package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
	"github.com/herald-webhooks/herald/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

// createEndpointOf creates an enabled endpoint of tenant in s (one
// secret, created at base) and returns it.
func createEndpointOf(t *testing.T, s *sqlite.Store, tenant string) store.Endpoint {
	t.Helper()
	ep := store.Endpoint{
		ID: store.NewID("ep"), Tenant: tenant, URL: "https://example.com/h", State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: base}}, CreatedAt: base, UpdatedAt: base,
	}
	if _, err := s.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return ep
}

// publishAt publishes an event of tenant (type t, body {}) at now: a
// delivery for each of the tenant's endpoints.
func publishAt(t *testing.T, s *sqlite.Store, tenant string, now time.Time) {
	t.Helper()
	id := store.NewID("evt")
	if _, err := s.PublishEvent(t.Context(), store.PublishParams{
		Event:         store.Event{ID: id, Tenant: tenant, Type: "t", OccurredAt: base, Body: []byte("{}"), Fingerprint: id},
		Now:           now,
		NewDeliveryID: func() string { return store.NewID("dlv") },
	}); err != nil {
		t.Fatalf("PublishEvent: %v", err)
	}
}

// TestConformance runs the suite on stores opened as Herald opens them:
// with a secret box (secrets and header values sealed at rest).
func TestConformance(t *testing.T) {
	box := testBox(t)
	storetest.Exercise(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "herald.db")
		s, err := sqlite.Open(t.Context(), path, sqlite.WithSecretBox(box))
		if err != nil {
			t.Fatalf("Open(%s): %v", path, err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	})
}

func TestRestart(t *testing.T) {
	storetest.Restart(t, func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
		path := filepath.Join(t.TempDir(), "herald.db")
		open := func(t *testing.T) store.Store {
			s := openStore(t, path)
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(t), open
	})
}

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// rawDB opens a second, independent handle on the database file.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func gooseVersions(t *testing.T, db *sql.DB) (rows int, max int64) {
	t.Helper()
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*), COALESCE(MAX(version_id), 0) FROM goose_db_version").Scan(&rows, &max); err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	return rows, max
}

func TestReopenKeepsDataAndMigrationsAreIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "dir with space %20", "herald.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at the given path: %v", err)
	}
	ep := store.Endpoint{
		ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h", State: store.EndpointEnabled,
		Secrets:   []store.Secret{{Value: "whsec_x", CreatedAt: base}},
		CreatedAt: base, UpdatedAt: base,
	}
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	evID := store.NewID("evt")
	res, err := s.PublishEvent(ctx, store.PublishParams{
		Event:         store.Event{ID: evID, Tenant: "acme", Type: "file.created", OccurredAt: base, Body: []byte(`{"id":"x"}`), Fingerprint: store.Fingerprint("acme", "file.created", []byte(`{}`))},
		Now:           base,
		NewDeliveryID: func() string { return store.NewID("dlv") },
	})
	if err != nil || res.Deliveries != 1 {
		t.Fatalf("PublishEvent = %+v, %v", res, err)
	}
	if _, err := s.CreateAPIKey(ctx, store.APIKey{ID: "key_x", Kind: store.KeyKindAPIKey, Role: store.RoleAdmin, Hash: []byte("hash"), CreatedAt: base}); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db := rawDB(t, path)
	rows1, v1 := gooseVersions(t, db)
	if v1 == 0 {
		t.Fatalf("no migration recorded after the first Open")
	}

	for i := range 2 {
		s = openStore(t, path)
		if _, err := s.GetEndpoint(ctx, ep.ID); err != nil {
			t.Errorf("reopen %d: GetEndpoint: %v", i+1, err)
		}
		if _, err := s.GetEvent(ctx, evID); err != nil {
			t.Errorf("reopen %d: GetEvent: %v", i+1, err)
		}
		// Leases live in the process (leases.go): the claim of the first
		// reopen, never completed, is due again after the second.
		if cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Now: base}); err != nil || len(cs) != 1 {
			t.Errorf("reopen %d: ClaimDeliveries = %d claims, %v; want 1", i+1, len(cs), err)
		}
		if n, err := s.CountAPIKeys(ctx); err != nil || n != 1 {
			t.Errorf("reopen %d: CountAPIKeys = %d, %v", i+1, n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		rows, v := gooseVersions(t, db)
		if rows != rows1 || v != v1 {
			t.Errorf("reopen %d: goose_db_version has %d rows (max %d), want %d (max %d): migrations ran again", i+1, rows, v, rows1, v1)
		}
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct{ path, want string }{
		{"", "empty"},
		{filepath.Join(dir, "herald.db?mode=ro"), "must not contain"},
		{filepath.Join(dir, "herald.db?_pragma=foreign_keys(0)"), "must not contain"},
		{filepath.Join(dir, "herald#1.db"), "must not contain"},
	}
	for _, c := range cases {
		s, err := sqlite.Open(t.Context(), c.path)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", c.path)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sqlite") {
			t.Errorf("Open(%q) error %q, want it to mention sqlite and %q", c.path, err, c.want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("rejected paths created files: %v", entries)
	}
}

func TestOpenUnwritableDirectoryFails(t *testing.T) {
	t.Parallel()
	_, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "missing", "dir", "herald.db"))
	if err == nil {
		t.Fatal("Open in a directory that does not exist succeeded")
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "herald.db"))
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: base})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ClaimDeliveries(canceled) = %v, want context.Canceled", err)
	}
}

// A statement that fails to prepare inside a transaction (here the claim's
// tenant probe, which names an index another process dropped) is an error
// of the call, never a nil statement that panics on use.
func TestFailedPrepareIsAnError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	if _, err := rawDB(t, path).ExecContext(t.Context(), "DROP INDEX deliveries_due_tenant"); err != nil {
		t.Fatal(err)
	}
	// A write on the store's writer connection loads the changed schema,
	// so the next prepare fails (rather than the first execution).
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: base})
	if err == nil || !strings.Contains(err.Error(), "deliveries_due_tenant") {
		t.Errorf("ClaimDeliveries without its index = %v, want the prepare error naming the index", err)

	}
}

// The claim and NextDueAt queries come from queue.go: this test proves the
// queue stays on the partial index deliveries_due, so its cost does not
// grow with succeeded, dead or leased rows.
var (
	claimQuery       = sqlite.ClaimQuery
	claimTenantQuery = sqlite.ClaimTenantQuery
	tenantDueQuery   = sqlite.TenantDueQuery
	nextTenantQuery  = sqlite.NextTenantQuery
	nextDueQuery     = sqlite.NextDueQuery
)

func queryPlan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var (
			id, parent, notused int
			detail              string
		)
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatalf("scan plan: %v", err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("plan rows: %v", err)
	}
	return strings.Join(lines, "\n")
}

func TestClaimUsesDueIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()

	// Some rows in every state, so the planner has something to choose from.
	createEndpointOf(t, s, "acme")
	for i := range 30 {
		publishAt(t, s, "acme", base.Add(time.Duration(i)*time.Second))
	}
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 20, Lease: time.Minute, Now: base.Add(time.Hour)})
	if err != nil {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	var done []store.Completion
	for i, c := range cs[:10] {
		st := store.DeliverySucceeded
		if i%2 == 0 {
			st = store.DeliveryDead
		}
		done = append(done, store.Completion{DeliveryID: c.Delivery.ID, Owner: "w", LeaseUntil: c.Delivery.LeaseUntil, State: st, Now: base.Add(time.Hour)})
	}
	if err := s.CompleteDeliveries(ctx, done); err != nil {
		t.Fatalf("CompleteDeliveries: %v", err)
	}

	db := rawDB(t, path)
	now := base.Add(time.Hour).UnixMicro()
	skipEP := sqlite.SkippingEndpoints // the variants of a claim that skips endpoints
	if len(skipEP) != 4 {
		t.Fatalf("%d claim queries have a variant that skips endpoints, want 4", len(skipEP))
	}
	for name, q := range map[string]struct {
		query string
		args  []any
	}{
		"claim":            {claimQuery, []any{now}},
		"claim tenant":     {claimTenantQuery, []any{"acme", now}},
		"claim tenant due": {sqlite.ClaimTenantDueQuery, []any{"acme", now}},
		"claim skip":       {sqlite.ClaimSkipQuery, []any{now}},
		// The same, skipping endpoints (ClaimParams.SkipEndpoints): the
		// same index, in order; each row's endpoint is read from the table.
		"claim skipping endpoints":            {skipEP[claimQuery], []any{now, `["ep_x"]`}},
		"claim tenant skipping endpoints":     {skipEP[claimTenantQuery], []any{"acme", now, `["ep_x"]`}},
		"claim tenant due skipping endpoints": {skipEP[sqlite.ClaimTenantDueQuery], []any{"acme", now, `["ep_x"]`}},
		"claim skip skipping endpoints":       {skipEP[sqlite.ClaimSkipQuery], []any{now, `["ep_x"]`}},
		"tenant due":                          {tenantDueQuery, []any{"acme"}},
		"next tenant":                         {nextTenantQuery, []any{""}},
		"next due":                            {nextDueQuery, nil},
		// A pull-in reads its window, not the endpoint's whole backlog
		// (deliveries_endpoint: 85–117 ms of the writer for an empty window
		// on a backlog of 100,000 to one endpoint).
		"move with a limit": {sqlite.MoveLimitQuery, []any{now, "ep", now, now + 1e6, "[]", true, 1024, 500, 16384}},
	} {
		plan := queryPlan(t, db, q.query, q.args...)
		t.Logf("%s plan:\n%s", name, plan)
		if !strings.Contains(plan, "deliveries_due") {
			t.Errorf("%s query does not use the index deliveries_due; plan:\n%s", name, plan)
		}
		if strings.Contains(plan, "SCAN deliveries") && !strings.Contains(plan, "SCAN deliveries USING") {
			t.Errorf("%s query scans the whole deliveries table; plan:\n%s", name, plan)
		}
		if strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s query sorts in a temporary b-tree instead of reading the index in order; plan:\n%s", name, plan)
		}
	}
}

// A claim and a next-due read that skip a tenant (ClaimParams.SkipTenants)
// read as many index rows whether its backlog, the oldest due, is 20 or
// 2,000 deliveries: none of its rows is stepped over one by one.
func TestSkippedBacklogCostsNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	steps := func(backlog int) (claim, next int64) {
		s := openStore(t, filepath.Join(t.TempDir(), "herald.db"))
		defer s.Close()
		for _, tenant := range []string{"a", "b"} {
			createEndpointOf(t, s, tenant)
		}
		publish := func(tenant string, now time.Time) { publishAt(t, s, tenant, now) }
		for i := range backlog {
			publish("a", base.Add(time.Duration(i)*time.Millisecond))
		}
		now := base.Add(time.Hour)
		for range 3 {
			publish("b", now)
		}
		before := sqlite.ClaimSteps(s)
		cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 8, Lease: time.Minute, Now: now, SkipTenants: []string{"a"}})
		if err != nil {
			t.Fatalf("ClaimDeliveries: %v", err)
		}
		for _, c := range cs {
			if c.Delivery.Tenant != "b" {
				t.Fatalf("a claim skipping a took %s of tenant %s", c.Delivery.ID, c.Delivery.Tenant)
			}
		}
		if len(cs) != 3 {
			t.Fatalf("a claim of 8 skipping a took %d, want b's 3", len(cs))
		}
		claim = sqlite.ClaimSteps(s) - before
		publish("b", now.Add(time.Minute))
		before = sqlite.ClaimSteps(s)
		due, err := s.NextDueAt(ctx, []string{"a"})
		if err != nil || !due.Equal(now.Add(time.Minute)) {
			t.Fatalf("NextDueAt(skip a) = %v, %v; want b's %v", due, err, now.Add(time.Minute))
		}
		return claim, sqlite.ClaimSteps(s) - before
	}
	smallClaim, smallNext := steps(20)
	bigClaim, bigNext := steps(2000)
	t.Logf("rows read: claim %d and %d, next due %d and %d (backlog 20 and 2,000)", smallClaim, bigClaim, smallNext, bigNext)
	if bigClaim != smallClaim || bigNext != smallNext {
		t.Fatalf("rows read grow with the skipped backlog: claim %d → %d, next due %d → %d", smallClaim, bigClaim, smallNext, bigNext)
	}
}

// The bulk completion statements look each delivery up by its id: their
// cost follows the batch, not the table.
func TestCompleteValuesUsePrimaryKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	db := rawDB(t, path)
	for _, n := range []int{1, 4} {
		attempt := make([]any, 0, 9*n)
		complete := make([]any, 0, 8*n)
		for i := range n {
			id := fmt.Sprintf("dlv_%d", i)
			attempt = append(attempt, id, 1, 1, 1, 200, "", "", "", "")
			complete = append(complete, id, "w", "succeeded", 0, 1, 200, "", 1)
		}
		for name, q := range map[string]struct {
			query string
			args  []any
		}{
			"attempts": {sqlite.InsertAttemptsValuesSQL(n), attempt},
			"complete": {sqlite.CompleteValuesSQL(n), complete},
		} {
			plan := queryPlan(t, db, q.query, q.args...)
			t.Logf("%s (%d rows) plan:\n%s", name, n, plan)
			for _, table := range []string{"deliveries", "attempts", "endpoints"} {
				if strings.Contains(plan, "SCAN "+table) {
					t.Errorf("%s (%d rows) scans %s; plan:\n%s", name, n, table, plan)
				}
			}
		}
	}
}

// The queries that filter deliveries by state read that state's partial
// index (migration 00090), not every delivery: retention, the dead-letter
// counts, and the lists filtered by state without an endpoint or event
// (whose own indexes serve them in id order), the store gauges' counts by
// state. A plan that walks the table or an index of every delivery fails.
func TestStateQueriesUsePartialIndexes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	db := rawDB(t, path)
	list := func(p store.ListDeliveriesParams) (string, []any) {
		q, args, _ := sqlite.ListDeliveriesQuery(p)
		return q, args
	}
	since := time.Unix(1, 0)
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"retention of succeeded", "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE state = 'succeeded' AND updated_at < ? LIMIT ?)", []any{1, 10}, "deliveries_succeeded"},
		{"retention of dead", "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE state = 'dead' AND updated_at < ? LIMIT ?)", []any{1, 10}, "deliveries_dead"},
		{"dead-letter counts", "SELECT endpoint_id, tenant, COUNT(*) FROM deliveries INDEXED BY deliveries_dead WHERE state = 'dead' AND updated_at >= ? GROUP BY endpoint_id, tenant", []any{1}, "deliveries_dead"},
		{"counts by state (store gauges)", sqlite.DeliveryStateCountsSQL, nil, "deliveries_succeeded"},
	} {
		if plan := queryPlan(t, db, c.query, c.args...); !strings.Contains(plan, "USING INDEX "+c.want) && !strings.Contains(plan, "USING COVERING INDEX "+c.want) {
			t.Errorf("%s: plan does not use %s:\n%s", c.name, c.want, plan)
		}
	}
	for _, c := range []struct {
		p    store.ListDeliveriesParams
		want string
	}{
		{store.ListDeliveriesParams{State: store.DeliveryDead}, "deliveries_dead"},
		{store.ListDeliveriesParams{State: store.DeliveryDead, Tenant: "t", Since: since}, "deliveries_dead"},
		{store.ListDeliveriesParams{State: store.DeliveryPaused}, "deliveries_paused"},
		{store.ListDeliveriesParams{State: store.DeliveryPending, Tenant: "t"}, "deliveries_due"},
		{store.ListDeliveriesParams{State: store.DeliveryDead, EndpointID: "ep"}, "deliveries_endpoint"},
		{store.ListDeliveriesParams{State: store.DeliveryPending, EndpointID: "ep"}, "deliveries_endpoint"},
	} {
		q, args := list(c.p)
		plan := queryPlan(t, db, q, args...)
		if !strings.Contains(plan, c.want) {
			t.Errorf("list %+v: plan does not use %s:\n%s", c.p, c.want, plan)
		}
		// A partial index holds only its state's rows: walking it is the
		// point. Any other walk is of every delivery.
		if strings.Contains(strings.ReplaceAll(plan, "SCAN deliveries USING INDEX "+c.want, ""), "SCAN deliveries") {
			t.Errorf("list %+v walks the table or a whole index:\n%s", c.p, plan)
		}
	}
}

// Several stores may be opened at once in one process (the conformance suite
// does, and so may a program with more than one database).
func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			s, err := sqlite.Open(t.Context(), filepath.Join(dir, fmt.Sprintf("herald-%d.db", i)))
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// Deleting an endpoint leaves no orphaned attempt rows behind (the attempts
// table cascades from deliveries; that needs foreign_keys on the writer).
func TestDeleteEndpointLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	ep := createEndpointOf(t, s, "acme")
	publishAt(t, s, "acme", base)
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: base})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDeliveries = %d, %v", len(cs), err)
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: cs[0].Delivery.ID, Owner: "w", LeaseUntil: cs[0].Delivery.LeaseUntil, State: store.DeliveryPending, NextAttemptAt: base.Add(time.Minute), Now: base}}); err != nil {
		t.Fatalf("CompleteDeliveries: %v", err)
	}
	if err := s.DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: ep.ID}); err != nil {
		t.Fatalf("DeleteEndpoint: %v", err)
	}
	var attempts, deliveries, events int
	if err := rawDB(t, path).QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM attempts), (SELECT COUNT(*) FROM deliveries), (SELECT COUNT(*) FROM events)").Scan(&attempts, &deliveries, &events); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || deliveries != 0 || events != 1 {
		t.Errorf("after DeleteEndpoint: %d attempts, %d deliveries, %d events; want 0, 0, 1", attempts, deliveries, events)
	}
}

// TestCapabilities: one process owns a SQLite database, so the driver
// declares no wake-ups, membership or node list, one claimer, the one
// claiming process, the sealing of clear header values, rekey, the
// hand-off, the count of endpoint changes and the renewal of leases.
func TestCapabilities(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "herald.db"))
	defer s.Close()
	c := s.Capabilities()
	if c.EndpointChanges == nil {
		t.Fatal("Capabilities().EndpointChanges is nil; want the store's count (one process writes a SQLite database)")
	}
	if c.Wakeups != nil || c.Membership != nil || c.Nodes != nil || c.AdminLock != nil || c.Claimers != 1 ||
		c.Exclusive != s || c.HeaderSealer != s || c.Sealed != s || c.HandOff != s || c.Renewer != s {
		t.Errorf("Capabilities() = %+v, want Claimers 1, Exclusive (one process claims), HeaderSealer, Sealed, HandOff, EndpointChanges and Renewer", c)
	}
}

// Leases live in the claiming process's memory, so a second store on the
// same file must not claim while the first can: it would deliver the
// first's deliveries again. The lock is taken at the first claim and
// released by Close.
func TestOneProcessClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	first := openStore(t, path)
	defer first.Close()
	createEndpointOf(t, first, "acme")
	for range 2 {
		publishAt(t, first, "acme", base)
	}
	claim := func(s *sqlite.Store, owner string) ([]store.Claim, error) {
		return s.ClaimDeliveries(ctx, store.ClaimParams{Owner: owner, Limit: 1, Lease: time.Minute, Now: base})
	}
	if cs, err := claim(first, "first"); err != nil || len(cs) != 1 {
		t.Fatalf("first store's claim = %d claims, %v; want 1", len(cs), err)
	}

	// A second store opens and reads (backup, rekey beside a server) but
	// does not claim.
	second := openStore(t, path)
	defer second.Close()
	if _, err := second.NextDueAt(ctx, nil); err != nil {
		t.Errorf("second store's NextDueAt: %v", err)
	}
	cs, err := claim(second, "second")
	if !errors.Is(err, sqlite.ErrClaimLocked) || !errors.Is(err, store.ErrUnavailable) || len(cs) != 0 {
		t.Fatalf("second store's claim = %d claims, %v; want ErrClaimLocked (unavailable)", len(cs), err)
	}
	// Another spelling of the same file — a symbolic link — is the same
	// database and takes the same lock.
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	viaLink := openStore(t, link)
	defer viaLink.Close()
	if cs, err := claim(viaLink, "link"); !errors.Is(err, sqlite.ErrClaimLocked) || len(cs) != 0 {
		t.Fatalf("claim through a symbolic link to the database = %d claims, %v; want ErrClaimLocked", len(cs), err)
	}

	// Once the first is closed (or its process gone), the second claims,
	// and the first's claim not completed is due again.
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cs, err = second.ClaimDeliveries(ctx, store.ClaimParams{Owner: "second", Limit: 10, Lease: time.Minute, Now: base})
	if err != nil || len(cs) != 2 {
		t.Fatalf("second store's claim after the first closed = %d claims, %v; want 2", len(cs), err)
	}
}

// TestClaimLockDeletedStopsClaiming: with the claim lock's file deleted
// under a claiming store, a second process could lock a new file and claim
// the same deliveries; the first stops claiming and fails readiness,
// naming the cause, while a second store may claim.
func TestClaimLockDeletedStopsClaiming(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	first := openStore(t, path)
	defer first.Close()
	createEndpointOf(t, first, "acme")
	for range 3 {
		publishAt(t, first, "acme", base)
	}
	claim := func(s *sqlite.Store, owner string) ([]store.Claim, error) {
		return s.ClaimDeliveries(ctx, store.ClaimParams{Owner: owner, Limit: 1, Lease: time.Minute, Now: base})
	}
	if cs, err := claim(first, "first"); err != nil || len(cs) != 1 {
		t.Fatalf("first store's claim = %d claims, %v; want 1", len(cs), err)
	}
	if err := first.Ping(ctx); err != nil {
		t.Fatalf("Ping while the lock is held: %v", err)
	}
	if err := os.Remove(path + "-claims.lock"); err != nil {
		t.Fatal(err)
	}
	cs, err := claim(first, "first")
	if !errors.Is(err, sqlite.ErrClaimLockLost) || !errors.Is(err, store.ErrUnavailable) || len(cs) != 0 {
		t.Fatalf("claim after the lock file was deleted = %d claims, %v; want ErrClaimLockLost (unavailable)", len(cs), err)
	}
	if err := first.Ping(ctx); !errors.Is(err, sqlite.ErrClaimLockLost) {
		t.Errorf("Ping after the lock file was deleted: %v; want ErrClaimLockLost", err)
	}
	second := openStore(t, path)
	defer second.Close()
	if cs, err := claim(second, "second"); err != nil || len(cs) != 1 {
		t.Fatalf("second store's claim once the first stopped = %d claims, %v; want 1", len(cs), err)
	}
	if cs, err := claim(first, "first"); !errors.Is(err, sqlite.ErrClaimLockLost) || len(cs) != 0 {
		t.Fatalf("first store's claim beside the second = %d claims, %v; want ErrClaimLockLost", len(cs), err)
	}
}

// TestHotPathPreparesNothing: claims and completions — successes,
// retries, dead letters, deferrals, in bulk and one by one — and publishes
// run only statements prepared once at Open (hotStatements): modernc's
// driver parses SQL on every prepare, which cost 13 % of a light load's CPU
// when the stats rollup's upsert was prepared per completion batch.
func TestHotPathPreparesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "herald.db"))
	defer s.Close()
	for _, id := range []string{"ep_a", "ep_b"} {
		if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: id, Tenant: "t", URL: "https://example.com/",
			State: store.EndpointEnabled, CreatedAt: base, UpdatedAt: base}}); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(n int) {
		for i := range n {
			id, notCatalogued := store.NewID("evt"), 0
			if _, err := s.PublishEvent(ctx, store.PublishParams{Event: store.Event{ID: id, Tenant: "t", Type: "a.b", OccurredAt: base, Body: []byte(`{}`), Fingerprint: id},
				Now: base.Add(time.Duration(i) * time.Millisecond), NewDeliveryID: func() string { return store.NewID("dlv") }, CatalogRevision: &notCatalogued}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1) // the first publish of a tenant reads what later ones find in the group's copy
	before := sqlite.TxPrepares(s)
	publish(20)
	now := base.Add(time.Minute)
	for round := range 3 {
		claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node", Limit: 16, Lease: time.Minute, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) == 0 {
			t.Fatalf("round %d: nothing claimed", round)
		}
		var cs []store.Completion
		for i, c := range claims {
			done := store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node", LeaseUntil: c.Delivery.LeaseUntil, Now: now,
				Attempt: store.Attempt{Number: c.Delivery.Attempts + 1, StartedAt: now, Duration: time.Millisecond, StatusCode: 200}}
			switch i % 4 {
			case 0:
				done.State = store.DeliverySucceeded
			case 1:
				done.State, done.NextAttemptAt = store.DeliveryPending, now
				done.Attempt.StatusCode, done.Attempt.Error = 503, "http_status"
			case 2:
				done.State = store.DeliveryDead
				done.Attempt.StatusCode, done.Attempt.Error = 400, "http_status"
			case 3:
				done = store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "node", LeaseUntil: c.Delivery.LeaseUntil, Deferred: true, NextAttemptAt: now, Now: now}
			}
			cs = append(cs, done)
		}
		if round == 2 {
			// A batch naming a delivery twice takes the one-by-one path.
			cs = append(cs, cs[0])
		}
		if err := s.CompleteDeliveries(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	if n := sqlite.TxPrepares(s) - before; n != 0 {
		t.Errorf("%d statements prepared for a single transaction on the publish, claim and completion paths, want 0 (add them to hotStatements)", n)
	}
}

// The query that picks the next unfinished fan-out reads the fanouts table
// and looks each event up by primary key: it never scans events (with a
// join, the planner scanned every event once per chunk).
func TestNextFanOutQueryReadsFanOutsOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openStore(t, path)
	defer s.Close()
	for i := range 50 {
		id := store.NewID("evt")
		if _, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: base, Body: []byte("{}"), Fingerprint: id},
			Now:   base.Add(time.Duration(i) * time.Second), NewDeliveryID: func() string { return store.NewID("dlv") },
		}); err != nil {
			t.Fatalf("PublishEvent: %v", err)
		}
	}
	plan := queryPlan(t, rawDB(t, path), sqlite.NextFanOutQuery, "")
	t.Logf("plan:\n%s", plan)
	if !strings.Contains(plan, "SCAN f") || strings.Contains(plan, "SCAN e") {
		t.Errorf("the next fan-out query does not read fanouts first, or scans events; plan:\n%s", plan)
	}
	if !strings.Contains(plan, "SEARCH e USING") {
		t.Errorf("the event is not looked up by key; plan:\n%s", plan)
	}
}

// TestPoisoned runs storetest.Poisoned: a claim that meets a delivery
// whose event row does not decode dead-letters it and returns the others.
// SQLite's TEXT columns also take text that is not JSON at all.
func TestPoisoned(t *testing.T) {
	box := testBox(t)
	storetest.Poisoned(t, func(t *testing.T) (store.Store, storetest.Corrupt) {
		path := filepath.Join(t.TempDir(), "herald.db")
		s, err := sqlite.Open(t.Context(), path, sqlite.WithSecretBox(box))
		if err != nil {
			t.Fatalf("Open(%s): %v", path, err)
		}
		t.Cleanup(func() { s.Close() })
		return s, func(t *testing.T, table, column, id, value string) {
			t.Helper()
			corruptRow(t, rawDB(t, path), table, column, id, value)
		}
	}, storetest.PoisonedValue{Column: "headers", Value: `{not json`})
}

// corruptRow sets column of row id of table to value, as a damaged
// database or a hand edit would.
func corruptRow(t *testing.T, db *sql.DB, table, column, id, value string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), fmt.Sprintf("UPDATE %s SET %s = ? WHERE id = ?", table, column), value, id); err != nil {
		t.Fatalf("set %s.%s of %s: %v", table, column, id, err)
	}
}

// TestPoisonedDeliveryRow: a delivery whose own row does not decode (an
// INTEGER column holding text, which SQLite's typing lets a hand edit
// write) is dead-lettered by the claim that meets it, with a last_error
// naming it, and no delivery.dead_lettered (the notice would copy the
// damaged row); the claim returns the others.
func TestPoisonedDeliveryRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _, path := handOffStore(t) // two enabled endpoints of acme, one paused
	publishAcme(t, s)
	publishAcme(t, s)
	page, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{Tenant: "acme", State: store.DeliveryPending, ListParams: store.ListParams{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string // in id order, as due together they are claimed
	for _, d := range page.Data {
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	if len(ids) != 4 {
		t.Fatalf("%d pending deliveries, want 4", len(ids))
	}
	db := rawDB(t, path)
	bad := ids[1]
	corruptRow(t, db, "deliveries", "attempts", bad, "two")
	var met []store.PoisonedDelivery
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, Now: base.Add(time.Minute),
		Poisoned: func(pd store.PoisonedDelivery) { met = append(met, pd) }})
	if err != nil {
		t.Fatalf("ClaimDeliveries with delivery %s's row damaged: %v; want the others", bad, err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Delivery.ID)
	}
	want := []string{ids[0], ids[2], ids[3]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("claimed %v, want %v", got, want)
	}
	prefix := "stored delivery " + bad + " could not be read: "
	if len(met) != 1 || met[0].ID != bad || !met[0].OwnRow || !strings.HasPrefix(met[0].Err.Error(), prefix) {
		t.Fatalf("reported %+v; want %s, its own row, %q…", met, bad, prefix)
	}
	var state, lastError string
	if err := db.QueryRowContext(ctx, "SELECT state, last_error FROM deliveries WHERE id = ?", bad).Scan(&state, &lastError); err != nil {
		t.Fatal(err)
	}
	if state != "dead" || !strings.HasPrefix(lastError, prefix) || !strings.Contains(lastError, `"attempts"`) {
		t.Errorf("delivery %s: state %s, last_error %q; want dead, %q… naming the column", bad, state, lastError, prefix)
	}
	ns, err := s.PendingNotices(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Type == store.NoticeDeliveryDeadLettered {
			t.Errorf("notice %+v for a delivery whose row does not decode", n)
		}
	}
}
