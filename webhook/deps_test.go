package webhook_test

import (
	"os"
	"strings"
	"testing"
)

// TestRootModuleRequiresNoRedisClient: a receiver that requires Herald's
// module for package webhook gets the root module's requirements in its
// module graph (and their checksums in its go.sum), so a client used only
// by an optional store lives in that store's own module: the Redis
// replay store is the module github.com/herald-webhooks/herald/webhook/redisstore.
func TestRootModuleRequiresNoRedisClient(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mod), "github.com/redis/") {
		t.Error("the root go.mod requires a Redis client: keep it in webhook/redisstore/go.mod")
	}
	if _, err := os.Stat("redisstore/go.mod"); err != nil {
		t.Errorf("webhook/redisstore is not its own module: %v", err)
	}
}
