package delivery

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
)

// The engine takes a hand-off only as the claimer would claim it at once:
// while it runs, with idle workers (never more than are idle), not while a
// backlog is being drained, not for a tenant at its cap; a Take hands the
// claims to the workers and gives the unused tokens back.
func TestHandOffReserve(t *testing.T) {
	clk := clock.NewFake(t0)
	e, err := New(Config{Store: wakeStore{}, Sender: nopSender{}, Clock: clk, Workers: 4, TenantConcurrency: 2, Owner: "node-a", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Reserve("acme", 1); got != 0 {
		t.Fatalf("Reserve before Run = %d, want 0", got)
	}
	e.handOpen = true
	if got := e.Reserve("acme", 3); got != 3 {
		t.Fatalf("Reserve(3) with 4 idle workers = %d", got)
	}
	if got := e.Reserve("acme", 3); got != 1 {
		t.Fatalf("Reserve(3) with 1 idle worker = %d", got)
	}
	if got := e.Reserve("acme", 1); got != 0 {
		t.Fatalf("Reserve with no idle worker = %d", got)
	}
	claims := []store.Claim{{Delivery: store.Delivery{ID: "dlv_1"}}, {Delivery: store.Delivery{ID: "dlv_2"}}}
	e.Take(claims, 3) // one delivery could not be read
	for _, want := range []string{"dlv_1", "dlv_2"} {
		j := <-e.jobs
		if j.Delivery.ID != want {
			t.Fatalf("job %s, want %s", j.Delivery.ID, want)
		}
		j.tok.release()
	}
	select {
	case <-e.wake:
	default:
		t.Fatal("a delivery given back did not wake the claimer")
	}
	e.Take(nil, 1)
	if n := len(e.slots); n != 4 {
		t.Fatalf("%d idle tokens after every take, want 4", n)
	}
	if owner, until := e.Lease(); owner != "node-a" || !until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Lease = %s, %s", owner, until)
	}

	e.backlog.Store(true)
	if got := e.Reserve("acme", 1); got != 0 {
		t.Fatalf("Reserve while draining a backlog = %d, want 0", got)
	}
	e.backlog.Store(false)
	e.sched.mu.Lock()
	e.sched.full["acme"] = struct{}{}
	e.sched.mu.Unlock()
	if got := e.Reserve("acme", 1); got != 0 {
		t.Fatalf("Reserve for a tenant at its cap = %d, want 0", got)
	}
	if got := e.Reserve("other", 1); got != 1 {
		t.Fatalf("Reserve for another tenant = %d, want 1", got)
	}
	e.Take(nil, 1)
}

// Run does not close the workers' queue while a reservation is
// outstanding (its Take would send on a closed channel), and a
// reservation after Run stopped claiming is refused.
func TestRunWaitsForHandOffs(t *testing.T) {
	st := &runStore{} // nothing to claim
	st.claimed.Store(true)
	e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clock.NewFake(t0), Workers: 2, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	var k int
	for deadline := time.Now().Add(time.Minute); k == 0; { // a hang guard: Run opens the hand-off at once
		if time.Now().After(deadline) {
			t.Fatal("the hand-off never opened")
		}
		k = e.Reserve("acme", 1)
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned with a reservation not taken")
	case <-time.After(100 * time.Millisecond):
	}
	e.Take([]store.Claim{{Delivery: store.Delivery{ID: "dlv_1", Tenant: "acme"}, Endpoint: store.Endpoint{ID: "ep_1"}}}, 1)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after the reservation was taken")
	}
	if got := e.Reserve("acme", 1); got != 0 {
		t.Fatalf("Reserve after Run = %d, want 0", got)
	}
}

// backlogStore answers the first claim in full, holds the second until
// release is closed and answers it empty.
type backlogStore struct {
	runStore
	calls    atomic.Int32
	inSecond chan struct{}
	release  chan struct{}
}

func (s *backlogStore) ClaimDeliveries(_ context.Context, p store.ClaimParams) ([]store.Claim, error) {
	switch s.calls.Add(1) {
	case 1:
		cs := make([]store.Claim, p.Limit)
		for i := range cs {
			ep := fmt.Sprintf("ep_%d", i) // one each: none parked
			cs[i] = store.Claim{Delivery: store.Delivery{ID: fmt.Sprintf("dlv_%d", i), Tenant: "acme", EndpointID: ep}, Endpoint: holdEndpoint(ep)}
		}
		return cs, nil
	case 2:
		close(s.inSecond)
		<-s.release
	}
	return nil, nil
}

// The claimer records whether it is draining a backlog (its last claim
// took all it asked for), which turns the hand-off away, and clears it
// once a claim comes back short.
func TestClaimerRecordsBacklog(t *testing.T) {
	clk := clock.NewFake(t0)
	st := &backlogStore{inSecond: make(chan struct{}), release: make(chan struct{})}
	e, err := New(Config{Store: st, Sender: nopSender{}, Clock: clk, Workers: 4, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	var release sync.Once
	defer func() { release.Do(func() { close(st.release) }); cancel(); <-done }()
	<-st.inSecond // the first claim was full
	if !e.backlog.Load() {
		t.Fatal("backlog not recorded after a full claim")
	}
	release.Do(func() { close(st.release) }) // the second comes back empty: the claimer sleeps
	for deadline := time.Now().Add(time.Minute); e.wakeAt.Load() != t0.Add(time.Hour).UnixNano(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard
			t.Fatal("the claimer never went to sleep")
		}
	}
	if e.backlog.Load() {
		t.Fatal("backlog still recorded after a short claim")
	}
}
