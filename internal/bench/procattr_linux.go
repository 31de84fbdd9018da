package bench

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill a subprocess when the bench process
// dies, even by SIGKILL, so no Herald or receiver outlives a bench run.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
