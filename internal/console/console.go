// Package console serves Herald's web console at /ui/ (and the API
// reference at /docs): server-rendered html/template pages over the HTTP
// API v1, for operators (an admin key: every tenant) and for a tenant's
// endpoint owners (a manager or viewer key, or a portal session link).
//
// The console holds no data and makes no access decision of its own:
// every page is built from in-process calls to the API handler with the
// signed-in credential as its bearer key, so the API's single enforcement
// point (authenticate, authorize by the Policy table, the tenant-scoped
// store) decides what each page may read or change. The console only hides
// buttons the Policy would refuse (api.Allowed).
//
// Sign-in turns an API key or a portal session token into a server-side
// session: cookie herald_console (HttpOnly, SameSite=Strict, Secure behind
// TLS, path /), idle expiry (default 30 min) and absolute expiry (default
// 12 h, never past the credential's own expiry, which the API enforces).
// Every POST carries the session's CSRF token (a hidden form field,
// compared in constant time); the sign-in form carries a pre-session token
// in a cookie and a field (double submit). Responses carry a strict
// Content-Security-Policy (no inline script or style; everything from
// 'self'); the pages' CSS and script are embedded in the binary.
//
// Sessions live in the memory of the node that signed in: behind a load
// balancer with several Herald nodes, route /ui/ with session affinity, or
// sign in again on another node.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/api"
)

//go:embed templates static
var assets embed.FS

// Defaults of Config.
const (
	DefaultIdleTimeout     = 30 * time.Minute
	DefaultAbsoluteTimeout = 12 * time.Hour
)

// API is what the console needs of the API server: its handler (every
// page's data goes through it) and its authentication (sign-in).
type API interface {
	http.Handler
	Authenticate(ctx context.Context, addr, key string) (api.Principal, error)
	OpenAPI() *huma.OpenAPI
}

// Config configures the console.
type Config struct {
	API             API
	Version         string
	IdleTimeout     time.Duration    // a session unused this long ends; default 30 min
	AbsoluteTimeout time.Duration    // a session ends this long after sign-in; default 12 h
	Now             func() time.Time // default time.Now
	Logger          *slog.Logger
}

// Console serves /ui/, /docs and GET / (a redirect to /ui/), and passes
// every other request to the API.
type Console struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template
	docs  []byte // /docs, rendered once from the OpenAPI document

	mu       sync.Mutex
	sessions map[string]*session
}

// session is one signed-in browser.
type session struct {
	id         string
	csrf       string
	credential string // the API key or portal token, sent as the bearer of API calls
	principal  api.Principal
	created    time.Time
	seen       time.Time
	flash      string
	once       map[string]func(http.ResponseWriter, *http.Request, *session) // one-time result pages by path (see stash)
}

