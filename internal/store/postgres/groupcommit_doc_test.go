package postgres

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestDocumentedPublishTimeout: docs/postgres.md states how long a publish
// waiting on a hung database (an established connection that no longer
// answers) waits before its error answer; that is groupTimeout, which
// bounds a group's transaction and a publish alone. The doc said 5 s while
// the code waits 10 s.
func TestDocumentedPublishTimeout(t *testing.T) {
	b, err := os.ReadFile("../../../docs/postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`publish\s+waiting on an established connection is cut off after (\d+) s`).FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/postgres.md no longer says when a publish waiting on a hung database is cut off: update this test with it")
	}
	if n, _ := strconv.Atoi(string(m[1])); time.Duration(n)*time.Second != groupTimeout {
		t.Errorf("docs/postgres.md says a publish waiting on a hung database is cut off after %s s; groupTimeout is %s", m[1], groupTimeout)
	}
}
