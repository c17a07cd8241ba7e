package edge_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
)

// BenchmarkAccessLog pairs GET throughput over 50 keep-alive loopback
// connections with the access log off and on (combined, JSON), in one
// run: each iteration sends a round of requests to each server in turn
// (the order alternating), so that the load of a shared machine falls on
// both alike. It reports each log's throughput as a ratio of the
// log-off server's (on/off; the goal is ≥ 0.95), a second log-off
// server's (off2/off: the pairing's own noise), and the process's CPU
// per request of each (the client's included, the log's writes flushed
// within its round), which a busy machine does not change: the extra
// CPU a line costs is on-cpu minus off-cpu.
func BenchmarkAccessLog(b *testing.B) {
	const conns, round = 50, 2000
	type target struct {
		name    string
		log     *edge.AccessLog
		pool    chan *rawConn
		elapsed time.Duration
		cpu     time.Duration
		n       int
	}
	var targets []*target
	for _, format := range []string{"", edge.AccessLogCombined, edge.AccessLogJSON, ""} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv, alog := newBenchServerWithLog(b, format)
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(l) }()
		defer func() {
			hs.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				b.Error(err)
			}
		}()
		t := &target{name: format, log: alog, pool: make(chan *rawConn, conns)}
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
		cpu0 := processCPU(b)
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
		if t.log != nil {
			if err := t.log.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		t.cpu += processCPU(b) - cpu0
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
	cpu := func(t *target) float64 { return float64(t.cpu.Microseconds()) / float64(t.n) }
	b.ReportMetric(rate(off), "off-req/s")
	b.ReportMetric(cpu(off), "off-cpu-µs/req")
	for _, t := range targets[1:] {
		b.ReportMetric(rate(t)/rate(off), t.name+"/off")
		b.ReportMetric(cpu(t)-cpu(off), t.name+"-extra-cpu-µs/req")
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
