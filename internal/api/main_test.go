package api

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine is still running
// after they all ended: whatever starts one must also wait for it.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		VerifyAnswerEncoding() // every publish answer also checked against encoding/json's bytes (not in benchmarks: it doubles their work)
	}
	goleak.VerifyTestMain(m)
}
