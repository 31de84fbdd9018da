package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herald-webhooks/herald/internal/app"
	"github.com/herald-webhooks/herald/internal/buildinfo"
	"github.com/herald-webhooks/herald/internal/redact"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/postgres"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

func init() {
	extraCommands = append(extraCommands, newVersionCmd, newMigrateCmd)
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:         "version",
		Short:       "Print Herald's version, commit, build time, Go version and the stores it supports",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{envTwinsAnnotation: ""}, // no bindEnv: HERALD_JSON, set for other commands, does not turn version's JSON on
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := buildinfo.Get()
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, i)
			}
			fmt.Fprintf(w, "herald %s\ncommit:     %s\nbuilt:      %s\ngo:         %s\nstores:     %s\n",
				i.Version, orUnknown(i.Commit, i.Modified), orUnknown(i.BuildTime, false), i.GoVersion, strings.Join(i.Stores, ", "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the fields of /healthz)")
	return cmd
}

func orUnknown(s string, modified bool) string {
	if s == "" {
		return "unknown"
	}
	if modified {
		s += " (modified)"
	}
	return s
}

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Database schema: herald serve migrates at start; this shows where a database stands",
	}
	var (
		db     string
		asJSON bool
	)
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the database's schema version, this binary's, and the migrations serve would apply",
		Long: `Show the database's schema version, this binary's last migration, and the
migrations herald serve would apply at start. Nothing is changed: a SQLite
file is opened read-only and goose's version table is looked up, never created.
A file that is empty, not SQLite, or a SQLite database that is not Herald's is
an error. A database newer than the binary is reported, and the command exits
1 (serve refuses to start on it); with --json the answer says so too ("newer":
true, "error": the message) and still goes to stdout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			st, err := schemaStatus(cmd, db)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			tooNew := store.CheckSchemaVersion(st.Driver, st.Database, st.Binary)
			if asJSON {
				// A script checking before an upgrade reads the exit
				// status or "newer": both say serve would refuse this
				// database, as the text form does.
				out := migrateStatusJSON{SchemaStatus: st, Newer: tooNew != nil}
				if tooNew != nil {
					out.Error = tooNew.Error()
				}
				if err := printJSON(w, out); err != nil {
					return err
				}
				return tooNew
			}
			fmt.Fprintf(w, "store:             %s (%s)\ndatabase version:  %d\nbinary version:    %d\npending:           %v\n", st.Driver, redact.URL(db), st.Database, st.Binary, st.Pending)
			return tooNew
		},
	}
	status.Flags().StringVar(&db, "db", "sqlite:herald.db", "store: sqlite:PATH or postgres://…")
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(status)
	return cmd
}

// migrateStatusJSON is migrate status --json: the schema status, "newer"
// (true when the database's schema is newer than this binary, which serve
// refuses; the command then also exits 1) and, then, "error" with the
// text form's message.
type migrateStatusJSON struct {
	store.SchemaStatus
	Newer bool   `json:"newer"`
	Error string `json:"error,omitempty"`
}

func schemaStatus(cmd *cobra.Command, db string) (store.SchemaStatus, error) {
	pg, path, err := app.ParseDB(db)
	if err != nil {
		return store.SchemaStatus{}, err
	}
	if pg {
		return postgres.SchemaStatus(cmd.Context(), db)
	}
	return sqlite.SchemaStatus(cmd.Context(), path)
}
