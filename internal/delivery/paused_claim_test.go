package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/store"
)

// pausedClaims is a store whose claims find their endpoint paused: what a
// PostgreSQL claim returns for a delivery its endpoint's pause has not
// moved yet (the move runs in chunks after the change).
type pausedClaims struct{ store.Store }

func (s pausedClaims) ClaimDeliveries(ctx context.Context, p store.ClaimParams) ([]store.Claim, error) {
	cs, err := s.Store.ClaimDeliveries(ctx, p)
	for i := range cs {
		cs[i].Endpoint.State = store.EndpointPaused
	}
	return cs, err
}

// A claim whose endpoint is paused or disabled is put back without an
// attempt, as a deferral the store's completion turns into a hold: a
// pause is in force from its change, whatever the progress of the move of
// the endpoint's deliveries.
func TestClaimOfPausedEndpointNotAttempted(t *testing.T) {
	clk := clock.NewFake(t0)
	sq := claimingStore(t)
	ep := holdEndpoint("ep_paused_claim")
	if _, err := sq.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: ep}); err != nil {
		t.Fatal(err)
	}
	holdPublish(t, sq, "t", t0)
	ds := holdDeliveries(t, sq, ep.ID)
	st := &completionLog{Store: pausedClaims{sq}}
	snd := &gateSender{gate: make(chan struct{})}
	close(snd.gate)
	e, err := New(Config{Store: st, Sender: snd, Clock: clk, Workers: 1, AttemptTimeout: 10 * time.Second, PollInterval: time.Hour, RescueInterval: time.Hour,
		EndpointChanges: sq.EndpointChanges, Renewer: sq})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runInBackground(t, e)
	t.Cleanup(func() { cancel(); <-done })
	e.Notify()
	waitFor(t, "the claim's completion", func() bool { return len(st.of(ds[0].ID)) > 0 })
	if c := st.of(ds[0].ID)[0]; !c.Deferred {
		t.Errorf("completion %+v, want a deferral (put back without an attempt)", c)
	}
	if got := snd.attempted(); len(got) != 0 {
		t.Errorf("attempted %v, want nothing sent to a paused endpoint", got)
	}
}
