package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen timings; variables so tests can shorten them.
var (
	listenMinBackoff  = 100 * time.Millisecond // first wait after a failure
	listenMaxBackoff  = 5 * time.Second        // the wait doubles up to this
	listenHealthEvery = 30 * time.Second       // a silent connection is pinged this often
	listenPingTimeout = 5 * time.Second        // a ping slower than this means the connection is gone
	listenDialTimeout = 10 * time.Second       // connect + LISTEN
)

// Listen holds one dedicated connection (not from the pool) doing LISTEN
// herald_deliveries and calls onNotify once per notification, from one
// goroutine, so the delivery engine of every node wakes up when a publish
// on any node commits pending deliveries. Notifications of this store's own
// PublishEvent calls are skipped: their callers wake the engine themselves
// (as with SQLite, which has no notifications), and a second wake-up would
// only cost an empty claim.
//
// onNotify is also called once each time the connection is established
// (the first time and after every reconnection): a notification sent while
// nobody listened is lost, so the caller should look for work then. When the
// connection drops (database restart, pg_terminate_backend, network), Listen
// reconnects with exponential backoff (100 ms doubling to 5 s, reset by a
// successful connection); a connection that has been silent for 30 s is
// pinged, so a half-open one is noticed. Listen returns ctx.Err() when ctx
// ends, and only then.
func (s *Store) Listen(ctx context.Context, onNotify func()) error {
	cfg := s.pool.Config().ConnConfig
	backoff := listenMinBackoff
	for {
		connected, _ := listenOnce(ctx, cfg, s.tag, onNotify)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if connected {
			backoff = listenMinBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends. connected reports whether LISTEN succeeded.
func listenOnce(ctx context.Context, cfg *pgx.ConnConfig, own string, onNotify func()) (connected bool, err error) {
	dialCtx, cancel := context.WithTimeout(ctx, listenDialTimeout)
	conn, err := pgx.ConnectConfig(dialCtx, cfg)
	if err != nil {
		cancel()
		return false, err
	}
	defer func() {
		// A clean close sends Terminate; do not let a dead network hold it.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closeCtx) //nolint:errcheck // the connection is discarded either way
	}()
	_, err = conn.Exec(dialCtx, "LISTEN "+notifyChannel)
	cancel()
	if err != nil {
		return false, err
	}
	onNotify()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenHealthEvery)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil && n.Payload == own:
			// This store's own PublishEvent: its caller has woken the
			// engine already.
		case err == nil:
			onNotify()
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Silent for a while: make sure the connection still works.
			pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return true, err
			}
		default:
			return true, err
		}
	}
}
