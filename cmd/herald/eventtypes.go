package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/spf13/cobra"
)

func init() {
	extraCommands = append(extraCommands, newEventTypesCmd)
}

// readJSONFile reads a JSON document (a schema or an example) from a file,
// - for stdin.
func readJSONFile(cmd *cobra.Command, flag, path string) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = readAllLimited(cmd)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("--%s %s: not valid JSON", flag, path)
	}
	return b, nil
}

func readAllLimited(cmd *cobra.Command) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	for len(buf) < maxAPIResponse {
		n, err := cmd.InOrStdin().Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			break
		}
	}
	return buf, nil
}

// newEventTypesCmd is "herald event-types": the event catalog.
func newEventTypesCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("event-types", "Manage the event catalog: event types, their versions and JSON Schemas", o)

	var description, resourceID, schemaFile, exampleFile string
	version := func(cmd *cobra.Command, v int) (map[string]any, error) {
		if schemaFile == "" {
			return nil, errors.New("--schema is required (a JSON Schema 2020-12 file, - for stdin)")
		}
		if schemaFile == "-" && exampleFile == "-" {
			// stdin is read once: the example would read nothing.
			return nil, errors.New("--schema and --example cannot both be - (stdin): give one of them as a file")
		}
		schema, err := readJSONFile(cmd, "schema", schemaFile)
		if err != nil {
			return nil, err
		}
		ver := map[string]any{"version": v, "schema": schema}
		if exampleFile != "" {
			ex, err := readJSONFile(cmd, "example", exampleFile)
			if err != nil {
				return nil, err
			}
			ver["example"] = ex
		}
		return ver, nil
	}
	create := &cobra.Command{
		Use:   "create NAME --schema FILE [--example FILE] [--resource-id /pointer]",
		Short: "Catalogue an event type with its version 1 (POST /v1/event-types)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ver, err := version(cmd, 1)
			if err != nil {
				return err
			}
			body := map[string]any{"name": args[0], "versions": []any{ver}}
			if description != "" {
				body["description"] = description
			}
			if resourceID != "" {
				body["resource_id"] = resourceID
			}
			// A 409's reason (the type exists: add a version; or a
			// catalogued name differs only in case) is the server's,
			// printed with the problem.
			_, err = o.doStatus(cmd, http.MethodPost, "/v1/event-types", body, nil)
			return err
		},
	}
	create.Flags().StringVar(&description, "description", "", "what the event means")
	create.Flags().StringVar(&resourceID, "resource-id", "", "JSON pointer into data naming the resource (e.g. /file_id): events are numbered per resource")
	for _, c := range []*cobra.Command{create} {
		c.Flags().StringVar(&schemaFile, "schema", "", "file holding the JSON Schema (2020-12) of the data, - for stdin")
		c.Flags().StringVar(&exampleFile, "example", "", "file holding an example of the data (must validate)")
	}

	var addSchema, addExample string
	addVersion := &cobra.Command{
		Use:   "add-version NAME VERSION --schema FILE [--example FILE]",
		Short: "Add a version, the newest plus one (POST /v1/event-types/{name}/versions)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.Atoi(args[1])
			if err != nil || v < 1 {
				return fmt.Errorf("VERSION %q: a number ≥ 1", args[1])
			}
			schemaFile, exampleFile = addSchema, addExample
			ver, err := version(cmd, v)
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodPost, apiPath("/v1/event-types", args[0], "/versions"), ver, nil)
		},
	}
	addVersion.Flags().StringVar(&addSchema, "schema", "", "file holding the JSON Schema (2020-12) of the data, - for stdin")
	addVersion.Flags().StringVar(&addExample, "example", "", "file holding an example of the data (must validate)")

	var undo bool
	var newDescription string
	deprecate := &cobra.Command{
		Use:   "deprecate NAME VERSION [--undo]",
		Short: "Mark a version deprecated (PATCH /v1/event-types/{name})",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.Atoi(args[1])
			if err != nil || v < 1 {
				return fmt.Errorf("VERSION %q: a number ≥ 1", args[1])
			}
			key := "deprecate"
			if undo {
				key = "undeprecate"
			}
			return o.do(cmd, http.MethodPatch, apiPath("/v1/event-types", args[0], ""), map[string]any{key: []int{v}}, nil)
		},
	}
	deprecate.Flags().BoolVar(&undo, "undo", false, "mark the version current again")
	describe := &cobra.Command{
		Use:   "describe NAME --description TEXT",
		Short: "Change an event type's description (PATCH /v1/event-types/{name})",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("description") {
				return errors.New("--description is required")
			}
			return o.do(cmd, http.MethodPatch, apiPath("/v1/event-types", args[0], ""), map[string]any{"description": newDescription}, nil)
		},
	}
	describe.Flags().StringVar(&newDescription, "description", "", "the new description")

	var page *pageOpts
	listCmd := &cobra.Command{
		Use: "list", Short: "List the event catalog by name, a page at a time (GET /v1/event-types)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := page.query()
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/event-types"+q, nil, nil)
		},
	}
	page = pageFlags(listCmd)

	g.AddCommand(create, addVersion, deprecate, describe, listCmd,
		apiIDCmd("show NAME", "Show an event type and its versions (GET /v1/event-types/{name})", func(cmd *cobra.Command, name string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/event-types", name, ""), nil, nil)
		}),
	)
	return g
}
