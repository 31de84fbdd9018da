package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// setupRetries is how often a setup publish is tried before the run fails.
const setupTries = 6

// publishAll publishes events 0..n-1 with `clients` concurrent API clients
// (closed loop). Each publish carries an Idempotency-Key (keyPrefix + seq),
// so one that failed with a transport error, 429, 499 or 5xx is retried
// safely (up to setupTries times, with backoff); it returns the number of
// retries. It stops at the first publish that keeps failing.
func publishAll(ctx context.Context, api *apiClient, m *eventMaker, n, clients int, keyPrefix string) (int, error) {
	var retries atomic.Int64
	err := forEach(ctx, n, clients, func(ctx context.Context, i int) error {
		body := m.publishBody(i, time.Now().UnixNano())
		key := keyPrefix + itoa(i)
		backoff := 100 * time.Millisecond
		for try := 1; ; try++ {
			status, err := api.publish(ctx, body, key)
			if err == nil {
				return nil
			}
			retryable := status == 0 || status == 429 || status == 499 || status >= 500
			if !retryable || try == setupTries || ctx.Err() != nil {
				return fmt.Errorf("publishing event %d of %d (try %d): %w", i+1, n, try, err)
			}
			retries.Add(1)
			if err := sleepCtx(ctx, backoff); err != nil {
				return err
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	})
	return int(retries.Load()), err
}

// forEach calls do for i = 0..n-1 from up to workers goroutines, each
// taking the next i; it stops at the first error, cancels the others'
// context and returns that error (or ctx's).
func forEach(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// openLoop is the result of publishing at a fixed rate.
type openLoop struct {
	Sent, OK, Errors int
	Late             int           // sends that started more than lateAfter after their slot
	MaxLag           time.Duration // largest delay of a send behind its slot
	CallNS           []int64       // durations of the successful publish calls
	FirstErr         error
	Elapsed          time.Duration // first slot to the last answer
}

// lateAfter is how far behind its slot a send may start before it counts
// as late.
const lateAfter = time.Millisecond

// publishOpenLoop publishes rate events per second for d (open loop: event
// i is due at start + i/rate whatever the answers), with at most inflight
// publishes outstanding. Each event's data carries its send time.
func publishOpenLoop(ctx context.Context, api *apiClient, m *eventMaker, rate int, d time.Duration, inflight int) openLoop {
	return runOpenLoop(ctx, rate, d, inflight, func(ctx context.Context, i int, t time.Time) error {
		_, err := api.publish(ctx, m.publishBody(i, t.UnixNano()))
		return err
	})
}

// runOpenLoop calls send rate times per second for d (open loop: call i is
// due at start + i/rate whatever the answers), with at most inflight calls
// outstanding; t is the call's start.
func runOpenLoop(ctx context.Context, rate int, d time.Duration, inflight int, send func(ctx context.Context, i int, t time.Time) error) openLoop {
	total := int(math.Round(float64(rate) * d.Seconds()))
	interval := time.Second / time.Duration(rate)
	var (
		res  openLoop
		mu   sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, inflight)
		call = make([]int64, 0, total)
	)
	start := time.Now()
	for i := 0; i < total && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		lag := time.Since(due)
		if lag > lateAfter {
			res.Late++
		}
		res.MaxLag = max(res.MaxLag, lag)
		res.Sent++
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			t := time.Now()
			err := send(ctx, i, t)
			el := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Errors++
				if res.FirstErr == nil {
					res.FirstErr = err
				}
				return
			}
			res.OK++
			call = append(call, int64(el))
		}(i)
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.CallNS = call
	return res
}

// closedLoop is the result of clients publishing as fast as they can.
type closedLoop struct {
	OK, Errors int
	CallNS     []int64
	FirstErr   error
	Elapsed    time.Duration
}

// publishClosedLoop runs `clients` clients, each publishing one event after
// the other, for d.
func publishClosedLoop(ctx context.Context, api *apiClient, m *eventMaker, clients int, d time.Duration) closedLoop {
	return runClosedLoop(ctx, clients, d, func(ctx context.Context, i int, t time.Time) error {
		_, err := api.publish(ctx, m.publishBody(i, t.UnixNano()))
		return err
	})
}

