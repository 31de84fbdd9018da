package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// db is the store as the request's principal may see it: the whole store
// for an admin, a tenantStore for a tenant principal. Handlers reach the
// store only through it (TestHandlersUseScopedStore checks the source).
func (s *Server) db(ctx context.Context) store.Store {
	p := principal(ctx)
	if p.Admin() {
		return s.cfg.Store
	}
	return tenantStore{base: s.cfg.Store, tenant: p.Tenant}
}

// tenantStore restricts a store to one tenant. A record of another tenant
// is ErrNotFound, exactly as an unknown id (no existence leak); lists are
// filtered to the tenant; a write naming another tenant is ErrNotFound too
// (the API has already answered 403 for a request naming one, this is the
// second wall). Sources and API keys do not exist for a tenant.
//
// It implements every method of store.Store itself (no embedding): a
// method added to the store interface does not compile until it is given
// its tenant rule here. The engine's methods are refused (errNotForTenant).
type tenantStore struct {
	base   store.Store
	tenant string
}

var _ store.Store = tenantStore{}

// errNotForTenant answers the store methods of the engine and housekeeping,
// which no API request of a tenant principal has a reason to call.
var errNotForTenant = errors.New("not available to a tenant principal")

func (t tenantStore) notFound(what, id string) error {
	return fmt.Errorf("%s %s: %w", what, id, store.ErrNotFound)
}

// GetEndpoint: the tenant's own endpoints only, also one whose stored
// values do not open (its *store.UnreadableError names the tenant): another
// tenant's answers ErrNotFound as an unknown id, never that error.
func (t tenantStore) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	e, err := t.base.GetEndpoint(ctx, id)
	var u *store.UnreadableError
	if err == nil && e.Tenant != t.tenant || errors.As(err, &u) && u.Tenant != t.tenant {
		return store.Endpoint{}, t.notFound("endpoint", id)
	}
	return e, err
}

// own checks that the endpoint is the tenant's, whether or not its stored
// values open (the store method called next decides what it can do with
// such an endpoint: a delete needs none of them).
func (t tenantStore) own(ctx context.Context, endpointID string) error {
	_, err := t.GetEndpoint(ctx, endpointID)
	if u := (*store.UnreadableError)(nil); errors.As(err, &u) {
		return nil // the tenant's: GetEndpoint checked it
	}
	return err
}

// EndpointStats: the tenant's own endpoints only.
func (t tenantStore) EndpointStats(ctx context.Context, p store.EndpointStatsParams) (store.EndpointStats, error) {
	if err := t.own(ctx, p.EndpointID); err != nil {
		return store.EndpointStats{}, err
	}
	return t.base.EndpointStats(ctx, p)
}

func (t tenantStore) CreateEndpoint(ctx context.Context, p store.CreateEndpointParams) (store.Endpoint, error) {
	if p.Endpoint.Tenant != t.tenant {
		return store.Endpoint{}, t.notFound("tenant", p.Endpoint.Tenant)
	}
	return t.base.CreateEndpoint(ctx, p)
}

func (t tenantStore) ListEndpoints(ctx context.Context, p store.ListEndpointsParams) (store.Page[store.Endpoint], error) {
	// OnlySources stays: with the tenant forced, it lists nothing (a
	// tenant owns no source's forwarding endpoint).
	p.Tenant, p.IncludeSources = t.tenant, false
	return t.base.ListEndpoints(ctx, p)
}

func (t tenantStore) UpdateEndpoint(ctx context.Context, p store.UpdateEndpointParams) (store.Endpoint, error) {
	if err := t.own(ctx, p.ID); err != nil {
		return store.Endpoint{}, err
	}
	return t.base.UpdateEndpoint(ctx, p)
}

func (t tenantStore) DeleteEndpoint(ctx context.Context, p store.DeleteEndpointParams) error {
	if err := t.own(ctx, p.ID); err != nil {
		return err
	}
	return t.base.DeleteEndpoint(ctx, p)
}