const (
	sessionCookie = "herald_console"
	signinCookie  = "herald_signin"
)

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.API == nil {
		return nil, errors.New("console: Config.API is required")
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.AbsoluteTimeout <= 0 {
		cfg.AbsoluteTimeout = DefaultAbsoluteTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Console{cfg: cfg, mux: http.NewServeMux(), sessions: map[string]*session{}}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	docs, err := renderDocs(cfg.API.OpenAPI(), cfg.Version)
	if err != nil {
		return nil, err
	}
	c.docs = docs
	c.routes()
	return c, nil
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "/" || p == "/ui" || p == "/docs" || p == "/docs/" || strings.HasPrefix(p, "/ui/") {
		c.mux.ServeHTTP(w, r)
		return
	}
	c.cfg.API.ServeHTTP(w, r)
}

func (c *Console) parseTemplates() error {
	funcs := template.FuncMap{
		"ts":           fmtTime,
		"tsp":          fmtTimePtr,
		"ago":          func(t time.Time) string { return ago(c.cfg.Now(), t) },
		"pretty":       prettyJSON,
		"join":         strings.Join,
		"unreadable":   unreadableNames,
		"ms":           func(f float64) string { return fmt.Sprintf("%.0f ms", f) },
		"pct":          func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
		"urlq":         url.QueryEscape,
		"path":         url.PathEscape,
		"headers":      fmtHeaders,
		"headerNames":  func(h map[string]string) string { return strings.Join(slices.Sorted(maps.Keys(h)), ", ") }, // names only: values are credentials
		"split":        strings.Fields,
		"healthWindow": func() string { return healthWindow },
		"eventURL":     eventURL,
		"isolated":     isolated,
		"isolatedText": isolatedText,
		// expired: a key's or portal link's expiry (time.Time, or
		// *time.Time with nil for never) has passed.
		"expired": func(t any) bool {
			switch x := t.(type) {
			case time.Time:
				return !x.IsZero() && !c.cfg.Now().Before(x)
			case *time.Time:
				return x != nil && !c.cfg.Now().Before(*x)
			}
			return false
		},
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/partial_*.html")
	if err != nil {
		return err
	}
	pages, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	c.pages = map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" || strings.HasPrefix(name, "partial_") {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(assets, p)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[name] = t
	}
	return nil
}

// csp is the Content-Security-Policy of every console page: nothing inline,
// nothing from elsewhere, no framing, forms only to this origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func secureHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// view is what every page template receives.
type view struct {
	Title     string
	Nav       string
	S         *session
	CSRF      string
	Flash     string
	Error     string
	Version   string
	Principal api.Principal
	Data      any
}

// Can reports whether the signed-in role may call an API operation (to
// hide what the API would refuse).
func (v view) Can(op string) bool { return v.S != nil && api.Allowed(v.S.principal.Role, op) }

// Home is the principal's first page (landing): the brand link and the
// error page's way back lead there.
func (v view) Home() string {
	if v.S == nil {
		return "/ui/"
	}
	return landing(v.S.principal)
}

// Admin reports whether the signed-in principal sees every tenant.
func (v view) Admin() bool { return v.S != nil && v.S.principal.Admin() }

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, s *session, title, nav string, data any) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	v := view{Title: title, Nav: nav, S: s, Version: c.cfg.Version, Data: data}
	if s != nil {
		v.CSRF, v.Principal = s.csrf, s.principal
		c.mu.Lock()
		v.Flash, s.flash = s.flash, ""
		c.mu.Unlock()
	}
	if e, ok := data.(interface{ errText() string }); ok {
		v.Error = e.errText()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.cfg.Logger.Error("console: render", "page", page, "error", err)
		http.Error(w, "could not render the page", http.StatusInternalServerError)
		return
	}
	secureHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the data of the error page.
type errorPage struct {
	Status int
	Msg    string
}

func (e errorPage) errText() string { return e.Msg }

func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	c.render(w, r, status, "error", s, http.StatusText(status), "", errorPage{Status: status, Msg: msg})
}

// --- sessions -----------------------------------------------------------

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (c *Console) newSession(cred string, p api.Principal) *session {
	now := c.cfg.Now()
	s := &session{id: randomToken(), csrf: randomToken(), credential: cred, principal: p, created: now, seen: now}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, old := range c.sessions { // forget expired ones
		if c.expired(old, now) {
			delete(c.sessions, id)
		}
	}
	c.sessions[s.id] = s
	return s
}

func (c *Console) expired(s *session, now time.Time) bool {
	return now.Sub(s.seen) >= c.cfg.IdleTimeout || now.Sub(s.created) >= c.cfg.AbsoluteTimeout
}

// current returns the request's live session, or nil.
func (c *Console) current(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[ck.Value]
	if !ok {
		return nil
	}
	if c.expired(s, now) {
		delete(c.sessions, s.id)
		return nil
	}
	s.seen = now
	return s
}

func (c *Console) end(s *session) {
	c.mu.Lock()
	delete(c.sessions, s.id)
	c.mu.Unlock()
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"), MaxAge: maxAge})
}

// csrfOK checks a POST's CSRF token against the session's.
func csrfOK(r *http.Request, s *session) bool {
	got := r.PostFormValue("csrf")
	return s != nil && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// page wraps a GET handler that needs a session: without one the browser
// is sent to the sign-in page.
func (c *Console) page(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.current(r)
		if s == nil {
			http.Redirect(w, r, signInURL(r), http.StatusSeeOther)
			return
		}
		h(w, r, s)
	}
}

// signInURL is where a request without a live session is sent: the sign-in
// page, leading back to the page asked for (a GET), and saying the session
// ended when the browser still holds its cookie (it expired, or its key or
// portal link was revoked or expired; signing out drops the cookie).
func signInURL(r *http.Request) string {
	q := url.Values{}
	if r.Method == http.MethodGet {
		q.Set("next", r.URL.RequestURI())
	}
	if ck, err := r.Cookie(sessionCookie); err == nil && ck.Value != "" {
		q.Set("ended", "1")
	}
	if len(q) == 0 {
		return "/ui/sign-in"
	}
	return "/ui/sign-in?" + q.Encode()
}

