package edge_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

// BenchmarkHotCache measures a GET of a stored key through ServeHTTP on a
// real node (s2-blocks, the default layout; 20,000 records of 100-byte
// values): from the store on every request (miss: the node's answer
// cache off), and from the cache (hit: the same 1,000 keys, all cached).
func BenchmarkHotCache(b *testing.B) {
	const records, hot = 20_000, 1_000
	root := b.TempDir()
	recs := make([]nodetest.Record, records)
	for i := range recs {
		recs[i] = nodetest.Record{Key: fmt.Appendf(nil, "key-%08d", i), Value: benchValue}
	}
	nodetest.WriteVersion(b, root, "bench", "1", 4, recs)
	newNode := func(cacheBytes int64) *node.Node {
		cfg := node.DefaultConfig()
		cfg.Source, cfg.DataDir, cfg.HotCacheBytes = root, b.TempDir(), cacheBytes
		n, err := node.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		nodetest.Start(b, n)
		nodetest.WaitFor(b, 30*time.Second, "version 1", nodetest.True(func() bool {
			_, ok := n.ActiveVersion("bench")
			return ok
		}))
		return n
	}
	var err error
	reqs := make([]*http.Request, hot)
	for i := range reqs {
		// Spread over the keyspace, as hot keys are.
		if reqs[i], err = http.NewRequest("GET", fmt.Sprintf("/bench/key-%08d", i*(records/hot)), nil); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name  string
		bytes int64
	}{{"miss", 0}, {"hit", 16 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			ecfg := edge.DefaultConfig()
			ecfg.Backend, ecfg.Registerer = newNode(bc.bytes), prometheus.NewRegistry()
			srv, err := edge.NewServer(ecfg)
			if err != nil {
				b.Fatal(err)
			}
			w := &nullWriter{h: make(http.Header, 16)}
			for range 2 { // fills the cache when on: a key's second miss is cached
				for _, r := range reqs {
					clear(w.h)
					srv.ServeHTTP(w, r)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clear(w.h)
				w.n = 0
				srv.ServeHTTP(w, reqs[i%hot])
				i++
			}
			if w.status != http.StatusOK || w.n != len(benchValue) {
				b.Fatalf("status %d, wrote %d bytes", w.status, w.n)
			}
		})
	}
}
