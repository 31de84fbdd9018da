package storetest

import (
	"context"
	"flag"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// coverage counts, across every subtest of one Exercise run, the calls the
// suite made to each store.Store method and to each method of the
// capabilities the driver declares (store.Capabilities: counted as
// "Field.Method", e.g. "Membership.Heartbeat"), so the run can fail when a
// method is never exercised. A method added to store.Store does not compile
// here until recorder forwards it, and then fails the run until a subtest
// calls it; a capability added to store.Capabilities fails the run until
// recorder.Capabilities counts its calls.
type coverage struct {
	mu        sync.Mutex
	calls     map[string]int
	declared  map[string]bool   // Capabilities fields the driver set
	unwrapped map[string]string // Capabilities field → dynamic type recorder did not wrap
}

func newCoverage() *coverage {
	return &coverage{calls: map[string]int{}, declared: map[string]bool{}, unwrapped: map[string]string{}}
}

// wrap returns s with every call counted in c.
func (c *coverage) wrap(s store.Store) store.Store { return &recorder{s: s, cov: c} }

// missing lists, sorted, the methods of the store.Store interface and of
// each capability interface the driver declared (read by reflection) that
// no subtest called.
func (c *coverage) missing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := reflect.TypeFor[store.Store]()
	var out []string
	for i := range it.NumMethod() {
		if name := it.Method(i).Name; c.calls[name] == 0 {
			out = append(out, name)
		}
	}
	ct := reflect.TypeFor[store.Capabilities]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if f.Type.Kind() != reflect.Interface || !c.declared[f.Name] {
			continue
		}
		for j := range f.Type.NumMethod() {
			if name := f.Name + "." + f.Type.Method(j).Name; c.calls[name] == 0 {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// declare records which capabilities caps declares, and those whose calls
// recorder does not count (a capability added to store.Capabilities
// without a counting wrapper below).
func (c *coverage) declare(caps store.Capabilities) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := reflect.ValueOf(caps)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Interface || v.Field(i).IsNil() {
			continue
		}
		c.declared[f.Name] = true
		if _, ok := v.Field(i).Interface().(counted); !ok {
			c.unwrapped[f.Name] = v.Field(i).Elem().Type().String()
		}
	}
}

// check fails t, after the whole suite ran, with the methods no subtest
// called. A run narrowed by -run to some subtests, or by -skip, exercises
// part of the suite by design, and is not checked.
func (c *coverage) check(t *testing.T) {
	t.Helper()
	if partialRun() {
		t.Log("storetest: partial run (-run with subtests or -skip); method coverage not checked")
		return
	}
	c.mu.Lock()
	for field, typ := range c.unwrapped {
		t.Errorf("storetest: the calls to Capabilities.%s (%s) are not counted: give recorder.Capabilities a counting wrapper for it", field, typ)
	}
	c.mu.Unlock()
	if m := c.missing(); len(m) > 0 {
		t.Errorf("storetest: the conformance suite never called %d store method(s): %s; add a subtest for each",
			len(m), strings.Join(m, ", "))
	}
}

// partialRun reports whether the test binary runs only part of the suite.
func partialRun() bool {
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
		return true
	}
	f := flag.Lookup("test.run")
	return f != nil && strings.Contains(f.Value.String(), "/")
}

func (c *coverage) called(name string) {
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
}

// recorder is a store.Store that counts each call in cov and forwards it to s.
type recorder struct {
	s   store.Store
	cov *coverage
}

var _ store.Store = (*recorder)(nil)

func (r *recorder) called(name string) { r.cov.called(name) }

func (r *recorder) Ping(ctx context.Context) error {
	r.called("Ping")
	return r.s.Ping(ctx)
}

func (r *recorder) Close() error {
	r.called("Close")
	return r.s.Close()
}

// Capabilities returns the driver's capabilities, each wrapped so that the
// calls to its methods are counted too.
func (r *recorder) Capabilities() store.Capabilities {
	r.called("Capabilities")
	c := r.s.Capabilities()
	if c.Wakeups != nil {
		c.Wakeups = notifierRecorder{c.Wakeups, r.cov}
	}
	if c.Membership != nil {
		c.Membership = membershipRecorder{c.Membership, r.cov}
	}
	if c.Nodes != nil {
		c.Nodes = nodesRecorder{c.Nodes, r.cov}
	}
	if c.Exclusive != nil {
		c.Exclusive = exclusiveRecorder{c.Exclusive, r.cov}
	}
	if c.HeaderSealer != nil {
		c.HeaderSealer = sealerRecorder{c.HeaderSealer, r.cov}
	}
	if c.Sealed != nil {
		c.Sealed = sealedRecorder{c.Sealed, r.cov}
	}
	if c.HandOff != nil {
		c.HandOff = handOffRecorder{c.HandOff, r.cov}
	}
	if c.AdminLock != nil {
		c.AdminLock = adminLockRecorder{c.AdminLock, r.cov}
	}
	if c.Renewer != nil {
		c.Renewer = renewerRecorder{c.Renewer, r.cov}
	}
	r.cov.declare(c)
	return c
}