// action wraps a POST handler: it needs a session and the session's CSRF
// token, or it is refused with 403 and changes nothing.
func (c *Console) action(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		s := c.current(r)
		if s == nil {
			c.fail(w, r, nil, http.StatusForbidden, "this action needs a signed-in session: sign in again")
			return
		}
		if !csrfOK(r, s) {
			c.cfg.Logger.Warn("console: POST without a valid CSRF token refused", "path", r.URL.Path, "client", r.RemoteAddr)
			c.fail(w, r, s, http.StatusForbidden, "missing or invalid CSRF token: the request did not come from a console page (reload the page and try again)")
			return
		}
		h(w, r, s)
	}
}

// may wraps a page or action handler with the Policy row of the API
// operation it leads to: a role the Policy refuses gets 403 before any
// form or confirmation is shown (the same answer the API would give).
func (c *Console) may(op string, h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	if _, ok := api.Policy[op]; !ok {
		panic("console: no Policy row for operation " + op)
	}
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if !api.Allowed(s.principal.Role, op) {
			c.fail(w, r, s, http.StatusForbidden, fmt.Sprintf("role %s may not %s (operation %s, the API's access policy)", s.principal.Role, strings.ReplaceAll(op, "-", " "), op))
			return
		}
		h(w, r, s)
	}
}

