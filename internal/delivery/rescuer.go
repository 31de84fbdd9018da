package delivery

import (
	"context"
	"time"
)

// rescue periodically returns expired leases to the queue.
func (e *Engine) rescue(ctx context.Context) {
	t := e.cfg.Clock.NewTicker(e.cfg.RescueInterval)
	defer t.Stop()
	for {
		if e.unwritten.Load() > 0 {
			select {
			case <-ctx.Done():
				return
			case <-t.Chan():
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := e.cfg.Store.RescueExpiredLeases(rctx, e.cfg.Clock.Now())
		cancel()
		if err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("rescue expired leases failed", "error", err)
		}
		// A store may rescue leases and then fail at later work of the
		// round (PostgreSQL: finishing a release whose node stopped): what
		// it rescued counts.
		if n > 0 {
			e.cfg.Metrics.LeasesRescued(n)
			e.cfg.Logger.Info("rescued deliveries whose lease expired", "count", n)
			e.Notify()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}