// counted is implemented by the wrappers that count a capability's calls.
type counted interface{ countsCalls() }

type notifierRecorder struct {
	n   store.Notifier
	cov *coverage
}

func (notifierRecorder) countsCalls() {}

func (r notifierRecorder) Listen(ctx context.Context, onNotify func()) error {
	r.cov.called("Wakeups.Listen")
	return r.n.Listen(ctx, onNotify)
}

type membershipRecorder struct {
	m   store.Membership
	cov *coverage
}

func (membershipRecorder) countsCalls() {}

func (r membershipRecorder) Heartbeat(ctx context.Context, self store.Node) ([]store.Node, error) {
	r.cov.called("Membership.Heartbeat")
	return r.m.Heartbeat(ctx, self)
}

func (r membershipRecorder) Leave(ctx context.Context, id string) error {
	r.cov.called("Membership.Leave")
	return r.m.Leave(ctx, id)
}

type nodesRecorder struct {
	n   store.NodeLister
	cov *coverage
}

func (nodesRecorder) countsCalls() {}

func (r nodesRecorder) LiveNodes(ctx context.Context) ([]string, error) {
	r.cov.called("Nodes.LiveNodes")
	return r.n.LiveNodes(ctx)
}

type exclusiveRecorder struct {
	e   store.ExclusiveClaimer
	cov *coverage
}

func (exclusiveRecorder) countsCalls() {}

func (r exclusiveRecorder) ClaimExclusively(ctx context.Context) error {
	r.cov.called("Exclusive.ClaimExclusively")
	return r.e.ClaimExclusively(ctx)
}

type renewerRecorder struct {
	r   store.LeaseRenewer
	cov *coverage
}

func (renewerRecorder) countsCalls() {}

func (r renewerRecorder) RenewLease(ctx context.Context, p store.RenewLeaseParams) (bool, error) {
	r.cov.called("Renewer.RenewLease")
	return r.r.RenewLease(ctx, p)
}

type handOffRecorder struct {
	h   store.HandOffer
	cov *coverage
}

func (handOffRecorder) countsCalls() {}

func (r handOffRecorder) SetHandOff(h store.HandOff) {
	r.cov.called("HandOff.SetHandOff")
	r.h.SetHandOff(h)
}

type adminLockRecorder struct {
	l   store.AdminKeyLocker
	cov *coverage
}

func (adminLockRecorder) countsCalls() {}

func (r adminLockRecorder) LockAdminKeys(ctx context.Context) (func(), error) {
	r.cov.called("AdminLock.LockAdminKeys")
	return r.l.LockAdminKeys(ctx)
}

type sealerRecorder struct {
	s   store.ClearHeaderSealer
	cov *coverage
}

func (sealerRecorder) countsCalls() {}

func (r sealerRecorder) SealClearHeaders(ctx context.Context) (int, error) {
	r.cov.called("HeaderSealer.SealClearHeaders")
	return r.s.SealClearHeaders(ctx)
}

func (r *recorder) EnsureMeta(ctx context.Context, key, value string) (string, error) {
	r.called("EnsureMeta")
	return r.s.EnsureMeta(ctx, key, value)
}

func (r *recorder) CreateAPIKey(ctx context.Context, k store.APIKey) (store.APIKey, error) {
	r.called("CreateAPIKey")
	return r.s.CreateAPIKey(ctx, k)
}

func (r *recorder) LookupAPIKey(ctx context.Context, hash []byte) (store.APIKey, error) {
	r.called("LookupAPIKey")
	return r.s.LookupAPIKey(ctx, hash)
}

func (r *recorder) CountAPIKeys(ctx context.Context) (int, error) {
	r.called("CountAPIKeys")
	return r.s.CountAPIKeys(ctx)
}

func (r *recorder) ListAPIKeys(ctx context.Context, kind string, p store.ListParams) (store.Page[store.APIKey], error) {
	r.called("ListAPIKeys")
	return r.s.ListAPIKeys(ctx, kind, p)
}

