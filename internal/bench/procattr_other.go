//go:build !linux

package bench

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr: off Linux, subprocesses are stopped by the runner's cleanup
// (and receivers exit when their stdin closes).
func setProcAttr(cmd *exec.Cmd) {}

// setGroup: off Linux, no process group; signalGroup reaches pid only.
func setGroup(cmd *exec.Cmd) {}

func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}