func (t tenantStore) RevokeSecret(ctx context.Context, p store.RevokeSecretParams) (store.Endpoint, error) {
	if err := t.own(ctx, p.ID); err != nil {
		return store.Endpoint{}, err
	}
	return t.base.RevokeSecret(ctx, p)
}

func (t tenantStore) RotateSecret(ctx context.Context, p store.RotateSecretParams) (store.Endpoint, error) {
	if err := t.own(ctx, p.ID); err != nil {
		return store.Endpoint{}, err
	}
	return t.base.RotateSecret(ctx, p)
}

func (t tenantStore) SetEndpointState(ctx context.Context, p store.SetEndpointStateParams) (store.Endpoint, int, error) {
	if err := t.own(ctx, p.ID); err != nil {
		return store.Endpoint{}, 0, err
	}
	return t.base.SetEndpointState(ctx, p)
}

func (t tenantStore) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	if p.Event.Tenant != t.tenant {
		return store.PublishResult{}, t.notFound("tenant", p.Event.Tenant)
	}
	return t.base.PublishEvent(ctx, p)
}

func (t tenantStore) PublishedEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	if p.Event.Tenant != t.tenant {
		return store.PublishResult{}, t.notFound("tenant", p.Event.Tenant)
	}
	return t.base.PublishedEvent(ctx, p)
}

func (t tenantStore) GetEvent(ctx context.Context, id string) (store.Event, error) {
	e, err := t.base.GetEvent(ctx, id)
	if err == nil && e.Tenant != t.tenant {
		return store.Event{}, t.notFound("event", id)
	}
	return e, err
}

func (t tenantStore) ListEvents(ctx context.Context, p store.ListEventsParams) (store.Page[store.Event], error) {
	p.Tenant = t.tenant
	return t.base.ListEvents(ctx, p)
}

func (t tenantStore) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	d, err := t.base.GetDelivery(ctx, id)
	if err == nil && d.Tenant != t.tenant {
		return store.Delivery{}, t.notFound("delivery", id)
	}
	return d, err
}

func (t tenantStore) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) (store.Page[store.Delivery], error) {
	p.Tenant = t.tenant
	return t.base.ListDeliveries(ctx, p)
}

func (t tenantStore) ListAttempts(ctx context.Context, deliveryID string) ([]store.Attempt, error) {
	if _, err := t.GetDelivery(ctx, deliveryID); err != nil {
		return nil, err
	}
	return t.base.ListAttempts(ctx, deliveryID)
}

func (t tenantStore) ReplayDeliveries(ctx context.Context, p store.ReplayParams) (int, error) {
	if p.DeliveryID != "" {
		if _, err := t.GetDelivery(ctx, p.DeliveryID); err != nil {
			return 0, err
		}
	}
	if p.EndpointID != "" {
		if err := t.own(ctx, p.EndpointID); err != nil {
			return 0, err
		}
	}
	if p.DeliveryID == "" && p.EndpointID == "" {
		return 0, t.notFound("deliveries", "")
	}
	return t.base.ReplayDeliveries(ctx, p)
}

func (t tenantStore) DeadLetterCounts(ctx context.Context, _ string, since time.Time) ([]store.DeadLetterCount, error) {
	return t.base.DeadLetterCounts(ctx, t.tenant, since)
}

func (t tenantStore) CreateSource(context.Context, store.CreateSourceParams) (store.Source, error) {
	return store.Source{}, t.notFound("source", "")
}

func (t tenantStore) GetSource(_ context.Context, id string) (store.Source, error) {
	return store.Source{}, t.notFound("source", id)
}

func (t tenantStore) ListSources(context.Context, store.ListParams) (store.Page[store.Source], error) {
	return store.Page[store.Source]{Data: []store.Source{}}, nil
}

func (t tenantStore) UpdateSource(_ context.Context, p store.UpdateSourceParams) (store.Source, error) {
	return store.Source{}, t.notFound("source", p.ID)
}

func (t tenantStore) DeleteSource(_ context.Context, id string) error {
	return t.notFound("source", id)
}

func (t tenantStore) CreateAPIKey(_ context.Context, k store.APIKey) (store.APIKey, error) {
	return store.APIKey{}, t.notFound("api key", k.ID)
}

