package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// CreateAPIKeyBody is the body of POST /v1/api-keys.
type CreateAPIKeyBody struct {
	// The pattern allows "" ("*", not "+"): an empty name gets one error
	// (minLength), not two.
	Name string `json:"name" minLength:"1" maxLength:"128" doc:"what the key is for, e.g. billing publisher" pattern:"^([^\\p{Cc}\\p{Cf}]*[^\\p{Cc}\\p{Cf}\\p{Z}][^\\p{Cc}\\p{Cf}]*)?$" patternDescription:"not blank (a character other than spaces), no control characters or invisible format characters (C0 and C1 controls, U+200B, U+FEFF, bidirectional overrides such as U+202E)"`
	Role string `json:"role" enum:"admin,manager,publisher,viewer" doc:"admin: everything; manager: its tenant's endpoints, secrets, deliveries and replays; publisher: publish and read its tenant's events (Herald's operational events about its endpoints too); viewer: read-only, never secrets"`
	// No pattern in the schema: "" (how the key list shows an admin key's
	// tenant) is accepted for an admin key, and createAPIKey names the rule
	// that a tenant role's tenant breaks (ValidTenant).
	Tenant    string     `json:"tenant,omitempty" maxLength:"128" doc:"required for manager, publisher and viewer: 1–128 letters, digits, _ . : or -; absent, null or empty for admin"`
	ExpiresAt *time.Time `json:"expires_at,omitempty" doc:"RFC 3339; the key stops working then; default never"`
}

// APIKeyOut is an API key as the API shows it: never its secret, except
// Key in the answer to its creation.
type APIKeyOut struct {
	ID         string     `json:"id" doc:"key_…"`
	Key        string     `json:"key,omitempty" doc:"the secret (herald_key_…): shown once, in the answer to the creation only"`
	Name       string     `json:"name"`
	Role       string     `json:"role" enum:"admin,manager,publisher,viewer"`
	Tenant     string     `json:"tenant" doc:"empty for admin"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at" doc:"null: never"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty" doc:"set once revoked"`
	LastUsedAt *time.Time `json:"last_used_at" doc:"last authenticated request, to the minute; null: never used"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func apiKeyOut(k store.APIKey) APIKeyOut {
	return APIKeyOut{ID: k.ID, Name: k.Name, Role: k.Role, Tenant: k.Tenant, CreatedAt: k.CreatedAt,
		ExpiresAt: optTime(k.ExpiresAt), RevokedAt: optTime(k.RevokedAt), LastUsedAt: optTime(k.LastUsedAt)}
}

// APIKeyList is a page of API keys.
type APIKeyList struct {
	Data       []APIKeyOut `json:"data"`
	NextCursor string      `json:"next_cursor"`
}

// portalTTLRule is the rule of a portal session's ttl_seconds, which a
// refusal names at the field (fieldRules).
const portalTTLRule = "ttl_seconds must be an integer number of seconds from 60 (1 minute) to 604800 (7 days); leave it out for the default, 3600 (1 hour)"

// CreatePortalSessionBody is the body of POST /v1/portal-sessions.
type CreatePortalSessionBody struct {
	Tenant     string `json:"tenant" pattern:"^[A-Za-z0-9_.:\\-]{1,128}$" patternDescription:"1–128 letters, digits, _ . : or -" doc:"the tenant whose endpoint owners open the portal"`
	Role       string `json:"role,omitempty" enum:"manager,viewer" doc:"default viewer"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" minimum:"60" maximum:"604800" doc:"lifetime in seconds, 60–604800 (7 days); default 3600"`
}

