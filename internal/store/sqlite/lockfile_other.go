//go:build !unix

package sqlite

import (
	"errors"
	"os"
)

// haveFlock: lockFile takes no lock here, so a lock proves nothing.
const haveFlock = false

// errLocked: another open file holds the lock.
var errLocked = errors.New("locked")

// lockFile does nothing where flock(2) is not available: there the
// single-process rule (one herald serve per database file) is the
// operator's to keep (docs/operations.md).
func lockFile(*os.File) error { return nil }
