package edge_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
)

// BenchmarkPartFile: a peer copies a partition file (about 4.6 MB,
// uncompressed) over loopback HTTP from a node whose
// peer_copy_bandwidth is set: the rate it gets, and that over the limit
// (of-limit: 1 when the limit is what bounds the copy).
func BenchmarkPartFile(b *testing.B) {
	recs := make([]nodetest.Record, 200_000)
	for i := range recs {
		recs[i] = nodetest.Record{Key: fmt.Appendf(nil, "k%07d", i), Value: fmt.Appendf(nil, "%0100x", i*7919*7919*7919)}
	}
	n, _ := partFileNode(b, recs)
	for _, limit := range []int64{64 << 20, 256 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("limit=%dMiB", limit>>20), func(b *testing.B) {
			ts := startServer(b, n, func(c *edge.Config) {
				c.PeerToken, c.PartFiles, c.PeerCopyBandwidth = "secret", n, limit
			})
			var bytes int64
			for b.Loop() {
				req, _ := http.NewRequest("GET", ts.url+"/d/?partfile=1&version=1", nil)
				req.Header.Set("X-Spangle-Peer-Token", "secret")
				resp, err := ts.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				k, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%d: %v", resp.StatusCode, err)
				}
				bytes += k
			}
			rate := float64(bytes) / b.Elapsed().Seconds()
			b.ReportMetric(rate/(1<<20), "MiB/s")
			b.ReportMetric(rate/float64(limit), "of-limit")
		})
	}
}
