package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/herald-webhooks/herald/internal/egress"
)

// notShownURL stands for a URL-like value that does not parse as a URL
// and may hold a credential ("ops:pw@host" without a scheme).
const notShownURL = "(not shown: it may hold a credential)"

// redactURL is a URL value (--server, --url, HERALD_SERVER, …) as the CLI
// may show it, in help and in error messages alike: the whole user
// information ("ops:pw@", or a token given as the user name) becomes
// "xxxxx@", and the value of each query (or fragment) parameter whose
// name looks like a credential (token, api_key, secret, password, sig,
// signature, auth…: the names the API refuses in an endpoint URL,
// egress.CredentialInQuery) becomes "xxxxx". A value that does not parse
// as a URL is shown unchanged when it holds no "@", "?" or "#", else not
// at all (notShownURL).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		if strings.ContainsAny(s, "@?#") {
			return notShownURL
		}
		return s
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	u.RawQuery = redactParams(u.RawQuery)
	if u.Fragment != "" {
		u.RawFragment = redactParams(u.EscapedFragment())
		if f, err := url.PathUnescape(u.RawFragment); err == nil {
			u.Fragment = f
		} else {
			u.Fragment, u.RawFragment = "xxxxx", ""
		}
	}
	return u.String()
}

// redactParams is rawQuery with the value of each parameter named like a
// credential replaced by "xxxxx"; the other parameters, their order and
// their separators ("&" or ";") are kept.
func redactParams(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	var b strings.Builder
	start := 0
	for i := 0; i <= len(rawQuery); i++ {
		if i < len(rawQuery) && rawQuery[i] != '&' && rawQuery[i] != ';' {
			continue
		}
		part := rawQuery[start:i]
		if name, _, _ := strings.Cut(part, "="); part != "" {
			if _, secret := egress.CredentialInQuery(name); secret {
				part = name + "=xxxxx"
			}
		}
		b.WriteString(part)
		if i < len(rawQuery) {
			b.WriteByte(rawQuery[i])
		}
		start = i + 1
	}
	return b.String()
}

// redactErr is err with the URL of a failed request (*url.Error, which
// net/http redacts only the password of) redacted as redactURL does.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: redactURL(ue.URL), Err: ue.Err}
	}
	return err
}

// headerShown is a --header value as an error may show it: its name and
// separator ("X-Auth: …", "X-Auth=…"), never its value; nothing when no
// header name can be told apart from the value.
func headerShown(kv string) string {
	i := strings.IndexAny(kv, ":=")
	if i <= 0 || i > 64 || strings.ContainsFunc(kv[:i], func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
	}) {
		return "(its value not shown)"
	}
	return fmt.Sprintf("%q", kv[:i+1]+"…")
}
