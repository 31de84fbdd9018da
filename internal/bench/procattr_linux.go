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

// setGroup puts the subprocess in a process group of its own, so that
// signalGroup reaches what it started (a --peer command run by sh -c).
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
