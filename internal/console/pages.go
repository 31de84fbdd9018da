package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/herald-webhooks/herald/internal/api"
)

func (c *Console) routes() {
	m := c.mux
	static, _ := fs.Sub(assets, "static")
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	m.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w)
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	}))
	m.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	m.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	m.HandleFunc("GET /docs", c.serveDocs)
	m.HandleFunc("GET /docs/", c.serveDocs)

	m.HandleFunc("GET /ui/sign-in", c.signInPage)
	m.HandleFunc("GET /ui/portal", c.signInPage)
	m.HandleFunc("POST /ui/sign-in", c.signIn)
	m.HandleFunc("POST /ui/sign-out", c.action(c.signOut))

	m.HandleFunc("GET /ui/{$}", c.page(c.overview))
	m.HandleFunc("GET /ui/endpoints", c.page(c.endpoints))
	m.HandleFunc("GET /ui/endpoints/new", c.page(c.may("create-endpoint", c.endpointForm)))
	m.HandleFunc("POST /ui/endpoints", c.action(c.createEndpoint))
	m.HandleFunc("GET /ui/endpoints/{id}", c.page(c.endpointDetail))
	m.HandleFunc("GET /ui/endpoints/{id}/edit", c.page(c.may("update-endpoint", c.endpointForm)))
	m.HandleFunc("POST /ui/endpoints/{id}", c.action(c.updateEndpoint))
	m.HandleFunc("GET /ui/endpoints/{id}/delete", c.page(endpointDeletion.confirm(c)))
	m.HandleFunc("POST /ui/endpoints/{id}/delete", c.action(endpointDeletion.delete(c)))
	m.HandleFunc("POST /ui/endpoints/{id}/secret", c.action(c.revealSecret))
	m.HandleFunc("POST /ui/endpoints/{id}/rotate", c.action(c.rotateSecret))
	m.HandleFunc("POST /ui/endpoints/{id}/test", c.action(c.testEndpoint))
	// one-time result pages of the POSTs above (Post/Redirect/Get, see stash)
	m.HandleFunc("GET /ui/endpoints/{id}/created", c.page(c.shown))
	m.HandleFunc("GET /ui/endpoints/{id}/rotated", c.page(c.shown))
	m.HandleFunc("GET /ui/endpoints/{id}/tested", c.page(c.shown))
	m.HandleFunc("GET /ui/endpoints/{id}/secret", c.page(c.shown))
	m.HandleFunc("GET /ui/keys/created", c.page(c.shown))
	m.HandleFunc("GET /ui/keys/portal-link", c.page(c.shown))
	m.HandleFunc("POST /ui/endpoints/{id}/state", c.action(c.changeState))
	m.HandleFunc("GET /ui/deliveries/{id}", c.page(c.deliveryDetail))
	m.HandleFunc("POST /ui/deliveries/{id}/replay", c.action(c.may("replay-delivery", c.replayDelivery)))
	m.HandleFunc("GET /ui/events", c.page(c.events))
	m.HandleFunc("GET /ui/events/{id}", c.page(c.eventDetail))
	m.HandleFunc("GET /ui/dead-letters", c.page(c.deadLetters))
	m.HandleFunc("POST /ui/dead-letters/replay", c.action(c.may("replay-delivery", c.replay)))
	m.HandleFunc("GET /ui/sources", c.page(c.sources))
	m.HandleFunc("POST /ui/sources", c.action(c.may("create-source", c.createSource)))
	m.HandleFunc("GET /ui/sources/{id}", c.page(c.sourceDetail))
	m.HandleFunc("POST /ui/sources/{id}", c.action(c.may("update-source", c.updateSource)))
	m.HandleFunc("GET /ui/sources/{id}/delete", c.page(sourceDeletion.confirm(c)))
	m.HandleFunc("POST /ui/sources/{id}/delete", c.action(sourceDeletion.delete(c)))
	m.HandleFunc("GET /ui/keys", c.page(c.keys))
	m.HandleFunc("POST /ui/keys", c.action(c.may("create-api-key", c.createKey)))
	m.HandleFunc("POST /ui/keys/{id}/revoke", c.action(c.may("revoke-api-key", c.revokeKey)))
	m.HandleFunc("POST /ui/portal-links", c.action(c.may("create-portal-session", c.createPortalLink)))
	m.HandleFunc("POST /ui/portal-links/{id}/revoke", c.action(c.may("revoke-portal-session", c.revokePortalLink)))
	m.HandleFunc("GET /ui/catalog", c.page(c.catalog))
	m.HandleFunc("GET /ui/catalog/{name}", c.page(c.eventType))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, c.current(r), http.StatusNotFound, "no console page "+r.Method+" "+api.Echo(r.URL.Path))
	})
}

// --- sign-in ------------------------------------------------------------

type signInData struct {
	Next   string
	Portal bool
	Token  string // pre-session CSRF token
	Err    string
}

func (d signInData) errText() string { return d.Err }

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	tok := randomToken()
	setCookie(w, r, signinCookie, tok, 600)
	next := r.URL.Query().Get("next")
	var msg string
	if r.URL.Query().Get("ended") != "" {
		msg = fmt.Sprintf("Your session has ended: it was idle for %s or reached its %s limit, its key or portal link was revoked or expired, or Herald restarted (or this request reached another Herald node: sessions live on the node that signed in). Sign in again, or open your portal link again (ask for a new one if it has expired).",
			span(c.cfg.IdleTimeout), span(c.cfg.AbsoluteTimeout))
	}
	c.render(w, r, http.StatusOK, "signin", nil, "Sign in", "", signInData{Next: safeNext(next), Portal: r.URL.Path == "/ui/portal", Token: tok, Err: msg})
}

// portalToken is the token of a whole portal link pasted into the sign-in
// field (…/ui/portal#token=herald_portal_…: the page without a token asks
// for the link or its token); any other value is the key as typed.
func portalToken(key string) string {
	k := strings.TrimSpace(key)
	if _, tok, ok := strings.Cut(k, "/ui/portal#token="); ok {
		tok, _, _ = strings.Cut(tok, "&")
		return tok
	}
	return key
}

// safeNext keeps a post-sign-in redirect on the console.
func safeNext(n string) string {
	if !strings.HasPrefix(n, "/ui/") || strings.HasPrefix(n, "//") || strings.ContainsAny(n, "\\\r\n") {
		return "/ui/"
	}
	return n
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	ck, err := r.Cookie(signinCookie)
	got := r.PostFormValue("csrf")
	if err != nil || ck.Value == "" || got == "" || ck.Value != got {
		// No sign-in: the form was not this browser's, or its page was
		// left open past the token's 10 minutes. The key is not read;
		// the sign-in page comes back with a fresh token, so a person
		// signs in again from where they are.
		msg := "the sign-in form was not valid: sign in again"
		if got != "" && (err != nil || ck.Value == "") {
			msg = "the sign-in page expired (it is valid for 10 minutes): sign in again"
		}
		tok := randomToken()
		setCookie(w, r, signinCookie, tok, 600)
		c.render(w, r, http.StatusForbidden, "signin", nil, "Sign in", "", signInData{Next: safeNext(r.PostFormValue("next")), Token: tok, Err: msg})
		return
	}
	key := portalToken(r.PostFormValue("key"))
	p, err := c.cfg.API.Authenticate(r.Context(), clientIP(r), key)
	if err != nil {
		var ae *api.AuthenticationError
		status, msg := http.StatusUnauthorized, "sign-in failed"
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			// The address is throttled (the API's own bucket): 429 with
			// Retry-After, as the API answers it.
			secs := int(math.Ceil(ae.RetryAfter.Seconds()))
			status, msg = http.StatusTooManyRequests, fmt.Sprintf("too many attempts, retry in %d s", secs)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		} else if ae != nil {
			msg = "sign-in failed: " + ae.Detail
		} else {
			status, msg = http.StatusServiceUnavailable, "the store is unavailable; retry later"
		}
		tok := randomToken()
		setCookie(w, r, signinCookie, tok, 600)
		c.render(w, r, status, "signin", nil, "Sign in", "", signInData{Next: safeNext(r.PostFormValue("next")), Token: tok, Err: msg})
		return
	}
	if old := c.current(r); old != nil {
		c.end(old)
	}
	s := c.newSession(key, p)
	setCookie(w, r, signinCookie, "", -1)
	setCookie(w, r, sessionCookie, s.id, 0)
	next := safeNext(r.PostFormValue("next"))
	if next == "/ui/" {
		next = landing(p)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// landing is the first page a principal can use: the overview for an
// admin, a manager or a viewer key; the endpoints for a portal session
// (its owner manages endpoints); the events for a publisher (it may read
// nothing else of its tenant); the event catalog, which every role reads,
// otherwise.
func landing(p api.Principal) string {
	switch {
	case p.Portal && api.Allowed(p.Role, "list-endpoints"):
		return "/ui/endpoints"
	case api.Allowed(p.Role, "list-deliveries"):
		return "/ui/"
	case api.Allowed(p.Role, "list-endpoints"):
		return "/ui/endpoints"
	case api.Allowed(p.Role, "list-events"):
		return "/ui/events"
	}
	return "/ui/catalog"
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, s *session) {
	c.end(s)
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/ui/sign-in", http.StatusSeeOther)
}

// --- endpoints ----------------------------------------------------------

type endpointList struct {
	Data       []api.EndpointOut `json:"data"`
	NextCursor string            `json:"next_cursor"`
}

type deliveryList struct {
	Data       []api.DeliveryOut `json:"data"`
	NextCursor string            `json:"next_cursor"`
}

type attemptList struct {
	Data       []api.AttemptOut `json:"data"`
	NextCursor string           `json:"next_cursor"`
}

// health is an endpoint's delivery health over the last day, read from its
// stats rollups (GET /v1/endpoints/{id}/stats?window=24h): one request per
// endpoint whatever its traffic, instead of reading its deliveries and their
// attempts.
type health struct {
	Attempts    int64     // attempts started in the window
	SuccessRate float64   // successes / attempts, 0–1 (meaningless when Attempts is 0)
	P95         float64   // ms: upper bound of the histogram bucket holding the 95th percentile; 0 without attempts
	LastSuccess time.Time // start of the latest successful attempt within 8 days; zero: none
	DeadLetters int       // deliveries in the dead-letter queue now (set by the list from GET /v1/dead-letters)
}

// healthWindow is the stats window the endpoint pages show.
const healthWindow = "24h"

func (c *Console) health(r *http.Request, s *session, id string) health {
	var st api.EndpointStatsOut
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id)+"/stats?window="+healthWindow, nil, &st); err != nil {
		return health{}
	}
	h := health{Attempts: st.Attempts}
	if st.SuccessRate != nil {
		h.SuccessRate = *st.SuccessRate
	}
	if st.Duration.P95Ms != nil {
		h.P95 = *st.Duration.P95Ms
	}
	if st.LastSuccessAt != nil {
		h.LastSuccess = *st.LastSuccessAt
	}
	return h
}

type endpointRow struct {
	E api.EndpointOut
	H health
}

type endpointsData struct {
	Rows       []endpointRow
	State      string
	Tenant     string
	Kind       string // tenant (default), source or all (GET /v1/endpoints?kind=)
	Q          string
	NextCursor string
	Cursor     string
	Scanned    int // endpoints read to find Rows
	Err        string
}

