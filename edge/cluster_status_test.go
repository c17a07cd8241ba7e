package edge_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// TestClusterStatusMerge: every node's status of a version lists every
// live holder and counts replicas over all of them; a node gone is
// dropped and its partitions counted as under-replicated or missing.
func TestClusterStatusMerge(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes := startCluster(t, clusterOpts{roots: []string{root, root, root}, replication: 2, minReplication: 1})
	waitActive(t, nodes, "d", "v1")

	// Shards 1, 2, 3 hold {0,1,3,4}, {0,2,3}, {1,2,4} (SEQUINS.md §5.3).
	check := func(live []*clusterNode, hist map[int]int, missing, under int) {
		t.Helper()
		for _, n := range live {
			edgetest.WaitFor(t, fmt.Sprintf("%s's status of d/v1 with %d nodes", n.ID(), len(live)), func() error {
				st := n.Status()
				if st.ShardID != n.shard {
					return fmt.Errorf("shard_id %q", st.ShardID)
				}
				vs := st.DBs["d"].Versions["v1"]
				if len(vs.Nodes) != len(live) {
					return fmt.Errorf("%d nodes: %v", len(vs.Nodes), vs.Nodes)
				}
				for _, m := range live {
					nv, ok := vs.Nodes[m.Name()]
					parts, _, _ := held(m, "d", "v1")
					if !ok || nv.Name != m.Name() || nv.State != node.StateActive || !nv.Current ||
						nv.ShardID != m.shard || fmt.Sprint(nv.Partitions) != fmt.Sprint(parts) {
						return fmt.Errorf("entry of %s: %+v (present %v)", m.ID(), nv, ok)
					}
				}
				if vs.NumPartitions != 5 || vs.TargetReplication != 2 || !maps.Equal(vs.ReplicationHistogram, hist) ||
					vs.MissingPartitions != missing || vs.UnderreplicatedPartitions != under || vs.OverreplicatedPartitions != 0 {
					return fmt.Errorf("n=%d target=%d histogram=%v missing=%d under=%d over=%d", vs.NumPartitions,
						vs.TargetReplication, vs.ReplicationHistogram, vs.MissingPartitions,
						vs.UnderreplicatedPartitions, vs.OverreplicatedPartitions)
				}
				return nil
			})
		}
	}
	check(nodes, map[int]int{2: 5}, 0, 0)
	if avg := nodes[0].Status().DBs["d"].Versions["v1"].AverageReplication; avg != 2 {
		t.Errorf("average_replication %v, want 2", avg)
	}

	// Shard 3 leaves: partitions 1, 2 and 4 keep one replica.
	nodes[2].Stop(t)
	check(nodes[:2], map[int]int{2: 2, 1: 3}, 0, 3)

	// Shard 2 leaves: partition 2 has none.
	nodes[1].Stop(t)
	check(nodes[:1], map[int]int{1: 4, 0: 1}, 1, 5)
}
