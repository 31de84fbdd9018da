package api

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/egress"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// TestPublicRowsMatchTheirPaths: a Policy row states what authenticate
// does with its path, so New refuses a public row for an operation under
// /v1/ (a key would still be required) and a keyed row for one outside it
// (no key would be asked for), naming the operation.
func TestPublicRowsMatchTheirPaths(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eg, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for op, row := range map[string]Access{"get-health": adminOnly, "get-readiness": readers, "list-endpoints": public} {
		t.Run(op, func(t *testing.T) {
			was := Policy[op]
			Policy[op] = row
			defer func() { Policy[op] = was }()
			_, err := New(Config{Store: st, URLs: eg, Logger: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), "disagrees with their path") || !strings.Contains(err.Error(), op+" (") {
				t.Errorf("New with %s's row %+v: %v; want a refusal naming it", op, row, err)
			}
		})
	}
}