func (d endpointsData) errText() string { return d.Err }

// endpointStates are the states an endpoint can be in (EndpointOut.State).
var endpointStates = []string{"enabled", "paused", "disabled"}

// listLabels name the endpoints list's query parameters by the filter
// form's labels.
var listLabels = map[string]string{"kind": "Kind", "tenant": "Tenant", "cursor": "Next page", "type": "Type"}

// eventIDLabels name the search form's fields in the errors of an event read
// by id.
var eventIDLabels = map[string]string{"path.id": "Id", "tenant": "Tenant"}

func (c *Console) endpoints(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := endpointsData{State: q.Get("state"), Tenant: q.Get("tenant"), Kind: q.Get("kind"), Q: q.Get("q"), Cursor: q.Get("cursor")}
	v := url.Values{"limit": {strconv.Itoa(endpointPage)}}
	if d.Kind != "" { // the API checks it (tenant, source or all)
		v.Set("kind", d.Kind)
	} else {
		d.Kind = "tenant"
	}
	if d.State != "" && !slices.Contains(endpointStates, d.State) {
		d.Err = fmt.Sprintf("State: %q is not a state: one of %s (or any)", d.State, strings.Join(endpointStates, ", "))
		c.render(w, r, http.StatusUnprocessableEntity, "endpoints", s, "Endpoints", "endpoints", d)
		return
	}
	if d.Tenant != "" {
		v.Set("tenant", d.Tenant)
	}
	// The API filters by tenant and kind only: the text and state filters
	// are applied here, so a filtered list reads page after page until a
	// page of matches, the end of the list or endpointScanLimit (a match
	// may be anywhere in the list, not only among its first 100).
	var matches []api.EndpointOut
	cursor := d.Cursor
	for {
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var el endpointList
		if err := c.call(r, s, "GET", "/v1/endpoints?"+v.Encode(), nil, &el); err != nil {
			var ae *apiError
			if errors.As(relabel(err, listLabels), &ae) && ae.Status == http.StatusUnprocessableEntity {
				d.Err = ae.Detail
				c.render(w, r, ae.Status, "endpoints", s, "Endpoints", "endpoints", d)
				return
			}
			c.apiFail(w, r, s, err)
			return
		}
		d.Scanned += len(el.Data)
		for _, e := range el.Data {
			if d.State != "" && e.State != d.State {
				continue
			}
			if d.Q != "" && !strings.Contains(strings.ToLower(e.URL+" "+e.Description+" "+e.ID), strings.ToLower(d.Q)) {
				continue
			}
			matches = append(matches, e)
		}
		cursor = el.NextCursor
		if cursor == "" || (d.Q == "" && d.State == "") || len(matches) >= endpointPage || d.Scanned >= endpointScanLimit {
			break
		}
	}
	d.NextCursor = cursor
	var counts struct {
		Data []api.DeadLetterCountOut `json:"data"`
	}
	_ = c.call(r, s, "GET", "/v1/dead-letters", nil, &counts)
	dead := map[string]int{}
	for _, x := range counts.Data {
		dead[x.EndpointID] = x.Count
	}
	for _, e := range matches {
		h := c.health(r, s, e.ID)
		h.DeadLetters = dead[e.ID]
		d.Rows = append(d.Rows, endpointRow{E: e, H: h})
	}
	c.render(w, r, http.StatusOK, "endpoints", s, "Endpoints", "endpoints", d)
}

// endpointPage is how many endpoints one API page of the list holds, and
// endpointScanLimit how many a filtered list reads before it offers the
// next page.
const (
	endpointPage      = 100
	endpointScanLimit = 5000
)

type endpointFormData struct {
	E          api.EndpointOut
	New        bool
	EventTypes string
	StaleKey   bool // as endpointDetailData.StaleKey
	Headers    string
	Versions   string             // pinned versions, one "type: version" a line
	Catalog    []api.EventTypeOut // the event catalog, for the pins' hint
	Err        string
}

func (d endpointFormData) errText() string { return d.Err }

// UnreadableNote is what the edit form of an endpoint whose stored values
// do not open here (EndpointOut.Unreadable) says about saving it: header
// values alone are replaced by a save that gives every header (the API's
// replacing update); with its secrets unreadable a save is refused.
func (d endpointFormData) UnreadableNote() string {
	if len(d.E.Unreadable) == 0 {
		return ""
	}
	detail := endpointDetailData{E: d.E, StaleKey: d.StaleKey}
	if d.StaleKey {
		return detail.UnreadableAdvice() + " Herald refuses to save a change here meanwhile."
	}
	if secrets, headers := detail.unreadable(); secrets && headers {
		return "This node's encryption keys do not open its stored secrets and header values: Herald refuses to save any change to it. " + detail.UnreadableAdvice()
	}
	if detail.Withheld("edit") {
		return "This node's encryption keys do not open its stored secrets: Herald refuses to save any change until they are replaced (Replace secrets, on the endpoint's page)."
	}
	return "This node's encryption keys do not open its stored " + unreadableNames(d.E.Unreadable) + ": replace each " + api.UnreadableHeaderValue + " below with the header's value (or remove its line) and save. The headers saved are the whole set; once they are, its deliveries go out again (if it is enabled: a paused or disabled endpoint stays so until resumed or enabled)."
}

func (c *Console) endpointForm(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	d := endpointFormData{New: id == ""}
	if id != "" {
		if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &d.E); err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		if c.sourceOwned(w, r, s, d.E, false, http.StatusOK) {
			return
		}
		d.EventTypes = strings.Join(d.E.EventTypes, "\n")
		d.Headers = fmtHeaders(d.E.Headers)
		d.Versions = fmtVersions(d.E.Versions)
		if len(d.E.Unreadable) > 0 {
			d.StaleKey = c.staleKey(r, s)
		}
	}
	// The catalog is only the pins' hint, but a refused credential (a key
	// revoked or expired since sign-in: the call ended the session) sends
	// the browser to sign in, as every other page does, instead of showing
	// a form that can no longer be posted.
	cat, err := c.catalogTypes(r, s)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		c.apiFail(w, r, s, err)
		return
	}
	d.Catalog = cat
	title := "New endpoint"
	if !d.New {
		title = "Edit " + id
	}
	c.render(w, r, http.StatusOK, "endpoint_form", s, title, "endpoints", d)
}

// formList splits a textarea of one item a line (or comma-separated).
func formList(s string) []string {
	out := []string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// fmtVersions writes pins as "type: version" lines, by type.
func fmtVersions(v map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(v)) {
		fmt.Fprintf(&b, "%s: %d\n", k, v[k])
	}
	return b.String()
}

// formVersions parses pins, one "type: version" a line (docs/contract.md,
// "Versions and pinning": the API checks that each names a catalogued
// type the endpoint subscribes to and one of its versions).
func formVersions(s string) (map[string]int, error) {
	pins := map[string]int{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || strings.TrimSpace(k) == "" || err != nil || n < 1 {
			return nil, labelled("Pinned versions", fmt.Errorf("%q is not a \"event.type: version\" line (a version is a whole number from 1)", line))
		}
		pins[strings.TrimSpace(k)] = n
	}
	return pins, nil
}

// formHeaders parses "Name: value" lines.
func formHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, labelled("Headers", fmt.Errorf("%q is not a \"Name: value\" line", line))
		}
		h[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return h, nil
}

func (c *Console) endpointBody(r *http.Request) (map[string]any, error) {
	b := map[string]any{
		"url":         strings.TrimSpace(r.PostFormValue("url")),
		"description": r.PostFormValue("description"),
		"event_types": formList(r.PostFormValue("event_types")),
	}
	h, err := formHeaders(r.PostFormValue("headers"))
	if err != nil {
		return nil, err
	}
	b["headers"] = h
	pins, err := formVersions(r.PostFormValue("versions"))
	if err != nil {
		return nil, err
	}
	if len(pins) > 0 { // none: every catalogued type gets (or keeps) its default
		b["versions"] = pins
	}
	rl := strings.TrimSpace(r.PostFormValue("rate_limit_per_second"))
	if rl == "" {
		rl = "0"
	}
	n, err := strconv.Atoi(rl)
	if err != nil {
		return nil, labelled("Rate limit", fmt.Errorf("%q is not a whole number of deliveries per second", rl))
	}
	b["rate_limit_per_second"] = n
	return b, nil
}

// endpointLabels name the endpoint API's fields by the endpoint form's labels.
var endpointLabels = map[string]string{"url": "URL", "description": "Description", "event_types": "Event types",
	"headers": "Headers", "versions": "Pinned versions", "rate_limit_per_second": "Rate limit", "tenant": "Tenant"}

func (c *Console) formAgain(w http.ResponseWriter, r *http.Request, s *session, id string, err error) {
	err = relabel(err, endpointLabels)
	d := endpointFormData{New: id == "", EventTypes: r.PostFormValue("event_types"), Headers: r.PostFormValue("headers"),
		Versions: r.PostFormValue("versions"), Err: err.Error()}
	d.Catalog, _ = c.catalogTypes(r, s) // only the pins' hint: the form shows without it
	d.E.ID, d.E.URL, d.E.Description, d.E.Tenant = id, r.PostFormValue("url"), r.PostFormValue("description"), r.PostFormValue("tenant")
	d.E.RateLimitPerSecond, _ = strconv.Atoi(r.PostFormValue("rate_limit_per_second"))
	if id != "" {
		// The refused edit of an endpoint whose values do not open keeps
		// its note on what a save can do (UnreadableNote).
		var cur api.EndpointOut
		if c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &cur) == nil && len(cur.Unreadable) > 0 {
			d.E.Unreadable, d.StaleKey = cur.Unreadable, c.staleKey(r, s)
		}
	}
	status := http.StatusUnprocessableEntity
	var ae *apiError
	if errors.As(err, &ae) {
		status = ae.Status
	}
	title := "New endpoint"
	if id != "" {
		title = "Edit " + id
	}
	c.render(w, r, status, "endpoint_form", s, title, "endpoints", d)
}

type secretData struct {
	E                 api.EndpointOut
	Secret            string
	Rotated           bool
	Replaced          bool // rotated to replace secrets that did not open (no previous secret)
	PreviousExpiresAt *time.Time
	Created           bool
}

func (c *Console) createEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	b, err := c.endpointBody(r)
	if err != nil {
		c.formAgain(w, r, s, "", err)
		return
	}
	if t := strings.TrimSpace(r.PostFormValue("tenant")); t != "" {
		b["tenant"] = t
	}
	var e api.EndpointOut
	warnings, err := c.callWarned(r, s, "POST", "/v1/endpoints", b, &e)
	if err != nil {
		c.formAgain(w, r, s, "", err)
		return
	}
	if len(warnings) > 0 { // pins to deprecated versions: said on the secret's page
		c.setFlash(s, sentences(warnings...))
	}
	c.stash(w, r, s, "/ui/endpoints/"+url.PathEscape(e.ID)+"/created", func(w http.ResponseWriter, r *http.Request, s *session) {
		c.render(w, r, http.StatusOK, "secret", s, "Endpoint created", "endpoints", secretData{E: e, Secret: e.Secret, Created: true})
	})
}

