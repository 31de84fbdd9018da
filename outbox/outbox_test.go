package outbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/outbox"
	"github.com/herald-webhooks/herald/webhook"
)

// The database tests need a PostgreSQL server: HERALD_TEST_POSTGRES_URL is
// the URL of a database the test user may connect to and CREATE DATABASE
// from (CI sets it). Every test gets its own database, dropped at its end.
const urlEnv = "HERALD_TEST_POSTGRES_URL"

const apiKey = "outbox-test-admin-key-0123456789abcdef"

// newDatabase creates an empty database and returns its URL.
func newDatabase(t *testing.T) string {
	t.Helper()
	admin := os.Getenv(urlEnv)
	if admin == "" {
		t.Skip(urlEnv + " is not set; skipping the PostgreSQL tests of the outbox (CI sets it)")
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "herald_outbox_" + hex.EncodeToString(rnd[:])
	adminExec(t, admin, "CREATE DATABASE "+name)
	t.Cleanup(func() { adminExec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	return u.String()
}

func adminExec(t *testing.T, admin, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", urlEnv, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Errorf("%s: %v", sql, err)
	}
}

// migrated returns a fresh database with Herald's tables, an application
// table "orders", and a pool on it (the application's).
func migrated(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	db := newDatabase(t)
	st, err := postgres.Open(t.Context(), db)
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	st.Close()
	return db, appPool(t, db)
}

func appPool(t *testing.T, db string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, cents integer NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return pool
}

// node is a Herald node running in this process on the database.
type node struct {
	t    *testing.T
	base string
}

func startNode(t *testing.T, db string) *node {
	t.Helper()
	var key [32]byte
	rand.Read(key[:])
	m, err := app.New(t.Context(), app.Config{
		Addr:           "127.0.0.1:0",
		DB:             db,
		EncryptionKey:  base64.StdEncoding.EncodeToString(key[:]),
		APIKey:         apiKey,
		Dev:            true,
		RetrySchedule:  []time.Duration{50 * time.Millisecond},
		RescueInterval: 200 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &node{t: t, base: "http://" + m.Addr()}
}

// call makes an API request and returns the status and the body.
func (n *node) call(method, path string, body any, hdr ...string) (int, []byte) {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.base+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

type endpoint struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

func (n *node) createEndpoint(body map[string]any) endpoint {
	n.t.Helper()
	st, raw := n.call("POST", "/v1/endpoints", body)
	if st != http.StatusCreated {
		n.t.Fatalf("create endpoint: %d %s", st, raw)
	}
	var ep endpoint
	if err := json.Unmarshal(raw, &ep); err != nil {
		n.t.Fatal(err)
	}
	return ep
}

// receiver records the requests it gets.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []arrival
	more chan struct{}
}

type arrival struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{more: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, arrival{req.Header.Clone(), b})
		r.mu.Unlock()
		select {
		case r.more <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) arrivals() []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]arrival(nil), r.got...)
}

// waitFor waits until n requests arrived.
func (r *receiver) waitFor(t *testing.T, n int, within time.Duration) []arrival {
	t.Helper()
	deadline := time.After(within)
	for {
		if got := r.arrivals(); len(got) >= n {
			return got
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("%d of %d requests arrived within %v", len(r.arrivals()), n, within)
		}
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestValidate(t *testing.T) {
	ok := outbox.Event{Tenant: "acme", Type: "order.placed", Data: json.RawMessage(`{"order_id":"o_1"}`)}
	if err := outbox.Validate(ok); err != nil {
		t.Fatalf("valid event: %v", err)
	}
	big := `{"blob":"` + strings.Repeat("x", 64<<10) + `"}`
	for _, tc := range []struct {
		name  string
		mod   func(*outbox.Event)
		field string
	}{
		{"empty tenant", func(e *outbox.Event) { e.Tenant = "" }, "Tenant"},
		{"tenant with space", func(e *outbox.Event) { e.Tenant = "ac me" }, "Tenant"},
		{"tenant too long", func(e *outbox.Event) { e.Tenant = strings.Repeat("a", 129) }, "Tenant"},
		// Reserved as in POST /v1/events: no forged provider events or
		// operational events through the outbox either.
		{"an inbound source's tenant", func(e *outbox.Event) { e.Tenant = "src_06h4kfnxjhypvf17c40098w9ww" }, "Tenant"},
		{"an inbound source's tenant in capitals", func(e *outbox.Event) { e.Tenant = "SRC_x" }, "Tenant"},
		{"an operational event type", func(e *outbox.Event) { e.Type = "endpoint.disabled" }, "Type"},
		{"a delivery event type in capitals", func(e *outbox.Event) { e.Type = "Delivery.dead_lettered" }, "Type"},
		{"Herald's test event type", func(e *outbox.Event) { e.Type = "herald.test" }, "Type"},
		{"empty type", func(e *outbox.Event) { e.Type = "" }, "Type"},
		{"type with empty segment", func(e *outbox.Event) { e.Type = "order..placed" }, "Type"},
		{"type ending in a dot", func(e *outbox.Event) { e.Type = "order." }, "Type"},
		{"type with a star", func(e *outbox.Event) { e.Type = "order.*" }, "Type"},
		{"type too long", func(e *outbox.Event) { e.Type = strings.Repeat("a", 129) }, "Type"},
		{"no data", func(e *outbox.Event) { e.Data = nil }, "Data"},
		{"data an array", func(e *outbox.Event) { e.Data = json.RawMessage(`[1]`) }, "Data"},
		{"data a string", func(e *outbox.Event) { e.Data = "{}" }, "Data"},
		{"data a number value", func(e *outbox.Event) { e.Data = 42 }, "Data"},
		{"data malformed", func(e *outbox.Event) { e.Data = []byte(`{"a":`) }, "Data"},
		{"data with trailing value", func(e *outbox.Event) { e.Data = []byte(`{"a":1} {}`) }, "Data"},
		{"data with a member twice", func(e *outbox.Event) { e.Data = []byte(`{"a":1,"a":2}`) }, "Data"},
		{"data not UTF-8", func(e *outbox.Event) { e.Data = []byte("{\"a\":\"\xff\"}") }, "Data"},
		// The API counts the request body's own object: {"data":{"a":[…]}}
		// with 63 arrays is 65 levels deep.
		{"data nested too deep", func(e *outbox.Event) {
			e.Data = []byte(`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`)
		}, "Data"},
		{"data with a number beyond float64", func(e *outbox.Event) { e.Data = []byte(`{"a":1e400}`) }, "Data"},
		{"data with a json.Number beyond float64", func(e *outbox.Event) { e.Data = map[string]any{"a": json.Number("-1e309")} }, "Data"},
		{"data unencodable", func(e *outbox.Event) { e.Data = map[string]any{"f": func() {}} }, "Data"},
		{"id with a dot", func(e *outbox.Event) { e.ID = "evt.1" }, "ID"},
		{"id with a slash", func(e *outbox.Event) { e.ID = "a/b" }, "ID"},
		{"id too long", func(e *outbox.Event) { e.ID = strings.Repeat("a", 129) }, "ID"},
		{"Herald's id", func(e *outbox.Event) { e.ID = "evt_op_x" }, "ID"},
		{"Herald's id in capitals", func(e *outbox.Event) { e.ID = "EVT_OP_x" }, "ID"},
		{"a test event's id", func(e *outbox.Event) { e.ID = "evt_test_06h4kfnxjhypvf17c40098w9ww" }, "ID"},
		{"Herald's 26-character id in capitals", func(e *outbox.Event) { e.ID = "EVT_06H4KFNXJHYPVF17C40098W9WW" }, "ID"},
		{"key too long", func(e *outbox.Event) { e.IdempotencyKey = strings.Repeat("k", 256) }, "IdempotencyKey"},
		{"key with a newline", func(e *outbox.Event) { e.IdempotencyKey = "a\nb" }, "IdempotencyKey"},
		{"too large", func(e *outbox.Event) { e.Data = []byte(big) }, "Data"},
		{"occurred_at before year 0 in UTC", func(e *outbox.Event) {
			e.OccurredAt = time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600))
		}, "OccurredAt"},
		{"occurred_at after year 9999 in UTC", func(e *outbox.Event) {
			e.OccurredAt = time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("", -3600))
		}, "OccurredAt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := ok
			tc.mod(&ev)
			err := outbox.Validate(ev)
			var ie *outbox.InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, outbox.ErrInvalid) {
				t.Fatalf("err = %v, want an *InvalidError", err)
			}
			if ie.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ie.Field, tc.field, err)
			}
			if errors.Is(err, outbox.ErrTooLarge) != (tc.name == "too large") {
				t.Errorf("ErrTooLarge match wrong: %v", err)
			}
		})
	}
	// Accepted forms of data, and the limits' edges.
	for _, d := range []any{
		json.RawMessage(" {\n\"a\": 1 } "),
		[]byte(`{}`),
		map[string]any{"order_id": "o_1", "html": "<b>&</b>"},
		struct {
			OrderID string `json:"order_id"`
		}{"o_1"},
		[]byte(`{"a":` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}`), // 64 levels with the request body's
		[]byte(`{"max":1.7976931348623157e308,"tiny":1e-400}`),                    // an underflow rounds to 0, as the API accepts it
	} {
		ev := ok
		ev.Data = d
		if err := outbox.Validate(ev); err != nil {
			t.Errorf("data %v: %v", d, err)
		}
	}
	edge := ok
	edge.Tenant, edge.ID, edge.IdempotencyKey = strings.Repeat("t", 128), strings.Repeat("i", 128), strings.Repeat("k", 255)
	edge.Type = "a_b-c.D9"
	edge.OccurredAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) // the first instant RFC 3339 can write
	if err := outbox.Validate(edge); err != nil {
		t.Errorf("edge values: %v", err)
	}
	// The cap is configurable, as --max-payload-bytes is.
	big2 := ok
	big2.Data = []byte(big)
	if _, err := (outbox.Publisher{MaxPayloadBytes: 128 << 10}).Publish(t.Context(), nil, big2); err == nil || errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("a larger cap should pass validation (and fail on the nil transaction): %v", err)
	}
}

// TestRollbackLeavesNothing: a rolled-back transaction leaves no event, no
// delivery and no notification, and nothing is delivered; a running node
// sees nothing.
func TestRollbackLeavesNothing(t *testing.T) {
	db, pool := migrated(t)
	n := startNode(t, db)
	rcv := newReceiver(t)
	n.createEndpoint(map[string]any{"tenant": "acme", "url": rcv.URL})

	listener := listen(t, db)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A failed check must not leave the connection held: the pool's
	// cleanup waits for every acquired connection.
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o_1', 100)"); err != nil {
		t.Fatal(err)
	}
	res, err := outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.placed", Data: map[string]any{"order_id": "o_1"}})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if res.Deliveries != 1 || res.Duplicate || !strings.HasPrefix(res.ID, "evt_") {
		t.Fatalf("result %+v", res)
	}
	// Inside the transaction the event exists; outside it does not.
	if got := countTx(t, tx, "SELECT count(*) FROM deliveries WHERE event_id = $1", res.ID); got != 1 {
		t.Fatalf("inside the transaction: %d deliveries", got)
	}
	// The node records its own operational events (endpoint.created) in the
	// same table, asynchronously: count only what this transaction wrote.
	if got := count(t, pool, "SELECT count(*) FROM events WHERE type = 'order.placed'"); got != 0 {
		t.Fatalf("an uncommitted event is visible outside its transaction: %d", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT count(*) FROM events WHERE type = 'order.placed'", "SELECT count(*) FROM deliveries", "SELECT count(*) FROM orders"} {
		if got := count(t, pool, q); got != 0 {
			t.Errorf("%s = %d after rollback", q, got)
		}
	}
	if st, raw := n.call("GET", "/v1/events/"+res.ID, nil); st != http.StatusNotFound {
		t.Errorf("GET the rolled-back event: %d %s", st, raw)
	}
	if listener.wait(500 * time.Millisecond) {
		t.Error("a rolled-back publish sent a notification")
	}
	// Longer than the engine's poll interval (1 s): nothing arrives.
	time.Sleep(1500 * time.Millisecond)
	if got := rcv.arrivals(); len(got) != 0 {
		t.Fatalf("%d requests arrived for a rolled-back event", len(got))
	}
}

func countTx(t *testing.T, tx pgx.Tx, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// notifications is a LISTEN herald_deliveries connection.
type notifications struct {
	t    *testing.T
	conn *pgx.Conn
}

func listen(t *testing.T, db string) *notifications {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "LISTEN herald_deliveries"); err != nil {
		t.Fatal(err)
	}
	return &notifications{t: t, conn: conn}
}

// wait reports whether a notification arrives within d.
func (n *notifications) wait(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(n.t.Context(), d)
	defer cancel()
	_, err := n.conn.WaitForNotification(ctx)
	return err == nil
}

// TestCommitIsDelivered: the application's change and the event commit
// together; the event fans out exactly as POST /v1/events would (filters,
// held deliveries of a paused endpoint), a notification wakes the node on
// commit and not before, and the endpoints receive the signed body.
func TestCommitIsDelivered(t *testing.T) {
	db, pool := migrated(t)
	n := startNode(t, db)
	all, orders, other := newReceiver(t), newReceiver(t), newReceiver(t)
	epAll := n.createEndpoint(map[string]any{"tenant": "acme", "url": all.URL})
	epOrders := n.createEndpoint(map[string]any{"tenant": "acme", "url": orders.URL, "event_types": []string{"order.*"}})
	n.createEndpoint(map[string]any{"tenant": "acme", "url": other.URL, "event_types": []string{"file.*"}})
	paused := n.createEndpoint(map[string]any{"tenant": "acme", "url": other.URL})
	if st, raw := n.call("POST", "/v1/endpoints/"+paused.ID+"/pause", nil); st >= 300 {
		t.Fatalf("pause: %d %s", st, raw)
	}
	n.createEndpoint(map[string]any{"tenant": "globex", "url": other.URL})

	listener := listen(t, db)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o_2', 4200)"); err != nil {
		t.Fatal(err)
	}
	occurred := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	res, err := outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.placed", ID: "ord_o_2-placed",
		Data: map[string]any{"order_id": "o_2", "version": 1, "note": "<&>"}, OccurredAt: occurred})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if res != (outbox.Result{ID: "ord_o_2-placed", Deliveries: 3}) {
		t.Fatalf("result %+v, want 3 deliveries (two matching endpoints and one held)", res)
	}
	// Nothing is claimable, and nobody is woken, before the commit.
	if listener.wait(300 * time.Millisecond) {
		t.Fatal("notified before the commit")
	}
	if got := len(all.arrivals()); got != 0 {
		t.Fatalf("%d requests before the commit", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !listener.wait(5 * time.Second) {
		t.Fatal("no notification after the commit")
	}

	want := `{"id":"ord_o_2-placed","type":"order.placed","tenant":"acme","occurred_at":"2025-03-01T11:00:00.123456Z","data":{"note":"<&>","order_id":"o_2","version":1}}`
	for _, r := range []struct {
		rcv *receiver
		ep  endpoint
	}{{all, epAll}, {orders, epOrders}} {
		got := r.rcv.waitFor(t, 1, 10*time.Second)[0]
		if string(got.body) != want {
			t.Errorf("body\n got %s\nwant %s", got.body, want)
		}
		if id := got.header.Get("X-Event-Id"); id != res.ID {
			t.Errorf("X-Event-Id %q", id)
		}
		if typ := got.header.Get("X-Event-Type"); typ != "order.placed" {
			t.Errorf("X-Event-Type %q", typ)
		}
		v := webhook.Verifier{Secrets: []string{r.ep.Secret}}
		if err := v.Verify(got.header, got.body); err != nil {
			t.Errorf("signature: %v", err)
		}
	}
	// The delivery states as the API shows them.
	waitStates(t, n, res.ID, map[string]int{"succeeded": 2, "paused": 1})
	if got := len(other.arrivals()); got != 0 {
		t.Errorf("%d requests to endpoints that should not get the event", got)
	}
	if got := count(t, pool, "SELECT count(*) FROM orders WHERE id = 'o_2'"); got != 1 {
		t.Errorf("the application's row: %d", got)
	}
	// Resuming the paused endpoint releases the held delivery.
	if st, raw := n.call("POST", "/v1/endpoints/"+paused.ID+"/resume", nil); st >= 300 {
		t.Fatalf("resume: %d %s", st, raw)
	}
	other.waitFor(t, 1, 10*time.Second)
	waitStates(t, n, res.ID, map[string]int{"succeeded": 3})
}

func waitStates(t *testing.T, n *node, eventID string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, raw := n.call("GET", "/v1/events/"+eventID+"/deliveries?tenant=acme", nil) // a producer-chosen id is per tenant
		if st != http.StatusOK {
			t.Fatalf("deliveries: %d %s", st, raw)
		}
		var ds struct{ Data []struct{ State string } }
		json.Unmarshal(raw, &ds)
		got := map[string]int{}
		for _, d := range ds.Data {
			got[d.State]++
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery states %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSameAsAPI: the outbox and POST /v1/events store the same body,
// fingerprint and idempotency records, so each recognises the other's
// events.
func TestSameAsAPI(t *testing.T) {
	db, pool := migrated(t)
	n := startNode(t, db)
	rcv := newReceiver(t)
	n.createEndpoint(map[string]any{"tenant": "acme", "url": rcv.URL})
	ctx := t.Context()
	data := `{"order_id":"o_3","lines":[1,2.50,"é\u00e9"],"nested":{"b":true,"a":null}}`
	occurred := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)

	publish := func(ev outbox.Event) (outbox.Result, error) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		res, err := outbox.Publish(ctx, tx, ev)
		if err != nil {
			return res, err
		}
		return res, tx.Commit(ctx)
	}

	// The same event through both: the same delivered bytes, but the id.
	ob, err := publish(outbox.Event{Tenant: "acme", Type: "order.placed", ID: "ob-1", Data: json.RawMessage(data), OccurredAt: occurred})
	if err != nil || ob != (outbox.Result{ID: "ob-1", Deliveries: 1}) {
		t.Fatalf("outbox publish: %+v %v", ob, err)
	}
	st, raw := n.call("POST", "/v1/events", map[string]any{"tenant": "acme", "type": "order.placed", "id": "api-1",
		"data": json.RawMessage(data), "occurred_at": occurred})
	if st != http.StatusAccepted {
		t.Fatalf("API publish: %d %s", st, raw)
	}
	body := func(id string) string {
		var b []byte
		if err := pool.QueryRow(ctx, "SELECT body FROM events WHERE id = $1", "acme~"+id).Scan(&b); err != nil { // producer ids are stored under their tenant (store.EventKey)
			t.Fatal(err)
		}
		return string(b)
	}
	fingerprint := func(id string) string {
		var f string
		if err := pool.QueryRow(ctx, "SELECT fingerprint FROM events WHERE id = $1", "acme~"+id).Scan(&f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if a, b := body("ob-1"), strings.Replace(body("api-1"), `"id":"api-1"`, `"id":"ob-1"`, 1); a != b {
		t.Errorf("bodies differ:\noutbox %s\n   API %s", a, b)
	}
	if fingerprint("ob-1") != fingerprint("api-1") {
		t.Error("fingerprints differ")
	}

	// The API recognises the outbox's event by id…
	st, raw = n.call("POST", "/v1/events", map[string]any{"tenant": "acme", "type": "order.placed", "id": "ob-1", "data": json.RawMessage(data)})
	if st != http.StatusOK || !strings.Contains(string(raw), `"duplicate":true`) || !strings.Contains(string(raw), `"deliveries":1`) {
		t.Errorf("API publish of the outbox's id: %d %s", st, raw)
	}
	st, raw = n.call("POST", "/v1/events", map[string]any{"tenant": "acme", "type": "order.placed", "id": "ob-1", "data": map[string]any{"order_id": "other"}})
	if st != http.StatusConflict {
		t.Errorf("API publish of the outbox's id with other data: %d %s", st, raw)
	}
	// …and the outbox the API's, by id and by Idempotency-Key.
	res, err := publish(outbox.Event{Tenant: "acme", Type: "order.placed", ID: "api-1", Data: json.RawMessage(data)})
	if err != nil || res != (outbox.Result{ID: "api-1", Deliveries: 1, Duplicate: true}) {
		t.Errorf("outbox publish of the API's id: %+v %v", res, err)
	}
	st, raw = n.call("POST", "/v1/events", map[string]any{"tenant": "acme", "type": "order.paid", "data": map[string]any{"order_id": "o_3"}}, "Idempotency-Key", "pay-o_3")
	if st != http.StatusAccepted {
		t.Fatalf("API publish with a key: %d %s", st, raw)
	}
	var keyed struct{ ID string }
	json.Unmarshal(raw, &keyed)
	res, err = publish(outbox.Event{Tenant: "acme", Type: "order.paid", IdempotencyKey: "pay-o_3", Data: map[string]any{"order_id": "o_3"}})
	if err != nil || res != (outbox.Result{ID: keyed.ID, Deliveries: 1, Duplicate: true}) {
		t.Errorf("outbox publish with the API's key: %+v %v, want the API's event %s", res, err, keyed.ID)
	}
	// The key is per tenant.
	res, err = publish(outbox.Event{Tenant: "globex", Type: "order.paid", IdempotencyKey: "pay-o_3", Data: map[string]any{"order_id": "o_3"}})
	if err != nil || res.Duplicate || res.ID == keyed.ID {
		t.Errorf("the same key for another tenant: %+v %v", res, err)
	}

	// A conflict leaves the transaction usable: the application's change
	// still commits, without the event.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.paid", IdempotencyKey: "pay-o_3", Data: map[string]any{"order_id": "o_4"}})
	if !errors.Is(err, outbox.ErrConflict) || !strings.Contains(err.Error(), "pay-o_3") {
		t.Fatalf("reused key with other data: %v", err)
	}
	_, err = outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.placed", ID: "api-1", Data: map[string]any{"order_id": "o_4"}})
	if !errors.Is(err, outbox.ErrConflict) || !strings.Contains(err.Error(), "api-1") {
		t.Fatalf("reused id with other data: %v", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o_4', 1)"); err != nil {
		t.Fatalf("the transaction is not usable after a conflict: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, pool, "SELECT count(*) FROM orders WHERE id = 'o_4'"); got != 1 {
		t.Error("the application's change was lost")
	}
	// Everything created was delivered once: ob-1, api-1, the keyed event.
	rcv.waitFor(t, 3, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	if got := len(rcv.arrivals()); got != 3 {
		t.Errorf("%d requests, want 3 (duplicates deliver nothing new)", got)
	}
}

// TestCataloguedTypeRefused: the outbox checks no schema, version or
// sequence number, so an event type in the catalog (or a name differing
// from one only in case, which the API refuses too) is refused as invalid,
// nothing is stored, and the transaction stays usable; an uncatalogued
// type still publishes.
func TestCataloguedTypeRefused(t *testing.T) {
	db, pool := migrated(t)
	n := startNode(t, db)
	ctx := t.Context()
	st, raw := n.call("POST", "/v1/event-types", map[string]any{"name": "file.updated", "resource_id": "/file_id",
		"versions": []any{map[string]any{"version": 1, "schema": map[string]any{"type": "object", "required": []string{"file_id"}}}}})
	if st != http.StatusCreated {
		t.Fatalf("catalogue file.updated: %d %s", st, raw)
	}
	for i, typ := range []string{"file.updated", "File.Updated"} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Data the schema refuses: the API answers 422 for it.
		_, err = outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: typ, Data: map[string]any{"name": "x"}})
		var ie *outbox.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, outbox.ErrInvalid) || ie.Field != "Type" || !strings.Contains(ie.Rule, "event catalog") {
			t.Errorf("%s: %v, want an *InvalidError for Type naming the catalog", typ, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ($1, 1)", fmt.Sprintf("o_cat_%d", i)); err != nil {
			t.Errorf("%s: transaction unusable: %v", typ, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Error(err)
		}
	}
	if got := count(t, pool, "SELECT count(*) FROM events"); got != 0 {
		t.Errorf("%d events stored, want none", got)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "file.created", Data: map[string]any{"name": "x"}}); err != nil {
		t.Errorf("an uncatalogued type: %v", err)
	}
}

// TestIsolationLevel: a REPEATABLE READ or SERIALIZABLE transaction is
// refused before anything is written, and stays usable.
func TestIsolationLevel(t *testing.T) {
	_, pool := migrated(t)
	ctx := t.Context()
	for _, level := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: level})
		if err != nil {
			t.Fatal(err)
		}
		_, err = outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.placed", Data: []byte(`{}`)})
		if !errors.Is(err, outbox.ErrIsolation) {
			t.Errorf("%s: %v, want ErrIsolation", level, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ('o_'||$1::text, 1)", string(level)); err != nil {
			t.Errorf("%s: transaction unusable: %v", level, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Error(err)
		}
	}
	if got := count(t, pool, "SELECT count(*) FROM events"); got != 0 {
		t.Errorf("%d events", got)
	}
	// READ COMMITTED explicitly, and a read-write default, work.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.placed", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	tx.Commit(ctx)
}

// TestConcurrentSameID: a second transaction publishing an id that an open
// transaction has published waits for it; it creates the event if the
// first rolls back and answers with the first's if it commits.
func TestConcurrentSameID(t *testing.T) {
	_, pool := migrated(t)
	ctx := t.Context()
	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("first commits=%v", commit), func(t *testing.T) {
			ev := outbox.Event{Tenant: "acme", Type: "order.placed", ID: fmt.Sprintf("same-%v", commit), Data: []byte(`{"n":1}`)}
			first, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Rollback(ctx)
			if res, err := outbox.Publish(ctx, first, ev); err != nil || res.Duplicate {
				t.Fatalf("first: %+v %v", res, err)
			}
			type answer struct {
				res outbox.Result
				err error
			}
			second := make(chan answer, 1)
			go func() {
				tx, err := pool.Begin(ctx)
				if err != nil {
					second <- answer{err: err}
					return
				}
				defer tx.Rollback(ctx)
				res, err := outbox.Publish(ctx, tx, ev)
				if err == nil {
					err = tx.Commit(ctx)
				}
				second <- answer{res, err}
			}()
			select {
			case a := <-second:
				t.Fatalf("the second publish did not wait for the first transaction: %+v %v", a.res, a.err)
			case <-time.After(300 * time.Millisecond):
			}
			if commit {
				err = first.Commit(ctx)
			} else {
				err = first.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			a := <-second
			if a.err != nil || a.res.Duplicate != commit || a.res.ID != ev.ID {
				t.Fatalf("second: %+v %v (duplicate should be %v)", a.res, a.err, commit)
			}
			if got := count(t, pool, "SELECT count(*) FROM events WHERE id = $1", "acme~"+ev.ID); got != 1 {
				t.Fatalf("%d events", got)
			}
		})
	}
}

// TestDatabaseErrorAbortsTransaction: an error from the database (here: no
// Herald tables, Herald never ran on the database) is returned with the
// PostgreSQL error in the chain.
func TestDatabaseErrorAbortsTransaction(t *testing.T) {
	db := newDatabase(t)
	pool := appPool(t, db)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = outbox.Publish(ctx, tx, outbox.Event{Tenant: "acme", Type: "order.placed", Data: []byte(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "42P01") {
		t.Fatalf("err = %v, want undefined_table", err)
	}
	if errors.Is(err, outbox.ErrInvalid) || errors.Is(err, outbox.ErrConflict) {
		t.Errorf("a database error matches a validation sentinel: %v", err)
	}
}

// TestExample runs the package example's code against a node.
func TestExample(t *testing.T) {
	db, pool := migrated(t)
	n := startNode(t, db)
	rcv := newReceiver(t)
	n.createEndpoint(map[string]any{"tenant": "acme", "url": rcv.URL, "event_types": []string{"order.*"}})
	res, err := placeOrder(t.Context(), pool, "ord_1001", 4200)
	if err != nil || res.Deliveries != 1 {
		t.Fatalf("placeOrder: %+v %v", res, err)
	}
	// Placing it again is an error of the application (duplicate order),
	// and changes nothing.
	if _, err := placeOrder(t.Context(), pool, "ord_1001", 4200); err == nil {
		t.Fatal("placing an order twice succeeded")
	}
	got := rcv.waitFor(t, 1, 10*time.Second)
	if !strings.Contains(string(got[0].body), `"data":{"order_id":"ord_1001","total_cents":4200,"version":1}`) {
		t.Errorf("body %s", got[0].body)
	}
	time.Sleep(300 * time.Millisecond)
	if len(rcv.arrivals()) != 1 {
		t.Errorf("%d requests", len(rcv.arrivals()))
	}
}
