package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/store"
)

// This file is the boundary between tenants (docs/operations.md, "Keys,
// roles and tenants"). Every /v1/ request goes through three steps, each
// in exactly one place:
//
//  1. authenticate (HTTP middleware): the bearer key becomes a Principal
//     (admin, or a tenant role with its tenant), or the request is refused
//     with 401; failures are throttled per client address (429).
//  2. authorize (huma middleware): the operation's row in the policy table
//     names the roles allowed; any other role gets 403. An operation
//     without a row cannot be registered (New fails).
//  3. scope (scope.go): handlers reach the store only through Server.db,
//     which for a tenant principal is a view of the store restricted to
//     its tenant: other tenants' records are not found (404, exactly like
//     unknown ids), lists are filtered, writes to another tenant refused.

// Prefixes of the secrets Herald issues. They are recognisable so secret
// scanners (GitHub secret scanning, gitleaks, trufflehog) can find leaked
// ones: "herald_key_" + 43 base64url characters (32 random bytes) for API
// keys, "herald_portal_" + 43 for portal session tokens.
const (
	APIKeyPrefix      = "herald_key_"
	PortalTokenPrefix = "herald_portal_"
)

// MinAdminKeyLength is the shortest HERALD_API_KEY accepted: 32 characters.
const MinAdminKeyLength = 32

// NewSecretKey returns a new random credential with the given prefix
// (APIKeyPrefix or PortalTokenPrefix): the prefix and 32 random bytes in
// base64url.
func NewSecretKey(prefix string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashAPIKey returns the SHA-256 of an API key, the form in which keys are
// stored and compared. Keys are 256-bit random values, so a fast hash is
// enough: nothing can be guessed from it.
func HashAPIKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Principal is who makes a request: an admin, or a tenant role (manager,
// publisher, viewer) bound to one tenant.
type Principal struct {
	KeyID  string // "key_…", "ps_…" (portal session), or "env" for HERALD_API_KEY
	Role   string // store.RoleAdmin, RoleManager, RolePublisher or RoleViewer
	Tenant string // "" for admin
	Portal bool   // a portal session token
}

// Admin reports whether the principal may act on every tenant.
func (p Principal) Admin() bool { return p.Role == store.RoleAdmin }

type principalKey struct{}

// PrincipalFrom returns the principal of an authenticated request; ok is
// false outside /v1/ routes.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

func principal(ctx context.Context) Principal {
	p, _ := PrincipalFrom(ctx)
	return p
}

// keyCacheTTL bounds how long a node keeps using a stored key's record
// without reading it again: a key revoked on one node is refused by every
// node within this time (the revoking node forgets it at once).
const keyCacheTTL = 500 * time.Millisecond

// touchEvery bounds the writes of last_used_at: at most one per key per
// node per minute, off the request path.
const touchEvery = time.Minute

type cachedKey struct {
	key     store.APIKey
	fetched time.Time
}

// keyring resolves presented keys to stored records.
type keyring struct {
	admin [][]byte // hashes of HERALD_API_KEY (compared in constant time)

	mu      sync.Mutex
	cache   map[[32]byte]cachedKey
	touched map[string]time.Time // key id → last last_used_at write
}

// forget drops the cached record of key id, and of the portal sessions it
// created, so that a revocation takes effect at once on this node.
func (kr *keyring) forget(id string) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	for h, c := range kr.cache {
		if c.key.ID == id || c.key.CreatedBy == id {
			delete(kr.cache, h)
		}
	}
}

// record returns the cached record of key id (the caller's own key was
// cached when it authenticated this request).
func (kr *keyring) record(id string) (store.APIKey, bool) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	for _, c := range kr.cache {
		if c.key.ID == id {
			return c.key, true
		}
	}
	return store.APIKey{}, false
}

// authFailure is why a request was refused at authentication.
type authFailure struct {
	reason string // missing, malformed, invalid, expired, revoked
	detail string
}

