package api_test

import (
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// legacyOccurredAt is an occurred_at an event may hold although the API
// refuses it today (stored before the check, or by a producer path that
// did not check), as SQL sets it, and the instant the API shows instead.
type legacyOccurredAt struct {
	name string
	set  any // the column's new value
	want time.Time
}

var (
	shownMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	shownMin = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
)

// TestLegacyOccurredAtIsShownOnSQLite: an event whose stored occurred_at
// is outside the years 0000–9999 is read, listed and answered as a
// duplicate, its occurred_at clamped to the nearest instant RFC 3339 can
// state; the delivered body keeps the bytes rendered at its publish.
func TestLegacyOccurredAtIsShownOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	micro := func(t time.Time) int64 { return t.UnixMicro() }
	checkLegacyOccurredAt(t, st, func(key string, v any) error {
		_, err := db.Exec("UPDATE events SET occurred_at = ? WHERE id = ?", v, key)
		return err
	}, []legacyOccurredAt{
		{"year 10000", micro(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), shownMax},
		{"year -1", micro(time.Date(-1, 12, 31, 23, 30, 0, 0, time.UTC)), shownMin},
		{"largest", int64(math.MaxInt64), shownMax},
		{"smallest", int64(math.MinInt64), shownMin},
		{"in range", micro(time.Date(2020, 2, 29, 1, 2, 3, 4000, time.UTC)), time.Date(2020, 2, 29, 1, 2, 3, 4000, time.UTC)},
	})
}

// TestLegacyOccurredAtIsShownOnPostgres: the same on PostgreSQL, with its
// infinities too.
func TestLegacyOccurredAtIsShownOnPostgres(t *testing.T) {
	dbURL := pgSchema(t)
	st, err := postgres.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	checkLegacyOccurredAt(t, st, func(key string, v any) error {
		_, err := conn.Exec(t.Context(), "UPDATE events SET occurred_at = $1::text::timestamptz WHERE id = $2", v, key)
		return err
	}, []legacyOccurredAt{
		{"year 10000", "10000-01-01T00:00:00Z", shownMax},
		{"year -1", "0002-12-31T23:30:00Z BC", shownMin}, // Go's year -1 is 2 BC
		{"largest", "294276-12-31T23:59:59.999999Z", shownMax},
		{"smallest", "4713-01-01T00:00:00Z BC", shownMin},
		{"infinity", "infinity", shownMax},
		{"-infinity", "-infinity", shownMin},
		{"in range", "2020-02-29T01:02:03.000004Z", time.Date(2020, 2, 29, 1, 2, 3, 4000, time.UTC)},
	})
}

func checkLegacyOccurredAt(t *testing.T, st store.Store, set func(key string, v any) error, cases []legacyOccurredAt) {
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Store: st, URLs: eg, AdminKeyHashes: [][]byte{api.HashAPIKey(adminKey)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	type eventOut struct {
		ID         string          `json:"id"`
		OccurredAt time.Time       `json:"occurred_at"`
		Data       json.RawMessage `json:"data"`
		Duplicate  bool            `json:"duplicate"`
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "legacy-" + strconv.Itoa(i)
			body := `{"tenant":"acme","type":"file.created","id":"` + id + `","data":{"n":1},"occurred_at":"2026-01-02T03:04:05Z"}`
			adminCall(t, s, "POST", "/v1/events", body, 202)
			if err := set(store.EventKey("acme", id, true), c.set); err != nil {
				t.Fatalf("store occurred_at %v: %v", c.set, err)
			}
			check := func(what string, got eventOut) {
				t.Helper()
				if got.ID != id || !got.OccurredAt.Equal(c.want) || string(got.Data) != `{"n":1}` {
					t.Errorf("%s: id %q, occurred_at %v, data %s; want %q, %v, {\"n\":1}", what, got.ID, got.OccurredAt, got.Data, id, c.want)
				}
			}
			var one eventOut
			if err := json.Unmarshal([]byte(adminCall(t, s, "GET", "/v1/events/"+id+"?tenant=acme", "", 200)), &one); err != nil {
				t.Fatal(err)
			}
			check("GET /v1/events/{id}", one)
			var list struct{ Data []eventOut }
			if err := json.Unmarshal([]byte(adminCall(t, s, "GET", "/v1/events?tenant=acme&limit=1", "", 200)), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Data) != 1 {
				t.Fatalf("GET /v1/events: %d events, want 1", len(list.Data))
			}
			check("GET /v1/events", list.Data[0])
			var dup eventOut
			if err := json.Unmarshal([]byte(adminCall(t, s, "POST", "/v1/events", body, 200)), &dup); err != nil {
				t.Fatal(err)
			}
			check("the publish repeated", dup)
			if !dup.Duplicate {
				t.Errorf("the publish repeated: not answered as the duplicate")
			}
		})
	}
}