func (r *recorder) RevokeAPIKey(ctx context.Context, kind, id string, now time.Time) error {
	r.called("RevokeAPIKey")
	return r.s.RevokeAPIKey(ctx, kind, id, now)
}

func (r *recorder) TouchAPIKeys(ctx context.Context, used map[string]time.Time) error {
	r.called("TouchAPIKeys")
	return r.s.TouchAPIKeys(ctx, used)
}

func (r *recorder) CreateEndpoint(ctx context.Context, p store.CreateEndpointParams) (store.Endpoint, error) {
	r.called("CreateEndpoint")
	return r.s.CreateEndpoint(ctx, p)
}

func (r *recorder) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	r.called("GetEndpoint")
	return r.s.GetEndpoint(ctx, id)
}

func (r *recorder) ListEndpoints(ctx context.Context, p store.ListEndpointsParams) (store.Page[store.Endpoint], error) {
	r.called("ListEndpoints")
	return r.s.ListEndpoints(ctx, p)
}

func (r *recorder) UpdateEndpoint(ctx context.Context, p store.UpdateEndpointParams) (store.Endpoint, error) {
	r.called("UpdateEndpoint")
	return r.s.UpdateEndpoint(ctx, p)
}

func (r *recorder) DeleteEndpoint(ctx context.Context, p store.DeleteEndpointParams) error {
	r.called("DeleteEndpoint")
	return r.s.DeleteEndpoint(ctx, p)
}

func (r *recorder) PublishEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	r.called("PublishEvent")
	return r.s.PublishEvent(ctx, p)
}

func (r *recorder) ContinueFanOut(ctx context.Context, p store.FanOutParams) (store.FanOutResult, error) {
	r.called("ContinueFanOut")
	return r.s.ContinueFanOut(ctx, p)
}

func (r *recorder) PublishedEvent(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	r.called("PublishedEvent")
	return r.s.PublishedEvent(ctx, p)
}

func (r *recorder) GetEvent(ctx context.Context, id string) (store.Event, error) {
	r.called("GetEvent")
	return r.s.GetEvent(ctx, id)
}

func (r *recorder) ListEvents(ctx context.Context, p store.ListEventsParams) (store.Page[store.Event], error) {
	r.called("ListEvents")
	return r.s.ListEvents(ctx, p)
}

func (r *recorder) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	r.called("GetDelivery")
	return r.s.GetDelivery(ctx, id)
}

func (r *recorder) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) (store.Page[store.Delivery], error) {
	r.called("ListDeliveries")
	return r.s.ListDeliveries(ctx, p)
}

func (r *recorder) ListAttempts(ctx context.Context, deliveryID string) ([]store.Attempt, error) {
	r.called("ListAttempts")
	return r.s.ListAttempts(ctx, deliveryID)
}

func (r *recorder) ClaimDeliveries(ctx context.Context, p store.ClaimParams) ([]store.Claim, error) {
	r.called("ClaimDeliveries")
	return r.s.ClaimDeliveries(ctx, p)
}

func (r *recorder) CompleteDeliveries(ctx context.Context, cs []store.Completion) error {
	r.called("CompleteDeliveries")
	return r.s.CompleteDeliveries(ctx, cs)
}

func (r *recorder) RescueExpiredLeases(ctx context.Context, now time.Time) (int, error) {
	r.called("RescueExpiredLeases")
	return r.s.RescueExpiredLeases(ctx, now)
}

func (r *recorder) NextDueAt(ctx context.Context, skipTenants []string) (time.Time, error) {
	r.called("NextDueAt")
	return r.s.NextDueAt(ctx, skipTenants)
}

func (r *recorder) SetEndpointState(ctx context.Context, p store.SetEndpointStateParams) (store.Endpoint, int, error) {
	r.called("SetEndpointState")
	return r.s.SetEndpointState(ctx, p)
}

func (r *recorder) ReplayDeliveries(ctx context.Context, p store.ReplayParams) (int, error) {
	r.called("ReplayDeliveries")
	return r.s.ReplayDeliveries(ctx, p)
}

func (r *recorder) MoveEndpointDeliveries(ctx context.Context, p store.MoveParams) (int, error) {
	r.called("MoveEndpointDeliveries")
	return r.s.MoveEndpointDeliveries(ctx, p)
}

func (r *recorder) PostponeEndpointDeliveries(ctx context.Context, endpointID string, until time.Time) (int, error) {
	r.called("PostponeEndpointDeliveries")
	return r.s.PostponeEndpointDeliveries(ctx, endpointID, until)
}