// resolve authenticates a presented key.
func (s *Server) resolve(ctx context.Context, presented string) (Principal, *authFailure, error) {
	h := HashAPIKey(presented)
	match := 0
	for _, want := range s.keys.admin {
		match |= subtle.ConstantTimeCompare(h, want)
	}
	if match == 1 {
		return Principal{KeyID: "env", Role: store.RoleAdmin}, nil, nil
	}
	var hk [32]byte
	copy(hk[:], h)
	wall := time.Now()
	s.keys.mu.Lock()
	c, ok := s.keys.cache[hk]
	s.keys.mu.Unlock()
	if !ok || wall.Sub(c.fetched) > keyCacheTTL {
		k, err := s.cfg.Store.LookupAPIKey(ctx, h)
		if errors.Is(err, store.ErrNotFound) {
			if strings.HasPrefix(presented, PortalTokenPrefix) {
				return Principal{}, &authFailure{"invalid", "invalid portal link: its token is unknown (copy the whole link you were given, or ask for a new one)"}, nil
			}
			return Principal{}, &authFailure{"invalid", "invalid API key"}, nil
		}
		if err != nil {
			return Principal{}, nil, err
		}
		c = cachedKey{key: k, fetched: wall}
		s.keys.mu.Lock()
		if len(s.keys.cache) > 4096 {
			for h, old := range s.keys.cache {
				if wall.Sub(old.fetched) > keyCacheTTL {
					delete(s.keys.cache, h)
				}
			}
		}
		s.keys.cache[hk] = c
		s.keys.mu.Unlock()
	}
	k := c.key
	// The database found the row by its hash; the comparison that decides
	// is still constant-time.
	if subtle.ConstantTimeCompare(k.Hash, h) != 1 {
		return Principal{}, &authFailure{"invalid", "invalid API key"}, nil
	}
	now := s.cfg.Now()
	what := "API key"
	if k.Kind == store.KeyKindPortal {
		what = "portal session"
	}
	if !k.RevokedAt.IsZero() {
		return Principal{}, &authFailure{"revoked", what + " revoked"}, nil
	}
	if !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt) {
		return Principal{}, &authFailure{"expired", what + " expired at " + k.ExpiresAt.Format(time.RFC3339)}, nil
	}
	s.touch(k.ID, now)
	return Principal{KeyID: k.ID, Role: k.Role, Tenant: k.Tenant, Portal: k.Kind == store.KeyKindPortal}, nil, nil
}

// touch records a key's use: at most once a minute per key, in the
// background (a request never waits for it).
func (s *Server) touch(id string, now time.Time) {
	s.keys.mu.Lock()
	last, ok := s.keys.touched[id]
	due := !ok || now.Sub(last) >= touchEvery || now.Before(last)
	if due {
		s.keys.touched[id] = now
	}
	s.keys.mu.Unlock()
	if !due {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.cfg.Store.TouchAPIKeys(ctx, map[string]time.Time{id: now}); err != nil {
			s.cfg.Logger.Warn("could not record an API key's last use", "key", id, "error", err)
		}
	}()
}

// throttle is a token bucket per client address, spent only by failed
// authentications: Burst failures at once, then Rate per second. While an
// address's bucket is empty, its requests get 429 before any key is
// checked; other addresses are not affected.
type throttle struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func (t *throttle) bucket(addr string) *rate.Limiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.buckets[addr]
	if !ok {
		if len(t.buckets) >= 10000 { // forget addresses whose bucket refilled
			now := time.Now()
			for a, old := range t.buckets {
				if old.TokensAt(now) >= float64(t.burst) {
					delete(t.buckets, a)
				}
			}
		}
		b = rate.NewLimiter(t.rate, t.burst)
		t.buckets[addr] = b
	}
	return b
}

// blocked returns how long the address must wait (0: not blocked).
func (t *throttle) blocked(addr string) time.Duration {
	t.mu.Lock()
	b, ok := t.buckets[addr]
	t.mu.Unlock()
	if !ok {
		return 0
	}
	tokens := b.Tokens()
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(t.rate) * float64(time.Second))
}

