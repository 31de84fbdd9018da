package main

import (
	"fmt"
	"strings"
)

// The CLI redacts URLs with internal/redact (redact.URL, redact.URLError):
// help, error messages and the server's logs hide credentials alike.

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
