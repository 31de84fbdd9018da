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
			if cmd.Flags().Changed("expires-in") {
				if expires == 0 {
					// Zero is not "never": omitting the flag is.
					return fmt.Errorf("--expires-in %s: at least 1m; omit --expires-in for a key that never expires", cmd.Flag("expires-in").Value)
				}
				if expires < time.Minute {
					return fmt.Errorf("--expires-in %s: at least 1m (expires_at is sent to the second)", cmd.Flag("expires-in").Value)
				}
				b["expires_at"] = time.Now().UTC().Add(expires).Format(time.RFC3339)
			}
			return o.do(cmd, http.MethodPost, "/v1/api-keys", b, nil)
		},
	}
	create.Flags().StringVar(&name, "name", "", "what the key is for, e.g. \"billing publisher\"")
	create.Flags().StringVar(&role, "role", "", "admin, manager, publisher or viewer")
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant of a manager, publisher or viewer key")
	create.Flags().Var(newDaysValue(&expires, 0), "expires-in", "the key stops working after this long, at least 1m: days (90d) or a Go duration (36h); omit it for a key that never expires")

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

func init() { extraCommands = append(extraCommands, newPortalSessionsCmd) }

// newPortalSessionsCmd is `herald portal-sessions create|list|revoke` over
// /v1/portal-sessions (an admin key is needed).
func newPortalSessionsCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("portal-sessions", "Manage portal sessions: links that open the web UI as a tenant's manager or viewer", o)

	var tenant, role string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create --tenant T [--role viewer|manager] [--ttl 1h]",
		Short: "Create a portal session (POST /v1/portal-sessions); the answer shows its token and link once",
		Long: `Create a portal session (POST /v1/portal-sessions): a token acting as the
tenant's manager or viewer key until it expires, and the link that opens the
web UI with it (the token is in the link's fragment). Hand the link to the
endpoint owner. It expires after --ttl (60 s to 7 days), never after the key
that created it, and revoking that key revokes the session.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" {
				return errors.New("--tenant is required")
			}
			// Given, --ttl is checked whatever its value: 0 is not "the
			// default" (omit the flag for the default of 1h).
			if cmd.Flags().Changed("ttl") && (ttl < time.Minute || ttl > 7*24*time.Hour || ttl%time.Second != 0) {
				return fmt.Errorf("--ttl %s: a whole number of seconds from 1m to 7d; omit --ttl for the default of 1h", cmd.Flag("ttl").Value) // as given: 8d, not 192h0m0s
			}
			b := map[string]any{"tenant": tenant}
			if role != "" {
				b["role"] = role
			}
			if ttl > 0 {
				b["ttl_seconds"] = int(ttl / time.Second)
			}
			return o.do(cmd, http.MethodPost, "/v1/portal-sessions", b, nil)
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant whose endpoint owner opens the portal")
	create.Flags().StringVar(&role, "role", "", "viewer (default) or manager")
	create.Flags().Var(newDaysValue(&ttl, 0), "ttl", "lifetime, 1m to 7d (days such as 7d or a Go duration such as 36h; default 1h)")

	var page *pageOpts
	list := &cobra.Command{
		Use:   "list",
		Short: "List portal sessions (GET /v1/portal-sessions): never their tokens; who created each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := page.query()
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/portal-sessions"+q, nil, nil)
		},
	}
	page = pageFlags(list)

	revoke := apiIDCmd("revoke ID", "Revoke a portal session (DELETE /v1/portal-sessions/{id}) before it expires", func(cmd *cobra.Command, id string) error {
		if err := o.do(cmd, http.MethodDelete, apiPath("/v1/portal-sessions", id, ""), nil, nil); err != nil {
			return err
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", id)
		return err
	})
	g.AddCommand(create, list, revoke)
	return g
}
