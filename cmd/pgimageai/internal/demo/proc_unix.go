//go:build unix && !linux

package demo

import "syscall"

// serverProcAttr puts a server binary in a process group of its own and runs
// it as as (when not nil).
func serverProcAttr(as *account) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: as.UID, Gid: as.GID, Groups: []uint32{}}
	}
	return a
}
