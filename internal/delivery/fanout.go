package delivery

import (
	"context"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// fanOut is the fan-out loop: it creates the deliveries of publishes
// larger than a chunk, one chunk per transaction (store.ContinueFanOut),
// taking the unfinished fan-outs in turn (one chunk each),
// waking the claimers after each chunk with pending deliveries; when none
// is left it waits for a publish's notification or the poll interval (a
// fan-out left by a crash, or published on another node).
func (e *Engine) fanOut(ctx context.Context) {
	backoff := 100 * time.Millisecond
	last := "" // the fan-out advanced last: the next call takes the one after it
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := e.cfg.Store.ContinueFanOut(fctx, store.FanOutParams{Chunk: e.cfg.FanOutChunk, Now: e.cfg.Clock.Now(), After: last})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.cfg.Logger.Warn("fan-out chunk failed", "error", err)
			e.sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if res.Pending > 0 {
			select { // the claimers, not this loop
			case e.wake <- struct{}{}:
			default:
			}
		}
		if res.Done {
			e.cfg.Logger.Debug("fan-out complete", "event", res.EventID)
		}
		if res.EventID != "" {
			last = res.EventID
			continue // this one or another may have more
		}
		if res.More {
			// Every remaining fan-out is held by another node.
			e.pause(ctx, e.cfg.PollInterval)
			continue
		}
		t := e.cfg.Clock.NewTimer(e.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-e.fanWake:
		case <-t.Chan():
		}
		t.Stop()
	}
}
