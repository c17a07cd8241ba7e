package edge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/cluster"
)

// Build once's and peer copy's failure paths over real NATS and HTTP
// (issue 35): a builder whose build fails says so, and its peers build
// theirs at once; a copy, at a build or a heal, gives up per partition.

// TestBuildOnceBuilderFails: d/v1's builder cannot read one of its
// source's files (cut in half in its own copy of the source; the others
// read a good one). It says so in its node entry, and the two others,
// waiting for it with build_once_wait 10m, build their own partitions at
// once and serve every key. It fails without the builder's failure in
// its node entry (they would wait the 10 minutes).
func TestBuildOnceBuilderFails(t *testing.T) {
	c := startBuilderApart(t)
	writeOnceVersion(t, c.root)
	writeOnceVersion(t, c.broot)
	cut := filepath.Join(c.broot, "d", "v1", "part-00001")
	st, err := os.Stat(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cut, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		n.Refresh()
	}
	start := time.Now()
	waitActive(t, c.cns, "d", "v1")
	t.Logf("the two peers serve d/v1 %v after it appeared (build_once_wait 10m)", time.Since(start).Round(time.Millisecond))
	if got := outcomes(t, c.nodes); got["failed"] != 1 || got["fallback"] != 2 || got["copied"] != 0 {
		t.Errorf("build once outcomes %v: want 1 failed, 2 fallbacks", got)
	}
	for _, n := range c.peers {
		checkCopyKeys(t, n)
	}
}

// TestPeerCopyPartial: partition 2's file is damaged on both peers
// holding it (replication 3): the wiped node3 copies the five others,
// builds partition 2 alone from the source, and serves every key right.
// It fails without the copy giving up per partition (the copy failed as
// a whole and every partition was built from the source:
// spangle_peer_copy_fallback_partitions_total stayed 0).
func TestPeerCopyPartial(t *testing.T) {
	nodes := startCopyCluster(t, make([]healOpts, 3))
	n3 := nodes[2]
	for _, n := range nodes[:2] {
		damagePart(t, n, 2)
	}
	wipeRestart(t, n3)
	if got := n3.metric(t, "spangle_peer_copy_fallback_partitions_total"); got != 1 {
		t.Errorf("%v partitions built from the source after the copy: want 1", got)
	}
	if got := n3.metric(t, "spangle_peer_copy_mismatches_total"); got < 2 {
		t.Errorf("%v mismatches: want partition 2 refused from both peers", got)
	}
	if got := copyMetric(t, n3, "ok"); got < (healParts-1)*32<<10 {
		t.Errorf("copied %v bytes from peers: want the five good partitions", got)
	}
	if got := n3.metric(t, "spangle_source_read_bytes_total"); got == 0 {
		t.Error("partition 2 was not built from the source")
	}
	checkCopyKeys(t, n3)
}

// TestClusterHealPartial: node3 leaves; node1 heals in one load the
// partitions node3 held that it lacks, each held now by node2 alone,
// whose file of the first of them is damaged: node1 copies the others,
// loads that one from the source, and every partition is back to 2
// replicas. It fails without the heal's copy giving up per partition
// (the load failed as a whole and every partition was loaded from the
// source: spangle_peer_copy_fallback_partitions_total stayed 0).
func TestClusterHealPartial(t *testing.T) {
	nodes := startHealCluster(t, []healOpts{{maxParallel: healParts}, {maxParallel: healParts}, {maxParallel: healParts}})
	sets := sequentialSets(3)
	picks := slices.DeleteFunc(slices.Clone(sets[2]), func(p int) bool { return slices.Contains(sets[0], p) })
	if len(picks) < 2 {
		t.Fatalf("node1 would heal %v: the test needs two partitions in its load", picks)
	}
	n1, n2 := nodes[0], nodes[1]
	damagePart(t, n2, picks[0])
	read := n1.metric(t, "spangle_source_read_bytes_total")
	nodes[2].Stop(t)
	all := []int{0, 1, 2, 3, 4, 5}
	waitHealed(t, nodes[:2], [][]int{all, all})
	if got := n1.metric(t, "spangle_peer_copy_fallback_partitions_total"); got != 1 {
		t.Errorf("node1 loaded %v partitions from the source after its heal's copy: want 1 (partition %d)", got, picks[0])
	}
	if got := n1.metric(t, "spangle_peer_copy_mismatches_total"); got == 0 {
		t.Error("node1 counted no mismatch: node2's damaged file was never tried")
	}
	if got := copyMetric(t, n1, "ok"); got == 0 {
		t.Error("node1 copied nothing to heal")
	}
	if got := n1.metric(t, "spangle_source_read_bytes_total"); got == read {
		t.Errorf("node1 read nothing from the source: partition %d was not loaded from it", picks[0])
	}
	if h := n1.Status().DBs["d"].Versions["v1"].Heal; h == nil || !slices.Equal(h.Healed, picks) || h.Failures != 0 {
		t.Errorf("node1's heal status %+v, want %v healed", h, picks)
	}
}

// TestBuildOnceNextBuilderWaits: d/v1's builder and the next in line are
// live nodes that never build it (their source has no db d), with
// build_once_wait 4s. The first leaves after the three others have
// waited for it half of that: the next builder gets build_once_wait of
// its own, so they fall back (each building its own partitions) no
// sooner than 4s after the first left, not 2s. (The version is never
// served: the two ghosts hold some partitions alone.) It fails without
// the wait starting again for the next builder.
func TestBuildOnceNextBuilderWaits(t *testing.T) {
	const wait = 4 * time.Second
	ids := []string{"node1", "node2", "node3"}
	var g1, g2 string
	for i := 10; g1 == ""; i++ {
		for j := 10; j < 200 && g1 == ""; j++ {
			a, b := fmt.Sprint(i), fmt.Sprint(j)
			if a != b && cluster.Builder(append(slices.Clone(ids), "node"+a, "node"+b), "d", "v1") == "node"+a &&
				cluster.Builder(append(slices.Clone(ids), "node"+b), "d", "v1") == "node"+b {
				g1, g2 = a, b
			}
		}
	}
	root, empty := t.TempDir(), t.TempDir()
	all := startNodesOn(t, func(i int) string {
		if i >= 3 {
			return empty
		}
		return root
	}, []string{"1", "2", "3", g1, g2}, func(int) healOpts {
		return healOpts{replication: 2, disable: true, cluster: func(c *cluster.Config) { c.BuildOnceWait = wait }}
	})
	nodes, first := all[:3], all[3]
	writeOnceVersion(t, root)
	waitForBuilder(t, nodes)
	// Half of build_once_wait spent on the first builder: a timer, the
	// scenario's clock, not a wait for a condition.
	time.Sleep(wait / 2)
	left := time.Now() // before its entry goes
	first.Node.Stop(t)
	edgetest.WaitFor(t, "the three nodes fell back", func() error {
		if got := outcomes(t, nodes); got["fallback"] != 3 {
			return fmt.Errorf("outcomes %v", got)
		}
		return nil
	})
	if got := time.Since(left); got < wait {
		t.Errorf("the nodes fell back %v after the first builder left: they did not wait build_once_wait (%v) for the next", got, wait)
	}
}