func (c *Console) updateEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	b, err := c.endpointBody(r)
	if err != nil {
		c.formAgain(w, r, s, id, err)
		return
	}
	if pins, ok := b["versions"].(map[string]int); ok {
		// The form shows every stored pin, also those Herald set itself
		// (the newest version when the endpoint subscribed) and those of
		// types it no longer subscribes to (the API keeps them), and posts
		// them all back. The API's versions are "pins to change" and it
		// refuses a pin for a type the endpoint does not subscribe to, so
		// sending the unchanged ones refused every save after a change of
		// event types: only the pins the user changed are sent.
		var cur api.EndpointOut
		if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &cur); err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		for k, v := range pins {
			if n, ok := cur.Versions[k]; ok && n == v {
				delete(pins, k)
			}
		}
		if len(pins) == 0 {
			delete(b, "versions")
		}
	}
	warnings, err := c.callWarned(r, s, "PATCH", "/v1/endpoints/"+url.PathEscape(id), b, nil)
	if err != nil {
		// A source's forwarding endpoint (refused 409): the page says it
		// is changed through its source, not a form that cannot be saved.
		var ae *apiError
		var cur api.EndpointOut
		if errors.As(err, &ae) && ae.Status == http.StatusConflict &&
			c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &cur) == nil && c.sourceOwned(w, r, s, cur, false, http.StatusConflict) {
			return
		}
		c.formAgain(w, r, s, id, err)
		return
	}
	c.setFlash(s, sentences(append([]string{"Endpoint " + id + " saved."}, warnings...)...))
	http.Redirect(w, r, "/ui/endpoints/"+url.PathEscape(id), http.StatusSeeOther)
}

// deletion is a resource the console deletes after a confirmation page:
// GET /ui/<nav>/{id}/delete renders the one confirmation template
// (confirm_delete) with what describe says of the resource as the API
// shows it (T), and POST there deletes it and returns to the list page
// saying so (done, with the id for %s). Both answer 403 to a role the
// API's Policy refuses op.
type deletion[T any] struct {
	op, api, nav, done string // e.g. "delete-endpoint", "/v1/endpoints", "endpoints", "Endpoint %s deleted."
	describe           func(T) deleteConfirmation
	// owned, when set, says whether the resource is deleted through
	// another (an inbound source's forwarding endpoint, with its source):
	// it renders the page saying so instead of the confirmation (and
	// instead of the API's 409 after a POST) and reports true.
	owned func(c *Console, w http.ResponseWriter, r *http.Request, s *session, v T, status int) bool
}

// deleteConfirmation is what a delete confirmation page says of its
// resource.
type deleteConfirmation struct {
	Kind, Name string // "Delete <Kind> <Name>?", and the button "Delete <Kind>"
	Facts      []fact // a line identifying it, its parts joined by " · "
	// Warning says what goes with it; Undone, when set, what not being
	// able to undo it means ("This cannot be undone: …").
	Warning, Undone string
	Page            string // the resource's page: Cancel leads there, the form posts to Page + "/delete"
}

// fact is one part of a confirmation's identifying line: "Label Value",
// Value as code when Code.
type fact struct {
	Label, Value string
	Code         bool
}

var (
	endpointDeletion = deletion[api.EndpointOut]{"delete-endpoint", "/v1/endpoints", "endpoints", "Endpoint %s deleted.",
		func(e api.EndpointOut) deleteConfirmation {
			// Its tenant too: an admin deletes across tenants.
			return deleteConfirmation{Kind: "endpoint", Name: e.ID, Facts: []fact{{Label: "tenant", Value: e.Tenant}, {Value: e.URL}},
				Warning: "Its deliveries, attempts and dead letters are deleted with it.", Page: "/ui/endpoints/" + url.PathEscape(e.ID)}
		},
		func(c *Console, w http.ResponseWriter, r *http.Request, s *session, e api.EndpointOut, status int) bool {
			return c.sourceOwned(w, r, s, e, true, status)
		}}
	sourceDeletion = deletion[api.SourceOut]{"delete-source", "/v1/sources", "sources", "Source %s deleted: its ingest path answers 404 from now on.",
		func(s api.SourceOut) deleteConfirmation {
			return deleteConfirmation{Kind: "source", Name: s.Name,
				Facts: []fact{{Value: s.ID}, {Label: "ingest", Value: s.IngestPath, Code: true}, {Label: "forwards to", Value: s.DestinationURL}},
				Warning: "The provider's requests to its ingest path are refused from now on (404). Its forwarding endpoint " + s.EndpointID +
					" is deleted with it, and with that endpoint the forwards not yet delivered, their attempts and dead letters.",
				Undone: "a new source gets a new ingest path, to set at the provider again.", Page: "/ui/sources/" + url.PathEscape(s.ID)}
		}, nil}
)

// confirm renders the confirmation page.
func (d deletion[T]) confirm(c *Console) func(http.ResponseWriter, *http.Request, *session) {
	return c.may(d.op, func(w http.ResponseWriter, r *http.Request, s *session) {
		id := r.PathValue("id")
		var v T
		if err := c.call(r, s, "GET", d.api+"/"+url.PathEscape(id), nil, &v); err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		if d.owned != nil && d.owned(c, w, r, s, v, http.StatusOK) {
			return
		}
		c.render(w, r, http.StatusOK, "confirm_delete", s, "Delete "+id, d.nav, d.describe(v))
	})
}

// delete deletes the resource and returns to its list.
func (d deletion[T]) delete(c *Console) func(http.ResponseWriter, *http.Request, *session) {
	return c.may(d.op, func(w http.ResponseWriter, r *http.Request, s *session) {
		id := r.PathValue("id")
		if err := c.call(r, s, "DELETE", d.api+"/"+url.PathEscape(id), nil, nil); err != nil {
			// The API refuses (409) what is deleted through another
			// resource: the page says which, as the confirmation does.
			var ae *apiError
			var v T
			if d.owned != nil && errors.As(err, &ae) && ae.Status == http.StatusConflict &&
				c.call(r, s, "GET", d.api+"/"+url.PathEscape(id), nil, &v) == nil && d.owned(c, w, r, s, v, http.StatusConflict) {
				return
			}
			c.apiFail(w, r, s, err)
			return
		}
		c.setFlash(s, fmt.Sprintf(d.done, id))
		http.Redirect(w, r, "/ui/"+d.nav, http.StatusSeeOther)
	})
}

// sourceOwnedData is what the page of an inbound source's forwarding
// endpoint's edit or delete says (source_owned).
type sourceOwnedData struct {
	E                    api.EndpointOut
	SourceID, SourceName string
	Delete               bool // the delete page (else the edit page)
	Refused              bool // after a POST the API refused (409)
}

// sourceOwned renders, for an inbound source's forwarding endpoint e
// (kind source: changed and deleted through its source, the API refuses
// it 409), the page saying so with a link to the source's page (its
// delete page for delete) instead of a form, and reports true; false for
// another endpoint.
func (c *Console) sourceOwned(w http.ResponseWriter, r *http.Request, s *session, e api.EndpointOut, del bool, status int) bool {
	if e.Kind != "source" {
		return false
	}
	d := sourceOwnedData{E: e, SourceID: e.Tenant, SourceName: e.Tenant, Delete: del, Refused: status != http.StatusOK}
	var src api.SourceOut
	if c.call(r, s, "GET", "/v1/sources/"+url.PathEscape(e.Tenant), nil, &src) == nil && src.Name != "" {
		d.SourceName = src.Name // else named by its id
	}
	title := "Edit " + e.ID
	if del {
		title = "Delete " + e.ID
	}
	c.render(w, r, status, "source_owned", s, title, "endpoints", d)
	return true
}

func (c *Console) revealSecret(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	d := secretData{}
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &d.E); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	var out struct {
		Secret string `json:"secret"`
	}
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id)+"/secret", nil, &out); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Secret = out.Secret
	c.stash(w, r, s, "/ui/endpoints/"+url.PathEscape(id)+"/secret", func(w http.ResponseWriter, r *http.Request, s *session) {
		c.render(w, r, http.StatusOK, "secret", s, "Signing secret", "endpoints", d)
	})
}

// The rotate form's labels, which its errors name.
const (
	overlapLabel   = "Overlap"
	expireNowLabel = "The current secret stops working now"
)

// rotateLabels name the rotate-secret API's fields by the rotate form's labels.
var rotateLabels = map[string]string{"overlap_seconds": overlapLabel}

// rotateSecret rotates an endpoint's signing secret. With overlap none the
// current secret stops verifying at once and every receiver still on it
// refuses deliveries: the form must then carry the explicit confirmation
// (the expire_now box), or it comes back on the endpoint's page, 422,
// with the choices kept and nothing rotated. Other overlaps need no extra
// step.
func (c *Console) rotateSecret(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	form := rotateForm{Overlap: strings.TrimSpace(r.PostFormValue("overlap_seconds")), ExpireNow: r.PostFormValue("expire_now") == "yes"}
	again := func(status int, err error) {
		c.endpointDetailPage(w, r, s, status, endpointDetailData{Err: err.Error(), Rotate: form})
	}
	replace := r.PostFormValue("replace") == "secrets"
	overlap := 0
	if replace {
		// The Replace secrets form of an endpoint whose secrets do not
		// open here: the API replaces them by the new secret alone and
		// ignores the overlap. Posted when they open again (replaced
		// meanwhile, or the key is back), it would be a rotation the user
		// did not choose the overlap of: refused, nothing rotated. Should
		// they open between this read and the rotation, the default
		// overlap keeps the current secret signing.
		var e api.EndpointOut
		if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &e); err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		if !slices.Contains(e.Unreadable, "secrets") {
			again(http.StatusConflict, errors.New("its secrets open on this node now (replaced meanwhile, or its key is back): nothing was replaced; rotate them with the Rotate secret form if you want a new one"))
			return
		}
		overlap, _ = strconv.Atoi(rotateOverlaps[0].Seconds)
	} else {
		var err error
		overlap, err = strconv.Atoi(form.Overlap)
		if err != nil {
			again(http.StatusUnprocessableEntity, labelled(overlapLabel, fmt.Errorf("%q is not a whole number of seconds (0–604800) during which the older secrets still sign", form.Overlap)))
			return
		}
		if overlap == 0 && !form.ExpireNow {
			again(http.StatusUnprocessableEntity, labelled(expireNowLabel, errors.New("tick it to rotate with overlap none: the current secret stops verifying at once, and receivers still on it refuse every delivery until they have the new one (nothing was rotated)")))
			return
		}
	}
	d := secretData{Rotated: true}
	var out struct {
		Secret            string     `json:"secret"`
		PreviousExpiresAt *time.Time `json:"previous_expires_at"`
	}
	if err := c.call(r, s, "POST", "/v1/endpoints/"+url.PathEscape(id)+"/rotate-secret", map[string]any{"overlap_seconds": overlap}, &out); err != nil {
		var ae *apiError
		if errors.As(relabel(err, rotateLabels), &ae) && ae.Status == http.StatusUnprocessableEntity {
			again(ae.Status, ae)
			return
		}
		c.apiFail(w, r, s, err)
		return
	}
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &d.E); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Secret, d.PreviousExpiresAt = out.Secret, out.PreviousExpiresAt
	d.Replaced = replace && out.PreviousExpiresAt == nil
	title := "Secret rotated"
	if d.Replaced {
		title = "Secrets replaced"
	}
	c.stash(w, r, s, "/ui/endpoints/"+url.PathEscape(id)+"/rotated", func(w http.ResponseWriter, r *http.Request, s *session) {
		c.render(w, r, http.StatusOK, "secret", s, title, "endpoints", d)
	})
}

