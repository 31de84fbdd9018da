// Package ops runs Herald's housekeeping on every node: it emits the
// operational events recorded by the store in its notices outbox
// (endpoint.disabled, endpoint.enabled, endpoint.created, endpoint.updated,
// endpoint.deleted; one per change, in order), raises endpoint.dead_letter_spike when an endpoint's
// dead letters in a window pass a threshold, and purges old history in
// small batches (retention).
//
// Operational events are ordinary events: signed, retried and
// dead-lettered like any other, delivered to the endpoint's tenant (its
// endpoints that subscribe to "endpoint.*" or the exact type) and, when
// configured, to an operator tenant. Their ids are derived from the
// endpoint and the time of the change, so two nodes emitting the same
// notice publish one event (PublishEvent is idempotent by id).
package ops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/herald-webhooks/herald/internal/clock"
	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// Operational event types.
const (
	TypeEndpointDisabled  = store.NoticeEndpointDisabled
	TypeEndpointEnabled   = store.NoticeEndpointEnabled
	TypeEndpointCreated   = store.NoticeEndpointCreated
	TypeEndpointUpdated   = store.NoticeEndpointUpdated
	TypeEndpointDeleted   = store.NoticeEndpointDeleted
	TypeDeadLetterSpike   = "endpoint.dead_letter_spike"
	TypeEndpointFailing   = store.NoticeEndpointFailing
	TypeEndpointRecovered = store.NoticeEndpointRecovered
	TypeDeadLettered      = store.NoticeDeliveryDeadLettered
	// TypeEventsSuppressed summarises, for one recipient tenant, the
	// operational events the rate limit held back (Config.EventBurst).
	TypeEventsSuppressed = "endpoint.events_suppressed"
)

// RateLimited reports whether typ is one of the operational events Herald
// raises by itself (failures, recoveries, dead letters, disables, spikes),
// which the per-tenant rate limit bounds; the events of changes made
// through the API (created, updated, deleted, enabled) are not limited.
func RateLimited(typ string) bool {
	switch typ {
	case TypeEndpointDisabled, TypeEndpointFailing, TypeEndpointRecovered, TypeDeadLettered, TypeDeadLetterSpike:
		return true
	}
	return false
}

