//go:build !linux

package main

import "syscall"

// childSysProcAttr leaves children in this program's process group.
func childSysProcAttr() *syscall.SysProcAttr { return nil }

// syncDisks does nothing here.
func syncDisks() {}
