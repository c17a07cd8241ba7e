package main

import "syscall"

// childSysProcAttr puts a child in its own process group and kills it if
// the thread that started it (so, in practice, this program) dies.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// syncDisks writes every dirty page back (sync(2)).
func syncDisks() { syscall.Sync() }