// stash answers a state-changing POST the Post/Redirect/Get way: the
// result page (which may hold a secret shown only once) is kept in the
// server-side session under path, and the browser is sent there with 303.
// The GET of path (shown) renders it once and forgets it, so a reload or
// Back/Forward neither repeats the action nor shows the secret again; the
// secret never travels in a URL.
func (c *Console) stash(w http.ResponseWriter, r *http.Request, s *session, path string, show func(http.ResponseWriter, *http.Request, *session)) {
	c.mu.Lock()
	if s.once == nil {
		s.once = map[string]func(http.ResponseWriter, *http.Request, *session){}
	}
	s.once[path] = show
	c.mu.Unlock()
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// shown is the GET of a stashed result page: rendered once; afterwards it
// leads to its parent page (path without its last segment) with a note.
func (c *Console) shown(w http.ResponseWriter, r *http.Request, s *session) {
	c.mu.Lock()
	show := s.once[r.URL.Path]
	delete(s.once, r.URL.Path)
	c.mu.Unlock()
	if show == nil {
		c.setFlash(s, "That result was shown once and is gone (reloading does not repeat the action).")
		http.Redirect(w, r, r.URL.Path[:strings.LastIndex(r.URL.Path, "/")], http.StatusSeeOther)
		return
	}
	show(w, r, s)
}

func (c *Console) setFlash(s *session, msg string) {
	c.mu.Lock()
	s.flash = msg
	c.mu.Unlock()
}

// --- calling the API ----------------------------------------------------

// apiError is an API answer with status >= 400 (an RFC 9457 problem).
type apiError struct {
	Status int
	Detail string       // the problem's detail, then "; field: message" for each invalid field
	head   string       // the problem's detail alone
	fields []fieldError // the invalid fields, as the API names them
}

type fieldError struct{ Location, Message string }

func (e *apiError) Error() string { return e.Detail }

// relabel rewrites an API error in a form's words: each invalid field the
// API names (a JSON body field or query parameter, e.g. "rate_limit_per_second"
// or "query.kind") is named by the form label in labels ("Rate limit"),
// so the message points at what the user typed. Other errors pass as they
// are.
//
// An item of a list field ("event_types[0]") is named by the label and its
// position ("Event types (item 1)"), a key of a map field ("headers.X-Team")
// by the label and the key ("Headers (X-Team)"); an error the API reports
// on the whole body whose message starts with a field ("secrets[0]: shorter
// than 16 bytes") is named the same way.
func relabel(err error, labels map[string]string) error {
	var ae *apiError
	if !errors.As(err, &ae) || len(ae.fields) == 0 {
		return err
	}
	// huma's "validation failed" says nothing the fields below do not.
	var msg string
	if ae.head != "validation failed" {
		msg = ae.head
	}
	for _, f := range ae.fields {
		loc, text := strings.TrimPrefix(strings.TrimPrefix(f.Location, "body."), "query."), f.Message
		if m := requiredProperty.FindStringSubmatch(text); m != nil && (loc == "body" || loc == "query") {
			loc, text = m[1], "is required" // a field left out: at the field
		} else if m != nil {
			loc, text = loc+"."+m[1], "is required"
		}
		if field, rest, ok := strings.Cut(text, ": "); ok && (loc == "body" || loc == "query" || field == loc) {
			// A message that names its field first: the field is the
			// location (of the whole body), or repeats it.
			if _, ok := fieldLabel(field, labels); ok {
				loc, text = field, rest
			}
		}
		text = schemaInFormTerms(text)
		if l, ok := fieldLabel(loc, labels); ok {
			// "max_body_bytes must be …" at max_body_bytes: "Max body
			// size: must be …", the field named once, by its label; so
			// too `dedupe "x": …` (a value follows), but not "tenant
			// names starting with …", where the word is the sentence's.
			if rest, ok := strings.CutPrefix(text, loc+" "); ok && (strings.Contains(loc, "_") || strings.ContainsAny(rest[:min(1, len(rest))], `"0123456789-`)) {
				text = rest
			}
			text = inFormTerms(text, loc, labels)
			loc = l
		}
		if msg != "" {
			msg += "; "
		}
		if loc != "" {
			msg += loc + ": "
		}
		msg += mentionsLabelled(text, labels)
	}
	return &apiError{Status: ae.Status, Detail: msg, head: ae.head, fields: ae.fields}
}

// requiredProperty is huma's refusal of a body left without a required
// field, located at the body (or the object holding the field).
var requiredProperty = regexp.MustCompile(`^expected required property (\S+) to be present$`)

// schemaRules rewrite huma's schema refusals ("expected length <= 1024",
// "expected value to be one of \"a, b\"") as the rule a form's field
// breaks, in words a user reads after the field's label: "must be at most
// 1024 characters long", "must be one of a or b". A list field of a form
// is a textarea, one item a line. Herald's own messages (which name the
// rule with its unit) match none of them and pass as they are.
var schemaRules = []struct {
	re *regexp.Regexp
	to func(m []string) string
}{
	{regexp.MustCompile(`^expected length >= 1$`), func([]string) string { return "must not be empty" }},
	{regexp.MustCompile(`^expected length >= (\d+)$`), func(m []string) string { return "must be at least " + m[1] + " characters long" }},
	{regexp.MustCompile(`^expected length <= (\d+)$`), func(m []string) string { return "must be at most " + m[1] + " characters long" }},
	{regexp.MustCompile(`^expected array length >= 1$`), func([]string) string { return "must have at least one, one a line" }},
	{regexp.MustCompile(`^expected array length >= (\d+)$`), func(m []string) string { return "must have at least " + m[1] + ", one a line" }},
	{regexp.MustCompile(`^expected array length <= (\d+)$`), func(m []string) string { return "must have at most " + m[1] + ", one a line" }},
	{regexp.MustCompile(`^expected array items to be unique$`), func([]string) string { return "must not have the same line twice" }},
	{regexp.MustCompile(`^expected number >= (\S+)$`), func(m []string) string { return "must be at least " + m[1] }},
	{regexp.MustCompile(`^expected number <= (\S+)$`), func(m []string) string { return "must be at most " + m[1] }},
	{regexp.MustCompile(`^expected number > (\S+)$`), func(m []string) string { return "must be more than " + m[1] }},
	{regexp.MustCompile(`^expected number < (\S+)$`), func(m []string) string { return "must be less than " + m[1] }},
	{regexp.MustCompile(`^expected number to be a multiple of (\S+)$`), func(m []string) string { return "must be a multiple of " + m[1] }},
	{regexp.MustCompile(`^expected integer$`), func([]string) string { return "must be a whole number" }},
	{regexp.MustCompile(`^expected number$`), func([]string) string { return "must be a number" }},
	{regexp.MustCompile(`^expected boolean$`), func([]string) string { return "must be true or false" }},
	{regexp.MustCompile(`^expected string$`), func([]string) string { return "must be text" }},
	{regexp.MustCompile(`^expected string to be RFC 3339 date-time$`), func([]string) string {
		return "must be a date and time such as 2026-01-02T15:04:05Z (RFC 3339)"
	}},
	{regexp.MustCompile(`^expected string to match pattern (.+)$`), func(m []string) string { return "must match the pattern " + m[1] }},
	// A pattern's description: "not blank (…), no control characters…",
	// "no NUL characters", "1–128 letters, digits…".
	{regexp.MustCompile(`^expected string to be not blank(.*)$`), func(m []string) string {
		return "must not be blank" + strings.Replace(m[1], "), no control characters", ") and contain no control characters", 1)
	}},
	{regexp.MustCompile(`^expected string to be (no .+)$`), func(m []string) string { return "must contain " + m[1] }},
	{regexp.MustCompile(`^expected string to be (.+)$`), func(m []string) string { return "must be " + m[1] }},
	{regexp.MustCompile(`^expected value to be one of "(.*)"$`), func(m []string) string { return "must be one of " + orList(m[1]) }},
}

// schemaInFormTerms is text with huma's schema wording replaced by the
// rule it states (schemaRules); any other message is returned as it is.
func schemaInFormTerms(text string) string {
	for _, r := range schemaRules {
		if m := r.re.FindStringSubmatch(text); m != nil {
			return r.to(m)
		}
	}
	return text
}

// orList reads huma's "a, b, c" choices as "a, b or c".
func orList(s string) string {
	if i := strings.LastIndex(s, ", "); i >= 0 {
		return s[:i] + " or " + s[i+2:]
	}
	return s
}

// fieldLabel names an API field path by a form's label: "rate_limit_per_second"
// → "Rate limit", "event_types[2]" → "Event types (item 3)", "headers.X-Team"
// → "Headers (X-Team)". An item of a list whose items have a name of
// their own (labels["secrets[]"] = "Secret") is named by it, counted from
// 1 as a person counts: "secrets[0]" → "Secret 1". ok is false for a path
// of a field without a label.
func fieldLabel(path string, labels map[string]string) (string, bool) {
	if l, ok := labels[path]; ok {
		return l, true
	}
	if name, rest, ok := strings.Cut(path, "["); ok {
		idx, tail, closed := strings.Cut(rest, "]")
		n, err := strconv.Atoi(idx)
		if l, known := labels[name]; known && closed && err == nil && n >= 0 && tail == "" {
			if item, named := labels[name+"[]"]; named {
				return fmt.Sprintf("%s %d", item, n+1), true
			}
			return fmt.Sprintf("%s (item %d)", l, n+1), true
		}
	}
	if name, key, ok := strings.Cut(path, "."); ok && key != "" {
		if l, known := labels[name]; known {
			return l + " (" + key + ")", true
		}
	}
	return "", false
}

// apiName is a field's name in the API, as a message mentions it: words
// joined by underscores (tolerance_seconds, max_body_bytes), which is
// never an English word, unlike "name" or "scheme".
var apiName = regexp.MustCompile(`\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b( 0\b)?`)

// inFormTerms rewrites an API message on field field in the form's terms:
// the API's field names it mentions by the form's labels, and, for a field
// whose form takes empty for the default (labels[name+"=0"] = "empty":
// the API's 0 is the form's empty), "0 for the default" as "empty for the
// default" and "leave tolerance_seconds 0" as "leave Tolerance empty", so
// a message never asks for a value the form refuses (a Max body size of
// 0 is under its min=1024).
func inFormTerms(text, field string, labels map[string]string) string {
	if labels[field+"=0"] != "" {
		text = strings.ReplaceAll(text, "send 0 for the default", "leave it empty for the default")
		text = strings.ReplaceAll(text, "0 for the default", labels[field+"=0"]+" for the default")
	}
	var b strings.Builder
	last := 0
	for _, at := range apiName.FindAllStringIndex(text, -1) {
		m := text[at[0]:at[1]]
		name, zero := strings.CutSuffix(m, " 0")
		l, ok := labels[name]
		if !ok || at[0] > 0 && strings.IndexByte("/:.-", text[at[0]-1]) >= 0 {
			continue // not a field, or part of a value: json:/max_body_bytes
		}
		if zero {
			if e := labels[name+"=0"]; e != "" {
				l += " " + e
			} else {
				l += " 0"
			}
		}
		b.WriteString(text[last:at[0]])
		b.WriteString(l)
		last = at[1]
	}
	return b.String() + text[last:]
}

// listItem is an API path of a list's item inside a message ("the same as
// secrets[0]").
var listItem = regexp.MustCompile(`\b[a-z][a-z0-9_]*\[[0-9]+\]`)

// mentionsLabelled names the list items an API message mentions by the
// form's labels, as fieldLabel names a location: "the same as secrets[0]"
// → "the same as secret 1", so a message never numbers one item from 1
// and another from 0. Paths of fields without a label are left as they
// are.
func mentionsLabelled(text string, labels map[string]string) string {
	return listItem.ReplaceAllStringFunc(text, func(path string) string {
		l, ok := fieldLabel(path, labels)
		if !ok {
			return path
		}
		if name, _, _ := strings.Cut(path, "["); labels[name+"[]"] != "" {
			// "Secret 1" inside a sentence: "secret 1".
			return strings.ToLower(l[:1]) + l[1:]
		}
		return l
	})
}

// sentences joins messages as sentences: one that does not end as a
// sentence (an API message often ends with a value or a parenthesis) gets
// a period before the next, so the console's own note never runs on from
// the API's message ("… and hmac) The secrets …").
func sentences(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			if s := b.String(); !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") {
				b.WriteByte('.')
			}
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String()
}

