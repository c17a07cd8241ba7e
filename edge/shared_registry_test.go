package edge_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestSharedRegistry creates two front doors, each with HTTPS, on one
// Prometheus registry: the second shares the collectors of the first
// (internal/promreg), as the door's other metrics do. NewTLS failed on
// it while tls.go registered without the helper.
func TestSharedRegistry(t *testing.T) {
	n, _, _ := hotNode(t, 10, 1<<20)
	reg := prometheus.NewRegistry()
	ca := nodetest.NewCA(t)
	for i := range 2 {
		tc := tlsFiles(t, ca, t.TempDir(), int64(i+1))
		tc.Registerer = reg
		if _, err := edge.NewTLS(tc); err != nil {
			t.Fatalf("TLS %d: %v", i, err)
		}
		startServer(t, n, func(c *edge.Config) { c.Registerer = reg })
	}
	if got := nodetest.Metric(t, reg, "spangle_http_inflight_requests"); got != 0 {
		t.Fatalf("spangle_http_inflight_requests = %v, want 0", got)
	}
}
