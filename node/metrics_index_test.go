package node

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/node/nodetest"
)

// TestIndexBytesMetric: spangle_version_index_bytes is the active
// version's in-memory index of blocks by first key (blocks'
// IndexBytes): more than zero with s2-blocks, the default; zero with
// none.
func TestIndexBytesMetric(t *testing.T) {
	for _, comp := range []string{"s2-blocks", "none"} {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			nodetest.WriteVersion(t, root, "d", "v1", 2, records(0, 2000))
			n := newTestNode(t, root, func(c *Config) { c.Compression = comp })
			waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
			want := (*n.dbs.Load())["d"].active.Load().data.IndexBytes()
			if got := testutil.ToFloat64(n.metrics.indexBytes.WithLabelValues("d")); got != float64(want) || (want > 0) != (comp == "s2-blocks") {
				t.Errorf("spangle_version_index_bytes = %v, IndexBytes %d", got, want)
			}
		})
	}
}
