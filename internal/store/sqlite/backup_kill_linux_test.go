//go:build linux && (amd64 || arm64)

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/herald-webhooks/herald/internal/store/sqlite"
)

// killedBackupLimit: the child's file size limit, above the 32 KiB -shm
// file its reading of the source creates and well below the copy's size.
const killedBackupLimit = 256 << 10

// TestBackupKilledMidWriteLeavesNoFinalFile: a backup killed while it
// writes (as by kill -9: no deferred cleanup runs) left the partial copy
// under the final name, which a later restore refused with an unclear
// error. The backup runs in a child process whose file size limit is
// below the copy's size and whose SIGXFSZ is set back to its default
// action, so the kernel kills it at the write that crosses the limit:
// the same instant every run, no timing involved. The final name must not
// exist; the partial file must be the one named for the operator,
// owner-only; restore must call it incomplete; and the next backup to the
// same file removes it and completes.
func TestBackupKilledMidWriteLeavesNoFinalFile(t *testing.T) {
	if src := os.Getenv("HERALD_TEST_KILLED_BACKUP_SRC"); src != "" {
		killedBackupChild(src, os.Getenv("HERALD_TEST_KILLED_BACKUP_TO"))
		return
	}
	src := newBackupSource(t)
	to := filepath.Join(t.TempDir(), "backup.db")
	child := exec.Command(os.Args[0], "-test.run=^TestBackupKilledMidWriteLeavesNoFinalFile$")
	child.Env = append(os.Environ(), "HERALD_TEST_KILLED_BACKUP_SRC="+src, "HERALD_TEST_KILLED_BACKUP_TO="+to)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child backup: %v; want it killed by SIGXFSZ\n%s", err, out)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGXFSZ {
		t.Fatalf("child backup ended with %v; want it killed by SIGXFSZ\n%s", exit, out)
	}

	if info, err := os.Stat(to); err == nil {
		t.Fatalf("the killed backup left %s (%d bytes) under the final name", to, info.Size())
	}
	partial := sqlite.PartialBackupName(to)
	info, err := os.Stat(partial)
	if err != nil {
		t.Fatalf("the killed backup's partial file: %v", err)
	}
	if info.Size() == 0 || info.Size() > killedBackupLimit || info.Mode().Perm() != 0o600 {
		t.Fatalf("partial file %s: %d bytes, mode %v; want a part of the copy, 0600", partial, info.Size(), info.Mode().Perm())
	}
	target := filepath.Join(t.TempDir(), "herald.db")
	if err := sqlite.Restore(t.Context(), partial, target, testBox(t)); err == nil || !strings.Contains(err.Error(), partial+" is not a complete Herald backup") {
		t.Fatalf("restore of the partial file: %v; want it called incomplete", err)
	}

	stale, err := sqlite.Backup(t.Context(), src, to)
	if err != nil || !stale {
		t.Fatalf("backup after the killed one: removed stale %v, %v; want it to remove the partial file and complete", stale, err)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Fatalf("%s left after a complete backup: %v", partial, err)
	}
	if info, err := os.Stat(to); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("backup %s: %v; want mode 0600", to, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(to), "*")); len(left) != 1 {
		t.Fatalf("files beside the backup: %v; want the backup alone", left)
	}
	if err := sqlite.Restore(t.Context(), to, target, testBox(t)); err != nil {
		t.Fatalf("restore of the complete backup: %v", err)
	}
}

// killedBackupChild runs a backup that the kernel kills when the copy
// crosses killedBackupLimit bytes (dieAtFileSize).
func killedBackupChild(src, to string) {
	dieAtFileSize(killedBackupLimit)
	_, err := sqlite.Backup(context.Background(), src, to)
	fmt.Println("the backup returned instead of being killed:", err)
	os.Exit(3)
}

// dieAtFileSize makes the kernel kill this process (a child of a test) at
// the write that makes a file longer than limit bytes, as kill -9 would:
// no deferred cleanup runs. The Go runtime catches SIGXFSZ and ignores it
// (the write fails with EFBIG and cleanup code runs), so its default
// action, ending the process, is set back with rt_sigaction; the process
// is made non-dumpable so the kill writes no core file. It exits with 2
// when it cannot.
func dieAtFileSize(limit uint64) {
	lim := syscall.Rlimit{Cur: limit, Max: limit}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(2)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		fmt.Println("prctl:", e)
		os.Exit(2)
	}
	// The kernel's struct sigaction on linux/amd64 and linux/arm64; a
	// zero handler is SIG_DFL.
	var sa struct {
		handler, flags, restorer uintptr
		mask                     uint64
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGXFSZ), uintptr(unsafe.Pointer(&sa)), 0, unsafe.Sizeof(sa.mask), 0, 0); e != 0 {
		fmt.Println("rt_sigaction:", e)
		os.Exit(2)
	}
}