// recorder is a minimal in-memory http.ResponseWriter.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// call makes one API request as the session's principal and decodes the
// JSON answer into out (may be nil). An answer >= 400 is an *apiError
// carrying the problem's detail (and its first validation error).
func (c *Console) call(r *http.Request, s *session, method, path string, body, out any) error {
	_, err := c.callWarned(r, s, method, path, body, out)
	return err
}

// callWarned is call, also returning the text of each Warning header of
// the API's answer (a pin to a deprecated version: `299 - "…"`), for the
// page after a change to say.
func (c *Console) callWarned(r *http.Request, s *session, method, path string, body, out any) ([]string, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return nil, err
	}
	req.RemoteAddr, req.Host, req.TLS = r.RemoteAddr, r.Host, r.TLS
	req.Header.Set("Authorization", "Bearer "+s.credential)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{h: http.Header{}}
	c.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 400 {
		var p struct {
			Title  string `json:"title"`
			Detail string `json:"detail"`
			Errors []struct {
				Message  string `json:"message"`
				Location string `json:"location"`
			} `json:"errors"`
		}
		_ = json.Unmarshal(rec.body.Bytes(), &p)
		msg := p.Detail
		if msg == "" {
			msg = p.Title
		}
		ae := &apiError{Status: rec.status, head: msg}
		for _, e := range p.Errors {
			msg += "; " + strings.TrimPrefix(e.Location, "body.") + ": " + e.Message
			ae.fields = append(ae.fields, fieldError{Location: e.Location, Message: e.Message})
		}
		if rec.status == http.StatusUnauthorized { // revoked or expired credential: the session ends
			c.end(s)
		}
		ae.Detail = msg
		return nil, ae
	}
	if out != nil && rec.body.Len() > 0 {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return nil, err
		}
	}
	var warnings []string
	for _, v := range rec.h.Values("Warning") {
		warnings = append(warnings, warningText(v))
	}
	return warnings, nil
}

