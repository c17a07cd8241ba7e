package edge_test

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
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
				pool := make(chan *rawConn, conns)
				for range conns {
					c, err := dialRaw(l.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					pool <- c
				}
				b.SetParallelism((conns + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					c := <-pool
					defer func() { pool <- c }()
					for pb.Next() {
						if err := c.get(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
