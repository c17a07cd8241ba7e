//go:build unix

package edge

import "syscall"

// defaultMaxConns is Config.MaxConns' default: half the open-file limit
// (the rest for bbolt files, NATS and peers), between 64 and 16384; 1024
// when the limit is unknown.
func defaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 1024
	}
	return int(min(max(lim.Cur/2, 64), 16384))
}
