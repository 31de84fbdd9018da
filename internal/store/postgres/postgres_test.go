package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/storetest"
)

// The tests need a PostgreSQL server: HERALD_TEST_POSTGRES_URL is the URL of
// a database the test user may connect to and CREATE DATABASE from (CI sets
// it). Every test gets its own throwaway database, dropped at its end.
const urlEnv = "HERALD_TEST_POSTGRES_URL"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func baseURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv(urlEnv)
	if u == "" {
		t.Skip(urlEnv + " is not set; skipping PostgreSQL tests (CI sets it)")
	}
	return u
}

// newDatabase creates an empty database, drops it (with FORCE) when the
// test ends, and returns its URL with a small pool (tests run in parallel).
// Tests that need a database of their own use it (LISTEN/NOTIFY channels
// and advisory locks are per database); the others use newSchema, which is
// much faster.
func newDatabase(t *testing.T) string {
	t.Helper()
	name := scratchName()
	u := scratchURL(t, url.Values{"pool_max_conns": {"4"}})
	adminExec(t, "CREATE DATABASE "+name)
	t.Cleanup(func() { adminExec(t, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

// newSchema creates an empty schema in the test database, drops it when
// the test ends, and returns a URL whose connections use it (search_path)
// with a small pool.
func newSchema(t *testing.T) string {
	t.Helper()
	name := scratchName()
	u := scratchURL(t, url.Values{"pool_max_conns": {"4"}, "search_path": {name}})
	adminExec(t, "CREATE SCHEMA "+name)
	t.Cleanup(func() { adminExec(t, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	return u.String()
}

func scratchName() string {
	var b [8]byte
	rand.Read(b[:])
	return "herald_test_" + hex.EncodeToString(b[:])
}

// scratchURL is the test URL with params set (unless the URL sets them).
// Commits do not wait for the WAL flush (synchronous_commit=off): the
// tests do not crash the server, and the suite runs several times faster.
func scratchURL(t *testing.T, params url.Values) *url.URL {
	t.Helper()
	params.Set("synchronous_commit", "off")
	u, err := url.Parse(baseURL(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s must be a postgres:// URL", urlEnv)
	}
	q := u.Query()
	for k, v := range params {
		if q.Get(k) == "" {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	return u
}

// adminExec runs sql on the test database, outside any store.
func adminExec(t *testing.T, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, baseURL(t))
	if err != nil {
		t.Fatalf("connect to %s: %v", urlEnv, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Errorf("%s: %v", sql, err)
	}
}

func openStore(t *testing.T, dbURL string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), dbURL, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawConn is a plain connection to the database, outside the store.
func rawConn(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL) // drops the pool_* settings
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg.ConnConfig)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestConformance runs the suite on stores opened as Herald opens them:
// with a secret box (secrets and header values sealed at rest).
func TestConformance(t *testing.T) {
	baseURL(t)
	key := make([]byte, secretbox.KeySize)
	rand.Read(key)
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t.Cleanup(func() { t.Logf("conformance suite: %v", time.Since(start).Round(time.Millisecond)) })
	storetest.Exercise(t, func(t *testing.T) store.Store {
		return openStore(t, newSchema(t), WithSecretBox(box))
	})
}

func TestRestart(t *testing.T) {
	baseURL(t)
	storetest.Restart(t, func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
		u := newSchema(t)
		return openStore(t, u), func(t *testing.T) store.Store { return openStore(t, u) }
	})
}

var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newEndpoint(tenant string) store.Endpoint {
	id := store.NewID("ep")
	return store.Endpoint{
		ID: id, Tenant: tenant, URL: "https://example.com/h/" + id, State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: "whsec_" + id, CreatedAt: base}}, CreatedAt: base, UpdatedAt: base,
	}
}

func createEndpoint(t *testing.T, s *Store, e store.Endpoint) store.Endpoint {
	t.Helper()
	got, err := s.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: e})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return got
}

func newEvent(tenant string) store.Event {
	id := store.NewID("evt")
	return store.Event{ID: id, Tenant: tenant, Type: "file.created", OccurredAt: base, Body: []byte(`{"id":"` + id + `"}`), Fingerprint: id}
}

func publish(t *testing.T, s *Store, ev store.Event, now time.Time) store.PublishResult {
	t.Helper()
	res, err := s.PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: now, NewDeliveryID: func() string { return store.NewID("dlv") }})
	if err != nil {
		t.Fatalf("PublishEvent: %v", err)
	}
	return res
}

func gooseVersions(t *testing.T, conn *pgx.Conn) (rows int, max int64) {
	t.Helper()
	if err := conn.QueryRow(t.Context(), "SELECT COUNT(*), COALESCE(MAX(version_id), 0) FROM goose_db_version").Scan(&rows, &max); err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	return rows, max
}

func TestMigrationsTwiceAreNoOp(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s, err := Open(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ep := createEndpoint(t, s, newEndpoint("acme"))
	s.Close()
	conn := rawConn(t, dbURL)
	rows1, v1 := gooseVersions(t, conn)
	if v1 == 0 {
		t.Fatal("no migration recorded after the first Open")
	}
	for i := range 2 {
		s, err := Open(t.Context(), dbURL)
		if err != nil {
			t.Fatalf("reopen %d: %v", i+1, err)
		}
		if _, err := s.GetEndpoint(t.Context(), ep.ID); err != nil {
			t.Errorf("reopen %d: GetEndpoint: %v", i+1, err)
		}
		s.Close()
		if rows, v := gooseVersions(t, conn); rows != rows1 || v != v1 {
			t.Errorf("reopen %d: goose_db_version has %d rows (max %d), want %d (max %d): migrations ran again", i+1, rows, v, rows1, v1)
		}
	}
}

// Nodes started together on an empty database: one migrates, the others
// wait for goose's session lock and find nothing left to do.
func TestConcurrentOpensOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	const nodes = 3
	errs := make(chan error, nodes)
	start := time.Now()
	for range nodes {
		go func() {
			s, err := Open(t.Context(), dbURL)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	t.Logf("%d concurrent Opens on an empty database: %v", nodes, time.Since(start).Round(time.Millisecond))
	files, err := migrations.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(files))
	var last int64 // versions are numbered in blocks, not contiguously
	for _, f := range files {
		if v, err := strconv.ParseInt(strings.SplitN(f.Name(), "_", 2)[0], 10, 64); err == nil && v > last {
			last = v
		}
	}
	rows, v := gooseVersions(t, rawConn(t, dbURL))
	if v != last || int64(rows) != n+1 { // goose's version 0 row and one per migration
		t.Errorf("goose_db_version: %d rows, max %d; want %d rows, max %d (each migration applied once)", rows, v, n+1, last)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	baseURL(t)
	ctx := t.Context()
	if _, err := Open(ctx, "postgres://%zz"); err == nil || !strings.Contains(err.Error(), "postgres") {
		t.Errorf("Open(malformed URL) = %v, want an error naming postgres", err)
	}
	// Nothing listens on port 1.
	_, err := Open(ctx, "postgres://herald:s3cr3t-pw@127.0.0.1:1/herald?sslmode=disable&connect_timeout=2")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open(unreachable) = %v, want ErrUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("Open error shows the password: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute, Now: base}); !errors.Is(err, context.Canceled) {
		t.Errorf("ClaimDeliveries(canceled) = %v, want context.Canceled", err)
	}
	if _, err := s.GetEndpoint(ctx, "ep_x"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetEndpoint(canceled) = %v, want context.Canceled", err)
	}
	if err := s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: "dlv_x", Owner: "w", State: store.DeliverySucceeded, Now: base}}); !errors.Is(err, context.Canceled) {
		t.Errorf("CompleteDeliveries(canceled) = %v, want context.Canceled", err)
	}
	// The store still works.
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after canceled calls: %v", err)
	}
}

