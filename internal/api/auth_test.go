package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// TestFailedAuthThrottled: 100 bad keys from one address empty its bucket
// (20) and then get 429 with Retry-After, while a good key from another
// address is unaffected; the failures are counted in a metric and logged
// without the presented key.
func TestFailedAuthThrottled(t *testing.T) {
	var logs bytes.Buffer
	m := metrics.New(nil)
	w := newWorld(t, func(c *api.Config) {
		c.AuthFailureBurst, c.AuthFailureRate = 20, 0.01
		c.Metrics = m
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	good, _ := w.newKey(store.RoleViewer, "acme", "")
	const bad = api.APIKeyPrefix + "guessed-key-guessed-key-guessed-key-guess"
	counts := map[int]int{}
	for i := range 100 {
		st, raw := w.callFrom("192.0.2.66", bad+strconv.Itoa(i%10), "GET", "/v1/endpoints", "")
		counts[st]++
		if i < 20 && st != 401 || i >= 20 && st != 429 {
			t.Fatalf("bad key #%d: %d %s; want 401 for the first 20, then 429", i+1, st, raw)
		}
		if st, raw := w.callFrom("192.0.2.77", good, "GET", "/v1/endpoints", ""); st != 200 {
			t.Fatalf("good key from another address after %d bad ones: %d %s", i+1, st, raw)
		}
	}
	// The throttled address is refused before its key is looked at, with
	// the time until its bucket holds a token again.
	r := w.rawCall("192.0.2.66", good, "GET", "/v1/endpoints")
	if ra, _ := strconv.Atoi(r.Header().Get("Retry-After")); r.Code != 429 || ra < 90 || ra > 100 {
		t.Fatalf("good key from the throttled address: %d, Retry-After %q; want 429, about 100 s (one token at 0.01/s)", r.Code, r.Header().Get("Retry-After"))
	}
	if n := counterValue(t, m, "invalid"); n != 20 {
		t.Errorf("herald_auth_failures_total{reason=invalid} = %v, want 20", n)
	}
	if n := counterValue(t, m, "throttled"); n != 81 {
		t.Errorf("herald_auth_failures_total{reason=throttled} = %v, want 81", n)
	}
	if strings.Contains(logs.String(), "guessed-key") || !strings.Contains(logs.String(), "client=192.0.2.66") {
		t.Errorf("logs must name the address and never the key:\n%s", logs.String())
	}
}

func counterValue(t *testing.T, m *metrics.Metrics, reason string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "herald_auth_failures_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestUnprocessableNeverEchoesSecrets: a 422 names the field and the rule
// but never repeats a submitted secret, wherever it was put.
func TestUnprocessableNeverEchoesSecrets(t *testing.T) {
	w := newWorld(t, nil)
	const secret = "SuperSecretValue-7f3a9"
	cases := []struct{ name, method, path, body, field string }{
		{"source destination with a token in the query", "POST", "/v1/sources", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"https://internal.example/in?token=` + secret + `"}`, "body.destination_url"},
		{"source destination with userinfo", "POST", "/v1/sources", `{"name":"x","scheme":"github","secrets":["source-secret-0123456789"],"destination_url":"https://u:` + secret + `@internal.example/in"}`, "body.destination_url"},
		{"source secrets of the wrong type", "POST", "/v1/sources", `{"name":"x","scheme":"github","secrets":"` + secret + `","destination_url":"https://internal.example/in"}`, "body.secrets"},
		{"source secrets, one too many", "POST", "/v1/sources", `{"name":"x","scheme":"github","secrets":["` + secret + `","2","3","4","5","6"],"destination_url":"https://internal.example/in"}`, "body.secrets"},
		{"source update destination", "PATCH", "/v1/sources/" + w.srcID, `{"destination_url":"https://internal.example/in?api_key=` + secret + `"}`, "body.destination_url"},
		{"endpoint url with a credential", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://r.example/hook?access_token=` + secret + `"}`, "body.url"},
		{"endpoint header of the wrong type", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://r.example/hook","headers":{"Authorization":["Bearer ` + secret + `"]}}`, "body.headers"},
		{"endpoint header with a newline", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://r.example/hook","headers":{"Authorization":"Bearer ` + secret + `\n"}}`, "body.headers"},
		{"a secret in an unknown field", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://r.example/hook","secret":"` + secret + `"}`, "secret"},
		// Errors about the object as a whole (an unknown or missing
		// property) must not echo the object, with its headers or secrets.
		{"headers beside a misspelt field", "POST", "/v1/endpoints", `{"tenant":"acme","url":"https://r.example/hook","headers":{"Authorization":"Bearer ` + secret + `"},"descriptin":"x"}`, "descriptin"},
		{"headers without the url", "POST", "/v1/endpoints", `{"tenant":"acme","headers":{"Authorization":"Bearer ` + secret + `"}}`, "url"},
		{"source secrets without a name", "POST", "/v1/sources", `{"scheme":"github","secrets":["` + secret + `"],"destination_url":"https://internal.example/in"}`, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, raw := w.call(adminKey, c.method, c.path, c.body)
			if st != 422 || !strings.Contains(string(raw), c.field) {
				t.Fatalf("%d %s; want 422 naming %s", st, raw, c.field)
			}
			if strings.Contains(string(raw), secret) {
				t.Fatalf("the 422 repeats the secret: %s", raw)
			}
		})
	}
}

// TestLastUsedAtWrittenAtMostOncePerMinute: a key's use is recorded (in
// the background), and uses within the following minute write nothing.
func TestLastUsedAtWrittenAtMostOncePerMinute(t *testing.T) {
	w := newWorld(t, nil)
	key, id := w.newKey(store.RoleViewer, "acme", "")
	lastUsed := func() time.Time {
		k, err := w.st.LookupAPIKey(t.Context(), api.HashAPIKey(key))
		if err != nil {
			t.Fatal(err)
		}
		return k.LastUsedAt
	}
	waitFor := func(want time.Time) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !lastUsed().Equal(want) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := lastUsed(); !got.Equal(want) {
			t.Fatalf("last_used_at = %v, want %v", got, want)
		}
	}
	if !lastUsed().IsZero() {
		t.Fatal("a new key has a last use")
	}
	t0 := w.clock()
	w.mustCall(key, "GET", "/v1/endpoints", "", 200, nil)
	waitFor(t0)
	w.advance(59 * time.Second)
	w.mustCall(key, "GET", "/v1/endpoints", "", 200, nil)
	time.Sleep(50 * time.Millisecond) // a write would land here
	if got := lastUsed(); !got.Equal(t0) {
		t.Fatalf("a use 59 s later wrote last_used_at = %v", got)
	}
	w.advance(time.Second)
	w.mustCall(key, "GET", "/v1/endpoints", "", 200, nil)
	waitFor(t0.Add(time.Minute))
	var list struct {
		Data []struct {
			ID         string
			Key        string
			LastUsedAt *time.Time `json:"last_used_at"`
		}
	}
	w.mustCall(adminKey, "GET", "/v1/api-keys", "", 200, &list)
	for _, k := range list.Data {
		if k.Key != "" {
			t.Fatalf("the list shows a secret: %+v", k)
		}
		if k.ID == id && (k.LastUsedAt == nil || !k.LastUsedAt.Equal(t0.Add(time.Minute))) {
			t.Fatalf("listed last_used_at = %v", k.LastUsedAt)
		}
	}
}

// TestHandlersUseScopedStore: outside the authentication (auth.go), the
// scope itself (scope.go) and the readiness probe (api.go), no file of the
// API touches the store but through Server.db, the principal's view: a
// handler cannot forget the tenant boundary.
func TestHandlersUseScopedStore(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"auth.go": true, "scope.go": true, "api.go": true}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || allowed[f] {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if strings.Contains(string(src), "cfg.Store") {
			t.Errorf("%s reaches the store through s.cfg.Store; use s.db(ctx), the principal's view", f)
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d files; the handlers' files were not found", checked)
	}
	api, _ := os.ReadFile("api.go")
	if n := strings.Count(string(api), "cfg.Store."); n != 1 || !strings.Contains(string(api), "s.cfg.Store.Ping(") {
		t.Errorf("api.go uses s.cfg.Store %d times; only the readiness probe (Ping) may", n)
	}
}

// TestOpenAPIStatesRoles: the served document names, for every operation,
// the roles it needs (in the description and in x-herald-roles).
func TestOpenAPIStatesRoles(t *testing.T) {
	w := newWorld(t, nil)
	st, raw := w.call("", "GET", "/openapi.json", "")
	if st != 200 {
		t.Fatalf("GET /openapi.json: %d", st)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string   `json:"operationId"`
			Description string   `json:"description"`
			Roles       []string `json:"x-herald-roles"`
			Public      bool     `json:"x-herald-public"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			n++
			if api.Policy[op.OperationID].Public {
				// The probes and /contract, outside /v1/: no key, no roles.
				if !op.Public || op.Roles != nil || strings.HasPrefix(path, "/v1/") || !strings.Contains(op.Description, "Public: no API key is needed") {
					t.Errorf("%s %s (%s): x-herald-public %v, x-herald-roles %v, description %q; want public, no roles, outside /v1/", method, path, op.OperationID, op.Public, op.Roles, op.Description)
				}
				continue
			}
			want := append([]string{store.RoleAdmin}, api.Policy[op.OperationID].Roles...)
			if !slices.Equal(op.Roles, want) || !strings.Contains(op.Description, "Requires role: "+strings.Join(want, ", ")+".") {
				t.Errorf("%s %s (%s): x-herald-roles %v, description %q; want %v", method, path, op.OperationID, op.Roles, op.Description, want)
			}
		}
	}
	if n != len(api.Policy) {
		t.Errorf("the document has %d operations, the policy %d rows", n, len(api.Policy))
	}
}