type testData struct {
	E       api.EndpointOut
	EventID string
	Attempt api.AttemptOut
}

func (c *Console) testEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	d := testData{}
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &d.E); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	var out struct {
		EventID string         `json:"event_id"`
		Attempt api.AttemptOut `json:"attempt"`
	}
	if err := c.call(r, s, "POST", "/v1/endpoints/"+url.PathEscape(id)+"/test", nil, &out); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.EventID, d.Attempt = out.EventID, out.Attempt
	c.stash(w, r, s, "/ui/endpoints/"+url.PathEscape(id)+"/tested", func(w http.ResponseWriter, r *http.Request, s *session) {
		c.render(w, r, http.StatusOK, "test", s, "Test event", "endpoints", d)
	})
}

func (c *Console) changeState(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	to := r.PostFormValue("to")
	if to != "pause" && to != "resume" && to != "enable" {
		c.fail(w, r, s, http.StatusUnprocessableEntity, "to: one of pause, resume, enable")
		return
	}
	var out api.StateChangeOut
	if err := c.call(r, s, "POST", "/v1/endpoints/"+url.PathEscape(id)+"/"+to, nil, &out); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	msg := fmt.Sprintf("Endpoint %s is %s", id, out.Endpoint.State)
	if out.Held > 0 {
		msg += fmt.Sprintf("; %d deliveries held", out.Held)
	}
	if out.Released > 0 {
		msg += fmt.Sprintf("; %d held deliveries released", out.Released)
	}
	c.setFlash(s, msg+".")
	if r.PostFormValue("source") != "" && out.Endpoint.Kind == "source" {
		// The action on a source's page (its forwarding endpoint, whose
		// tenant is the source's id): back to that page.
		http.Redirect(w, r, "/ui/sources/"+url.PathEscape(out.Endpoint.Tenant), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/endpoints/"+url.PathEscape(id), http.StatusSeeOther)
}

type endpointDetailData struct {
	E          api.EndpointOut
	H          health
	Deliveries []api.DeliveryOut
	State      string
	Cursor     string
	NextCursor string
	// A refused rotate form comes back on this page: the reason, and the
	// choices as they were sent.
	Rotate rotateForm
	Err    string
	// StaleKey: this node's encryption key is older than the database's
	// (GET /readyz answers 503 for its key), so no endpoint's values open
	// here and the unreadable ones are probably fine (staleKey).
	StaleKey bool
}

func (d endpointDetailData) errText() string { return d.Err }

// unreadable reports which of the endpoint's sealed values do not open
// here (EndpointOut.Unreadable): its secrets, custom header values.
func (d endpointDetailData) unreadable() (secrets, headers bool) {
	for _, v := range d.E.Unreadable {
		if v == "secrets" {
			secrets = true
		} else {
			headers = true
		}
	}
	return secrets, headers
}

// unreadableNames says in words which of an endpoint's stored values do
// not open (api.EndpointOut.Unreadable: "secrets", "headers.<Name>"):
// "secrets and the values of headers X-A and X-B".
func unreadableNames(u []string) string {
	var secrets bool
	var headers []string
	for _, v := range u {
		if name, ok := strings.CutPrefix(v, "headers."); ok {
			headers = append(headers, name)
		} else if v == "secrets" {
			secrets = true
		} else {
			headers = append(headers, v)
		}
	}
	var parts []string
	if secrets {
		parts = append(parts, "secrets")
	}
	switch len(headers) {
	case 0:
	case 1:
		parts = append(parts, "the value of header "+headers[0])
	default:
		parts = append(parts, "the values of headers "+strings.Join(headers[:len(headers)-1], ", ")+" and "+headers[len(headers)-1])
	}
	return strings.Join(parts, " and ")
}

// UnreadableNames is unreadableNames of the endpoint's values.
func (d endpointDetailData) UnreadableNames() string { return unreadableNames(d.E.Unreadable) }

// UnreadableAdvice is what can be done about the endpoint's values that do
// not open here (EndpointOut.Unreadable), as the API allows it: secrets
// replaced by a rotation, header values by an edit that gives them again,
// and an endpoint whose secrets and header values both do not open only
// deleted.
func (d endpointDetailData) UnreadableAdvice() string {
	secrets, headers := d.unreadable()
	switch {
	case d.StaleKey:
		return "This node's own key is older than the database's (its readiness check, GET /readyz, answers 503: herald rekey moved the stored values to a newer key), so no endpoint's values open here and this one's are probably fine: restart this node with the current key (HERALD_ENCRYPTION_KEY, or the database's key file). Do not replace or delete the endpoint for this."
	case secrets && headers:
		return "With both its secrets and header values unreadable, they cannot be replaced here: delete it and create it again, unless a node holding their key rekeys them."
	case secrets:
		return "Replace its secrets with a new one (Replace secrets, below), or delete it."
	default:
		return "Edit it to give its headers again (Edit headers, below: replace each [unreadable] with the value), or delete it."
	}
}

// Withheld reports whether the API refuses action (test, state, edit,
// reveal, rotate) on this endpoint because of its values that do not open
// here, as it answers (409): while a value does not open it carries out
// only the replacing of the values (the rotation when only the secrets do
// not open, an update that gives the headers when only header values do
// not open), reads that need none of them, dead letters' replays and the
// delete, and pausing, resuming and enabling, which need none of them
// either, on any node (docs/operations.md, HeraldEndpointValuesDoNotOpen).
func (d endpointDetailData) Withheld(action string) bool {
	secrets, headers := d.unreadable()
	switch {
	case !secrets && !headers || action == "state":
		return false
	case d.StaleKey:
		return true // a node whose key is stale seals nothing (503)
	case action == "rotate":
		return headers // the replacing rotation: secrets alone
	case action == "edit":
		return secrets // the replacing update: header values alone
	}
	return true
}

// WithheldReason says, next to the actions Withheld, why they are.
func (d endpointDetailData) WithheldReason() string {
	secrets, headers := d.unreadable()
	const refused = "Greyed out: Herald refuses these (409) while this node's keys do not open the endpoint's "
	switch {
	case d.StaleKey:
		return "Greyed out: this node's key is older than the database's, so Herald refuses these here (409, and 503 for replacing the values) until the node runs with the current key."
	case secrets && headers:
		return refused + "secrets and header values: it can still be paused, resumed or enabled, its deliveries and dead letters read and replayed, and it can be deleted."
	case secrets:
		return refused + "secrets, until they are replaced (Replace secrets)."
	default:
		return refused + "header values, until its headers are given again (Edit headers)."
	}
}

// rotateForm is what the rotate form holds: the overlap in seconds (as
// the select sends it; empty: the form's default) and the confirmation
// that the current secret stops working now.
type rotateForm struct {
	Overlap   string
	ExpireNow bool
}

// rotateOverlaps are the rotate form's choices, the first the default.
var rotateOverlaps = []struct{ Seconds, Label string }{{"86400", "24 h"}, {"3600", "1 h"}, {"604800", "7 days"}, {"0", "none"}}

// Overlaps are the rotate form's choices.
func (endpointDetailData) Overlaps() []struct{ Seconds, Label string } { return rotateOverlaps }

func (c *Console) endpointDetail(w http.ResponseWriter, r *http.Request, s *session) {
	c.endpointDetailPage(w, r, s, http.StatusOK, endpointDetailData{})
}

func (c *Console) endpointDetailPage(w http.ResponseWriter, r *http.Request, s *session, status int, d endpointDetailData) {
	id := r.PathValue("id")
	q := r.URL.Query()
	d.State, d.Cursor = q.Get("state"), q.Get("cursor")
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id), nil, &d.E); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	v := url.Values{"limit": {"50"}}
	if d.State != "" {
		v.Set("state", d.State)
	}
	if d.Cursor != "" {
		v.Set("cursor", d.Cursor)
	}
	var dl deliveryList
	if err := c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(id)+"/deliveries?"+v.Encode(), nil, &dl); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Deliveries, d.NextCursor = dl.Data, dl.NextCursor
	d.H = c.health(r, s, id)
	if len(d.E.Unreadable) > 0 {
		d.StaleKey = c.staleKey(r, s)
	}
	c.render(w, r, status, "endpoint", s, "Endpoint "+id, "endpoints", d)
}

// staleKey reports whether this node's readiness check fails on its
// encryption key (GET /readyz: 503 with api.NotReadyWrongKeyMessage or
// api.NotReadyRetiredKeyMessage): herald rekey moved the database's sealed
// values to a key this node lacks, and every value sealed before looks
// unreadable here while it is fine on the nodes with the current key.
func (c *Console) staleKey(r *http.Request, s *session) bool {
	var ae *apiError
	if err := c.call(r, s, "GET", "/readyz", nil, nil); errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
		return ae.Detail == api.NotReadyWrongKeyMessage || ae.Detail == api.NotReadyRetiredKeyMessage
	}
	return false
}

type deliveryDetailData struct {
	D        api.DeliveryOut
	Attempts []api.AttemptOut
}

func (c *Console) deliveryDetail(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	d := deliveryDetailData{}
	if err := c.call(r, s, "GET", "/v1/deliveries/"+url.PathEscape(id), nil, &d.D); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	var al attemptList
	if err := c.call(r, s, "GET", "/v1/deliveries/"+url.PathEscape(id)+"/attempts", nil, &al); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Attempts = al.Data
	c.render(w, r, http.StatusOK, "delivery", s, "Delivery "+id, "events", d)
}

// replayDelivery replays one dead delivery from its own page, through the
// operation the dead letters page replays each one with (replay-delivery:
// the API leaves a delivery that is not dead alone and answers replayed
// 0), and comes back to the delivery's page saying what happened, as the
// dead letters page does.
func (c *Console) replayDelivery(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	var out api.ReplayOut
	if err := c.call(r, s, "POST", "/v1/deliveries/"+url.PathEscape(id)+"/replay", nil, &out); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	msg := fmt.Sprintf("Replayed %d dead letter(s).", out.Replayed)
	if out.Replayed == 0 {
		msg += " " + id + " was no longer a dead letter."
	}
	c.setFlash(s, msg)
	http.Redirect(w, r, "/ui/deliveries/"+url.PathEscape(id), http.StatusSeeOther)
}

// --- events -------------------------------------------------------------

type eventsData struct {
	ID, Type, Tenant, From, Until string
	Events                        []api.EventOut
	NextCursor, Cursor            string
	Scanned                       int
	Err                           string
}

func (d eventsData) errText() string { return d.Err }

// eventScanLimit bounds how many events one time-range search reads
// before it offers the next page.
const eventScanLimit = 5000

func parseFormTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use RFC 3339 (2026-01-02T15:04:05Z) or 2026-01-02T15:04 (UTC)", s)
}

// checkRange is the API's rule for a time range (POST /v1/replay: "until
// must be after since"), in the form's labels; a bound left empty (zero)
// passes.
func checkRange(fromLabel, untilLabel string, from, until time.Time) error {
	if !from.IsZero() && !until.IsZero() && !until.After(from) {
		return fmt.Errorf("%s must be after %s (%s is %s, %s is %s)", untilLabel, fromLabel,
			untilLabel, fmtTime(until), fromLabel, fmtTime(from))
	}
	return nil
}

