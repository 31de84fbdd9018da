package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newKeysCmd) }

// newKeysCmd is `herald keys create|list|revoke` over /v1/api-keys (an
// admin key is needed).
func newKeysCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("keys", "Manage API keys: a role (admin, manager, publisher, viewer) and, for tenant roles, a tenant", o)

	var name, role, tenant string
	var expires time.Duration
	create := &cobra.Command{
		Use:   "create --name N --role R [--tenant T] [--expires-in 90d]",
		Short: "Create an API key (POST /v1/api-keys); the answer shows its secret once",
		Long: `Create an API key (POST /v1/api-keys). The answer shows the key's secret
(herald_key_…) once: store it now, Herald keeps only its hash.

Roles: admin (every tenant, sources, keys; no --tenant), manager (its tenant's
endpoints, secrets, deliveries, replays), publisher (publish and read its
tenant's events), viewer (read-only, never secrets).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || role == "" {
				return errors.New("--name and --role are required")
			}
			b := map[string]any{"name": name, "role": role}
			if tenant != "" {
				b["tenant"] = tenant
			}
			if expires > 0 {
				b["expires_at"] = time.Now().UTC().Add(expires).Format(time.RFC3339)
			}
			return o.do(cmd, http.MethodPost, "/v1/api-keys", b, nil)
		},
	}
	create.Flags().StringVar(&name, "name", "", "what the key is for, e.g. \"billing publisher\"")
	create.Flags().StringVar(&role, "role", "", "admin, manager, publisher or viewer")
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant of a manager, publisher or viewer key")
	create.Flags().Var(newDaysValue(&expires, 0), "expires-in", "the key stops working after this long: days (90d) or a Go duration (36h); default never")

	var page *pageOpts
	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys (GET /v1/api-keys): never their secrets; last_used_at to the minute",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := page.query()
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/api-keys"+q, nil, nil)
		},
	}
	page = pageFlags(list)

	revoke := apiIDCmd("revoke ID", "Revoke an API key (DELETE /v1/api-keys/{id}): refused at once, on every node within a second", func(cmd *cobra.Command, id string) error {
		if err := o.do(cmd, http.MethodDelete, apiPath("/v1/api-keys", id, ""), nil, nil); err != nil {
			return err
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", id)
		return err
	})
	g.AddCommand(create, list, revoke)
	return g
}