// warningText is the text of a Warning header's value (RFC 7234 §5.5:
// `299 - "text"`, the quotes' escapes undone), or the value as it is.
func warningText(v string) string {
	rest, ok := strings.CutPrefix(v, `299 - "`)
	if !ok || !strings.HasSuffix(rest, `"`) {
		return v
	}
	rest = strings.TrimSuffix(rest, `"`)
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		if rest[i] == '\\' && i+1 < len(rest) {
			i++
		}
		b.WriteByte(rest[i])
	}
	return b.String()
}

// apiFail renders an API error as the page's answer (401 sends the browser
// to sign in again).
func (c *Console) apiFail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusUnauthorized {
			http.Redirect(w, r, signInURL(r), http.StatusSeeOther)
			return
		}
		c.fail(w, r, s, ae.Status, ae.Detail)
		return
	}
	c.cfg.Logger.Error("console: API call", "error", err)
	c.fail(w, r, s, http.StatusInternalServerError, "the API answer could not be read")
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// --- formatting ---------------------------------------------------------

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return fmtTime(*t)
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + span(-d)
	}
	return span(d) + " ago"
}

// span is a duration as people say it: "42 s", "5 min", "3 h", "2 days"
// (whole units, rounded down).
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// isBidiControl reports whether r is one of the bidirectional embedding,
// override and isolate controls (U+202A–U+202E, U+2066–U+2069): the
// invisible characters that reorder the text after them (Trojan Source).
// Other format characters, such as the zero-width joiner of an emoji
// sequence, only join or mark and are shown as they are.
func isBidiControl(r rune) bool { return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 }

