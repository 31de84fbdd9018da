// Package redact hides credentials in values shown to people: the URLs
// and database connection strings that the CLI's help and errors, the
// server's logs and errors (--db) and the benchmark's results repeat.
// It is the one redactor of Herald; nothing else decides what of a URL
// may be shown.
package redact

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/herald-webhooks/herald/internal/egress"
)

// Mask stands for a hidden credential: a URL's whole user information
// ("xxxxx@host"), a parameter's value ("token=xxxxx").
const Mask = "xxxxx"

// NotShown stands for a value that may hold a credential and cannot be
// redacted reliably (it does not parse as a URL).
const NotShown = "(not shown: it may hold a credential)"

// notParsed follows the scheme of a "scheme://…" value that does not
// parse as a URL.
const notParsed = "(a URL that does not parse; not shown)"

// keywordPassword matches the password of a libpq keyword/value
// connection string ("host=db password=s3cret", "sslpassword='a b'"):
// the keyword, at the start or after white space, and its value, a word
// or a single-quoted string with backslash escapes.
var keywordPassword = regexp.MustCompile(`(?i)((?:^|\s)(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']*)`)

// URL returns s, a URL or a database connection string (--server, --url,
// --db, HERALD_SERVER…), fit for help, error messages and logs:
//   - a URL's whole user information ("ops:pw@", a user name alone, a
//     token given as the user name) becomes "xxxxx@";
//   - the value of each query or fragment parameter whose name looks like
//     a credential (token, api_key, secret, password, sslpassword, sig,
//     signature, auth…: the names the API refuses in an endpoint URL,
//     egress.CredentialInQuery) becomes "xxxxx", the other parameters,
//     their order and separators ("&", ";") kept;
//   - the rest is shown as given (a scheme keeps its case: POSTGRES://);
//   - a libpq keyword/value string (no "://") shows "password=xxxxx" for
//     each password or sslpassword;
//   - a "scheme://…" value that does not parse shows its scheme alone
//     ("postgres://(a URL that does not parse; not shown)"), another
//     value that does not parse, or an opaque one ("ops:pw@host", no
//     "//"), is NotShown when it holds an "@", "?" or "#", else shown
//     unchanged (sqlite:herald.db, herald.example).
func URL(s string) string {
	if !strings.Contains(s, "://") && keywordPassword.MatchString(s) {
		return keywordPassword.ReplaceAllString(s, "${1}"+Mask)
	}
	u, err := url.Parse(s)
	if err != nil {
		if scheme, _, ok := strings.Cut(s, "://"); ok && isScheme(scheme) {
			return scheme + "://" + notParsed
		}
		if strings.ContainsAny(s, "@?#") {
			return NotShown
		}
		return s
	}
	if u.Opaque != "" {
		if strings.ContainsAny(s, "@?#") {
			return NotShown
		}
		return s
	}
	// Cut as url.Parse cuts: the fragment at the first "#", the query at
	// the first "?" before it.
	rest, frag, hasFrag := strings.Cut(s, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	if u.User != nil {
		if i := strings.Index(rest, "//"); i >= 0 {
			auth := rest[i+2:]
			end := strings.IndexByte(auth, '/')
			if end < 0 {
				end = len(auth)
			}
			if at := strings.LastIndex(auth[:end], "@"); at >= 0 {
				rest = rest[:i+2] + Mask + auth[at:]
			}
		}
	}
	if hasQuery {
		rest += "?" + Params(query)
	}
	if hasFrag {
		rest += "#" + Params(frag)
	}
	return rest
}

// Params is raw, a query (or a fragment written as one), with the value of
// each parameter named like a credential (egress.CredentialInQuery)
// replaced by Mask; the other parameters, their order and their
// separators ("&" or ";") are kept.
func Params(raw string) string {
	if raw == "" {
		return ""
	}
	var b strings.Builder
	start := 0
	for i := 0; i <= len(raw); i++ {
		if i < len(raw) && raw[i] != '&' && raw[i] != ';' {
			continue
		}
		part := raw[start:i]
		if name, _, _ := strings.Cut(part, "="); part != "" {
			if _, secret := egress.CredentialInQuery(name); secret {
				part = name + "=" + Mask
			}
		}
		b.WriteString(part)
		if i < len(raw) {
			b.WriteByte(raw[i])
		}
		start = i + 1
	}
	return b.String()
}

// URLError is err with the URL of a failed request (a *url.Error, which
// net/http redacts only the password of) redacted as URL does; it wraps
// the same cause. Any other error is returned unchanged.
func URLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: URL(ue.URL), Err: ue.Err}
	}
	return err
}

// isScheme reports whether s is a URL scheme (RFC 3986 §3.1: a letter,
// then letters, digits, "+", "-" or ".").
func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}