func (r *recorder) PendingNotices(ctx context.Context, limit int) ([]store.Notice, error) {
	r.called("PendingNotices")
	return r.s.PendingNotices(ctx, limit)
}

func (r *recorder) ClearNotices(ctx context.Context, ids []int64) error {
	r.called("ClearNotices")
	return r.s.ClearNotices(ctx, ids)
}

func (r *recorder) DeadLetterCounts(ctx context.Context, tenant string, since time.Time) ([]store.DeadLetterCount, error) {
	r.called("DeadLetterCounts")
	return r.s.DeadLetterCounts(ctx, tenant, since)
}

func (r *recorder) ClaimSpikeAlert(ctx context.Context, endpointID string, windowStart, now time.Time) (bool, error) {
	r.called("ClaimSpikeAlert")
	return r.s.ClaimSpikeAlert(ctx, endpointID, windowStart, now)
}

func (r *recorder) RotateSecret(ctx context.Context, p store.RotateSecretParams) (store.Endpoint, error) {
	r.called("RotateSecret")
	return r.s.RotateSecret(ctx, p)
}

func (r *recorder) RevokeSecret(ctx context.Context, p store.RevokeSecretParams) (store.Endpoint, error) {
	r.called("RevokeSecret")
	return r.s.RevokeSecret(ctx, p)
}

func (r *recorder) CreateSource(ctx context.Context, p store.CreateSourceParams) (store.Source, error) {
	r.called("CreateSource")
	return r.s.CreateSource(ctx, p)
}

func (r *recorder) GetSource(ctx context.Context, id string) (store.Source, error) {
	r.called("GetSource")
	return r.s.GetSource(ctx, id)
}

func (r *recorder) ListSources(ctx context.Context, p store.ListParams) (store.Page[store.Source], error) {
	r.called("ListSources")
	return r.s.ListSources(ctx, p)
}

func (r *recorder) UpdateSource(ctx context.Context, p store.UpdateSourceParams) (store.Source, error) {
	r.called("UpdateSource")
	return r.s.UpdateSource(ctx, p)
}

func (r *recorder) DeleteSource(ctx context.Context, id string) error {
	r.called("DeleteSource")
	return r.s.DeleteSource(ctx, id)
}

func (r *recorder) CreateEventType(ctx context.Context, t store.EventType) (store.EventType, error) {
	r.called("CreateEventType")
	return r.s.CreateEventType(ctx, t)
}

func (r *recorder) GetEventType(ctx context.Context, name string) (store.EventType, error) {
	r.called("GetEventType")
	return r.s.GetEventType(ctx, name)
}

func (r *recorder) ListEventTypes(ctx context.Context, p store.ListParams) (store.Page[store.EventType], error) {
	r.called("ListEventTypes")
	return r.s.ListEventTypes(ctx, p)
}

func (r *recorder) EventTypeCaseVariant(ctx context.Context, name string) (string, error) {
	r.called("EventTypeCaseVariant")
	return r.s.EventTypeCaseVariant(ctx, name)
}

func (r *recorder) UpdateEventType(ctx context.Context, t store.EventType) (store.EventType, error) {
	r.called("UpdateEventType")
	return r.s.UpdateEventType(ctx, t)
}

func (r *recorder) EndpointStats(ctx context.Context, p store.EndpointStatsParams) (store.EndpointStats, error) {
	r.called("EndpointStats")
	return r.s.EndpointStats(ctx, p)
}

func (r *recorder) Stats(ctx context.Context) (store.Stats, error) {
	r.called("Stats")
	return r.s.Stats(ctx)
}

func (r *recorder) Purge(ctx context.Context, p store.PurgeParams) (int, error) {
	r.called("Purge")
	return r.s.Purge(ctx, p)
}

type sealedRecorder struct {
	s   store.SealedStore
	cov *coverage
}

func (sealedRecorder) countsCalls() {}

func (r sealedRecorder) SealedValues(ctx context.Context, c store.SealedColumn, after string, limit int) ([]store.SealedValue, error) {
	r.cov.called("Sealed.SealedValues")
	return r.s.SealedValues(ctx, c, after, limit)
}

func (r sealedRecorder) SealedValue(ctx context.Context, c store.SealedColumn, key string) (string, bool, error) {
	r.cov.called("Sealed.SealedValue")
	return r.s.SealedValue(ctx, c, key)
}

func (r sealedRecorder) ReplaceSealed(ctx context.Context, c store.SealedColumn, key, old, new string) (bool, error) {
	r.cov.called("Sealed.ReplaceSealed")
	return r.s.ReplaceSealed(ctx, c, key, old, new)
}
