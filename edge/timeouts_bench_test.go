package edge_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
)

// BenchmarkServerTimeouts measures what edge's server settings cost over
// loopback, at 1 and 50 connections: the edge handler in a net/http
// server with ReadHeaderTimeout only (plain, as the e2e baseline), with
// edge's read, write and idle timeouts (each request then moves several
// deadlines), and edge's own Serve (those timeouts and the connection
// limit).
func BenchmarkServerTimeouts(b *testing.B) {
	for _, conns := range []int{1, 50} {
		for _, name := range []string{"plain", "timeouts", "edgeserve"} {
			b.Run(fmt.Sprintf("%s/conns=%d", name, conns), func(b *testing.B) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				srv := newBenchServer(b)
				switch name {
				case "plain":
					hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
					go hs.Serve(l)
					defer hs.Close()
				case "timeouts":
					c := edge.DefaultConfig()
					hs := &http.Server{Handler: srv, ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout}
					go hs.Serve(l)
					defer hs.Close()
				case "edgeserve":
					go srv.Serve(l)
					defer srv.Shutdown(b.Context())
				}
				loadLoopback(b, l.Addr().String(), conns)
			})
		}
	}
}
