package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
)

// reviewHandOff is a store.HandOff that reserves every worker asked for
// (up to workers, when set) and records each Take.
type reviewHandOff struct {
	owner string
	until time.Time

	mu       sync.Mutex
	workers  int // idle tokens left; <0: unlimited
	reserved int // reservations made
	takes    int // Take calls
	taken    []store.Claim
	given    int // tokens given back by Take
	took     chan struct{}
}

func newReviewHandOff(owner string, until time.Time) *reviewHandOff {
	return &reviewHandOff{owner: owner, until: until, workers: -1, took: make(chan struct{}, 1000)}
}

func (h *reviewHandOff) Reserve(_ string, n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := n
	if h.workers >= 0 {
		k = min(n, h.workers)
		h.workers -= k
	}
	if k > 0 {
		h.reserved++
	}
	return k
}

func (h *reviewHandOff) Lease() (string, time.Time) { return h.owner, h.until }

func (h *reviewHandOff) Take(claims []store.Claim, n int) {
	h.mu.Lock()
	h.takes++
	h.taken = append(h.taken, claims...)
	h.given += n - len(claims)
	if h.workers >= 0 {
		h.workers += n - len(claims)
	}
	h.mu.Unlock()
	h.took <- struct{}{}
}

func (h *reviewHandOff) state() (reserved, takes, given int, taken []store.Claim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reserved, h.takes, h.given, append([]store.Claim(nil), h.taken...)
}

