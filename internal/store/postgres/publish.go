package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-webhooks/herald/internal/store"
)

// ErrIsolation is returned by PublishTx for a transaction that does not run
// at READ COMMITTED.
var ErrIsolation = errors.New("publishing needs a READ COMMITTED transaction")

// PublishTx stores an event and fans it out on tx, a transaction of the
// caller's (the transactional outbox: the event and its deliveries exist if
// and only if tx commits). It runs the statements of Store.PublishEvent —
// the same tenant lock, insert, fan-out, idempotency and answers — and
// queues NOTIFY herald_deliveries, which PostgreSQL sends when tx commits,
// so every node's engine wakes up then; nothing is claimable before.
//
// p is as for PublishEvent: the caller renders Event.Body (store.EncodeBody)
// and Event.Fingerprint (store.Fingerprint). A zero p.Now is time.Now, a nil
// p.NewDeliveryID makes "dlv_" ids with store.NewID.
//
// tx must run at READ COMMITTED (PostgreSQL's default): the fan-out reads
// the tenant's endpoints after taking the tenant lock, and only a fresh
// snapshot sees an endpoint paused or deleted just before. Any other level
// gets ErrIsolation before anything is sent on tx. Until tx ends it holds
// the tenant's advisory lock shared: pausing, deleting or disabling an
// endpoint of that tenant waits for tx (keep such transactions short).
//
// Errors: ErrIsolation, and store.ErrConflict (wrapped) when the id or the
// idempotency key was used with other content: tx can still be used.
// Otherwise the database's error as pgx returns it (errors.As finds a
// *pgconn.PgError), not classified as store.ErrUnavailable since the
// transaction is the caller's: after it tx is aborted and must be rolled
// back.
func PublishTx(ctx context.Context, tx pgx.Tx, p store.PublishParams) (store.PublishResult, error) {
	if p.Now.IsZero() {
		p.Now = time.Now().UTC()
	}
	if p.NewDeliveryID == nil {
		p.NewDeliveryID = func() string { return store.NewID("dlv") }
	}
	op, err := newPublishOp(p)
	if err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	var level string
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_isolation')").Scan(&level); err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	if level != "read committed" {
		return store.PublishResult{}, fmt.Errorf("publish: the transaction runs at %s: %w", level, ErrIsolation)
	}
	b := &pgx.Batch{}
	op.queue(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	res, err := op.finish(ctx, tx)
	if err != nil {
		return store.PublishResult{}, fmt.Errorf("publish: %w", err)
	}
	return res, nil
}

// publishOp is one publish: the statements of its first round trip (queued
// after the BEGIN of PublishEvent, or alone on a caller's transaction) and
// what they found, then finish's second round trip.
type publishOp struct {
	p             store.PublishParams
	body          []byte
	idem, headers *string

	// Set by the statements of queue.
	inserted bool
	targets  []publishTarget
}

type publishTarget struct {
	id    string
	state store.DeliveryState
}

func newPublishOp(p store.PublishParams) (*publishOp, error) {
	op := &publishOp{p: p, body: p.Event.Body}
	if op.body == nil {
		op.body = []byte{}
	}
	if p.Event.IdempotencyKey != "" {
		op.idem = &p.Event.IdempotencyKey
	}
	if len(p.Event.Headers) > 0 { // none is NULL, read back as nil
		h, err := jsonOf(p.Event.Headers)
		if err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
		op.headers = &h
	}
	return op, nil
}

// queue adds the first round trip: the tenant lock, the insert and the
// tenant's endpoints.
func (op *publishOp) queue(b *pgx.Batch) {
	ev, p := op.p.Event, op.p
	// Shared: concurrent publishes do not wait on each other; a delete or a
	// disable of one of the tenant's endpoints waits for them, and they for it.
	b.Queue("SELECT pg_advisory_xact_lock_shared($1::integer, hashtext($2))", tenantLockClass, ev.Tenant)
	b.Queue(`INSERT INTO events (id, tenant, type, occurred_at, body, idempotency_key, fingerprint, created_at, headers)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb) ON CONFLICT DO NOTHING`,
		ev.ID, ev.Tenant, ev.Type, ts(ev.OccurredAt), op.body, op.idem, ev.Fingerprint, ts(p.Now), op.headers).Exec(func(ct pgconn.CommandTag) error {
		op.inserted = ct.RowsAffected() == 1
		return nil
	})
	b.Queue("SELECT id, state, event_types FROM endpoints WHERE tenant = $1", ev.Tenant).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				id, state string
				types     []byte
			)
			if err := rows.Scan(&id, &state, &types); err != nil {
				return err
			}
			var patterns []string
			if err := json.Unmarshal(types, &patterns); err != nil {
				return fmt.Errorf("endpoint %s event_types: %w", id, err)
			}
			if id == p.ExcludeEndpointID || !store.MatchEventType(patterns, ev.Type) {
				continue
			}
			st := store.DeliveryPending
			if store.EndpointState(state) != store.EndpointEnabled {
				st = store.DeliveryPaused
			}
			op.targets = append(op.targets, publishTarget{id, st})
		}
		return rows.Err()
	})
}

// finish runs on the transaction after queue's statements: it answers with
// the existing event when nothing was inserted, otherwise inserts the
// deliveries (and queues NOTIFY for the commit when one is pending).
func (op *publishOp) finish(ctx context.Context, tx pgx.Tx) (store.PublishResult, error) {
	ev, p := op.p.Event, op.p
	if !op.inserted {
		existing, n, err := existingEvent(ctx, tx, ev, p.IDFromClient)
		if err != nil {
			return store.PublishResult{}, err
		}
		return store.PublishResult{Event: existing, Deliveries: n}, nil
	}
	if len(op.targets) > 0 {
		ids := make([]string, len(op.targets))
		endpoints := make([]string, len(op.targets))
		states := make([]string, len(op.targets))
		pending := false
		for i, t := range op.targets {
			ids[i], endpoints[i], states[i] = p.NewDeliveryID(), t.id, string(t.state)
			pending = pending || t.state == store.DeliveryPending
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO deliveries (id, event_id, endpoint_id, tenant, event_type, state, next_attempt_at, created_at, updated_at)
			SELECT u.id, $4, u.endpoint_id, $5, $6, u.state, $7, $7, $7
			FROM unnest($1::text[], $2::text[], $3::text[]) AS u (id, endpoint_id, state)`,
			ids, endpoints, states, ev.ID, ev.Tenant, ev.Type, ts(p.Now))
		if pending {
			// Sent by the server when the transaction commits.
			b.Queue("SELECT pg_notify($1, '')", notifyChannel)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return store.PublishResult{}, err
		}
	}
	// Answer with the event as stored, as GetEvent would: times truncated to
	// microseconds in UTC.
	ev.OccurredAt = ts(ev.OccurredAt)
	ev.CreatedAt = ts(p.Now)
	states := make([]store.DeliveryState, len(op.targets))
	for i, t := range op.targets {
		states[i] = t.state
	}
	return store.PublishResult{Event: ev, Deliveries: len(op.targets), Pending: store.CountPending(states), Created: true}, nil
}