func (t *throttle) fail(addr string) { t.bucket(addr).Allow() }

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// authenticate requires "Authorization: Bearer <key>" on /v1/ routes and
// puts the request's Principal in its context.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		addr := clientAddr(r)
		if wait := s.throttle.blocked(addr); wait > 0 {
			s.cfg.Metrics.AuthFailure("throttled")
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeProblem(w, http.StatusTooManyRequests, "too many failed authentications from this address; retry later")
			return
		}
		refuse := func(f authFailure) {
			s.throttle.fail(addr)
			s.cfg.Metrics.AuthFailure(f.reason)
			// Never the presented key: only where it came from and why.
			s.cfg.Logger.Info("authentication failed", "client", addr, "reason", f.reason, "method", r.Method, "path", r.URL.Path)
			challenge := `Bearer realm="herald"`
			if f.reason != "missing" && f.reason != "malformed" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeProblem(w, http.StatusUnauthorized, f.detail)
		}
		auth := r.Header.Get("Authorization")
		scheme, key, ok := strings.Cut(auth, " ")
		if auth == "" {
			refuse(authFailure{"missing", "missing API key: send Authorization: Bearer <api key>"})
			return
		}
		key = strings.TrimSpace(key)
		if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
			refuse(authFailure{"malformed", "malformed Authorization header: expected Bearer <api key>"})
			return
		}
		p, fail, err := s.resolve(r.Context(), key)
		if err != nil {
			s.cfg.Logger.Error("store error", "error", err, "op", "authenticate")
			writeProblem(w, http.StatusServiceUnavailable, "the store is unavailable; retry later")
			return
		}
		if fail != nil {
			refuse(*fail)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		ctx = context.WithValue(ctx, baseURLKey{}, baseURL(r))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type baseURLKey struct{}

// baseURL is the scheme and host the client reached this node at (for the
// URLs Herald hands out, e.g. a portal session's).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Access is one row of the policy table: the roles, besides admin, that may
// call an operation. No roles: admin only. Public: no API key at all (the
// probes and /contract, outside /v1/, which authenticate leaves open;
// applyPolicy refuses a public row under /v1/ and a keyed one outside it,
// so the row says what the middleware does).
type Access struct {
	Roles  []string
	Public bool
}

var (
	adminOnly  = Access{}
	managers   = Access{Roles: []string{store.RoleManager}}
	readers    = Access{Roles: []string{store.RoleManager, store.RoleViewer}}
	publishers = Access{Roles: []string{store.RolePublisher}}
	eventRead  = Access{Roles: []string{store.RoleManager, store.RolePublisher, store.RoleViewer}}
	allRoles   = eventRead
	public     = Access{Public: true}
)

// Policy is the access rule of every operation of the API, by operation
// id: the one table that decides who may call what (the tenant a caller
// may touch is decided by scope.go). Registering an operation that has no
// row here fails New.
var Policy = map[string]Access{
	// endpoints
	"create-endpoint":          managers,
	"list-endpoints":           readers,
	"get-endpoint":             readers,
	"update-endpoint":          managers,
	"delete-endpoint":          managers,
	"get-endpoint-secret":      managers,
	"rotate-endpoint-secret":   managers,
	"list-endpoint-secrets":    managers,
	"revoke-endpoint-secret":   managers,
	"test-endpoint":            managers,
	"pause-endpoint":           managers,
	"resume-endpoint":          managers,
	"enable-endpoint":          managers,
	"list-endpoint-deliveries": readers,
	"get-endpoint-stats":       readers,
	"replay-endpoint":          managers,
	// events
	"publish-event":         publishers,
	"list-events":           eventRead,
	"get-event":             eventRead,
	"list-event-deliveries": readers,
	// deliveries
	"get-delivery":           readers,
	"list-delivery-attempts": readers,
	"replay-delivery":        managers,
	"redeliver-delivery":     managers,
	"list-deliveries":        readers,
	"dead-letter-counts":     readers,
	// event catalog: every key reads it, operators change it
	"create-event-type":      adminOnly,
	"list-event-types":       allRoles,
	"get-event-type":         allRoles,
	"add-event-type-version": adminOnly,
	"update-event-type":      adminOnly,
	// sources, keys, sessions: operators only
	"create-source":         adminOnly,
	"list-sources":          adminOnly,
	"get-source":            adminOnly,
	"update-source":         adminOnly,
	"delete-source":         adminOnly,
	"create-api-key":        adminOnly,
	"list-api-keys":         adminOnly,
	"revoke-api-key":        adminOnly,
	"create-portal-session": adminOnly,
	"list-portal-sessions":  adminOnly,
	"revoke-portal-session": adminOnly,
	// probes and the contract: plain handlers outside /v1/, documented in
	// the OpenAPI document (probes.go), answered without a key
	"get-health":    public,
	"get-readiness": public,
	"get-contract":  public,
}

// allows reports whether the role may call the operation.
func (a Access) allows(role string) bool {
	return a.Public || role == store.RoleAdmin || slices.Contains(a.Roles, role)
}

// describe is the sentence the OpenAPI document carries.
func (a Access) describe() string {
	if a.Public {
		return "Public: no API key is needed (an Authorization header is ignored)."
	}
	return "Requires role: " + strings.Join(append([]string{store.RoleAdmin}, a.Roles...), ", ") + "."
}

// authorize is the huma middleware applying Policy.
func (s *Server) authorize(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	a, ok := Policy[op.OperationID]
	if !ok { // New refuses this; kept as a closed default
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "operation "+op.OperationID+" has no access rule")
		return
	}
	p := principal(ctx.Context())
	if !a.allows(p.Role) {
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, fmt.Sprintf("role %s may not call %s %s (operation %s): %s", p.Role, op.Method, op.Path, op.OperationID, a.describe()))
		return
	}
	next(ctx)
}