// runClosedLoop runs `clients` clients, each calling send one call after
// the other, for d.
func runClosedLoop(ctx context.Context, clients int, d time.Duration, send func(ctx context.Context, i int, t time.Time) error) closedLoop {
	var (
		res closedLoop
		mu  sync.Mutex
		wg  sync.WaitGroup
		seq atomic.Int64
	)
	start := time.Now()
	stop := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls := make([]int64, 0, 1024)
			var ok, errs int
			var firstErr error
			for ctx.Err() == nil && time.Now().Before(stop) {
				i := int(seq.Add(1) - 1)
				t := time.Now()
				err := send(ctx, i, t)
				end := time.Now()
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
					if ctx.Err() != nil {
						break
					}
					continue
				}
				ok++
				calls = append(calls, int64(end.Sub(t)))
			}
			mu.Lock()
			res.OK += ok
			res.Errors += errs
			res.CallNS = append(res.CallNS, calls...)
			if res.FirstErr == nil {
				res.FirstErr = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start) // d plus the last calls in flight
	return res
}

// reference posts n bodies to url with `concurrency` plain net/http
// clients (one shared keep-alive transport), each request with a unique
// X-Event-Id, and returns when every answer is in.
func reference(ctx context.Context, url string, bodies [][]byte, n, concurrency int) error {
	hc := loadClient(concurrency)
	defer hc.CloseIdleConnections()
	return forEach(ctx, n, concurrency, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(bodies[i%len(bodies)]))
		if err != nil {
			return fmt.Errorf("reference request %d: %w", i, err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Event-Id", "ref_"+itoa(i))
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("reference request %d: %w", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("reference request %d: answer %s", i, resp.Status)
		}
		return nil
	})
}

// waitArrivals polls the receiver until `want` unique arrivals are under
// prefix. It fails when nothing new arrives for stallAfter, with what
// arrived and Herald's queue in the message.
func (r *runner) waitArrivals(ctx context.Context, rcv *receiverProc, h *heraldProc, prefix string, want int64, stallAfter time.Duration) (Stats, error) {
	var last Stats
	progressAt := time.Now()
	for {
		if rcv.exited() {
			return last, rcv.exitError()
		}
		if h != nil && h.exited() {
			return last, h.exitError()
		}
		st, err := rcv.rc.stats(ctx, prefix)
		if err != nil {
			if ctx.Err() != nil {
				return last, fmt.Errorf("waiting for %d arrivals under %s (%d so far): %w", want, prefix, last.Unique, ctx.Err())
			}
			return last, err
		}
		if st.Unique >= want {
			return st, nil
		}
		if st.Unique > last.Unique {
			progressAt = time.Now()
		}
		last = st
		if time.Since(progressAt) > stallAfter {
			return last, fmt.Errorf("waiting for %d arrivals under %s: %d arrived, %w for %s%s", want, prefix, st.Unique, errStalled, stallAfter, r.queueNote(ctx, h))
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for %d arrivals under %s (%d so far%s): %w", want, prefix, last.Unique, r.queueNote(context.WithoutCancel(ctx), h), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// queueNote describes Herald's queue for error messages.
func (r *runner) queueNote(ctx context.Context, h *heraldProc) string {
	if h == nil || h.exited() {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pv, err := h.api.metrics(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("; herald queue %s, deferred %s", fmtValue(pv.byLabel("herald_queue_depth")), fmtValue(pv.byLabel("herald_deliveries_deferred_total")))
}

// percentiles of durations in ns, as milliseconds (nearest rank).
type pcts struct {
	P50, P95, P99, Max float64
	N                  int
}

func percentiles(ns []int64) pcts {
	if len(ns) == 0 {
		return pcts{}
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		i = max(0, min(i, len(s)-1))
		return round(float64(s[i])/1e6, 3)
	}
	return pcts{P50: at(50), P95: at(95), P99: at(99), Max: round(float64(s[len(s)-1])/1e6, 3), N: len(s)}
}

// perSecond is n over d, rounded to 0.1.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n)/d.Seconds(), 1)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}