func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := eventsData{ID: strings.TrimSpace(q.Get("id")), Type: strings.TrimSpace(q.Get("type")), Tenant: strings.TrimSpace(q.Get("tenant")),
		From: q.Get("from"), Until: q.Get("until"), Cursor: q.Get("cursor")}
	if d.ID != "" {
		v := url.Values{}
		if d.Tenant != "" {
			v.Set("tenant", d.Tenant)
		}
		var e api.EventOut
		err := c.call(r, s, "GET", "/v1/events/"+url.PathEscape(d.ID)+"?"+v.Encode(), nil, &e)
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			d.Err = strings.Replace(ae.Detail, "add ?tenant=<tenant>", "fill in Tenant", 1)
		} else if errors.As(relabel(err, eventIDLabels), &ae) && ae.Status < 500 && ae.Status != http.StatusUnauthorized {
			// A refused search (an id too long, a reserved tenant)
			// stays on the form, naming its fields.
			d.Err = ae.Detail
			c.render(w, r, ae.Status, "events", s, "Events", "events", d)
			return
		} else if err != nil {
			c.apiFail(w, r, s, err)
			return
		} else {
			d.Events = []api.EventOut{e}
		}
		c.render(w, r, http.StatusOK, "events", s, "Events", "events", d)
		return
	}
	from, err1 := parseFormTime(d.From)
	until, err2 := parseFormTime(d.Until)
	if err1 != nil {
		err1 = labelled("From", err1)
	}
	if err2 != nil {
		err2 = labelled("Until", err2)
	}
	if err := errors.Join(err1, err2, checkRange("From", "Until", from, until)); err != nil {
		d.Err = strings.ReplaceAll(err.Error(), "\n", "; ")
		c.render(w, r, http.StatusUnprocessableEntity, "events", s, "Events", "events", d)
		return
	}
	cursor := d.Cursor
	for {
		v := url.Values{"limit": {"200"}}
		if d.Tenant != "" {
			v.Set("tenant", d.Tenant)
		}
		if d.Type != "" {
			v.Set("type", d.Type)
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var page struct {
			Data       []api.EventOut `json:"data"`
			NextCursor string         `json:"next_cursor"`
		}
		if err := c.call(r, s, "GET", "/v1/events?"+v.Encode(), nil, &page); err != nil {
			var ae *apiError
			if errors.As(relabel(err, listLabels), &ae) && ae.Status < 500 && ae.Status != http.StatusUnauthorized {
				d.Err = ae.Detail
				c.render(w, r, ae.Status, "events", s, "Events", "events", d)
				return
			}
			c.apiFail(w, r, s, err)
			return
		}
		d.Scanned += len(page.Data)
		// The list is newest first by publication, not by occurred_at (a
		// producer may publish an event that occurred long ago): an event
		// older than From says nothing of the ones after it, so the scan
		// goes on until 50 match, the list ends or eventScanLimit.
		for _, e := range page.Data {
			if !until.IsZero() && !e.OccurredAt.Before(until) {
				continue
			}
			if !from.IsZero() && e.OccurredAt.Before(from) {
				continue
			}
			d.Events = append(d.Events, e)
		}
		cursor = page.NextCursor
		if cursor == "" || len(d.Events) >= 50 || d.Scanned >= eventScanLimit {
			break
		}
	}
	d.NextCursor = cursor
	c.render(w, r, http.StatusOK, "events", s, "Events", "events", d)
}

type eventDetailData struct {
	E          api.EventOut
	Deliveries []deliveryWithAttempts
}

type deliveryWithAttempts struct {
	D        api.DeliveryOut
	Attempts []api.AttemptOut
}

func (c *Console) eventDetail(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	v := url.Values{}
	if t := r.URL.Query().Get("tenant"); t != "" {
		v.Set("tenant", t)
	}
	d := eventDetailData{}
	if err := c.call(r, s, "GET", "/v1/events/"+url.PathEscape(id)+"?"+v.Encode(), nil, &d.E); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	v.Set("limit", "1000")
	var dl deliveryList
	if err := c.call(r, s, "GET", "/v1/events/"+url.PathEscape(id)+"/deliveries?"+v.Encode(), nil, &dl); err != nil {
		var ae *apiError // a publisher may read events but not deliveries
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			c.apiFail(w, r, s, err)
			return
		}
	}
	for _, x := range dl.Data {
		var al attemptList
		_ = c.call(r, s, "GET", "/v1/deliveries/"+url.PathEscape(x.ID)+"/attempts", nil, &al)
		d.Deliveries = append(d.Deliveries, deliveryWithAttempts{D: x, Attempts: al.Data})
	}
	c.render(w, r, http.StatusOK, "event", s, "Event "+d.E.ID, "events", d)
}

// --- dead letters -------------------------------------------------------

type deadData struct {
	Endpoint   string
	Tenant     string
	Counts     []api.DeadLetterCountOut
	Total      int
	Letters    []api.DeliveryOut
	Cursor     string
	NextCursor string
	// A refused replay form (a time that is not one, nothing selected)
	// comes back on this page: the reason, and the times as typed.
	Since, Until string
	Err          string
}

func (d deadData) errText() string { return d.Err }

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	c.deadLettersPage(w, r, s, http.StatusOK, deadData{Endpoint: q.Get("endpoint"), Tenant: q.Get("tenant"), Cursor: q.Get("cursor")})
}

// deadLetterLabels name the dead letters page's filters (given in its
// address, by a link or a replay's way back) in the errors of its reads.
var deadLetterLabels = map[string]string{"tenant": "Tenant", "endpoint": "Endpoint"}

func (c *Console) deadLettersPage(w http.ResponseWriter, r *http.Request, s *session, status int, d deadData) {
	cv := url.Values{}
	if d.Tenant != "" {
		cv.Set("tenant", d.Tenant)
	}
	var counts struct {
		Data []api.DeadLetterCountOut `json:"data"`
	}
	if err := c.call(r, s, "GET", "/v1/dead-letters?"+cv.Encode(), nil, &counts); err != nil {
		c.apiFail(w, r, s, relabel(err, deadLetterLabels))
		return
	}
	d.Counts = counts.Data
	for _, x := range d.Counts {
		if d.Endpoint == "" || x.EndpointID == d.Endpoint {
			d.Total += x.Count
		}
	}
	v := url.Values{"state": {"dead"}, "limit": {"100"}}
	if d.Cursor != "" {
		v.Set("cursor", d.Cursor)
	}
	path := "/v1/deliveries?"
	if d.Endpoint != "" {
		path = "/v1/endpoints/" + url.PathEscape(d.Endpoint) + "/deliveries?"
	} else if d.Tenant != "" {
		v.Set("tenant", d.Tenant)
	}
	var dl deliveryList
	if err := c.call(r, s, "GET", path+v.Encode(), nil, &dl); err != nil {
		c.apiFail(w, r, s, relabel(err, deadLetterLabels))
		return
	}
	d.Letters, d.NextCursor = dl.Data, dl.NextCursor
	c.render(w, r, status, "dead_letters", s, "Dead letters", "dead", d)
}

// The replay by time form's labels, which its errors name.
const (
	replaySinceLabel = "Dead-lettered since"
	replayUntilLabel = "Until"
)

type replayData struct {
	Endpoint, Tenant string
	Since, Until     string
	IDs              []string
	Letters          []api.DeliveryOut
	Back             string
	// More: the range holds more dead letters than one confirmation
	// replays (maxReplayBatch); the page says so.
	More bool
}

// replay is two steps: the first POST (selected ids, or all dead letters
// dead-lettered between since and until) answers a confirmation page that
// names how many will be replayed; the POST of that page (confirm=yes,
// the ids listed) replays them, one replay-delivery call each.
func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) {
	d := replayData{Endpoint: r.PostFormValue("endpoint"), Tenant: r.PostFormValue("tenant"), Since: r.PostFormValue("since"), Until: r.PostFormValue("until")}
	back := url.Values{}
	if d.Endpoint != "" {
		back.Set("endpoint", d.Endpoint)
	}
	if d.Tenant != "" {
		back.Set("tenant", d.Tenant)
	}
	d.Back = "/ui/dead-letters?" + back.Encode()
	_ = r.ParseForm()
	ids := r.PostForm["id"]
	if r.PostFormValue("confirm") == "yes" {
		replayed, failed := 0, []string{}
		for _, id := range ids {
			var out api.ReplayOut
			if err := c.call(r, s, "POST", "/v1/deliveries/"+url.PathEscape(id)+"/replay", nil, &out); err != nil {
				var ae *apiError
				if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
					c.apiFail(w, r, s, err)
					return
				}
				failed = append(failed, id+" ("+err.Error()+")")
				continue
			}
			replayed += out.Replayed
		}
		msg := fmt.Sprintf("Replayed %d dead letter(s).", replayed)
		if len(failed) > 0 {
			msg = sentences(msg, "Not replayed: "+strings.Join(failed, ", "))
		}
		if n := len(ids) - replayed - len(failed); n > 0 {
			msg = sentences(msg, fmt.Sprintf("%d were no longer dead letters.", n))
		}
		c.setFlash(s, msg)
		http.Redirect(w, r, d.Back, http.StatusSeeOther)
		return
	}
	// A refused form comes back on the dead letters page it was sent
	// from, naming the rule and keeping the times typed; nothing is
	// replayed.
	refuse := func(msg string) {
		c.deadLettersPage(w, r, s, http.StatusUnprocessableEntity, deadData{Endpoint: d.Endpoint, Tenant: d.Tenant,
			Since: d.Since, Until: d.Until, Err: msg})
	}
	if r.PostFormValue("scope") == "range" {
		since, err1 := parseFormTime(d.Since)
		until, err2 := parseFormTime(d.Until)
		if err1 != nil {
			err1 = fmt.Errorf("%s: %w", replaySinceLabel, err1)
		}
		if err2 != nil {
			err2 = fmt.Errorf("%s: %w", replayUntilLabel, err2)
		}
		if err := errors.Join(err1, err2, checkRange(replaySinceLabel, replayUntilLabel, since, until)); err != nil {
			refuse(strings.ReplaceAll(err.Error(), "\n", "; "))
			return
		}
		letters, more, err := c.deadBetween(r, s, d.Endpoint, d.Tenant, since, until)
		if err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		d.Letters, d.More = letters, more
	} else {
		if len(ids) == 0 {
			refuse("Select at least one dead letter (tick its box) before Replay selected…, or replay a time range.")
			return
		}
		for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
			var x api.DeliveryOut
			if err := c.call(r, s, "GET", "/v1/deliveries/"+url.PathEscape(id), nil, &x); err != nil {
				c.apiFail(w, r, s, err)
				return
			}
			if x.State == "dead" {
				d.Letters = append(d.Letters, x)
			}
		}
	}
	for _, x := range d.Letters {
		d.IDs = append(d.IDs, x.ID)
	}
	c.render(w, r, http.StatusOK, "replay_confirm", s, "Replay dead letters", "dead", d)
}

// maxReplayBatch bounds one confirmation page: a time range with more dead
// letters is replayed in several rounds, the page saying so (a variable
// for tests).
var maxReplayBatch = 10000

