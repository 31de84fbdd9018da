// Package redisstore implements [webhook.IdempotencyStore] on Redis (or a
// server speaking its protocol) with github.com/redis/go-redis/v9, so that
// several receiver processes sharing one Redis process each event once.
//
// A key's record is one Redis string at Prefix + key: "p" while in progress,
// "d" when completed, with the lease or TTL as its Redis expiry.
//
// # Atomicity
//
// Claim is one command, SET <key> p NX PX <lease> (EX when the lease is
// whole seconds). Redis executes commands one at a time, and NX makes the
// SET happen only if the key does not exist, expired keys counting as
// absent; so of any number of concurrent claims exactly one gets OK and the
// others nil. Only the losers send a second command, GET, to tell in
// progress ("p") from completed ("d"); if the key vanished in between, the
// answer is ClaimInProgress and the sender retries. Complete is SET <key> d
// PX <ttl> and Release is DEL <key>, each atomic. A key lives in one hash
// slot, so this holds in Redis Cluster too.
//
// Durability is Redis's: with asynchronous replication a claim or completion
// acknowledged by a primary that fails before replicating it is lost, and
// the event may then be processed twice (still at least once); without
// persistence a restart forgets every record. Use the SQL store when that
// matters.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herald-webhooks/herald/webhook"
)

// Values of a record.
const (
	valueInProgress = "p"
	valueCompleted  = "d"
)

var (
	errEmptyKey    = errors.New("redisstore: key is empty")
	errBadDuration = errors.New("redisstore: lease/ttl must be positive")
)

// Store is a [webhook.IdempotencyStore] on Redis. It is safe for concurrent
// use.
type Store struct {
	client redis.Cmdable
	prefix string
}

// New returns a Store that keeps its records under prefix (e.g.
// "herald:idem:") in client, which may be a *redis.Client,
// *redis.ClusterClient, *redis.Ring or any other redis.Cmdable. Expiry is
// Redis's own, so millisecond leases work and no cleanup is needed.
func New(client redis.Cmdable, prefix string) *Store {
	return &Store{client: client, prefix: prefix}
}

func checkArgs(key string, d time.Duration) error {
	if key == "" {
		return errEmptyKey
	}
	if d < time.Millisecond {
		// 0 would mean "no expiry" to go-redis; below 1 ms it truncates.
		return fmt.Errorf("%w (at least 1 ms): got %v", errBadDuration, d)
	}
	return nil
}

// Claim implements [webhook.IdempotencyStore.Claim] with SET NX, then GET
// on a lost claim (see the package doc).
func (s *Store) Claim(ctx context.Context, key string, lease time.Duration) (webhook.ClaimStatus, error) {
	if err := checkArgs(key, lease); err != nil {
		return 0, err
	}
	k := s.prefix + key
	won, err := s.client.SetNX(ctx, k, valueInProgress, lease).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstore: claim: %w", err)
	}
	if won {
		return webhook.ClaimAcquired, nil
	}
	v, err := s.client.Get(ctx, k).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return webhook.ClaimInProgress, nil // released or expired just now
	case err != nil:
		return 0, fmt.Errorf("redisstore: claim: reading state: %w", err)
	case v == valueCompleted:
		return webhook.ClaimCompleted, nil
	default:
		return webhook.ClaimInProgress, nil
	}
}

// Complete implements [webhook.IdempotencyStore.Complete] with
// SET <key> d PX <ttl>.
func (s *Store) Complete(ctx context.Context, key string, ttl time.Duration) error {
	if err := checkArgs(key, ttl); err != nil {
		return err
	}
	if err := s.client.Set(ctx, s.prefix+key, valueCompleted, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	return nil
}

// Release implements [webhook.IdempotencyStore.Release] with DEL <key>.
func (s *Store) Release(ctx context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	if err := s.client.Del(ctx, s.prefix+key).Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}

var _ webhook.IdempotencyStore = (*Store)(nil)
