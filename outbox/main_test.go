package outbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine is still running
// after they all ended: whatever starts one must also wait for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
