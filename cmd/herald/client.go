package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herald-webhooks/herald/internal/redact"
)

func init() {
	extraCommands = append(extraCommands, newEndpointsCmd, newDLQCmd, newEventsCmd, newDeliveriesCmd)
}

// apiTimeout bounds one API call of the client commands.
const apiTimeout = 30 * time.Second

// maxAPIResponse caps the API answer read by the client commands.
const maxAPIResponse = 32 << 20

// apiOpts are the persistent flags of every API command group.
type apiOpts struct {
	server, apiKey string
}

// apiGroup returns a command group with the --server and --api-key
// persistent flags and HERALD_* twins for every flag of its subcommands.
func apiGroup(use, short string, o *apiOpts) *cobra.Command {
	g := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

Talks to a running "herald serve" over HTTP. --server and --api-key default to
HERALD_SERVER and HERALD_API_KEY; every flag has such an environment twin.`,
		Args: cobra.ArbitraryArgs,
		RunE: unknownSubcommand,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// Every argument of these commands is an id or a name: an
			// empty one made a path such as /v1/events//deliveries, which
			// the server cleaned into another route.
			for i, a := range args {
				if strings.TrimSpace(a) == "" {
					return fmt.Errorf("argument %d of %q is empty: give an id or a name (%s)", i+1, cmd.CommandPath(), cmd.UseLine())
				}
			}
			return bindEnv(cmd) // cmd is the subcommand run; its flags include these persistent ones
		},
	}
	pf := g.PersistentFlags()
	pf.Var(newServerValue(&o.server, "http://localhost:8080", false), "server", "base URL of the Herald API (a reverse proxy's path prefix included; no query or fragment)")
	pf.StringVar(&o.apiKey, "api-key", "", "API key, sent as Authorization: Bearer (default $HERALD_API_KEY)")
	return g
}

// do sends one API request and prints the indented JSON answer to stdout.
// body is nil, raw JSON bytes ([]byte) or a value to encode. On a non-2xx
// answer it prints the problem details to stderr and returns an error.
func (o *apiOpts) do(cmd *cobra.Command, method, path string, body any, header http.Header) error {
	_, err := o.doStatus(cmd, method, path, body, header)
	return err
}

// deleted DELETEs path and, when the API answers no content (204), prints
// "deleted ID", as `herald keys revoke` prints "revoked ID": a delete that
// printed nothing left the user to guess.
func (o *apiOpts) deleted(cmd *cobra.Command, path, id string) error {
	status, err := o.doStatus(cmd, http.MethodDelete, path, nil, nil)
	if err != nil || status != http.StatusNoContent {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", id)
	return err
}

// doStatus is do, also returning the answer's status code (0 when there
// was none).
func (o *apiOpts) doStatus(cmd *cobra.Command, method, path string, body any, header http.Header) (int, error) {
	base, err := parseServer(o.server)
	if err != nil {
		return 0, err
	}
	if o.apiKey == "" {
		return 0, errors.New("no API key: use --api-key or set HERALD_API_KEY")
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, apiURL(base, path), rd)
	if err != nil {
		return 0, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+o.apiKey)
	req.Header.Set("Accept", "application/json, application/problem+json")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: apiTimeout}).Do(req)
	if err != nil {
		return 0, redact.URLError(err)
	}
	defer resp.Body.Close()
	// The personal-data guard's warning (docs/contract.md, "Thin payloads").
	for _, w := range resp.Header.Values("X-Herald-Personal-Data-Warning") {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: personal data in the event (X-Herald-Personal-Data-Warning): %s\n", printable(w))
	}
	// Warning fields (RFC 7234 §5.5 syntax: a pin to a deprecated event
	// type version, docs/contract.md), one line each as curl -v shows them;
	// stdout stays the JSON answer.
	for _, w := range resp.Header.Values("Warning") {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s\n", printable(w))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if err := htmlAnswer(resp, data, base, method, path); err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		printAPIProblem(cmd.ErrOrStderr(), resp.StatusCode, data, cliHints(cmd))
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, terminalText(resp.Status, false))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return resp.StatusCode, nil
	}
	var out bytes.Buffer
	if json.Indent(&out, data, "", "  ") != nil {
		out.Reset()
		out.Write(data)
	}
	out.WriteByte('\n')
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return resp.StatusCode, err
}

// htmlAnswer refuses an HTML page where the API answers JSON: a --server
// that is the web console's URL (…/ui) gets the console's pages (a 200
// sign-in page, a 404 page), which would be printed as if they were the
// answer, under a path (/v1/…) that is not the one asked. The error names
// the URL asked and the base URL to give. An HTML error page from a URL
// without /ui (a proxy's 502) is left to printAPIProblem, which shows it.
func htmlAnswer(resp *http.Response, data []byte, base *url.URL, method, path string) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	head := strings.ToLower(string(bytes.TrimSpace(data[:min(len(data), 64)])))
	if mt != "text/html" && !strings.HasPrefix(head, "<!doctype html") && !strings.HasPrefix(head, "<html") {
		return nil
	}
	asked := redact.URL(apiURL(base, path))
	p := strings.TrimRight(base.Path, "/")
	if i := strings.LastIndex(p, "/ui"); i >= 0 && (p[i:] == "/ui" || strings.HasPrefix(p[i:], "/ui/")) {
		b := *base
		b.Path, b.RawPath = p[:i], ""
		return fmt.Errorf("%s %s answered an HTML page (%s), not the API's JSON: --server %s looks like the web console's URL; give Herald's base URL, e.g. --server %s (without /ui)", method, asked, terminalText(resp.Status, false), redact.URL(base.String()), redact.URL(b.String()))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil
	}
	b := *base
	b.Path, b.RawPath = "", ""
	return fmt.Errorf("%s %s answered an HTML page (%s), not the API's JSON: is --server %s Herald's base URL (not the web console's, nor a page in front of it)? e.g. --server %s", method, asked, terminalText(resp.Status, false), redact.URL(base.String()), redact.URL(b.String()))
}

// printable returns a header value with each character that is not
// printable but a tab written as "?": control characters (which could
// move a terminal's cursor or recolour it), format characters such as
// the bidi controls (U+202E, which reverses the rest of the line) and
// zero-width ones (strconv.IsPrint), and bytes that are not UTF-8.
func printable(v string) string {
	return strings.Map(func(r rune) rune {
		if r != '\t' && (r == utf8.RuneError || !strconv.IsPrint(r)) {
			return '?'
		}
		return r
	}, v)
}

// printJSON writes v to w as one line of JSON and a newline, its strings
// as they are: encoding/json's default HTML escaping would print & < > as
// \u0026 \u003c \u003e, which a terminal user reads as the value.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// jsonText is v as printJSON writes it, without the newline.
func jsonText(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := printJSON(&b, v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// printAPIProblem prints an RFC 9457 problem (or, failing that, the
// answer as text, its first 2048 bytes) to w: "STATUS TITLE: DETAIL",
// then "  LOCATION: MESSAGE (value JSON)" for each of its errors. Every
// piece of the answer is printed through terminalText, so that control
// characters, ANSI escape sequences and bidi controls in it are shown
// escaped instead of acting on the terminal.
//
// hints rewrites the detail and each error's message (nil: as they are):
// the API's hints speak to HTTP clients (cliHints).
func printAPIProblem(w io.Writer, status int, data []byte, hints func(string) string) {
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Errors []struct {
			Location string `json:"location"`
			Message  string `json:"message"`
			Value    any    `json:"value"`
		} `json:"errors"`
	}
	if json.Unmarshal(data, &p) != nil || (p.Title == "" && p.Detail == "") {
		text := strings.TrimSpace(string(data))
		if len(text) > 2048 {
			cut := 2048
			for cut > 2044 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut] + "…"
		}
		fmt.Fprintf(w, "%d %s\n%s\n", status, http.StatusText(status), terminalText(text, true))
		return
	}
	if p.Status == 0 {
		p.Status = status
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if hints != nil {
		p.Detail = hints(p.Detail)
		for i := range p.Errors {
			p.Errors[i].Message = hints(p.Errors[i].Message)
		}
	}
	fmt.Fprintf(w, "%d %s", p.Status, terminalText(p.Title, false))
	if p.Detail != "" {
		fmt.Fprintf(w, ": %s", terminalText(p.Detail, false))
	}
	fmt.Fprintln(w)
	for _, e := range p.Errors {
		loc := e.Location
		if loc == "" {
			loc = "-"
		}
		fmt.Fprintf(w, "  %s: %s", terminalText(loc, false), terminalText(e.Message, false))
		if e.Value != nil {
			if v, err := jsonText(e.Value); err == nil {
				fmt.Fprintf(w, " (value %s)", terminalText(string(v), false))
			}
		}
		fmt.Fprintln(w)
	}
}

// httpHints are hints of the API's answers that name a query parameter,
// with the flag of the CLI that sets it.
var httpHints = []struct{ query, flag, cli string }{
	// GET /v1/events/{id} and …/deliveries for a producer-chosen id
	// without a tenant (herald events get / deliveries --tenant).
	{"add ?tenant=<tenant>", "tenant", "add --tenant <tenant>"},
}

// cliHints returns the rewriting of an API answer's hints for HTTP clients
// into the flags of cmd, for the hints whose flag cmd has: a CLI user told
// to "add ?tenant=<tenant>" has no query string to add it to.
func cliHints(cmd *cobra.Command) func(string) string {
	var pairs []string
	for _, h := range httpHints {
		if cmd.Flags().Lookup(h.flag) != nil {
			pairs = append(pairs, h.query, h.cli)
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return strings.NewReplacer(pairs...).Replace
}

// apiPath is prefix + "/" + the escaped id (+ suffix).
func apiPath(prefix, id, suffix string) string {
	return prefix + "/" + url.PathEscape(id) + suffix
}

// apiQuery renders the non-empty values as a query string ("" or "?…").
func apiQuery(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// parseHeaderFlags turns K=V flags into a map; empty entries are skipped (so
// --header "" sends an empty map, clearing the headers on update).
func parseHeaderFlags(kvs []string) (map[string]string, error) {
	h := map[string]string{}
	for _, kv := range kvs {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--header %s: want NAME=VALUE", headerShown(kv))
		}
		h[strings.TrimSpace(k)] = v
	}
	return h, nil
}

// endpointFields are the flags shared by endpoints create and update.
type endpointFields struct {
	url, description string
	eventTypes       []string
	headers          []string
	pins             []string
	rateLimit        int
}

func (e *endpointFields) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.url, "url", "", "https URL that receives the events")
	f.StringVar(&e.description, "description", "", "description of the endpoint")
	f.StringSliceVar(&e.eventTypes, "event-type", nil, "event type filter such as file.* (repeatable; default every type)")
	f.StringArrayVar(&e.headers, "header", nil, "custom header NAME=VALUE sent with every attempt (repeatable)")
	f.IntVar(&e.rateLimit, "rate-limit", 0, "deliveries per second to this endpoint (0 = unlimited)")
	f.StringArrayVar(&e.pins, "pin", nil, "pin a version of a catalogued event type, TYPE=VERSION such as file.updated=1 (repeatable; default the newest)")
}

// body returns the JSON fields whose flags were given (all given ones
// for update; create sends the same shape).
func (e *endpointFields) body(cmd *cobra.Command) (map[string]any, error) {
	f := cmd.Flags()
	b := map[string]any{}
	if f.Changed("url") {
		b["url"] = e.url
	}
	if f.Changed("description") {
		b["description"] = e.description
	}
	if f.Changed("event-type") {
		b["event_types"] = append([]string{}, e.eventTypes...)
	}
	if f.Changed("header") {
		h, err := parseHeaderFlags(e.headers)
		if err != nil {
			return nil, err
		}
		b["headers"] = h
	}
	if f.Changed("pin") {
		pins := map[string]int{}
		for _, kv := range e.pins {
			name, v, ok := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if !ok || name == "" || err != nil || n < 1 {
				return nil, fmt.Errorf("--pin %q: want TYPE=VERSION, e.g. file.updated=1", kv)
			}
			pins[name] = n
		}
		b["versions"] = pins
	}
	if f.Changed("rate-limit") {
		if e.rateLimit < 0 {
			return nil, fmt.Errorf("--rate-limit %d: must be 0 (unlimited) or more", e.rateLimit)
		}
		b["rate_limit_per_second"] = e.rateLimit
	}
	return b, nil
}

// apiIDCmd is a subcommand taking one id argument.
func apiIDCmd(use, short string, run func(cmd *cobra.Command, id string) error) *cobra.Command {
	return &cobra.Command{
		Use:        use,
		Short:      short,
		Args:       cobra.ExactArgs(1),
		SuggestFor: verbSynonyms[strings.Fields(use)[0]],
		RunE:       func(cmd *cobra.Command, args []string) error { return run(cmd, args[0]) },
	}
}

// verbSynonyms are the words users type for a command's verb: an unknown
// subcommand equal to one gets "Did you mean this? <verb>".
var verbSynonyms = map[string][]string{
	"get":    {"show", "view", "describe", "read"},
	"show":   {"get", "view", "read"},
	"delete": {"rm", "remove", "del"},
	"revoke": {"delete", "rm", "remove", "del"},
	"replay": {"retry", "resend"},
}

func newEndpointsCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("endpoints", "Manage endpoints: the URLs that receive a tenant's events", o)

	var tenant string
	var create endpointFields
	createCmd := &cobra.Command{
		Use:   "create [--tenant T] --url U",
		Short: "Create an endpoint (POST /v1/endpoints); the answer shows its secret",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if create.url == "" {
				return errors.New("--url is required")
			}
			b, err := create.body(cmd)
			if err != nil {
				return err
			}
			if tenant != "" { // a tenant key's own tenant by default
				b["tenant"] = tenant
			}
			return o.do(cmd, http.MethodPost, "/v1/endpoints", b, nil)
		},
	}
	createCmd.Flags().StringVar(&tenant, "tenant", "", "owner of the endpoint (needed with an admin key; a tenant key's own by default)")
	create.bind(createCmd)

	var listTenant, listKind string
	var listPage *pageOpts
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List endpoints (GET /v1/endpoints)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := listPage.query("tenant", listTenant, "kind", listKind)
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/endpoints"+q, nil, nil)
		},
	}
	listCmd.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's endpoints")
	listCmd.Flags().StringVar(&listKind, "kind", "", "tenant (default), source (inbound sources' forwarding endpoints) or all")
	listPage = pageFlags(listCmd)

	var update endpointFields
	updateCmd := apiIDCmd("update ID", "Change an endpoint's given fields (PATCH /v1/endpoints/{id})", func(cmd *cobra.Command, id string) error {
		b, err := update.body(cmd)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return errors.New("nothing to change: give --url, --description, --event-type, --header, --rate-limit or --pin")
		}
		return o.do(cmd, http.MethodPatch, apiPath("/v1/endpoints", id, ""), b, nil)
	})
	update.bind(updateCmd)
	updateCmd.Flags().Lookup("event-type").Usage += `; --event-type "" for every type`
	updateCmd.Flags().Lookup("header").Usage += `; --header "" removes all`

	var state, dlvType string
	var dlvSince sinceValue
	var dlvPage *pageOpts
	deliveriesCmd := apiIDCmd("deliveries ID", "List an endpoint's deliveries (GET /v1/endpoints/{id}/deliveries)", func(cmd *cobra.Command, id string) error {
		q, err := dlvPage.query("state", state, "event_type", dlvType, "since", dlvSince.s)
		if err != nil {
			return err
		}
		return o.do(cmd, http.MethodGet, apiPath("/v1/endpoints", id, "/deliveries")+q, nil, nil)
	})
	deliveriesCmd.Flags().StringVar(&state, "state", "", "only deliveries in this state: pending, succeeded, dead or paused")
	deliveriesCmd.Flags().StringVar(&dlvType, "event-type", "", "only deliveries of this event type")
	deliveriesCmd.Flags().Var(&dlvSince, "since", "only deliveries last changed at or after this time: RFC 3339, or a duration ago such as 90m or 2d")
	dlvPage = pageFlags(deliveriesCmd)

	stateCmd := func(verb, short string) *cobra.Command {
		return apiIDCmd(verb+" ID", short+" (POST /v1/endpoints/{id}/"+verb+")", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodPost, apiPath("/v1/endpoints", id, "/"+verb), nil, nil)
		})
	}

	var overlap int
	rotateCmd := apiIDCmd("rotate-secret ID", "Rotate an endpoint's signing secret (POST /v1/endpoints/{id}/rotate-secret); the answer shows the new secret", func(cmd *cobra.Command, id string) error {
		var b map[string]int
		if cmd.Flags().Changed("overlap-seconds") {
			b = map[string]int{"overlap_seconds": overlap}
		}
		if b == nil {
			return o.do(cmd, http.MethodPost, apiPath("/v1/endpoints", id, "/rotate-secret"), []byte("{}"), nil)
		}
		return o.do(cmd, http.MethodPost, apiPath("/v1/endpoints", id, "/rotate-secret"), b, nil)
	})
	rotateCmd.Flags().IntVar(&overlap, "overlap-seconds", 86400, "how long the older secrets stay valid, seconds (0 = they stop signing at once)")

	var statsWindow string
	statsCmd := apiIDCmd("stats ID", "Show an endpoint's health over a window: attempts, failures by class and status, latency percentiles, circuit breaker (GET /v1/endpoints/{id}/stats)", func(cmd *cobra.Command, id string) error {
		return o.do(cmd, http.MethodGet, apiPath("/v1/endpoints", id, "/stats")+"?window="+url.QueryEscape(statsWindow), nil, nil)
	})
	statsCmd.Flags().StringVar(&statsWindow, "window", "24h", "1h, 24h (per-minute figures) or 7d (per-hour)")

	g.AddCommand(createCmd, listCmd, updateCmd, deliveriesCmd, rotateCmd, statsCmd,
		apiIDCmd("test ID", "Send a signed herald.test event to an endpoint now (POST /v1/endpoints/{id}/test)", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodPost, apiPath("/v1/endpoints", id, "/test"), nil, nil)
		}),
		stateCmd("pause", "Pause an endpoint: its deliveries are held, not attempted, until it is resumed"),
		stateCmd("resume", "Resume a paused endpoint: its held deliveries are released"),
		stateCmd("enable", "Enable a disabled endpoint: its held deliveries are released and endpoint.enabled is emitted"),
		apiIDCmd("get ID", "Show an endpoint (GET /v1/endpoints/{id})", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/endpoints", id, ""), nil, nil)
		}),
		apiIDCmd("delete ID", "Delete an endpoint (DELETE /v1/endpoints/{id})", func(cmd *cobra.Command, id string) error {
			return o.deleted(cmd, apiPath("/v1/endpoints", id, ""), id)
		}),
		apiIDCmd("secret ID", "Show an endpoint's signing secret (GET /v1/endpoints/{id}/secret)", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/endpoints", id, "/secret"), nil, nil)
		}),
		apiIDCmd("secrets ID", "List an endpoint's active signing secrets: ids and expiry, never values (GET /v1/endpoints/{id}/secrets)", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/endpoints", id, "/secrets"), nil, nil)
		}),
		&cobra.Command{
			Use:   "revoke-secret ID SECRET_ID",
			Short: "Revoke an older secret before its rotation overlap ends (DELETE /v1/endpoints/{id}/secrets/{secret_id})",
			Long: `Revoke one of the older secrets a rotation keeps signing during its overlap, now
instead of at its expiry. SECRET_ID (sec_…) comes from 'herald endpoints secrets ID'.
The current secret cannot be revoked (409): rotate it with overlap_seconds 0 instead.`,
			Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.do(cmd, http.MethodDelete, apiPath("/v1/endpoints", args[0], "/secrets/")+url.PathEscape(args[1]), nil, nil)
			},
		},
	)
	return g
}

func newDLQCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("dlq", "Inspect and replay dead-letter queues: the deliveries in state dead", o)

	var listTenant, listType string
	var listSince sinceValue
	var p *pageOpts
	list := &cobra.Command{
		Use:   "list [ENDPOINT_ID | --tenant T]",
		Short: "List dead letters of an endpoint, of a tenant, or all of them",
		Long: `List dead letters, newest first:
  herald dlq list ENDPOINT_ID    GET /v1/endpoints/{id}/deliveries?state=dead
  herald dlq list --tenant T     GET /v1/deliveries?state=dead&tenant=T
  herald dlq list                GET /v1/deliveries?state=dead (every tenant)`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && listTenant != "" {
				return errors.New("give ENDPOINT_ID or --tenant, not both")
			}
			q, err := p.query("state", "dead", "tenant", listTenant, "event_type", listType, "since", listSince.s)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return o.do(cmd, http.MethodGet, apiPath("/v1/endpoints", args[0], "/deliveries")+q, nil, nil)
			}
			return o.do(cmd, http.MethodGet, "/v1/deliveries"+q, nil, nil)
		},
	}
	list.Flags().StringVar(&listTenant, "tenant", "", "the dead letters of every endpoint of this tenant (instead of ENDPOINT_ID)")
	list.Flags().StringVar(&listType, "event-type", "", "only dead letters of this event type")
	list.Flags().Var(&listSince, "since", "only those dead-lettered at or after this time: RFC 3339, or a duration ago such as 90m or 2d")
	p = pageFlags(list)

	var countTenant string
	var countSince sinceValue
	counts := &cobra.Command{
		Use:   "counts",
		Short: "Count dead letters per endpoint, largest first (GET /v1/dead-letters)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.do(cmd, http.MethodGet, "/v1/dead-letters"+apiQuery("tenant", countTenant, "since", countSince.s), nil, nil)
		},
	}
	counts.Flags().StringVar(&countTenant, "tenant", "", "only this tenant's endpoints")
	counts.Flags().Var(&countSince, "since", "only dead letters dead-lettered at or after this time: RFC 3339, or a duration ago such as 90m or 2d")

	var replayDelivery, replayType string
	var replaySince, replayUntil sinceValue
	replay := &cobra.Command{
		Use:   "replay ENDPOINT_ID | --delivery DLV_ID",
		Short: "Replay dead letters: an endpoint's (all, in a time window, of a type) or one delivery",
		Long: `Replay dead letters: they go back to pending (held instead, if the endpoint is
paused or disabled) with the same event ids, and their attempts are added to
the same deliveries. The answer is {"replayed":N}.
  herald dlq replay ENDPOINT_ID [--since T] [--until T] [--event-type TYPE]
      POST /v1/endpoints/{id}/replay {"state":"dead","since":T,"until":T,"event_type":TYPE}
  herald dlq replay --delivery DLV_ID
      POST /v1/deliveries/{id}/replay (replayed: 0 if it is not dead)`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if replayDelivery != "" {
				if len(args) == 1 {
					return errors.New("give ENDPOINT_ID or --delivery, not both")
				}
				if replaySince.s != "" || replayUntil.s != "" || replayType != "" {
					return errors.New("--since, --until and --event-type select an endpoint's dead letters; not with --delivery")
				}
				return o.do(cmd, http.MethodPost, apiPath("/v1/deliveries", replayDelivery, "/replay"), nil, nil)
			}
			if len(args) == 0 {
				return errors.New("give ENDPOINT_ID (replay its dead letters) or --delivery DLV_ID (replay one)")
			}
			if replaySince.s != "" && replayUntil.s != "" && !replayUntil.t.After(replaySince.t) {
				// The API would refuse it too; a duration means that long
				// ago, so the larger one is the earlier time.
				return fmt.Errorf("--until %s is not after --since %s: --until must be the later time (a duration is that long ago: --since 20m --until 10m replays what died between 20 and 10 minutes ago)", replayUntil.describe(), replaySince.describe())
			}
			b := map[string]string{"state": "dead"}
			if replaySince.s != "" {
				b["since"] = replaySince.s
			}
			if replayUntil.s != "" {
				b["until"] = replayUntil.s
			}
			if replayType != "" {
				b["event_type"] = replayType
			}
			return o.do(cmd, http.MethodPost, apiPath("/v1/endpoints", args[0], "/replay"), b, nil)
		},
	}
	replay.Flags().StringVar(&replayDelivery, "delivery", "", "replay this one dead delivery (dlv_…) instead of an endpoint's")
	replay.Flags().StringVar(&replayType, "event-type", "", "only dead letters of this event type")
	replay.Flags().Var(&replaySince, "since", "only those dead-lettered at or after this time: RFC 3339, or a duration ago such as 90m or 2d")
	replay.Flags().Var(&replayUntil, "until", "only those dead-lettered before this time: RFC 3339, or a duration ago such as 30m")

	g.AddCommand(list, counts, replay)
	return g
}

func newEventsCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("events", "Publish and inspect events", o)

	var tenant, typ, data, dataFile, id, idemKey, occurredAt string
	var dataVersions []string
	publish := &cobra.Command{
		Use:   "publish [--tenant T] --type TYPE --data JSON",
		Short: "Publish an event (POST /v1/events)",
		Long: `Publish an event (POST /v1/events) to the tenant's subscribed endpoints.
The data (--data, or --data-file, - for stdin) is sent as given, not re-encoded.
For a catalogued type with several versions, --data-version N=JSON (repeatable)
sends the data of the older versions endpoints still receive (data_versions).
A personal-data warning from the server is printed to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if typ == "" {
				return errors.New("--type is required")
			}
			raw := []byte(data)
			switch {
			case data != "" && dataFile != "":
				return errors.New("give --data or --data-file, not both")
			case dataFile == "-":
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxAPIResponse))
				if err != nil {
					return fmt.Errorf("--data-file: %w", err)
				}
				raw = b
			case dataFile != "":
				b, err := os.ReadFile(dataFile)
				if err != nil {
					return fmt.Errorf("--data-file: %w", err)
				}
				raw = b
			case data == "":
				return errors.New("--data or --data-file is required")
			}
			if !json.Valid(raw) {
				if dataFile != "" {
					if len(bytes.TrimSpace(raw)) == 0 {
						return fmt.Errorf("--data-file %s: empty (want a JSON object)", dataFile)
					}
					return fmt.Errorf("--data-file %s: not valid JSON", dataFile)
				}
				return errors.New("--data: not valid JSON")
			}
			fields := map[string]string{"type": typ}
			if tenant != "" { // a tenant key's own tenant by default
				fields["tenant"] = tenant
			}
			if id != "" {
				fields["id"] = id
			}
			if occurredAt != "" {
				// The server applies the rule (RFC 3339, years 0000–9999 in
				// UTC); a value that is not even RFC 3339 is refused here.
				if _, err := time.Parse(time.RFC3339Nano, occurredAt); err != nil {
					return fmt.Errorf("--occurred-at %q: want an RFC 3339 time such as 2026-01-31T09:00:00Z", occurredAt)
				}
				fields["occurred_at"] = occurredAt
			}
			// --data-version N=JSON: data_versions, the data of older versions.
			versions := map[int][]byte{}
			for _, dv := range dataVersions {
				n, js, ok := strings.Cut(dv, "=")
				v, err := strconv.Atoi(n)
				if !ok || err != nil || v < 1 {
					return fmt.Errorf("--data-version %q: want N=JSON, N a version number ≥ 1", dv)
				}
				if _, dup := versions[v]; dup {
					return fmt.Errorf("--data-version: version %d given twice", v)
				}
				if !json.Valid([]byte(js)) {
					return fmt.Errorf("--data-version %d: not valid JSON", v)
				}
				versions[v] = []byte(js)
			}
			head, err := json.Marshal(fields)
			if err != nil {
				return err
			}
			// Splice the data in as given: encoding it as a json.RawMessage
			// would compact and HTML-escape it.
			body := append(head[:len(head)-1:len(head)-1], `,"data":`...)
			body = append(body, raw...)
			if len(versions) > 0 {
				vs := make([]int, 0, len(versions))
				for v := range versions {
					vs = append(vs, v)
				}
				sort.Ints(vs)
				body = append(body, `,"data_versions":{`...)
				for i, v := range vs {
					if i > 0 {
						body = append(body, ',')
					}
					body = append(append(body, `"`+strconv.Itoa(v)+`":`...), versions[v]...)
				}
				body = append(body, '}')
			}
			body = append(body, '}')
			var h http.Header
			if idemKey != "" {
				h = http.Header{"Idempotency-Key": {idemKey}}
			}
			return o.do(cmd, http.MethodPost, "/v1/events", body, h)
		},
	}
	pf := publish.Flags()
	pf.StringVar(&tenant, "tenant", "", "tenant whose endpoints receive the event (needed with an admin key; a tenant key's own by default)")
	pf.StringVar(&typ, "type", "", "event type, e.g. file.extraction.completed")
	pf.StringVar(&data, "data", "", `event data, a JSON object such as '{"file_id":"f_1","version":2}'`)
	pf.StringVar(&dataFile, "data-file", "", "file holding the event data, - for stdin")
	pf.StringArrayVar(&dataVersions, "data-version", nil, `data of an older version of a catalogued type that subscribed endpoints still receive, as N=JSON (e.g. 1='{"file_id":"f_1"}'); repeatable`)
	pf.StringVar(&id, "id", "", "your own event id, unique per tenant: publishing it again with the same type and data returns the original event (200); with other content it is refused (409)")
	pf.StringVar(&occurredAt, "occurred-at", "", "when the event happened, RFC 3339 (e.g. 2026-01-31T09:00:00Z); default now")
	pf.StringVar(&idemKey, "idempotency-key", "", "Idempotency-Key header, unique per tenant: a retry with the same key, type and data returns the original event (200); with other content it is refused (409)")

	var listTenant, listType string
	var listPage *pageOpts
	list := &cobra.Command{
		Use:   "list",
		Short: "List events (GET /v1/events)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := listPage.query("tenant", listTenant, "type", listType)
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/events"+q, nil, nil)
		},
	}
	list.Flags().StringVar(&listTenant, "tenant", "", "only this tenant's events")
	list.Flags().StringVar(&listType, "type", "", "only events of this type")
	listPage = pageFlags(list)

	// A producer-chosen id ("inv-1") is unique per tenant: an admin names
	// the tenant (a tenant key's own is implied).
	var getTenant, dlvTenant string
	get := apiIDCmd("get ID", "Show an event (GET /v1/events/{id}); --tenant for a producer-chosen id read with an admin key", func(cmd *cobra.Command, id string) error {
		q := apiQuery("tenant", getTenant)
		return o.do(cmd, http.MethodGet, apiPath("/v1/events", id, "")+q, nil, nil)
	})
	get.Flags().StringVar(&getTenant, "tenant", "", "the event's tenant (needed with an admin key for a producer-chosen id)")
	dlv := apiIDCmd("deliveries ID", "List an event's deliveries (GET /v1/events/{id}/deliveries); --tenant as for get", func(cmd *cobra.Command, id string) error {
		q := apiQuery("tenant", dlvTenant)
		return o.do(cmd, http.MethodGet, apiPath("/v1/events", id, "/deliveries")+q, nil, nil)
	})
	dlv.Flags().StringVar(&dlvTenant, "tenant", "", "the event's tenant (needed with an admin key for a producer-chosen id)")
	g.AddCommand(publish, list, get, dlv)
	return g
}

