package sqlite_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// fakeHandOff reserves up to limit workers per Reserve (negative: all) and
// records what it is given.
type fakeHandOff struct {
	mu       sync.Mutex
	limit    int
	until    time.Time
	reserved []int
	taken    [][]store.Claim
	givenN   []int
}

func (f *fakeHandOff) Reserve(tenant string, n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := n
	if f.limit >= 0 {
		k = min(n, f.limit)
	}
	f.reserved = append(f.reserved, k)
	return k
}

func (f *fakeHandOff) Lease() (string, time.Time) { return "node-a", f.until }

func (f *fakeHandOff) setLimit(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limit = n
}

// state waits until every reservation made has been taken (Take runs
// after the publish is answered) and returns the reservations and takes.
func (f *fakeHandOff) state(t *testing.T) (reserved []int, taken [][]store.Claim, givenN []int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // a hang guard
		f.mu.Lock()
		want := 0
		for _, k := range f.reserved {
			if k > 0 {
				want++
			}
		}
		if len(f.taken) == want {
			defer f.mu.Unlock()
			return slices.Clone(f.reserved), slices.Clone(f.taken), slices.Clone(f.givenN)
		}
		f.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("a reservation was never taken")
		}
	}
}

func (f *fakeHandOff) Take(claims []store.Claim, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.taken = append(f.taken, claims)
	f.givenN = append(f.givenN, n)
}

// handOffStore opens a store with a secret box, tenant acme's two enabled
// endpoints and one paused endpoint subscribed to everything.
func handOffStore(t *testing.T) (*sqlite.Store, []string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.WithSecretBox(testBox(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var ids []string
	for i, st := range []store.EndpointState{store.EndpointEnabled, store.EndpointEnabled, store.EndpointPaused} {
		ep := store.Endpoint{ID: store.NewID("ep"), Tenant: "acme", URL: "https://example.com/h" + string(rune('a'+i)), State: st,
			Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: base}}, Headers: map[string]string{"X-Env": "test"}, CreatedAt: base, UpdatedAt: base}
		if _, err := s.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ep.ID)
	}
	return s, ids, path
}

func publishAcme(t *testing.T, s *sqlite.Store) store.PublishResult {
	t.Helper()
	body := []byte(`{"id":"x"}`)
	res, err := s.PublishEvent(t.Context(), store.PublishParams{
		Event:         store.Event{ID: store.NewID("evt"), Tenant: "acme", Type: "file.created", OccurredAt: base, Body: body, Fingerprint: store.Fingerprint("acme", "file.created", body)},
		Now:           base,
		NewDeliveryID: func() string { return store.NewID("dlv") },
	})
	if err != nil {
		t.Fatalf("PublishEvent: %v", err)
	}
	return res
}

