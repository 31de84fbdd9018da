package delivery

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine is still running
// after they all ended: whatever starts one must also wait for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runInBackground starts e.Run on a context of t's that the returned
// cancel ends; ran is closed once Run has returned (every goroutine it
// started has ended). How a test stops it is its own: some must drain
// channels the engine may still send on.
func runInBackground(t *testing.T, e *Engine) (cancel context.CancelFunc, ran <-chan struct{}) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx)
	}()
	return cancel, done
}
