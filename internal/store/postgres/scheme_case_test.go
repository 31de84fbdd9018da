package postgres

import "testing"

// TestParseConfigSchemeCase: URL schemes are case-insensitive (RFC 3986
// §3.1), and herald's --db accepts POSTGRES:// and PostgreSQL:// (app.ParseDB),
// so the store reads them as the URLs they are; pgx alone takes only the
// lower-case prefixes for a URL and reads any other as a keyword/value
// string, which does not parse.
func TestParseConfigSchemeCase(t *testing.T) {
	for _, u := range []string{"POSTGRES://herald@db.example:5433/h?sslmode=disable", "PostgreSQL://herald@db.example:5433/h?sslmode=disable", "postgres://herald@db.example:5433/h?sslmode=disable"} {
		cfg, err := parseConfig(u)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if c := cfg.ConnConfig; c.Host != "db.example" || c.Port != 5433 || c.Database != "h" || c.User != "herald" {
			t.Errorf("%s: host %q port %d database %q user %q", u, c.Host, c.Port, c.Database, c.User)
		}
	}
	if cfg, err := parseConfig("host=db.example port=5433 dbname=h user=herald sslmode=disable"); err != nil || cfg.ConnConfig.Database != "h" {
		t.Errorf("keyword/value: %v", err)
	}
}