// TestHandOffLeasesWhatTheEngineReserved: once this process claims (it
// holds the claim lock), a publish's due deliveries (not the held one) are
// leased to the engine as it commits, counted in the
// answer, given with the claim a claim would have read, and no claim sees
// them; what the engine did not reserve is left to the claims.
func TestHandOffLeasesWhatTheEngineReserved(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, eps, _ := handOffStore(t)
	h := &fakeHandOff{limit: -1, until: base.Add(time.Minute)}
	s.SetHandOff(h)

	// Before this process's first claim it does not hold the claim lock
	// (another process may): nothing is handed off.
	if res := publishAcme(t, s); res.HandedOff != 0 {
		t.Fatalf("handed off %d without the claim lock", res.HandedOff)
	}
	if reserved, _, _ := h.state(t); len(reserved) != 0 {
		t.Fatalf("%d reservations without the claim lock", len(reserved))
	}
	if claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-b", Limit: 10, Lease: time.Minute, Now: base}); err != nil || len(claims) != 2 {
		t.Fatalf("first claim = %d, %v; want the 2 due", len(claims), err)
	}

	res := publishAcme(t, s)
	if res.Deliveries != 3 || res.Pending != 2 || res.HandedOff != 2 {
		t.Fatalf("publish = %d deliveries, %d pending, %d handed off; want 3, 2, 2", res.Deliveries, res.Pending, res.HandedOff)
	}
	reserved, taken, givenN := h.state(t)
	if !reflect.DeepEqual(reserved, []int{2}) || len(taken) != 1 || len(taken[0]) != 2 || givenN[0] != 2 {
		t.Fatalf("reserved %v, taken %d claims of %v", reserved, len(taken), givenN)
	}
	handed := taken[0]
	for i, c := range handed {
		if c.Delivery.EndpointID != eps[i] || c.Endpoint.ID != eps[i] || c.Event.ID != res.Event.ID {
			t.Fatalf("claim %d is for endpoint %s, event %s; want %s, %s (creation order)", i, c.Delivery.EndpointID, c.Event.ID, eps[i], res.Event.ID)
		}
		if c.Delivery.LeaseOwner != "node-a" || !c.Delivery.LeaseUntil.Equal(base.Add(time.Minute)) {
			t.Fatalf("claim %d lease = %s until %s", i, c.Delivery.LeaseOwner, c.Delivery.LeaseUntil)
		}
	}
	claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-b", Limit: 10, Lease: time.Minute, Now: base.Add(time.Second)})
	if err != nil || len(claims) != 0 {
		t.Fatalf("a claim took %d handed-off deliveries (%v)", len(claims), err)
	}

	// The claim a claim reads for the same delivery is the same.
	sqlite.DropLease(s, handed[1].Delivery.ID)
	claims, err = s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: base})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim after the lease was dropped = %d, %v; want 1", len(claims), err)
	}
	got, want := handed[1], claims[0]
	got.Turn, want.Turn = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("handed-off claim differs from the claimed one:\n got %+v\nwant %+v", got, want)
	}

	// The lease is the engine's: its completion applies.
	err = s.CompleteDeliveries(ctx, []store.Completion{{DeliveryID: handed[0].Delivery.ID, EndpointID: eps[0], Owner: "node-a", LeaseUntil: handed[0].Delivery.LeaseUntil,
		Attempt: store.Attempt{DeliveryID: handed[0].Delivery.ID, Number: 1, StatusCode: 200, StartedAt: base, Duration: time.Millisecond}, State: store.DeliverySucceeded}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.GetDelivery(ctx, handed[0].Delivery.ID)
	if err != nil || d.State != store.DeliverySucceeded {
		t.Fatalf("delivery after its completion: %s, %v", d.State, err)
	}

	// Reserved one of two: the other is the claims'.
	h.setLimit(1)
	res = publishAcme(t, s)
	if res.HandedOff != 1 {
		t.Fatalf("handed off %d with one worker reserved", res.HandedOff)
	}
	claims, err = s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: base.Add(time.Second)})
	if err != nil || len(claims) != 1 || claims[0].Delivery.EndpointID != eps[1] || claims[0].Event.ID != res.Event.ID {
		t.Fatalf("claim after a partial hand-off = %d claims (%v)", len(claims), err)
	}

	// Nothing reserved: no Take, every due delivery is the claims'.
	h.setLimit(0)
	res = publishAcme(t, s)
	if _, taken, _ := h.state(t); res.HandedOff != 0 || len(taken) != 2 {
		t.Fatalf("handed off %d (%d takes in all) with nothing reserved", res.HandedOff, len(taken))
	}
	claims, err = s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: base.Add(time.Second)})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim after no hand-off = %d claims (%v); want 2", len(claims), err)
	}
}

// A process whose claim lock file was deleted (another process may claim
// now) hands nothing off, as it claims nothing.
func TestHandOffNeedsTheClaimLock(t *testing.T) {
	t.Parallel()
	s, _, path := handOffStore(t)
	h := &fakeHandOff{limit: -1, until: base.Add(time.Minute)}
	s.SetHandOff(h)
	if _, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: base}); err != nil {
		t.Fatal(err)
	}
	if res := publishAcme(t, s); res.HandedOff != 2 {
		t.Fatalf("handed off %d with the claim lock, want 2", res.HandedOff)
	}
	if err := os.Remove(path + "-claims.lock"); err != nil {
		t.Fatal(err)
	}
	res := publishAcme(t, s)
	if reserved, _, _ := h.state(t); res.HandedOff != 0 || len(reserved) != 1 {
		t.Fatalf("handed off %d (%d reservations) after the claim lock was lost", res.HandedOff, len(reserved))
	}
}

