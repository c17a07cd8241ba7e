package natstest

import (
	"net"
	"sync"
	"testing"
)

var (
	portsMu sync.Mutex
	ports   = map[int]bool{} // handed out by FreePort in this process
)

// FreePort returns a loopback TCP port that was free a moment ago and
// that FreePort has not returned before in this test binary. A test
// picks its servers' ports before they listen: without the second rule
// the kernel may give a port just closed twice, and two servers started
// a moment apart (a hub's leafnode port, a region's client port) meet
// on it.
func FreePort(t testing.TB) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		portsMu.Lock()
		given := ports[port]
		ports[port] = true
		portsMu.Unlock()
		if !given {
			return port
		}
	}
}