// bidiMark is how a bidirectional control of user text is shown: its code
// point, visible, instead of the character itself.
func bidiMark(r rune) string { return fmt.Sprintf("<U+%04X>", r) }

// isolated shows user text (a description, a name) in a page's text
// isolated from what surrounds it: inside <bdi>, so that its
// right-to-left letters or marks order only itself, with each
// bidirectional control shown as its code point ("<U+202E>", marked),
// so that none reorders the page after it, nor ends the isolation early
// (a PDI, U+2069, would), nor makes the text read other than it is
// stored. For an attribute or a message built in Go: isolatedText.
func isolated(s string) template.HTML {
	var b strings.Builder
	b.WriteString("<bdi>")
	last := 0
	for i, r := range s {
		if !isBidiControl(r) {
			continue
		}
		b.WriteString(template.HTMLEscapeString(s[last:i]))
		b.WriteString(`<span class="bidi-control" title="an invisible bidirectional control character, shown by its code point">`)
		b.WriteString(template.HTMLEscapeString(bidiMark(r)))
		b.WriteString("</span>")
		last = i + utf8.RuneLen(r)
	}
	b.WriteString(template.HTMLEscapeString(s[last:]))
	b.WriteString("</bdi>")
	return template.HTML(b.String())
}

// isolatedText is isolated for plain text (a flash message, an attribute
// such as a confirmation's question): s between FSI (U+2068) and PDI
// (U+2069), the characters <bdi> stands for, with its bidirectional
// controls shown as their code points, so the isolation holds.
func isolatedText(s string) string {
	if !strings.ContainsFunc(s, isBidiControl) && !strings.ContainsFunc(s, isStrongRTL) {
		return s // nothing to isolate: copied, it is as stored
	}
	var b strings.Builder
	b.WriteRune('\u2068')
	for _, r := range s {
		if isBidiControl(r) {
			b.WriteString(bidiMark(r))
		} else {
			b.WriteRune(r)
		}
	}
	b.WriteRune('\u2069')
	return b.String()
}

// isStrongRTL reports whether r is a letter of a right-to-left script
// (Hebrew, Arabic and the like), which would move the neutral
// characters around it.
func isStrongRTL(r rune) bool {
	return unicode.In(r, unicode.Hebrew, unicode.Arabic, unicode.Syriac, unicode.Thaana, unicode.Nko, unicode.Samaritan, unicode.Mandaic, unicode.Adlam)
}

// prettyJSON indents a JSON document for display and undoes the \u003c,
// \u003e and \u0026 escapes Go's encoder puts in strings, so a payload
// reads as it was published (the template escapes it for HTML).
func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return unescapeHTMLEscapes(buf.String())
}

func unescapeHTMLEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if s[i+1] == 'u' && i+6 <= len(s) {
				switch s[i+2 : i+6] {
				case "003c":
					b.WriteByte('<')
					i += 5
					continue
				case "003e":
					b.WriteByte('>')
					i += 5
					continue
				case "0026":
					b.WriteByte('&')
					i += 5
					continue
				}
			}
			b.WriteString(s[i : i+2]) // any other escape, kept whole
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func fmtHeaders(h map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(&b, "%s: %s\n", k, h[k])
	}
	return b.String()
}

// eventURL is the console page of an event of tenant: with ?tenant=, since
// an id a producer chose is unique per tenant only (GET /v1/events/{id}
// answers 404 without it when two tenants share it), except for an inbound
// source's internal tenant (src_…), which no request may name and whose
// events have Herald's own, unique ids.
func eventURL(id, tenant string) string {
	u := "/ui/events/" + url.PathEscape(id)
	if tenant != "" && !strings.HasPrefix(strings.ToLower(tenant), "src_") {
		u += "?tenant=" + url.QueryEscape(tenant)
	}
	return u
}
