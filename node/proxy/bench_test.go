package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkGet compares a proxied lookup through a loopback peer with a
// plain GET of the same URL on the same kind of transport, in the same
// run: the difference is the proxy's own cost. One lookup at a time: no
// batching.
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 64 << 10} {
		val := strings.Repeat("v", size)
		peer := startPeer(b, value("v1", val))
		req := Request{DB: "db", Version: "v1", Key: []byte("1881/boy"), Peers: []string{peer.addr}}

		b.Run(fmt.Sprintf("direct/size=%d", size), func(b *testing.B) {
			tr := newTransport()
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			path, query := requestTarget(req)
			url := "http://" + peer.addr + path + "?" + query
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadAll(resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
		b.Run(fmt.Sprintf("proxied/size=%d", size), func(b *testing.B) {
			p := newProxy(b, func(c *Config) { c.Timeout, c.StageTimeout = time.Minute, time.Minute })
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := p.Get(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetParallel: many goroutines (parallelism × GOMAXPROCS),
// distinct keys (no coalescing, no cache hits), direct GETs against
// proxied lookups, which batch when they queue; both in the same run.
func BenchmarkGetParallel(b *testing.B) {
	kv := &kvPeer{v: "v1", fill: strings.Repeat("v", 100)}
	peer := startPeer(b, kv.serve)
	for _, par := range []int{1, 8, 25} {
		b.Run(fmt.Sprintf("direct/par=%d", par), func(b *testing.B) {
			tr := newTransport()
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			path, query := requestTarget(Request{DB: "db", Version: "v1", Key: []byte("k")})
			url := "http://" + peer.addr + path + "?" + query
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
		b.Run(fmt.Sprintf("proxied/par=%d", par), func(b *testing.B) {
			p := newProxy(b, func(c *Config) { c.Timeout, c.StageTimeout = time.Minute, time.Minute })
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					req := Request{DB: "db", Version: "v1", Key: fmt.Appendf(nil, "k%p-%d", pb, i), Peers: []string{peer.addr}}
					if _, err := p.Get(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