func newBox(t *testing.T) store.SecretBox {
	t.Helper()
	key := make([]byte, secretbox.KeySize)
	rand.Read(key)
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// TestHandOffGiveBackWakesOtherNodes: a node that missed a key rotation
// publishes to an endpoint whose secrets it cannot open. Its engine
// reserved a worker for the delivery, but the claim cannot be read, so the
// lease is given back on the publish's transaction (handOffBatch.finish) and
// the delivery is left to the claims. This node's own claims leave it out
// (TestClaimLeavesOutWhatItCannotOpen): only a node with the key can
// deliver it, and that node must be woken as for any publish that leaves a
// claimable pending delivery. Before the hand-off the publish sent NOTIFY;
// with it, the delivery is inserted leased (no NOTIFY queued) and then
// unleased without one: the nodes that could deliver it wait for their
// poll.
func TestHandOffGiveBackWakesOtherNodes(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	good := openStore(t, dbURL, WithSecretBox(newBox(t)))
	ep := createEndpoint(t, good, newEndpoint("acme"))
	wrong := openStore(t, dbURL, WithSecretBox(newBox(t))) // missed the rotation
	h := newReviewHandOff("node_wrong", base.Add(time.Hour))
	wrong.SetHandOff(h)

	conn := rawConn(t, dbURL) // another node's listener
	if _, err := conn.Exec(t.Context(), "LISTEN "+notifyChannel); err != nil {
		t.Fatal(err)
	}
	res := publish(t, wrong, newEvent("acme"), base)
	select {
	case <-h.took:
	case <-time.After(30 * time.Second):
		t.Fatal("no Take after the publish")
	}
	if res.Pending != 1 || res.HandedOff != 0 {
		t.Fatalf("publish: %d pending, %d handed off; want 1, 0 (the claim cannot be read)", res.Pending, res.HandedOff)
	}
	ds := listDeliveries(t, good, ep.ID)
	if len(ds) != 1 || ds[0].LeaseOwner != "" || ds[0].State != store.DeliveryPending {
		t.Fatalf("deliveries after the publish: %+v; want one pending, unleased", ds)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := conn.WaitForNotification(ctx); err != nil {
		t.Fatalf("the publish left a claimable pending delivery (its hand-off given back) but notified no other node: %v", err)
	}
}

// TestHandOffLeaseAsStored: a lease end on the engine's clock in another
// time zone with nanoseconds is reported in the claim as stored (µs, UTC),
// and releaseClaimSQL finds it.
func TestHandOffLeaseAsStored(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	ep := createEndpoint(t, s, newEndpoint("acme"))
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	h := newReviewHandOff("w1", base.Add(time.Hour+123456789).In(zone))
	s.SetHandOff(h)
	res := publish(t, s, newEvent("acme"), base)
	<-h.took
	_, _, _, taken := h.state()
	if res.HandedOff != 1 || len(taken) != 1 {
		t.Fatalf("handed off %d, taken %d", res.HandedOff, len(taken))
	}
	d := listDeliveries(t, s, ep.ID)[0]
	got := taken[0].Delivery.LeaseUntil
	if !got.Equal(d.LeaseUntil) || got.Location() != time.UTC || got.Nanosecond()%1000 != 0 {
		t.Fatalf("claim's lease %v, stored %v", got, d.LeaseUntil)
	}
}

// TestHandOffGroupFailureEndsEveryReservation: a group whose delivery
// insert fails after the engine reserved workers is rolled back and run one
// publish at a time: every reservation is followed by exactly one Take,
// every worker not given a claim is given back, and no delivery is left
// leased without its claim having been taken.
func TestHandOffGroupFailureEndsEveryReservation(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	createEndpoint(t, s, newEndpoint("acme"))
	createEndpoint(t, s, newEndpoint("globex"))
	h := newReviewHandOff("w1", base.Add(time.Hour))
	s.SetHandOff(h)
	same := store.NewID("dlv") // two publishes of the group use one delivery id: the insert fails
	var group []*publishRequest
	for i, tn := range []string{"acme", "globex", "acme"} {
		id := func() string { return store.NewID("dlv") }
		if i < 2 {
			id = func() string { return same }
		}
		group = append(group, &publishRequest{ctx: t.Context(), done: make(chan publishAnswer, 1),
			p: store.PublishParams{Event: newEvent(tn), Now: base, NewDeliveryID: id}})
	}
	s.committer.commit(group)
	var ok int
	for _, r := range group {
		if a := <-r.done; a.err == nil {
			ok++
		}
	}
	reserved, takes, _, taken := h.state()
	if reserved != takes {
		t.Fatalf("%d reservations, %d takes", reserved, takes)
	}
	leased := 0
	pg, err := s.ListDeliveries(t.Context(), store.ListDeliveriesParams{ListParams: store.ListParams{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pg.Data {
		if d.LeaseOwner != "" {
			leased++
		}
	}
	if ok != 2 || leased != len(taken) || len(taken) != 2 {
		t.Fatalf("%d publishes succeeded, %d deliveries leased, %d claims taken; want 2, 2, 2", ok, leased, len(taken))
	}
}

// commitLossProxy forwards connections to the PostgreSQL server; once
// armed, the first connection that sends COMMIT (pgx: a simple query
// "commit") has the server's answer to it swallowed and is cut: the
// transaction committed on the server, the client gets an error (a network
// loss after the commit record, which the group commit and publishOne
// call "may or may not have happened").
type commitLossProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	fired  atomic.Bool
}

var commitMsg = []byte("Q\x00\x00\x00\x0bcommit\x00")

func newCommitLossProxy(t *testing.T, target string) *commitLossProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitLossProxy{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *commitLossProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	var drop atomic.Bool
	done := make(chan struct{})
	go func() { // server → client
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if drop.Load() {
					if bytes.Contains(buf[:n], []byte("COMMIT\x00")) {
						p.fired.Store(true)
						client.Close()
						server.Close()
						return
					}
				} else if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], commitMsg) && p.armed.CompareAndSwap(true, false) {
				drop.Store(true)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	server.Close()
	<-done
}

// commitLossStores opens two stores on a new schema: s through a
// commitLossProxy (armed by the test), direct without it.
func commitLossStores(t *testing.T) (s, direct *Store, proxy *commitLossProxy) {
	t.Helper()
	dbURL := newSchema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy = newCommitLossProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	return openStore(t, u.String()), openStore(t, dbURL), proxy
}

// TestHandOffCommitLostLeavesNoOrphanLease: a publish whose commit
// happened on the server but whose answer was lost (the connection cut
// after COMMIT) ends its reservation with no claims (the engine must not
// attempt what it cannot know is stored). Its deliveries were inserted
// leased to this node: nothing works on them, and no claim may take them
// until the lease ends and a rescuer (counting them as a crashed node's)
// returns them — a delay of --lease (2 × attempt timeout + 5 s by
// default) that a publish without the hand-off never had (its deliveries
// were claimable at once). The claim path gives back the leases of a
// claim that failed after its statements committed (releaseClaimSQL in
// ClaimDeliveries); the hand-off
// must do the same.
func TestHandOffCommitLostLeavesNoOrphanLease(t *testing.T) {
	t.Parallel()
	s, direct, proxy := commitLossStores(t)
	ep := createEndpoint(t, direct, newEndpoint("acme"))
	h := newReviewHandOff("node_a", base.Add(time.Hour))
	s.SetHandOff(h)

	proxy.armed.Store(true)
	ev := newEvent("acme")
	_, err := s.PublishEvent(t.Context(), store.PublishParams{Event: ev, Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }})
	if !proxy.fired.Load() {
		t.Fatalf("the proxy did not cut the publish's commit (publish: %v)", err)
	}
	if err == nil {
		t.Fatal("the publish succeeded although its commit's answer was lost")
	}
	select {
	case <-h.took:
	case <-time.After(30 * time.Second):
		t.Fatal("no Take after the failed publish")
	}
	if _, err := direct.GetEvent(t.Context(), ev.ID); err != nil {
		t.Fatalf("the event was not stored (the commit did not happen): %v", err)
	}
	reserved, takes, _, taken := h.state()
	if reserved != 1 || takes != 1 || len(taken) != 0 {
		t.Fatalf("%d reservations, %d takes, %d claims taken; want 1, 1, 0", reserved, takes, len(taken))
	}
	ds := listDeliveries(t, direct, ep.ID)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1", len(ds))
	}
	if ds[0].LeaseOwner != "" {
		t.Errorf("delivery %s left leased to %s until %v with no worker on it: it waits out the lease and a rescue", ds[0].ID, ds[0].LeaseOwner, ds[0].LeaseUntil)
	}
	cs, err := direct.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node_b", Limit: 8, Lease: time.Minute, Now: base.Add(time.Second)})
	if err != nil || len(cs) != 1 {
		t.Errorf("a claim right after the publish: %d claims, %v; want the delivery", len(cs), err)
	}
}

// TestHandOffGroupCommitLostLeavesNoOrphanLease is
// TestHandOffCommitLostLeavesNoOrphanLease for a group of two publishes
// (one transaction, committer.commit).
func TestHandOffGroupCommitLostLeavesNoOrphanLease(t *testing.T) {
	t.Parallel()
	s, direct, proxy := commitLossStores(t)
	createEndpoint(t, direct, newEndpoint("acme"))
	createEndpoint(t, direct, newEndpoint("globex"))
	h := newReviewHandOff("node_a", base.Add(time.Hour))
	s.SetHandOff(h)

	var group []*publishRequest
	for _, tn := range []string{"acme", "globex"} {
		group = append(group, &publishRequest{ctx: t.Context(), done: make(chan publishAnswer, 1),
			p: store.PublishParams{Event: newEvent(tn), Now: base, NewDeliveryID: func() string { return store.NewID("dlv") }}})
	}
	proxy.armed.Store(true)
	s.committer.commit(group)
	for _, r := range group {
		if a := <-r.done; a.err == nil {
			t.Fatal("a publish succeeded although its group's commit answer was lost")
		}
	}
	if !proxy.fired.Load() {
		t.Fatal("the proxy did not cut the group's commit")
	}
	reserved, takes, _, taken := h.state()
	if reserved != 2 || takes != 2 || len(taken) != 0 {
		t.Fatalf("%d reservations, %d takes, %d claims taken; want 2, 2, 0", reserved, takes, len(taken))
	}
	cs, err := direct.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node_b", Limit: 8, Lease: time.Minute, Now: base.Add(time.Second)})
	if err != nil || len(cs) != 2 {
		t.Errorf("a claim right after the group: %d claims, %v; want its 2 deliveries (committed, no worker on them)", len(cs), err)
	}
}