func newDeliveriesCmd() *cobra.Command {
	o := &apiOpts{}
	g := apiGroup("deliveries", "Inspect, replay and redeliver deliveries: one event to one endpoint, and their attempts", o)

	var tenant, state, typ string
	var since sinceValue
	var page *pageOpts
	list := &cobra.Command{
		Use:   "list",
		Short: "List deliveries across endpoints, newest first (GET /v1/deliveries)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := page.query("tenant", tenant, "state", state, "event_type", typ, "since", since.s)
			if err != nil {
				return err
			}
			return o.do(cmd, http.MethodGet, "/v1/deliveries"+q, nil, nil)
		},
	}
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's deliveries")
	list.Flags().StringVar(&state, "state", "", "only deliveries in this state: pending, succeeded, dead or paused")
	list.Flags().StringVar(&typ, "event-type", "", "only deliveries of this event type")
	list.Flags().Var(&since, "since", "only deliveries last changed at or after this time: RFC 3339, or a duration ago such as 90m or 2d")
	page = pageFlags(list)

	g.AddCommand(list,
		apiIDCmd("replay ID", "Replay one dead delivery: back to pending, same event id (POST /v1/deliveries/{id}/replay)", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodPost, apiPath("/v1/deliveries", id, "/replay"), nil, nil)
		}),
		apiIDCmd("redeliver ID", "Send a succeeded delivery again; the receiver sees its event id twice (POST /v1/deliveries/{id}/redeliver)", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodPost, apiPath("/v1/deliveries", id, "/redeliver"), nil, nil)
		}),
		apiIDCmd("get ID", "Show a delivery (GET /v1/deliveries/{id})", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/deliveries", id, ""), nil, nil)
		}),
		apiIDCmd("attempts ID", "List a delivery's attempts (GET /v1/deliveries/{id}/attempts)", func(cmd *cobra.Command, id string) error {
			return o.do(cmd, http.MethodGet, apiPath("/v1/deliveries", id, "/attempts"), nil, nil)
		}),
	)
	return g
}

