package edge_test

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
)

// BenchmarkAccessLog pairs GET throughput over 50 keep-alive loopback
// connections with the access log off and on (combined, JSON), in one
// run: each iteration sends a round of requests to each server in turn
// (the order alternating), so that the load of a shared machine falls on
// both alike. It reports each log's throughput as a ratio of the
// log-off server's (on/off; the goal is ≥ 0.95).
func BenchmarkAccessLog(b *testing.B) {
	const conns, round = 50, 2000
	type target struct {
		name    string
		pool    chan *rawConn
		elapsed time.Duration
		n       int
	}
	var targets []*target
	for _, format := range []string{"", edge.AccessLogCombined, edge.AccessLogJSON, ""} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{Handler: newBenchServerLog(b, format), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(l) }()
		defer func() {
			hs.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				b.Error(err)
			}
		}()
		t := &target{name: format, pool: make(chan *rawConn, conns)}
		if t.name == "" {
			t.name = "off"
			if len(targets) > 0 {
				t.name = "off2" // a second log-off server: the noise of the pairing
			}
		}
		for range conns {
			c, err := dialRaw(l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			t.pool <- c
		}
		targets = append(targets, t)
	}
	run := func(t *target) {
		var wg sync.WaitGroup
		start := time.Now()
		for range conns {
			wg.Go(func() {
				c := <-t.pool
				defer func() { t.pool <- c }()
				for range round / conns {
					if err := c.get(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		t.elapsed += time.Since(start)
		t.n += round / conns * conns
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range targets {
			if i%2 == 0 {
				run(targets[j])
			} else {
				run(targets[len(targets)-1-j])
			}
		}
		i++
	}
	off := targets[0]
	rate := func(t *target) float64 { return float64(t.n) / t.elapsed.Seconds() }
	b.ReportMetric(rate(off), "off-req/s")
	for _, t := range targets[1:] {
		b.ReportMetric(rate(t)/rate(off), t.name+"/off")
	}
}
