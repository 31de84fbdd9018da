//go:build unix

package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// haveFlock: lockFile takes a real lock here, so a file that only a
// locked process writes is known to be a dead process's when the lock is
// free.
const haveFlock = true

// errLocked: another open file holds the lock.
var errLocked = errors.New("locked")

// lockFile takes an exclusive flock(2) on f without waiting; errLocked
// when another process (or another open of the file) holds it.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