// pageOpts holds the --limit and --cursor flags of a list command.
type pageOpts struct {
	limit  int
	cursor string
	flags  *pflag.FlagSet
}

// maxPageSize is the largest page the list routes give (api.ListQuery).
const maxPageSize = 1000

// pageFlags adds --limit and --cursor to a list command.
func pageFlags(cmd *cobra.Command) *pageOpts {
	p := &pageOpts{flags: cmd.Flags()}
	cmd.Flags().IntVar(&p.limit, "limit", 0, fmt.Sprintf("page size, 1–%d (default: the server's, 50)", maxPageSize))
	cmd.Flags().StringVar(&p.cursor, "cursor", "", "next_cursor of the previous page")
	return p
}

// query renders kv (name, value pairs; empty values skipped) and the page
// flags as a query string ("" or "?…"). A --limit given is 1–1000: 0 is
// refused like any other value out of range, not taken for the default.
func (p *pageOpts) query(kv ...string) (string, error) {
	if p.flags.Changed("limit") {
		if p.limit < 1 || p.limit > maxPageSize {
			return "", fmt.Errorf("--limit %d: a page holds 1 to %d items (leave --limit out for the server's default)", p.limit, maxPageSize)
		}
		kv = append(kv, "limit", strconv.Itoa(p.limit))
	}
	return apiQuery(append(kv, "cursor", p.cursor)...), nil
}

