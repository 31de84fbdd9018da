//go:build !linux

package bench

import "os/exec"

// setProcAttr: off Linux, subprocesses are stopped by the runner's cleanup
// (and receivers exit when their stdin closes).
func setProcAttr(cmd *exec.Cmd) {}
