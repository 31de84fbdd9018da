package console

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestFormRefusalsInFormTerms: every form's refusal by the API's schema
// (huma's own wording: "expected string to be not blank", "expected array
// length >= 1", "expected value to be one of …", after "validation
// failed;") is shown in the form's terms: the field by its label, then the
// rule as a sentence a user reads, and nothing is changed.
func TestFormRefusalsInFormTerms(t *testing.T) {
	f := newFixture(t)
	b, token := adminBrowser(t, f)
	src := createSource(t, f, `{"name":"stripe in","scheme":"stripe","secrets":["source-secret-0123456789"],"destination_url":"http://10.0.0.9/in"}`)
	var ep struct{ ID string }
	f.apiCall(adminKey, "POST", "/v1/endpoints", `{"url":"https://example.com/hook","tenant":"acme"}`, &ep)

	with := func(base url.Values, kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	newEndpoint := url.Values{"url": {"https://example.com/h"}, "tenant": {"acme"}}
	editEndpoint := url.Values{"url": {"https://example.com/hook"}}
	newSource := url.Values{"name": {"n"}, "scheme": {"stripe"}, "secrets": {"source-secret-0123456789"}, "destination_url": {"http://10.0.0.9/in"}}
	editSource := url.Values{"name": {src.Name}, "destination_url": {src.DestinationURL}, "secrets": {""},
		"was_name": {src.Name}, "was_destination_url": {src.DestinationURL}}
	newKey := url.Values{"name": {"k"}, "role": {"viewer"}, "tenant": {"acme"}}
	newLink := url.Values{"tenant": {"acme"}, "role": {"viewer"}}
	long := strings.Repeat("x", 1100)
	const notKept = " The secrets typed were not kept (they are never sent back to the browser): type them again."
	const blankRule = "must not be blank (a character other than spaces) and contain no control characters or invisible format characters (C0 and C1 controls, U+200B, U+FEFF, bidirectional overrides such as U+202E)"

	for _, c := range []struct {
		what, path string
		form       url.Values
		want       string
	}{
		// blank string (a pattern with a description)
		{"source name of spaces", "/ui/sources", with(newSource, "name", "   "), "Name: " + blankRule + "." + notKept},
		{"edited source name of spaces", "/ui/sources/" + src.ID, with(editSource, "name", "   "), "Name: " + blankRule},
		{"API key name of spaces", "/ui/keys", with(newKey, "name", "   "), "Name: " + blankRule},
		// required string: minimum length 1
		{"empty endpoint URL", "/ui/endpoints", with(newEndpoint, "url", ""), "URL: must not be empty"},
		{"edited endpoint URL emptied", "/ui/endpoints/" + ep.ID, with(editEndpoint, "url", ""), "URL: must not be empty"},
		{"empty source name", "/ui/sources", with(newSource, "name", ""), "Name: must not be empty." + notKept},
		{"edited source name emptied", "/ui/sources/" + src.ID, with(editSource, "name", ""), "Name: must not be empty"},
		{"edited destination emptied", "/ui/sources/" + src.ID, with(editSource, "destination_url", ""), "Destination URL: must not be empty"},
		// minimum array length
		{"source without secrets", "/ui/sources", with(newSource, "secrets", ""), "Secrets: must have at least one, one a line"},
		// maximum length
		{"long endpoint description", "/ui/endpoints", with(newEndpoint, "description", long), "Description: must be at most 1024 characters long"},
		{"long edited description", "/ui/endpoints/" + ep.ID, with(editEndpoint, "description", long), "Description: must be at most 1024 characters long"},
		{"long source name", "/ui/sources", with(newSource, "name", long), "Name: must be at most 128 characters long." + notKept},
		{"long edited dedupe rule", "/ui/sources/" + src.ID, with(editSource, "dedupe", long), "Dedupe: must be at most 256 characters long"},
		{"long API key name", "/ui/keys", with(newKey, "name", long), "Name: must be at most 128 characters long"},
		// pattern
		{"endpoint tenant with a space", "/ui/endpoints", with(newEndpoint, "tenant", "a b"), "Tenant: must be 1–128 letters, digits, _ . : or -"},
		{"portal link without a tenant", "/ui/portal-links", with(newLink, "tenant", ""), "Tenant: must be 1–128 letters, digits, _ . : or -"},
		{"description with a NUL", "/ui/endpoints", with(newEndpoint, "description", "a\x00b"), "Description: must contain no NUL characters"},
		// enum
		{"unknown scheme", "/ui/sources", with(newSource, "scheme", "nope"), "Scheme: must be one of herald, standard-webhooks, stripe, github, shopify, slack or hmac." + notKept},
		{"API key without a role", "/ui/keys", with(newKey, "role", ""), "Role: must be one of admin, manager, publisher or viewer"},
		{"portal link as admin", "/ui/portal-links", with(newLink, "role", "admin"), "Role: must be one of manager or viewer"},
	} {
		form := with(c.form, "csrf", token)
		w := b.do("POST", c.path, form)
		m := regexp.MustCompile(`(?s)<p class="error" role="alert">(.*?)</p>`).FindStringSubmatch(w.Body.String())
		if w.Code != http.StatusUnprocessableEntity || m == nil {
			t.Errorf("%s: %d, no error shown; want 422 saying %q", c.what, w.Code, c.want)
			continue
		}
		if got := html.UnescapeString(m[1]); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.what, got, c.want)
		}
	}

	// Nothing was changed by any of them.
	var keys struct{ Data []struct{ Name string } }
	f.apiCall(adminKey, "GET", "/v1/api-keys", "", &keys)
	var sources struct{ Data []struct{ Name string } }
	f.apiCall(adminKey, "GET", "/v1/sources", "", &sources)
	var endpoints struct{ Data []struct{ ID string } }
	f.apiCall(adminKey, "GET", "/v1/endpoints?kind=tenant", "", &endpoints)
	if len(keys.Data) != 0 || len(sources.Data) != 1 || sources.Data[0].Name != src.Name || len(endpoints.Data) != 1 {
		t.Errorf("a refused form changed something: %d keys, sources %+v, %d tenant endpoints", len(keys.Data), sources.Data, len(endpoints.Data))
	}

	// A page's filter given in its address (the dead letters' tenant)
	// reads the same.
	w := b.do("GET", "/ui/dead-letters?tenant=a%20b", nil)
	if body := html.UnescapeString(w.Body.String()); w.Code != http.StatusUnprocessableEntity || !strings.Contains(body, "Tenant: must be 1–128 letters, digits, _ . : or -") || strings.Contains(body, "validation failed") {
		t.Errorf("dead letters of tenant %q: %d\n%s", "a b", w.Code, body)
	}

	// Schema refusals no form above can reach (a number out of its
	// schema's range, a property left out) read the same way.
	for _, c := range []struct{ loc, msg, want string }{
		{"body.rate_limit_per_second", "expected number >= 0", "Rate limit: must be at least 0"},
		{"body.rate_limit_per_second", "expected number <= 100000", "Rate limit: must be at most 100000"},
		{"body.rate_limit_per_second", "expected number > 0", "Rate limit: must be more than 0"},
		{"body.rate_limit_per_second", "expected integer", "Rate limit: must be a whole number"},
		{"body.url", "expected length >= 8", "URL: must be at least 8 characters long"},
		{"body.url", "expected string to match pattern ^https?://", "URL: must match the pattern ^https?://"},
		{"body.event_types", "expected array length <= 100", "Event types: must have at most 100, one a line"},
		{"body", "expected required property url to be present", "URL: is required"},
	} {
		err := relabel(&apiError{Status: 422, head: "validation failed", fields: []fieldError{{c.loc, c.msg}}}, endpointLabels)
		if got := err.Error(); got != c.want {
			t.Errorf("%s %q:\n got %q\nwant %q", c.loc, c.msg, got, c.want)
		}
	}
}
