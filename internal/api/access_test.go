package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// adminKey is the configured admin key (HERALD_API_KEY) of these tests.
const adminKey = "access-test-admin-key-0123456789abcdef"

type okTester struct{}

func (okTester) SendTest(_ context.Context, ep store.Endpoint) (store.Attempt, string, error) {
	return store.Attempt{Number: 1, StatusCode: 200, ResponseExcerpt: "ok"}, store.NewID("evt_test"), nil
}

// world is a Herald API over a real SQLite store with two tenants, acme (A)
// and bravo (B), each with an endpoint, an event with the producer id
// "inv-1", a dead delivery with one attempt; and one inbound source.
type world struct {
	t   *testing.T
	st  store.Store
	srv *api.Server

	mu  sync.Mutex
	now time.Time

	// Tenant A's records, used in the paths of the matrix.
	epA, evA, dlvA string
	// Tenant B's records, and strings that only B's records contain.
	epB, evB, dlvB string
	markersB       []string
	srcID          string
}

func (w *world) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *world) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

func newWorld(t *testing.T, cfg func(*api.Config)) *world {
	t.Helper()
	st := openStore(t)
	w := &world{t: t, st: st, now: time.Now().UTC().Truncate(time.Microsecond)}
	eg := newEgress(t) // the real endpoint URL policy
	c := api.Config{Store: st, URLs: eg, Tester: okTester{}, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)}, Now: w.clock,
		AuthFailureBurst: 1 << 20, PublicURL: "https://herald.example", Logger: slog.New(slog.DiscardHandler),
		Contract: map[string]string{"delivery": "at least once"}} // so GET /contract is served and documented
	if cfg != nil {
		cfg(&c)
	}
	var err error
	w.srv, err = api.New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"acme", "bravo"} {
		var ep struct{ ID, Secret string }
		w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"`+tn+`","url":"https://`+tn+`-receiver.example/hook"}`, 201, &ep)
		var ev struct{ ID string }
		w.mustCall(adminKey, "POST", "/v1/events", `{"tenant":"`+tn+`","type":"order.placed","id":"inv-1","data":{"note":"`+tn+`-private-data"}}`, 202, &ev)
		var ev2 struct{ ID string }
		w.mustCall(adminKey, "POST", "/v1/events", `{"tenant":"`+tn+`","type":"order.placed","data":{"note":"`+tn+`-private-data-2"}}`, 202, &ev2)
		if tn == "acme" {
			w.epA, w.evA = ep.ID, ev2.ID
		} else {
			w.epB, w.evB = ep.ID, ev2.ID
			w.markersB = append(w.markersB, ep.ID, ep.Secret, "bravo-receiver", "bravo-private-data", ev2.ID)
		}
	}
	// Every delivery is attempted once and dead-lettered.
	now := w.clock()
	claims, err := st.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "test", Limit: 100, Lease: time.Minute, Now: now})
	if err != nil || len(claims) != 4 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}
	var cs []store.Completion
	for _, c := range claims {
		cs = append(cs, store.Completion{DeliveryID: c.Delivery.ID, EndpointID: c.Endpoint.ID, Owner: "test", LeaseUntil: c.Delivery.LeaseUntil, State: store.DeliveryDead, Now: now,
			Attempt: store.Attempt{DeliveryID: c.Delivery.ID, Number: 1, StartedAt: now, StatusCode: 500, ResponseExcerpt: c.Endpoint.Tenant + "-attempt-excerpt"}})
		if c.Endpoint.Tenant == "acme" {
			w.dlvA = c.Delivery.ID
		} else {
			w.dlvB = c.Delivery.ID
			w.markersB = append(w.markersB, c.Delivery.ID)
		}
	}
	if err := st.CompleteDeliveries(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	w.markersB = append(w.markersB, "bravo-attempt-excerpt")
	var src struct{ ID string }
	w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"stripe","scheme":"stripe","secrets":["whsec_provider_0123"],"destination_url":"http://10.0.0.1/in"}`, 201, &src)
	w.srcID = src.ID
	return w
}