func TestSecretsEncryptedAtRest(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	key := make([]byte, secretbox.KeySize)
	rand.Read(key)
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dbURL, WithSecretBox(box))
	e := newEndpoint("acme")
	createEndpoint(t, s, e)
	var raw string
	if err := rawConn(t, dbURL).QueryRow(t.Context(), "SELECT secrets FROM endpoints WHERE id = $1", e.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(raw, "enc:v1:") || strings.Contains(raw, e.Secrets[0].Value) {
		t.Errorf("secrets column = %q, want it sealed", raw)
	}
	got, err := s.GetEndpoint(t.Context(), e.ID)
	if err != nil || len(got.Secrets) != 1 || got.Secrets[0].Value != e.Secrets[0].Value {
		t.Errorf("GetEndpoint = %+v, %v; want the secret back", got.Secrets, err)
	}
	// Without the key the endpoint cannot be read (and is not mistaken for plain JSON).
	plain := openStore(t, dbURL)
	if _, err := plain.GetEndpoint(t.Context(), e.ID); err == nil {
		t.Error("GetEndpoint without the encryption key succeeded")
	}
}

// TestClaimLeavesOutWhatItCannotOpen: a claim on a node that cannot open
// an endpoint's secrets (sealed with a key it does not hold: a node that
// missed a key rotation) once failed as a whole, on every delivery it had
// taken. Now it returns the deliveries it can open, reports the endpoint
// (ClaimParams.Unreadable), gives back the leases its committed statements
// took on that endpoint's deliveries and wakes the other nodes: a node
// with the key claims them at once, not after the lease ends (when the
// rescuer would have counted them) nor at its next poll.
func TestClaimLeavesOutWhatItCannotOpen(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	newBox := func() *secretbox.Box {
		key := make([]byte, secretbox.KeySize)
		rand.Read(key)
		box, err := secretbox.New(key)
		if err != nil {
			t.Fatal(err)
		}
		return box
	}
	box, otherBox := newBox(), newBox()
	good := openStore(t, dbURL, WithSecretBox(box))
	sealed := createEndpoint(t, good, newEndpoint("acme"))
	plain := createEndpoint(t, openStore(t, dbURL), newEndpoint("globex")) // no box: opens anywhere
	publish(t, good, newEvent("acme"), base)
	publish(t, good, newEvent("globex"), base)
	wrong := openStore(t, dbURL, WithSecretBox(otherBox))

	conn := rawConn(t, dbURL) // another node's listener
	if _, err := conn.Exec(t.Context(), "LISTEN "+notifyChannel); err != nil {
		t.Fatal(err)
	}
	var met []store.UnreadableEndpoint
	cs, err := wrong.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node_wrong", Limit: 8, Lease: time.Hour, Now: base,
		Unreadable: func(u store.UnreadableEndpoint) { met = append(met, u) }})
	if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != plain.ID {
		t.Fatalf("claim without the key: %d claims, %v; want the delivery to %s only", len(cs), err, plain.ID)
	}
	if len(met) != 1 || met[0].ID != sealed.ID || met[0].Deliveries != 1 || met[0].Err == nil {
		t.Fatalf("reported %+v; want %s with its delivery", met, sealed.ID)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := conn.WaitForNotification(ctx); err != nil {
		t.Fatalf("the claim gave back a delivery but woke no other node: %v", err)
	}
	cs, err = good.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node_good", Limit: 8, Lease: time.Hour, Now: base})
	if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != sealed.ID {
		t.Fatalf("claim with the key right after: %d claims, %v; want the delivery to %s (its lease given back)", len(cs), err, sealed.ID)
	}
}

