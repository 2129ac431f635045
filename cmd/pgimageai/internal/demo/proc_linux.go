package demo

import "syscall"

// serverProcAttr puts a server binary in a process group of its own, runs it
// as as (when not nil), and has the kernel stop it (immediate shutdown) should
// the demo die without stopping it.
func serverProcAttr(as *account) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: as.UID, Gid: as.GID, Groups: []uint32{}}
	}
	return a
}
