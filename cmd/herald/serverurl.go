package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/herald-webhooks/herald/internal/redact"
)

// parseServer reads a --server value (HERALD_SERVER): Herald's base URL,
// http or https with a host, and optionally a path prefix, kept when a
// reverse proxy serves Herald under one (https://proxy.example/herald);
// trailing slashes are dropped, a user information is kept (net/http sends
// it as basic authentication where no Authorization header is set:
// healthcheck). A query or a fragment is refused: the API's paths, with
// their own queries, are added after the base URL, so neither has a place
// to go (appended, "?x=1" swallowed the path: …/?x=1/v1/events). The
// errors begin with `--server "<value>"`, the value redacted (redact.URL),
// and name the rule.
func parseServer(s string) (*url.URL, error) {
	base, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("--server %q: want a base URL such as http://localhost:8080", redact.URL(s))
	}
	if strings.ContainsAny(s, "?#") { // only a query or a fragment holds them in a URL that parses
		return nil, fmt.Errorf(`--server %q: a server URL takes no query ("?…") or fragment ("#…"), the API's paths are added to it: give Herald's base URL, with a reverse proxy's path prefix if any (https://proxy.example/herald)`, redact.URL(s))
	}
	return base, nil
}

// apiURL is the URL of pathQuery ("/v1/events?tenant=acme", escaped, from
// the root of the API) on the server base (from parseServer): base's
// scheme, user information and host, its path prefix without trailing
// slashes, then pathQuery. Every request of the CLI to a --server is made
// to an apiURL.
func apiURL(base *url.URL, pathQuery string) string {
	root := *base
	root.Path, root.RawPath, root.RawQuery, root.ForceQuery, root.Fragment, root.RawFragment = "", "", "", false, "", ""
	return root.String() + strings.TrimRight(base.EscapedPath(), "/") + pathQuery
}

// serverValue is the pflag.Value of a --server flag: Set refuses a value
// parseServer refuses, so a bad --server or HERALD_SERVER is refused when
// the flags are read, before any request (and the help says so of a bad
// HERALD_SERVER). allowEmpty lets "" mean unset (healthcheck's).
type serverValue struct {
	s          *string
	allowEmpty bool
}

func newServerValue(p *string, def string, allowEmpty bool) serverValue {
	*p = def
	return serverValue{s: p, allowEmpty: allowEmpty}
}

func (v serverValue) Set(s string) error {
	if s != "" || !v.allowEmpty {
		if _, err := parseServer(s); err != nil {
			return err
		}
	}
	*v.s = s
	return nil
}

func (v serverValue) String() string { return *v.s }
func (v serverValue) Type() string   { return "string" }

// showsNoValue marks serverValue's Set errors as standing alone: they name
// the flag and show the value redacted.
func (serverValue) showsNoValue() {}

// flagValueError is err, from setting a flag, as the user sees it: for a
// value whose errors stand alone (showsNoValue), the value's own error
// instead of pflag's `invalid argument "<value as given>" for "--server"
// flag: …`, which would show a URL's credentials. Other errors are
// returned unchanged.
func flagValueError(err error) error {
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) && ive.GetFlag() != nil {
		if _, ok := ive.GetFlag().Value.(interface{ showsNoValue() }); ok {
			return ive.Unwrap()
		}
	}
	return err
}
