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

// backlogStore always has more due: every claim gets all it asks for, each
// delivery to an endpoint (and tenant and host) of its own, so no cap turns
// one away. It counts the claims handed out.
type backlogStore struct {
	wakeStore
	handed *atomic.Int64
}

func (s backlogStore) ClaimDeliveries(_ context.Context, p store.ClaimParams) ([]store.Claim, error) {
	out := make([]store.Claim, p.Limit)
	for i := range out {
		n := s.handed.Add(1)
		c := testClaim(fmt.Sprintf("dlv_%d", n), fmt.Sprintf("ep%d", n), 0)
		c.Delivery.Tenant, c.Endpoint.Tenant = fmt.Sprintf("t%d", n), fmt.Sprintf("t%d", n)
		out[i] = c
	}
	return out, nil
}

func (s backlogStore) NextDueAt(context.Context, []string) (time.Time, error) { return t0, nil }

// While a backlog drains, the claimer holds Workers + ClaimAhead claims:
// Workers attempting and ClaimAhead in line, so a worker whose attempt ends
// takes the next one without waiting for a claim; with ClaimAhead negative
// it holds only Workers. The default is ClaimAhead = Workers with one claim
// loop, none with two (claims in line from two loops would reach the
// workers out of due order). Every attempt hangs until the test ends, so
// the claimer stops when its tokens run out, and a claim past that count
// would be a token taken twice. (One claim loop runs in every case: the
// count is the tokens'.)
func TestClaimAhead(t *testing.T) {
	for _, c := range []struct {
		ahead, claimers, want int
	}{{3, 1, 5}, {-1, 1, 2}, {0, 1, 4}, {0, 2, 2}, {3, 2, 5}} {
		t.Run(fmt.Sprintf("ClaimAhead=%d,Claimers=%d", c.ahead, c.claimers), func(t *testing.T) {
			var handed atomic.Int64
			sender := gatedSender{started: make(chan struct{}, 16), release: make(chan int)}
			e, err := New(Config{Store: backlogStore{handed: &handed}, Sender: sender, Clock: clock.NewFake(t0), Claimers: c.claimers,
				Workers: 2, ClaimAhead: c.ahead, EndpointConcurrency: 1, TenantConcurrency: 2, HostConcurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			var claimer, workers sync.WaitGroup
			claimer.Go(func() { e.claim(ctx) })
			for range e.cfg.Workers {
				workers.Go(func() { e.work(ctx) })
			}
			go func() {
				for range e.results {
				}
			}()
			defer func() {
				cancel()
				close(sender.release) // every hanging attempt answers 0
				claimer.Wait()
				close(e.jobs)
				workers.Wait()
				close(e.results)
			}()
			for range e.cfg.Workers {
				<-sender.started
			}
			// The claimer takes what its tokens allow, then waits for one.
			deadline := time.Now().Add(time.Minute) // a hang guard, not a speed assertion
			for len(e.slots) > 0 || handed.Load() < int64(c.want) {
				if time.Now().After(deadline) {
					t.Fatalf("claimed %d with %d tokens free; want %d claimed and none free", handed.Load(), len(e.slots), c.want)
				}
				time.Sleep(time.Millisecond)
			}
			if got := handed.Load(); got != int64(c.want) {
				t.Fatalf("claimed %d while %d attempts hang, want Workers + ClaimAhead = %d", got, e.cfg.Workers, c.want)
			}
			if got, want := len(e.jobs), c.want-e.cfg.Workers; got != want {
				t.Fatalf("%d claims waiting for a worker, want %d", got, want)
			}
		})
	}
}