// applyPolicy checks that every registered operation has a row in Policy
// that matches what authenticate does with its path (a key under /v1/,
// none elsewhere), and states the row in the OpenAPI document
// (description, and x-herald-roles or x-herald-public).
func (s *Server) applyPolicy() error {
	var missing, wrong []string
	for path, item := range s.api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op == nil {
				continue
			}
			a, ok := Policy[op.OperationID]
			if !ok {
				missing = append(missing, op.OperationID+" ("+path+")")
				continue
			}
			if keyed := strings.HasPrefix(path, "/v1/"); keyed == a.Public {
				wrong = append(wrong, op.OperationID+" ("+path+")")
				continue
			}
			if op.Description != "" {
				op.Description += "\n\n"
			}
			op.Description += a.describe()
			if op.Extensions == nil {
				op.Extensions = map[string]any{}
			}
			if a.Public {
				op.Extensions["x-herald-public"] = true
			} else {
				op.Extensions["x-herald-roles"] = append([]string{store.RoleAdmin}, a.Roles...)
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("api: operations without a row in the access policy (internal/api/auth.go Policy): %s", strings.Join(missing, ", "))
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		return fmt.Errorf("api: operations whose access policy row disagrees with their path (a key is required under /v1/ and nowhere else, internal/api/auth.go authenticate): %s", strings.Join(wrong, ", "))
	}
	return nil
}

// TenantPattern is the rule of a tenant name: 1 to 128 letters, digits,
// _ . : or -. The request types' struct tags write it out (a tag cannot
// name a constant); TestTenantPatternsAgree checks they all say this.
const TenantPattern = `^[A-Za-z0-9_.:\-]{1,128}$`

// TenantPatternDescription is TenantPattern in words (store.TenantRule):
// the refusal of a tenant that does not follow it says this, not the
// expression.
const TenantPatternDescription = store.TenantRule

var tenantRule = regexp.MustCompile(TenantPattern)

// ValidTenant reports whether name follows TenantPattern (a src_ tenant
// does too: see IsInternalTenant).
func ValidTenant(name string) bool { return tenantRule.MatchString(name) }

// InternalTenantPrefix starts the tenants Herald keeps for itself
// (store.InternalTenantPrefix): no request may name one.
const InternalTenantPrefix = store.InternalTenantPrefix

// IsInternalTenant reports whether a tenant name starts with
// InternalTenantPrefix, compared without regard to case
// (store.IsInternalTenant, which outbox.Publish applies too).
func IsInternalTenant(name string) bool { return store.IsInternalTenant(name) }

// tenantFor resolves the tenant a request acts on. named is the tenant the
// request names ("" when it names none; loc is where, for the error). A
// tenant principal acts on its own tenant: naming another answers 403. An
// admin acts on the tenant it names. Internal tenants cannot be named (422).
func (s *Server) tenantFor(ctx context.Context, named, loc string) (string, error) {
	if IsInternalTenant(named) {
		return "", invalid(loc, store.InternalTenantRule, named)
	}
	p := principal(ctx)
	if p.Tenant == "" {
		return named, nil
	}
	if named != "" && named != p.Tenant {
		return "", huma.Error403Forbidden("this credential belongs to tenant " + p.Tenant + "; it cannot act on tenant " + named)
	}
	return p.Tenant, nil
}

// Allowed reports whether a role may call an operation (by operation id),
// by the same Policy row the API enforces. The console uses it only to
// hide what the API would refuse; the API still decides every request.
func Allowed(role, operationID string) bool {
	a, ok := Policy[operationID]
	return ok && a.allows(role)
}

// AuthenticationError is returned by Authenticate for a key the API would
// answer 401, or 429 while the client address is throttled (RetryAfter > 0:
// how long until the address may try again, the API's Retry-After); its
// message is the API's detail.
type AuthenticationError struct {
	Detail     string
	RetryAfter time.Duration
}

func (e *AuthenticationError) Error() string { return e.Detail }

// Authenticate resolves a presented API key or portal session token to its
// Principal exactly as the bearer authentication of /v1/ does, counting a
// failure against the client address (addr, an IP) in the same throttle.
// It returns *AuthenticationError for a refused key, or a store error.
func (s *Server) Authenticate(ctx context.Context, addr, key string) (Principal, error) {
	if wait := s.throttle.blocked(addr); wait > 0 {
		s.cfg.Metrics.AuthFailure("throttled")
		return Principal{}, &AuthenticationError{Detail: fmt.Sprintf("too many attempts from this address; retry in %d s", int(math.Ceil(wait.Seconds()))), RetryAfter: wait}
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return Principal{}, &AuthenticationError{Detail: "missing API key"}
	}
	p, fail, err := s.resolve(ctx, key)
	if err != nil {
		return Principal{}, err
	}
	if fail != nil {
		s.throttle.fail(addr)
		s.cfg.Metrics.AuthFailure(fail.reason)
		s.cfg.Logger.Info("authentication failed", "client", addr, "reason", fail.reason, "via", "console sign-in")
		return Principal{}, &AuthenticationError{Detail: fail.detail}
	}
	return p, nil
}

