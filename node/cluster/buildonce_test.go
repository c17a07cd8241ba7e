package cluster_test

import (
	"fmt"
	"testing"

	"github.com/spangledb/spangle/node/cluster"
)

// TestBuilder: every node computes the same builder whatever the order
// of the IDs, and different versions and dbs are built by different
// nodes.
func TestBuilder(t *testing.T) {
	ids := []string{"a", "b", "c"}
	by := map[string]int{}
	for v := range 60 {
		version := fmt.Sprint(v)
		b := cluster.Builder(ids, "d", version)
		if got := cluster.Builder([]string{"c", "a", "b"}, "d", version); got != b {
			t.Fatalf("version %s: builder %q, %q with the IDs in another order", version, b, got)
		}
		by[b]++
	}
	for _, id := range ids {
		if by[id] < 5 {
			t.Errorf("node %s builds %d of 60 versions: %v", id, by[id], by)
		}
	}
	if got := cluster.Builder(nil, "d", "v"); got != "" {
		t.Errorf("no nodes: builder %q", got)
	}
}
