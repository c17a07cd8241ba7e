package edge_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
)

// benchBatchBackend is benchBackend with batches: every key of every db
// holds benchValue, as a node whose partitions are all local.
type benchBatchBackend struct{ benchBackend }

func (benchBatchBackend) GetMany(_ context.Context, _ string, keys [][]byte, _ node.GetOptions) (string, []node.Result, error) {
	results := make([]node.Result, len(keys))
	for i := range results {
		results[i] = node.Result{Value: benchValue, Found: true, Version: "20260301", Modified: testModified}
	}
	return "20260301", results, nil
}

// BenchmarkBatch measures the peer side of a proxied batch, the handler
// of POST /<db>/_batch?proxy=<version> alone (no connection), at several
// batch sizes; ns/op is per batch, ns/key per key.
func BenchmarkBatch(b *testing.B) {
	cfg := edge.DefaultConfig()
	cfg.Backend, cfg.Batch = benchBatchBackend{}, benchBatchBackend{}
	srv, err := edge.NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			body := []byte{'S', 'B', 'Q', 1, byte(n)}
			for i := range n {
				k := fmt.Sprintf("%016d", i)
				body = append(body, byte(len(k)))
				body = append(body, k...)
			}
			rd := bytes.NewReader(body)
			req, err := http.NewRequest("POST", "/baby-names/_batch?proxy=20260301", rd)
			if err != nil {
				b.Fatal(err)
			}
			w := &nullWriter{h: make(http.Header, 16)}
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				req.Body = readCloser{rd}
				clear(w.h)
				w.n, w.status = 0, 0
				srv.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