// checkQuery is the one check of every request's query string, before
// the handler reads it. It answers 422 for a query parameter the operation
// does not declare (a mistyped filter such as ?endpoint_id= on GET
// /v1/deliveries would otherwise be ignored, and the read would answer
// more than was asked for), naming the parameter and those the operation
// takes, as unknown members of a body are refused; and 422 for a declared
// parameter given more than once (?tenant=acme&tenant=globex: the handler
// would read the first and ignore the rest), unless its schema is an array
// (none is today). It also answers 422 for a path or query parameter
// that is not UTF-8 text or holds a NUL (%FF, %00): no id or name can,
// and PostgreSQL refuses such text, which answered 503 "the store is
// unavailable" (SQLite 404 or an empty list). It runs after the access
// check, so a caller learns nothing of an operation it may not call.
func (s *Server) checkQuery(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	u := ctx.URL()
	var query url.Values // parsed only when there is a query: no map per request without one
	if u.RawQuery != "" {
		query = u.Query()
	}
	var bad []error
	for _, p := range op.Parameters {
		var values []string
		switch p.In {
		case "path":
			values = []string{ctx.Param(p.Name)}
		case "query":
			values = query[p.Name]
		}
		for _, v := range values {
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				bad = append(bad, &huma.ErrorDetail{Location: p.In + "." + p.Name, Message: textRule})
				break
			}
		}
	}
	if len(bad) > 0 {
		_ = huma.WriteErr(s.api, ctx, http.StatusUnprocessableEntity, "validation failed", bad...)
		return
	}
	if u.RawQuery == "" {
		next(ctx)
		return
	}
	var unknown, repeated []string
	for name, values := range query {
		i := slices.IndexFunc(op.Parameters, func(p *huma.Param) bool { return p.In == "query" && p.Name == name })
		switch {
		case i < 0:
			unknown = append(unknown, name)
		case len(values) > 1 && (op.Parameters[i].Schema == nil || op.Parameters[i].Schema.Type != "array"):
			repeated = append(repeated, name)
		}
	}
	if len(unknown) > 0 {
		s.refuseUnknownQuery(ctx, op, unknown)
		return
	}
	if len(repeated) > 0 {
		slices.Sort(repeated)
		details := make([]error, len(repeated))
		parts := make([]string, len(repeated))
		for i, name := range repeated {
			n := len(query[name])
			parts[i] = fmt.Sprintf("%s given %d times", name, n)
			details[i] = &huma.ErrorDetail{Location: "query." + name, Message: fmt.Sprintf("query parameter %s given %d times: it takes one value", name, n)}
		}
		// Only declared names repeat: Herald's own, short and few.
		_ = huma.WriteErr(s.api, ctx, http.StatusUnprocessableEntity,
			fmt.Sprintf("query parameter %s: each query parameter of %s %s takes one value; give it once", strings.Join(parts, ", "), op.Method, op.Path), details...)
		return
	}
	next(ctx)
}

// textRule is the refusal of a path or query parameter that is not text.
const textRule = "must be UTF-8 text without NUL characters"

// refuseUnknownQuery answers checkQuery's 422 for the unknown query
// parameters of op.
func (s *Server) refuseUnknownQuery(ctx huma.Context, op *huma.Operation, unknown []string) {
	slices.Sort(unknown)
	var known []string
	for _, p := range op.Parameters {
		if p.In == "query" {
			known = append(known, p.Name)
		}
	}
	takes := "no query parameters"
	if len(known) > 0 {
		takes = "only " + strings.Join(known, ", ")
	}
	// Each name is input: cut by Echo, at most maxProblemErrors of them
	// listed in the detail (the huma.NewError wrapper bounds errors[]).
	details := make([]error, len(unknown))
	for i, name := range unknown {
		details[i] = &huma.ErrorDetail{Location: "query." + Echo(name), Message: "unknown query parameter", Value: Echo(name)}
	}
	_ = huma.WriteErr(s.api, ctx, http.StatusUnprocessableEntity,
		fmt.Sprintf("unknown query parameter(s) %s: %s %s takes %s", listEchoes(unknown), op.Method, op.Path, takes), details...)
}
