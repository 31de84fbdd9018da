package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herald-webhooks/herald/webhook"
	"github.com/herald-webhooks/herald/webhook/redisstore"
	"github.com/herald-webhooks/herald/webhook/storetest"
)

// redisEnv names the variable holding a Redis URL for these tests, e.g.
// redis://127.0.0.1:6379/0. Each test uses a key prefix of its own and
// deletes its keys.
const redisEnv = "HERALD_TEST_REDIS_URL"

func openRedis(t *testing.T) *redis.Client {
	t.Helper()
	url := os.Getenv(redisEnv)
	if url == "" {
		t.Skipf("Redis tests skipped: set %s (e.g. redis://127.0.0.1:6379/0) to run them", redisEnv)
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", redisEnv, err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but Redis is not reachable: %v", redisEnv, err)
	}
	return c
}

// uniquePrefix returns a key prefix no other test uses and deletes its keys
// when the test ends.
func uniquePrefix(t *testing.T, c *redis.Client) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "herald-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleaning up %s*: %v", prefix, err)
		}
	})
	return prefix
}

func TestStoreConformance(t *testing.T) {
	openRedis(t) // skip once, not in every subtest
	storetest.TestIdempotencyStore(t, func(t *testing.T) storetest.Harness {
		c := openRedis(t)
		// Advance nil: Redis expires keys on its own clock, so the expiry
		// tests sleep.
		return storetest.Harness{Store: redisstore.New(c, uniquePrefix(t, c))}
	})
}

func TestRecordsLayout(t *testing.T) {
	ctx := context.Background()
	c := openRedis(t)
	prefix := uniquePrefix(t, c)
	s := redisstore.New(c, prefix)
	if st, err := s.Claim(ctx, "evt_1", 90*time.Second); err != nil || st != webhook.ClaimAcquired {
		t.Fatalf("Claim = %v, %v", st, err)
	}
	if v, err := c.Get(ctx, prefix+"evt_1").Result(); err != nil || v != "p" {
		t.Fatalf("in progress record = %q, %v; want \"p\"", v, err)
	}
	if ttl, err := c.TTL(ctx, prefix+"evt_1").Result(); err != nil || ttl <= 80*time.Second || ttl > 90*time.Second {
		t.Fatalf("lease TTL = %v, %v; want about 90s", ttl, err)
	}
	if err := s.Complete(ctx, "evt_1", 72*time.Hour); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, prefix+"evt_1").Result(); err != nil || v != "d" {
		t.Fatalf("completed record = %q, %v; want \"d\"", v, err)
	}
	if ttl, err := c.TTL(ctx, prefix+"evt_1").Result(); err != nil || ttl <= 71*time.Hour {
		t.Fatalf("completed TTL = %v, %v; want about 72h", ttl, err)
	}
	// Two stores with different prefixes do not see each other.
	other := redisstore.New(c, uniquePrefix(t, c))
	if st, err := other.Claim(ctx, "evt_1", time.Minute); err != nil || st != webhook.ClaimAcquired {
		t.Fatalf("other prefix Claim = %v, %v; want acquired", st, err)
	}
}

func TestUnreachable(t *testing.T) {
	// No server listens on port 1; every call must fail, quickly.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	s := redisstore.New(c, "x:")
	ctx := context.Background()
	if _, err := s.Claim(ctx, "evt_1", time.Minute); err == nil {
		t.Error("Claim against an unreachable server: no error")
	}
	if err := s.Complete(ctx, "evt_1", time.Minute); err == nil {
		t.Error("Complete against an unreachable server: no error")
	}
	if err := s.Release(ctx, "evt_1"); err == nil {
		t.Error("Release against an unreachable server: no error")
	}
}