// The claim and NextDueAt queries stay on the partial index deliveries_due
// (and the claim's UPDATE on the primary key) with custom and generic plans,
// so the queue's cost does not grow with succeeded, dead or leased rows.
func TestQueueQueriesUseDueIndex(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("acme"))
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	// 30,000 events: 20,000 deliveries succeeded, 5,000 dead, 2,000 leased,
	// 2,000 due later, 1,000 due now.
	seedDeliveries(t, conn, ep.ID, 30000, seedShape{
		state:   "CASE WHEN i <= 20000 THEN 'succeeded' WHEN i <= 25000 THEN 'dead' ELSE 'pending' END",
		due:     "CASE WHEN i > 29000 THEN $1::timestamptz ELSE $1::timestamptz + interval '1 hour' END",
		leased:  "i > 25000 AND i <= 27000",
		updated: "$1",
	})
	explain := func(q string, args ...any) string {
		t.Helper()
		return explainPlan(t, conn, "EXPLAIN ", q, args...)
	}
	if _, err := conn.Exec(ctx, "PREPARE claim (text, timestamptz, timestamptz, integer) AS "+claimQuery); err != nil {
		t.Fatalf("PREPARE claim: %v", err)
	}
	if _, err := conn.Exec(ctx, "PREPARE claimfillskip (text, timestamptz, timestamptz, integer, text[], integer) AS "+claimFillSkipQuery); err != nil {
		t.Fatalf("PREPARE claimfillskip: %v", err)
	}
	if _, err := conn.Exec(ctx, "PREPARE nextdueskip (text[], integer) AS "+nextDueSkipQuery); err != nil {
		t.Fatalf("PREPARE nextdueskip: %v", err)
	}
	if _, err := conn.Exec(ctx, "PREPARE claimfair (text, timestamptz, timestamptz, integer, text, integer, text[]) AS "+claimFairQuery); err != nil {
		t.Fatalf("PREPARE claimfair: %v", err)
	}
	if _, err := conn.Exec(ctx, "PREPARE claimfill (text, timestamptz, timestamptz, integer) AS "+claimFillQuery); err != nil {
		t.Fatalf("PREPARE claimfill: %v", err)
	}
	// The variants of a claim that skips endpoints (ClaimParams.SkipEndpoints).
	for name, q := range map[string]string{
		"claimfillep (text, timestamptz, timestamptz, integer, text[])":                        claimFillSkipEPQuery,
		"claimfairep (text, timestamptz, timestamptz, integer, text, integer, text[], text[])": claimFairSkipEPQuery,
		"claimfillskipep (text, timestamptz, timestamptz, integer, text[], integer, text[])":   claimFillSkipSkipEPQuery,
	} {
		if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+q); err != nil {
			t.Fatalf("PREPARE %s: %v", name, err)
		}
	}
	now := base.Add(time.Second)
	plans := map[string]string{"next due": explain(nextDueQuery)}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		plans["claim, "+mode] = explain(fmt.Sprintf("EXECUTE claim ('w', '%s', '%s', 50)", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)))
		plans["claim fill, "+mode] = explain(fmt.Sprintf("EXECUTE claimfill ('w', '%s', '%s', 50)", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)))
		plans["claim fill skipping endpoints, "+mode] = explain(fmt.Sprintf("EXECUTE claimfillep ('w', '%s', '%s', 50, '{ep_x}')", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)))

		// The skipping queries: the due indexes, the lease index and the
		// primary key, never the table (their flat cost: TestSkipTenantsCostFlat).
		for name, q := range map[string]string{
			"claim fill skipping":                       fmt.Sprintf("EXECUTE claimfillskip ('w', '%s', '%s', 50, '{acme}', 4)", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)),
			"claim fill skipping tenants and endpoints": fmt.Sprintf("EXECUTE claimfillskipep ('w', '%s', '%s', 50, '{acme}', 4, '{ep_x}')", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)),
			"next due skipping":                         "EXECUTE nextdueskip ('{acme}', 257)",
		} {
			plan := explain(q)
			t.Logf("%s, %s plan:\n%s", name, mode, plan)
			if !strings.Contains(plan, "deliveries_due_tenant") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s, %s: the plan does not use deliveries_due_tenant, or scans the table", name, mode)
			}
		}
		for _, q := range []string{
			fmt.Sprintf("EXECUTE claimfair ('w', '%s', '%s', 50, 'a', 200, '{}')", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)),
			fmt.Sprintf("EXECUTE claimfairep ('w', '%s', '%s', 50, 'a', 200, '{}', '{ep_x}')", now.Add(time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)),
		} {
			fair := explain(q)
			t.Logf("%s, %s plan:\n%s", q, mode, fair)
			if !strings.Contains(fair, "using deliveries_due_tenant on deliveries d ") || !strings.Contains(fair, "deliveries_pkey") {
				t.Errorf("%s, %s: the plan does not use deliveries_due_tenant and the primary key", q, mode)
			}
			if strings.Contains(fair, "Seq Scan on deliveries") {
				t.Errorf("%s, %s: the plan scans the deliveries table", q, mode)
			}
		}
	}
	for name, plan := range plans {
		t.Logf("%s plan:\n%s", name, plan)
		if !strings.Contains(plan, "deliveries_due") {
			t.Errorf("%s: the plan does not use deliveries_due", name)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: the plan scans the deliveries table", name)
		}
		if strings.HasPrefix(name, "claim") {
			if !strings.Contains(plan, "deliveries_pkey") {
				t.Errorf("%s: the UPDATE does not find the claimed rows by primary key", name)
			}
			if strings.Contains(plan, "Sort") {
				t.Errorf("%s: the plan sorts instead of reading deliveries_due in order", name)
			}
		}
	}
	// And the claim takes what is due, oldest first.
	cs, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w2", Limit: 2000, Lease: time.Minute, Now: now})
	if err != nil || len(cs) != 1000 {
		t.Fatalf("ClaimDeliveries = %d claims, %v; want the 1000 due", len(cs), err)
	}
}