// TestHandOffClaimAsReadBack: a handed-off claim is built from the
// group's memory (the delivery rows and the publish's event), not read
// back; it is the claim a claim reads for the same delivery (the lease's
// end apart: each claimer's own), for every kind of publish: forwarded
// headers (bytes that are not UTF-8, which net/http accepts in a
// provider's header value and the stored JSON turns into U+FFFD; HTML and
// line-separator characters), older versions' bodies (stored compacted),
// an empty body, an idempotency key, a traceparent, a sequence number
// (which rewrites the bodies and adds a header), a producer-chosen id, a
// fan-out's first chunk, times off UTC and off the microsecond.
func TestHandOffClaimAsReadBack(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"x","data":{"n":1}}`)
	plain := func() store.PublishParams {
		return store.PublishParams{Event: store.Event{ID: store.NewID("evt"), Tenant: "acme", Type: "file.created", OccurredAt: base, Body: body,
			Fingerprint: store.Fingerprint("acme", "file.created", body)},
			Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*store.PublishParams)
	}{
		{"plain", nil},
		{"everything", func(p *store.PublishParams) {
			p.Event.ID, p.IDFromClient, p.SequenceKey = "acme~order-7", true, "acme/orders"
			p.Event.IdempotencyKey = "idem-7"
			p.Event.Headers = map[string]string{"X-Github-Event": "push", "Content-Type": "application/json"}
			p.Event.VersionBodies = map[int][]byte{1: []byte(`{"id":"x","v":1}`)}
			p.Event.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		}},
		{"header not UTF-8", func(p *store.PublishParams) {
			p.Event.Headers = map[string]string{"X-Name": "caf\xe9", "Content-Type": "application/json"}
		}},
		{"header HTML and U+2028", func(p *store.PublishParams) { p.Event.Headers = map[string]string{"X-A": "<a>&\u2028"} }},
		{"key and traceparent not UTF-8", func(p *store.PublishParams) { p.Event.IdempotencyKey, p.Event.TraceParent = "k\xe9", "t\xe9" }},
		{"empty body", func(p *store.PublishParams) { p.Event.Body = []byte{} }},
		{"version body with whitespace", func(p *store.PublishParams) { p.Event.VersionBodies = map[int][]byte{1: []byte("{\"id\": \"x\"}")} }},
		{"fan-out chunk", func(p *store.PublishParams) { p.FanOutChunk = 1 }},
		{"times off UTC and the microsecond", func(p *store.PublishParams) {
			p.Event.OccurredAt = base.Add(123456789 * time.Nanosecond).In(time.FixedZone("x", 3600))
			p.Now = base.Add(987654321 * time.Nanosecond).In(time.FixedZone("y", -3600))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s, _, _ := handOffStore(t)
			h := &fakeHandOff{limit: -1, until: base.Add(time.Minute)}
			s.SetHandOff(h)
			if _, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: base}); err != nil {
				t.Fatal(err) // takes the claim lock: hand-offs from here on
			}
			p := plain()
			if tc.mutate != nil {
				tc.mutate(&p)
			}
			res, err := s.PublishEvent(ctx, p)
			if err != nil || res.HandedOff == 0 {
				t.Fatalf("publish: handed off %d, %v", res.HandedOff, err)
			}
			_, taken, _ := h.state(t)
			handed := taken[len(taken)-1]
			for _, c := range handed {
				sqlite.DropLease(s, c.Delivery.ID)
			}
			claims, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "node-a", Limit: 10, Lease: time.Minute, Now: p.Now})
			if err != nil || len(claims) != len(handed) {
				t.Fatalf("claim after the leases were dropped = %d, %v; want %d", len(claims), err, len(handed))
			}
			for j := range handed {
				got, want := handed[j], claims[j]
				if !got.Delivery.LeaseUntil.Equal(h.until) {
					t.Fatalf("handed-off claim %d leased until %s, want the engine's %s", j, got.Delivery.LeaseUntil, h.until)
				}
				got.Turn, want.Turn = 0, 0
				got.Delivery.LeaseUntil, want.Delivery.LeaseUntil = time.Time{}, time.Time{}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("handed-off claim %d differs from the claimed one:\n got %+v\nwant %+v\n headers %q / %q, body nil %v / %v, versions %v / %v", j, got, want,
						got.Event.Headers, want.Event.Headers, got.Event.Body == nil, want.Event.Body == nil, got.Event.VersionBodies, want.Event.VersionBodies)
				}
			}
			if tc.name == "everything" && (claims[0].Event.Sequence != 1 || claims[0].Event.Headers[store.SequenceHeader] != "1") {
				t.Fatalf("the numbered event: sequence %d, headers %v", claims[0].Event.Sequence, claims[0].Event.Headers)
			}
		})
	}
}