// PortalSessionOut is a portal session; Token and URL only in the answer
// to POST /v1/portal-sessions.
type PortalSessionOut struct {
	ID         string     `json:"id" doc:"ps_…"`
	Token      string     `json:"token,omitempty" doc:"herald_portal_…: acts as an API key of the tenant and role until expires_at; shown once, on create"`
	URL        string     `json:"url,omitempty" doc:"opens the web UI signed in as the tenant: <base>/ui/portal#token=<token> (the token is in the fragment, so it is never sent to a server or logged); on create only"`
	Tenant     string     `json:"tenant"`
	Role       string     `json:"role" enum:"manager,viewer"`
	CreatedBy  string     `json:"created_by" doc:"the key that created it (key_…, or env for HERALD_API_KEY): revoking that key revokes the session"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at" doc:"at most ttl_seconds after creation, and never after the creating key expires"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// PortalSessionList is a page of portal sessions.
type PortalSessionList struct {
	Data       []PortalSessionOut `json:"data"`
	NextCursor string             `json:"next_cursor"`
}

func portalSessionOut(k store.APIKey) PortalSessionOut {
	return PortalSessionOut{ID: k.ID, Tenant: k.Tenant, Role: k.Role, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: optTime(k.RevokedAt), LastUsedAt: optTime(k.LastUsedAt)}
}

// PortalPath is where a portal session's URL points; the token follows in
// the fragment ("#token=…").
const PortalPath = "/ui/portal"

func (s *Server) registerKeys() {
	sec := []map[string][]string{{"bearer": {}}}

	huma.Register(s.api, huma.Operation{
		OperationID: "create-api-key", Method: http.MethodPost, Path: "/v1/api-keys", Tags: []string{"api keys"},
		Summary: "Create an API key (its secret is shown once)", DefaultStatus: http.StatusCreated, Security: sec, MaxBodyBytes: 4096,
	}, s.createAPIKey)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-api-keys", Method: http.MethodGet, Path: "/v1/api-keys", Tags: []string{"api keys"},
		Summary: "List API keys, newest first (never their secrets; revoked keys included)", Security: sec,
	}, s.listAPIKeys)

	huma.Register(s.api, huma.Operation{
		OperationID: "revoke-api-key", Method: http.MethodDelete, Path: "/v1/api-keys/{id}", Tags: []string{"api keys"},
		Summary: "Revoke an API key, and the portal sessions it created: refused at once on this node, within a second on every node", DefaultStatus: http.StatusNoContent, Security: sec,
	}, s.revokeAPIKey)

	huma.Register(s.api, huma.Operation{
		OperationID: "create-portal-session", Method: http.MethodPost, Path: "/v1/portal-sessions", Tags: []string{"api keys"},
		Summary: "Create a portal session: a token acting as a tenant's manager or viewer key until it expires, and the URL that opens the web UI with it", DefaultStatus: http.StatusCreated, Security: sec, MaxBodyBytes: 4096,
	}, s.createPortalSession)

	huma.Register(s.api, huma.Operation{
		OperationID: "list-portal-sessions", Method: http.MethodGet, Path: "/v1/portal-sessions", Tags: []string{"api keys"},
		Summary: "List portal sessions, newest first (never their tokens; expired and revoked ones included)", Security: sec,
	}, s.listPortalSessions)

	huma.Register(s.api, huma.Operation{
		OperationID: "revoke-portal-session", Method: http.MethodDelete, Path: "/v1/portal-sessions/{id}", Tags: []string{"api keys"},
		Summary: "Revoke a portal session before it expires: refused at once on this node, within a second on every node", DefaultStatus: http.StatusNoContent, Security: sec,
	}, s.revokePortalSession)
}

func (s *Server) createAPIKey(ctx context.Context, in *struct{ Body CreateAPIKeyBody }) (*struct{ Body APIKeyOut }, error) {
	b := in.Body
	// Every field is checked and every refusal listed (fieldErrors), in
	// the order of the body's members.
	var fe fieldErrors
	tenant, err := s.tenantFor(ctx, b.Tenant, "body.tenant")
	if err := fe.add(err); err != nil {
		return nil, err
	}
	switch {
	case err != nil:
	case b.Role == store.RoleAdmin && tenant != "":
		fe.add(invalid("body.tenant", "an admin key has no tenant (it acts on every tenant); omit tenant or choose a tenant role", tenant))
	case b.Role != store.RoleAdmin && tenant == "":
		fe.add(invalid("body.tenant", "role "+b.Role+" needs a tenant", nil))
	case !ValidTenant(tenant) && tenant != "":
		fe.add(invalid("body.tenant", "a tenant is "+store.TenantRule, tenant))
	}
	now := s.cfg.Now()
	k := store.APIKey{ID: store.NewID("key"), Kind: store.KeyKindAPIKey, Name: b.Name, Role: b.Role, Tenant: tenant, CreatedAt: now.Truncate(time.Microsecond)}
	if b.ExpiresAt != nil {
		if !b.ExpiresAt.After(now) {
			fe.add(invalid("body.expires_at", "expires_at must be in the future", b.ExpiresAt))
		}
		k.ExpiresAt = b.ExpiresAt.UTC().Truncate(time.Microsecond)
	}
	if err := fe.err(b); err != nil {
		return nil, err
	}
	secret, err := NewSecretKey(APIKeyPrefix)
	if err != nil {
		return nil, huma.Error500InternalServerError("could not generate a key")
	}
	k.Hash = HashAPIKey(secret)
	k, err = s.db(ctx).CreateAPIKey(ctx, k)
	if err != nil {
		return nil, s.problem(err, "api key")
	}
	out := apiKeyOut(k)
	out.Key = secret
	return &struct{ Body APIKeyOut }{Body: out}, nil
}

type apiKeyListOut struct {
	Body APIKeyList
}

func (s *Server) listAPIKeys(ctx context.Context, in *struct{ ListQuery }) (*apiKeyListOut, error) {
	q := query(ctx, listAPIKeys, "/v1/api-keys")
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListAPIKeys(ctx, store.KeyKindAPIKey, lp)
	if err != nil {
		return nil, s.problem(err, "api keys")
	}
	out := &apiKeyListOut{}
	out.Body.Data = make([]APIKeyOut, len(pg.Data))
	for i, k := range pg.Data {
		out.Body.Data[i] = apiKeyOut(k)
	}
	out.Body.NextCursor = s.cursor(q, pg.NextCursor)
	return out, nil
}

type revokeAPIKeyInput struct {
	ID string `path:"id" maxLength:"128" doc:"key id (key_…)"`
}

func (s *Server) revokeAPIKey(ctx context.Context, in *revokeAPIKeyInput) (*struct{}, error) {
	if len(s.cfg.AdminKeyHashes) == 0 {
		// Check and revoke as one step: two admins revoking each other at
		// once would otherwise both pass the check and leave no admin.
		if s.atRevokeLock != nil {
			s.atRevokeLock()
		}
		s.revokeMu.Lock()
		defer s.revokeMu.Unlock()
		// Across the nodes sharing the database too (PostgreSQL).
		if l := s.db(ctx).Capabilities().AdminLock; l != nil {
			unlock, err := l.LockAdminKeys(ctx)
			if err != nil {
				return nil, s.problem(err, "api keys")
			}
			defer unlock()
		}
	}
	if err := s.keepAnAdmin(ctx, in.ID); err != nil {
		return nil, err
	}
	if err := s.db(ctx).RevokeAPIKey(ctx, store.KeyKindAPIKey, in.ID, s.cfg.Now()); err != nil {
		return nil, s.problem(err, "api key "+Echo(in.ID))
	}
	s.keys.forget(in.ID) // and the portal sessions it created
	return &struct{}{}, nil
}

func (s *Server) createPortalSession(ctx context.Context, in *struct{ Body CreatePortalSessionBody }) (*struct{ Body PortalSessionOut }, error) {
	b := in.Body
	tenant, err := s.tenantFor(ctx, b.Tenant, "body.tenant")
	if err != nil {
		return nil, err
	}
	role, ttl := b.Role, b.TTLSeconds
	if role == "" {
		role = store.RoleViewer
	}
	if ttl == 0 {
		ttl = 3600
	}
	now := s.cfg.Now().Truncate(time.Microsecond)
	expires := now.Add(time.Duration(ttl) * time.Second)
	// A session never outlives the key that made it: revoking that key
	// revokes the session (RevokeAPIKey), and it expires with it.
	creator := principal(ctx)
	if k, ok := s.keys.record(creator.KeyID); ok && !k.ExpiresAt.IsZero() && k.ExpiresAt.Before(expires) {
		expires = k.ExpiresAt
	}
	token, err := NewSecretKey(PortalTokenPrefix)
	if err != nil {
		return nil, huma.Error500InternalServerError("could not generate a token")
	}
	k, err := s.db(ctx).CreateAPIKey(ctx, store.APIKey{ID: store.NewID("ps"), Kind: store.KeyKindPortal, Name: "portal session",
		Role: role, Tenant: tenant, Hash: HashAPIKey(token), CreatedAt: now, ExpiresAt: expires, CreatedBy: creator.KeyID})
	if err != nil {
		return nil, s.problem(err, "portal session")
	}
	base := strings.TrimSuffix(s.cfg.PublicURL, "/")
	if base == "" {
		base, _ = ctx.Value(baseURLKey{}).(string)
	}
	out := portalSessionOut(k)
	out.Token, out.URL = token, base+PortalPath+"#token="+token
	return &struct{ Body PortalSessionOut }{Body: out}, nil
}

func (s *Server) listPortalSessions(ctx context.Context, in *struct{ ListQuery }) (*struct{ Body PortalSessionList }, error) {
	q := query(ctx, listSessions, "/v1/portal-sessions")
	lp, err := s.page(in.ListQuery, q)
	if err != nil {
		return nil, err
	}
	pg, err := s.db(ctx).ListAPIKeys(ctx, store.KeyKindPortal, lp)
	if err != nil {
		return nil, s.problem(err, "portal sessions")
	}
	out := &struct{ Body PortalSessionList }{}
	out.Body.Data = make([]PortalSessionOut, len(pg.Data))
	for i, k := range pg.Data {
		out.Body.Data[i] = portalSessionOut(k)
	}
	out.Body.NextCursor = s.cursor(q, pg.NextCursor)
	return out, nil
}

type revokePortalSessionInput struct {
	ID string `path:"id" maxLength:"128" doc:"portal session id (ps_…)"`
}

func (s *Server) revokePortalSession(ctx context.Context, in *revokePortalSessionInput) (*struct{}, error) {
	if err := s.db(ctx).RevokeAPIKey(ctx, store.KeyKindPortal, in.ID, s.cfg.Now()); err != nil {
		return nil, s.problem(err, "portal session "+Echo(in.ID))
	}
	s.keys.forget(in.ID)
	return &struct{}{}, nil
}

// keepAnAdmin refuses (409) to revoke a stored admin key when no admin key
// is configured (HERALD_API_KEY) and the revocation would leave no admin,
// now or later: nobody could manage keys, sources or tenants afterwards,
// and no key is generated again once keys exist. It refuses the last
// usable admin key, and the last usable admin key that never expires
// while the others expire (an expiring key does not keep an admin, as the
// last owner of a GitHub organisation cannot leave it). revokeAPIKey
// holds revokeMu, and on a store shared by several nodes the store's admin
// lock (store.Capabilities.AdminLock), across the check and the
// revocation, so two admins revoking each other at the same instant, through
// one node or two, cannot both pass.
func (s *Server) keepAnAdmin(ctx context.Context, id string) error {
	if len(s.cfg.AdminKeyHashes) > 0 {
		return nil
	}
	now := s.cfg.Now()
	admins, err := UsableAdminKeys(ctx, s.db(ctx), now)
	if err != nil {
		return s.problem(err, "api keys")
	}
	i := slices.IndexFunc(admins, func(k store.APIKey) bool { return k.ID == id })
	if i < 0 {
		return nil // not a usable admin key: revoking it leaves the admins as they are
	}
	target := admins[i]
	others := slices.Delete(admins, i, i+1)
	if len(others) == 0 {
		return huma.Error409Conflict("api key " + Echo(id) + " is the last usable admin key: create another admin key first (herald keys create --role admin), or set HERALD_API_KEY, so that someone can still manage keys, sources and tenants")
	}
	if !target.ExpiresAt.IsZero() || slices.ContainsFunc(others, func(k store.APIKey) bool { return k.ExpiresAt.IsZero() }) {
		return nil
	}
	last := others[0].ExpiresAt
	for _, k := range others {
		if k.ExpiresAt.After(last) {
			last = k.ExpiresAt
		}
	}
	return huma.Error409Conflict("api key " + Echo(id) + " is the last admin key that never expires: the other admin keys expire (the last at " + last.Format(time.RFC3339) +
		"), and then nobody could manage keys, sources and tenants; create an admin key without expires_at first (herald keys create --role admin), or set HERALD_API_KEY")
}

// UsableAdminKeys lists the stored admin keys (kind key) that are neither
// revoked nor expired at now: the admins there are without HERALD_API_KEY.
func UsableAdminKeys(ctx context.Context, st store.Store, now time.Time) ([]store.APIKey, error) {
	var out []store.APIKey
	for p := (store.ListParams{Limit: 1000}); ; {
		pg, err := st.ListAPIKeys(ctx, store.KeyKindAPIKey, p)
		if err != nil {
			return nil, err
		}
		for _, k := range pg.Data {
			if k.Role == store.RoleAdmin && k.Usable(now) {
				out = append(out, k)
			}
		}
		if pg.NextCursor == "" {
			return out, nil
		}
		p.Cursor = pg.NextCursor
	}
}
