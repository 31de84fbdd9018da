package redact_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/redact"
)

// TestURL: the one redactor of URLs and database connection strings.
// The cases of the CLI's former redactURL and of internal/app's former
// RedactDB are here, with the stronger behaviour of the two: the whole
// user information hidden (RedactDB showed a database URL's user name),
// the values of query and fragment parameters named like credentials
// hidden in their order (RedactDB re-sorted the query), a URL that does
// not parse shown by its scheme alone.
func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// The CLI's URLs (--server, --url, HERALD_SERVER…).
		{"http://localhost:8080", "http://localhost:8080"},
		{"https://herald.example/ui", "https://herald.example/ui"},
		{"http://ops:SRVPASSWORD@127.0.0.1:18799", "http://xxxxx@127.0.0.1:18799"},
		{"https://OPSUSERONLY@herald.example", "https://xxxxx@herald.example"},
		{"https://a@b:c@herald.example/p@q", "https://xxxxx@herald.example/p@q"},
		{"https://herald.example/?token=QTOKEN", "https://herald.example/?token=xxxxx"},
		{"https://herald.example/x?a=1&API_Key=K1&limit=2&sig=S&password=P", "https://herald.example/x?a=1&API_Key=xxxxx&limit=2&sig=xxxxx&password=xxxxx"},
		{"https://herald.example/x?access_token=T;auth=A", "https://herald.example/x?access_token=xxxxx;auth=xxxxx"},
		{"https://herald.example/x?%74oken=T&a", "https://herald.example/x?%74oken=xxxxx&a"},
		{"https://herald.example/x#access_token=T", "https://herald.example/x#access_token=xxxxx"},
		{"https://herald.example/x#top", "https://herald.example/x#top"},
		{"HTTPS://Herald.Example/X", "HTTPS://Herald.Example/X"},
		{"herald.example", "herald.example"},
		{"ops:pw@herald.example", "(not shown: it may hold a credential)"},
		{"http://ops:p%zz@h", "http://(a URL that does not parse; not shown)"},
		{"--db=postgres://u:pw@h/x", "(not shown: it may hold a credential)"},
		// --db values.
		{"sqlite:herald.db", "sqlite:herald.db"},
		{"sqlite:/var/lib/herald/h.db", "sqlite:/var/lib/herald/h.db"},
		{"sqlite:<tmpdir>/bench.db", "sqlite:<tmpdir>/bench.db"},
		{"herald.db", "herald.db"},
		{"postgres://herald@db:5432/herald?sslmode=disable", "postgres://xxxxx@db:5432/herald?sslmode=disable"},
		{"postgres://herald:s3cret@db:5432/herald", "postgres://xxxxx@db:5432/herald"},
		{"postgresql://herald:s3cret@db/herald", "postgresql://xxxxx@db/herald"},
		{"postgres://db/herald?user=herald&password=s3cret", "postgres://db/herald?user=herald&password=xxxxx"},
		{"postgres://db/herald?sslmode=verify-full&sslpassword=s3cret", "postgres://db/herald?sslmode=verify-full&sslpassword=xxxxx"},
		{"postgress://herald:s3cret@db/herald", "postgress://xxxxx@db/herald"},
		{"postgres://herald:s3%zz@db/herald", "postgres://(a URL that does not parse; not shown)"},
		// A scheme is shown as given (schemes are case-insensitive, RFC
		// 3986 §3.1, so POSTGRES:// is PostgreSQL too).
		{"POSTGRES://herald:s3cret@db:5432/herald", "POSTGRES://xxxxx@db:5432/herald"},
		{"PostgreSQL://db/herald?user=herald&password=s3cret", "PostgreSQL://db/herald?user=herald&password=xxxxx"},
		{"Postgress://herald:s3cret@db/herald", "Postgress://xxxxx@db/herald"},
		{"POSTGRES://herald@db/herald", "POSTGRES://xxxxx@db/herald"},
		// libpq keyword/value strings (refused by --db, but never shown
		// with their password).
		{"host=db user=herald password=s3cret dbname=herald", "host=db user=herald password=xxxxx dbname=herald"},
		{"host=db PASSWORD = 's3 cret\\' x' sslpassword=s3cret", "host=db PASSWORD = xxxxx sslpassword=xxxxx"},
		{"password=s3cret", "password=xxxxx"},
	} {
		got := redact.URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3", "SRVPASSWORD", "OPSUSERONLY", "QTOKEN", "K1", "herald:", "herald@", "pw@", "cret"} {
			if strings.Contains(got, secret) && !strings.Contains(c.in, "herald.db") {
				t.Errorf("URL(%q) = %q shows %q", c.in, got, secret)
			}
		}
	}
}

// TestURLError: the URL of a failed request (*url.Error, which net/http
// redacts only the password of) is redacted as URL does; other errors
// are returned unchanged.
func TestURLError(t *testing.T) {
	cause := errors.New("connection refused")
	err := redact.URLError(&url.Error{Op: "Get", URL: "http://OPSUSER@127.0.0.1:1/readyz?token=QTOKEN", Err: cause})
	if got, want := err.Error(), `Get "http://xxxxx@127.0.0.1:1/readyz?token=xxxxx": connection refused`; got != want {
		t.Errorf("URLError = %q, want %q", got, want)
	}
	if !errors.Is(err, cause) {
		t.Errorf("URLError(%v) does not wrap its cause", err)
	}
	if got := redact.URLError(cause); got != cause {
		t.Errorf("URLError(%v) = %v, want it unchanged", cause, got)
	}
}