// Config configures the housekeeper. Zero fields take the documented
// defaults.
type Config struct {
	Store store.Store
	// Notify wakes the delivery engine after operational events were
	// published.
	Notify func()
	// OperatorTenant, when set, also receives every operational event.
	OperatorTenant string
	// SpikeThreshold is the number of dead letters of one endpoint within
	// SpikeWindow that raises endpoint.dead_letter_spike (once per
	// window); 0 (or negative) disables the alert. `herald serve` sets
	// DefaultSpikeThreshold.
	SpikeThreshold int
	// SpikeWindow; default 15 minutes.
	SpikeWindow time.Duration
	// SucceededRetention keeps succeeded deliveries and their attempts this
	// long; 0 (or negative) keeps them forever. `herald serve` sets
	// DefaultSucceededRetention.
	SucceededRetention time.Duration
	// DeadRetention keeps dead letters this long; 0 (or negative) keeps
	// them forever. `herald serve` sets DefaultDeadRetention.
	DeadRetention time.Duration
	// Interval between housekeeping rounds; default 5 s.
	Interval time.Duration
	// PurgeBatch is the most rows of each kind deleted per statement;
	// default 500.
	PurgeBatch int
	// PurgeBudget bounds the time a round spends purging: it deletes batch
	// after batch while they come back full, and stops at the first batch
	// that ends past the budget; the next round then purges again instead
	// of waiting for the minute. Default DefaultPurgeBudget.
	PurgeBudget time.Duration
	// EventBurst and EventsPerMinute shape the token bucket of each
	// recipient tenant (the endpoint's tenant, the operator tenant) for the
	// RateLimited types: at most EventBurst at once, then EventsPerMinute;
	// defaults 20 and 10. An event over the limit is not created: it is
	// counted, and the tenant gets one endpoint.events_suppressed with the
	// counts SummaryEvery (default 1 minute) after the first event held
	// back, so at most one per SummaryEvery. The buckets live in the
	// node's memory.
	EventBurst      int
	EventsPerMinute int
	SummaryEvery    time.Duration
	// Clock tells the time of the rounds (spike windows, rate limits,
	// retention cut-offs, the ids of operational events) and ticks
	// Interval; default clock.System().
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// The defaults `herald serve` gives the settings whose zero value turns
// them off (docs/operations.md).
const (
	DefaultSpikeThreshold     = 10
	DefaultSucceededRetention = 7 * 24 * time.Hour
	DefaultDeadRetention      = 30 * 24 * time.Hour
	// DefaultPurgeBudget leaves most of a default round's 5 s to purging
	// when retention is behind, and the rest of the node's database time
	// to deliveries; notices wait at most this long behind a purge.
	DefaultPurgeBudget = 3 * time.Second
)

// Housekeeper runs the rounds.
type Housekeeper struct {
	cfg       Config
	lastPurge time.Time
	// behind: the last purge stopped at its budget with old history left,
	// so the next round purges again without waiting for the minute.
	behind   bool
	limitsMu sync.Mutex              // limits: notices are published concurrently (emitPage)
	limits   map[string]*tenantLimit // recipient tenant → its bucket and suppressed counts
}

// tenantLimit is one recipient tenant's token bucket and what it held back
// since its last summary.
type tenantLimit struct {
	bucket     *rate.Limiter
	suppressed map[string]int // type → events held back
	since      time.Time      // first event held back since the last summary
}

// New returns a housekeeper.
func New(cfg Config) *Housekeeper {
	if cfg.SpikeWindow <= 0 {
		cfg.SpikeWindow = 15 * time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.PurgeBatch <= 0 {
		cfg.PurgeBatch = 500
	}
	if cfg.PurgeBudget <= 0 {
		cfg.PurgeBudget = DefaultPurgeBudget
	}
	if cfg.EventBurst <= 0 {
		cfg.EventBurst = 20
	}
	if cfg.EventsPerMinute <= 0 {
		cfg.EventsPerMinute = 10
	}
	if cfg.SummaryEvery <= 0 {
		cfg.SummaryEvery = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	return &Housekeeper{cfg: cfg, limits: map[string]*tenantLimit{}}
}

// Run does a round every Interval until ctx ends.
func (h *Housekeeper) Run(ctx context.Context) {
	t := h.cfg.Clock.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		if err := h.Round(ctx); err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("housekeeping round failed; will retry", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// Round emits pending notices, checks for dead-letter spikes, and purges
// old history (once a minute, or at every round while the last purge was
// cut short by its budget).
func (h *Housekeeper) Round(ctx context.Context) error {
	published := 0
	n, err := h.emitNotices(ctx)
	published += n
	if err != nil {
		return err
	}
	n, err = h.checkSpikes(ctx)
	published += n
	if err == nil {
		n, err = h.summarise(ctx)
		published += n
	}
	if published > 0 {
		h.cfg.Notify()
	}
	if err != nil {
		return err
	}
	now := h.cfg.Clock.Now()
	if h.behind || now.Sub(h.lastPurge) >= time.Minute {
		h.lastPurge = now
		return h.purge(ctx, now)
	}
	return nil
}

// noticePage is how many notices a round reads from the outbox at a time,
// and noticeWorkers how many endpoints' notices it publishes at once.
const (
	noticePage    = 500
	noticeWorkers = 16
)

// emitNotices publishes every pending notice and clears it from the
// outbox. A bulk import of 10,000 endpoints records 10,000
// endpoint.created notices: published one by one, each a durable commit
// followed by a durable delete, they took 20,000 commits on the single
// writer, 100 per round. Instead the notices of different endpoints are
// published concurrently (the stores' group commit joins them) and each
// page is cleared in one transaction. One endpoint's notices are still
// published one after the other, in the order they were recorded. A
// notice is cleared only after its publish succeeded; a crash before the
// clear publishes it again under the same event id, which is a duplicate
// and creates nothing (OperationalEventID).
func (h *Housekeeper) emitNotices(ctx context.Context) (int, error) {
	published := 0
	for {
		notices, err := h.cfg.Store.PendingNotices(ctx, noticePage)
		if err != nil {
			return published, err
		}
		n, done, err := h.emitPage(ctx, notices)
		published += n
		if cerr := h.cfg.Store.ClearNotices(ctx, done); err == nil {
			err = cerr
		}
		if err != nil || len(notices) < noticePage {
			return published, err
		}
	}
}

// emitPage publishes a page of notices (oldest first): each endpoint's in
// order, up to noticeWorkers endpoints at once. It returns the events
// created and the ids of the notices published, in any order; on an error
// the notices of that endpoint from the failed one on are left pending.
func (h *Housekeeper) emitPage(ctx context.Context, notices []store.Notice) (int, []int64, error) {
	var order []string
	byEndpoint := map[string][]store.Notice{}
	for _, n := range notices {
		if _, ok := byEndpoint[n.Endpoint.ID]; !ok {
			order = append(order, n.Endpoint.ID)
		}
		byEndpoint[n.Endpoint.ID] = append(byEndpoint[n.Endpoint.ID], n)
	}
	var (
		mu        sync.Mutex
		published int
		done      = make([]int64, 0, len(notices))
		firstErr  error
		next      = make(chan string)
		wg        sync.WaitGroup
	)
	for range min(noticeWorkers, len(order)) {
		wg.Go(func() {
			for id := range next {
				for _, n := range byEndpoint[id] {
					k, err := h.emit(ctx, n)
					mu.Lock()
					published += k
					if err == nil {
						done = append(done, n.ID)
					} else if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					if err != nil {
						break
					}
				}
			}
		})
	}
	for _, id := range order {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- id
	}
	close(next)
	wg.Wait()
	return published, done, firstErr
}

// emit publishes the operational event of one notice.
func (h *Housekeeper) emit(ctx context.Context, n store.Notice) (int, error) {
	ep := n.Endpoint
	data, subject := NoticeData(n), ep.ID
	if n.Type == TypeDeadLettered {
		subject = n.DeliveryID
		h.cfg.Logger.Warn("operational event", "type", n.Type, "delivery", n.DeliveryID, "event", n.EventID, "endpoint", ep.ID,
			"tenant", ep.Tenant, "attempts", n.Attempts, "last_status_code", n.LastStatusCode, "last_error", n.LastError)
	} else {
		h.cfg.Logger.Warn("operational event", "type", n.Type, "endpoint", ep.ID, "tenant", ep.Tenant, "reason", ep.StateReason,
			"last_status_code", n.LastStatusCode, "last_error", n.LastError)
	}
	return h.publishAbout(ctx, n.Type, ep, subject, n.At, data)
}

func (h *Housekeeper) checkSpikes(ctx context.Context) (int, error) {
	if h.cfg.SpikeThreshold <= 0 {
		return 0, nil
	}
	now := h.cfg.Clock.Now()
	windowStart := now.Add(-h.cfg.SpikeWindow)
	counts, err := h.cfg.Store.DeadLetterCounts(ctx, "", windowStart)
	if err != nil {
		return 0, err
	}
	published := 0
	for _, c := range counts {
		if c.Count < h.cfg.SpikeThreshold {
			break // sorted by count, descending
		}
		ok, err := h.cfg.Store.ClaimSpikeAlert(ctx, c.EndpointID, windowStart, now)
		if err != nil {
			return published, err
		}
		if !ok {
			continue
		}
		ep, err := h.cfg.Store.GetEndpoint(ctx, c.EndpointID)
		if err != nil {
			continue // deleted meanwhile
		}
		h.cfg.Logger.Warn("operational event", "type", TypeDeadLetterSpike, "endpoint", ep.ID, "tenant", ep.Tenant,
			"dead_letters", c.Count, "window", h.cfg.SpikeWindow)
		k, err := h.publish(ctx, TypeDeadLetterSpike, ep, now, map[string]any{
			"version":         1,
			"endpoint_id":     ep.ID,
			"endpoint_tenant": ep.Tenant,
			"url":             ep.URL,
			"dead_letters":    c.Count,
			"window_seconds":  int(h.cfg.SpikeWindow.Seconds()),
			"threshold":       h.cfg.SpikeThreshold,
		})
		published += k
		if err != nil {
			return published, err
		}
	}
	return published, nil
}

// NoticeData is the data of the operational event of a notice (the
// schemas are catalog.OperationalSchemas).
func NoticeData(n store.Notice) map[string]any {
	ep := n.Endpoint
	if n.Type == TypeDeadLettered {
		return map[string]any{
			"version":          1,
			"delivery_id":      n.DeliveryID,
			"event_id":         n.EventID,
			"event_type":       n.EventType,
			"endpoint_id":      ep.ID,
			"endpoint_tenant":  ep.Tenant,
			"url":              ep.URL,
			"attempts":         n.Attempts,
			"last_status_code": n.LastStatusCode,
			"last_error":       n.LastError,
		}
	}
	data := map[string]any{
		"version":          1,
		"endpoint_id":      ep.ID,
		"endpoint_tenant":  ep.Tenant,
		"url":              ep.URL,
		"state":            string(ep.State),
		"reason":           ep.StateReason,
		"last_status_code": n.LastStatusCode,
		"last_error":       n.LastError,
	}
	if n.Type == TypeEndpointFailing || n.Type == TypeEndpointRecovered {
		data["failing_after"] = store.FailingAfter
	}
	return data
}

// publish sends one operational event about an endpoint (publishAbout).
func (h *Housekeeper) publish(ctx context.Context, typ string, ep store.Endpoint, at time.Time, data map[string]any) (int, error) {
	return h.publishAbout(ctx, typ, ep, ep.ID, at, data)
}

// publishAbout sends one operational event to the endpoint's tenant and,
// when configured, the operator tenant — each copy within its tenant's
// rate limit for the RateLimited types. subject (the endpoint, or the
// delivery of delivery.dead_lettered) makes the event's id. It returns how
// many events were created.
func (h *Housekeeper) publishAbout(ctx context.Context, typ string, ep store.Endpoint, subject string, at time.Time, data map[string]any) (int, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return 0, err
	}
	at = at.Truncate(time.Microsecond) // stored at microsecond precision: the body says the same
	created := 0
	tenants := []string{ep.Tenant}
	if h.cfg.OperatorTenant != "" && h.cfg.OperatorTenant != ep.Tenant {
		tenants = append(tenants, h.cfg.OperatorTenant)
	}
	for i, tenant := range tenants {
		if RateLimited(typ) && !h.allow(tenant, typ) {
			continue
		}
		ok, err := h.publishTo(ctx, tenant, typ, OperationalEventID(typ, subject, at, i), at, raw, ep.ID)
		if err != nil {
			return created, fmt.Errorf("publish %s for %s: %w", typ, subject, err)
		}
		if ok {
			created++
		}
	}
	return created, nil
}

// publishTo publishes one operational event to tenant (not to the
// endpoint exclude); it reports whether it was created (not a duplicate).
func (h *Housekeeper) publishTo(ctx context.Context, tenant, typ, id string, at time.Time, raw []byte, exclude string) (bool, error) {
	body, err := store.EncodeBody(id, typ, tenant, at, raw)
	if err != nil {
		return false, err
	}
	res, err := h.cfg.Store.PublishEvent(ctx, store.PublishParams{
		Event: store.Event{ID: id, Tenant: tenant, Type: typ, OccurredAt: at, Body: body,
			Fingerprint: store.Fingerprint(tenant, typ, raw)},
		Now:               h.cfg.Clock.Now(),
		NewDeliveryID:     func() string { return store.NewID("dlv") },
		ExcludeEndpointID: exclude,
	})
	if err != nil {
		return false, err
	}
	if res.Created {
		h.cfg.Metrics.OperationalEvent(typ)
	}
	return res.Created, nil
}

// allow takes a token of tenant's bucket, or counts the event of type typ
// as suppressed.
func (h *Housekeeper) allow(tenant, typ string) bool {
	h.limitsMu.Lock()
	defer h.limitsMu.Unlock()
	now := h.cfg.Clock.Now()
	l := h.limits[tenant]
	if l == nil {
		l = &tenantLimit{bucket: rate.NewLimiter(rate.Limit(float64(h.cfg.EventsPerMinute)/60), h.cfg.EventBurst), suppressed: map[string]int{}}
		h.limits[tenant] = l
	}
	if l.bucket.AllowN(now, 1) {
		return true
	}
	if len(l.suppressed) == 0 {
		l.since = now
	}
	l.suppressed[typ]++
	h.cfg.Metrics.OperationalEventSuppressed(typ)
	return false
}

// summarise sends endpoint.events_suppressed to each tenant whose events
// were held back, SummaryEvery after the first of them (so one summary
// counts a whole burst, and a tenant gets at most one per SummaryEvery),
// and forgets buckets that are full again with nothing to report.
func (h *Housekeeper) summarise(ctx context.Context) (int, error) {
	now := h.cfg.Clock.Now()
	created := 0
	for tenant, l := range h.limits {
		if len(l.suppressed) == 0 {
			if l.bucket.TokensAt(now) >= float64(h.cfg.EventBurst) {
				delete(h.limits, tenant)
			}
			continue
		}
		if now.Sub(l.since) < h.cfg.SummaryEvery {
			continue // a burst is summarised once, SummaryEvery after it began
		}
		total := 0
		for _, n := range l.suppressed {
			total += n
		}
		at := now.Truncate(time.Microsecond)
		raw, err := json.Marshal(map[string]any{
			"version":    1,
			"suppressed": total,
			"by_type":    l.suppressed,
			"since":      l.since.Truncate(time.Microsecond),
			"until":      at,
			"burst":      h.cfg.EventBurst,
			"per_minute": h.cfg.EventsPerMinute,
		})
		if err != nil {
			return created, err
		}
		h.cfg.Logger.Warn("operational events suppressed by the rate limit", "tenant", tenant, "suppressed", total, "since", l.since)
		sum := sha256.Sum256([]byte(tenant))
		id := "evt_op_events_suppressed_" + hex.EncodeToString(sum[:8]) + "_" + strconv.FormatInt(at.UnixMicro(), 10)
		ok, err := h.publishTo(ctx, tenant, TypeEventsSuppressed, id, at, raw, "")
		if err != nil {
			return created, fmt.Errorf("publish %s for tenant %s: %w", TypeEventsSuppressed, tenant, err)
		}
		if ok {
			created++
		}
		l.suppressed = map[string]int{}
	}
	return created, nil
}

// OperationalEventID is the deterministic id of an operational event: the
// same notice emitted twice (two nodes, a retry after a crash) is one
// event. subject is the endpoint id (the delivery id for
// delivery.dead_lettered); copy is 0 for the endpoint's tenant, 1 for the
// operator tenant.
func OperationalEventID(typ, subject string, at time.Time, copy int) string {
	kind := typ[strings.IndexByte(typ, '.')+1:]
	id := "evt_op_" + kind + "_" + subject + "_" + strconv.FormatInt(at.UnixMicro(), 10)
	if copy > 0 {
		id += "_operator"
	}
	return id
}

func (h *Housekeeper) purge(ctx context.Context, now time.Time) error {
	p := store.PurgeParams{Limit: h.cfg.PurgeBatch}
	if h.cfg.SucceededRetention > 0 {
		p.SucceededBefore = now.Add(-h.cfg.SucceededRetention)
	}
	if h.cfg.DeadRetention > 0 {
		p.DeadBefore = now.Add(-h.cfg.DeadRetention)
	}
	// Events are kept as long as the longest retention, and only once no
	// delivery refers to them.
	if h.cfg.SucceededRetention > 0 && h.cfg.DeadRetention > 0 {
		p.EventsBefore = now.Add(-max(h.cfg.SucceededRetention, h.cfg.DeadRetention))
		// Portal sessions, one per dashboard visit in the usual
		// integration, once they ended as long ago: their list (and its
		// record of who opened what) stays as long as the events.
		p.PortalSessionsBefore = p.EventsBefore
	}
	// Endpoint stats rollups are kept as long as their longest window
	// needs them (store.StatsMinuteHorizon, store.StatsHourHorizon).
	p.MinuteStatsBefore = now.Add(-store.StatsMinuteHorizon)
	p.HourStatsBefore = now.Add(-store.StatsHourHorizon)
	// Batch after batch, each its own short statement per kind (on SQLite
	// each behind waiting publishes, as every write), while they come back
	// full, within the round's time budget. A fixed 20 batches a minute
	// (10,000 rows) fell far behind what a node delivers. A batch is full
	// when one of its kinds filled Limit, so a total under Limit means
	// none did: nothing is left that is old enough.
	start := h.cfg.Clock.Now()
	total, behind := 0, false
	defer func() {
		h.behind = behind
		h.cfg.Metrics.RetentionPurged(total)
		h.cfg.Metrics.RetentionBehind(behind)
		if total > 0 {
			h.cfg.Logger.Info("retention: purged old history", "rows", total, "behind", behind)
		}
	}()
	for {
		n, err := h.cfg.Store.Purge(ctx, p)
		total += n
		if err != nil {
			// Still behind, if it was: the next round tries again.
			behind = h.behind
			return err
		}
		if n < p.Limit {
			return nil
		}
		if h.cfg.Clock.Since(start) >= h.cfg.PurgeBudget {
			behind = true
			return nil
		}
	}
}