func (t tenantStore) ListAPIKeys(context.Context, string, store.ListParams) (store.Page[store.APIKey], error) {
	return store.Page[store.APIKey]{Data: []store.APIKey{}}, nil
}

func (t tenantStore) RevokeAPIKey(_ context.Context, _, id string, _ time.Time) error {
	return t.notFound("api key", id)
}

func (t tenantStore) Ping(ctx context.Context) error { return t.base.Ping(ctx) }
func (t tenantStore) Close() error                   { return errNotForTenant }

// Capabilities declares none: the optional features (wake-ups, membership,
// node lists) drive the engine, never a tenant's request.
func (t tenantStore) Capabilities() store.Capabilities { return store.Capabilities{} }

func (t tenantStore) EnsureMeta(context.Context, string, string) (string, error) {
	return "", errNotForTenant
}

func (t tenantStore) LookupAPIKey(context.Context, []byte) (store.APIKey, error) {
	return store.APIKey{}, errNotForTenant
}

func (t tenantStore) CountAPIKeys(context.Context) (int, error) { return 0, errNotForTenant }

func (t tenantStore) TouchAPIKeys(context.Context, map[string]time.Time) error {
	return errNotForTenant
}

func (t tenantStore) ClaimDeliveries(context.Context, store.ClaimParams) ([]store.Claim, error) {
	return nil, errNotForTenant
}

func (t tenantStore) ContinueFanOut(context.Context, store.FanOutParams) (store.FanOutResult, error) {
	return store.FanOutResult{}, errNotForTenant
}

func (t tenantStore) CompleteDeliveries(context.Context, []store.Completion) error {
	return errNotForTenant
}

func (t tenantStore) RescueExpiredLeases(context.Context, time.Time) (int, error) {
	return 0, errNotForTenant
}

func (t tenantStore) NextDueAt(context.Context, []string) (time.Time, error) {
	return time.Time{}, errNotForTenant
}

func (t tenantStore) PostponeEndpointDeliveries(context.Context, string, time.Time) (int, error) {
	return 0, errNotForTenant
}

func (t tenantStore) MoveEndpointDeliveries(context.Context, store.MoveParams) (int, error) {
	return 0, errNotForTenant
}

func (t tenantStore) PendingNotices(context.Context, int) ([]store.Notice, error) {
	return nil, errNotForTenant
}

func (t tenantStore) ClearNotices(context.Context, []int64) error { return errNotForTenant }

func (t tenantStore) ClaimSpikeAlert(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, errNotForTenant
}

func (t tenantStore) Stats(context.Context) (store.Stats, error) {
	return store.Stats{}, errNotForTenant
}

func (t tenantStore) Purge(context.Context, store.PurgeParams) (int, error) {
	return 0, errNotForTenant
}

// The event catalog is shared by every tenant: every key reads it (the
// catalog is what a receiver may be sent); only admins change it (Policy),
// and this wall refuses a tenant's write as well.

func (t tenantStore) CreateEventType(ctx context.Context, et store.EventType) (store.EventType, error) {
	return store.EventType{}, errNotForTenant
}

func (t tenantStore) GetEventType(ctx context.Context, name string) (store.EventType, error) {
	return t.base.GetEventType(ctx, name)
}

func (t tenantStore) ListEventTypes(ctx context.Context, p store.ListParams) (store.Page[store.EventType], error) {
	return t.base.ListEventTypes(ctx, p)
}

func (t tenantStore) EventTypeCaseVariant(ctx context.Context, name string) (string, error) {
	return t.base.EventTypeCaseVariant(ctx, name)
}

func (t tenantStore) UpdateEventType(ctx context.Context, et store.EventType) (store.EventType, error) {
	return store.EventType{}, errNotForTenant
}

// publicCatalog reads the event catalog for the unauthenticated documents
// that publish it (/contract, /openapi.json): the catalog is not a
// tenant's, and every key may read it anyway (list-event-types).
func (s *Server) publicCatalog(ctx context.Context) ([]store.EventType, error) {
	return store.AllEventTypes(ctx, s.cfg.Store)
}