// call sends one request as key ("" sends no Authorization header) from
// addr ("" = 192.0.2.1).
func (w *world) call(key, method, path, body string) (int, []byte) {
	return w.callFrom("192.0.2.1", key, method, path, body)
}

func (w *world) callFrom(addr, key, method, path, body string) (int, []byte) {
	rec := w.request(addr, key, method, path, body)
	return rec.Code, rec.Body.Bytes()
}

// rawCall is callFrom without a body, answering the recorder (headers).
func (w *world) rawCall(addr, key, method, path string) *httptest.ResponseRecorder {
	return w.request(addr, key, method, path, "")
}

func (w *world) request(addr, key, method, path, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, path, nil)
	}
	r.RemoteAddr = addr + ":40000"
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	w.srv.ServeHTTP(rec, r)
	return rec
}

func (w *world) mustCall(key, method, path, body string, want int, out any) {
	w.t.Helper()
	st, raw := w.call(key, method, path, body)
	if st != want {
		w.t.Fatalf("%s %s: %d %s, want %d", method, path, st, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			w.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

// newKey creates an API key through the API and returns its secret and id.
func (w *world) newKey(role, tenant, expires string) (secret, id string) {
	w.t.Helper()
	b := map[string]any{"name": role + " " + tenant, "role": role}
	if tenant != "" {
		b["tenant"] = tenant
	}
	if expires != "" {
		b["expires_at"] = expires
	}
	raw, _ := json.Marshal(b)
	var out struct{ ID, Key string }
	w.mustCall(adminKey, "POST", "/v1/api-keys", string(raw), 201, &out)
	return out.Key, out.ID
}

func (w *world) portal(tenant, role string, ttl int) string {
	w.t.Helper()
	var out struct{ Token, URL string }
	raw, _ := json.Marshal(map[string]any{"tenant": tenant, "role": role, "ttl_seconds": ttl})
	w.mustCall(adminKey, "POST", "/v1/portal-sessions", string(raw), 201, &out)
	if out.URL != "https://herald.example/ui/portal#token="+out.Token {
		w.t.Fatalf("portal url %q", out.URL)
	}
	return out.Token
}

// cred is one column of the access matrix.
type cred struct {
	name string
	key  string
	role string // "" for credentials that must be refused (401)
}

// route is one row of the access matrix: how to call an operation on
// tenant A's records (pathA, body) and on tenant B's (pathB, bodyB; a
// tenant-A credential gets 404 for B's ids and 403 for naming tenant B).
// prep, when set, makes fresh records for a destructive call and returns
// (pathA, pathB).
type route struct {
	roles       string // who may call it besides admin: M(anager), P(ublisher), V(iewer); * every caller, no key needed
	method      string
	pathA, body string
	ok          int // status of an allowed call
	pathB       string
	bodyB       string
	statusB     int // for an allowed tenant-A credential: 404 (B's id) or 403 (B named)
	prep        func(w *world) (string, string)
	mkBody      func() string // when set, the body of each call (bodies that create unique records)
}

// matrix has one row per operation of the OpenAPI document, by operation
// id. A new route needs a row here: TestAccessMatrix fails otherwise.
func matrix(w *world) map[string]route {
	newEndpoints := func(w *world) (string, string) {
		var a, b struct{ ID string }
		w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://acme-receiver.example/2"}`, 201, &a)
		w.mustCall(adminKey, "POST", "/v1/endpoints", `{"tenant":"bravo","url":"https://bravo-receiver.example/2"}`, 201, &b)
		return "/v1/endpoints/" + a.ID, "/v1/endpoints/" + b.ID
	}
	// oldSecrets rotates a fresh endpoint of each tenant and returns the
	// paths of their previous secrets, kept by the overlap.
	oldSecrets := func(w *world) (string, string) {
		a, b := newEndpoints(w)
		var paths [2]string
		for i, ep := range []string{a, b} {
			var list struct{ Data []struct{ ID string } }
			w.mustCall(adminKey, "GET", ep+"/secrets", "", 200, &list)
			w.mustCall(adminKey, "POST", ep+"/rotate-secret", `{"overlap_seconds":3600}`, 200, nil)
			paths[i] = ep + "/secrets/" + list.Data[0].ID
		}
		return paths[0], paths[1]
	}
	return map[string]route{
		"list-endpoint-secrets":    {roles: "M", method: "GET", pathA: "/v1/endpoints/" + w.epA + "/secrets", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/secrets", statusB: 404},
		"revoke-endpoint-secret":   {roles: "M", method: "DELETE", ok: 204, statusB: 404, prep: oldSecrets},
		"create-endpoint":          {roles: "M", method: "POST", pathA: "/v1/endpoints", body: `{"tenant":"acme","url":"https://acme-receiver.example/new"}`, ok: 201, pathB: "/v1/endpoints", bodyB: `{"tenant":"bravo","url":"https://x.example/"}`, statusB: 403},
		"list-endpoints":           {roles: "MV", method: "GET", pathA: "/v1/endpoints", ok: 200, pathB: "/v1/endpoints?tenant=bravo", statusB: 403},
		"get-endpoint-stats":       {roles: "MV", method: "GET", pathA: "/v1/endpoints/" + w.epA + "/stats?window=1h", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/stats", statusB: 404},
		"get-endpoint":             {roles: "MV", method: "GET", pathA: "/v1/endpoints/" + w.epA, ok: 200, pathB: "/v1/endpoints/" + w.epB, statusB: 404},
		"update-endpoint":          {roles: "M", method: "PATCH", pathA: "/v1/endpoints/" + w.epA, body: `{"description":"changed"}`, ok: 200, pathB: "/v1/endpoints/" + w.epB, bodyB: `{"description":"changed"}`, statusB: 404},
		"delete-endpoint":          {roles: "M", method: "DELETE", ok: 204, statusB: 404, prep: newEndpoints},
		"get-endpoint-secret":      {roles: "M", method: "GET", pathA: "/v1/endpoints/" + w.epA + "/secret", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/secret", statusB: 404},
		"rotate-endpoint-secret":   {roles: "M", method: "POST", pathA: "/v1/endpoints/" + w.epA + "/rotate-secret", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/rotate-secret", statusB: 404},
		"test-endpoint":            {roles: "M", method: "POST", pathA: "/v1/endpoints/" + w.epA + "/test", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/test", statusB: 404},
		"pause-endpoint":           {roles: "M", method: "POST", pathA: "/v1/endpoints/" + w.epA + "/pause", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/pause", statusB: 404},
		"resume-endpoint":          {roles: "M", method: "POST", pathA: "/v1/endpoints/" + w.epA + "/resume", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/resume", statusB: 404},
		"enable-endpoint":          {roles: "M", method: "POST", pathA: "/v1/endpoints/" + w.epA + "/enable", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/enable", statusB: 404},
		"list-endpoint-deliveries": {roles: "MV", method: "GET", pathA: "/v1/endpoints/" + w.epA + "/deliveries", ok: 200, pathB: "/v1/endpoints/" + w.epB + "/deliveries", statusB: 404},
		"replay-endpoint":          {roles: "M", method: "POST", pathA: "/v1/endpoints/" + w.epA + "/replay", body: `{"state":"dead"}`, bodyB: `{"state":"dead"}`, ok: 200, pathB: "/v1/endpoints/" + w.epB + "/replay", statusB: 404},

		"publish-event":         {roles: "P", method: "POST", pathA: "/v1/events", body: `{"tenant":"acme","type":"order.placed","data":{}}`, ok: 202, pathB: "/v1/events", bodyB: `{"tenant":"bravo","type":"order.placed","data":{}}`, statusB: 403},
		"list-events":           {roles: "MPV", method: "GET", pathA: "/v1/events", ok: 200, pathB: "/v1/events?tenant=bravo", statusB: 403},
		"get-event":             {roles: "MPV", method: "GET", pathA: "/v1/events/inv-1?tenant=acme", ok: 200, pathB: "/v1/events/" + w.evB, statusB: 404},
		"list-event-deliveries": {roles: "MV", method: "GET", pathA: "/v1/events/" + w.evA + "/deliveries", ok: 200, pathB: "/v1/events/" + w.evB + "/deliveries", statusB: 404},

		"get-delivery":           {roles: "MV", method: "GET", pathA: "/v1/deliveries/" + w.dlvA, ok: 200, pathB: "/v1/deliveries/" + w.dlvB, statusB: 404},
		"list-delivery-attempts": {roles: "MV", method: "GET", pathA: "/v1/deliveries/" + w.dlvA + "/attempts", ok: 200, pathB: "/v1/deliveries/" + w.dlvB + "/attempts", statusB: 404},
		"replay-delivery":        {roles: "M", method: "POST", pathA: "/v1/deliveries/" + w.dlvA + "/replay", ok: 200, pathB: "/v1/deliveries/" + w.dlvB + "/replay", statusB: 404},
		"redeliver-delivery":     {roles: "M", method: "POST", pathA: "/v1/deliveries/" + w.dlvA + "/redeliver", ok: 200, pathB: "/v1/deliveries/" + w.dlvB + "/redeliver", statusB: 404},
		"list-deliveries":        {roles: "MV", method: "GET", pathA: "/v1/deliveries", ok: 200, pathB: "/v1/deliveries?tenant=bravo", statusB: 403},
		"dead-letter-counts":     {roles: "MV", method: "GET", pathA: "/v1/dead-letters", ok: 200, pathB: "/v1/dead-letters?tenant=bravo", statusB: 403},

		"create-source": {roles: "", method: "POST", pathA: "/v1/sources", body: `{"name":"gh","scheme":"github","secrets":["s3cret-provider-0123"],"destination_url":"http://10.0.0.2/in"}`, ok: 201},
		"list-sources":  {roles: "", method: "GET", pathA: "/v1/sources", ok: 200},
		"get-source":    {roles: "", method: "GET", pathA: "/v1/sources/" + w.srcID, ok: 200},
		"update-source": {roles: "", method: "PATCH", pathA: "/v1/sources/" + w.srcID, body: `{"name":"renamed"}`, ok: 200},
		"delete-source": {roles: "", method: "DELETE", ok: 204, prep: func(w *world) (string, string) {
			var src struct{ ID string }
			w.mustCall(adminKey, "POST", "/v1/sources", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.3/in"}`, 201, &src)
			return "/v1/sources/" + src.ID, ""
		}},

		"create-event-type": {roles: "", method: "POST", pathA: "/v1/event-types", ok: 201, mkBody: func() string {
			catalogN++
			return `{"name":"zz.access.t` + itoa(catalogN) + `","versions":[{"version":1,"schema":{"type":"object"}}]}`
		}},
		"list-event-types": {roles: "MPV", method: "GET", pathA: "/v1/event-types", ok: 200},
		"get-event-type": {roles: "MPV", method: "GET", ok: 200, prep: func(w *world) (string, string) {
			return "/v1/event-types/" + w.newEventType(), ""
		}},
		"add-event-type-version": {roles: "", method: "POST", ok: 201, body: `{"version":2,"schema":{"type":"object"}}`, prep: func(w *world) (string, string) {
			return "/v1/event-types/" + w.newEventType() + "/versions", ""
		}},
		"update-event-type": {roles: "", method: "PATCH", ok: 200, body: `{"description":"changed"}`, prep: func(w *world) (string, string) {
			return "/v1/event-types/" + w.newEventType(), ""
		}},

		"create-api-key": {roles: "", method: "POST", pathA: "/v1/api-keys", body: `{"name":"n","role":"viewer","tenant":"acme"}`, ok: 201},
		"list-api-keys":  {roles: "", method: "GET", pathA: "/v1/api-keys", ok: 200},
		"revoke-api-key": {roles: "", method: "DELETE", ok: 204, prep: func(w *world) (string, string) {
			_, id := w.newKey(store.RoleViewer, "acme", "")
			return "/v1/api-keys/" + id, ""
		}},
		"create-portal-session": {roles: "", method: "POST", pathA: "/v1/portal-sessions", body: `{"tenant":"acme","role":"viewer","ttl_seconds":600}`, ok: 201},
		"list-portal-sessions":  {roles: "", method: "GET", pathA: "/v1/portal-sessions", ok: 200},
		"revoke-portal-session": {roles: "", method: "DELETE", ok: 204, prep: func(w *world) (string, string) {
			var out struct{ ID string }
			w.mustCall(adminKey, "POST", "/v1/portal-sessions", `{"tenant":"acme","role":"viewer"}`, 201, &out)
			return "/v1/portal-sessions/" + out.ID, ""
		}},

		// Outside /v1/: answered to every caller, with or without a key
		// (a wrong, expired or revoked one is not looked at).
		"get-health":    {roles: "*", method: "GET", pathA: "/healthz", ok: 200},
		"get-readiness": {roles: "*", method: "GET", pathA: "/readyz", ok: 200},
		"get-contract":  {roles: "*", method: "GET", pathA: "/contract", ok: 200},
	}
}

// TestAccessMatrix drives every operation of the OpenAPI document with
// every kind of credential and asserts the exact status; for tenant A's
// credentials it also asserts that no answer carries a byte of tenant B's
// records, and that B's ids answer exactly like unknown ids.
func TestAccessMatrix(t *testing.T) {
	w := newWorld(t, nil)
	expiresSoon := w.clock().Add(time.Hour).Format(time.RFC3339Nano)
	expiredKey, _ := w.newKey(store.RoleManager, "acme", expiresSoon)
	revokedKey, revokedID := w.newKey(store.RoleManager, "acme", "")
	w.mustCall(adminKey, "DELETE", "/v1/api-keys/"+revokedID, "", 204, nil)
	storedAdmin, _ := w.newKey(store.RoleAdmin, "", "")
	manager, _ := w.newKey(store.RoleManager, "acme", "")
	publisher, _ := w.newKey(store.RolePublisher, "acme", "")
	viewer, _ := w.newKey(store.RoleViewer, "acme", "")
	portal := w.portal("acme", store.RoleManager, 7*24*3600)
	expiredPortal := w.portal("acme", store.RoleViewer, 60)
	w.advance(2 * time.Hour) // past expiredKey and expiredPortal

	creds := []cred{
		{"no key", "", ""},
		{"wrong key", api.APIKeyPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ""},
		{"expired key", expiredKey, ""},
		{"revoked key", revokedKey, ""},
		{"expired portal token", expiredPortal, ""},
		{"admin (HERALD_API_KEY)", adminKey, store.RoleAdmin},
		{"admin (stored key)", storedAdmin, store.RoleAdmin},
		{"manager of A", manager, store.RoleManager},
		{"publisher of A", publisher, store.RolePublisher},
		{"viewer of A", viewer, store.RoleViewer},
		{"portal token of A (manager)", portal, store.RoleManager},
	}

	rows := matrix(w)
	seen := map[string]bool{}
	for path, item := range w.srv.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op == nil {
				continue
			}
			seen[op.OperationID] = true
			r, ok := rows[op.OperationID]
			if !ok {
				t.Errorf("%s %s (%s) has no row in the access matrix (internal/api/access_test.go matrix)", op.Method, path, op.OperationID)
				continue
			}
			if r.method != op.Method {
				t.Errorf("row %s: method %s, the OpenAPI document says %s", op.OperationID, r.method, op.Method)
			}
			allowed := []string{store.RoleAdmin}
			public := r.roles == "*"
			for _, c := range strings.TrimPrefix(r.roles, "*") {
				allowed = append(allowed, map[rune]string{'M': store.RoleManager, 'P': store.RolePublisher, 'V': store.RoleViewer}[c])
			}
			if access, ok := api.Policy[op.OperationID]; !ok || access.Public != public || !slices.Equal(append([]string{store.RoleAdmin}, access.Roles...), allowed) {
				t.Errorf("%s: the policy allows %v (public %v), the matrix expects %v (public %v)", op.OperationID, access.Roles, access.Public, allowed, public)
			}
			if public {
				if !strings.Contains(op.Description, "Public: no API key is needed") {
					t.Errorf("%s: the OpenAPI description does not state that no key is needed: %q", op.OperationID, op.Description)
				}
			} else if !strings.Contains(op.Description, "Requires role: admin") {
				t.Errorf("%s: the OpenAPI description does not state the role it needs: %q", op.OperationID, op.Description)
			}
			for _, c := range creds {
				t.Run(op.OperationID+"/"+c.name, func(t *testing.T) {
					pathA, pathB := r.pathA, r.pathB
					if r.prep != nil {
						pathA, pathB = r.prep(w)
					}
					body := r.body
					if r.mkBody != nil {
						body = r.mkBody()
					}
					st, raw := w.call(c.key, r.method, pathA, body)
					want := r.ok
					switch {
					case public:
					case c.role == "":
						want = http.StatusUnauthorized
					case !slices.Contains(allowed, c.role):
						want = http.StatusForbidden
					}
					if st != want {
						t.Fatalf("%s %s = %d %s, want %d", r.method, pathA, st, raw, want)
					}
					if c.role == "" || c.role == store.RoleAdmin {
						return
					}
					w.assertNoB(t, raw, "")
					if pathB == "" || want != r.ok {
						return
					}
					st, raw = w.call(c.key, r.method, pathB, r.bodyB)
					if st != r.statusB {
						t.Fatalf("%s %s (tenant B) = %d %s, want %d", r.method, pathB, st, raw, r.statusB)
					}
					w.assertNoB(t, raw, pathB)
					if r.statusB == http.StatusNotFound {
						// B's id answers exactly as an unknown id of the same shape.
						p, _, _ := strings.Cut(pathB, "?")
						id := strings.Split(p, "/")[3] // /v1/<collection>/<id>…
						unknown := id[:strings.Index(id, "_")+1] + "0000000000000000000000000Z"
						st2, raw2 := w.call(c.key, r.method, strings.Replace(pathB, id, unknown, 1), r.bodyB)
						if st2 != st || strings.ReplaceAll(string(raw2), unknown, id) != string(raw) {
							t.Fatalf("B's id answers %d %s; an unknown id answers %d %s", st, raw, st2, raw2)
						}
					}
				})
			}
		}
	}
	for id := range rows {
		if !seen[id] {
			t.Errorf("the access matrix has a row for %s, which the OpenAPI document does not have", id)
		}
	}
}

// assertNoB fails if an answer to a tenant-A credential carries any of
// tenant B's records (except what the request itself sent: a 404 names the
// id it was asked for).
func (w *world) assertNoB(t *testing.T, raw []byte, request string) {
	t.Helper()
	for _, m := range w.markersB {
		if m != "" && strings.Contains(string(raw), m) && !strings.Contains(request, m) {
			t.Fatalf("tenant B's %q leaked to a tenant-A credential: %s", m, raw)
		}
	}
}

// catalogN numbers the event types the access matrix creates.
var catalogN int

func itoa(i int) string { return strconv.Itoa(i) }

// newEventType catalogues a fresh event type (version 1) and returns its name.
func (w *world) newEventType() string {
	catalogN++
	name := "zz.access.t" + itoa(catalogN)
	w.mustCall(adminKey, "POST", "/v1/event-types", `{"name":"`+name+`","versions":[{"version":1,"schema":{"type":"object"}}]}`, 201, nil)
	return name
}

// openStore opens a SQLite store in the test's temporary directory, closed
// when the test ends.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newEgress is the production egress policy (https only, no private
// addresses): the API checks endpoint URLs with it.
func newEgress(t *testing.T) *egress.Client {
	t.Helper()
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return eg
}
