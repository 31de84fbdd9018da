package app

import (
	"testing"

	"github.com/herald-webhooks/herald/internal/api"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine is still running
// after they all ended: whatever starts one must also wait for it.
func TestMain(m *testing.M) {
	api.VerifyAnswerEncoding() // every publish answer also checked against encoding/json's bytes
	goleak.VerifyTestMain(m)
}
