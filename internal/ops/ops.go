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
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/herald-webhooks/herald/internal/metrics"
	"github.com/herald-webhooks/herald/internal/store"
)

// Operational event types.
const (
	TypeEndpointDisabled = store.NoticeEndpointDisabled
	TypeEndpointEnabled  = store.NoticeEndpointEnabled
	TypeEndpointCreated  = store.NoticeEndpointCreated
	TypeEndpointUpdated  = store.NoticeEndpointUpdated
	TypeEndpointDeleted  = store.NoticeEndpointDeleted
	TypeDeadLetterSpike  = "endpoint.dead_letter_spike"
)

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
	Now        func() time.Time
	Logger     *slog.Logger
	Metrics    *metrics.Metrics
}

// The defaults `herald serve` gives the settings whose zero value turns
// them off (docs/operations.md).
const (
	DefaultSpikeThreshold     = 10
	DefaultSucceededRetention = 7 * 24 * time.Hour
	DefaultDeadRetention      = 30 * 24 * time.Hour
)

// Housekeeper runs the rounds.
type Housekeeper struct {
	cfg       Config
	lastPurge time.Time
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
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Now().UTC() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	return &Housekeeper{cfg: cfg}
}

// Run does a round every Interval until ctx ends.
func (h *Housekeeper) Run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		if err := h.Round(ctx); err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("housekeeping round failed; will retry", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round emits pending notices, checks for dead-letter spikes, and purges
// old history (at most once a minute).
func (h *Housekeeper) Round(ctx context.Context) error {
	published := 0
	n, err := h.emitNotices(ctx)
	published += n
	if err != nil {
		return err
	}
	n, err = h.checkSpikes(ctx)
	published += n
	if published > 0 {
		h.cfg.Notify()
	}
	if err != nil {
		return err
	}
	now := h.cfg.Now()
	if now.Sub(h.lastPurge) >= time.Minute {
		h.lastPurge = now
		return h.purge(ctx, now)
	}
	return nil
}

func (h *Housekeeper) emitNotices(ctx context.Context) (int, error) {
	notices, err := h.cfg.Store.PendingNotices(ctx, 100)
	if err != nil {
		return 0, err
	}
	published := 0
	for _, n := range notices {
		ep := n.Endpoint
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
		h.cfg.Logger.Warn("operational event", "type", n.Type, "endpoint", ep.ID, "tenant", ep.Tenant, "reason", ep.StateReason,
			"last_status_code", n.LastStatusCode, "last_error", n.LastError)
		k, err := h.publish(ctx, n.Type, ep, n.At, data)
		published += k
		if err != nil {
			return published, err
		}
		if err := h.cfg.Store.ClearNotice(ctx, n.ID); err != nil {
			return published, err
		}
	}
	return published, nil
}

func (h *Housekeeper) checkSpikes(ctx context.Context) (int, error) {
	if h.cfg.SpikeThreshold <= 0 {
		return 0, nil
	}
	now := h.cfg.Now()
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

// publish sends one operational event to the endpoint's tenant and, when
// configured, the operator tenant. It returns how many events were
// created.
func (h *Housekeeper) publish(ctx context.Context, typ string, ep store.Endpoint, at time.Time, data map[string]any) (int, error) {
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
		id := OperationalEventID(typ, ep.ID, at, i)
		body, err := store.EncodeBody(id, typ, tenant, at, raw)
		if err != nil {
			return created, err
		}
		res, err := h.cfg.Store.PublishEvent(ctx, store.PublishParams{
			Event: store.Event{ID: id, Tenant: tenant, Type: typ, OccurredAt: at, Body: body,
				Fingerprint: store.Fingerprint(tenant, typ, raw)},
			Now:               h.cfg.Now(),
			NewDeliveryID:     func() string { return store.NewID("dlv") },
			ExcludeEndpointID: ep.ID,
		})
		if err != nil {
			return created, fmt.Errorf("publish %s for endpoint %s: %w", typ, ep.ID, err)
		}
		if res.Created {
			created++
			h.cfg.Metrics.OperationalEvent(typ)
		}
	}
	return created, nil
}

// OperationalEventID is the deterministic id of an operational event: the
// same notice emitted twice (two nodes, a retry after a crash) is one
// event. copy is 0 for the endpoint's tenant, 1 for the operator tenant.
func OperationalEventID(typ, endpointID string, at time.Time, copy int) string {
	kind := typ[len(store.OperationalPrefix):]
	id := "evt_op_" + kind + "_" + endpointID + "_" + strconv.FormatInt(at.UnixMicro(), 10)
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
	}
	total := 0
	for range 20 { // at most 20 small batches per round
		n, err := h.cfg.Store.Purge(ctx, p)
		if err != nil {
			return err
		}
		total += n
		if n == 0 {
			break
		}
	}
	if total > 0 {
		h.cfg.Logger.Info("retention: purged old history", "rows", total)
	}
	return nil
}