// deadBetween lists the dead letters (of an endpoint, a tenant or all)
// last changed (dead-lettered) in [since, until).
// more reports that the range holds more than maxReplayBatch (only the
// first maxReplayBatch are returned).
func (c *Console) deadBetween(r *http.Request, s *session, endpoint, tenant string, since, until time.Time) (_ []api.DeliveryOut, more bool, _ error) {
	var out []api.DeliveryOut
	cursor := ""
	for {
		v := url.Values{"state": {"dead"}, "limit": {"1000"}}
		if !since.IsZero() {
			v.Set("since", since.Format(time.RFC3339Nano))
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		path := "/v1/deliveries?"
		if endpoint != "" {
			path = "/v1/endpoints/" + url.PathEscape(endpoint) + "/deliveries?"
		} else if tenant != "" {
			v.Set("tenant", tenant)
		}
		var dl deliveryList
		if err := c.call(r, s, "GET", path+v.Encode(), nil, &dl); err != nil {
			return nil, false, err
		}
		for _, x := range dl.Data {
			if until.IsZero() || x.UpdatedAt.Before(until) {
				if len(out) == maxReplayBatch {
					return out, true, nil
				}
				out = append(out, x)
			}
		}
		if dl.NextCursor == "" {
			return out, false, nil
		}
		cursor = dl.NextCursor
	}
}

// --- overview -----------------------------------------------------------

type overviewData struct {
	Hour, Day    chart
	DeadPerEP    []api.DeadLetterCountOut
	Failing      []failingEndpoint
	Endpoints    map[string]int // by state
	QueueDepth   int
	QueueCapped  bool
	OldestDue    *time.Time
	OldestDueID  string
	Capped       bool
	OpenCircuits int // endpoints whose circuit is open or half-open on this node
	SampleLimit  int
	GeneratedAt  time.Time
	EndpointsAll int
}

type failingEndpoint struct {
	E            api.EndpointOut
	Pending      int // deliveries waiting for a retry
	DeadLastHour int
	NextAttempt  *time.Time // earliest due retry: the end of an open circuit's cooldown, if open
	LastStatus   int
	LastError    string
	LastFailure  time.Time
}

// overviewScan bounds how many deliveries of each state the overview reads.
const overviewScan = 20000

func (c *Console) listAll(r *http.Request, s *session, v url.Values, limit int) ([]api.DeliveryOut, bool, error) {
	var out []api.DeliveryOut
	cursor := ""
	for {
		v.Set("limit", "1000")
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var dl deliveryList
		if err := c.call(r, s, "GET", "/v1/deliveries?"+v.Encode(), nil, &dl); err != nil {
			return nil, false, err
		}
		out = append(out, dl.Data...)
		if dl.NextCursor == "" {
			return out, false, nil
		}
		if len(out) >= limit {
			return out, true, nil
		}
		cursor = dl.NextCursor
	}
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	if !api.Allowed(s.principal.Role, "list-deliveries") { // a publisher: its own first page
		http.Redirect(w, r, landing(s.principal), http.StatusSeeOther)
		return
	}
	now := c.cfg.Now().UTC()
	d := overviewData{SampleLimit: overviewScan, GeneratedAt: now, Endpoints: map[string]int{}}
	since := now.Add(-24 * time.Hour).Format(time.RFC3339)
	var series [3][]time.Time                // succeeded, retrying, dead
	deadLastHour := map[string]int{}         // endpoint id → dead letters of the last hour
	lastDead := map[string]api.DeliveryOut{} // endpoint id → its latest dead letter of the day
	for i, st := range []string{"succeeded", "pending", "dead"} {
		ds, capped, err := c.listAll(r, s, url.Values{"state": {st}, "since": {since}}, overviewScan)
		if err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		d.Capped = d.Capped || capped
		for _, x := range ds {
			if st == "pending" && x.Attempts == 0 {
				continue
			}
			series[i] = append(series[i], x.UpdatedAt)
			if st == "dead" && now.Sub(x.UpdatedAt) < time.Hour {
				deadLastHour[x.EndpointID]++
			}
			if st == "dead" && x.UpdatedAt.After(lastDead[x.EndpointID].UpdatedAt) {
				lastDead[x.EndpointID] = x
			}
		}
	}
	d.Hour = buildChart("last hour, per minute", now, time.Minute, 60, series)
	d.Day = buildChart("last 24 hours, per 15 minutes", now, 15*time.Minute, 96, series)

	var counts struct {
		Data []api.DeadLetterCountOut `json:"data"`
	}
	if err := c.call(r, s, "GET", "/v1/dead-letters", nil, &counts); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.DeadPerEP = counts.Data

	pending, capped, err := c.listAll(r, s, url.Values{"state": {"pending"}}, overviewScan)
	if err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.QueueDepth, d.QueueCapped = len(pending), capped
	failing := map[string]*failingEndpoint{}
	for _, x := range pending {
		// In flight is not waiting: the oldest due is of those not attempted now.
		if x.NextAttemptAt != nil && !x.InFlight && (d.OldestDue == nil || x.NextAttemptAt.Before(*d.OldestDue)) {
			t := *x.NextAttemptAt
			d.OldestDue, d.OldestDueID = &t, x.ID
		}
		if x.Attempts > 0 {
			f := failing[x.EndpointID]
			if f == nil {
				f = &failingEndpoint{}
				failing[x.EndpointID] = f
			}
			f.Pending++
			if x.NextAttemptAt != nil && (f.NextAttempt == nil || x.NextAttemptAt.Before(*f.NextAttempt)) {
				t := *x.NextAttemptAt
				f.NextAttempt = &t
			}
			if x.UpdatedAt.After(f.LastFailure) {
				f.LastFailure, f.LastStatus, f.LastError = x.UpdatedAt, x.LastStatusCode, x.LastError
			}
		}
	}
	cursor := ""
	for {
		// Every endpoint the key may read, inbound sources' forwarding
		// endpoints too (an admin's): a disabled one holds what its source
		// accepts, and /metrics counts them.
		v := url.Values{"limit": {"1000"}, "kind": {"all"}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var el endpointList
		if err := c.call(r, s, "GET", "/v1/endpoints?"+v.Encode(), nil, &el); err != nil {
			c.apiFail(w, r, s, err)
			return
		}
		for _, e := range el.Data {
			d.Endpoints[e.State]++
			d.EndpointsAll++
			broken := e.Circuit != nil && e.Circuit.State != "closed"
			if broken {
				d.OpenCircuits++
			}
			f := failing[e.ID]
			if f == nil && (e.State == "disabled" || deadLastHour[e.ID] > 0 || broken) {
				f = &failingEndpoint{}
			}
			if f != nil {
				f.E, f.DeadLastHour = e, deadLastHour[e.ID]
				// Its failures may all be dead letters already: the last
				// failure is then the latest of those.
				if x, ok := lastDead[e.ID]; ok && x.UpdatedAt.After(f.LastFailure) {
					f.LastFailure, f.LastStatus, f.LastError = x.UpdatedAt, x.LastStatusCode, x.LastError
				}
				d.Failing = append(d.Failing, *f)
			}
		}
		if el.NextCursor == "" {
			break
		}
		cursor = el.NextCursor
	}
	sort.Slice(d.Failing, func(i, j int) bool {
		return d.Failing[i].Pending+d.Failing[i].DeadLastHour > d.Failing[j].Pending+d.Failing[j].DeadLastHour
	})
	c.render(w, r, http.StatusOK, "overview", s, "Overview", "overview", d)
}

// --- sources (admin) ----------------------------------------------------

type sourcesData struct {
	Sources []api.SourceOut
	Err     string
	// What a refused new-source form held, shown again.
	Form sourceForm
}

func (d sourcesData) errText() string { return d.Err }

// sourceForm is what a source form holds, as typed: shown again when the
// API refused it, so nothing typed is lost. Never the secrets, which are
// write-only and are not sent back to the browser.
type sourceForm struct {
	Name, Scheme, DestinationURL, Tolerance, Dedupe, MaxBody string
	// posted names the fields the form had (a field it lacks is never
	// sent; an empty one is: empty dedupe is the scheme's own rule).
	posted map[string]bool
	// Was is what an edit form showed when it was rendered (its was_*
	// fields): only what the user changed from that is sent, so a change
	// made meanwhile by someone else is not undone. Nil for a new source,
	// or a form without them.
	Was *sourceForm
}

// sourceFields are a source form's fields, by their API names.
var sourceFields = []string{"name", "scheme", "destination_url", "tolerance_seconds", "dedupe", "max_body_bytes"}

// typedSource reads a source form's fields from a POST.
func typedSource(r *http.Request) sourceForm {
	read := func(prefix string) sourceForm {
		v := func(k string) string { return r.PostFormValue(prefix + k) }
		f := sourceForm{Name: v("name"), Scheme: v("scheme"), DestinationURL: v("destination_url"),
			Tolerance: v("tolerance_seconds"), Dedupe: v("dedupe"), MaxBody: v("max_body_bytes"), posted: map[string]bool{}}
		for _, k := range sourceFields {
			_, f.posted[k] = r.PostForm[prefix+k]
		}
		return f
	}
	f := read("")
	if was := read("was_"); was.posted["name"] {
		f.Was = &was
	}
	return f
}

// sourceFormOf is the edit form of source src as stored (empty settings
// for a source whose configuration does not open: its replacement takes
// the defaults unless the form gives them).
func sourceFormOf(src api.SourceOut) sourceForm {
	f := sourceForm{Name: src.Name, Scheme: src.Scheme, DestinationURL: src.DestinationURL, Dedupe: src.Dedupe}
	if len(src.Unreadable) == 0 {
		f.Tolerance = strconv.Itoa(src.ToleranceSeconds)
		f.MaxBody = strconv.FormatInt(src.MaxBodyBytes, 10)
	}
	return f
}

// settings puts the form's tolerance, dedupe rule and body cap into API
// body b: for a new source (or a replaced configuration: was nil) those
// given; on an edit those changed from what the form showed (was), an
// emptied tolerance or body cap as 0, its default (a PATCH naming a
// tolerance is refused for a scheme that signs no timestamp, whose form
// has none). It returns a message naming the field a value is not a
// number for.
func (f sourceForm) settings(b map[string]any, was *sourceForm) string {
	var shown sourceForm
	if was != nil {
		shown = *was
	}
	for _, n := range []struct{ key, typed, shown, refusal string }{
		{"tolerance_seconds", f.Tolerance, shown.Tolerance, "Tolerance: a whole number of seconds"},
		{"max_body_bytes", f.MaxBody, shown.MaxBody, "Max body size: a whole number of bytes"},
	} {
		t := strings.TrimSpace(n.typed)
		if !f.posted[n.key] || was != nil && n.typed == n.shown || was == nil && t == "" {
			continue
		}
		v := int64(0) // emptied on an edit: the default
		if t != "" {
			var err error
			if v, err = strconv.ParseInt(t, 10, 64); err != nil {
				return n.refusal
			}
		}
		b[n.key] = v
	}
	if d := strings.TrimSpace(f.Dedupe); f.posted["dedupe"] && (was == nil && d != "" || was != nil && f.Dedupe != shown.Dedupe) {
		b["dedupe"] = d // "" on an edit: back to the scheme's own rule
	}
	return ""
}

func (c *Console) sources(w http.ResponseWriter, r *http.Request, s *session) {
	c.sourcesPage(w, r, s, http.StatusOK, sourcesData{})
}

func (c *Console) sourcesPage(w http.ResponseWriter, r *http.Request, s *session, status int, d sourcesData) {
	var sl struct {
		Data []api.SourceOut `json:"data"`
	}
	if err := c.call(r, s, "GET", "/v1/sources?limit=1000", nil, &sl); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Sources = sl.Data
	c.render(w, r, status, "sources", s, "Inbound sources", "sources", d)
}

// secretsNotKept is what a refused source form says when secrets were
// typed: they are write-only, so the form comes back without them.
const secretsNotKept = "The secrets typed were not kept (they are never sent back to the browser): type them again."

// sourceLabels name the source forms' fields in the API's errors.
// A secret is named "Secret 1", "Secret 2"…, counted from 1 as the lines
// of the Secrets field (empty lines left out), never by the API's 0-based
// index (secrets[0]).
var sourceLabels = map[string]string{"name": "Name", "scheme": "Scheme", "secrets": "Secrets", "secrets[]": "Secret", "destination_url": "Destination URL",
	"tolerance_seconds": "Tolerance", "dedupe": "Dedupe", "max_body_bytes": "Max body size",
	// The API's 0 for the default is the form's empty (inFormTerms).
	"tolerance_seconds=0": "empty", "max_body_bytes=0": "empty"}

func (c *Console) createSource(w http.ResponseWriter, r *http.Request, s *session) {
	f := typedSource(r)
	secrets := formList(strings.ReplaceAll(r.PostFormValue("secrets"), ",", "\n"))
	again := func(status int, msg string) {
		if len(secrets) > 0 {
			msg = sentences(msg, secretsNotKept) // as a refused edit: secrets are write-only
		}
		c.sourcesPage(w, r, s, status, sourcesData{Err: msg, Form: f})
	}
	b := map[string]any{
		"name":            f.Name, // as typed, as the API keeps it (a blank one is refused there)
		"scheme":          f.Scheme,
		"secrets":         secrets,
		"destination_url": strings.TrimSpace(f.DestinationURL),
	}
	if msg := f.settings(b, nil); msg != "" {
		again(http.StatusUnprocessableEntity, msg)
		return
	}
	var out api.SourceOut
	if err := c.call(r, s, "POST", "/v1/sources", b, &out); err != nil {
		var ae *apiError
		if errors.As(relabel(err, sourceLabels), &ae) && ae.Status != http.StatusUnauthorized {
			again(ae.Status, ae.Detail)
			return
		}
		c.apiFail(w, r, s, err)
		return
	}
	// Post/Redirect/Get, as every change: a reload of the page creates no
	// second source.
	c.setFlash(s, "Source "+isolatedText(out.Name)+" ("+out.ID+") created: providers POST to "+out.IngestPath+".")
	http.Redirect(w, r, "/ui/sources/"+url.PathEscape(out.ID), http.StatusSeeOther)
}

type sourceDetailData struct {
	S          api.SourceOut
	Forwarding api.EndpointOut
	Dead       []api.DeliveryOut
	Err        string
	// Form is the edit form's values: the source's own, or what a
	// refused edit held; Was is what the form showed first (its was_*
	// fields, sourceForm.Was).
	Form, Was sourceForm
	// StaleKey: as endpointDetailData.StaleKey (read when the source's or
	// its forwarding endpoint's values do not open).
	StaleKey bool
}

func (d sourceDetailData) errText() string { return d.Err }

// bodyDeduped reports whether the source's requests are deduped on the
// SHA-256 of their body whatever its scheme's id (inbound.bodyDedupe): a
// scheme that signs no timestamp (github, shopify, hmac without
// timestamp_header: tolerance 0) without a json: rule.
func (d sourceDetailData) bodyDeduped() bool {
	return d.S.ToleranceSeconds == 0 && !strings.HasPrefix(d.S.Dedupe, "json:")
}

// DedupeShown is what the source's requests are deduped on, in words: its
// rule, or what an empty rule means for its scheme (docs/inbound.md,
// "Schemes").
func (d sourceDetailData) DedupeShown() string {
	switch {
	case d.S.Dedupe != "":
		return d.S.Dedupe
	case d.bodyDeduped() || d.S.Scheme == "hmac":
		return "the SHA-256 of the body"
	}
	return d.naturalID()
}

// naturalID is the id an empty rule reads for a scheme with a timestamp.
func (d sourceDetailData) naturalID() string {
	switch d.S.Scheme {
	case "stripe", "herald":
		return "the event's JSON id"
	case "slack":
		return "the JSON event_id"
	case "standard-webhooks":
		return "the webhook-id header"
	}
	return "the SHA-256 of the body"
}

// DedupeHint is the edit form's hint for the dedupe rule: what empty
// means for this scheme, and the rules it takes (no header: for a scheme
// deduped on its body, which the API refuses).
func (d sourceDetailData) DedupeHint() string {
	if d.S.ToleranceSeconds == 0 {
		return "empty: the SHA-256 of the body (the scheme signs no timestamp, so a header, which no signature covers, is never used); or json:/<JSON pointer> into the signed body, e.g. json:/id"
	}
	return "empty: " + d.DedupeEmpty() + "; or header:<Name>, json:/<JSON pointer>, e.g. json:/id"
}

// DedupeEmpty is what an empty dedupe rule means for the source's scheme
// (the form's placeholder).
func (d sourceDetailData) DedupeEmpty() string {
	if d.S.ToleranceSeconds == 0 || d.S.Scheme == "hmac" {
		return "the SHA-256 of the body"
	}
	return d.naturalID()
}

// hmacSetting is one labelled row of an hmac source's signing settings:
// Code, when set, is a value shown as code between quotes, every space
// kept (a header name, the prefix, the template), Note words about it or
// the value itself.
type hmacSetting struct{ Label, Code, Note string }

// HMACSettings are an hmac source's signing settings as its page shows
// them (api.HMACBody; an empty setting named by the default it means):
// never a secret, which the API does not return. Nil for another scheme.
func (d sourceDetailData) HMACSettings() []hmacSetting {
	h := d.S.HMAC
	if h == nil {
		return nil
	}
	algorithm := "HMAC-" + strings.ToUpper(h.Algorithm)
	if h.Algorithm == "" {
		algorithm = "HMAC-SHA256 (the default)"
	}
	encoding := h.Encoding
	if encoding == "" {
		encoding = "hex (the default)"
	}
	rows := []hmacSetting{
		{"Signature header", h.Header, ""},
		{"Algorithm", "", algorithm},
		{"Encoding", "", encoding + " of the MAC in the signature header"},
		{"Prefix", h.Prefix, "stripped from the header's value before decoding"},
	}
	if h.Prefix == "" {
		rows[3].Note = "none"
	}
	ts := hmacSetting{"Timestamp header", h.TimestampHeader, fmt.Sprintf("unix seconds, signed; tolerance %d s: a timestamp older or ahead of the clock by more is refused", d.S.ToleranceSeconds)}
	if h.TimestampHeader == "" {
		ts.Note = "none: no signed timestamp, so no replay window (deduped on the SHA-256 of the body)"
	}
	tmpl := hmacSetting{"Signed content", h.Template, "placeholders: {body} the raw body, {timestamp} the timestamp header's value, {header:Name} a request header's"}
	if h.Template == "" {
		tmpl.Code, tmpl.Note = "{body}", "(the default: the raw body)"
	}
	rows = append(rows, ts, tmpl)
	for i := range rows {
		if rows[i].Code != "" {
			rows[i].Code = quoted(rows[i].Code)
		}
	}
	return rows
}

// quoted is a setting's value between quotes, as a JSON string (as the
// API gives it), so that its leading, trailing and repeated spaces are
// seen: a prefix "v1  =" is not read as "v1 =". Its invisible format
// characters (Unicode category Cf: U+200B, a BOM, bidi controls such as
// U+202E) are written as JSON escapes (\u202e), as its control characters
// are: a value stored before the API refused them shows them, and cannot
// reverse or hide the page's text.
func quoted(v string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false) // html/template escapes the page; "<" stays "<"
	if err := e.Encode(v); err != nil {
		return strconv.Quote(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if !strings.ContainsFunc(s, isFormatChar) {
		return s
	}
	var out strings.Builder
	for _, r := range s {
		if !isFormatChar(r) {
			out.WriteRune(r)
			continue
		}
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
		} else {
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// isFormatChar reports whether r is of Unicode category Cf (format).
func isFormatChar(r rune) bool { return unicode.Is(unicode.Cf, r) }

// BodyCap is the source's body cap in words (1 MiB, 64 KiB, 1500 bytes).
func (d sourceDetailData) BodyCap() string {
	n := d.S.MaxBodyBytes
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (c *Console) sourceDetail(w http.ResponseWriter, r *http.Request, s *session) {
	c.sourceDetailPage(w, r, s, http.StatusOK, "", nil)
}

// sourceDetailPage renders a source's page; typed, when not nil, is what
// a refused edit held, shown in the form instead of the stored values.
func (c *Console) sourceDetailPage(w http.ResponseWriter, r *http.Request, s *session, status int, errMsg string, typed *sourceForm) {
	id := r.PathValue("id")
	d := sourceDetailData{Err: errMsg}
	if err := c.call(r, s, "GET", "/v1/sources/"+url.PathEscape(id), nil, &d.S); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Form = sourceFormOf(d.S)
	d.Was = d.Form
	if typed != nil {
		d.Form = *typed
		if typed.Was != nil {
			d.Was = *typed.Was // what the refused form showed: the user's changes are still from that
		}
	}
	if d.S.EndpointID != "" {
		_ = c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(d.S.EndpointID), nil, &d.Forwarding)
		var dl deliveryList
		_ = c.call(r, s, "GET", "/v1/endpoints/"+url.PathEscape(d.S.EndpointID)+"/deliveries?state=dead&limit=20", nil, &dl)
		d.Dead = dl.Data
	}
	if len(d.S.Unreadable) > 0 || len(d.Forwarding.Unreadable) > 0 {
		d.StaleKey = c.staleKey(r, s)
	}
	c.render(w, r, status, "source", s, "Source "+id, "sources", d)
}

func (c *Console) updateSource(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	f := typedSource(r)
	secrets := formList(strings.ReplaceAll(r.PostFormValue("secrets"), ",", "\n"))
	again := func(status int, msg string) {
		if len(secrets) > 0 {
			msg = sentences(msg, secretsNotKept)
		}
		c.sourceDetailPage(w, r, s, status, msg, &f)
	}
	var cur api.SourceOut
	if err := c.call(r, s, "GET", "/v1/sources/"+url.PathEscape(id), nil, &cur); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	// Only what the user changed from what the form showed (f.Was) is
	// sent; a form without it (f.Was nil) is compared with the source as
	// stored now, its name and destination always sent.
	was := f.Was
	if was == nil {
		stored := sourceFormOf(cur)
		was = &stored
	}
	b := map[string]any{}
	// A name or destination emptied was cleared, and the API refuses it
	// (only the write-only secrets keep their values when left empty).
	// The name as typed, as the API keeps it; the URL without surrounding
	// spaces.
	for _, n := range []struct{ key, typed, shown string }{{"name", f.Name, was.Name}, {"destination_url", strings.TrimSpace(f.DestinationURL), was.DestinationURL}} {
		if f.posted[n.key] && (f.Was == nil || n.typed != n.shown) {
			b[n.key] = n.typed
		}
	}
	if len(secrets) > 0 {
		b["secrets"] = secrets
	}
	// The form of a source whose configuration does not open asks for
	// the scheme too: with the secrets, the API replaces it whole, and
	// the settings given go with it (the rest take their defaults).
	if sch := strings.TrimSpace(f.Scheme); sch != "" {
		b["scheme"] = sch
	}
	if len(cur.Unreadable) > 0 {
		was = nil
	}
	if msg := f.settings(b, was); msg != "" {
		again(http.StatusUnprocessableEntity, msg)
		return
	}
	if len(b) == 0 {
		// Nothing differs from what the form showed: no request, and no
		// "saved" for a save that saved nothing.
		c.setFlash(s, "Source "+id+": nothing changed.")
		http.Redirect(w, r, "/ui/sources/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	var out api.SourceOut
	if err := c.call(r, s, "PATCH", "/v1/sources/"+url.PathEscape(id), b, &out); err != nil {
		var ae *apiError
		if errors.As(relabel(err, sourceLabels), &ae) && ae.Status != http.StatusUnauthorized && ae.Status != http.StatusNotFound {
			again(ae.Status, ae.Detail)
			return
		}
		c.apiFail(w, r, s, err)
		return
	}
	if out.UpdatedAt.Equal(cur.UpdatedAt) {
		// The API wrote nothing: the values sent are the ones it has
		// (the same secrets typed again, a value spelled another way).
		c.setFlash(s, "Source "+id+": nothing changed.")
		http.Redirect(w, r, "/ui/sources/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	c.setFlash(s, "Source "+id+" saved.")
	http.Redirect(w, r, "/ui/sources/"+url.PathEscape(id), http.StatusSeeOther)
}

// --- API keys and portal links (admin) ----------------------------------

type keysData struct {
	Keys      []api.APIKeyOut
	Created   *api.APIKeyOut
	Portal    *api.PortalSessionOut
	Links     []api.PortalSessionOut // portal links, newest first, a page of them
	Err       string
	KeysNext  string   // the page's URL with the next page of keys ("": none)
	LinksNext string   // the page's URL with the next page of portal links ("": none)
	Form      keyForms // what a refused form held, shown again
}

// keyForms are the values of the new API key and portal link forms.
type keyForms struct {
	Name, Role, Tenant, Expires         string // new API key
	PortalTenant, PortalRole, PortalTTL string // new portal link
}

// typed reads the values of the forms of a POST.
func typed(r *http.Request) keyForms {
	return keyForms{Name: r.PostFormValue("name"), Role: r.PostFormValue("role"), Tenant: r.PostFormValue("tenant"), Expires: r.PostFormValue("expires_at")}
}

func typedPortal(r *http.Request) keyForms {
	return keyForms{PortalTenant: r.PostFormValue("tenant"), PortalRole: r.PostFormValue("role"), PortalTTL: r.PostFormValue("ttl_minutes")}
}

func (d keysData) errText() string { return d.Err }

// keysPageSize is how many API keys the API keys page lists at once (its
// next page link reads the rest).
var keysPageSize = 1000

// linksPageSize is how many portal links the API keys page lists at once
// (its next page link reads the rest).
var linksPageSize = 1000

func (c *Console) keys(w http.ResponseWriter, r *http.Request, s *session) {
	c.keysPage(w, r, s, http.StatusOK, keysData{})
}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, s *session, status int, d keysData) {
	// Each list is paged with its own cursor; a next page link of one
	// keeps the page of the other.
	keysCursor, linksCursor := r.URL.Query().Get("cursor"), r.URL.Query().Get("links_cursor")
	var kl struct {
		Data       []api.APIKeyOut `json:"data"`
		NextCursor string          `json:"next_cursor"`
	}
	v := url.Values{"limit": {strconv.Itoa(keysPageSize)}}
	if keysCursor != "" {
		v.Set("cursor", keysCursor)
	}
	if err := c.call(r, s, "GET", "/v1/api-keys?"+v.Encode(), nil, &kl); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Keys = kl.Data
	var ps struct {
		Data       []api.PortalSessionOut `json:"data"`
		NextCursor string                 `json:"next_cursor"`
	}
	v = url.Values{"limit": {strconv.Itoa(linksPageSize)}}
	if linksCursor != "" {
		v.Set("cursor", linksCursor)
	}
	if err := c.call(r, s, "GET", "/v1/portal-sessions?"+v.Encode(), nil, &ps); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Links = ps.Data
	if kl.NextCursor != "" {
		d.KeysNext = keysPageURL(kl.NextCursor, linksCursor)
	}
	if ps.NextCursor != "" {
		d.LinksNext = keysPageURL(keysCursor, ps.NextCursor)
	}
	c.render(w, r, status, "keys", s, "API keys", "keys", d)
}

// keysPageURL is the API keys page at a page of keys and a page of portal
// links (an empty cursor: the first page).
func keysPageURL(keysCursor, linksCursor string) string {
	v := url.Values{}
	if keysCursor != "" {
		v.Set("cursor", keysCursor)
	}
	if linksCursor != "" {
		v.Set("links_cursor", linksCursor)
	}
	if len(v) == 0 {
		return "/ui/keys"
	}
	return "/ui/keys?" + v.Encode()
}

// keysLabels name the API keys' and portal sessions' fields by the
// forms' labels.
var keysLabels = map[string]string{"name": "Name", "role": "Role", "tenant": "Tenant", "expires_at": "Expires", "ttl_seconds": "Lifetime"}

func (c *Console) keysError(w http.ResponseWriter, r *http.Request, s *session, err error, form keyForms) {
	var ae *apiError
	if errors.As(relabel(err, keysLabels), &ae) && ae.Status != http.StatusUnauthorized {
		c.keysPage(w, r, s, ae.Status, keysData{Err: ae.Detail, Form: form})
		return
	}
	c.apiFail(w, r, s, err)
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request, s *session) {
	b := map[string]any{"name": r.PostFormValue("name"), "role": r.PostFormValue("role")} // the name as typed, as the API keeps it
	if t := strings.TrimSpace(r.PostFormValue("tenant")); t != "" {
		b["tenant"] = t
	}
	if e := strings.TrimSpace(r.PostFormValue("expires_at")); e != "" {
		t, err := parseFormTime(e)
		if err != nil {
			c.keysPage(w, r, s, http.StatusUnprocessableEntity, keysData{Err: "Expires: " + err.Error(), Form: typed(r)})
			return
		}
		b["expires_at"] = t
	}
	var out api.APIKeyOut
	if err := c.call(r, s, "POST", "/v1/api-keys", b, &out); err != nil {
		c.keysError(w, r, s, err, typed(r))
		return
	}
	c.stash(w, r, s, "/ui/keys/created", func(w http.ResponseWriter, r *http.Request, s *session) {
		c.keysPage(w, r, s, http.StatusOK, keysData{Created: &out})
	})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if err := c.call(r, s, "DELETE", "/v1/api-keys/"+url.PathEscape(id), nil, nil); err != nil {
		c.keysError(w, r, s, err, keyForms{})
		return
	}
	c.setFlash(s, "API key "+id+" revoked.")
	http.Redirect(w, r, "/ui/keys", http.StatusSeeOther)
}

func (c *Console) revokePortalLink(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if err := c.call(r, s, "DELETE", "/v1/portal-sessions/"+url.PathEscape(id), nil, nil); err != nil {
		c.keysError(w, r, s, err, keyForms{})
		return
	}
	c.setFlash(s, "Portal link "+id+" revoked.")
	http.Redirect(w, r, "/ui/keys", http.StatusSeeOther)
}

func (c *Console) createPortalLink(w http.ResponseWriter, r *http.Request, s *session) {
	b := map[string]any{"tenant": strings.TrimSpace(r.PostFormValue("tenant")), "role": r.PostFormValue("role")}
	if t := strings.TrimSpace(r.PostFormValue("ttl_minutes")); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > 10080 { // the API's ttl_seconds: 60–604800
			c.keysPage(w, r, s, http.StatusUnprocessableEntity, keysData{Err: fmt.Sprintf("Lifetime: %q is not a whole number of minutes from 1 to 10080 (7 days)", t), Form: typedPortal(r)})
			return
		}
		b["ttl_seconds"] = n * 60
	}
	var out api.PortalSessionOut
	if err := c.call(r, s, "POST", "/v1/portal-sessions", b, &out); err != nil {
		c.keysError(w, r, s, err, typedPortal(r))
		return
	}
	c.stash(w, r, s, "/ui/keys/portal-link", func(w http.ResponseWriter, r *http.Request, s *session) {
		c.keysPage(w, r, s, http.StatusOK, keysData{Portal: &out})
	})
}

// --- event catalog ------------------------------------------------------

type catalogData struct {
	Types []api.EventTypeOut
	// NextCursor continues the catalog after Types (by name); "" on the
	// last page.
	NextCursor string
}

// catalogPage is the number of event types on a page of the catalog.
const catalogPage = 100

func (c *Console) catalog(w http.ResponseWriter, r *http.Request, s *session) {
	var out struct {
		Data       []api.EventTypeOut `json:"data"`
		NextCursor string             `json:"next_cursor"`
	}
	v := url.Values{"limit": {strconv.Itoa(catalogPage)}}
	if cur := r.URL.Query().Get("cursor"); cur != "" {
		v.Set("cursor", cur)
	}
	if err := c.call(r, s, "GET", "/v1/event-types?"+v.Encode(), nil, &out); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	c.render(w, r, http.StatusOK, "catalog", s, "Event catalog", "catalog", catalogData{Types: out.Data, NextCursor: out.NextCursor})
}

type eventTypeData struct {
	T api.EventTypeOut
	// Versions newest first (the API lists them ascending).
	Versions []api.EventTypeVersionOut
}

func (c *Console) eventType(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	d := eventTypeData{}
	if err := c.call(r, s, "GET", "/v1/event-types/"+url.PathEscape(name), nil, &d.T); err != nil {
		c.apiFail(w, r, s, err)
		return
	}
	d.Versions = slices.Clone(d.T.Versions)
	slices.Reverse(d.Versions)
	c.render(w, r, http.StatusOK, "event_type", s, "Event type "+d.T.Name, "catalog", d)
}

// catalogTypes lists the event catalog for the endpoint form's hint; the
// error is the API call's (callers show the form without the hint, unless
// the credential was refused).
// It reads at most catalogHintTypes types (the hint names the first ones).
func (c *Console) catalogTypes(r *http.Request, s *session) ([]api.EventTypeOut, error) {
	var all []api.EventTypeOut
	v := url.Values{"limit": {"1000"}}
	for len(all) < catalogHintTypes {
		var out struct {
			Data       []api.EventTypeOut `json:"data"`
			NextCursor string             `json:"next_cursor"`
		}
		if err := c.call(r, s, "GET", "/v1/event-types?"+v.Encode(), nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Data...)
		if out.NextCursor == "" {
			break
		}
		v.Set("cursor", out.NextCursor)
	}
	return all, nil
}

// catalogHintTypes bounds the event types the endpoint form reads for its
// hint.
const catalogHintTypes = 5000

// labelledError is an error of a console form's field, named by the
// form's label as written on the page: "Headers: …".
type labelledError struct {
	label string
	err   error
}

func (e *labelledError) Error() string { return e.label + ": " + e.err.Error() }
func (e *labelledError) Unwrap() error { return e.err }

// labelled names err after the form field labelled label.
func labelled(label string, err error) error { return &labelledError{label: label, err: err} }
