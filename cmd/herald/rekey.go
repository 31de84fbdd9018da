package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

func init() {
	extraCommands = append(extraCommands, newRekeyCmd)
}

// splitKeys splits HERALD_ENCRYPTION_KEY_PREVIOUS (comma-separated keys,
// spaces around each ignored). Unset or empty, it holds no key; an empty
// item ("K1,", "K1,,K2", ",") is refused naming the rule, as
// --trusted-proxy refuses one: the list most likely lost a key.
func splitKeys(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var out []string
	for i, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k == "" {
			return nil, fmt.Errorf("HERALD_ENCRYPTION_KEY_PREVIOUS: item %d is an empty item (a trailing or doubled comma?): give the previous keys comma-separated, each base64 of 32 bytes, with no empty item (leave the variable unset or empty for none)", i+1)
		}
		out = append(out, k)
	}
	return out, nil
}

func newRekeyCmd() *cobra.Command {
	var db, newKey string
	cmd := &cobra.Command{
		Use:   "rekey",
		Short: "Re-encrypt every secret and credential at rest under a new encryption key",
		Long: `Re-encrypt every value encrypted at rest (endpoint secrets, inbound source
configurations, the key check; the list is store.SealedColumns) under --new-key.

The old key is HERALD_ENCRYPTION_KEY, HERALD_ENCRYPTION_KEY_PREVIOUS, or (SQLite
without HERALD_ENCRYPTION_KEY) the key file beside the database. Procedure with
running nodes (docs/production.md, "Encryption key rotation"):

  1. restart every node with HERALD_ENCRYPTION_KEY=<new> and
     HERALD_ENCRYPTION_KEY_PREVIOUS=<old>: they open both, seal with the new;
  2. HERALD_ENCRYPTION_KEY_PREVIOUS=<old> herald rekey --db … --new-key <new>
     (resumable: run it again after an interruption; values already under
     the new key are skipped);
  3. restart the nodes without HERALD_ENCRYPTION_KEY_PREVIOUS.

With a SQLite key file the new key is written to the key file at the end; then
rekey refuses to run while the database is open by another process (a running
herald serve read the old key from the file and could deliver nothing after it).
Otherwise it warns when the database is in use (SQLite) or nodes heartbeat on
it (PostgreSQL): each must hold the new key already.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			pg, path, err := app.ParseDB(db)
			if err != nil {
				return err
			}
			previous, err := splitKeys(os.Getenv("HERALD_ENCRYPTION_KEY_PREVIOUS"))
			if err != nil {
				return err
			}
			if newKey == "" {
				return errors.New("--new-key is required (base64 of 32 bytes, e.g. `openssl rand -base64 32`)")
			}
			nk, err := secretbox.ParseKey(newKey)
			if err != nil {
				return fmt.Errorf("--new-key: %w", err)
			}
			newBox, _ := secretbox.New(nk)
			var olds []string
			if k := os.Getenv("HERALD_ENCRYPTION_KEY"); k != "" {
				olds = append(olds, k)
			}
			olds = append(olds, previous...)
			keyFile := ""
			if !pg && os.Getenv("HERALD_ENCRYPTION_KEY") == "" {
				keyFile = path + ".key"
				if real, err := filepath.EvalSymlinks(path); err == nil {
					keyFile = real + ".key" // beside the database, as herald serve reads it
				}
				b, err := os.ReadFile(keyFile)
				switch {
				case errors.Is(err, fs.ErrNotExist) && len(olds) > 0:
					// The nodes run with keys from the environment (step 1
					// of the procedure above): the old key is
					// HERALD_ENCRYPTION_KEY_PREVIOUS, and no key file is
					// written.
					keyFile = ""
				case err != nil:
					return fmt.Errorf("the old key: set HERALD_ENCRYPTION_KEY_PREVIOUS (or HERALD_ENCRYPTION_KEY) to it, or keep the key file: %w", err)
				default:
					olds = append(olds, string(b))
				}
			}
			if !pg {
				inUse, err := sqlite.InUse(cmd.Context(), path)
				if err != nil {
					return err
				}
				if inUse && keyFile != "" {
					return fmt.Errorf("%s is open by another process (a running herald serve?): it read its key from %s at start and holds only the old key, so after rekey it could not open the endpoints' secrets and would deliver nothing; stop Herald and run rekey again (or run the nodes and rekey with HERALD_ENCRYPTION_KEY=<new> and HERALD_ENCRYPTION_KEY_PREVIOUS=<old>, docs/production.md); nothing was changed", path, keyFile)
				}
				if inUse {
					fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: %s is open by another process (a running herald serve?). It must already run with HERALD_ENCRYPTION_KEY=<new> and HERALD_ENCRYPTION_KEY_PREVIOUS=<old>: a node holding only the old key delivers nothing after this rekey (its /readyz turns 503).\n", path)
				}
			}
			if len(olds) == 0 {
				return errors.New("the old key is needed: set HERALD_ENCRYPTION_KEY_PREVIOUS (or HERALD_ENCRYPTION_KEY) to it")
			}
			var prev []*secretbox.Box
			for i, o := range olds {
				k, err := secretbox.ParseKey(o)
				if err != nil {
					return fmt.Errorf("old key %d: %w", i+1, err)
				}
				b, _ := secretbox.New(k)
				prev = append(prev, b)
			}
			oldRing := secretbox.NewKeyring(prev[0], prev[1:]...)
			both := secretbox.NewKeyring(newBox, prev...)
			var st store.Store
			if pg {
				st, err = postgres.Open(cmd.Context(), db, postgres.WithSecretBox(both))
			} else {
				st, err = sqlite.Open(cmd.Context(), path, sqlite.WithSecretBox(both))
			}
			if err != nil {
				return err
			}
			defer st.Close()
			sealed := st.Capabilities().Sealed
			if sealed == nil {
				return errors.New("this store declares no rekey of its sealed values (store.Capabilities.Sealed): nothing was changed")
			}
			if err := store.CheckKey(cmd.Context(), st, both); err != nil {
				if errors.Is(err, store.ErrRetiredKey) {
					return errors.New("--new-key was retired by an earlier herald rekey (the database was moved away from it), and nodes holding it as their current key are refused as stale: generate a new key (openssl rand -base64 32); nothing was changed")
				}
				return fmt.Errorf("neither the new nor an old key is this database's: %w", err)
			}
			if nodes := st.Capabilities().Nodes; nodes != nil {
				live, err := nodes.LiveNodes(cmd.Context())
				if err != nil {
					return err
				}
				if len(live) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: %d Herald node(s) are live on this database (heartbeats: %s). Each must already run with HERALD_ENCRYPTION_KEY=<new> and HERALD_ENCRYPTION_KEY_PREVIOUS=<old>: a node holding only the old key delivers nothing after this rekey (its /readyz turns 503).\n", len(live), strings.Join(live, ", "))
				}
			}
			stats, err := store.Rekey(cmd.Context(), sealed, oldRing, newBox)
			if err != nil {
				return fmt.Errorf("%w (run herald rekey again to resume)", err)
			}
			if err := store.CheckKey(cmd.Context(), st, newBox); err != nil {
				return err
			}
			if keyFile != "" {
				if err := replaceKeyFile(keyFile, strings.TrimSpace(newKey)+"\n"); err != nil {
					return fmt.Errorf("the values are under the new key, but the key file %s still holds the old one: %w; run herald rekey again with the same --new-key", keyFile, err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rekeyed: %d values re-encrypted, %d already under the new key, %d unencrypted left alone\n", stats.Rewritten, stats.Current, stats.Plain)
			if keyFile != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "the new key is in %s\n", keyFile)
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "restart the nodes without HERALD_ENCRYPTION_KEY_PREVIOUS")
			}
			// The backups taken so far hold the values sealed under the
			// old key: deleting it makes them unrestorable.
			fmt.Fprintln(cmd.OutOrStdout(), "backups taken before this rekey open only with the old key: keep it with them (apart from them) until they expire")
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "sqlite:herald.db", "store: sqlite:PATH or postgres://…")
	cmd.Flags().StringVar(&newKey, "new-key", "", "the new key: base64 of 32 bytes (environment twin HERALD_NEW_KEY)")
	return cmd
}

// replaceKeyFile replaces the key file at path with text: through a
// temporary file of its own beside it (created owner-only, whatever the
// umask or a file left there), synced before the rename, and the rename
// synced through the directory. The key file is the only copy of the key:
// a crash must leave the old file or the new one, never an empty one.
func replaceKeyFile(path, text string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op after the rename
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
