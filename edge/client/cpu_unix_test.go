//go:build unix

package client_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, user and system:
// unlike a rate, a slice's share of it does not shrink when other
// processes take the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
