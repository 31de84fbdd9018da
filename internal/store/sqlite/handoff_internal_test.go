package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// reserveAll is an engine side that reserves every delivery offered.
type reserveAll struct{}

func (reserveAll) Reserve(_ string, n int) int      { return n }
func (reserveAll) Lease() (string, time.Time)       { return "w", time.Now().Add(time.Minute) }
func (reserveAll) Take(claims []store.Claim, n int) {}

var _ store.HandOff = reserveAll{}

// TestHandOffPublishDuringFirstClaim: the first claim takes the claim lock
// holding claimMu while it waits for the writer (takeClaimLock → queueTx),
// and a publish group asks claiming() holding the writer. claiming() took
// claimMu once (found by review): with a hand-off installed before the
// first claim the two waited for each other forever, and the store could
// no longer be closed. It reads an atomic flag now.
func TestHandOffPublishDuringFirstClaim(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := s.CreateEndpoint(ctx, store.CreateEndpointParams{Endpoint: store.Endpoint{ID: "ep_1", Tenant: "acme",
		URL: "https://example.com/", State: store.EndpointEnabled,
		Secrets: []store.Secret{{Value: "whsec_x", CreatedAt: now}}, CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	s.SetHandOff(reserveAll{})

	_, done, err := s.queueTx(ctx) // the writer, as a completion batch running
	if err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := s.ClaimDeliveries(ctx, store.ClaimParams{Owner: "w", Limit: 8, Lease: time.Minute, Now: time.Now()})
		claimed <- err
	}()
	// The first claim holds claimMu (takeClaimLock) and waits for the writer.
	waitFor(t, "the first claim waiting", func() bool { _, q := s.gate.waiting(); return q == 1 })
	published := make(chan error, 1)
	go func() {
		id := store.NewID("evt")
		_, err := s.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: "acme", Type: "t", OccurredAt: time.Now(), Body: []byte("{}"), Fingerprint: id},
			Now:   time.Now(), NewDeliveryID: func() string { return store.NewID("dlv") },
		})
		published <- err
	}()
	waitFor(t, "the publish waiting", func() bool { p, _ := s.gate.waiting(); return p == 1 })
	done() // the publish group goes first (writeGate), then the claim

	timeout := time.After(10 * time.Second)
	for range 2 {
		select {
		case err := <-published:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-claimed:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			// Not closed: Close would wait for the stuck committer forever.
			t.Fatal("deadlock: a publish group holding the writer waits for claimMu in claiming(), held by the first claim waiting for the writer in takeClaimLock")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
