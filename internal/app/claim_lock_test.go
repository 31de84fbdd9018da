//go:build unix

package app_test

import (
	"encoding/base64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
)

// TestStartRefusedWhileARestoreHoldsTheLockCreatesNothing: herald restore
// holds the database's lock (<db>-claims.lock, flock(2)) from its checks
// to its end, while no database file is at the path yet. A herald serve
// started on the path meanwhile created the key file and an empty
// database before it met the lock, and the restore, finding a database at
// its target, then failed. The start must meet the lock first: refused,
// naming it, with no file created or changed.
func TestStartRefusedWhileARestoreHoldsTheLockCreatesNothing(t *testing.T) {
	for _, envKey := range []bool{false, true} {
		name := "key file"
		if envKey {
			name = "HERALD_ENCRYPTION_KEY"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "herald.db")
			lock, err := os.OpenFile(db+"-claims.lock", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { // as restore's lockTarget does
				t.Fatal(err)
			}
			cfg := app.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + db, APIKey: "test-admin-key-0123456789abcdefghijkl", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if envKey {
				k := make([]byte, secretbox.KeySize)
				cfg.EncryptionKey = base64.StdEncoding.EncodeToString(k)
			}
			m, err := app.New(t.Context(), cfg)
			if err == nil {
				m.Close()
				t.Fatal("a start on a locked database succeeded")
			}
			if !strings.Contains(err.Error(), "another process") || !strings.Contains(err.Error(), "claims.lock") {
				t.Errorf("refusal %q does not name the lock", err)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"herald.db-claims.lock"}) {
				t.Errorf("a start refused by the lock left %v; want the lock file alone", names)
			}
		})
	}
}
