package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	extraCommands = append(extraCommands, newSourcesCmd)
}

// sourceFields are the flags shared by sources create and update.
type sourceFields struct {
	name, scheme, destination, dedupe, hmac string
	secrets                                 []string
	tolerance                               int
	maxBody                                 int64
}

func (s *sourceFields) bind(cmd *cobra.Command, create bool) {
	f := cmd.Flags()
	f.StringVar(&s.name, "name", "", "name of the source")
	if create {
		f.StringVar(&s.scheme, "scheme", "", "how the provider signs: herald, standard-webhooks, stripe, github, shopify, slack or hmac")
	} else {
		f.StringVar(&s.scheme, "scheme", "", "with --secret, replaces the configuration of a source whose configuration does not open here (\"unreadable\": [\"config\"]), its other settings their defaults unless given; otherwise only the source's own scheme is accepted (a source's scheme cannot change)")
	}
	f.StringArrayVar(&s.secrets, "secret", nil, "the provider's signing secret, at least 16 bytes (repeatable during a rotation; write-only)")
	f.StringVar(&s.destination, "destination-url", "", "where events are forwarded (may be a private address; never link-local or cloud metadata)")
	f.StringVar(&s.dedupe, "dedupe", "", "dedupe key: empty = the scheme's own (its event id; the SHA-256 of the body for github, shopify and hmac); header:<Name>; json:/<JSON pointer>")
	f.IntVar(&s.tolerance, "tolerance-seconds", 0, "replay window for schemes with a timestamp, seconds (0 = 300; refused for github, shopify and hmac without timestamp_header, which sign none)")
	f.Int64Var(&s.maxBody, "max-body-bytes", 0, "largest accepted body in bytes: 0 (1 MiB) or 1024 (1 KiB) to 16777216 (16 MiB)")
	f.StringVar(&s.hmac, "hmac", "", `for scheme hmac, a JSON object such as '{"header":"X-Sig","prefix":"sha256="}'`)
}

// body returns the JSON fields whose flags were given.
func (s *sourceFields) body(cmd *cobra.Command) (map[string]any, error) {
	f := cmd.Flags()
	b := map[string]any{}
	set := func(flag, field string, v any) {
		if f.Changed(flag) {
			b[field] = v
		}
	}
	set("name", "name", s.name)
	set("scheme", "scheme", s.scheme)
	set("secret", "secrets", s.secrets)
	set("destination-url", "destination_url", s.destination)
	set("dedupe", "dedupe", s.dedupe)
	set("tolerance-seconds", "tolerance_seconds", s.tolerance)
	set("max-body-bytes", "max_body_bytes", s.maxBody)
	if f.Changed("hmac") {
		if !json.Valid([]byte(s.hmac)) || !strings.HasPrefix(strings.TrimSpace(s.hmac), "{") {
			return nil, fmt.Errorf("--hmac: want a JSON object such as '{\"header\":\"X-Sig\"}'")
		}
		b["hmac"] = json.RawMessage(s.hmac)
	}
	return b, nil
}

// newSourcesCmd is `herald sources …` over /v1/sources (an admin key is
// needed): inbound sources verify a provider's webhooks and forward them.
func newSourcesCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("sources", "Manage inbound sources: verify a provider's webhooks at /in/{id} and forward them", o)

	var create sourceFields
	createCmd := &cobra.Command{
		Use:   "create --name N --scheme S --secret X --destination-url U",
		Short: "Create an inbound source (POST /v1/sources); the answer shows its ingest path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := create.body(cmd)
			if err != nil {
				return err
			}
			for _, need := range []string{"name", "scheme", "secret", "destination-url"} {
				if !cmd.Flags().Changed(need) {
					return fmt.Errorf("--%s is required", need)
				}
			}
			return o.do(cmd, http.MethodPost, "/v1/sources", b, nil)
		},
	}
	create.bind(createCmd, true)

	var page *pageOpts
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List inbound sources (GET /v1/sources); secrets are never shown",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := page.query()
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/sources"+q, nil, nil)
		},
	}
	page = pageFlags(listCmd)

	var update sourceFields
	updateCmd := apiIDCmd("update ID", "Change a source's given fields (PATCH /v1/sources/{id})", func(cmd *cobra.Command, id string) error {
		b, err := update.body(cmd)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return errors.New("nothing to change: give --name, --secret, --destination-url, --dedupe, --tolerance-seconds, --max-body-bytes, --hmac, or --scheme with --secret")
		}
		return o.do(cmd, http.MethodPatch, apiPath("/v1/sources", id, ""), b, nil)
	})
	update.bind(updateCmd, false)

	g.AddCommand(createCmd, listCmd, updateCmd,
		apiIDCmd("get ID", "Show a source (GET /v1/sources/{id})", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/sources", id, ""), nil, nil)
		}),
		apiIDCmd("delete ID", "Delete a source, its forwarding endpoint and its deliveries (DELETE /v1/sources/{id})", func(cmd *cobra.Command, id string) error {
			return o.deleted(cmd, apiPath("/v1/sources", id, ""), id)
		}),
	)
	return g
}