// sinceValue is a pflag.Value for --since: an RFC 3339 time, sent as given,
// or a duration ago (a Go duration such as 90m, or whole days such as 2d),
// sent as the RFC 3339 UTC time it names when the flag is parsed.
type sinceValue struct {
	s     string
	given string    // as the flag gave it ("10m", or the time)
	t     time.Time // the time s names
}

func (v *sinceValue) Set(s string) error {
	s = strings.TrimSpace(s)
	v.given = s
	if s == "" {
		v.s, v.t = "", time.Time{}
		return nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		v.s, v.t = s, t
		return nil
	}
	var ago time.Duration
	if err := newDaysValue(&ago, 0).Set(s); err != nil {
		return fmt.Errorf("%q: want an RFC 3339 time (2026-01-31T09:00:00Z) or a duration ago (90m, 36h, 2d)", s)
	}
	v.t = time.Now().UTC().Add(-ago).Truncate(time.Second)
	v.s = v.t.Format(time.RFC3339)
	return nil
}

// describe is the flag's value as given, with the time it names when that
// was a duration ago: "10m (2026-01-31T09:50:00Z)".
func (v *sinceValue) describe() string {
	if v.given == v.s {
		return v.s
	}
	return v.given + " (" + v.s + ")"
}

func (v *sinceValue) String() string { return v.s }

func (v *sinceValue) Type() string { return "time" }
