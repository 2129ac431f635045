//go:build !unix

package demo

import "syscall"

// serverProcAttr: outside Unix the server runs with the demo's own process
// attributes (there is no root to step down from).
func serverProcAttr(*account) *syscall.SysProcAttr { return nil }