// Two nodes (two pools) with four claimers each never lease one delivery
// twice, and between them claim every delivery.
func TestConcurrentClaimersOnTwoNodes(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	nodes := []*Store{openStore(t, dbURL), openStore(t, dbURL)}
	for range 10 {
		createEndpoint(t, nodes[0], newEndpoint("acme"))
	}
	for i := range 40 {
		publish(t, nodes[i%2], newEvent("acme"), base)
	}
	const claimers = 8
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[string]string{}
		dup []string
	)
	for w := range claimers {
		s := nodes[w%2]
		owner := fmt.Sprintf("node-%d/worker-%d", w%2, w)
		wg.Go(func() {
			for {
				cs, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: owner, Limit: 7, Lease: time.Minute, Now: base.Add(time.Second)})
				if err != nil {
					t.Errorf("%s: ClaimDeliveries: %v", owner, err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					if prev, ok := got[c.Delivery.ID]; ok {
						dup = append(dup, c.Delivery.ID+" by "+prev+" and "+owner)
					}
					got[c.Delivery.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(dup) > 0 {
		t.Fatalf("claimed twice: %v", dup)
	}
	if len(got) != 400 {
		t.Fatalf("claimed %d deliveries, want 400", len(got))
	}
	for id, owner := range got {
		d, err := nodes[1].GetDelivery(t.Context(), id)
		if err != nil || d.LeaseOwner != owner {
			t.Fatalf("delivery %s leased to %q (%v), claimed by %q", id, d.LeaseOwner, err, owner)
		}
	}
}

// Concurrent publishes of one event id on two nodes: one creates it, the
// others answer with it; the deliveries are made once.
func TestConcurrentPublishSameIDOnTwoNodes(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	nodes := []*Store{openStore(t, dbURL), openStore(t, dbURL)}
	for range 3 {
		createEndpoint(t, nodes[0], newEndpoint("acme"))
	}
	ev := newEvent("acme")
	var created, answered atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			res, err := nodes[i%2].PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }})
			switch {
			case err != nil:
				t.Errorf("PublishEvent: %v", err)
			case res.Created:
				created.Add(1)
			case res.Event.ID == ev.ID && res.Deliveries == 3:
				answered.Add(1)
			default:
				t.Errorf("PublishEvent = %+v", res)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 || answered.Load() != 7 {
		t.Errorf("8 publishes of one id: %d created, %d answered with the original; want 1, 7", created.Load(), answered.Load())
	}
	var n int
	if err := rawConn(t, dbURL).QueryRow(t.Context(), "SELECT COUNT(*) FROM deliveries").Scan(&n); err != nil || n != 3 {
		t.Errorf("deliveries = %d (%v), want 3", n, err)
	}
}

// Publishes racing with deleting, pausing and enabling endpoints of their
// tenant leave no delivery of a deleted endpoint, none pending for a paused
// one and none held for an enabled one (the tenant lock).
func TestFanOutRacesWithEndpointChanges(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	nodes := []*Store{openStore(t, dbURL), openStore(t, dbURL)}
	ctx := t.Context()
	doomed := createEndpoint(t, nodes[0], newEndpoint("acme"))
	toggled := createEndpoint(t, nodes[0], newEndpoint("acme"))
	createEndpoint(t, nodes[0], newEndpoint("acme"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := nodes[i%2].PublishEvent(ctx, store.PublishParams{Event: newEvent("acme"), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}); err != nil {
					t.Errorf("PublishEvent: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := nodes[1].DeleteEndpoint(ctx, store.DeleteEndpointParams{ID: doomed.ID}); err != nil {
		t.Errorf("DeleteEndpoint: %v", err)
	}
	for i := range 10 {
		st := store.EndpointPaused
		if i%2 == 1 {
			st = store.EndpointEnabled
		}
		if _, _, err := nodes[i%2].SetEndpointState(ctx, store.SetEndpointStateParams{ID: toggled.ID, State: st, Now: base}); err != nil {
			t.Errorf("SetEndpointState: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := nodes[0].SetEndpointState(ctx, store.SetEndpointStateParams{ID: toggled.ID, State: store.EndpointPaused, Now: base}); err != nil {
		t.Errorf("SetEndpointState: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	conn := rawConn(t, dbURL)
	var orphans, pendingPaused, total int
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT COUNT(*) FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id)),
		(SELECT COUNT(*) FROM deliveries WHERE endpoint_id = $1 AND state = 'pending'),
		(SELECT COUNT(*) FROM deliveries)`, toggled.ID).Scan(&orphans, &pendingPaused, &total); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries published during the changes", total)
	if orphans != 0 {
		t.Errorf("%d deliveries of the deleted endpoint survived", orphans)
	}
	if pendingPaused != 0 {
		t.Errorf("%d deliveries pending for the paused endpoint", pendingPaused)
	}
	// Enabled at last: nothing of it stays held.
	if _, _, err := nodes[0].SetEndpointState(ctx, store.SetEndpointStateParams{ID: toggled.ID, State: store.EndpointEnabled, Now: base}); err != nil {
		t.Fatal(err)
	}
	var held int
	if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM deliveries WHERE state = 'paused'").Scan(&held); err != nil || held != 0 {
		t.Errorf("held deliveries after enabling = %d (%v), want 0", held, err)
	}
}

// Completions of one delivery by its stale and its current owner on two
// nodes at once number their attempts 1 and 2, never failing on a
// duplicate number.
func TestConcurrentCompletionsNumberAttempts(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	nodes := []*Store{openStore(t, dbURL), openStore(t, dbURL)}
	ctx := t.Context()
	createEndpoint(t, nodes[0], newEndpoint("acme"))
	for range 20 {
		publish(t, nodes[0], newEvent("acme"), base)
	}
	old, err := nodes[0].ClaimDeliveries(ctx, store.ClaimParams{Owner: "a", Limit: 100, Lease: time.Second, Now: base})
	if err != nil || len(old) != 20 {
		t.Fatalf("claim: %d, %v", len(old), err)
	}
	if n, err := nodes[0].RescueExpiredLeases(ctx, base.Add(time.Minute)); err != nil || n != 20 {
		t.Fatalf("rescue: %d, %v", n, err)
	}
	cur, err := nodes[1].ClaimDeliveries(ctx, store.ClaimParams{Owner: "b", Limit: 100, Lease: time.Minute, Now: base.Add(time.Minute)})
	if err != nil || len(cur) != 20 {
		t.Fatalf("reclaim: %d, %v", len(cur), err)
	}
	batch := func(cs []store.Claim, owner string, reverse bool) []store.Completion {
		out := make([]store.Completion, len(cs))
		for i, c := range cs {
			j := i
			if reverse {
				j = len(cs) - 1 - i
			}
			out[j] = store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Delivery.EndpointID, Owner: owner, LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliverySucceeded,
				Attempt: store.Attempt{StartedAt: base, StatusCode: 200}, Now: base.Add(time.Minute)}
		}
		return out
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := nodes[0].CompleteDeliveries(ctx, batch(old, "a", false)); err != nil {
			t.Errorf("stale owner's completions: %v", err)
		}
	})
	wg.Go(func() {
		if err := nodes[1].CompleteDeliveries(ctx, batch(cur, "b", true)); err != nil {
			t.Errorf("owner's completions: %v", err)
		}
	})
	wg.Wait()
	for _, c := range cur {
		as, err := nodes[0].ListAttempts(ctx, c.Delivery.ID)
		if err != nil || len(as) != 2 || as[0].Number != 1 || as[1].Number != 2 {
			t.Fatalf("attempts of %s = %+v, %v; want numbers 1, 2", c.Delivery.ID, as, err)
		}
		if d, _ := nodes[0].GetDelivery(ctx, c.Delivery.ID); d.State != store.DeliverySucceeded || d.Attempts != 1 {
			t.Fatalf("delivery %s: %s, %d attempts counted; want succeeded by its owner, 1", d.ID, d.State, d.Attempts)
		}
	}
}

// Listen wakes up once when it starts listening and once per publish that
// made pending deliveries, and survives the loss of its connection.
func TestListen(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	s := openStore(t, dbURL)
	other := openStore(t, dbURL) // another node publishes
	conn := rawConn(t, dbURL)
	enabled := createEndpoint(t, s, newEndpoint("acme"))
	paused := newEndpoint("held")
	paused.State = store.EndpointPaused
	createEndpoint(t, s, paused)

	calls := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, func() { calls <- struct{}{} }) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	}()
	expect := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no call of onNotify: %s", what)
		}
	}
	expectNone := func(what string) {
		t.Helper()
		select {
		case <-calls:
			t.Fatalf("unexpected call of onNotify: %s", what)
		case <-time.After(300 * time.Millisecond):
		}
	}
	listenerPID := func() uint32 {
		t.Helper()
		var pid uint32
		err := conn.QueryRow(t.Context(), "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "+notifyChannel+"'").Scan(&pid)
		if err != nil {
			t.Fatalf("find the listening backend: %v", err)
		}
		return pid
	}

	expect("the first connection")
	publish(t, other, newEvent("held"), base) // only a held delivery: nothing to do
	expectNone("a publish without pending deliveries")
	publish(t, other, newEvent("acme"), base)
	expect("a publish with a pending delivery")
	expectNone("one publish, one notification")
	publish(t, s, newEvent("acme"), base)
	expectNone("a publish through the listening store (its caller wakes its own engine)")

	pid := listenerPID()
	if _, err := conn.Exec(t.Context(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatalf("pg_terminate_backend: %v", err)
	}
	expect("the reconnection")
	if again := listenerPID(); again == pid {
		t.Fatalf("the listener still uses backend %d", pid)
	}
	publish(t, other, newEvent("acme"), base)
	expect("a publish after the reconnection")

	// Rescued leases wake the nodes up too.
	cs, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w", Limit: 10, Lease: time.Second, Now: base})
	if err != nil || len(cs) != 3 || cs[0].Endpoint.ID != enabled.ID {
		t.Fatalf("ClaimDeliveries = %d, %v", len(cs), err)
	}
	if n, err := other.RescueExpiredLeases(t.Context(), base.Add(time.Minute)); err != nil || n != 3 {
		t.Fatalf("RescueExpiredLeases = %d, %v", n, err)
	}
	expect("a rescue")
}

// Deleting an endpoint leaves no attempt rows behind.
func TestDeleteEndpointLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ctx := t.Context()
	ep := createEndpoint(t, s, newEndpoint("acme"))
	publish(t, s, newEvent("acme"), base)
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
	if err := rawConn(t, dbURL).QueryRow(ctx, "SELECT (SELECT COUNT(*) FROM attempts), (SELECT COUNT(*) FROM deliveries), (SELECT COUNT(*) FROM events)").Scan(&attempts, &deliveries, &events); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || deliveries != 0 || events != 1 {
		t.Errorf("after DeleteEndpoint: %d attempts, %d deliveries, %d events; want 0, 0, 1", attempts, deliveries, events)
	}
}

// Sources are not in the conformance suite yet: the SQLite driver's
// behaviour, checked here.
func TestSources(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	key := make([]byte, secretbox.KeySize)
	rand.Read(key)
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dbURL, WithSecretBox(box))
	ctx := t.Context()
	createEndpoint(t, s, newEndpoint("acme"))
	var srcs []store.Source
	for i := range 3 {
		id := store.NewID("src")
		ep := newEndpoint("ignored")
		ep.URL = "http://localhost:9000/in"
		src, err := s.CreateSource(ctx, store.CreateSourceParams{
			Source:   store.Source{ID: id, Name: fmt.Sprintf("stripe %d", i), Config: []byte(`{"secret":"whsec_provider"}`), CreatedAt: base, UpdatedAt: base},
			Endpoint: ep,
		})
		if err != nil {
			t.Fatalf("CreateSource: %v", err)
		}
		if src.EndpointID != ep.ID || string(src.Config) != `{"secret":"whsec_provider"}` || !src.CreatedAt.Equal(base) {
			t.Fatalf("CreateSource = %+v", src)
		}
		got, err := s.GetEndpoint(ctx, ep.ID)
		if err != nil || got.Kind != store.EndpointKindSource || got.Tenant != id {
			t.Fatalf("source endpoint = %+v, %v; want kind source, tenant %s", got, err, id)
		}
		srcs = append(srcs, src)
	}
	if _, err := s.CreateSource(ctx, store.CreateSourceParams{Source: store.Source{ID: srcs[0].ID, Config: []byte("{}")}, Endpoint: newEndpoint("x")}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateSource(existing id) = %v, want ErrConflict", err)
	}
	var raw string
	if err := rawConn(t, dbURL).QueryRow(ctx, "SELECT config FROM sources WHERE id = $1", srcs[0].ID).Scan(&raw); err != nil || strings.Contains(raw, "whsec_provider") {
		t.Errorf("config column = %q (%v), want it sealed", raw, err)
	}
	pg, err := s.ListEndpoints(ctx, store.ListEndpointsParams{ListParams: store.ListParams{Limit: 100}})
	if err != nil || len(pg.Data) != 1 {
		t.Errorf("ListEndpoints = %d, %v; want only the tenant's endpoint", len(pg.Data), err)
	}
	if pg, err = s.ListEndpoints(ctx, store.ListEndpointsParams{IncludeSources: true, ListParams: store.ListParams{Limit: 100}}); err != nil || len(pg.Data) != 4 {
		t.Errorf("ListEndpoints(IncludeSources) = %d, %v; want 4", len(pg.Data), err)
	}
	var listed []string
	for cursor := ""; ; {
		page, err := s.ListSources(ctx, store.ListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatalf("ListSources: %v", err)
		}
		for _, src := range page.Data {
			listed = append(listed, src.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{srcs[2].ID, srcs[1].ID, srcs[0].ID}; strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Errorf("ListSources = %v, want %v (newest first)", listed, want)
	}

	// An inbound event with forwarded headers, to the source's endpoint.
	ev := newEvent(srcs[0].ID)
	ev.Headers = map[string]string{"Stripe-Signature": "t=1,v1=ab"}
	publish(t, s, ev, base)
	if got, err := s.GetEvent(ctx, ev.ID); err != nil || got.Headers["Stripe-Signature"] != "t=1,v1=ab" {
		t.Errorf("GetEvent headers = %v, %v", got.Headers, err)
	}
	plain := newEvent("acme")
	publish(t, s, plain, base)
	if got, err := s.GetEvent(ctx, plain.ID); err != nil || got.Headers != nil {
		t.Errorf("GetEvent headers of a published event = %#v, %v; want nil", got.Headers, err)
	}

	name, dest := "renamed", "http://localhost:9001/in"
	upd, err := s.UpdateSource(ctx, store.UpdateSourceParams{ID: srcs[0].ID, Name: &name, DestinationURL: &dest, Now: base.Add(time.Hour)})
	if err != nil || upd.Name != name || string(upd.Config) != `{"secret":"whsec_provider"}` || !upd.UpdatedAt.Equal(base.Add(time.Hour)) {
		t.Errorf("UpdateSource = %+v, %v", upd, err)
	}
	if ep, err := s.GetEndpoint(ctx, srcs[0].EndpointID); err != nil || ep.URL != dest {
		t.Errorf("source endpoint after UpdateSource: %+v, %v; want URL %s", ep, err, dest)
	}
	if _, err := s.UpdateSource(ctx, store.UpdateSourceParams{ID: "src_unknown", Name: &name, Now: base}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateSource(unknown) = %v, want ErrNotFound", err)
	}

	if err := s.DeleteSource(ctx, srcs[0].ID); err != nil {
		t.Fatalf("DeleteSource: %v", err)
	}
	if _, err := s.GetSource(ctx, srcs[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSource(deleted) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetEndpoint(ctx, srcs[0].EndpointID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetEndpoint(deleted source's) = %v, want ErrNotFound", err)
	}
	if d := listDeliveries(t, s, srcs[0].EndpointID); len(d) != 0 {
		t.Errorf("deliveries of the deleted source's endpoint: %d", len(d))
	}
	if err := s.DeleteSource(ctx, srcs[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSource again = %v, want ErrNotFound", err)
	}
}

func listDeliveries(t *testing.T, s *Store, endpointID string) []store.Delivery {
	t.Helper()
	pg, err := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{EndpointID: endpointID, ListParams: store.ListParams{Limit: 1000}})
	if err != nil {
		t.Fatalf("ListDeliveries: %v", err)
	}
	return pg.Data
}

// Nodes starting together with their encryption key checks: the first
// value stored wins and every node reads it.
func TestEnsureMetaFirstWriterWins(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	nodes := []*Store{openStore(t, dbURL), openStore(t, dbURL)}
	got := make([]string, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			v, err := nodes[i%2].EnsureMeta(t.Context(), "k", fmt.Sprint("value ", i))
			if err != nil {
				t.Errorf("EnsureMeta: %v", err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for _, v := range got {
		if v != got[0] {
			t.Fatalf("EnsureMeta answers %q, want one value for all", got)
		}
	}
	if v, err := nodes[0].EnsureMeta(t.Context(), "k", "later"); err != nil || v != got[0] {
		t.Errorf("EnsureMeta later = %q, %v; want %q", v, err, got[0])
	}
}

// Two nodes completing batches that touch the same endpoints in opposite
// orders do not deadlock: endpoint rows are locked in id order, after the
// deliveries. Each batch starts a failure streak on one endpoint, then
// after 99 more completions on another; without the ordering the two
// transactions wait for each other's endpoint row.
func TestConcurrentCompletionsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	nodes := []*Store{openStore(t, dbURL), openStore(t, dbURL)}
	ctx := t.Context()
	e1 := createEndpoint(t, nodes[0], newEndpoint("acme"))
	e2 := createEndpoint(t, nodes[0], newEndpoint("acme"))
	conn := rawConn(t, dbURL)
	const perBatch = 100
	for round := range 5 {
		if _, err := conn.Exec(ctx, "UPDATE endpoints SET failing_since = NULL"); err != nil {
			t.Fatal(err)
		}
		for range perBatch + 1 {
			publish(t, nodes[0], newEvent("acme"), base)
		}
		claims, err := nodes[0].ClaimDeliveries(ctx, store.ClaimParams{Owner: "a", Limit: 1000, Lease: time.Minute, Now: base.Add(time.Hour)})
		if err != nil || len(claims) != 2*(perBatch+1) {
			t.Fatalf("round %d: claim: %d, %v", round, len(claims), err)
		}
		byEndpoint := map[string][]store.Claim{}
		for _, c := range claims {
			byEndpoint[c.Delivery.EndpointID] = append(byEndpoint[c.Delivery.EndpointID], c)
		}
		fail := func(c store.Claim) store.Completion {
			return store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Delivery.EndpointID, Owner: "a", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliveryPending,
				NextAttemptAt: base.Add(48 * time.Hour), Attempt: store.Attempt{StartedAt: base, StatusCode: 503}, Now: base.Add(time.Hour)}
		}
		// x: e1 ×100 then e2 ×1; y: e2 ×100 then e1 ×1.
		var x, y []store.Completion
		for _, c := range byEndpoint[e1.ID][:perBatch] {
			x = append(x, fail(c))
		}
		x = append(x, fail(byEndpoint[e2.ID][perBatch]))
		for _, c := range byEndpoint[e2.ID][:perBatch] {
			y = append(y, fail(c))
		}
		y = append(y, fail(byEndpoint[e1.ID][perBatch]))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, batch := range [][]store.Completion{x, y} {
			wg.Go(func() {
				<-start
				if err := nodes[i].CompleteDeliveries(ctx, batch); err != nil {
					t.Errorf("round %d: batch %d: %v", round, i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, ep := range []store.Endpoint{e1, e2} {
			if got, _ := nodes[0].GetEndpoint(ctx, ep.ID); !got.FailingSince.Equal(base) {
				t.Fatalf("round %d: endpoint %s failing since %v, want %v", round, ep.ID, got.FailingSince, base)
			}
		}
	}
}

// A failed attempt asks whether its endpoint's failure streak has lasted
// long enough to disable it (streakQuery). When it has not, the deliveries
// are not scanned at all: the plan gates the UPDATE on a one-time filter,
// and the scan node never runs. (Without it the planner walked the whole
// due index once per failed attempt: 110 attempts/s beside a million
// waiting deliveries.)
func TestDisableQuerySkipsScan(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	ep := createEndpoint(t, s, newEndpoint("acme"))
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || lpad(i::text, 8, '0'), 'acme', 't', $1, '{}', 'f', $1 FROM generate_series(1, 5000) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
		SELECT 'dlv_' || lpad(i::text, 8, '0'), 'evt_' || lpad(i::text, 8, '0'), $2, 'acme', 't', 'pending', $1::timestamptz + interval '1 hour', $1, $1
		FROM generate_series(1, 5000) AS i`, base, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE endpoints SET failing_since = $1 WHERE id = $2", base, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The streak started at base; the cutoff is an hour earlier: not yet.
	plan := explainAnalyze(t, tx, streakQuery, ep.ID, "dlv_00000001", "status 503", base.Add(time.Hour), base.Add(-time.Hour), 1, "pending")
	t.Logf("plan:\n%s", plan)
	if !strings.Contains(plan, "One-Time Filter") {
		t.Error("the deliveries UPDATE is not gated by a one-time filter")
	}
	for _, l := range strings.Split(plan, "\n") {
		if (strings.Contains(l, "Scan") && strings.Contains(l, "on deliveries")) && !strings.Contains(l, "never executed") {
			t.Errorf("the deliveries are scanned although nothing was disabled: %s", strings.TrimSpace(l))
		}
	}
}

// TestCapabilities: the driver declares every optional feature the
// application uses on PostgreSQL (wake-ups, membership, node list, the
// sealing of clear header values, rekey, two claimers), backed by the store
// itself, and no exclusive claimer (nodes share the queue).
func TestCapabilities(t *testing.T) {
	baseURL(t)
	s := openStore(t, newSchema(t))
	c := s.Capabilities()
	if c.Wakeups != store.Notifier(s) || c.Membership != store.Membership(s) || c.Nodes != store.NodeLister(s) ||
		c.HeaderSealer != store.ClearHeaderSealer(s) || c.Sealed != store.SealedStore(s) || c.Exclusive != nil || c.Claimers != 2 {
		t.Errorf("Capabilities() = %+v, want wake-ups, membership, nodes, header sealing and rekey from the store, no exclusive claimer, 2 claimers", c)
	}
}

// TestOperationalPublishReadsSubscribersOnly: the endpoints a publish of
// an operational type reads are found through endpoints_event_types, not
// by reading every endpoint of the tenant (a bulk import of 3,000
// endpoints that subscribe to everything or to another type, and two
// subscribers of endpoint.*).
func TestOperationalPublishReadsSubscribersOnly(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	openStore(t, dbURL) // migrates
	conn := rawConn(t, dbURL)
	ctx := t.Context()
	if _, err := conn.Exec(ctx, `INSERT INTO endpoints (id, tenant, url, event_types, state, secrets, created_at, updated_at)
		SELECT 'ep_' || lpad(i::text, 8, '0'), 'acme', 'https://example.com/',
		       CASE WHEN i <= 2 THEN '["endpoint.*"]'::jsonb WHEN i % 2 = 0 THEN '[]'::jsonb ELSE '["order.paid"]'::jsonb END,
		       'enabled', '', $1, $1
		FROM generate_series(1, 3000) AS i`, base); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	plan := explainAnalyze(t, conn, endpointsForOperationalSQL, "acme", typeCandidates("endpoint.created")[1:])
	t.Logf("plan:\n%s", plan)
	if !strings.Contains(plan, "endpoints_event_types") {
		t.Errorf("the operational publish's endpoint read does not use endpoints_event_types:\n%s", plan)
	}
	if strings.Contains(plan, "Rows Removed by Filter: ") && !strings.Contains(plan, "Rows Removed by Filter: 0") {
		t.Errorf("the read filtered rows out (read endpoints that cannot match):\n%s", plan)
	}
}

// A node whose last heartbeat found no other live node sends no NOTIFY
// with its publishes (it would wake nobody, and notifying commits are
// serialised); once another node is live, it does again. Before its first
// heartbeat a node notifies.
func TestNoNotifyWhenAlone(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	s := openStore(t, dbURL)
	createEndpoint(t, s, newEndpoint("acme"))
	conn := rawConn(t, dbURL)
	if _, err := conn.Exec(t.Context(), "LISTEN "+notifyChannel); err != nil {
		t.Fatal(err)
	}
	notified := func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := conn.WaitForNotification(ctx)
		return err == nil
	}
	publish(t, s, newEvent("acme"), base)
	if !notified() {
		t.Fatal("before any heartbeat: no notification")
	}
	self := store.Node{ID: "node_a", HeartbeatInterval: time.Second, AttemptTimeout: time.Second}
	if _, err := s.Heartbeat(t.Context(), self); err != nil {
		t.Fatal(err)
	}
	publish(t, s, newEvent("acme"), base)
	if notified() {
		t.Fatal("alone in the cluster: a notification was sent")
	}
	other := openStore(t, dbURL)
	if _, err := other.Heartbeat(t.Context(), store.Node{ID: "node_b", HeartbeatInterval: time.Second, AttemptTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if live, err := s.Heartbeat(t.Context(), self); err != nil || len(live) != 2 {
		t.Fatalf("heartbeat: %v live, %v; want 2", live, err)
	}
	publish(t, s, newEvent("acme"), base)
	if !notified() {
		t.Fatal("with another live node: no notification")
	}
}

// seedShape gives SQL expressions of the series' i (1…n) and of $1
// (base) for the columns of seedDeliveries' rows.
type seedShape struct {
	tenant              string // of the events and deliveries; acme when empty
	state, due, updated string
	leased              string // a condition: the row is leased by "w" until a minute after base
}

// seedDeliveries inserts n events (of tenant acme unless rows says) and a delivery of each to
// endpoint ep, shaped by rows, and ANALYZEs the tables, for plan tests.
func seedDeliveries(t *testing.T, conn *pgx.Conn, ep string, n int, rows seedShape) {
	t.Helper()
	ctx := t.Context()
	tenant := rows.tenant
	if tenant == "" {
		tenant = "acme"
	}
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, tenant, type, occurred_at, body, fingerprint, created_at)
		SELECT 'evt_' || lpad(i::text, 8, '0'), $3, 't', $1, '{}', 'f', $1 FROM generate_series(1, $2::integer) AS i`, base, n, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, lease_owner, lease_until, created_at, updated_at)
		SELECT 'dlv_' || lpad(i::text, 8, '0'), 'evt_' || lpad(i::text, 8, '0'), $2, $4, 't', `+rows.state+`, `+rows.due+`,
		       CASE WHEN `+rows.leased+` THEN 'w' END, CASE WHEN `+rows.leased+` THEN $1::timestamptz + interval '1 minute' END,
		       $1, `+rows.updated+`
		FROM generate_series(1, $3::integer) AS i`, base, ep, n, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE deliveries, events"); err != nil {
		t.Fatal(err)
	}
}

// explainAnalyze runs query under EXPLAIN (ANALYZE, COSTS OFF) on q (a
// connection or a transaction) and returns the plan's text.
func explainAnalyze(t *testing.T, q querier, query string, args ...any) string {
	t.Helper()
	return explainPlan(t, q, "EXPLAIN (ANALYZE, COSTS OFF) ", query, args...)
}

// querier is a connection or a transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// explainPlan runs prefix+query on q and returns the plan's lines joined.
func explainPlan(t *testing.T, q querier, prefix, query string, args ...any) string {
	t.Helper()
	rows, err := q.Query(t.Context(), prefix+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(prefix), err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(prefix), err)
	}
	return strings.Join(lines, "\n")
}

// TestPoisoned runs storetest.Poisoned: a claim that meets a delivery
// whose event row does not decode (version_bodies is text; headers is
// jsonb, valid JSON but maybe not an object of strings) dead-letters it
// and returns the others.
func TestPoisoned(t *testing.T) {
	baseURL(t)
	key := make([]byte, secretbox.KeySize)
	rand.Read(key)
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Poisoned(t, func(t *testing.T) (store.Store, storetest.Corrupt) {
		s := openStore(t, newSchema(t), WithSecretBox(box))
		return s, func(t *testing.T, table, column, id, value string) {
			t.Helper()
			// The value as an untyped literal: the column's type parses it.
			q := fmt.Sprintf("UPDATE %s SET %s = '%s' WHERE id = $1", table, column, strings.ReplaceAll(value, "'", "''"))
			if _, err := s.pool.Exec(t.Context(), q, id); err != nil {
				t.Fatalf("set %s.%s of %s: %v", table, column, id, err)
			}
		}
	})
}
