// Package listenaddr tells what a listen address exposes. It is a leaf:
// kvwatch asks it whether the embedded NATS server may run without users,
// the root package whether the debug listener's admin API may answer
// without a token.
//
// # Caveats
//
//   - Only the address is read: a host name other than localhost is not
//     resolved, so it counts as exposed whatever it resolves to.
package listenaddr

import (
	"net"
	"strings"
)

// Loopback reports whether hostport's host is a loopback address or
// localhost. An empty or wildcard host (":6060", "0.0.0.0:6060"), any
// other host, and anything that is not host:port are not.
func Loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
