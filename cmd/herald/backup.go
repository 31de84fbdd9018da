package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

func init() {
	extraCommands = append(extraCommands, newBackupCmd, newRestoreCmd)
}

func newBackupCmd() *cobra.Command {
	var db, to string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy a live SQLite database to a new file, consistently, without stopping deliveries",
		Long: `Copy a live SQLite database to a new file with SQLite's VACUUM INTO: the copy is
the database at one instant, taken while herald serve keeps publishing and
delivering. The copy's secrets stay encrypted: keep the encryption key
(HERALD_ENCRYPTION_KEY or the .key file) safe, and apart from the backup.

The copy is written to FILE.partial (owner-only), synced, and given its final
name only when complete: an interrupted backup leaves FILE.partial, never FILE
(delete it, or run the same backup again, which removes it).

PostgreSQL is backed up with its own tools (pg_dump, or base backups with WAL
archiving for point-in-time recovery): see docs/production.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			pg, path, err := app.ParseDB(db)
			if err != nil {
				return err
			}
			if pg {
				return errors.New("herald backup copies SQLite databases; back PostgreSQL up with pg_dump or base backups and WAL archiving (docs/production.md)")
			}
			if to == "" {
				return errors.New("--to FILE is required (a new file)")
			}
			if err := checkBackupFile("--to", to); err != nil {
				return err
			}
			stale, err := sqlite.Backup(cmd.Context(), path, to)
			if stale {
				fmt.Fprintf(cmd.ErrOrStderr(), "herald backup: removed %s, left by an interrupted backup to the same file\n", sqlite.PartialBackupName(to))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s\n", path, to)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "sqlite:herald.db", "the live database: sqlite:PATH")
	cmd.Flags().StringVar(&to, "to", "", "the backup file to create (must not exist; written as FILE.partial until complete)")
	return cmd
}

func newRestoreCmd() *cobra.Command {
	var db, from, keyFile string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Restore a SQLite backup after checking it was written with the configured encryption key",
		Long: `Restore a backup made by herald backup into a database path that does not exist
yet (stop Herald and move the old database and its -wal/-shm files away first:
a -wal, -shm or -journal file left beside the target is refused, since SQLite
would apply it to the restored database).

The encryption key is HERALD_ENCRYPTION_KEY, or the key file given by
--key-file (then copied beside the restored database as <path>.key when none is
there: owner-only, through a temporary file synced and then linked, so a
crash leaves no torn key file; when both are set and differ, HERALD_ENCRYPTION_KEY is used and a
warning names it). A backup written with another key is refused and nothing is
written; so is a restore next to an existing <path>.key holding another key
(herald serve would read that file and refuse the restored database); one
holding the key checked is kept and made owner-only if others could read it.
A restore is refused, and writes nothing, while another process holds the
database's lock file (<path>-claims.lock): a herald serve running on it (also
one whose database file was moved away) or another restore to the same path.
The copy is written to <path>.restore-<digits> first (the key file to
<path>.restore-<digits>.key); a restore killed meanwhile leaves that file, and
the next restore to the same path removes it (and says so) before it copies.
The restored database is migrated to this binary's schema at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			pg, path, err := app.ParseDB(db)
			if err != nil {
				return err
			}
			if pg {
				return errors.New("herald restore restores SQLite backups; restore PostgreSQL with pg_restore or from a base backup (docs/production.md)")
			}
			if from == "" {
				return errors.New("--from FILE is required (a file made by herald backup)")
			}
			if err := checkBackupFile("--from", from); err != nil {
				return err
			}
			// herald serve would refuse the directory: refuse it before
			// writing the database or its key file there.
			if err := sqlite.CheckDirectory(path); err != nil {
				return fmt.Errorf("%w; nothing was written", err)
			}
			var (
				keyText, keySource string
				fileText           string
			)
			envKey := os.Getenv("HERALD_ENCRYPTION_KEY")
			if keyFile != "" {
				b, err := os.ReadFile(keyFile)
				if err != nil {
					return fmt.Errorf("--key-file: %w", err)
				}
				fileText = string(b)
			}
			switch {
			case envKey != "":
				keyText, keySource = envKey, "HERALD_ENCRYPTION_KEY"
			case keyFile != "":
				keyText, keySource = fileText, "--key-file "+keyFile
			default:
				return errors.New("the encryption key is needed to check the backup: set HERALD_ENCRYPTION_KEY or give --key-file")
			}
			key, err := secretbox.ParseKey(keyText)
			if err != nil {
				return fmt.Errorf("encryption key (%s): %w", keySource, err)
			}
			if envKey != "" && keyFile != "" {
				if fk, err := secretbox.ParseKey(fileText); err != nil || !bytes.Equal(fk, key) {
					fmt.Fprintf(cmd.ErrOrStderr(), "herald restore: HERALD_ENCRYPTION_KEY and --key-file %s hold different keys; checking with HERALD_ENCRYPTION_KEY (as herald serve would use it), ignoring --key-file\n", keyFile)
				}
			}
			// A key file already beside the target is what herald serve
			// reads when HERALD_ENCRYPTION_KEY is not set: a different key
			// there would make the restored database refuse to start.
			if b, err := os.ReadFile(path + ".key"); err == nil {
				if k, err := secretbox.ParseKey(string(b)); err != nil || !bytes.Equal(k, key) {
					return fmt.Errorf("the key file %s beside the target already exists and does not hold the key checked (%s): the restored database would not start with it; move that key file away (or restore to another path) and run restore again; nothing was written", path+".key", keySource)
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("reading the key file beside the target: %w", err)
			}
			box, err := secretbox.New(key)
			if err != nil {
				return err
			}
			opts := []sqlite.RestoreOption{sqlite.RestoreRemoved(func(p string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "herald restore: removed %s, the temporary copy of an interrupted restore to the same path\n", p)
			}), sqlite.RestoreMadePrivate(func(p string, was os.FileMode) {
				fmt.Fprintf(cmd.ErrOrStderr(), "herald restore: the key file %s was open to other users (mode %04o): made it private (owner only), as restore writes key files; if they are not trusted, rotate the key (herald rekey, docs/production.md)\n", p, uint32(was))
			})}
			if keyFile != "" && envKey == "" {
				// Written by Restore under the database's lock, before
				// the copy, atomically (never a torn key file), when
				// none is there.
				opts = append(opts, sqlite.RestoreKeyFile([]byte(keyText)))
			}
			if err := sqlite.Restore(cmd.Context(), from, path, box, opts...); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s to %s (key checked: %s)\n", from, path, keySource)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "sqlite:herald.db", "the database to create: sqlite:PATH (must not exist)")
	cmd.Flags().StringVar(&from, "from", "", "the backup file")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "the key file of the backed-up database (when HERALD_ENCRYPTION_KEY is not set)")
	return cmd
}

// checkBackupFile refuses a backup file name (--to, --from) that is surely
// not the one meant, before any work: leading or trailing whitespace (or
// only that), or a --db value ("sqlite:…", in any case), which backup
// took as a file name literally.
func checkBackupFile(flag, file string) error {
	if strings.TrimSpace(file) != file || strings.TrimSpace(file) == "" {
		return fmt.Errorf("%s %q: the backup file's name must not have leading or trailing whitespace: give the file's path alone", flag, file)
	}
	if len(file) >= len("sqlite:") && strings.EqualFold(file[:len("sqlite:")], "sqlite:") { // in any case, as --db reads it
		return fmt.Errorf("%s %q: %s takes a file path, not a --db value: write the path without the %s prefix", flag, file, flag, file[:len("sqlite:")])
	}
	return nil
}
