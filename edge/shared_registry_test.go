package edge_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestSharedRegistry creates two front doors, each with a hot cache and
// HTTPS, on one Prometheus registry: the second shares the collectors of
// the first (internal/promreg), as the door's other metrics do. NewServer
// and NewTLS failed on it while hot_cache.go and tls.go registered
// without the helper.
func TestSharedRegistry(t *testing.T) {
	n, _ := hotNode(t, 10)
	reg := prometheus.NewRegistry()
	ca := nodetest.NewCA(t)
	for i := range 2 {
		tc := tlsFiles(t, ca, t.TempDir(), int64(i+1))
		tc.Registerer = reg
		if _, err := edge.NewTLS(tc); err != nil {
			t.Fatalf("TLS %d: %v", i, err)
		}
		startServer(t, n, withVersions(n), func(c *edge.Config) { c.Registerer = reg })
	}
	if got := nodetest.Metric(t, reg, "spangle_hot_cache_max_bytes"); got <= 0 {
		t.Fatalf("spangle_hot_cache_max_bytes = %v, want the bound", got)
	}
}
